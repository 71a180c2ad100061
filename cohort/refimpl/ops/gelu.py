"""gelu (erf) and gelu_tanh (the tanh approximation): elementwise activations.

gelu(x)      = 0.5*x*(1 + erf(x*f32(1/sqrt(2))))                  (torch's approximate="none")
gelu_tanh(x) = 0.5*x*(1 + tanh(f32(sqrt(2/pi))*(x + 0.044715*x*x*x)))   (approximate="tanh",
               GPT-2's and GPT-J's "gelu_new")

gelu is gelu_residual without the residual: the same operations in the same
order, so gelu(x) + r is gelu_residual(x, r) bit for bit. Its erf form is
torch's float32 one, and shares its limit: for x < -3, 1 + erf(x/sqrt(2))
cancels and the error is absolute (<= 1e-7, measured on [-12, 0]) while
|gelu| < 0.005; the row-relative oracle bound holds for rows with any larger
value (tests/test_ops.py: test_gelu_tail_error_is_absolute). Two forms each, as
gelu_residual: "stream" is one thread per element; "private" is one block per
row, each thread holding its striped tile of the row in a private array (CUB's
items[ITEMS_PER_THREAD], item k of thread t is column t + k*B), with the
full/partial item split of rmsnorm_private. The private forms carry their own
launch. The stream forms have no constants: one build serves every shape."""
import math

import numpy as np

from ... import Buffer, Const, block_id, block_size, erf, f32, global_id, kernel, private, tanh, thread_id
from .base import Launch, Operator, seeded_normal

SQRT1_2 = 0.7071067811865476
SQRT_2_OVER_PI = 0.7978845608028654
KAPPA = 0.044715


@kernel(block=32)
def gelu(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = x[i]
    y[i] = 0.5 * v * (1.0 + erf(v * SQRT1_2))


@kernel(block=32)
def gelu_tanh(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = x[i]
    y[i] = 0.5 * v * (1.0 + tanh(SQRT_2_OVER_PI * (v + KAPPA * (v * v * v))))


@kernel(block=32)
def gelu_private(x: Buffer[f32], y: Buffer[f32], cols: Const[int]):
    base = block_id() * cols
    t = thread_id()
    # full items in every thread, one guarded partial item loaded whole (see rmsnorm_private)
    full = cols // block_size()
    tail = t + full * block_size()
    tx = private(f32, cols // block_size() + 1)
    for k in range(full):
        tx[k] = x[base + t + k * block_size()]
    tx[full] = x[base + tail] if tail < cols else 0.0
    for k in range(full):
        v = tx[k]
        tx[k] = 0.5 * v * (1.0 + erf(v * SQRT1_2))
    if tail < cols:
        v = tx[full]
        tx[full] = 0.5 * v * (1.0 + erf(v * SQRT1_2))
    for k in range(full):
        y[base + t + k * block_size()] = tx[k]
    if tail < cols:
        y[base + tail] = tx[full]


@kernel(block=32)
def gelu_tanh_private(x: Buffer[f32], y: Buffer[f32], cols: Const[int]):
    base = block_id() * cols
    t = thread_id()
    full = cols // block_size()
    tail = t + full * block_size()
    tx = private(f32, cols // block_size() + 1)
    for k in range(full):
        tx[k] = x[base + t + k * block_size()]
    tx[full] = x[base + tail] if tail < cols else 0.0
    for k in range(full):
        v = tx[k]
        tx[k] = 0.5 * v * (1.0 + tanh(SQRT_2_OVER_PI * (v + KAPPA * (v * v * v))))
    if tail < cols:
        v = tx[full]
        tx[full] = 0.5 * v * (1.0 + tanh(SQRT_2_OVER_PI * (v + KAPPA * (v * v * v))))
    for k in range(full):
        y[base + t + k * block_size()] = tx[k]
    if tail < cols:
        y[base + tail] = tx[full]


_erf64 = np.frompyfunc(math.erf, 1, 1)


def erf_form_oracle(inp):
    x = inp["x"].astype(np.float64)
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)).astype(np.float64))


def tanh_form_oracle(inp):
    x = inp["x"].astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + KAPPA * x ** 3)))


def _operator(name, k, k_private, oracle, definition, **facts):
    return Operator(
        name=name, kernel=k, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": (s[0], s[1]), "y": (s[0], s[1])},
        output="y",
        launch=lambda s: Launch(s[0] * s[1], {}, {}),
        make_inputs=lambda s, seed: {"x": seeded_normal(seed, name, "x", (s[0], s[1]), 2.0)},
        oracle=oracle,
        seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0,
        definition=definition,
        forms=(("private", k_private,
                lambda s: Launch(s[0] * k_private.block, {"cols": s[1]}, {})),),
        **facts,
    )


LLM_SIZES = ((1, 16384), (512, 16384))     # an MLP's hidden activations (4 x 4096)
GELU = _operator("gelu", gelu, gelu_private, erf_form_oracle, "y = 0.5*x*(1+erf(x/sqrt(2)))",
                 tags={"llm"}, llm_sizes=LLM_SIZES)
GELU_TANH = _operator("gelu_tanh", gelu_tanh, gelu_tanh_private, tanh_form_oracle,
                      "y = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))", tags={"llm"}, llm_sizes=LLM_SIZES)

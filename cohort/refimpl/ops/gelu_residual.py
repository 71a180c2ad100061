"""gelu_residual: y = gelu(x) + r with the exact erf form 0.5*x*(1+erf(x/sqrt(2))).
x/sqrt(2) is computed as x * f32(1/sqrt(2)).

Two forms, the same float32 operations per element: "stream" is one thread per
element; "private" is one block per row, each thread holding its striped tile
of the row in private arrays, CUB style (items[ITEMS_PER_THREAD]: item k of
thread t is column t + k*B) - load x and r, compute in place, store - with the
full/partial item split of rmsnorm_private. The forms launch differently; the
private form carries its own launch."""
import math

import numpy as np

from ... import Buffer, Const, block_id, block_size, erf, f32, global_id, kernel, private, thread_id
from .base import Launch, Operator, seeded_normal

SQRT1_2 = 0.7071067811865476


@kernel(block=32)
def gelu_residual(x: Buffer[f32], r: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = x[i]
    y[i] = 0.5 * v * (1.0 + erf(v * SQRT1_2)) + r[i]


@kernel(block=32)
def gelu_residual_private(x: Buffer[f32], r: Buffer[f32], y: Buffer[f32], cols: Const[int]):
    base = block_id() * cols
    t = thread_id()
    # full items in every thread, one guarded partial item loaded whole (see rmsnorm_private)
    full = cols // block_size()
    tail = t + full * block_size()
    tx = private(f32, cols // block_size() + 1)
    tr = private(f32, cols // block_size() + 1)
    for k in range(full):
        tx[k] = x[base + t + k * block_size()]
        tr[k] = r[base + t + k * block_size()]
    tx[full] = x[base + tail] if tail < cols else 0.0
    tr[full] = r[base + tail] if tail < cols else 0.0
    for k in range(full):
        v = tx[k]
        tx[k] = 0.5 * v * (1.0 + erf(v * SQRT1_2)) + tr[k]
    if tail < cols:
        v = tx[full]
        tx[full] = 0.5 * v * (1.0 + erf(v * SQRT1_2)) + tr[full]
    for k in range(full):
        y[base + t + k * block_size()] = tx[k]
    if tail < cols:
        y[base + tail] = tx[full]


_erf64 = np.frompyfunc(math.erf, 1, 1)


def oracle(inp):
    x = inp["x"].astype(np.float64)
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)).astype(np.float64)) + inp["r"].astype(np.float64)


OP = Operator(
    name="gelu_residual", kernel=gelu_residual, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "r": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * s[1], {}, {}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "gelu_residual", "x", (s[0], s[1]), 2.0),
                                 "r": seeded_normal(seed, "gelu_residual", "r", (s[0], s[1]))},
    oracle=oracle,
    seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0,
    tags={"row"},
    definition="y = gelu(x) + r, gelu(x) = 0.5*x*(1+erf(x/sqrt(2)))",
    forms=(("private", gelu_residual_private,
            lambda s: Launch(s[0] * gelu_residual_private.block, {"cols": s[1]}, {})),),
)

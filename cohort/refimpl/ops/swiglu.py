"""swiglu: y = a * sigmoid(a) * b.

Two forms, the same float32 operations per element: "stream" is one thread per
element; "private" is one block per row, each thread holding its striped tile
of the row in private arrays, CUB style (items[ITEMS_PER_THREAD]: item k of
thread t is column t + k*B) - load a and b, compute in place, store - with the
full/partial item split of rmsnorm_private. The forms launch differently; the
private form carries its own launch."""
import numpy as np

from ... import Buffer, Const, block_id, block_size, f32, global_id, kernel, private, sigmoid, thread_id
from .base import Launch, Operator, seeded_normal


@kernel(block=32)
def swiglu(a: Buffer[f32], b: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = a[i]
    y[i] = v * sigmoid(v) * b[i]


@kernel(block=32)
def swiglu_private(a: Buffer[f32], b: Buffer[f32], y: Buffer[f32], cols: Const[int]):
    base = block_id() * cols
    t = thread_id()
    # full items in every thread, one guarded partial item loaded whole (see rmsnorm_private)
    full = cols // block_size()
    tail = t + full * block_size()
    ta = private(f32, cols // block_size() + 1)
    tb = private(f32, cols // block_size() + 1)
    for k in range(full):
        ta[k] = a[base + t + k * block_size()]
        tb[k] = b[base + t + k * block_size()]
    ta[full] = a[base + tail] if tail < cols else 0.0
    tb[full] = b[base + tail] if tail < cols else 0.0
    for k in range(full):
        v = ta[k]
        ta[k] = v * sigmoid(v) * tb[k]
    if tail < cols:
        v = ta[full]
        ta[full] = v * sigmoid(v) * tb[full]
    for k in range(full):
        y[base + t + k * block_size()] = ta[k]
    if tail < cols:
        y[base + tail] = ta[full]


def oracle(inp):
    a = inp["a"].astype(np.float64)
    return a / (1.0 + np.exp(-a)) * inp["b"].astype(np.float64)


OP = Operator(
    name="swiglu", kernel=swiglu, dims=("R", "C"),
    buffer_shapes=lambda s: {"a": (s[0], s[1]), "b": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * s[1], {}, {}),
    make_inputs=lambda s, seed: {"a": seeded_normal(seed, "swiglu", "a", (s[0], s[1]), 3.0),
                                 "b": seeded_normal(seed, "swiglu", "b", (s[0], s[1]))},
    oracle=oracle,
    seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0,
    tags={"row", "llm"}, llm_sizes=((1, 11008), (1, 14336), (512, 14336)),
    definition="y = a * sigmoid(a) * b",
    forms=(("private", swiglu_private,
            lambda s: Launch(s[0] * swiglu_private.block, {"cols": s[1]}, {})),),
)

"""rmsnorm: y = x * (1/sqrt(mean(x^2) + 1e-6)) * w, one block per row.

Two forms, the same float32 operations in the same order: "stream" reads x
from memory in each of its two passes; "private" holds the thread's slice of
the row in a private array (CUB's striped items[ITEMS_PER_THREAD]: item k of
thread t is column t + k*B), loaded once, in the first pass's loop, and read
again by the second."""
import numpy as np

from ... import Buffer, Const, block_id, block_size, block_sum, f32, kernel, private, sqrt, thread_id
from .base import Launch, Operator, seeded_normal

EPS = 1e-6


@kernel(block=32)
def rmsnorm(x: Buffer[f32], w: Buffer[f32], y: Buffer[f32], cols: Const[int], eps: f32):
    row = block_id()
    t = thread_id()
    acc = 0.0
    for j in range(t, cols, block_size()):
        v = x[row * cols + j]
        acc += v * v
    ss = block_sum(acc)
    r = 1.0 / sqrt(ss / f32(cols) + eps)
    for j in range(t, cols, block_size()):
        y[row * cols + j] = x[row * cols + j] * r * w[j]


@kernel(block=32)
def rmsnorm_private(x: Buffer[f32], w: Buffer[f32], y: Buffer[f32], cols: Const[int], eps: f32):
    row = block_id()
    t = thread_id()
    # Items 0..full-1 are columns in every thread; item `full` only where
    # tail < cols: unguarded full items and one guarded partial item, as CUB
    # splits a full tile from a partial one. The partial item is stored whole
    # (0 where it is no column): a store under a mask followed by a full
    # vector load of the same place cannot be forwarded and stalls (measured:
    # docs/README.md, 'Measurements behind the code'). Hence cols//B + 1 items: ceil(cols/B), plus
    # one unused item when B divides cols. Every pass guards the partial item.
    # The load loop is the first pass's loop: the items cannot all stay in
    # registers across block_sum (24 per thread at 768 columns, for every
    # packet of the block), so each is stored once; reading it back in a loop
    # of its own cost one more load per element (private/stream 1.15 -> 1.05).
    full = cols // block_size()
    tail = t + full * block_size()
    items = private(f32, cols // block_size() + 1)
    acc = 0.0
    for k in range(full):
        v = x[row * cols + t + k * block_size()]
        items[k] = v
        acc += v * v
    items[full] = x[row * cols + tail] if tail < cols else 0.0
    if tail < cols:
        v = items[full]
        acc += v * v
    ss = block_sum(acc)
    r = 1.0 / sqrt(ss / f32(cols) + eps)
    for k in range(full):
        j = t + k * block_size()
        y[row * cols + j] = items[k] * r * w[j]
    if tail < cols:
        y[row * cols + tail] = items[full] * r * w[tail]


def oracle(inp):
    x = inp["x"].astype(np.float64)
    w = inp["w"].astype(np.float64)
    return x * (1.0 / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)) * w


OP = Operator(
    name="rmsnorm", kernel=rmsnorm, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "w": (s[1],), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * rmsnorm.block, {"cols": s[1]}, {"eps": EPS}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "rmsnorm", "x", (s[0], s[1])),
                                 "w": seeded_normal(seed, "rmsnorm", "w", (s[1],))},
    oracle=oracle,
    seed_sizes=None, rel_tol=1e-5,
    tags={"row", "llm"}, llm_sizes=((1, 4096), (32, 4096), (512, 4096)),
    definition="y = x * (1/sqrt(mean(x^2) + 1e-6)) * w",
    forms=(("private", rmsnorm_private),),
)

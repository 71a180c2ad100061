"""layernorm: biased variance, eps 1e-5, y = (x-mean)/sqrt(var+eps)*w + b; one block per row.

Two passes over the row (mean, then the centred sum of squares), the
numerically sound way a GPU programmer writes it. Two forms, the same float32
operations in the same order: "stream" reads x from memory in each of its
three passes; "private" holds the thread's slice of the row in a private
array (CUB's striped items[ITEMS_PER_THREAD]: item k of thread t is column
t + k*B), loaded once and read by every pass."""
import numpy as np

from ... import Buffer, Const, block_id, block_size, block_sum, f32, kernel, private, sqrt, thread_id
from .base import Launch, Operator, seeded_normal

EPS = 1e-5


@kernel(block=32)
def layernorm(x: Buffer[f32], w: Buffer[f32], b: Buffer[f32], y: Buffer[f32], cols: Const[int], eps: f32):
    base = block_id() * cols
    t = thread_id()
    s = 0.0
    for j in range(t, cols, block_size()):
        s += x[base + j]
    total = block_sum(s)
    mean = total / f32(cols)
    d2 = 0.0
    for j in range(t, cols, block_size()):
        d = x[base + j] - mean
        d2 += d * d
    ssd = block_sum(d2)
    rstd = 1.0 / sqrt(ssd / f32(cols) + eps)
    for j in range(t, cols, block_size()):
        y[base + j] = (x[base + j] - mean) * rstd * w[j] + b[j]


@kernel(block=32)
def layernorm_private(x: Buffer[f32], w: Buffer[f32], b: Buffer[f32], y: Buffer[f32], cols: Const[int],
                      eps: f32):
    base = block_id() * cols
    t = thread_id()
    # full items in every thread, one guarded partial item (see rmsnorm_private)
    full = cols // block_size()
    tail = t + full * block_size()
    items = private(f32, cols // block_size() + 1)
    s = 0.0
    for k in range(full):
        v = x[base + t + k * block_size()]
        items[k] = v
        s += v
    items[full] = x[base + tail] if tail < cols else 0.0
    if tail < cols:
        s += items[full]
    total = block_sum(s)
    mean = total / f32(cols)
    d2 = 0.0
    for k in range(full):
        d = items[k] - mean
        d2 += d * d
    if tail < cols:
        d = items[full] - mean
        d2 += d * d
    ssd = block_sum(d2)
    rstd = 1.0 / sqrt(ssd / f32(cols) + eps)
    for k in range(full):
        j = t + k * block_size()
        y[base + j] = (items[k] - mean) * rstd * w[j] + b[j]
    if tail < cols:
        y[base + tail] = (items[full] - mean) * rstd * w[tail] + b[tail]


def oracle(inp):
    x = inp["x"].astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * inp["w"].astype(np.float64) + inp["b"].astype(np.float64)


OP = Operator(
    name="layernorm", kernel=layernorm, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "w": (s[1],), "b": (s[1],), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * layernorm.block, {"cols": s[1]}, {"eps": EPS}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "layernorm", "x", (s[0], s[1]), 2.0),
                                 "w": seeded_normal(seed, "layernorm", "w", (s[1],)),
                                 "b": seeded_normal(seed, "layernorm", "b", (s[1],))},
    oracle=oracle,
    seed_sizes=None, rel_tol=1e-5,
    tags={"row", "llm"}, llm_sizes=((1, 4096), (32, 4096), (512, 4096)),
    definition="biased variance, eps 1e-5, y = (x-mean)/sqrt(var+eps)*w + b",
    forms=(("private", layernorm_private),),
)

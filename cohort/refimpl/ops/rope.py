"""rope: rotate pairs (2k, 2k+1) of each row by (cos, sin)[row, k]; one thread per pair.

Thread i owns pair i of the flattened tensor, so x/y are read and written at
2i and 2i+1 (a stride-2 access) and cos/sin at i (contiguous).

Two forms, the same float32 operations: "stream" computes from the loaded
values; "private" stages the thread's tile (its pair of x, its cos and sin)
through private arrays - load, rotate the pair in place, store - as a CUB
kernel stages items[ITEMS_PER_THREAD]."""
import numpy as np

from ... import Buffer, f32, global_id, kernel, private
from .base import Launch, Operator, ShapeError, seeded_normal, seeded_uniform


@kernel(block=32)
def rope(x: Buffer[f32], cos: Buffer[f32], sin: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    x0 = x[2 * i]
    x1 = x[2 * i + 1]
    c = cos[i]
    s = sin[i]
    y[2 * i] = x0 * c - x1 * s
    y[2 * i + 1] = x0 * s + x1 * c


@kernel(block=32)
def rope_private(x: Buffer[f32], cos: Buffer[f32], sin: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    pair = private(f32, 2)
    tc = private(f32, 1)
    ts = private(f32, 1)
    pair[0] = x[2 * i]
    pair[1] = x[2 * i + 1]
    tc[0] = cos[i]
    ts[0] = sin[i]
    x0 = pair[0]
    x1 = pair[1]
    c = tc[0]
    s = ts[0]
    pair[0] = x0 * c - x1 * s
    pair[1] = x0 * s + x1 * c
    y[2 * i] = pair[0]
    y[2 * i + 1] = pair[1]


def check(s):
    if s[1] % 2:
        raise ShapeError(f"rope needs an even C (pairs of columns), got C={s[1]}")


def make_inputs(s, seed):
    angle = seeded_uniform(seed, "rope", "angle", (s[0], s[1] // 2), -3.0, 3.0).astype(np.float64)
    return {"x": seeded_normal(seed, "rope", "x", (s[0], s[1])),
            "cos": np.cos(angle).astype(np.float32), "sin": np.sin(angle).astype(np.float32)}


def oracle(inp):
    x = inp["x"].astype(np.float64)
    c, s = inp["cos"].astype(np.float64), inp["sin"].astype(np.float64)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    y = np.empty_like(x)
    y[:, 0::2] = x0 * c - x1 * s
    y[:, 1::2] = x0 * s + x1 * c
    return y


OP = Operator(
    name="rope", kernel=rope, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "cos": (s[0], s[1] // 2), "sin": (s[0], s[1] // 2),
                             "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * (s[1] // 2), {}, {}),
    make_inputs=make_inputs, oracle=oracle, check=check,
    seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0,
    definition="pairs (2k, 2k+1): y0 = x0*cos - x1*sin, y1 = x0*sin + x1*cos; C even",
    forms=(("private", rope_private),),
)

"""rope: rotate pairs (2k, 2k+1) of each row by (cos, sin)[row, k].

Two forms, the same float32 operations per pair. "stream" is one thread per
pair: thread i owns pair i of the flattened tensor, so x/y are read and
written at 2i and 2i+1 (a stride-2 access) and cos/sin at i (contiguous).
"private" is one block per row with the row's pairs striped, CUB style: item
k of thread t is pair p = t + k*B (elements 2p, 2p+1; cos/sin at p). Each
thread holds its items in four private arrays - xe[k] = x[2p], xo[k] =
x[2p+1], and cos and sin - loaded once, rotated in place, stored; so with
private=cohort a packet reaches xe[k] (or any of them) as one contiguous
vector, with private=thread as a gather at stride ITEMS. Full items and one
guarded partial item, as in rmsnorm_private. The private form carries its
own launch."""
import numpy as np

from ... import Buffer, Const, block_id, block_size, f32, global_id, kernel, private, thread_id
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
def rope_private(x: Buffer[f32], cos: Buffer[f32], sin: Buffer[f32], y: Buffer[f32], cols: Const[int]):
    row = block_id()
    t = thread_id()
    half = cols // 2                  # pairs per row
    xb = row * cols
    cb = row * half
    # full items in every thread, one guarded partial item loaded whole (see rmsnorm_private)
    full = half // block_size()
    tail = t + full * block_size()
    xe = private(f32, cols // 2 // block_size() + 1)
    xo = private(f32, cols // 2 // block_size() + 1)
    tc = private(f32, cols // 2 // block_size() + 1)
    ts = private(f32, cols // 2 // block_size() + 1)
    for k in range(full):
        p = t + k * block_size()
        xe[k] = x[xb + 2 * p]
        xo[k] = x[xb + 2 * p + 1]
        tc[k] = cos[cb + p]
        ts[k] = sin[cb + p]
    xe[full] = x[xb + 2 * tail] if tail < half else 0.0
    xo[full] = x[xb + 2 * tail + 1] if tail < half else 0.0
    tc[full] = cos[cb + tail] if tail < half else 0.0
    ts[full] = sin[cb + tail] if tail < half else 0.0
    for k in range(full):
        x0 = xe[k]
        x1 = xo[k]
        c = tc[k]
        s = ts[k]
        xe[k] = x0 * c - x1 * s
        xo[k] = x0 * s + x1 * c
    if tail < half:
        x0 = xe[full]
        x1 = xo[full]
        c = tc[full]
        s = ts[full]
        xe[full] = x0 * c - x1 * s
        xo[full] = x0 * s + x1 * c
    for k in range(full):
        p = t + k * block_size()
        y[xb + 2 * p] = xe[k]
        y[xb + 2 * p + 1] = xo[k]
    if tail < half:
        y[xb + 2 * tail] = xe[full]
        y[xb + 2 * tail + 1] = xo[full]


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
    tags={"row"},
    definition="pairs (2k, 2k+1): y0 = x0*cos - x1*sin, y1 = x0*sin + x1*cos; C even",
    forms=(("private", rope_private,
            lambda s: Launch(s[0] * rope_private.block, {"cols": s[1]}, {})),),
)

"""Backward operators of the row and elementwise operators (issue 26, autograd).

Each is a kernel of its own, written like the forward ones (loops, block_sum,
one block per row or one thread per element or column) and defined, as they
are, by the interpreter: the float32 operations below, in this order, are the
gradient cohort.torch returns (DESIGN §4). A float64 oracle bounds each one's
own error.

Reductions over rows (a weight's gradient sums over every row) cannot be a
block collective - rows are blocks - so they are column kernels: one thread
per column, walking the rows in order, summed in chunks of CHUNK = 128 rows
(each chunk in order, then the chunks in order). The per-row
statistics they need (rmsnorm's 1/rms, layernorm's mean and 1/std) come from
a statistics kernel that repeats the forward's own operations, so they are
the forward's values bit for bit; the dx kernels read the same statistics.

    rmsnorm:   rmsnorm_rstd(x) -> r [R];  rmsnorm_bwd_x(x, w, dy, r) -> dx;
               rmsnorm_bwd_w(x, dy, r) -> dw [C]
    layernorm: layernorm_stats(x) -> (mean, rstd) [R, 2];  layernorm_bwd_x(x, w, dy, st) -> dx;
               layernorm_bwd_wb(x, dy, st) -> (dw, db) [2, C]
    masked_softmax_bwd(y, dy, mask) -> dx   (y: the forward's output)
    swiglu_bwd(a, b, dy) -> (da, db) [2, R, C]
    gelu_bwd(x, dy), gelu_tanh_bwd(x, dy) -> dx

rope needs no kernel of its own: a rotation's adjoint is the rotation by the
opposite angle, rope(dy, cos, -sin) (x*(-s) = -(x*s) and a - (-b) = a + b
exactly), so its backward is the forward kernel.
"""
import math

import numpy as np

from ... import (
    Buffer,
    Const,
    block_id,
    block_size,
    block_sum,
    erf,
    exp,
    f32,
    global_id,
    i32,
    kernel,
    sigmoid,
    sqrt,
    tanh,
    thread_id,
)
from .base import Launch, Operator, seeded_bits, seeded_normal
from .gelu import KAPPA, SQRT1_2, SQRT_2_OVER_PI

INV_SQRT_2PI = 0.3989422804014327      # 1/sqrt(2*pi): the normal density's factor (torch's kAlpha)
# Column kernels sum their rows in chunks of CHUNK, then the chunks: a sequential float32 sum
# of R terms errs like R (rmsnorm dw at 32768x256: 5.6e-6 of max |dw| against float64; torch
# 1.4e-7), two levels like CHUNK + R/CHUNK.
CHUNK = 128


# ---------------------------------------------------------------- rmsnorm

@kernel(block=32)
def rmsnorm_rstd(x: Buffer[f32], r: Buffer[f32], cols: Const[int], eps: f32):
    """r[row] = 1/sqrt(mean(x^2) + eps): the forward's operations, in its order."""
    row = block_id()
    t = thread_id()
    acc = 0.0
    for j in range(t, cols, block_size()):
        v = x[row * cols + j]
        acc += v * v
    ss = block_sum(acc)
    if t == 0:
        r[row] = 1.0 / sqrt(ss / f32(cols) + eps)


@kernel(block=32)
def rmsnorm_bwd_x(x: Buffer[f32], w: Buffer[f32], dy: Buffer[f32], r: Buffer[f32], dx: Buffer[f32],
                  cols: Const[int]):
    """dx = g*r - x*(r^3 * sum(g*x)/C), g = dy*w."""
    base = block_id() * cols
    t = thread_id()
    rr = r[block_id()]
    acc = 0.0
    for j in range(t, cols, block_size()):
        acc += (dy[base + j] * w[j]) * x[base + j]
    s = block_sum(acc)
    c = (rr * rr * rr) * (s / f32(cols))
    for j in range(t, cols, block_size()):
        dx[base + j] = (dy[base + j] * w[j]) * rr - x[base + j] * c


@kernel(block=32)
def rmsnorm_bwd_w(x: Buffer[f32], dy: Buffer[f32], r: Buffer[f32], dw: Buffer[f32], R: i32, C: i32):
    """dw[j] = sum over rows of dy*(x*r): a thread per column (launch C threads), rows in
    order in chunks of CHUNK (each chunk's sum, then the sum of the chunks)."""
    j = global_id()
    acc = 0.0
    for r0 in range(0, R, CHUNK):
        part = 0.0
        for row in range(r0, min(r0 + CHUNK, R)):
            part += dy[row * C + j] * (x[row * C + j] * r[row])
        acc += part
    dw[j] = acc


# ---------------------------------------------------------------- layernorm

@kernel(block=32)
def layernorm_stats(x: Buffer[f32], st: Buffer[f32], cols: Const[int], eps: f32):
    """st[row] = (mean, 1/sqrt(var + eps)): the forward's operations, in its order."""
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
    if t == 0:
        st[2 * block_id()] = mean
        st[2 * block_id() + 1] = 1.0 / sqrt(ssd / f32(cols) + eps)


@kernel(block=32)
def layernorm_bwd_x(x: Buffer[f32], w: Buffer[f32], dy: Buffer[f32], st: Buffer[f32], dx: Buffer[f32],
                    cols: Const[int]):
    """dx = ((g - mean(g)) - xhat*mean(g*xhat)) * rstd, g = dy*w, xhat = (x - mean)*rstd."""
    base = block_id() * cols
    t = thread_id()
    mean = st[2 * block_id()]
    rstd = st[2 * block_id() + 1]
    a1 = 0.0
    a2 = 0.0
    for j in range(t, cols, block_size()):
        g = dy[base + j] * w[j]
        a1 += g
        a2 += g * ((x[base + j] - mean) * rstd)
    s1 = block_sum(a1)
    s2 = block_sum(a2)
    m1 = s1 / f32(cols)
    m2 = s2 / f32(cols)
    for j in range(t, cols, block_size()):
        dx[base + j] = ((dy[base + j] * w[j] - m1) - ((x[base + j] - mean) * rstd) * m2) * rstd


@kernel(block=32)
def layernorm_bwd_wb(x: Buffer[f32], dy: Buffer[f32], st: Buffer[f32], dwb: Buffer[f32], R: i32, C: i32):
    """dwb[0, j] = sum over rows of dy*xhat, dwb[1, j] = sum of dy; a thread per column, rows in
    chunks of CHUNK as rmsnorm_bwd_w."""
    j = global_id()
    aw = 0.0
    ab = 0.0
    for r0 in range(0, R, CHUNK):
        pw = 0.0
        pb = 0.0
        for row in range(r0, min(r0 + CHUNK, R)):
            g = dy[row * C + j]
            pw += g * ((x[row * C + j] - st[2 * row]) * st[2 * row + 1])
            pb += g
        aw += pw
        ab += pb
    dwb[j] = aw
    dwb[C + j] = ab


# ---------------------------------------------------------------- masked softmax

@kernel(block=32)
def masked_softmax_bwd(y: Buffer[f32], dy: Buffer[f32], mask: Buffer[bool], dx: Buffer[f32], cols: Const[int]):
    """dx = y*(dy - sum(y*dy)) where mask, 0 elsewhere (y: the forward's output)."""
    base = block_id() * cols
    t = thread_id()
    acc = 0.0
    for j in range(t, cols, block_size()):
        if mask[base + j]:
            acc += y[base + j] * dy[base + j]
    s = block_sum(acc)
    for j in range(t, cols, block_size()):
        dx[base + j] = y[base + j] * (dy[base + j] - s) if mask[base + j] else 0.0


# ---------------------------------------------------------------- elementwise

@kernel(block=32)
def swiglu_bwd(a: Buffer[f32], b: Buffer[f32], dy: Buffer[f32], g: Buffer[f32], N: i32):
    """g[i] = da = dy*b * s*(1 + a*(1 - s)), g[N + i] = db = dy*(a*s), s = sigmoid(a)."""
    i = global_id()
    v = a[i]
    s = sigmoid(v)
    d = dy[i]
    g[i] = (d * b[i]) * (s * (1.0 + v * (1.0 - s)))
    g[N + i] = d * (v * s)


@kernel(block=32)
def gelu_bwd(x: Buffer[f32], dy: Buffer[f32], dx: Buffer[f32]):
    """dx = dy*(cdf + x*pdf): cdf = 0.5*(1 + erf(x/sqrt(2))), pdf = exp(-0.5*x*x)/sqrt(2*pi) (torch's form)."""
    i = global_id()
    v = x[i]
    cdf = 0.5 * (1.0 + erf(v * SQRT1_2))
    pdf = exp(-0.5 * (v * v)) * INV_SQRT_2PI
    dx[i] = dy[i] * (cdf + v * pdf)


@kernel(block=32)
def gelu_tanh_bwd(x: Buffer[f32], dy: Buffer[f32], dx: Buffer[f32]):
    """t = tanh(k*(x + 0.044715*x^3)) (the forward's inner, same operations);
    dx = dy*(0.5*(1 + t) + (0.5*x)*(1 - t*t)*(k*(1 + 3*0.044715*x*x)))."""
    i = global_id()
    v = x[i]
    t = tanh(SQRT_2_OVER_PI * (v + KAPPA * (v * v * v)))
    left = 0.5 * (1.0 + t)
    right = ((0.5 * v) * (1.0 - t * t)) * (SQRT_2_OVER_PI * (1.0 + (3.0 * KAPPA) * (v * v)))
    dx[i] = dy[i] * (left + right)


# ---------------------------------------------------------------- oracles (float64)

def _f64(*a):
    return tuple(np.asarray(v, np.float64) for v in a)


def rmsnorm_rstd_oracle(inp, eps=1e-6):
    (x,) = _f64(inp["x"])
    return 1.0 / np.sqrt(np.mean(x * x, axis=1) + eps)


def rmsnorm_bwd_x_oracle(inp):
    x, w, dy, r = _f64(inp["x"], inp["w"], inp["dy"], inp["r"])
    r = r[:, None]
    g = dy * w
    return g * r - x * r ** 3 * np.mean(g * x, axis=1, keepdims=True)


def rmsnorm_bwd_w_oracle(inp):
    x, dy, r = _f64(inp["x"], inp["dy"], inp["r"])
    return (dy * x * r[:, None]).sum(axis=0)


def layernorm_stats_oracle(inp, eps=1e-5):
    (x,) = _f64(inp["x"])
    mu = x.mean(axis=1)
    var = ((x - mu[:, None]) ** 2).mean(axis=1)
    return np.stack([mu, 1.0 / np.sqrt(var + eps)], axis=1)


def layernorm_bwd_x_oracle(inp):
    x, w, dy, st = _f64(inp["x"], inp["w"], inp["dy"], inp["st"])
    mean, rstd = st[:, :1], st[:, 1:]
    xhat = (x - mean) * rstd
    g = dy * w
    return (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True)) * rstd


def layernorm_bwd_wb_oracle(inp):
    x, dy, st = _f64(inp["x"], inp["dy"], inp["st"])
    xhat = (x - st[:, :1]) * st[:, 1:]
    return np.stack([(dy * xhat).sum(axis=0), dy.sum(axis=0)])


def masked_softmax_bwd_oracle(inp):
    y, dy = _f64(inp["y"], inp["dy"])
    m = inp["mask"]
    s = np.where(m, y * dy, 0.0).sum(axis=1, keepdims=True)
    return np.where(m, y * (dy - s), 0.0)


def swiglu_bwd_oracle(inp):
    a, b, dy = _f64(inp["a"], inp["b"], inp["dy"])
    s = 1.0 / (1.0 + np.exp(-a))
    return np.stack([dy * b * s * (1.0 + a * (1.0 - s)), dy * a * s])


_erf64 = np.frompyfunc(math.erf, 1, 1)


def gelu_bwd_oracle(inp):
    x, dy = _f64(inp["x"], inp["dy"])
    cdf = 0.5 * (1.0 + _erf64(x / math.sqrt(2.0)).astype(np.float64))
    return dy * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


def gelu_tanh_bwd_oracle(inp):
    x, dy = _f64(inp["x"], inp["dy"])
    k = math.sqrt(2.0 / math.pi)
    t = np.tanh(k * (x + KAPPA * x ** 3))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * KAPPA * x * x))


# ---------------------------------------------------------------- seeded inputs

def _rows_inputs(name, s, seed, *names, scale=1.0):
    return {n: seeded_normal(seed, name, n, (s[0], s[1]), scale) for n in names}


def _rmsnorm_inputs(s, seed, with_w=True):
    inp = {"x": seeded_normal(seed, "rmsnorm_bwd", "x", (s[0], s[1])),
           "dy": seeded_normal(seed, "rmsnorm_bwd", "dy", (s[0], s[1]))}
    if with_w:
        inp["w"] = seeded_normal(seed, "rmsnorm_bwd", "w", (s[1],))
    inp["r"] = rmsnorm_rstd_oracle(inp).astype(np.float32)
    return inp


def _layernorm_inputs(s, seed, with_w=True):
    inp = {"x": seeded_normal(seed, "layernorm_bwd", "x", (s[0], s[1]), 2.0),
           "dy": seeded_normal(seed, "layernorm_bwd", "dy", (s[0], s[1]))}
    if with_w:
        inp["w"] = seeded_normal(seed, "layernorm_bwd", "w", (s[1],))
    inp["st"] = layernorm_stats_oracle(inp).astype(np.float32)
    return inp


def _softmax_inputs(s, seed):
    from .masked_softmax import FULLY_MASKED_ROW, UNMASKED_ROW
    from .masked_softmax import oracle as softmax
    mask = seeded_bits(seed, "masked_softmax_bwd", "mask", (s[0], s[1]))
    if s[0] > FULLY_MASKED_ROW:
        mask[FULLY_MASKED_ROW] = False
    if s[0] > UNMASKED_ROW:
        mask[UNMASKED_ROW] = True
    x = seeded_normal(seed, "masked_softmax_bwd", "x", (s[0], s[1]), 3.0)
    return {"y": softmax({"x": x, "mask": mask}).astype(np.float32),
            "dy": seeded_normal(seed, "masked_softmax_bwd", "dy", (s[0], s[1])), "mask": mask}


# ---------------------------------------------------------------- operators

def _row(s):
    return (s[0], s[1])


def _ew(s):
    return s[0] * s[1]


BACKWARD = [
    Operator(
        name="rmsnorm_rstd", kernel=rmsnorm_rstd, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "r": (s[0],)}, output="r",
        launch=lambda s: Launch(s[0] * rmsnorm_rstd.block, {"cols": s[1]}, {"eps": 1e-6}),
        make_inputs=lambda s, seed: {"x": _rmsnorm_inputs(s, seed)["x"]},
        oracle=rmsnorm_rstd_oracle, seed_sizes=None, rel_tol=1e-5,
        definition="r = 1/sqrt(mean(x^2) + 1e-6) per row (rmsnorm's forward statistic)"),
    Operator(
        name="rmsnorm_bwd_x", kernel=rmsnorm_bwd_x, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "w": (s[1],), "dy": _row(s), "r": (s[0],), "dx": _row(s)},
        output="dx",
        launch=lambda s: Launch(s[0] * rmsnorm_bwd_x.block, {"cols": s[1]}, {}),
        make_inputs=lambda s, seed: _rmsnorm_inputs(s, seed), oracle=rmsnorm_bwd_x_oracle,
        seed_sizes=None, rel_tol=1e-5,
        definition="dx = g*r - x*(r^3*sum(g*x)/C), g = dy*w"),
    Operator(
        name="rmsnorm_bwd_w", kernel=rmsnorm_bwd_w, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "dy": _row(s), "r": (s[0],), "dw": (s[1],)}, output="dw",
        launch=lambda s: Launch(s[1], {}, {"R": s[0], "C": s[1]}),
        make_inputs=lambda s, seed: _rmsnorm_inputs(s, seed, with_w=False), oracle=rmsnorm_bwd_w_oracle,
        seed_sizes=None, rel_tol=1e-5,
        definition="dw = sum over rows of dy*(x*r) (in order, in chunks of 128 rows)"),
    Operator(
        name="layernorm_stats", kernel=layernorm_stats, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "st": (s[0], 2)}, output="st",
        launch=lambda s: Launch(s[0] * layernorm_stats.block, {"cols": s[1]}, {"eps": 1e-5}),
        make_inputs=lambda s, seed: {"x": _layernorm_inputs(s, seed)["x"]},
        oracle=layernorm_stats_oracle, seed_sizes=None, rel_tol=1e-5,
        definition="(mean, 1/sqrt(var + 1e-5)) per row (layernorm's forward statistics)"),
    Operator(
        name="layernorm_bwd_x", kernel=layernorm_bwd_x, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "w": (s[1],), "dy": _row(s), "st": (s[0], 2), "dx": _row(s)},
        output="dx",
        launch=lambda s: Launch(s[0] * layernorm_bwd_x.block, {"cols": s[1]}, {}),
        make_inputs=lambda s, seed: _layernorm_inputs(s, seed), oracle=layernorm_bwd_x_oracle,
        seed_sizes=None, rel_tol=1e-5,
        definition="dx = ((g - mean(g)) - xhat*mean(g*xhat))*rstd, g = dy*w"),
    Operator(
        name="layernorm_bwd_wb", kernel=layernorm_bwd_wb, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "dy": _row(s), "st": (s[0], 2), "dwb": (2, s[1])}, output="dwb",
        launch=lambda s: Launch(s[1], {}, {"R": s[0], "C": s[1]}),
        make_inputs=lambda s, seed: _layernorm_inputs(s, seed, with_w=False), oracle=layernorm_bwd_wb_oracle,
        seed_sizes=None, rel_tol=1e-5,
        definition="dw = sum over rows of dy*xhat, db = sum over rows of dy (in order, in chunks of 128 rows)"),
    Operator(
        name="masked_softmax_bwd", kernel=masked_softmax_bwd, dims=("R", "C"),
        buffer_shapes=lambda s: {"y": _row(s), "dy": _row(s), "mask": _row(s), "dx": _row(s)}, output="dx",
        launch=lambda s: Launch(s[0] * masked_softmax_bwd.block, {"cols": s[1]}, {}),
        make_inputs=_softmax_inputs, oracle=masked_softmax_bwd_oracle, seed_sizes=None, rel_tol=1e-5,
        definition="dx = y*(dy - sum(y*dy)) where mask, else 0"),
    Operator(
        name="swiglu_bwd", kernel=swiglu_bwd, dims=("R", "C"),
        buffer_shapes=lambda s: {"a": _row(s), "b": _row(s), "dy": _row(s), "g": (2, s[0], s[1])}, output="g",
        launch=lambda s: Launch(_ew(s), {}, {"N": _ew(s)}),
        make_inputs=lambda s, seed: {**_rows_inputs("swiglu_bwd", s, seed, "a", scale=3.0),
                                     **_rows_inputs("swiglu_bwd", s, seed, "b", "dy")},
        oracle=swiglu_bwd_oracle, seed_sizes=None, rel_tol=1e-5,
        definition="da = dy*b*s*(1 + a*(1 - s)), db = dy*a*s, s = sigmoid(a)"),
    Operator(
        name="gelu_bwd", kernel=gelu_bwd, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "dy": _row(s), "dx": _row(s)}, output="dx",
        launch=lambda s: Launch(_ew(s), {}, {}),
        make_inputs=lambda s, seed: {**_rows_inputs("gelu_bwd", s, seed, "x", scale=2.0),
                                     **_rows_inputs("gelu_bwd", s, seed, "dy")},
        oracle=gelu_bwd_oracle, seed_sizes=None, rel_tol=1e-5,
        definition="dx = dy*(cdf(x) + x*pdf(x))"),
    Operator(
        name="gelu_tanh_bwd", kernel=gelu_tanh_bwd, dims=("R", "C"),
        buffer_shapes=lambda s: {"x": _row(s), "dy": _row(s), "dx": _row(s)}, output="dx",
        launch=lambda s: Launch(_ew(s), {}, {}),
        make_inputs=lambda s, seed: {**_rows_inputs("gelu_tanh_bwd", s, seed, "x", scale=2.0),
                                     **_rows_inputs("gelu_tanh_bwd", s, seed, "dy")},
        oracle=gelu_tanh_bwd_oracle, seed_sizes=None, rel_tol=1e-5,
        definition="dx = dy*(0.5*(1 + t) + 0.5*x*(1 - t^2)*k*(1 + 3*0.044715*x^2)), t = tanh(k*(x + 0.044715*x^3))"),
]

__all__ = ["BACKWARD"]

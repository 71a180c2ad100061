"""Math functions of tile programs: cohort's math library, and the five it lacks.

exp, log, sin, cos, tanh, erf come from cohort.refimpl.mathlib (the same
sequences the backend lowers). exp2, log2 and rsqrt are defined here in the
same style: fixed sequences of correctly rounded f32 operations and fma, no
control flow, no table, no libm (DESIGN §10 states their error bounds,
tests/test_triton_math.py re-measures them on a dense sample):

- exp2(x): k = rint(x) by the 1.5*2**23 trick, r = x - k (exact, |r| <= 1/2),
  r*ln2 as h + l (h rounded, l its fma error plus r times ln2's f32 error),
  e**h by exp's own polynomial, times (1 + l) in one fma, scaled by 2**k
  in two factors (mathlib._scale_wide). x is clamped to [-150, 128] first,
  constant first so a NaN passes through.
- log2(x): log's own reduction x = 2**e * m, m in [sqrt(1/2), sqrt(2)),
  log(m) = f - (hf - s*(hf + R(z))) as in mathlib.log_, then
  e + log(m) * log2(e) with log2(e) split in two f32 parts, two fmas; exact
  for powers of two.
- rsqrt(x) = 1 / sqrt(x): two correctly rounded operations.
- log1p(x), expm1(x): Goldberg's and Kahan's corrections over log and exp (their
  docstrings; bounds in DESIGN §10).
- sigmoid(x) = 1 / (1 + exp(-x)), as triton.language.standard defines it.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..refimpl import mathlib as M
from ..refimpl.interpreter import evaluate
from ..refimpl.ir import Expr, Op, binary, fma, select

_LN2 = 0.693147182464599609375                 # float32(ln 2)
_LN2_LO = -1.904654323148236e-09               # float32(ln 2 - _LN2)
_L2E_HI = 1.44269502162933349609375            # float32(log2 e)
_L2E_LO = 1.925963033500011079e-08             # float32(log2 e - _L2E_HI)


def exp2_(x: Expr) -> Expr:
    xc = M.fmin(M.c(128.0), M.fmax(M.c(-150.0), x))
    t = xc + M.c(M.MAGIC)                      # k = rint(x) in the low bits of t
    r = xc - (t - M.c(M.MAGIC))
    h = r * M.c(_LN2)
    lo = fma(r, M.c(_LN2), -h)
    lo = fma(r, M.c(_LN2_LO), lo)
    p = M.horner(h, (1.0, 1.0) + M.EXP_P)
    return M.scale_wide(fma(p, lo, p), t)


def log2_(x: Expr) -> Expr:
    c, ci = M.c, M.ci
    sub = x < c(2.0 ** -126)
    xs = select(sub, x * c(2.0 ** 23), x)
    ix = M.bits(xs) - ci(M.SQRT_HALF_BITS)
    e = (ix >> ci(23)) + select(sub, ci(-23), ci(0))
    m = M.flt((ix & ci(0x7FFFFF)) + ci(M.SQRT_HALF_BITS))
    f = m - c(1.0)
    s = f / (c(2.0) + f)
    z = s * s
    hf = c(0.5) * f * f
    lnm = f - (hf - s * (hf + z * M.horner(z, M.LOG_R)))
    dk = M.cast(e, M.F)
    y = fma(lnm, c(_L2E_HI), fma(lnm, c(_L2E_LO), dk))
    return select(x > c(0.0), select(x < c(M.INF), y, x),
                  select(binary(Op.EQ, x, c(0.0)), c(-M.INF), c(float("nan"))))


def log1p_(x: Expr) -> Expr:
    """log(1 + x) without 1 + x's rounding (Goldberg): u = 1 + x, then log(u) * (x / (u - 1)),
    whose two roundings leave the error of log(u) at most a few ulps; x itself where u is 1."""
    c = M.c
    u = c(1.0) + x
    d = u - c(1.0)
    y = M.log_(u) * (x / d)
    return select(binary(Op.EQ, d, c(0.0)), x, select(binary(Op.EQ, u, c(M.INF)), u, y))


def expm1_(x: Expr) -> Expr:
    """exp(x) - 1 without the cancellation (Kahan): u = exp(x), then (u - 1) * (x / log(u));
    x itself where u is 1, -1 where u - 1 is, +inf where u is."""
    c = M.c
    u = M.exp_(x)
    d = u - c(1.0)
    y = d * (x / M.log_(u))
    return select(binary(Op.EQ, u, c(1.0)), x,
                  select(binary(Op.EQ, d, c(-1.0)), d, select(binary(Op.EQ, u, c(M.INF)), u, y)))


_OWN = {"exp2": exp2_, "log2": log2_, "log1p": log1p_, "expm1": expm1_}


@lru_cache(maxsize=None)
def template(name: str) -> Expr:
    if name in _OWN:
        return _OWN[name](Expr(Op.ARG, M.F, (), 0))
    return M.template(name)


def math_f32(name: str, x) -> np.ndarray:
    """The f32 function `name` applied elementwise to an f32 array (any shape)."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        if name == "sqrt":
            return np.sqrt(x)
        if name == "rsqrt":
            return np.float32(1.0) / np.sqrt(x)
        if name == "sigmoid":
            return np.float32(1.0) / (np.float32(1.0) + math_f32("exp", -x))
        flat = x.reshape(-1) if x.size else x.reshape(0)
        if flat.size == 0:
            return x
        out = evaluate(template(name), x=flat)
        return np.asarray(out, np.float32).reshape(x.shape)

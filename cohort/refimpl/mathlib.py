"""The math library: transcendental functions as fixed IR sequences.

Each function is built from + - * / and fma (a*b + c rounded once, DESIGN §3),
compares, selects, conversions and bit operations on f32/i32/u32, in IR
(`Expr`) form. The interpreter evaluates the resulting DAG with its ordinary
op table and the backend lowers it with its ordinary lowering table, so both
evaluate the same sequence of correctly rounded operations and agree bit for
bit, on every host: where the CPU has no FMA instruction the backend's
software fma gives the same bits. No libm anywhere.

`template(name)` is the function applied to the placeholder `Expr(Op.ARG)`;
a MATH node `exp(x)` means that template with x in place of the placeholder.
Every function documents its maximum error against float64 over a stated
range (`MathFn.max_ulp`, and `measured`, the largest error over all 2**32
float32 inputs, benchmarks/mathlib_accuracy.py, docs/mathlib/README.md);
tests/test_mathlib.py re-measures a dense sample and fails above the bound.
Summary (ops = template operations without constants; before = the library
without fma, which was right for sin/cos only up to |x| ~ 16000):

    function  stated range     max ulp (measured, all 2**32)  ops (before)
    exp       [-104, 88.7228]  1.0 (0.891)                     22 (32)   subnormal results included
    log       (0, inf)         1.0 (0.826)                     32 (37)   subnormal inputs included
    erf       all floats       1.1 (1.074)                     34 (51)   one select instead of 24
    tanh      all floats       1.0 (0.955)                     42 (50)
    sigmoid   all floats       1.5 (1.497)                     31 (46)   one select, one division
    sin, cos  all floats       0.9 (0.824, 0.837)             164, 161 (58, 56)  exact reduction

Rules the templates keep, so that the backend can run them as SIMD: no
control flow (a branch is a select, and both sides are computed), no table
lookups (constants only), shift amounts that cannot leave 0..31 (constants or
masked), fma only where named (no contraction). Ops used besides + - * / fma:
NEG, ABS, MIN, MAX (exact; DESIGN §3 semantics, which the NaN handling
relies on), compares, SELECT, CAST, BITCAST and integer + * & | ^ << >>.

Coefficients: the polynomials were fitted for this library with
`cohort/refimpl/mathlib_fit.py` (weighted minimax in float64, then rounded to
float32 one coefficient at a time with refitting); running it prints the
tables below. The reduction schemes are the classical ones: Cody-Waite
argument reduction (here in fused steps), fdlibm's log (s = f/(2+f),
log1p(f) = f - s*(f - R)), Kahan-style cos(r) = w + ((1 - w) - r*r/2 + ...),
w = 1 - r*r/2, and Payne-Hanek for sin and cos (mathlib_trig).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .ir import DType, Expr, Op, binary, cast, fma, select, unary
from .mathlib_base import bits, c, ci, flt, fmax, fmin, horner
from .mathlib_trig import cos_, sin_

F, I = DType.F32, DType.I32
INF = float("inf")


# Adding 1.5 * 2**23 to a float v with |v| < 2**22 rounds it to an integer k
# (ties to even) and leaves k in the low mantissa bits: bits(t) = MAGIC_BITS + k.
# Subtracting it again gives k as an exact float. Cheaper than a cast both ways.
MAGIC = 12582912.0
MAGIC_BITS = 0x4B400000


# ---------------------------------------------------------------- the exp core
# e**x = 2**k * e**r, k = rint(x*log2(e)), r = x - k*ln2 in [-0.3466, 0.3466].
# fma(k, -LN2_HI, x) is exact for |k| <= 150 (x and k*LN2_HI agree to within
# 0.35 + 150*2**-24, a multiple of 2**-25 of 24 bits), so r has one rounding.
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693147182464599609375             # float32(ln 2)
_LN2_LO = -1.904654323148236e-09             # float32(ln 2 - _LN2_HI)
# e**r = 1 + r + r*r*Q(r): fit "exp" in mathlib_fit, approximation error 3.1e-9 (relative)
EXP_P = (4.9999994e-01, 1.6666521e-01, 4.1668255e-02, 8.368662e-03, 1.3821451e-03)


def _exp_reduce(x: Expr):
    """(r, t): e**x = e**r * 2**k with k in the low bits of t, |r| <= 0.3466."""
    t = fma(x, c(_LOG2E), c(MAGIC))
    kf = t - c(MAGIC)
    return fma(kf, c(-_LN2_LO), fma(kf, c(-_LN2_HI), x)), t


def scale_wide(p: Expr, t: Expr) -> Expr:
    """p * 2**k for -150 <= k <= 128: 2**k as two factors 2**k1 * 2**(k - k1), k1 = k >> 1."""
    u = bits(t) - ci(MAGIC_BITS - 254)              # k + 254 (the magic's own bits cancel)
    e1 = u >> ci(1)                                  # k1 + 127
    return (p * flt(e1 << ci(23))) * flt((u - e1) << ci(23))


def exp_(x: Expr) -> Expr:
    # Clamped so that k stays in range: e**-104 rounds to 0 and e**89 overflows,
    # naturally, in the final scaling. Constant first: a NaN x passes through.
    r, t = _exp_reduce(fmin(c(89.0), fmax(c(-104.0), x)))
    return scale_wide(horner(r, (1.0, 1.0) + EXP_P), t)


# ---------------------------------------------------------------- e/(1+e)
def _logistic_neg(a: Expr, subnormal: bool):
    """e/(1 + e), e = e**a, for -104 <= a <= 0, as (y, e) with y within ~1 ulp.

    e = 2**k * (1 + g) with g = e**r - 1 kept unrounded against 1. 1 + e is kept
    as d + d_lo (both by fma from p = 1 + g), 1/(d + d_lo) = q*(1 + w) with
    q = 1/d and w = (1 - q*d) - q*d_lo, both residuals exact by fma. Then
    y = 2**k * q * (1 + c), c = g + w + g*w: one division, no selects.
    `subnormal`: results down to 2**-149 (k >= -150) through a 2**64 detour.
    Returns (-(y), scale): the caller multiplies, which folds the sign.
    """
    r, t = _exp_reduce(a)
    g = fma(r * r, horner(r, EXP_P), r)            # e**r - 1
    p = c(1.0) + g
    if subnormal:
        s = flt((bits(t) - ci(MAGIC_BITS - 127 - 64)) << ci(23))    # 2**(k+64), normal
        sd = s * c(2.0 ** -64)                                       # 2**k (0 at k = -150)
    else:
        s = sd = flt((bits(t) - ci(MAGIC_BITS - 127)) << ci(23))    # 2**k, k >= -126
    d = fma(p, sd, c(1.0))
    d_lo = fma(p, sd, c(1.0) - d)                   # 1 - d is exact (Sterbenz)
    nq = c(-1.0) / d
    w = fma(nq, d_lo, fma(nq, d, c(1.0)))
    return fma(nq, fma(g, w, g + w), nq), s          # -(q + q*c), and 2**k or 2**(k+64)


# 0x7EF311C7 - bits(d) is 1/d within 12% for every normal d > 0 (the integer estimate of
# a reciprocal): enough to scale a correction that is itself below one ulp.
_RECIP_MAGIC = 0x7EF311C7


def sigmoid_(x: Expr) -> Expr:
    """sigmoid(x) as one corrected quotient of the exp core's pieces.

    e = exp(-|x|) = 2**-m * p (m = -k in 0..150, p = e**r by the exp polynomial), so
    e/(1+e) = p/(p + 2**m) for x < 0 and 1/(1+e) = 2**m/(p + 2**m) for x >= 0. Both
    sides are scaled by 2**-64 so that 2**m stays a normal float (2**-64..2**86); the
    scale is folded into the coefficients (each Horner step is the unscaled one times
    2**-64 exactly). The denominator d = ps + big rounds; its error lo is exact
    (Fast2Sum: big >= ps, as p <= 1 when m = 0), and so is the quotient's remainder
    n - q*d, so q + (n - q*d - q*lo)/d with a rough 1/d leaves one rounding besides p's
    own error (which is the 1.5 ulp: keeping p's rounding too measured 1.1 ulp on a sample,
    at a cost in swiglu's time that docs/mathlib/README.md gives)."""
    r, t = _exp_reduce(fmax(c(-104.0), -unary(Op.ABS, x)))
    ps = horner(r, tuple(v * 2.0 ** -64 for v in (1.0, 1.0) + EXP_P))
    big = flt((ci(MAGIC_BITS + 63) - bits(t)) << ci(23))            # 2**(m - 64): bits 127 + m - 64
    n = select(x < c(0.0), ps, big)
    d = ps + big
    lo = ps - (d - big)                                              # d + lo = ps + big exactly
    q = n / d
    inv = flt(ci(_RECIP_MAGIC) - bits(d))
    return fma(fma(-q, lo, fma(-q, d, n)), inv, q)


# ---------------------------------------------------------------- tanh
# |x| < 0.75: tanh(x) = x + x*(t*P(t)), t = x*x, so the result keeps the sign
# of x, -0 and subnormals. Otherwise tanh(|x|) = 1 - 2*y, y = e/(1 + e) with
# e = exp(-2|x|) >= e**-20 (tanh rounds to 1 above 9.01): y <= 0.19, so 2*y's
# error is at most a quarter ulp of the result.
_TANH_SMALL = 0.75
# fit "tanh" in mathlib_fit, approximation error 1.7e-9 (relative)
_TANH_P = (-3.3333316e-01, 1.333272e-01, -5.3894535e-02, 2.1457793e-02, -7.6658125e-03, 1.7417567e-03)


def tanh_(x: Expr) -> Expr:
    a = unary(Op.ABS, x)
    t = x * x
    # t*P + 0 is +0 at x = 0 (t*P alone is -0, P < 0), so fma(-0, +0, -0) = -0.
    small = fma(x, fma(t, horner(t, _TANH_P), c(0.0)), x)
    yn, s = _logistic_neg(fmax(c(-20.0), a * c(-2.0)), False)
    big = fma(yn * s, c(2.0), c(1.0))                # 1 - 2*y
    return select(a < c(_TANH_SMALL), small, select(x < c(0.0), -big, big))


# ---------------------------------------------------------------- erf
# Two intervals of |x|, each its own Horner loop (no per-coefficient selects):
#   [0, 1):     erf(x) = x + x*P(x*x)                (relative accuracy near 0)
#   [1, 3.92]:  erf(x) = sign(x) * (1 + Q(|x| - 2.46))
# |x| is clamped to 3.92, where erf rounds to 1. (Splitting at 1.5 saves two
# steps but costs 1.9 ulp: x*P nearly cancels x there.) Fits "erf_small",
# "erf_big" in mathlib_fit: approximation errors 9.5e-10 (relative), 6.6e-9 (absolute).
_ERF_SPLIT = 1.0
_ERF_HI = 3.92
_ERF_CENTRE = 2.46
_ERF_SMALL = (1.2837917e-01, -3.761263e-01, 1.12836316e-01, -2.6856493e-02, 5.1957853e-03,
              -8.1173936e-04, 8.621246e-05, -2.1644482e-06)
_ERF_BIG = (-5.033535e-04, 2.65624e-03, -6.534521e-03, 9.83241e-03, -9.914166e-03, 6.799716e-03,
            -2.9372275e-03, 4.5905486e-04, 3.559852e-04, -2.9939975e-04, 7.5760545e-05,
            2.4624573e-05, -1.730699e-05, 1.0664368e-07, 1.0908375e-06)


def erf_(x: Expr) -> Expr:
    a = unary(Op.ABS, x)
    small = fma(x, horner(x * x, _ERF_SMALL), x)
    big = c(1.0) + horner(fmin(c(_ERF_HI), a) - c(_ERF_CENTRE), _ERF_BIG)
    big = flt(bits(big) | (bits(x) & ci(-(2 ** 31))))    # the sign of x (NaN: big is NaN)
    return select(a < c(_ERF_SPLIT), small, big)


# ---------------------------------------------------------------- log
# x = 2**e * m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact);
# log1p(f) = f - hf + s*(hf + R(s*s)), s = f/(2+f), hf = f*f/2 (fdlibm).
SQRT_HALF_BITS = 0x3F3504F3
_LN2_HI16 = 0.693145751953125       # 16 significant bits
_LN2_LO16 = 1.4286067653e-06
# R(z) = z*(L1 + z*(L2 + z*L3)): fit "log" in mathlib_fit, approximation error 1.6e-9
LOG_R = (6.6666776e-01, 3.9977577e-01, 2.9871053e-01)


def log_(x: Expr) -> Expr:
    sub = x < c(2.0 ** -126)                               # subnormal: scale up by 2**23 first
    xs = select(sub, x * c(2.0 ** 23), x)
    ix = bits(xs) - ci(SQRT_HALF_BITS)                    # exponent relative to sqrt(1/2)
    e = (ix >> ci(23)) + select(sub, ci(-23), ci(0))
    m = flt((ix & ci(0x7FFFFF)) + ci(SQRT_HALF_BITS))
    f = m - c(1.0)
    s = f / (c(2.0) + f)
    z = s * s
    hf = c(0.5) * f * f
    dk = cast(e, F)
    lo = fma(s, fma(z, horner(z, LOG_R), hf), dk * c(_LN2_LO16))
    y = fma(dk, c(_LN2_HI16), (lo - hf) + f)
    # x <= 0, NaN and +inf: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf.
    return select(x > c(0.0), select(x < c(INF), y, x),
                  select(binary(Op.EQ, x, c(0.0)), c(-INF), c(float("nan"))))



@dataclass(frozen=True)
class MathFn:
    name: str
    build: Callable[[Expr], Expr]
    lo: float              # stated range of the documented bound
    hi: float
    max_ulp: float         # documented maximum error on [lo, hi] against float64
    doc: str
    measured: float = 0.0  # largest error found: every float32 of [lo, hi] was checked
    ops: int = 0           # operations in the template (walk_expr nodes other than CONST, ARG)


F32_MAX = 3.4028234663852886e38
F32_TINY = 1.401298464324817e-45

# Errors are in float32 ulps (spacing at the float32 rounding of the float64
# reference). `measured` comes from an exhaustive run over every float32 in the
# stated range (tests/test_mathlib.py re-checks a dense sample of it).
FUNCTIONS = {f.name: f for f in [
    MathFn("exp", exp_, -104.0, 88.72283172607421875, 1.0,
           "All finite results, subnormal ones included (exp(x) rounds to 0 below -103.97). "
           "Cody-Waite reduction by ln2 in two fused steps, degree-6 Horner in fma, scaling by "
           "2**k in two factors.",
           measured=0.8913, ops=22),
    MathFn("log", log_, F32_TINY, F32_MAX, 1.0,
           "All positive floats, subnormals included. fdlibm's reduction to [sqrt(1/2), sqrt(2)) "
           "and s = f/(2+f) with a degree-3 polynomial in s*s; one division.",
           measured=0.8264, ops=32),
    MathFn("erf", erf_, -F32_MAX, F32_MAX, 1.1,
           "All floats. Two intervals of |x| (split at 1, clamp at 3.92), each its own Horner "
           "loop in fma (degrees 15 odd and 14); one select.",
           measured=1.0743, ops=34),
    MathFn("tanh", tanh_, -F32_MAX, F32_MAX, 1.0,
           "All floats. |x| < 0.75: odd polynomial (degree 13); else 1 - 2*y with "
           "y = e/(1+e), e = exp(-2|x|), sigmoid's core.",
           measured=0.9548, ops=42),
    MathFn("sigmoid", sigmoid_, -F32_MAX, F32_MAX, 1.5,
           "All floats, subnormal results included. p/(p + 2**m) (x < 0) or 2**m/(p + 2**m) "
           "(x >= 0) with e = exp(-|x|) = 2**-m * p, scaled by 2**-64; one division, its "
           "remainder and the denominator's rounding error (both exact) folded back in one fma.",
           measured=1.4967, ops=31),
    MathFn("sin", sin_, -F32_MAX, F32_MAX, 0.9,
           "All floats. Exact argument reduction at every magnitude (Payne-Hanek in integer "
           "arithmetic, mathlib_trig), degree-7 sin and degree-8 cos polynomials.",
           measured=0.8244, ops=164),
    MathFn("cos", cos_, -F32_MAX, F32_MAX, 0.9,
           "As sin, with the quadrant shifted by one.",
           measured=0.8367, ops=161),
]}


@lru_cache(maxsize=None)
def template(name: str) -> Expr:
    return FUNCTIONS[name].build(Expr(Op.ARG, F, (), 0))

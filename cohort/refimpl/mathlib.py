"""The math library: transcendental functions as fixed IR sequences.

Each function is built from + - * / sqrt, compares, selects, conversions and
bit operations on f32/i32, in IR (`Expr`) form. The interpreter evaluates the
resulting DAG with its ordinary op table and the backend lowers it with its
ordinary lowering table, so both evaluate the same sequence of correctly
rounded operations and agree bit for bit. No libm anywhere.

`template(name)` is the function applied to the placeholder `Expr(Op.ARG)`;
a MATH node `exp(x)` means that template with x in place of the placeholder.
Every function documents its maximum error against float64 over a stated
range; tests/test_mathlib.py measures it and fails above the bound.

Rules the templates keep, so that the backend can run them as 8-lane SIMD:
no control flow (a branch is a select, and both sides are computed), no FMA
(each op rounds once, so results do not depend on contraction), no table
lookups (constants only). Ops used besides + - * /: NEG, ABS, MIN, MAX (exact,
DESIGN §3 semantics), compares, SELECT, CAST i32->f32, BITCAST and i32
+ - & << >>.

Coefficients: the polynomials were fitted for this library with
`cohort/refimpl/mathlib_fit.py` (weighted minimax in float64, then rounded to
float32 one coefficient at a time with refitting); running it prints the
tables below. The reduction schemes are the classical ones: Cody-Waite
argument reduction, fdlibm's log (s = f/(2+f), log1p(f) = f - s*(f - R)) and
its Kahan-style cos(r) = w + ((1 - w) - r*r/2 + ...), w = 1 - r*r/2.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .ir import DType, Expr, Op, binary, bitcast, cast, const, select, unary

F, I = DType.F32, DType.I32
INF = float("inf")


def c(v: float) -> Expr:
    return const(v, F)


def ci(v: int) -> Expr:
    return const(v, I)


def horner(x: Expr, coeffs) -> Expr:
    """c0 + x*(c1 + x*(c2 + ...)), one rounding per operation, no FMA."""
    acc = c(coeffs[-1])
    for k in reversed(coeffs[:-1]):
        acc = acc * x + c(k)
    return acc


def fmin(a, b) -> Expr:
    """a if a < b else b: put the constant first so that a NaN in b passes through."""
    return binary(Op.MIN, a, b)


def fmax(a, b) -> Expr:
    return binary(Op.MAX, a, b)


def bits(x: Expr) -> Expr:
    return bitcast(x, I)


def flt(n: Expr) -> Expr:
    return bitcast(n, F)


def ldexp_k(x: Expr, k: Expr) -> Expr:
    """x * 2**k for i32 k in [-252, 254], exact unless the result is subnormal or overflows.

    Two factors so that 2**k need not itself be representable.
    """
    k1 = k >> ci(1)
    k2 = k - k1
    s1 = bitcast((k1 + ci(127)) << ci(23), F)
    s2 = bitcast((k2 + ci(127)) << ci(23), F)
    return (x * s1) * s2


def round_to_int(x: Expr) -> Expr:
    """Nearest integer (ties away from zero) as i32, for |x| < 2**30."""
    return cast(x + select(x < c(0.0), c(-0.5), c(0.5)), I)


# Adding 1.5 * 2**23 to a float v with |v| < 2**22 rounds it to an integer k
# (ties to even) and leaves k in the low mantissa bits: bits(t) = _MAGIC_BITS + k.
# Subtracting it again gives k as an exact float. Cheaper than a cast both ways.
_MAGIC = 12582912.0
_MAGIC_BITS = 0x4B400000


# ---------------------------------------------------------------- exp
# exp(x) = 2**k * e**r, k = rint(x*log2(e)), r = x - k*ln2 in [-0.3466, 0.3466].
# k*_LN2_HI is exact (9 significant bits times |k| <= 150) and so is
# x - k*_LN2_HI (Sterbenz), so r has a single rounding.
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
# e**r = 1 + r + r*r*(...): fit "exp" in mathlib_fit, approximation error 3.1e-9 (relative)
_EXP_P = (1.0, 1.0, 4.9999994e-01, 1.6666521e-01, 4.1668255e-02, 8.368662e-03, 1.3821452e-03)


def _exp_reduce(x: Expr):
    """(p, t): e**x = p * 2**k with p = e**r in [0.707, 1.415] and k in the bits of t."""
    t = x * c(_LOG2E) + c(_MAGIC)
    kf = t - c(_MAGIC)
    r1 = x - kf * c(_LN2_HI)                  # exact
    m = kf * c(_LN2_LO)
    r = r1 - m
    r_lo = (r1 - r) - m                       # rounding error of r (Fast2Sum)
    # 1 + (r + (r_lo + r*r*Q(r))): the big terms are added last, each rounding once
    return c(1.0) + (r + (r_lo + (r * r) * horner(r, _EXP_P[2:]))), t


def _scale_narrow(p: Expr, t: Expr) -> Expr:
    """p * 2**k for -125 <= k <= 127: add k to the exponent field (exact)."""
    return flt(bits(p) + (bits(t) << ci(23)))   # the magic's own bits shift out


def _scale_low(p: Expr, t: Expr) -> Expr:
    """p * 2**k for -150 <= k <= 63: exact (p * 2**(k+64)), then one rounding by * 2**-64."""
    s = flt((bits(t) - ci(_MAGIC_BITS - 127 - 64)) << ci(23))
    return (p * s) * c(2.0 ** -64)


def _scale_wide(p: Expr, t: Expr) -> Expr:
    """p * 2**k for -150 <= k <= 128: 2**k as two factors 2**k1 * 2**k2, k1 = k >> 1."""
    b = bits(t)
    e1 = (b - ci(_MAGIC_BITS - 254)) >> ci(1)          # k1 + 127 = (k + 254) >> 1
    e2 = (b - e1) - ci(_MAGIC_BITS - 254)              # k - k1 + 127
    return (p * flt(e1 << ci(23))) * flt(e2 << ci(23))


def exp_(x: Expr) -> Expr:
    # Clamped so that k stays in range: e**-104 rounds to 0 and e**89 overflows,
    # naturally, in the final scaling. Constant first: a NaN x passes through.
    xc = fmin(c(89.0), fmax(c(-104.0), x))
    p, t = _exp_reduce(xc)
    return _scale_wide(p, t)


# ---------------------------------------------------------------- log
# x = 2**e * m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact);
# log1p(f) = f - hf + s*(hf + R(s*s)), s = f/(2+f), hf = f*f/2 (fdlibm).
_SQRT_HALF_BITS = 0x3F3504F3
_LN2_HI16 = 0.693145751953125       # 16 significant bits: e * _LN2_HI16 is exact for |e| < 256
_LN2_LO16 = 1.4286067653e-06
# R(z) = z*(L1 + z*(L2 + z*L3)): fit "log" in mathlib_fit, approximation error 1.6e-9
_LOG_R = (6.6666776e-01, 3.9977577e-01, 2.9871055e-01)


def log_(x: Expr) -> Expr:
    sub = x < c(2.0 ** -126)                               # subnormal: scale up by 2**23 first
    xs = select(sub, x * c(2.0 ** 23), x)
    ix = bits(xs) - ci(_SQRT_HALF_BITS)                    # exponent relative to sqrt(1/2)
    e = (ix >> ci(23)) + select(sub, ci(-23), ci(0))
    m = flt((ix & ci(0x7FFFFF)) + ci(_SQRT_HALF_BITS))
    f = m - c(1.0)
    s = f / (c(2.0) + f)
    z = s * s
    R = z * horner(z, _LOG_R)
    hf = c(0.5) * f * f
    dk = cast(e, F)
    y = (((s * (hf + R) + dk * c(_LN2_LO16)) - hf) + f) + dk * c(_LN2_HI16)
    # x <= 0, NaN and +inf: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf.
    return select(x > c(0.0), select(x < c(INF), y, x),
                  select(binary(Op.EQ, x, c(0.0)), c(-INF), c(float("nan"))))


# ---------------------------------------------------------------- sigmoid
def sigmoid_(x: Expr) -> Expr:
    """e = exp(-|x|) never overflows; sigmoid(x) = (1 or e) / (1 + e)."""
    p, t = _exp_reduce(fmax(c(-104.0), -unary(Op.ABS, x)))
    e = _scale_low(p, t)
    return select(x < c(0.0), e, c(1.0)) / (c(1.0) + e)


# ---------------------------------------------------------------- tanh
# |x| < 0.625: tanh(x) = x + x*(t*P(t)), t = x*x, so the result keeps the sign
# of x, -0 and subnormals. Otherwise tanh(|x|) = 1 - 2/(e**(2|x|) + 1) with
# 2|x| clamped to 20 (tanh rounds to 1 above 9.01).
_TANH_SMALL = 0.625
# fit "tanh" in mathlib_fit, approximation error 4.5e-9 (relative)
_TANH_P = (-3.333328e-01, 1.3331406e-01, -5.3736515e-02, 2.0628167e-02, -5.692296e-03)


def tanh_(x: Expr) -> Expr:
    a = unary(Op.ABS, x)
    t = x * x
    small = x + x * (t * horner(t, _TANH_P))
    p, tt = _exp_reduce(fmin(c(20.0), a + a))
    big = c(1.0) - c(2.0) / (_scale_narrow(p, tt) + c(1.0))
    return select(a < c(_TANH_SMALL), small, select(x < c(0.0), -big, big))


# ---------------------------------------------------------------- erf
# Three intervals of |x|, one shared Horner loop whose coefficients are selected
# per lane:  [0, 1.25): erf(x) = x + x*P(x*x)       (relative accuracy near 0)
#            [1.25, 2.3), [2.3, 3.96]: erf = sign * (1 + P(|x| - centre))
# Both are A + A*P with A = x or +-1. |x| is clamped to 3.96, where erf rounds to 1.
# Fits "erf_small", "erf_mid", "erf_big" in mathlib_fit; approximation errors
# 8.6e-10 (relative), 9.6e-9 and 1.0e-8 (absolute).
_ERF_SPLIT = (1.25, 2.3)
_ERF_HI = 3.96
_ERF_CENTRE = ((1.25 + 2.3) / 2, (2.3 + 3.96) / 2)
_ERF_SMALL = (1.2837917e-01, -3.7612632e-01, 1.12837076e-01, -2.6862249e-02, 5.214787e-03,
              -8.4273436e-04, 1.1118625e-04, -1.0643207e-05, 5.2248686e-07)
_ERF_MID = (-1.2065289e-02, 4.832308e-02, -8.577339e-02, 8.5398816e-02, -4.7202352e-02,
            7.7897026e-03, 7.9979375e-03, -5.4068477e-03, 6.080795e-04)
_ERF_BIG = (-9.573901e-06, 6.2658e-05, -1.9671081e-04, 3.9124655e-04, -5.4070784e-04,
            5.506705e-04, -4.5218886e-04, 2.90905e-04, -9.795071e-05)


def erf_(x: Expr) -> Expr:
    a = unary(Op.ABS, x)
    small = a < c(_ERF_SPLIT[0])
    mid = a < c(_ERF_SPLIT[1])
    u = select(small, x * x, fmin(c(_ERF_HI), a) - select(mid, c(_ERF_CENTRE[0]), c(_ERF_CENTRE[1])))

    def coef(j):
        return select(small, c(_ERF_SMALL[j]), select(mid, c(_ERF_MID[j]), c(_ERF_BIG[j])))
    acc = coef(len(_ERF_SMALL) - 1)
    for j in reversed(range(len(_ERF_SMALL) - 1)):
        acc = acc * u + coef(j)
    A = select(small, x, select(x < c(0.0), c(-1.0), c(1.0)))
    return A + A * acc


# ---------------------------------------------------------------- sin, cos
# x = q*pi/2 + r, q = rint(x*2/pi), |r| <= pi/4. pi/2 is split into pieces
# P1..P4 of <= 11 significant bits (so q*Pj is exact for |q| < 2**13) and a
# float32 tail P5. x - q*P1 - q*P2 is exact; the next two subtractions are exact
# whenever r is small (|r| < 2**-20, where relative accuracy needs it) and
# otherwise their rounding errors are recovered exactly (Fast2Sum) into r_lo.
# The closest float32 to a multiple of pi/2 below 1e5 is 4.2e-9 away (x ~ 252.9).
# sin(x), cos(x) are then +-sin(r) or +-cos(r) by the quadrant q mod 4.
_TWO_OVER_PI = 0.6366197723675814
_PIO2 = (1608 * 2.0 ** -10, 1015 * 2.0 ** -21, -700 * 2.0 ** -32, 535 * 2.0 ** -43,
         -5.1453114636784356e-14)
_TRIG_LIMIT = 4194304.0      # 2**22: beyond, the reduction cannot work; result is +-0
_SIN_TINY = 2.0 ** -12       # below, sin(x) rounds to x
# sin(r) = r + r*(s*S(s)), cos(r) = (1 - s/2) + s*s*C(s), s = r*r;
# fits "sin", "cos" in mathlib_fit, approximation errors 1.6e-10, 1.2e-10 (relative)
_SIN_S = (-1.6666667e-01, 8.333379e-03, -1.9853064e-04, 2.83251e-06)
_COS_C = (4.1666646e-02, -1.388731e-03, 2.4432327e-05)


def _sincos(x: Expr, quadrant_shift: int) -> Expr:
    t = x * c(_TWO_OVER_PI) + c(_MAGIC)
    q = t - c(_MAGIC)
    P1, P2, P3, P4, P5 = (q * c(p) for p in _PIO2)
    r2 = (x - P1) - P2                      # exact
    r3 = r2 - P3
    e3 = (r2 - r3) - P3                     # rounding error of r3 (0 when r3 is exact)
    hi = r3 - P4
    e4 = (r3 - hi) - P4
    lo = (e3 + e4) - P5                     # r = hi + lo
    s = hi * hi
    hs = c(0.5) * s
    w = c(1.0) - hs
    # sin(hi + lo) ~ sin(hi) + lo*cos(hi); cos(hi + lo) ~ cos(hi) - lo*hi
    sin_r = hi + (lo * w + hi * (s * horner(s, _SIN_S)))
    cos_r = w + ((((c(1.0) - w) - hs) + (s * s) * horner(s, _COS_C)) - lo * hi)
    n = bits(t) + ci(quadrant_shift)        # q mod 4 is in the low bits
    y = select(binary(Op.EQ, n & ci(1), ci(0)), sin_r, cos_r)
    y = flt(bits(y) ^ ((n & ci(2)) << ci(30)))   # negate in quadrants 2 and 3
    # inf, NaN -> NaN; finite |x| > 2**22 -> +-0 (deterministic, not an approximation)
    return select(unary(Op.ABS, x) <= c(_TRIG_LIMIT), y, x * c(0.0))


def sin_(x: Expr) -> Expr:
    # For tiny |x| return x itself: keeps -0 and avoids sin(r) losing the sign of zero.
    return select(unary(Op.ABS, x) < c(_SIN_TINY), x, _sincos(x, 0))


def cos_(x: Expr) -> Expr:
    return _sincos(x, 1)                    # cos(x) = sin(x + pi/2)


@dataclass(frozen=True)
class MathFn:
    name: str
    build: Callable[[Expr], Expr]
    lo: float              # stated range of the documented bound
    hi: float
    max_ulp: float         # documented maximum error on [lo, hi] against float64
    doc: str


FUNCTIONS = {f.name: f for f in [
    MathFn("exp", exp_, -104.0, 88.75, 2.0, "Cody-Waite reduction by ln2, degree-6 polynomial"),
    MathFn("log", log_, 0.0, 3.4028234663852886e38, 2.0, "fdlibm-style"),
    MathFn("erf", erf_, -3.4028234663852886e38, 3.4028234663852886e38, 2.0, "piecewise"),
    MathFn("tanh", tanh_, -3.4028234663852886e38, 3.4028234663852886e38, 2.0, "odd poly / exp"),
    MathFn("sigmoid", sigmoid_, -3.4028234663852886e38, 3.4028234663852886e38, 2.0, "exp(-|x|)"),
    MathFn("sin", sin_, -12000.0, 12000.0, 2.0, "Cody-Waite by pi/2"),
    MathFn("cos", cos_, -12000.0, 12000.0, 2.0, "Cody-Waite by pi/2"),
]}


@lru_cache(maxsize=None)
def template(name: str) -> Expr:
    return FUNCTIONS[name].build(Expr(Op.ARG, F, (), 0))

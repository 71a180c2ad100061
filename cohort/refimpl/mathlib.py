"""The math library: transcendental functions as fixed IR sequences.

Each function is built from + - * / sqrt, compares, selects, conversions and
bit operations on f32/i32, in IR (`Expr`) form. The interpreter evaluates the
resulting DAG with its ordinary op table and the backend lowers it with its
ordinary lowering table, so both evaluate the same sequence of correctly
rounded operations and agree bit for bit. No libm anywhere.

`template(name)` is the function applied to the placeholder `Expr(Op.ARG)`;
a MATH node `exp(x)` means that template with x in place of the placeholder.
Every function documents its maximum error against float64 over a stated
range (`MathFn.max_ulp`, and `measured`, the largest error over every float32
of that range); tests/test_mathlib.py re-measures a dense sample and fails
above the bound. Summary (ops = template operations without constants):

    function  stated range            max ulp (measured)  ops
    exp       [-104, 88.7228]         1.0 (0.990)          32   subnormal results included
    log       (0, inf)                1.0 (0.840)          37   subnormal inputs included
    erf       all floats              1.3 (1.263)          51
    tanh      all floats              1.1 (1.066)          50
    sigmoid   all floats              1.5 (1.496)          46
    sin, cos  [-12000, 12000]         0.9 (0.820, 0.802)   58, 56

Rules the templates keep, so that the backend can run them as 8-lane SIMD:
no control flow (a branch is a select, and both sides are computed), no FMA
(each op rounds once, so results do not depend on contraction), no table
lookups (constants only), shifts by constants only. Ops used besides + - * /:
NEG, ABS, MIN, MAX (exact; DESIGN §3 semantics, which the NaN handling relies
on), compares, SELECT, CAST i32->f32, BITCAST and i32 + - & ^ << >>.

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


# Adding 1.5 * 2**23 to a float v with |v| < 2**22 rounds it to an integer k
# (ties to even) and leaves k in the low mantissa bits: bits(t) = _MAGIC_BITS + k.
# Subtracting it again gives k as an exact float. Cheaper than a cast both ways.
_MAGIC = 12582912.0
_MAGIC_BITS = 0x4B400000


# ---------------------------------------------------------------- exp
# exp(x) = 2**k * e**r, k = rint(x*log2(e)), r = x - k*ln2 in [-0.3466, 0.3466].
# k*_LN2_HI is exact (9 significant bits times |k| <= 150) and so is
# x - k*_LN2_HI (Sterbenz), so r has a single rounding. (The ln2 split is
# Cephes' expf one, public domain.)
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
# e**r = 1 + r + r*r*Q(r): fit "exp" in mathlib_fit, approximation error 3.1e-9 (relative)
_EXP_P = (4.9999994e-01, 1.6666521e-01, 4.1668255e-02, 8.368662e-03, 1.3821451e-03)


def _exp_reduce(x: Expr):
    """(v, t): e**x = (1 + v) * 2**k, |v| <= 0.415, with k in the bits of t."""
    t = x * c(_LOG2E) + c(_MAGIC)
    kf = t - c(_MAGIC)
    r = (x - kf * c(_LN2_HI)) - kf * c(_LN2_LO)
    # e**r - 1 = r + r*r*Q(r): adding the small terms first and 1 last (by the
    # caller) loses less than Horner's ((..)*r + 1)*r + 1.
    return r + (r * r) * horner(r, _EXP_P), t


def _scale_narrow(p: Expr, t: Expr) -> Expr:
    """p * 2**k for -126 <= k <= 127 (2**k normal): exact unless the result is subnormal."""
    return p * flt((bits(t) << ci(23)) + ci(127 << 23))   # the magic's own bits shift out


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
    v, t = _exp_reduce(xc)
    return _scale_wide(c(1.0) + v, t)


# ---------------------------------------------------------------- log
# x = 2**e * m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact);
# log1p(f) = f - hf + s*(hf + R(s*s)), s = f/(2+f), hf = f*f/2 (fdlibm).
_SQRT_HALF_BITS = 0x3F3504F3
_LN2_HI16 = 0.693145751953125       # 16 significant bits: e * _LN2_HI16 is exact for |e| < 256
_LN2_LO16 = 1.4286067653e-06
# R(z) = z*(L1 + z*(L2 + z*L3)): fit "log" in mathlib_fit, approximation error 1.6e-9
_LOG_R = (6.6666776e-01, 3.9977577e-01, 2.9871053e-01)


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
    """sigmoid(x) = n / (1 + e), e = exp(-|x|) (never overflows), n = e if x < 0 else 1.

    Done plainly this has three roundings of size ~1 ulp (of e, of 1 + e and of
    the division), up to 2.4 ulp in total. So e = e_hi + e_lo and 1 + e = d + d_lo
    are kept exactly (Fast2Sum) and the quotient q = n/d is corrected to first
    order: n/(d + d_lo) ~ q + (n_lo - q*d_lo)/d, with 1/d = q (x >= 0) or 1 - q.
    """
    v, t = _exp_reduce(fmax(c(-104.0), -unary(Op.ABS, x)))
    p = c(1.0) + v
    p_lo = (c(1.0) - p) + v
    s = flt((bits(t) - ci(_MAGIC_BITS - 127 - 64)) << ci(23))    # 2**(k+64), k in [-150, 0]
    e = (p * s) * c(2.0 ** -64)                                # rounds once, also to subnormal
    e_lo = p_lo * (s * c(2.0 ** -64))                          # only matters when e is normal
    neg = x < c(0.0)
    d = c(1.0) + e
    d_lo = ((c(1.0) - d) + e) + e_lo
    q = select(neg, e, c(1.0)) / d
    inv_d = select(neg, c(1.0) - q, q)
    return q + inv_d * (select(neg, e_lo, c(0.0)) - q * d_lo)


# ---------------------------------------------------------------- tanh
# |x| < 0.75: tanh(x) = x + x*(t*P(t)), t = x*x, so the result keeps the sign
# of x, -0 and subnormals. Otherwise tanh(|x|) = 1 - 2/(e**(2|x|) + 1) with
# 2|x| clamped to 20 (tanh rounds to 1 above 9.01).
_TANH_SMALL = 0.75
# fit "tanh" in mathlib_fit, approximation error 1.7e-9 (relative)
_TANH_P = (-3.3333316e-01, 1.333272e-01, -5.3894535e-02, 2.1457793e-02, -7.6658125e-03, 1.7417567e-03)


def tanh_(x: Expr) -> Expr:
    a = unary(Op.ABS, x)
    t = x * x
    # t*P is -0 at x = 0 (P < 0); + 0 makes it +0, so tanh(-0) = -0 + -0 = -0.
    small = x + x * (t * horner(t, _TANH_P) + c(0.0))
    v, tt = _exp_reduce(fmin(c(20.0), a + a))
    big = c(1.0) - c(2.0) / (_scale_narrow(c(1.0) + v, tt) + c(1.0))
    return select(a < c(_TANH_SMALL), small, select(x < c(0.0), -big, big))


# ---------------------------------------------------------------- erf
# Three intervals of |x|, one shared Horner loop (degree 9) whose coefficients
# are selected per lane:
#   [0, 1):               erf(x) = x + x*P(x*x)           (relative accuracy near 0)
#   [1, 2.3), [2.3, 3.96]: erf(x) = sign(x) * (1 + P(|x| - centre))
# Both are A + A*P with A = x or +-1. |x| is clamped to 3.96, where erf rounds to 1.
# (A Horner loop in |x| - centre is exact in its first step and needs no scaling;
# sharing the high coefficients between intervals to save selects costs > 2 ulp.)
# Fits "erf_small", "erf_mid", "erf_big" in mathlib_fit; approximation errors
# 9.2e-10 (relative), 8.4e-9 and 2.9e-9 (absolute).
_ERF_SPLIT = (1.0, 2.3)
_ERF_HI = 3.96
_ERF_CENTRE = ((1.0 + 2.3) / 2, (2.3 + 3.96) / 2)
_ERF_SMALL = (1.2837917e-01, -3.7612623e-01, 1.1283374e-01, -2.6823983e-02, 5.010205e-03,
              -2.451773e-04, -9.0249896e-04, 9.870639e-04, -5.2821386e-04, 1.1672304e-04)
_ERF_MID = (-1.9624425e-02, 7.414611e-02, -1.22340165e-01, 1.09860286e-01, -4.9871374e-02,
            -6.287042e-05, 1.3443833e-02, -6.21767e-03, -6.154401e-04, 1.1958694e-03)
_ERF_BIG = (-9.57561e-06, 6.274439e-05, -1.9662286e-04, 3.8951272e-04, -5.4138654e-04,
            5.599681e-04, -4.505404e-04, 2.7255222e-04, -9.918624e-05, 1.2022543e-05)


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
# fits "sin", "cos" in mathlib_fit, approximation errors 4.0e-9, 1.2e-10 (relative)
_SIN_S = (-1.6666655e-01, 8.332187e-03, -1.95179e-04)
_COS_C = (4.1666646e-02, -1.388731e-03, 2.4432327e-05)


def _sincos(x: Expr, ax: Expr, quadrant_shift: int) -> Expr:
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
    return select(ax <= c(_TRIG_LIMIT), y, x * c(0.0))


def sin_(x: Expr) -> Expr:
    # Tiny |x|: return x itself, which keeps -0 (hi + (+0) would give +0).
    ax = unary(Op.ABS, x)
    return select(ax < c(_SIN_TINY), x, _sincos(x, ax, 0))


def cos_(x: Expr) -> Expr:
    return _sincos(x, unary(Op.ABS, x), 1)     # cos(x) = sin(x + pi/2): quadrant + 1


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
           "Cody-Waite reduction by ln2, degree-6 polynomial, scaling by 2**k in two factors.",
           measured=0.9903, ops=32),
    MathFn("log", log_, F32_TINY, F32_MAX, 1.0,
           "All positive floats, subnormals included. fdlibm's reduction to [sqrt(1/2), sqrt(2)) "
           "and s = f/(2+f) with a degree-3 polynomial in s*s; one division.",
           measured=0.8399, ops=37),
    MathFn("erf", erf_, -F32_MAX, F32_MAX, 1.3,
           "All floats. Three intervals of |x| (1, 2.3, clamp at 3.96) sharing one "
           "degree-9 Horner loop with per-lane coefficients (selects).",
           measured=1.2631, ops=51),
    MathFn("tanh", tanh_, -F32_MAX, F32_MAX, 1.1,
           "All floats. |x| < 0.75: odd polynomial (degree 13); else 1 - 2/(exp(2|x|) + 1).",
           measured=1.0661, ops=50),
    MathFn("sigmoid", sigmoid_, -F32_MAX, F32_MAX, 1.5,
           "All floats, subnormal results included. (1 or e)/(1 + e), e = exp(-|x|), with e and "
           "1 + e kept as exact sums and the quotient corrected: 46 ops instead of 35, "
           "1.5 ulp instead of 2.4.",
           measured=1.4964, ops=46),
    MathFn("sin", sin_, -12000.0, 12000.0, 0.9,
           "Cody-Waite reduction by pi/2 in five pieces (exact where it matters), degree-7 sin "
           "and degree-8 cos polynomials. Beyond the range: |x| <= 2**22 the same formula with a "
           "growing error, then +-0; always finite and in [-1, 1] for finite x.",
           measured=0.8201, ops=58),
    MathFn("cos", cos_, -12000.0, 12000.0, 0.9,
           "As sin, with the quadrant shifted by one.",
           measured=0.8023, ops=56),
]}


@lru_cache(maxsize=None)
def template(name: str) -> Expr:
    return FUNCTIONS[name].build(Expr(Op.ARG, F, (), 0))

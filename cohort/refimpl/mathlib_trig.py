"""sin and cos for every float32: an exact argument reduction (Payne-Hanek) in IR.

x = m * 2**s, m the 24-bit significand. What sin and cos need is x*(2/pi) mod 4:
its integer part n (the quadrant) and its fraction f in [-1/2, 1/2], with f
accurate to about 2**-57 (the float32 closest to a multiple of pi/2 is
16367173 * 2**72, 2**-29.2 away). Bits of 2/pi with weight 2**-(s-2) or more
contribute multiples of 4 and are dropped; the 96 bits after them are all that
matter (the rest of 2/pi adds less than m * 2**-94 < 2**-70). So:

1. the window: those 96 bits are cut out of the constant words of 2/pi by the
   exponent, starting at bit p = E - 88 of 2/pi preceded by 64 zero bits (E the
   biased exponent; the zeros make p >= 0 down to |x| = 2**-39): word index
   p >> 5 by three stages of selects between constants, bit offset p & 31 by
   variable shifts (amounts masked to 0..31, so no shift can fail);
2. the product m * window mod 2**96, in unsigned 12-bit limbs: every partial
   product and column sum fits 32 bits, carries propagate exactly;
3. the top 60 bits of the product are n (2 bits) and f (58 bits), f as two
   floats (22 and 24 bits, exact) plus a 12-bit tail; r = f * pi/2 = r_hi + r_lo.

Then sin(r) and cos(r) by the polynomials of `mathlib` (fits "sin", "cos"),
with r_lo folded in to first order, and the quadrant picks and signs the result.
No tables, no memory, no branches: every lane runs the same ~160 operations.
"""
from __future__ import annotations

from .ir import DType, Expr, Op, binary, bitcast, cast, const, fma, select, unary
from .mathlib_base import c, flt, horner

U = DType.U32
# 2/pi = 0.A2F9836E 4E441529 FC2757D1 ... in hexadecimal (tests/test_mathlib.py
# recomputes the words from pi by integer arithmetic)
TWO_OVER_PI_WORDS = (0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599, 0x3C439041,
                     0xFE5163AB)
_WORDS = (0, 0) + TWO_OVER_PI_WORDS      # two zero words in front: window start p = E - 88 >= 0
_PIO2_HI = 1.5707963705062866            # float32(pi/2)
_PIO2_LO = -4.371138828673793e-08        # float32(pi/2 - _PIO2_HI)
_TINY = 2.0 ** -12                       # below: sin(x) rounds to x, cos(x) to 1
F32_MAX = 3.4028234663852886e38
# sin(r) = r + r*(s*S(s)), cos(r) = (1 - s/2) + s*s*C(s), s = r*r;
# fits "sin", "cos" in mathlib_fit, approximation errors 4.0e-9, 1.2e-10 (relative)
_SIN_S = (-1.6666655e-01, 8.332187e-03, -1.95179e-04)
_COS_C = (4.1666646e-02, -1.388731e-03, 2.4432327e-05)


def cu(v: int) -> Expr:
    return const(v, U)


def ubits(x: Expr) -> Expr:
    return bitcast(x, U)


def _window(p: Expr):
    """The 96 bits of _WORDS from bit p (0 <= p <= 166) as three words, most significant first."""
    words = [cu(w) for w in _WORDS]
    for stage in (4, 2, 1):                  # shift the word list left by stage when bit `stage` of p >> 5
        take = binary(Op.NE, p & cu(32 * stage), cu(0))
        need = {4: 7, 2: 5, 1: 4}[stage]     # words still needed after this stage
        words = [select(take, words[k + stage], words[k]) if k + stage < len(words) else words[k]
                 for k in range(need)]
    d = p & cu(31)
    back = d ^ cu(31)                        # 31 - d: (w >> 1) >> (31 - d) is w >> (32 - d), also for d = 0
    return [(words[i] << d) | ((words[i + 1] >> cu(1)) >> back) for i in range(3)]


def _limbs12(w0: Expr, w1: Expr, w2: Expr) -> list:
    """The 96 bits w0:w1:w2 as eight 12-bit limbs, least significant first."""
    M = cu(0xFFF)
    return [w2 & M, (w2 >> cu(12)) & M, ((w1 & cu(0xF)) << cu(8)) | (w2 >> cu(24)),
            (w1 >> cu(4)) & M, (w1 >> cu(16)) & M, ((w0 & cu(0xFF)) << cu(4)) | (w1 >> cu(28)),
            (w0 >> cu(8)) & M, w0 >> cu(20)]


def reduce_quadrant(ub: Expr):
    """(n, r_hi, r_lo) for |x| with bits `ub` (u32, sign clear), 2**-39 <= |x| < inf:
    |x| = n*pi/2 + r_hi + r_lo (n mod 4), |r| <= pi/4, r_hi + r_lo within ~2**-56 of r."""
    E = ub >> cu(23)
    m = (ub & cu(0x7FFFFF)) | cu(0x800000)
    p = binary(Op.MAX, E, cu(88)) - cu(88)
    L = _limbs12(*_window(p))
    M0, M1 = m & cu(0xFFF), m >> cu(12)
    # column k of m * window (base 2**12): M0*L[k] + M1*L[k-1], each product < 2**24
    col = [M0 * L[0]] + [M0 * L[k] + M1 * L[k - 1] for k in range(1, 8)]
    limb, carry = [], col[0] >> cu(12)
    for k in range(1, 8):
        v = col[k] + carry
        limb.append(v & cu(0xFFF) if k >= 3 else None)
        carry = v >> cu(12)
    r3, r4, r5, r6, r7 = limb[2:]
    # bits 95..94 of the product are the quadrant, 93..36 the fraction (x*2/pi = product * 2**-94)
    f1 = cast(((r7 & cu(0x3FF)) << cu(12)) | r6, DType.F32) * c(2.0 ** -22)
    f2 = cast((r5 << cu(12)) | r4, DType.F32) * c(2.0 ** -46)
    f3 = cast(r3, DType.F32) * c(2.0 ** -58)
    up = f1 >= c(0.5)                        # fraction in [-1/2, 1/2): the next quadrant
    n = (r7 >> cu(10)) + cast(up, U)
    f1 = select(up, f1 - c(1.0), f1)
    hi = f1 + f2                             # Fast2Sum: f1 is 0 or a multiple of 2**-22 > f2
    lo = (f2 - (hi - f1)) + f3
    r_hi = hi * c(_PIO2_HI)
    r_lo = fma(lo, c(_PIO2_HI), fma(hi, c(_PIO2_LO), fma(hi, c(_PIO2_HI), hi * c(-_PIO2_HI))))
    return n, r_hi, r_lo


def _sincos(x: Expr, quadrant_shift: int, odd: bool) -> Expr:
    ub = ubits(x) & cu(0x7FFFFFFF)
    n, hi, lo = reduce_quadrant(ub)
    s = hi * hi
    hs = c(0.5) * s
    w = c(1.0) - hs
    # sin(hi + lo) ~ sin(hi) + lo*cos(hi); cos(hi + lo) ~ cos(hi) - lo*hi
    sin_r = hi + fma(hi, s * horner(s, _SIN_S), lo * w)
    cos_r = w + (fma(s * s, horner(s, _COS_C), (c(1.0) - w) - hs) - lo * hi)
    n = n + cu(quadrant_shift)
    y = select(binary(Op.EQ, n & cu(1), cu(0)), sin_r, cos_r)
    sign = (n & cu(2)) << cu(30)             # negative in quadrants 2 and 3
    if odd:
        sign = sign ^ (ubits(x) & cu(0x80000000))
    y = flt(ubits(y) ^ sign)
    ax = unary(Op.ABS, x)
    small = x if odd else c(1.0)
    # inf, NaN -> NaN (x*0)
    return select(ax < c(_TINY), small, select(ax <= c(F32_MAX), y, x * c(0.0)))


def sin_(x: Expr) -> Expr:
    return _sincos(x, 0, True)


def cos_(x: Expr) -> Expr:
    return _sincos(x, 1, False)    # cos(x) = sin(x + pi/2): quadrant + 1

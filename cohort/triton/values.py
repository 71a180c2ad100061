"""Exact elementwise semantics of the tile IR over NumPy arrays (DESIGN §10).

A tile's value is a NumPy array of its element type's carrier (`Dt.np`; bf16
is carried as its bits, uint16). Float arithmetic on f16 and bf16 widens both
operands exactly to f32, applies the f32 operation and rounds the result back
to nearest even (cohort.refimpl.semantics.widen/narrow): for + - * / and sqrt
that is the correctly rounded 16-bit result, since f32 has more than twice
their precision plus two bits. Integer arithmetic wraps; `//` and `%`
truncate toward zero; a zero divisor or an out-of-range shift is an error.
"""
from __future__ import annotations

import numpy as np

from ..refimpl import semantics as S
from ..refimpl.ir import DType
from .tir import Bin, Cmp, Dt, Un

_STORE16 = {Dt.F16: DType.F16, Dt.BF16: DType.BF16}


class ValueError_(Exception):
    """An operation failed on some element (division by zero, bad shift)."""


def to_f32(a, dt: Dt):
    """f32 values of a float tile of type dt (f16/bf16 exactly widened)."""
    if dt in _STORE16:
        return S.widen(a, _STORE16[dt])
    return np.asarray(a, np.float32) if dt is Dt.F32 else np.asarray(a)


def from_f32(x, dt: Dt):
    """f32 values rounded to dt (f16/bf16 to nearest even, NaN canonical)."""
    if dt in _STORE16:
        return np.asarray(S.narrow(np.asarray(x, np.float32), _STORE16[dt]))
    return np.asarray(x, dt.np)


def _wide_float(a, dt: Dt):
    """A float tile as f64 values, exactly (every float type widens exactly into f64)."""
    return to_f32(a, dt).astype(np.float64) if dt is not Dt.F64 else np.asarray(a, np.float64)


def round_f64(x, dt: Dt):
    """f64 values rounded once to dt: f64 -> f32 -> 16 bits is one rounding, since
    each step keeps more than twice the next one's precision plus two bits."""
    x = np.asarray(x, np.float64)
    if dt is Dt.F64:
        return x
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
    return from_f32(f, dt)


def to_f64_odd(a, signed: bool):
    """64-bit integers to f64 rounded to odd: the nearest f64 rounded once to nearest even, then,
    where that was inexact and its last bit is 0, moved one ulp toward the integer. Rounding that
    to f32 or 16 bits is then the integer rounded once (Boldo and Melquiond: odd rounding to 53
    bits, then to p <= 51 bits); rounding to nearest twice is not (2**60 + 2**36 + 1 to f32).
    Magnitudes that round to 2**63 (2**64 unsigned) keep that: every narrower type rounds them
    there too."""
    it = np.int64 if signed else np.uint64
    a = np.asarray(a).astype(it)
    x = a.astype(np.float64)                          # to nearest even
    top = 2.0 ** 63 if signed else 2.0 ** 64
    fits = np.abs(x) < top
    back = np.where(fits, x, 0.0).astype(it)
    inexact = fits & (back != a)
    above = a > back                                  # the integer lies above x
    bits = x.view(np.int64)
    even = (bits & 1) == 0
    away = above == (x > 0)                           # toward the integer is away from zero
    step = np.where(away, 1, -1)
    return np.where(inexact & even, bits + step, bits).view(np.float64)


def cast(a, src: Dt, dst: Dt):
    """Value conversion (tl.cast, .to): ints wrap (sign- or zero-extend by the source's
    signedness); to int1 is `!= 0`; int -> float rounds once to nearest even; float ->
    int truncates, saturates at the target's range, NaN -> 0; float -> float rounds
    to nearest even."""
    a = np.asarray(a)
    if src is dst:
        return a
    with np.errstate(all="ignore"):
        if dst is Dt.I1:
            return (_wide_float(a, src) != 0) if src.is_float else (a != 0)
        if src.is_int and dst.is_int:
            return a.astype(np.int64 if src.is_signed or src is Dt.I1 else np.uint64).astype(dst.np)
        if src.is_int:                    # one rounding (to_f64_odd: 64-bit sources)
            if src.bits < 64:
                return round_f64(a.astype(np.float64), dst)
            if dst is Dt.F64:             # exact in long double (64+ bits), then one rounding
                return a.astype(np.longdouble).astype(np.float64)
            return round_f64(to_f64_odd(a, src.is_signed), dst)
        if dst.is_float:
            return round_f64(_wide_float(a, src), dst)
        from .tir import int_range
        lo, hi = int_range(dst)
        t = np.trunc(_wide_float(a, src))
        nan = np.isnan(t)
        t = np.where(nan, 0.0, t)
        big = t >= float(hi)              # saturate (the f64 hi of a 64-bit type rounds up)
        small = t <= float(lo)
        mid = np.where(big | small, 0.0, t)
        out = mid.astype(np.int64 if dst.is_signed else np.uint64)
        out = np.where(big, np.array(hi).astype(out.dtype), np.where(small, np.array(lo).astype(out.dtype), out))
        return out.astype(dst.np)


def bitcast(a, src: Dt, dst: Dt):
    a = np.ascontiguousarray(a)
    if dst is Dt.I1 or src is Dt.I1:
        return (a != 0) if dst is Dt.I1 else a.astype(dst.np)
    return a.view(dst.np)


# ---------------------------------------------------------------- float operations

def _float_binary(op: Bin, a, b):
    if op is Bin.ADD:
        return np.add(a, b)
    if op is Bin.SUB:
        return np.subtract(a, b)
    if op is Bin.MUL:
        return np.multiply(a, b)
    if op is Bin.DIV:
        return np.divide(a, b)
    if op is Bin.MOD:
        return np.fmod(a, b)             # C fmod: exact, the dividend's sign
    raise ValueError_(f"{op.value} is not defined on floats")


def float_op(fn, dt: Dt, *xs):
    """Apply an f32/f64 function to float tiles of type dt, rounding back once."""
    with np.errstate(all="ignore"):
        if dt is Dt.F64:
            return np.asarray(fn(*(np.asarray(x, np.float64) for x in xs)), np.float64)
        return from_f32(fn(*(to_f32(x, dt) for x in xs)), dt)


# ---------------------------------------------------------------- integer operations

def _int_binary(op: Bin, dt: Dt, a, b, where: str):
    a, b = np.asarray(a), np.asarray(b)
    if op in (Bin.ADD, Bin.SUB, Bin.MUL, Bin.AND, Bin.OR, Bin.XOR) and dt is Dt.I1:
        a, b = a.astype(np.uint8), b.astype(np.uint8)
        r = {Bin.ADD: np.bitwise_xor, Bin.SUB: np.bitwise_xor, Bin.MUL: np.bitwise_and,
             Bin.AND: np.bitwise_and, Bin.OR: np.bitwise_or, Bin.XOR: np.bitwise_xor}[op](a, b)
        return r.astype(bool)
    if op is Bin.ADD:
        return np.add(a, b)
    if op is Bin.SUB:
        return np.subtract(a, b)
    if op is Bin.MUL:
        return np.multiply(a, b)
    if op is Bin.AND:
        return np.bitwise_and(a, b)
    if op is Bin.OR:
        return np.bitwise_or(a, b)
    if op is Bin.XOR:
        return np.bitwise_xor(a, b)
    if op in (Bin.IDIV, Bin.MOD):
        if np.any(b == 0):
            raise ValueError_(f"integer {'division' if op is Bin.IDIV else 'remainder'} by zero {where}")
        bb = np.where(b == 0, 1, b).astype(a.dtype)
        if not dt.is_signed:
            return (a // bb) if op is Bin.IDIV else (a % bb)
        # C: the quotient truncates toward zero; MIN // -1 wraps to MIN, MIN % -1 is 0
        neg1 = bb == -1
        safe = np.where(neg1, 1, bb).astype(a.dtype)
        q = a // safe
        q = q + ((a % safe != 0) & ((a < 0) != (safe < 0))).astype(a.dtype)
        q = np.where(neg1, np.negative(a), q).astype(a.dtype)
        if op is Bin.IDIV:
            return q
        return np.where(neg1, np.zeros_like(a), np.subtract(a, np.multiply(q, safe))).astype(a.dtype)
    if op in (Bin.SHL, Bin.SHR):
        bad = (b < 0) | (b >= dt.bits)
        if np.any(bad):
            raise ValueError_(f"shift amount {int(np.asarray(b)[np.asarray(bad, bool)].flat[0]) if np.ndim(b) else int(b)}"
                              f" outside 0..{dt.bits - 1} for {dt!r} {where}")
        sh = np.asarray(b).astype(a.dtype)
        if op is Bin.SHL:
            u = a.view(np.dtype(f"u{a.dtype.itemsize}")) if dt.is_signed else a
            return np.left_shift(u, sh.astype(u.dtype)).view(a.dtype) if dt.is_signed else np.left_shift(u, sh)
        return np.right_shift(a, sh)     # arithmetic for signed carriers, logical for unsigned
    raise ValueError_(f"{op.value} is not defined on integers")


def binary(op: Bin, dt: Dt, a, b, where: str = ""):
    with np.errstate(all="ignore"):
        if dt.is_float:
            return float_op(lambda x, y: _float_binary(op, x, y), dt, a, b)
        return np.asarray(_int_binary(op, dt, a, b, where))


def unary(op: Un, dt: Dt, a):
    with np.errstate(all="ignore"):
        if op is Un.NOT:
            return np.logical_not(a)
        if op is Un.INVERT:
            return np.invert(np.asarray(a))
        if dt.is_float:
            fn = {Un.NEG: np.negative, Un.ABS: np.abs, Un.FLOOR: np.floor, Un.CEIL: np.ceil}[op]
            return float_op(fn, dt, a)
        if op is Un.NEG:
            return np.negative(np.asarray(a))
        if op is Un.ABS:
            return np.abs(np.asarray(a)) if dt.is_signed else np.asarray(a)
    raise ValueError_(f"{op.value} is not defined on {dt!r}")


def compare(op: Cmp, dt: Dt, a, b):
    if dt.is_float:
        a, b = _wide_float(a, dt), _wide_float(b, dt)
    fn = {Cmp.LT: np.less, Cmp.LE: np.less_equal, Cmp.GT: np.greater, Cmp.GE: np.greater_equal,
          Cmp.EQ: np.equal, Cmp.NE: np.not_equal}[op]
    return np.asarray(fn(a, b))


def minmax(is_max: bool, nan_all: bool, dt: Dt, a, b):
    """tl.maximum/minimum: ints by value (signedness of the type). Floats: a NaN operand
    gives the other operand (both NaN: NaN) unless propagate_nan=ALL, where any NaN
    gives NaN; -0 counts as below +0."""
    a, b = np.asarray(a), np.asarray(b)
    if not dt.is_float:
        return np.maximum(a, b) if is_max else np.minimum(a, b)
    x, y = _wide_float(a, dt), _wide_float(b, dt)
    # order key on (value, sign): +0 above -0
    xs = np.signbit(x)
    if is_max:
        pick_x = (x > y) | ((x == y) & ~xs)
    else:
        pick_x = (x < y) | ((x == y) & xs)
    xn, yn = np.isnan(x), np.isnan(y)
    if nan_all:
        pick_x = np.where(xn, True, np.where(yn, False, pick_x))
    else:
        pick_x = np.where(yn, True, np.where(xn, False, pick_x))
    return np.where(pick_x, a, b)

"""Triton's typing rules on tile types: literals, promotion, broadcasting (DESIGN §10).

These follow triton.language.semantic (3.9): a Python number next to a tile is
"weak" (it takes the tile's type unless its kind -- bool < unsigned < signed <
float -- is higher); otherwise f64 > f32 > f16 > bf16 (bf16 with anything but
bf16 gives f32), `/` and `%` on floats compute in at least f32, and integers
follow C's usual arithmetic conversions.
"""
from __future__ import annotations

from .tir import INT_BY, Dt, int_range


class PromotionError(Exception):
    pass


def literal_type(x) -> Dt:
    """The type Triton gives a Python literal (semantic.to_tensor_type)."""
    if isinstance(x, bool):
        return Dt.I1
    if isinstance(x, int):
        if -2 ** 31 <= x < 2 ** 31:
            return Dt.I32
        if 2 ** 31 <= x < 2 ** 32:
            return Dt.U32
        if -2 ** 63 <= x < 2 ** 63:
            return Dt.I64
        if 2 ** 63 <= x < 2 ** 64:
            return Dt.U64
        raise PromotionError(f"integer {x} is not representable in 64 bits")
    if isinstance(x, float):
        a = abs(x)
        if a == float("inf") or a == 0.0 or x != x or 2.0 ** -126 <= a <= (2 - 2 ** -23) * 2.0 ** 127:
            return Dt.F32
        return Dt.F64
    raise PromotionError(f"cannot make a tile of {type(x).__name__}")


def arg_type(x) -> Dt:
    """The type of a scalar kernel argument (Triton's specialisation: ints by range,
    i32 then i64 then u64; floats fp32; bools int1)."""
    if isinstance(x, bool):
        return Dt.I1
    if isinstance(x, int):
        if -2 ** 31 <= x < 2 ** 31:
            return Dt.I32
        if -2 ** 63 <= x < 2 ** 63:
            return Dt.I64
        if x < 2 ** 64:
            return Dt.U64
        raise PromotionError(f"integer argument {x} is not representable in 64 bits")
    if isinstance(x, float):
        return Dt.F32
    raise PromotionError(f"unsupported scalar argument of type {type(x).__name__}")


def _kind(d: Dt) -> int:
    return d.kind


def integer_promote(a: Dt, b: Dt) -> Dt:
    if a.is_signed == b.is_signed:
        return a if a.bits > b.bits else b
    if not a.is_signed:
        return a if a.bits >= b.bits else b
    return b if b.bits >= a.bits else a


def computation_type(a: Dt, a_weak: bool, b: Dt, b_weak: bool, div_or_mod: bool = False) -> Dt:
    if a_weak != b_weak:
        s, t = (a, b) if a_weak else (b, a)
        if _kind(s) <= _kind(t):
            a, b = t, t
    if Dt.F64 in (a, b):
        return Dt.F64
    if div_or_mod and (a.is_float or b.is_float):
        return Dt.F32
    if Dt.F32 in (a, b):
        return Dt.F32
    if Dt.F16 in (a, b):
        return Dt.F16
    if a is Dt.BF16 and b is Dt.BF16:
        return Dt.BF16
    if Dt.BF16 in (a, b):
        return Dt.F32
    if div_or_mod and a.is_signed != b.is_signed:
        raise PromotionError(f"cannot use /, // or % with {a!r} and {b!r}: they differ in signedness; "
                             "cast them to the same signedness")
    return integer_promote(a, b)


def check_literal_fits(x, d: Dt) -> None:
    if isinstance(x, (int, bool)) and d.is_int:
        lo, hi = int_range(d)
        if x < 0 and not d.is_signed:
            raise PromotionError("a binary operation between an unsigned tile and a negative literal; "
                                 "cast one of them explicitly")
        if not lo <= x <= hi:
            raise PromotionError(f"literal {x} is out of range for {d!r}")


def broadcast_shapes(a: tuple, b: tuple) -> tuple:
    """Triton's broadcast: a scalar takes the other's shape; ranks are aligned on the
    right (leading 1s added); each pair of dims equal or one of them 1."""
    if a == b:
        return a
    if not a:
        return b
    if not b:
        return a
    n = max(len(a), len(b))
    a2, b2 = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a2, b2):
        if x != y and 1 not in (x, y):
            raise PromotionError(f"cannot broadcast shapes {list(a)} and {list(b)}")
        out.append(max(x, y))
    return tuple(out)


__all__ = ["INT_BY", "literal_type", "arg_type", "computation_type", "integer_promote",
           "check_literal_fits", "broadcast_shapes", "PromotionError"]

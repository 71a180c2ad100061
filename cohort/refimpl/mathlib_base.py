"""The helpers the math library's templates are written with (mathlib, mathlib_trig, and
cohort.triton's extra functions): f32/i32 literals, Horner's rule in fused multiply-adds,
NaN-aware min/max and the f32 <-> i32 reinterpretations."""
from __future__ import annotations

from .ir import DType, Expr, Op, binary, bitcast, const, fma

F, I = DType.F32, DType.I32


def c(v: float) -> Expr:
    return const(v, F)


def ci(v: int) -> Expr:
    return const(v, I)


def horner(x: Expr, coeffs) -> Expr:
    """c0 + x*(c1 + x*(c2 + ...)), one fused multiply-add per step."""
    acc = c(coeffs[-1])
    for k in reversed(coeffs[:-1]):
        acc = fma(acc, x, c(k))
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

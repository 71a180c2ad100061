"""Expressions: the frozen `Expr` node, the type rule every constructor applies, and the constructors.

Expressions are immutable DAG nodes; the same node may be shared, so evaluators memoise by
identity. Every constructor types its node with `result_dtype`, which reads the operation's
signature in its opdefs record; a cast of a literal is folded here, exactly as the
interpreter converts (semantics.convert_scalar).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from .irtypes import I32_MAX, I32_MIN, U32_MAX, DType, IRTypeError, Op
from .opdefs import OPDEFS
from .semantics import convert_scalar


@dataclass(frozen=True, eq=False, slots=True)
class Expr:
    op: Op
    dtype: DType
    src: tuple = ()
    arg: Any = None

    # Operator sugar for building IR from Python (the fuzzer, the math library).
    def __add__(self, o): return binary(Op.ADD, self, o)
    def __radd__(self, o): return binary(Op.ADD, o, self)
    def __sub__(self, o): return binary(Op.SUB, self, o)
    def __rsub__(self, o): return binary(Op.SUB, o, self)
    def __mul__(self, o): return binary(Op.MUL, self, o)
    def __rmul__(self, o): return binary(Op.MUL, o, self)
    def __truediv__(self, o): return binary(Op.DIV, self, o)
    def __rtruediv__(self, o): return binary(Op.DIV, o, self)
    def __neg__(self): return unary(Op.NEG, self)
    def __lt__(self, o): return binary(Op.LT, self, o)
    def __le__(self, o): return binary(Op.LE, self, o)
    def __gt__(self, o): return binary(Op.GT, self, o)
    def __ge__(self, o): return binary(Op.GE, self, o)
    def __and__(self, o): return binary(Op.AND, self, o)
    def __or__(self, o): return binary(Op.OR, self, o)
    def __xor__(self, o): return binary(Op.XOR, self, o)
    def __lshift__(self, o): return binary(Op.SHL, self, o)
    def __rshift__(self, o): return binary(Op.SHR, self, o)


# ---------------------------------------------------------------- type rules

def result_dtype(op: Op, srcs: tuple, dtype: Optional[DType] = None) -> DType:
    """The dtype of `op` applied to sources of dtypes `srcs`; raises IRTypeError.

    `dtype` is the requested dtype for ops that carry one (CAST, BITCAST, leaves).
    The rule is the op's signature in the registry (opdefs.py).
    """
    return OPDEFS[op].result_dtype(srcs, dtype)


# ---------------------------------------------------------------- constructors

Operand = Union[Expr, int, float, bool]


def const(value, dtype: DType) -> Expr:
    """A literal, stored as the exact value it has in `dtype`."""
    if dtype is DType.F32:
        value = float(np.float32(value))
    elif dtype is DType.BOOL:
        value = bool(value)
    else:
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise IRTypeError(f"literal {value!r} is not an integer; it cannot be a {dtype.value}")
        value = int(value)
        lo, hi = (I32_MIN, I32_MAX) if dtype is DType.I32 else (0, U32_MAX)
        if not lo <= value <= hi:
            raise IRTypeError(f"literal {value} does not fit in {dtype.value}")
    return Expr(Op.CONST, dtype, (), value)


def lift(x: Operand, like: Optional[Expr] = None) -> Expr:
    """Python literals are weakly typed: they take the type of the other operand."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return const(x, DType.BOOL)
    if like is not None and like.dtype.is_number:
        if isinstance(x, float) and like.dtype.is_int:
            raise IRTypeError(f"float literal {x} used with {like.dtype.value}")
        return const(x, like.dtype)
    return const(x, DType.F32 if isinstance(x, float) else DType.I32)


def unary(op: Op, a: Operand) -> Expr:
    a = lift(a)
    return Expr(op, result_dtype(op, (a.dtype,)), (a,))


def binary(op: Op, a: Operand, b: Operand) -> Expr:
    if not isinstance(a, Expr):
        b = lift(b)
        a = lift(a, b)
    else:
        b = lift(b, a)
    return Expr(op, result_dtype(op, (a.dtype, b.dtype)), (a, b))


def select(c: Operand, a: Operand, b: Operand) -> Expr:
    c = lift(c)
    if not isinstance(a, Expr):
        b = lift(b)
        a = lift(a, b)
    else:
        b = lift(b, a)
    return Expr(Op.SELECT, result_dtype(Op.SELECT, (c.dtype, a.dtype, b.dtype)), (c, a, b))


def fma(a: Operand, b: Operand, c: Operand) -> Expr:
    """a*b + c rounded once; literals take f32."""
    a, b, c = (x if isinstance(x, (Expr, bool)) else const(x, DType.F32) for x in (a, b, c))
    a, b, c = lift(a), lift(b), lift(c)
    return Expr(Op.FMA, result_dtype(Op.FMA, (a.dtype, b.dtype, c.dtype)), (a, b, c))


def cast(a: Operand, dtype: DType) -> Expr:
    a = lift(a)
    if a.dtype is dtype:
        return a
    result_dtype(Op.CAST, (a.dtype,), dtype)   # a value type (no cast to bf16/f16: a store rounds)
    if a.op is Op.CONST:  # a literal converted at build time, exactly as CAST would
        return const(convert_scalar(a.arg, a.dtype, dtype), dtype)
    return Expr(Op.CAST, dtype, (a,))


def bitcast(a: Expr, dtype: DType) -> Expr:
    if a.dtype is dtype:
        return a
    return Expr(Op.BITCAST, result_dtype(Op.BITCAST, (a.dtype,), dtype), (a,))


def math(fn: str, a: Operand) -> Expr:
    a = lift(a)
    return Expr(Op.MATH, result_dtype(Op.MATH, (a.dtype,)), (a,), fn)


def var(name: str, dtype: DType) -> Expr:
    return Expr(Op.VAR, dtype, (), name)


def param(name: str, dtype: DType) -> Expr:
    return Expr(Op.PARAM, dtype, (), name)


def load(buf: str, index: Expr, dtype: DType) -> Expr:
    return Expr(Op.LOAD, result_dtype(Op.LOAD, (index.dtype,), dtype), (index,), buf)


def pload(arr: str, index: Expr, dtype: DType) -> Expr:
    return Expr(Op.PLOAD, result_dtype(Op.PLOAD, (index.dtype,), dtype), (index,), arr)


def sload(arr: str, index: Expr, dtype: DType) -> Expr:
    return Expr(Op.SLOAD, result_dtype(Op.SLOAD, (index.dtype,), dtype), (index,), arr)


def builtin(op: Op, arg=None) -> Expr:
    return Expr(op, result_dtype(op, ()), (), arg)


def walk_expr(e: Expr, seen=None):
    """Every node of an expression DAG once, sources before users."""
    seen = set() if seen is None else seen
    stack = [(e, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in seen:
            continue
        if done:
            seen.add(id(node))
            yield node
        else:
            stack.append((node, True))
            for s in reversed(node.src):
                if id(s) not in seen:
                    stack.append((s, False))

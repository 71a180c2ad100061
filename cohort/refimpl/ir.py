"""The kernel IR: types, one Enum of operations, small frozen nodes.

A kernel is a tuple of statements over expressions. Expressions are immutable
DAG nodes (`Expr`); the same node may be shared, so evaluators memoise by
identity. Statements carry a source location for error messages.

Each operation's meaning and facts live in its record in `opdefs.py`; the type
rules are applied by `result_dtype` and nowhere else: the frontend, the
validator and the fuzzer's builder all call it.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np


class DType(enum.Enum):
    F32 = "f32"
    I32 = "i32"
    U32 = "u32"
    BOOL = "bool"
    BF16 = "bf16"    # storage only (Buffer[bf16]): loads widen to f32, stores round (DESIGN §3)
    F16 = "f16"      # storage only (Buffer[f16])

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype of a buffer of this type (bf16: its bits, as uint16)."""
        return _NP[self]

    @property
    def is_storage(self) -> bool:
        """A buffer element type only: no value has it (bf16, f16)."""
        return self in (DType.BF16, DType.F16)

    @property
    def compute(self) -> "DType":
        """The type of a value loaded from, or stored to, a buffer of this type."""
        return DType.F32 if self.is_storage else self

    @property
    def is_float(self) -> bool:
        return self is DType.F32

    @property
    def is_int(self) -> bool:
        return self in (DType.I32, DType.U32)

    @property
    def is_number(self) -> bool:
        return self in (DType.F32, DType.I32, DType.U32)

    def __repr__(self) -> str:
        return self.value


f32, i32, u32, boolean = DType.F32, DType.I32, DType.U32, DType.BOOL
_NP = {DType.F32: np.dtype(np.float32), DType.I32: np.dtype(np.int32),
       DType.U32: np.dtype(np.uint32), DType.BOOL: np.dtype(np.bool_),
       DType.BF16: np.dtype(np.uint16), DType.F16: np.dtype(np.float16)}
DTYPE_BY_NAME = {d.value: d for d in DType}
VALUE_DTYPES = (DType.F32, DType.I32, DType.U32, DType.BOOL)     # the types a value can have
STORAGE_DTYPES = (DType.BF16, DType.F16)
I32_MIN, I32_MAX, U32_MAX = -(2 ** 31), 2 ** 31 - 1, 2 ** 32 - 1


class Op(enum.Enum):
    """Every operation, in labelled groups; opdefs.OPDEFS holds one record for each."""
    # leaves
    CONST = enum.auto()        # arg: Python value (float/int/bool)
    PARAM = enum.auto()        # arg: name of a scalar or Const parameter
    VAR = enum.auto()          # arg: name of a thread-local variable
    ARG = enum.auto()          # arg: index; placeholder inside math templates
    # built-ins
    THREAD_ID = enum.auto()
    BLOCK_ID = enum.auto()
    GLOBAL_ID = enum.auto()
    BLOCK_SIZE = enum.auto()
    NUM_THREADS = enum.auto()
    BUFLEN = enum.auto()       # arg: buffer name
    # unary
    NEG = enum.auto()
    NOT = enum.auto()          # logical not on bool, bitwise not on ints
    ABS = enum.auto()
    SQRT = enum.auto()
    # binary arithmetic
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    DIV = enum.auto()          # float: IEEE; int: C truncation
    MOD = enum.auto()          # int only: C remainder (sign of dividend)
    MIN = enum.auto()          # a if a < b else b
    MAX = enum.auto()          # a if a > b else b
    # ternary arithmetic
    FMA = enum.auto()          # f32 only: a*b + c rounded once (IEEE fusedMultiplyAdd)
    # bitwise (ints; AND/OR/XOR also on bool)
    AND = enum.auto()
    OR = enum.auto()
    XOR = enum.auto()
    SHL = enum.auto()
    SHR = enum.auto()          # arithmetic on i32, logical on u32
    # comparisons (float: ordered, except NE which is unordered)
    LT = enum.auto()
    LE = enum.auto()
    GT = enum.auto()
    GE = enum.auto()
    EQ = enum.auto()
    NE = enum.auto()
    # selection and conversion
    SELECT = enum.auto()       # src (c, a, b): a where c else b; a and b evaluated lazily
    CAST = enum.auto()         # value conversion to self.dtype
    BITCAST = enum.auto()      # reinterpret 32 bits as self.dtype
    # memory
    LOAD = enum.auto()         # arg: buffer name; src (index,)
    PLOAD = enum.auto()        # arg: private array name; src (index,)
    SLOAD = enum.auto()        # arg: shared array name; src (index,)
    # math library
    MATH = enum.auto()         # arg: function name; src (x,); defined in mathlib


class Reduce(enum.Enum):
    SUM = "block_sum"
    MAX = "block_max"
    MIN = "block_min"


class AtomicOp(enum.Enum):
    """Read-modify-write statements; each is commutative and associative on its types,
    so the final memory is the same for every order of the updates (DESIGN §3)."""
    ADD = "atomic_add"       # i32/u32, wrapping
    SUB = "atomic_sub"       # i32/u32, wrapping (adds the negation)
    MIN = "atomic_min"       # i32/u32; f32 in the total order below
    MAX = "atomic_max"
    AND = "atomic_and"       # i32/u32
    OR = "atomic_or"
    XOR = "atomic_xor"


class ParamKind(enum.Enum):
    BUFFER = "buffer"
    SCALAR = "scalar"
    CONST = "const"


class IRTypeError(TypeError):
    """A type rule was broken; the frontend adds the source line."""


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
    return _opdefs()[op].result_dtype(srcs, dtype)


def _opdefs() -> dict:
    global _OPDEFS
    if _OPDEFS is None:   # the registry is built on this module, so it is imported on first use
        from .opdefs import OPDEFS
        _OPDEFS = OPDEFS
    return _OPDEFS


_OPDEFS = None


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
        from .semantics import convert_scalar
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


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class Loc:
    line: Optional[int] = None
    text: str = ""

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "statement"
        return f"{where}: `{self.text}`" if self.text else where


NOLOC = Loc()


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind
    dtype: DType


@dataclass(frozen=True, eq=False)
class Kernel:
    name: str
    params: tuple
    body: tuple
    block: int = 32
    consts: tuple = ()    # ((name, value), ...) once specialised
    specialised: bool = False

    def param(self, name: str) -> Optional[Param]:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def buffers(self) -> tuple:
        return tuple(p for p in self.params if p.kind is ParamKind.BUFFER)

    @property
    def scalars(self) -> tuple:
        return tuple(p for p in self.params if p.kind is ParamKind.SCALAR)

    @property
    def const_params(self) -> tuple:
        return tuple(p for p in self.params if p.kind is ParamKind.CONST)

    @property
    def cooperative(self) -> bool:
        """The kernel declares a shared array or has a barrier: it launches whole blocks, every
        thread of a started block existing, global_id() >= n included (DESIGN §2's launch rule)."""
        c = self.__dict__.get("_cooperative")
        if c is None:
            c = any(isinstance(s, (Shared, Barrier)) for s in walk_stmts(self.body))
            object.__setattr__(self, "_cooperative", c)
        return c

    def __str__(self) -> str:
        from .printer import format_kernel
        return format_kernel(self)


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


# the statements live in stmts.py (imported last: they are built on the types above)
from .stmts import (  # noqa: E402,F401
    STMT_BY_TAG,
    STMTDEFS,
    Assign,
    Atomic,
    Barrier,
    Collective,
    Field,
    For,
    If,
    Private,
    PStore,
    Shared,
    SStore,
    Stmt,
    StmtDef,
    Store,
    defined_name,
    defined_var,
    map_stmts,
    rebuild,
    rewrite_stmts,
    stmt_bodies,
    stmt_def,
    stmt_exprs,
    walk_stmts,
    written_name,
)

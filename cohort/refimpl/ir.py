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
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

import numpy as np


class DType(enum.Enum):
    F32 = "f32"
    I32 = "i32"
    U32 = "u32"
    BOOL = "bool"

    @property
    def np(self) -> np.dtype:
        return _NP[self]

    @property
    def is_float(self) -> bool:
        return self is DType.F32

    @property
    def is_int(self) -> bool:
        return self in (DType.I32, DType.U32)

    @property
    def is_number(self) -> bool:
        return self is not DType.BOOL

    def __repr__(self) -> str:
        return self.value


f32, i32, u32, boolean = DType.F32, DType.I32, DType.U32, DType.BOOL
_NP = {DType.F32: np.dtype(np.float32), DType.I32: np.dtype(np.int32),
       DType.U32: np.dtype(np.uint32), DType.BOOL: np.dtype(np.bool_)}
DTYPE_BY_NAME = {d.value: d for d in DType}
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


# Every statement kind is one frozen dataclass plus one `StmtDef` record below
# (its fields by kind, JSON tag, printed line, what it defines and writes). The
# generic walk, map, rebuild, serialisation and printing read the records; the
# passes with a rule per kind (interpreter, validator, lowering) keep tables keyed
# by class, and tests/test_stmt_protocol.py fails when one misses a kind.

@dataclass(frozen=True, eq=False)
class Assign:
    name: str
    value: Expr
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class Store:
    buf: str
    index: Expr
    value: Expr
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class PStore:
    arr: str
    index: Expr
    value: Expr
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class Private:
    """A per-thread array of compile-time size, zero-initialised."""
    name: str
    dtype: DType
    size: Expr            # compile-time constant expression
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class If:
    cond: Expr
    then: tuple
    orelse: tuple = ()
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class For:
    """for var in range(start, stop, step); step is a nonzero compile-time constant."""
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class Collective:
    """name = block_sum/max/min(value); only at the top level of a kernel body."""
    name: str
    op: Reduce
    value: Expr
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class Shared:
    """A per-block array of compile-time size, shared by the block's threads, alive for
    the block; not initialised (reading a slot no thread of the block wrote is an error)."""
    name: str
    dtype: DType
    size: Expr            # compile-time constant expression
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class SStore:
    arr: str
    index: Expr
    value: Expr
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class Barrier:
    """Every active thread of the block waits here until all have arrived; allowed only
    under block-uniform control. Orders the block's memory accesses (DESIGN §3)."""
    loc: Loc = NOLOC


@dataclass(frozen=True, eq=False)
class Atomic:
    """op(target, index, value): target[index] = target[index] op value as one
    indivisible update, on a buffer or a shared array; no value is returned."""
    op: AtomicOp
    target: str
    index: Expr
    value: Expr
    loc: Loc = NOLOC


class Field(enum.Enum):
    """What a statement field holds."""
    NAME = "name"        # a str: a variable, buffer or array name
    EXPR = "expr"        # an Expr the statement evaluates
    BODY = "body"        # a tuple of statements
    DTYPE = "dtype"      # a DType
    ENUM = "enum"        # a member of the field's enum (stored by value)


@dataclass(frozen=True)
class StmtDef:
    """One statement kind: the structure every generic pass reads."""
    cls: type
    tag: str                       # JSON `kind`, the IR dump's first word
    fields: tuple                  # ((name, Field, enum class or None), ...), constructor order
    line: str                      # its own printed line: str.format over the fields' texts
    defines: Optional[str] = None  # the field naming the variable it assigns
    writes: Optional[str] = None   # the field naming the buffer or array it stores to
    top_level: bool = False        # allowed only at the top level of a kernel body
    blocking: bool = False         # its meaning involves the whole block (a collective, a barrier)
    keywords: tuple = ()           # ((body field, keyword), ...): bodies after the first, printed
                                   # `keyword:` and left out when empty (an if's else)

    def names(self, kind: Field) -> tuple:
        return tuple(f for f, k, _ in self.fields if k is kind)


def _fields(*spec) -> tuple:
    return tuple((f[0], f[1], f[2] if len(f) > 2 else None) for f in spec)


N, E, BD, DT = Field.NAME, Field.EXPR, Field.BODY, Field.DTYPE
STMTDEFS = {d.cls: d for d in (
    StmtDef(Assign, "assign", _fields(("name", N), ("value", E)), "{name} = {value}", defines="name"),
    StmtDef(Store, "store", _fields(("buf", N), ("index", E), ("value", E)), "{buf}[{index}] = {value}",
            writes="buf"),
    StmtDef(PStore, "pstore", _fields(("arr", N), ("index", E), ("value", E)), "{arr}[{index}] = {value}",
            writes="arr"),
    StmtDef(Private, "private", _fields(("name", N), ("dtype", DT), ("size", E)),
            "{name} = private({dtype}, {size})", top_level=True),
    StmtDef(If, "if", _fields(("cond", E), ("then", BD), ("orelse", BD)), "if {cond}:",
            keywords=(("orelse", "else"),)),
    StmtDef(For, "for", _fields(("var", N), ("start", E), ("stop", E), ("step", E), ("body", BD)),
            "for {var} in range({start}, {stop}, {step}):", defines="var"),
    StmtDef(Collective, "collective", _fields(("name", N), ("op", Field.ENUM, Reduce), ("value", E)),
            "{name} = {op}({value})", defines="name", top_level=True, blocking=True),
    StmtDef(Shared, "shared", _fields(("name", N), ("dtype", DT), ("size", E)),
            "{name} = shared({dtype}, {size})", top_level=True, blocking=True),
    StmtDef(SStore, "sstore", _fields(("arr", N), ("index", E), ("value", E)), "{arr}[{index}] = {value}",
            writes="arr"),
    StmtDef(Barrier, "barrier", (), "barrier()", blocking=True),
    StmtDef(Atomic, "atomic", _fields(("op", Field.ENUM, AtomicOp), ("target", N), ("index", E), ("value", E)),
            "{op}({target}, {index}, {value})", writes="target"),
)}
del N, E, BD, DT
STMT_BY_TAG = {d.tag: d for d in STMTDEFS.values()}
Stmt = Union[tuple(STMTDEFS)]


def stmt_def(s) -> StmtDef:
    d = STMTDEFS.get(type(s))
    if d is None:
        raise TypeError(f"not a statement: {s!r}")
    return d


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

    def __str__(self) -> str:
        from .printer import format_kernel
        return format_kernel(self)


def walk_stmts(body):
    """Every statement, depth first, parents before children."""
    for s in body:
        yield s
        for b in stmt_bodies(s):
            yield from walk_stmts(b)


def stmt_exprs(s) -> tuple:
    """The expressions a statement evaluates itself (not those of nested bodies)."""
    return tuple(getattr(s, f) for f in stmt_def(s).names(Field.EXPR))


def stmt_bodies(s) -> tuple:
    """The statement lists nested in `s` (an if's two branches, a loop's body)."""
    return tuple(getattr(s, f) for f in stmt_def(s).names(Field.BODY))


def defined_name(s) -> Optional[str]:
    """The variable `s` assigns (a loop's variable too), if any."""
    f = stmt_def(s).defines
    return None if f is None else getattr(s, f)


def defined_var(s) -> Optional[tuple]:
    """(name, dtype) of the variable `s` assigns, if any: a loop variable is i32,
    anything else has its value's type."""
    f = stmt_def(s).defines
    if f is None:
        return None
    return getattr(s, f), DType.I32 if isinstance(s, For) else s.value.dtype


def written_name(s) -> Optional[str]:
    """The buffer or array `s` stores to, if any."""
    f = stmt_def(s).writes
    return None if f is None else getattr(s, f)


def rebuild(s, exprs=None, bodies=None):
    """`s` with its own expressions (in stmt_exprs order) and/or nested bodies replaced."""
    d = stmt_def(s)
    new = {}
    if exprs is not None:
        new.update(zip(d.names(Field.EXPR), exprs, strict=True))
    if bodies is not None:
        new.update(zip(d.names(Field.BODY), (tuple(b) for b in bodies), strict=True))
    return replace(s, **new) if new else s


def map_stmts(body, ex) -> tuple:
    """`body` with every statement's own expressions replaced by ex(e), nested bodies
    too (a rewrite of a kernel's expressions; ex memoises if the DAG must stay shared)."""
    return tuple(rebuild(s, [ex(e) for e in stmt_exprs(s)], [map_stmts(b, ex) for b in stmt_bodies(s)])
                 for s in body)


def rewrite_stmts(body, fn) -> tuple:
    """`body` with each statement s replaced by fn(s) when that is not None (a sequence
    of statements, not rewritten further); other statements keep their place with
    their nested bodies rewritten."""
    out = []
    for s in body:
        r = fn(s)
        if r is not None:
            out.extend(r)
        else:
            bodies = stmt_bodies(s)
            out.append(rebuild(s, bodies=[rewrite_stmts(b, fn) for b in bodies]) if bodies else s)
    return tuple(out)


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

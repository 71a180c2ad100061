"""The tile IR: what a specialised Triton program is (DESIGN §10).

Every value is a tile: a static shape (a tuple of powers of two, or `()` for a
scalar) and an explicit element type (`Dt`, or `Ptr(Dt)` for pointer tiles).
Expressions are small frozen DAG nodes (`Node`) of one Enum of operations
(`K`); statements (`Let`, `Load`, `Store`, `Atomic`, `For`, `While`, `If`,
`Return`, `Assert`) carry their kernel source line. Loads and atomics are
statements, so every expression is pure and the statements fix the order of
memory effects. `verify` checks a program's types and shapes before it runs.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np


class Dt(enum.Enum):
    """Element types: name, bits, kind (0 bool, 1 unsigned, 2 signed, 3 float)."""
    I1 = ("int1", 1, 0)
    I8 = ("int8", 8, 2)
    I16 = ("int16", 16, 2)
    I32 = ("int32", 32, 2)
    I64 = ("int64", 64, 2)
    U8 = ("uint8", 8, 1)
    U16 = ("uint16", 16, 1)
    U32 = ("uint32", 32, 1)
    U64 = ("uint64", 64, 1)
    F16 = ("fp16", 16, 3)
    BF16 = ("bf16", 16, 3)
    F32 = ("fp32", 32, 3)
    F64 = ("fp64", 64, 3)

    @property
    def bits(self) -> int:
        return self.value[1]

    @property
    def kind(self) -> int:
        return self.value[2]

    @property
    def is_float(self) -> bool:
        return self.kind == 3

    @property
    def is_int(self) -> bool:
        return self.kind < 3          # int1 counts as an integer, as in Triton

    @property
    def is_signed(self) -> bool:
        return self.kind == 2

    @property
    def np(self) -> np.dtype:
        """The NumPy array type that carries the values (bf16: its bits as uint16)."""
        return _NP[self]

    @property
    def mantissa(self) -> int:
        return {Dt.F16: 10, Dt.BF16: 7, Dt.F32: 23, Dt.F64: 52}.get(self, 0)

    def __repr__(self) -> str:
        return self.value[0]


_NP = {Dt.I1: np.dtype(np.bool_), Dt.I8: np.dtype(np.int8), Dt.I16: np.dtype(np.int16),
       Dt.I32: np.dtype(np.int32), Dt.I64: np.dtype(np.int64), Dt.U8: np.dtype(np.uint8),
       Dt.U16: np.dtype(np.uint16), Dt.U32: np.dtype(np.uint32), Dt.U64: np.dtype(np.uint64),
       Dt.F16: np.dtype(np.float16), Dt.BF16: np.dtype(np.uint16), Dt.F32: np.dtype(np.float32),
       Dt.F64: np.dtype(np.float64)}
DT_BY_NAME = {d.value[0]: d for d in Dt}
INT_BY = {(d.bits, d.is_signed): d for d in Dt if d.is_int and d is not Dt.I1}


def int_range(d: Dt) -> tuple:
    if d is Dt.I1:
        return 0, 1
    if d.is_signed:
        return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1
    return 0, (1 << d.bits) - 1


@dataclass(frozen=True)
class Ptr:
    """A pointer to elements of `elem` (global memory of one kernel argument)."""
    elem: Dt

    def __repr__(self) -> str:
        return f"*{self.elem!r}"


Elem = Union[Dt, Ptr]


@dataclass(frozen=True)
class TT:
    """A tile type: element type and static shape (`()` is a scalar)."""
    elem: Elem
    shape: tuple = ()

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def is_ptr(self) -> bool:
        return isinstance(self.elem, Ptr)

    def with_elem(self, elem: Elem) -> "TT":
        return TT(elem, self.shape)

    def __repr__(self) -> str:
        return f"{self.elem!r}{list(self.shape)}" if self.shape else repr(self.elem)


class K(enum.Enum):
    """Every expression operation; `arg` as noted."""
    CONST = enum.auto()        # arg: Python value, splat over the shape
    PARAM = enum.auto()        # arg: argument name (scalars and pointers)
    VAR = enum.auto()          # arg: variable name
    PROGRAM_ID = enum.auto()   # arg: axis
    NUM_PROGRAMS = enum.auto() # arg: axis
    ARANGE = enum.auto()       # arg: start (end = start + shape[0])
    BROADCAST = enum.auto()    # to the node's shape (numpy rules, same rank)
    RESHAPE = enum.auto()      # row-major
    PERMUTE = enum.auto()      # arg: permutation of the axes
    EXPAND = enum.auto()       # arg: axis where a 1 is inserted
    CAST = enum.auto()         # value conversion to the node's element type
    BITCAST = enum.auto()      # same bits, the node's element type
    UNARY = enum.auto()        # arg: Un
    BINARY = enum.auto()       # arg: Bin
    MINMAX = enum.auto()       # arg: (is_max, propagate_nan_all)
    CMP = enum.auto()          # arg: Cmp
    FMA = enum.auto()
    WHERE = enum.auto()
    MATH = enum.auto()         # arg: function name (MATH_FNS)
    PTR_ADD = enum.auto()      # pointer tile + integer offset tile (element units)
    REDUCE = enum.auto()       # arg: (axis, Red); shape without the axis
    ARGREDUCE = enum.auto()    # arg: (axis, is_max); int32 indices
    SCAN = enum.auto()         # arg: (axis, Red, reverse)
    COMBINE = enum.auto()      # user reduce/scan: arg: (kind, axis, Region, result index, reverse)
    DOT = enum.auto()          # srcs: a [(B,)M,K], b [(B,)K,N], acc [(B,)M,N] (f32 unless out int)
    PHILOX = enum.auto()       # srcs: seed, offset; arg: (rounds, output index 0..3)
    JOIN = enum.auto()         # two tiles stacked on a new last axis of size 2
    SPLIT = enum.auto()        # arg: 0 or 1, the half of the last axis (size 2)
    UMULHI = enum.auto()
    GATHER = enum.auto()       # srcs: src, index (integers); arg: axis; index's shape, src's type
    HISTOGRAM = enum.auto()    # srcs: values (1-D, 32-bit integers)[, mask]; i32 [bins]: counts of 0..bins-1


class Un(enum.Enum):
    NEG = "-"
    INVERT = "~"
    NOT = "not"
    ABS = "abs"
    FLOOR = "floor"
    CEIL = "ceil"


class Bin(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"          # floats: IEEE division
    IDIV = "//"        # integers: truncates toward zero
    MOD = "%"          # integers: the dividend's sign; floats: fmod
    AND = "&"
    OR = "|"
    XOR = "^"
    SHL = "<<"
    SHR = ">>"         # arithmetic for signed, logical for unsigned


class Cmp(enum.Enum):
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="


class Red(enum.Enum):
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    XOR = "xor_sum"
    OR = "or"
    AND = "and"
    PROD = "prod"


MATH_FNS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "log1p", "expm1")


@dataclass(frozen=True, eq=False)
class Node:
    """One expression: operation, result tile type, operands, static argument."""
    op: K
    type: TT
    srcs: tuple = ()
    arg: Any = None

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def elem(self) -> Elem:
        return self.type.elem


@dataclass(frozen=True)
class Region:
    """A user combine function inlined: parameters bound to tiles, statements, results."""
    params: tuple        # variable names
    body: tuple          # statements (no memory access)
    results: tuple       # nodes


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class Let:
    var: str
    value: Node
    line: int


@dataclass(frozen=True)
class Load:
    var: str
    type: TT
    ptr: Node
    mask: Optional[Node]
    other: Optional[Node]
    line: int


@dataclass(frozen=True)
class Store:
    ptr: Node
    value: Node
    mask: Optional[Node]
    line: int


@dataclass(frozen=True)
class Atomic:
    var: str
    op: str              # add max min and or xor xchg cas
    ptr: Node
    value: Node
    cmp: Optional[Node]  # cas only
    mask: Optional[Node]
    line: int
    sem: str = "acq_rel"   # Triton's memory order: acq_rel, acquire, release, relaxed (racecheck.py)


@dataclass(frozen=True)
class For:
    var: str
    type: TT
    start: Node
    stop: Node
    step: Node
    body: tuple
    line: int


@dataclass(frozen=True)
class While:
    cond_body: tuple     # statements evaluated before each test
    cond: Node
    body: tuple
    line: int


@dataclass(frozen=True)
class If:
    cond: Node
    then: tuple
    orelse: tuple
    line: int


@dataclass(frozen=True)
class Return:
    line: int


@dataclass(frozen=True)
class Assert:
    cond: Node
    message: str
    line: int


@dataclass(frozen=True)
class Print:
    prefix: str
    values: tuple
    line: int


@dataclass(frozen=True)
class Program:
    """One specialisation of a kernel: its arguments' types, constants and body."""
    name: str
    filename: str
    params: tuple        # (name, TT) of the runtime arguments (pointers and scalars)
    consts: tuple        # (name, value) of the constexpr arguments
    body: tuple
    vars: dict           # variable name -> TT


# ---------------------------------------------------------------- verifier

class VerifyError(Exception):
    pass


def _walk(n: Node, seen: set):
    if id(n) in seen:
        return
    seen.add(id(n))
    for s in n.srcs:
        _walk(s, seen)
    check_node(n)


def check_node(n: Node) -> None:
    """The type rule of each operation; the frontend builds by them, this re-checks."""
    t, s = n.type, n.srcs
    bad = None
    elem_ok = isinstance(t.elem, (Dt, Ptr))
    if not elem_ok or any(not isinstance(x, int) or x < 1 for x in t.shape):
        bad = f"an element type and positive dimensions, not {t.elem!r} {t.shape}"
    elif n.op in (K.CONST, K.PARAM, K.VAR, K.PROGRAM_ID, K.NUM_PROGRAMS, K.ARANGE) and s:
        bad = "no operands"
    elif n.op in (K.PROGRAM_ID, K.NUM_PROGRAMS) and (t != TT(Dt.I32) or n.arg not in (0, 1, 2)):
        bad = "an i32 scalar of axis 0, 1 or 2"
    elif n.op is K.ARANGE and (t.elem is not Dt.I32 or len(t.shape) != 1):
        bad = "a 1-D i32 tile"
    elif n.op in (K.UNARY, K.BINARY, K.MINMAX, K.FMA, K.MATH, K.UMULHI):
        if any(x.type != t for x in s):
            bad = "operands of the result's type"
    elif n.op is K.CMP:
        if t.elem is not Dt.I1 or s[0].shape != t.shape or s[0].type != s[1].type:
            bad = "int1 result over operands of one type"
    elif n.op is K.WHERE:
        if s[0].elem is not Dt.I1 or any(x.shape != t.shape for x in s) or s[1].type != t or s[2].type != t:
            bad = "an int1 condition and two operands of the result's type"
    elif n.op is K.PTR_ADD:
        if not (s[0].type.is_ptr and isinstance(s[1].elem, Dt) and s[1].elem.is_int) or s[0].type != t \
                or s[1].shape != t.shape:
            bad = "a pointer tile plus an integer tile of its shape"
    elif n.op in (K.CAST, K.BITCAST):
        if s[0].shape != t.shape or not isinstance(s[0].elem, Dt) or not isinstance(t.elem, Dt):
            bad = "a value tile of the result's shape"
        elif n.op is K.BITCAST and s[0].elem.bits != t.elem.bits:
            bad = "the same width"
    elif n.op is K.BROADCAST:
        a = s[0].shape
        if s[0].elem != t.elem or (a and (len(a) != len(t.shape)
                                          or any(x not in (1, y) for x, y in zip(a, t.shape)))):
            bad = "a scalar or a tile of the same rank with dimensions 1 or equal"
    elif n.op is K.RESHAPE:
        if s[0].type.numel != t.numel or s[0].elem != t.elem:
            bad = "as many elements of one type"
    elif n.op is K.PERMUTE:
        if sorted(n.arg) != list(range(len(s[0].shape))) or tuple(s[0].shape[d] for d in n.arg) != t.shape:
            bad = "a permutation of the operand's axes"
    elif n.op is K.EXPAND:
        a = n.arg
        if t.shape != s[0].shape[:a] + (1,) + s[0].shape[a:]:
            bad = "a 1 inserted at the axis"
    elif n.op in (K.REDUCE, K.ARGREDUCE, K.COMBINE) and (n.op is not K.COMBINE or n.arg[0] == "reduce"):
        a = n.arg[0] if n.op is not K.COMBINE else n.arg[1]
        if not 0 <= a < len(s[0].shape) or t.shape != s[0].shape[:a] + s[0].shape[a + 1:]:
            bad = "the operand's shape without the axis"
        elif n.op is K.ARGREDUCE and t.elem is not Dt.I32:
            bad = "i32 indices"
    elif n.op is K.SCAN or n.op is K.COMBINE:
        if s[0].shape != t.shape:
            bad = "the operand's shape"
    elif n.op is K.JOIN:
        if s[0].type != s[1].type or t.shape != s[0].shape + (2,):
            bad = "two tiles of one type stacked on a new last axis"
    elif n.op is K.SPLIT:
        if s[0].shape != t.shape + (2,):
            bad = "a last axis of 2"
    elif n.op is K.DOT:
        a, b, c = s
        batch = a.shape[:-2]
        if not (len(a.shape) == len(b.shape) in (2, 3) and b.shape[:-2] == batch and a.shape[-1] == b.shape[-2]
                and c.shape == batch + (a.shape[-2], b.shape[-1]) == t.shape and c.elem == t.elem == a.elem == b.elem):
            bad = "[(B,)M,K] x [(B,)K,N] + [(B,)M,N], one element type"
    elif n.op is K.GATHER:
        src, index = s
        a = n.arg
        if not (0 <= a < len(src.shape) == len(index.shape) and isinstance(index.elem, Dt) and index.elem.is_int
                and all(x == y for d, (x, y) in enumerate(zip(src.shape, index.shape)) if d != a)
                and t.shape == index.shape and t.elem == src.elem):
            bad = "an integer index of the source's rank, equal to it off the axis; the index's shape"
    elif n.op is K.HISTOGRAM:
        if not (len(s[0].shape) == 1 and s[0].elem in (Dt.I32, Dt.U32) and t == TT(Dt.I32, (n.arg,))
                and (len(s) == 1 or (s[1].shape == s[0].shape and s[1].elem is Dt.I1))):
            bad = "1-D 32-bit integer values (and an int1 mask of their shape); i32 [bins]"
    if bad:
        raise VerifyError(f"{n.op.name} node of type {t!r}: expected {bad}")


def verify(prog: Program) -> None:
    """Check every node's type rule and every statement's operands (shapes, element types)."""
    seen: set = set()

    def nodes(*ns):
        for n in ns:
            if n is not None:
                _walk(n, seen)

    def block(stmts):
        for st in stmts:
            if isinstance(st, Let):
                nodes(st.value)
                want = prog.vars.get(st.var)
                if want is not None and want != st.value.type:
                    raise VerifyError(f"line {st.line}: {st.var} is {want!r}, assigned {st.value.type!r}")
            elif isinstance(st, (Load, Store, Atomic)):
                nodes(st.ptr, st.mask, getattr(st, "other", None), getattr(st, "value", None),
                      getattr(st, "cmp", None))
                if not st.ptr.type.is_ptr:
                    raise VerifyError(f"line {st.line}: memory access through a non-pointer")
                if st.mask is not None and (st.mask.elem is not Dt.I1 or st.mask.shape != st.ptr.shape):
                    raise VerifyError(f"line {st.line}: the mask must be int1 of the pointer's shape")
            elif isinstance(st, For):
                nodes(st.start, st.stop, st.step)
                block(st.body)
            elif isinstance(st, While):
                block(st.cond_body)
                nodes(st.cond)
                block(st.body)
            elif isinstance(st, If):
                nodes(st.cond)
                if st.cond.shape != ():
                    raise VerifyError(f"line {st.line}: an if condition must be a scalar")
                block(st.then)
                block(st.orelse)
            elif isinstance(st, Assert):
                nodes(st.cond)
            elif isinstance(st, Print):
                nodes(*st.values)
    block(prog.body)


# ---------------------------------------------------------------- printer

def format_program(prog: Program) -> str:
    """A readable listing: one line per statement, each node once as %n = op(...) : type."""
    lines = [f"program {prog.name}(" + ", ".join(f"{n}: {t!r}" for n, t in prog.params) + ")"
             + (" consts " + ", ".join(f"{n}={v!r}" for n, v in prog.consts) if prog.consts else "")]
    names: dict = {}

    def ref(n: Node, out: list, ind: str) -> str:
        if n.op is K.VAR:
            return n.arg
        if n.op is K.PARAM:
            return f"${n.arg}"
        if n.op is K.CONST and not n.shape:
            return repr(n.arg)
        if id(n) in names:
            return names[id(n)]
        args = [ref(x, out, ind) for x in n.srcs]
        arg = n.arg.value if isinstance(n.arg, enum.Enum) else n.arg
        if isinstance(arg, Region):
            arg = "region"
        name = f"%{len(names)}"
        names[id(n)] = name
        extra = "" if arg is None else f"[{arg}]"
        out.append(f"{ind}{name} = {n.op.name.lower()}{extra}({', '.join(args)}) : {n.type!r}")
        return name

    def block(stmts, ind):
        for st in stmts:
            out: list = []
            if isinstance(st, Let):
                r = ref(st.value, out, ind)
                out.append(f"{ind}{st.var} = {r}")
            elif isinstance(st, Load):
                p = ref(st.ptr, out, ind)
                m = "" if st.mask is None else f", mask={ref(st.mask, out, ind)}"
                o = "" if st.other is None else f", other={ref(st.other, out, ind)}"
                out.append(f"{ind}{st.var} = load({p}{m}{o}) : {st.type!r}")
            elif isinstance(st, Store):
                p, v = ref(st.ptr, out, ind), ref(st.value, out, ind)
                m = "" if st.mask is None else f", mask={ref(st.mask, out, ind)}"
                out.append(f"{ind}store({p}, {v}{m})")
            elif isinstance(st, Atomic):
                p, v = ref(st.ptr, out, ind), ref(st.value, out, ind)
                c = "" if st.cmp is None else f", cmp={ref(st.cmp, out, ind)}"
                m = "" if st.mask is None else f", mask={ref(st.mask, out, ind)}"
                out.append(f"{ind}{st.var} = atomic_{st.op}({p}, {v}{c}{m})")
            elif isinstance(st, For):
                a, b, c = (ref(x, out, ind) for x in (st.start, st.stop, st.step))
                out.append(f"{ind}for {st.var} in range({a}, {b}, {c}):")
            elif isinstance(st, While):
                out.append(f"{ind}while:")
            elif isinstance(st, If):
                out.append(f"{ind}if {ref(st.cond, out, ind)}:")
            elif isinstance(st, Return):
                out.append(f"{ind}return")
            elif isinstance(st, Assert):
                out.append(f"{ind}assert {ref(st.cond, out, ind)}, {st.message!r}")
            elif isinstance(st, Print):
                out.append(f"{ind}print {st.prefix!r}, " + ", ".join(ref(v, out, ind) for v in st.values))
            lines.extend(line + f"    # line {st.line}" if k == len(out) - 1 else line for k, line in enumerate(out))
            if isinstance(st, For):
                block(st.body, ind + "  ")
            elif isinstance(st, While):
                block(st.cond_body, ind + "  ")
                lines.append(f"{ind}  test {ref(st.cond, lines, ind + '  ')}")
                block(st.body, ind + "  ")
            elif isinstance(st, If):
                block(st.then, ind + "  ")
                if st.orelse:
                    lines.append(f"{ind}else:")
                    block(st.orelse, ind + "  ")
    block(prog.body, "  ")
    return "\n".join(lines)

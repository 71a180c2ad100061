"""The operation registry: one record per `ir.Op`, and every fact the code needs about it.

`ir.Op` names the operations, in labelled groups; an `OpDef` gives one of them
its meaning:

- `signature`: its operands and result, from which `ir.result_dtype` types it;
- `evaluate`: the interpreter's entry, which computes the node on every lane
  with NumPy. The interpreter dispatches through `EVALUATE`, this table keyed
  by `Op`; the backend's lowering table is keyed the same way, so an entry here
  and its lowering can be read side by side;
- `lanes`: for an operation that is a function of its operands' values alone,
  that function (`evaluate` applies it, and so does the constant folder). The
  arithmetic itself lives in `semantics.ALU`;
- `spelling`: how the printer writes the node, which is also the source the
  frontend reads back;
- facts the validator, the folder and the backend's analyses consult instead of
  listing operations themselves (`arg`, `compile_time`, `scope`, `blocking`,
  `flop`).

Everything else that used to be a per-operation side table (GROUPS, BINARY,
FLOP_OPS, the printer's and frontend's operator tables, the folder's list of
ops it must not fold, the validator's arities) is derived below or from a
record. tests/test_opdefs.py checks that every Op has exactly one record and
that the records agree with themselves. A new operation is one `Op` member and
one record (plus its lowering); the signature already allows any arity, so a
ternary operation needs no new machinery.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .irtypes import VALUE_DTYPES, DType, IRTypeError, Op
from .semantics import LaneError, apply, convert

F32, I32, U32, BOOL = DType.F32, DType.I32, DType.U32, DType.BOOL
ANY = frozenset(VALUE_DTYPES)     # storage types (bf16, f16) are no value's type
NUMBER = frozenset({F32, I32, U32})
INTEGER = frozenset({I32, U32})
LOGICAL = frozenset({BOOL, I32, U32})
FLOAT = frozenset({F32})

# what a type set asks for, said of one operand and of several
_NEEDS = {NUMBER: ("a number", "numbers"), INTEGER: ("an integer", "integer operands"),
          LOGICAL: ("a bool or an integer", "bool or integer operands"), FLOAT: ("f32", "f32")}


# ---------------------------------------------------------------- signatures

@dataclass(frozen=True)
class Signature:
    """Operand kinds and result kind of an operation: together, its typing rule.

    Operand kinds: "T" (one type variable shared by every T operand, restricted
    to `types`), "bool" (a condition), "index" (i32 or u32, each index on its
    own), "any". Result kinds: "T", "bool", "i32", or "given": the dtype the node
    carries itself (a literal's, a load's, a cast's target), restricted to
    `given`. `rule` is the message for a type outside `types` or `given` where
    the generic one would not say what the rule is.
    """
    operands: tuple
    result: str
    types: frozenset = ANY
    given: frozenset = ANY
    rule: str = ""

    @property
    def arity(self) -> int:
        return len(self.operands)

    def result_dtype(self, name: str, srcs: tuple, dtype: Optional[DType]) -> DType:
        if len(srcs) != len(self.operands):
            raise IRTypeError(f"{name} has {len(srcs)} operands")
        if self.result == "given" and (dtype is None or dtype not in self.given):
            raise IRTypeError(self.rule or f"{name} needs a dtype")
        t, n = None, 0
        for kind, s in zip(self.operands, srcs):
            if s.is_storage:
                raise IRTypeError(f"{name}: {s.value} is a buffer element type; its values are f32")
            if kind == "index" and not s.is_int:
                raise IRTypeError(f"index must be i32 or u32, got {s.value}")
            if kind == "bool" and s is not BOOL:
                raise IRTypeError(f"{name} condition must be bool, got {s.value}")
            if kind == "T":
                n += 1
                if t is None:
                    t = s
                elif s is not t and "bool" in self.operands:
                    raise IRTypeError(f"{name} branches have different types {t.value} and {s.value}")
                elif s is not t:
                    raise IRTypeError(f"operands of {name} have different types {t.value} and {s.value}"
                                      " (convert one with f32(), i32() or u32())")
        if t is not None and t not in self.types:
            raise IRTypeError(self.rule or f"{name} needs {_NEEDS[self.types][n > 1]}, got {t.value}")
        return {"T": t, "bool": BOOL, "i32": I32, "given": dtype}[self.result]


LEAF = Signature((), "given")
BUILTIN = Signature((), "i32")
UNARY_NUMBER = Signature(("T",), "T", NUMBER)
UNARY_LOGICAL = Signature(("T",), "T", LOGICAL)
UNARY_FLOAT = Signature(("T",), "T", FLOAT)
BINARY_NUMBER = Signature(("T", "T"), "T", NUMBER)
TERNARY_FLOAT = Signature(("T", "T", "T"), "T", FLOAT)
BINARY_INTEGER = Signature(("T", "T"), "T", INTEGER)
BINARY_LOGICAL = Signature(("T", "T"), "T", LOGICAL)
ORDER = Signature(("T", "T"), "bool", NUMBER)
EQUALITY = Signature(("T", "T"), "bool")
CHOICE = Signature(("bool", "T", "T"), "T")
CONVERSION = Signature(("any",), "given")
REINTERPRET = Signature(("T",), "given", NUMBER, NUMBER, rule="bitcast is between f32, i32 and u32")
ACCESS = Signature(("index",), "given")


# ---------------------------------------------------------------- spellings

@dataclass(frozen=True)
class Spelling:
    """How `printer.format_expr` writes a node; its output is frontend source.

    Forms: "literal" (the value: 1.5, NAN, u32(7)); "name" (text + arg: a
    variable's name, `$arg0`); "call" (text(arg, operands...); an empty text
    calls the function the arg names, as `exp(x)`); "index" (arg[operand]);
    "prefix" and "infix" (text as an operator binding at `prec`, Python's
    levels: ternary 1, not 3, comparisons 5, | 6, ^ 7, & 8, shifts 10, + - 11,
    * / // % 12, unary 13; 14 never needs parentheses); "ternary" (a if c else
    b); "convert" (target(x); to bool, x != 0); "reinterpret" (text(x, target)).
    """
    form: str
    text: str = ""
    prec: int = 0


def _infix(symbol: str, prec: int) -> Spelling:
    return Spelling("infix", symbol, prec)


def _call(name: str = "") -> Spelling:
    return Spelling("call", name)


# ---------------------------------------------------------------- interpreter entries
# Each entry: fn(it, e, mask, memo) -> the value of node `e` on every lane (an
# array with one entry per thread, or a NumPy scalar when uniform). `it` is the
# launch being interpreted (interpreter.Interpreter): thread numbers `tid`,
# `bid`, `gid`; sizes `B`, `n`; arguments `buffers`, `scalars`; thread-local
# state `env`, `privates`; and `ev` (a memoised sub-evaluation), `load`,
# `pload`, `fail`. `mask` holds the lanes whose value matters.

def _literal(it, e, mask, memo):
    return np.asarray(e.arg, e.dtype.np)[()]


def _parameter(it, e, mask, memo):
    return it.scalars[e.arg]


def _variable(it, e, mask, memo):
    return it.env[e.arg]


def _placeholder(it, e, mask, memo):
    return memo[("arg", e.arg)]


def _thread_id(it, e, mask, memo):
    return it.tid


def _block_id(it, e, mask, memo):
    return it.bid


def _global_id(it, e, mask, memo):
    return it.gid


def _block_size(it, e, mask, memo):
    return np.int32(it.B)


def _num_threads(it, e, mask, memo):
    return np.int32(it.n)


def _buflen(it, e, mask, memo):
    return np.int32(len(it.buffers[e.arg]))


def _pure(it, e, mask, memo):
    """Operands first, on the same lanes, then the record's `lanes` function."""
    d = OPDEFS[e.op]
    srcs = [it.ev(s, mask, memo) for s in e.src]
    if it.flops is not None and d.flop and e.src[0].dtype is F32:
        it.flops += int(np.count_nonzero(np.broadcast_to(mask, it.gid.shape)))
    try:
        return d.lanes(e, srcs, mask)
    except LaneError as err:
        it.fail(str(err), err.lane)


def _select(it, e, mask, memo):
    # a and b are evaluated only on the lanes that take them (like C's ?:),
    # so `x[i] if i < n else 0.0` never touches x out of bounds.
    c = it.ev(e.src[0], mask, memo)
    ma, mb = mask & c, mask & ~c
    a = it.ev(e.src[1], ma, dict(memo)) if np.any(ma) else np.zeros((), e.dtype.np)[()]
    b = it.ev(e.src[2], mb, dict(memo)) if np.any(mb) else np.zeros((), e.dtype.np)[()]
    return np.where(c, a, b)


def _load(it, e, mask, memo):
    return it.load(e, it.ev(e.src[0], mask, memo), mask)


def _pload(it, e, mask, memo):
    return it.pload(e, it.ev(e.src[0], mask, memo), mask)


def _sload(it, e, mask, memo):
    return it.sload(e, it.ev(e.src[0], mask, memo), mask)


def _math(it, e, mask, memo):
    return it.math(e, it.ev(e.src[0], mask, memo), mask)


# `lanes` functions: fn(e, operand values, mask) -> the node's value

def _alu(op: Op):
    return lambda e, vals, mask: apply(op, e.src[0].dtype, vals, mask)


def _convert(e, vals, mask):
    return convert(vals[0], e.src[0].dtype, e.dtype)


def _reinterpret(e, vals, mask):
    return np.asarray(vals[0]).view(e.dtype.np)


# ---------------------------------------------------------------- the records

@dataclass(frozen=True, eq=False)
class OpDef:
    """Everything about one operation. Facts:

    arg           what `Expr.arg` holds: "literal", "parameter" (a scalar or Const
                  parameter's name), "variable", "placeholder" (a math template's
                  argument index), "buffer", "private", "shared", "function" (a math
                  library name); None: nothing.
    compile_time  may appear in a compile-time constant (a loop step, a private
                  size) before specialisation.
    scope         for leaves whose value the launch fixes, the threads that share
                  it: "kernel" (known when compiling), "launch", "block",
                  "thread" (each thread its own). None: the program decides.
    blocking      its value changes if the same launch is cut into blocks of
                  another size.
    flop          counted as one float32 operation on f32 operands (roofline
                  compute bounds, `interpreter.count_flops`).
    """
    op: Op
    group: str
    signature: Signature
    evaluate: Callable
    spelling: Spelling
    int_spelling: Optional[Spelling] = None   # on integer operands, where it differs
    arg: Optional[str] = None
    lanes: Optional[Callable] = None
    compile_time: bool = False
    scope: Optional[str] = None
    blocking: bool = False
    flop: bool = False

    @property
    def name(self) -> str:
        return self.op.name.lower()

    @property
    def arity(self) -> int:
        return self.signature.arity

    def result_dtype(self, srcs: tuple, dtype: Optional[DType] = None) -> DType:
        return self.signature.result_dtype(self.name, srcs, dtype)

    def spelling_for(self, e) -> Spelling:
        """How the printer writes `e`, a node of this operation."""
        if self.int_spelling is not None and e.src[0].dtype.is_int:
            return self.int_spelling
        return self.spelling


def _arith(op, symbol, prec, sig=BINARY_NUMBER, flop=True, **facts):
    return OpDef(op, "arith", sig, _pure, _infix(symbol, prec), lanes=_alu(op), compile_time=True,
                 flop=flop, **facts)


def _bitwise(op, symbol, prec, sig):
    return OpDef(op, "bitwise", sig, _pure, _infix(symbol, prec), lanes=_alu(op), compile_time=True)


def _compare(op, symbol, sig=ORDER):
    return OpDef(op, "compare", sig, _pure, _infix(symbol, 5), lanes=_alu(op))


def _builtin(op, name, evaluate, scope, blocking, arg=None):
    return OpDef(op, "builtin", BUILTIN, evaluate, _call(name), arg=arg, scope=scope, blocking=blocking,
                 compile_time=op is Op.BLOCK_SIZE)


RECORDS = (
    # leaves
    OpDef(Op.CONST, "leaf", LEAF, _literal, Spelling("literal"), arg="literal", compile_time=True, scope="kernel"),
    OpDef(Op.PARAM, "leaf", LEAF, _parameter, Spelling("name"), arg="parameter", scope="launch"),
    OpDef(Op.VAR, "leaf", LEAF, _variable, Spelling("name"), arg="variable"),
    OpDef(Op.ARG, "leaf", LEAF, _placeholder, Spelling("name", "$arg"), arg="placeholder"),
    # built-ins
    _builtin(Op.THREAD_ID, "thread_id", _thread_id, "thread", blocking=True),
    _builtin(Op.BLOCK_ID, "block_id", _block_id, "block", blocking=True),
    _builtin(Op.GLOBAL_ID, "global_id", _global_id, "thread", blocking=False),
    _builtin(Op.BLOCK_SIZE, "block_size", _block_size, "kernel", blocking=True),
    _builtin(Op.NUM_THREADS, "num_threads", _num_threads, "launch", blocking=False),
    _builtin(Op.BUFLEN, "len", _buflen, "launch", blocking=False, arg="buffer"),     # len(x)
    # unary
    OpDef(Op.NEG, "unary", UNARY_NUMBER, _pure, Spelling("prefix", "-", 13), lanes=_alu(Op.NEG),
          compile_time=True),
    OpDef(Op.NOT, "unary", UNARY_LOGICAL, _pure, Spelling("prefix", "not ", 3),
          int_spelling=Spelling("prefix", "~", 14), lanes=_alu(Op.NOT)),
    OpDef(Op.ABS, "unary", UNARY_NUMBER, _pure, _call("abs"), lanes=_alu(Op.ABS)),
    OpDef(Op.SQRT, "unary", UNARY_FLOAT, _pure, _call("sqrt"), lanes=_alu(Op.SQRT), flop=True),
    # binary arithmetic
    _arith(Op.ADD, "+", 11),
    _arith(Op.SUB, "-", 11),
    _arith(Op.MUL, "*", 12),
    _arith(Op.DIV, "/", 12, int_spelling=_infix("//", 12)),
    _arith(Op.MOD, "%", 12, BINARY_INTEGER, flop=False),
    OpDef(Op.MIN, "arith", BINARY_NUMBER, _pure, _call("min"), lanes=_alu(Op.MIN), compile_time=True, flop=True),
    OpDef(Op.MAX, "arith", BINARY_NUMBER, _pure, _call("max"), lanes=_alu(Op.MAX), compile_time=True, flop=True),
    # ternary arithmetic: a*b + c rounded once (DESIGN §3)
    OpDef(Op.FMA, "ternary", TERNARY_FLOAT, _pure, _call("fma"), lanes=_alu(Op.FMA), flop=True),
    # bitwise
    _bitwise(Op.AND, "&", 8, BINARY_LOGICAL),
    _bitwise(Op.OR, "|", 6, BINARY_LOGICAL),
    _bitwise(Op.XOR, "^", 7, BINARY_LOGICAL),
    _bitwise(Op.SHL, "<<", 10, BINARY_INTEGER),
    _bitwise(Op.SHR, ">>", 10, BINARY_INTEGER),
    # comparisons
    _compare(Op.LT, "<"),
    _compare(Op.LE, "<="),
    _compare(Op.GT, ">"),
    _compare(Op.GE, ">="),
    _compare(Op.EQ, "==", EQUALITY),
    _compare(Op.NE, "!=", EQUALITY),
    # selection and conversion
    OpDef(Op.SELECT, "convert", CHOICE, _select, Spelling("ternary")),
    OpDef(Op.CAST, "convert", CONVERSION, _pure, Spelling("convert"), lanes=_convert, compile_time=True),
    OpDef(Op.BITCAST, "convert", REINTERPRET, _pure, Spelling("reinterpret", "bitcast"), lanes=_reinterpret),
    # memory
    OpDef(Op.LOAD, "memory", ACCESS, _load, Spelling("index"), arg="buffer"),
    OpDef(Op.PLOAD, "memory", ACCESS, _pload, Spelling("index"), arg="private"),
    OpDef(Op.SLOAD, "memory", ACCESS, _sload, Spelling("index"), arg="shared"),
    # math library
    OpDef(Op.MATH, "math", UNARY_FLOAT, _math, _call(), arg="function"),
)

OPDEFS = {d.op: d for d in RECORDS}

# ---------------------------------------------------------------- derived tables

GROUPS = {g: frozenset(d.op for d in RECORDS if d.group == g) for g in dict.fromkeys(d.group for d in RECORDS)}
BINARY = frozenset(d.op for d in RECORDS if d.arity == 2)
EVALUATE = {d.op: d.evaluate for d in RECORDS}          # the interpreter's dispatch table
FLOP_OPS = frozenset(d.op for d in RECORDS if d.flop)

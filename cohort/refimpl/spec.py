"""The validator, run before every interpretation and lowering.

Checks that a kernel is well formed whoever built it (the frontend, the
fuzzer, a test): every node obeys the type rules of `ir.result_dtype`, every
name refers to something of the right kind and type, variables are assigned
before use on every path, collectives and private declarations sit at the top
level, loop steps and private sizes are compile-time constants.
"""
from __future__ import annotations

import numpy as np

from . import mathlib
from .errors import KernelError
from .ir import (
    I32_MAX,
    I32_MIN,
    U32_MAX,
    Assign,
    Collective,
    DType,
    Expr,
    For,
    If,
    IRTypeError,
    Kernel,
    Loc,
    Op,
    ParamKind,
    Private,
    PStore,
    Store,
    stmt_def,
    walk_expr,
)
from .opdefs import OPDEFS

MAX_PRIVATE = 1 << 16
MAX_BLOCK = 1024          # as on GPUs; per-thread state of a block lives on the native stack


def is_compile_time(e: Expr, kernel: Kernel) -> bool:
    for node in walk_expr(e):
        if node.op is Op.PARAM:
            p = kernel.param(node.arg)
            if p is None or p.kind is not ParamKind.CONST:
                return False
        elif not OPDEFS[node.op].compile_time:
            return False
    return True


class _Checker:
    def __init__(self, k: Kernel, specialised: bool):
        self.k, self.specialised = k, specialised
        self.types: dict = {}       # variable name -> dtype, fixed for the whole kernel
        self.privates: dict = {}    # private array name -> dtype
        self.stmt = None

    def err(self, msg: str):
        loc = self.stmt.loc if self.stmt is not None else None
        if loc is not None and loc.line is None and not loc.text:
            loc = Loc(None, _describe(self.stmt))  # IR built in Python: name the statement by its text
        raise KernelError(self.k.name, loc, msg)

    # ------------------------------------------------------------ kernel
    def kernel(self):
        k = self.k
        if not isinstance(k.block, int) or k.block < 1 or k.block & (k.block - 1) or k.block > MAX_BLOCK:
            self.err(f"block must be a power of two from 1 to {MAX_BLOCK}, got {k.block}")
        names = set()
        for p in k.params:
            if p.name in names:
                self.err(f"parameter {p.name} appears twice")
            names.add(p.name)
            if p.kind is ParamKind.CONST and p.dtype is not DType.I32:
                self.err(f"Const parameter {p.name} must be int")
            if p.kind is ParamKind.SCALAR and not (isinstance(p.dtype, DType) and p.dtype.is_number):
                self.err(f"scalar parameter {p.name} must be f32, i32 or u32, got {p.dtype!r}")
        if self.specialised and k.const_params:
            self.err(f"Const parameter(s) {[p.name for p in k.const_params]} are not bound")
        self.body(k.body, set(), top=True, loops=())

    # ------------------------------------------------------------ statements
    def body(self, stmts, defined: set, top: bool, loops: tuple) -> set:
        """Check each statement by its kind's rule; returns the variables assigned on every path."""
        for s in stmts:
            self.stmt = s
            rule = CHECK.get(type(s))
            if rule is None:
                self.err(f"unknown statement {type(s).__name__}")
            if stmt_def(s).top_level and not top:
                self.err(_not_top_level(s))
            defined = rule(self, s, defined, loops)
            self.stmt = s
        return defined

    def check_assign(self, s: Assign, defined: set, loops: tuple) -> set:
        self.expr(s.value, defined)
        self.bind(s.name, s.value.dtype, loops)
        return defined | {s.name}

    def check_store(self, s: Store, defined: set, loops: tuple) -> set:
        p = self.k.param(s.buf)
        if p is None or p.kind is not ParamKind.BUFFER:
            self.err(f"{s.buf} is not a buffer parameter; only buffers can be stored to")
        self.index(s.index, defined)
        self.expr(s.value, defined)
        if s.value.dtype is not p.dtype:
            self.err(f"storing {s.value.dtype.value} into buffer {s.buf} of {p.dtype.value}")
        return defined

    def check_pstore(self, s: PStore, defined: set, loops: tuple) -> set:
        if s.arr not in self.privates:
            self.err(f"{s.arr} is not a private array")
        self.index(s.index, defined)
        self.expr(s.value, defined)
        if s.value.dtype is not self.privates[s.arr]:
            self.err(f"storing {s.value.dtype.value} into private {s.arr} of "
                     f"{self.privates[s.arr].value}")
        return defined

    def check_private(self, s: Private, defined: set, loops: tuple) -> set:
        if s.name in self.privates or s.name in self.types or self.k.param(s.name):
            self.err(f"private array {s.name} reuses a name")
        if not isinstance(s.dtype, DType):
            self.err(f"bad private dtype {s.dtype}")
        if not is_compile_time(s.size, self.k) or s.size.dtype is not DType.I32:
            self.err("private array size must be a compile-time integer constant")
        if self.specialised:
            if s.size.op is not Op.CONST or not 1 <= s.size.arg <= MAX_PRIVATE:
                self.err(f"private array size must be 1..{MAX_PRIVATE}, got {s.size.arg}")
        self.privates[s.name] = s.dtype
        return defined

    def check_if(self, s: If, defined: set, loops: tuple) -> set:
        self.expr(s.cond, defined)
        if s.cond.dtype is not DType.BOOL:
            self.err(f"if condition must be bool, got {s.cond.dtype.value}")
        a = self.body(s.then, defined, False, loops)
        b = self.body(s.orelse, defined, False, loops)
        return defined | (a & b)

    def check_for(self, s: For, defined: set, loops: tuple) -> set:
        for e in (s.start, s.stop, s.step):
            self.expr(e, defined)
            if e.dtype is not DType.I32:
                self.err(f"range() bounds and step must be i32, got {e.dtype.value}")
        if not is_compile_time(s.step, self.k):
            self.err("range() step must be a compile-time constant")
        if self.specialised and (s.step.op is not Op.CONST or s.step.arg == 0):
            self.err("range() step must be a nonzero constant")
        if s.var in defined or s.var in self.privates or self.k.param(s.var):
            self.err(f"loop variable {s.var} shadows an existing name")
        self.bind(s.var, DType.I32, loops)
        self.body(s.body, defined | {s.var}, False, loops + (s.var,))
        return defined

    def check_collective(self, s: Collective, defined: set, loops: tuple) -> set:
        self.expr(s.value, defined)
        if not s.value.dtype.is_number:
            self.err(f"{s.op.value}() needs a number, got bool")
        self.bind(s.name, s.value.dtype, loops)
        return defined | {s.name}

    def bind(self, name: str, dtype: DType, loops: tuple):
        if self.k.param(name) is not None:
            self.err(f"cannot assign to parameter {name}")
        if name in self.privates:
            self.err(f"cannot assign to private array {name}; index it")
        if name in loops:
            self.err(f"cannot assign to loop variable {name}")
        old = self.types.setdefault(name, dtype)
        if old is not dtype:
            self.err(f"variable {name} is {old.value} but is assigned {dtype.value}")

    def index(self, e: Expr, defined: set):
        self.expr(e, defined)
        if not e.dtype.is_int:
            self.err(f"index must be i32 or u32, got {e.dtype.value}")

    # ------------------------------------------------------------ expressions
    def expr(self, e: Expr, defined: set):
        if not isinstance(e, Expr):
            self.err(f"expected an expression, got {e!r}")
        for node in walk_expr(e):
            d = OPDEFS.get(node.op)
            if d is None:
                self.err(f"unknown operation {node.op!r}")
            try:   # the operand count, then the types
                want = d.result_dtype(tuple(s.dtype for s in node.src), node.dtype)
            except IRTypeError as ex:
                self.err(str(ex))
            if want is not node.dtype:
                self.err(f"{d.name} yields {want.value}, node says {node.dtype.value}")
            # what the node's arg names must exist and have the node's type
            if d.arg == "literal":
                self.const(node)
            elif d.arg == "variable":
                if node.arg not in defined:
                    why = "is never assigned" if node.arg not in self.types else \
                        "may be used before it is assigned on every path"
                    self.err(f"variable {node.arg} {why}")
                if self.types[node.arg] is not node.dtype:
                    self.err(f"variable {node.arg} is {self.types[node.arg].value}, read as {node.dtype.value}")
            elif d.arg == "parameter":
                p = self.k.param(node.arg)
                if p is None or p.kind is ParamKind.BUFFER:
                    self.err(f"{node.arg} is not a scalar or constant parameter")
                if p.dtype is not node.dtype:
                    self.err(f"parameter {node.arg} is {p.dtype.value}, read as {node.dtype.value}")
            elif d.arg == "buffer":
                p = self.k.param(node.arg)
                if p is None or p.kind is not ParamKind.BUFFER:
                    self.err(f"{node.arg} is not a buffer parameter")
                if d.signature.result == "given" and p.dtype is not node.dtype:
                    self.err(f"buffer {node.arg} is {p.dtype.value}, loaded as {node.dtype.value}")
            elif d.arg == "private":
                if node.arg not in self.privates:
                    self.err(f"{node.arg} is not a private array")
                if self.privates[node.arg] is not node.dtype:
                    self.err(f"private {node.arg} is {self.privates[node.arg].value}")
            elif d.arg == "function":
                if node.arg not in mathlib.FUNCTIONS:
                    self.err(f"unknown math function {node.arg}")
            elif d.arg == "placeholder":
                self.err("math placeholder outside the math library")

    def const(self, node: Expr):
        v, dt = node.arg, node.dtype
        ok = (isinstance(v, bool) if dt is DType.BOOL else
              isinstance(v, float) and _is_f32(v) if dt is DType.F32 else
              isinstance(v, int) and not isinstance(v, bool) and
              (I32_MIN <= v <= I32_MAX if dt is DType.I32 else 0 <= v <= U32_MAX))
        if not ok:
            self.err(f"literal {v!r} is not a valid {dt.value}")


# One rule per statement kind (ir.STMTDEFS): rule(checker, stmt, defined, loops) -> defined.
CHECK = {
    Assign: _Checker.check_assign,
    Store: _Checker.check_store,
    PStore: _Checker.check_pstore,
    Private: _Checker.check_private,
    If: _Checker.check_if,
    For: _Checker.check_for,
    Collective: _Checker.check_collective,
}


def _not_top_level(s) -> str:
    """The error for a top-level-only statement found nested."""
    if isinstance(s, Private):
        return "private arrays must be declared at the top level of the kernel body"
    what = f"{s.op.value}()" if isinstance(s, Collective) else f"a {stmt_def(s).tag} statement"
    return f"{what} is only allowed at the top level of the kernel body"


def _is_f32(v: float) -> bool:
    """An f32 literal holds a value float32 can represent exactly (const() rounds to one)."""
    with np.errstate(over="ignore"):
        return v != v or float(np.float32(v)) == v


def _describe(stmt) -> str:
    """The first printed line of a statement (`if c:`, `y[i] = v`, ...)."""
    from .printer import format_stmt
    try:
        return format_stmt(stmt)
    except Exception:  # too malformed to print
        return type(stmt).__name__


def validate(kernel: Kernel, specialised: bool = False) -> Kernel:
    """Raise KernelError naming the kernel and statement if `kernel` is malformed."""
    _Checker(kernel, specialised).kernel()
    return kernel

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
    Atomic,
    AtomicOp,
    Barrier,
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
    Shared,
    SStore,
    Store,
    defined_name,
    stmt_bodies,
    stmt_def,
    stmt_exprs,
    walk_expr,
    walk_stmts,
    written_name,
)
from .opdefs import OPDEFS

MAX_PRIVATE = 1 << 16
MAX_SHARED_BYTES = 1 << 18   # all of a block's shared arrays together (GPUs give 48-228 KiB)
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
        self.shared: dict = {}      # shared array name -> dtype
        self.shared_bytes = 0
        self.control: list = []     # the ifs and loops around the statement being checked
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
        self.uniform = None         # BlockUniform, once a barrier needs it (the exprs checked by then)
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
        if s.value.dtype is not p.dtype.compute:
            stores = " (it stores f32, rounded)" if p.dtype.is_storage else ""
            self.err(f"storing {s.value.dtype.value} into buffer {s.buf} of {p.dtype.value}{stores}")
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
        self.array_decl(s, "private")
        self.privates[s.name] = s.dtype
        return defined

    def check_shared(self, s: Shared, defined: set, loops: tuple) -> set:
        self.array_decl(s, "shared")
        if self.specialised:
            self.shared_bytes += s.size.arg * (1 if s.dtype is DType.BOOL else 4)
            if self.shared_bytes > MAX_SHARED_BYTES:
                self.err(f"shared arrays take {self.shared_bytes} bytes per block, more than "
                         f"{MAX_SHARED_BYTES}")
        self.shared[s.name] = s.dtype
        return defined

    def array_decl(self, s, kind: str):
        if s.name in self.privates or s.name in self.shared or s.name in self.types or self.k.param(s.name):
            self.err(f"{kind} array {s.name} reuses a name")
        if not isinstance(s.dtype, DType):
            self.err(f"bad {kind} dtype {s.dtype}")
        if s.dtype.is_storage:
            self.err(f"{kind} array {s.name} of {s.dtype.value}: bf16 and f16 are buffer element types "
                     f"only; keep the values in f32")
        if not is_compile_time(s.size, self.k) or s.size.dtype is not DType.I32:
            self.err(f"{kind} array size must be a compile-time integer constant")
        if self.specialised:
            if s.size.op is not Op.CONST or not 1 <= s.size.arg <= MAX_PRIVATE:
                self.err(f"{kind} array size must be 1..{MAX_PRIVATE}, got {s.size.arg}")

    def check_sstore(self, s: SStore, defined: set, loops: tuple) -> set:
        if s.arr not in self.shared:
            self.err(f"{s.arr} is not a shared array")
        self.index(s.index, defined)
        self.expr(s.value, defined)
        if s.value.dtype is not self.shared[s.arr]:
            self.err(f"storing {s.value.dtype.value} into shared {s.arr} of {self.shared[s.arr].value}")
        return defined

    def check_barrier(self, s: Barrier, defined: set, loops: tuple) -> set:
        if self.control and self.uniform is None:
            self.uniform = BlockUniform(self.k)
        for c in self.control:
            for e in stmt_exprs(c)[:2]:       # an if's condition, a loop's start and stop
                if not self.uniform.expr(e):
                    at = f" (line {c.loc.line})" if c.loc.line is not None else ""
                    self.err(f"barrier() under `{_describe(c)}`{at}, which may differ between the "
                             "threads of a block: barriers need block-uniform control (conditions and "
                             "loop bounds built from block_id(), Const and scalar parameters, literals, "
                             "block collectives and variables assigned only such values)")
        return defined

    def check_atomic(self, s: Atomic, defined: set, loops: tuple) -> set:
        p = self.k.param(s.target)
        if s.target in self.shared:
            dt = self.shared[s.target]
        elif p is not None and p.kind is ParamKind.BUFFER:
            dt = p.dtype
            if dt.is_storage:
                self.err(f"{s.op.value}() on {dt.value} buffer {s.target}: atomics take i32, u32 "
                         "(and f32 for min/max)")
        else:
            self.err(f"{s.op.value}() updates a buffer or a shared array; {s.target} is neither")
        self.index(s.index, defined)
        self.expr(s.value, defined)
        if s.value.dtype is not dt:
            self.err(f"{s.op.value}() of {s.value.dtype.value} into {s.target} of {dt.value}")
        if dt is DType.BOOL:
            self.err(f"{s.op.value}() on bool {s.target}: atomics take i32, u32 (and f32 for min/max)")
        if dt is DType.F32 and s.op not in (AtomicOp.MIN, AtomicOp.MAX):
            self.err(f"{s.op.value}() on f32 is not exact: the sum depends on the order of the "
                     "updates. Reduce with block_sum() and combine the blocks' sums in a second "
                     "pass (or accumulate in i32/u32); only atomic_min/atomic_max take f32")
        return defined

    def check_if(self, s: If, defined: set, loops: tuple) -> set:
        self.expr(s.cond, defined)
        if s.cond.dtype is not DType.BOOL:
            self.err(f"if condition must be bool, got {s.cond.dtype.value}")
        self.control.append(s)
        a = self.body(s.then, defined, False, loops)
        b = self.body(s.orelse, defined, False, loops)
        self.control.pop()
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
        self.control.append(s)
        self.body(s.body, defined | {s.var}, False, loops + (s.var,))
        self.control.pop()
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
                if d.signature.result == "given" and p.dtype.compute is not node.dtype:
                    self.err(f"buffer {node.arg} is {p.dtype.value}, loaded as {node.dtype.value}")
            elif d.arg in ("private", "shared"):
                arrays = self.privates if d.arg == "private" else self.shared
                if node.arg not in arrays:
                    self.err(f"{node.arg} is not a {d.arg} array")
                if arrays[node.arg] is not node.dtype:
                    self.err(f"{d.arg} {node.arg} is {arrays[node.arg].value}")
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
    Shared: _Checker.check_shared,
    SStore: _Checker.check_sstore,
    Barrier: _Checker.check_barrier,
    Atomic: _Checker.check_atomic,
}


class BlockUniform:
    """Which values are the same in every thread of a block (barriers need it): literals,
    parameters, block_id() and the launch's sizes, loads of buffers the kernel never
    writes at such indices, collectives' results, and variables whose every definition
    is such a value made under such control (a loop variable: its loop's bounds).
    Found as the greatest fixed point over the kernel's variables."""

    def __init__(self, k: Kernel):
        self.k = k
        self.written = {written_name(s) for s in walk_stmts(k.body)}
        self.vars = {n for s in walk_stmts(k.body) if (n := defined_name(s)) is not None}
        while True:
            before = set(self.vars)
            self._body(k.body, True)
            if self.vars == before:
                break

    def _body(self, body, control: bool):
        for s in body:
            name = defined_name(s)
            if isinstance(s, Collective):
                pass                                    # one value per block
            elif isinstance(s, For):
                inner = control and self.expr(s.start) and self.expr(s.stop)
                if not inner:
                    self.vars.discard(s.var)
                self._body(s.body, inner)
            elif isinstance(s, If):
                inner = control and self.expr(s.cond)
                self._body(s.then, inner)
                self._body(s.orelse, inner)
            elif name is not None:
                if not (control and isinstance(s, Assign) and self.expr(s.value)):
                    self.vars.discard(name)
            else:
                for b in stmt_bodies(s):
                    self._body(b, control)

    def expr(self, e: Expr) -> bool:
        for node in walk_expr(e):
            op = node.op
            if op is Op.VAR:
                if node.arg not in self.vars:
                    return False
            elif op is Op.LOAD:
                if node.arg in self.written:   # its index is checked as one of the nodes
                    return False
            elif op in (Op.PLOAD, Op.SLOAD, Op.ARG) or OPDEFS[op].scope == "thread":
                return False
        return True



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

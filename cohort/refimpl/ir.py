"""The kernel IR: types, one Enum of operations, small frozen nodes.

A kernel is a tuple of statements over expressions. Expressions are immutable
DAG nodes (`Expr`); the same node may be shared, so evaluators memoise by
identity. Statements carry a source location for error messages.

This module is the IR's public face and holds the kernel itself; the parts stand on one
another in one direction only (tests/test_imports.py):
irtypes (types, operation names) < semantics < opdefs < expr (nodes and constructors)
< stmts < printer < ir.

Each operation's meaning and facts live in its record in `opdefs.py`; the type
rules are applied by `result_dtype` and nowhere else: the frontend, the
validator and the fuzzer's builder all call it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .expr import (  # noqa: F401  (the IR's public face: every node and constructor)
    Expr,
    Operand,
    binary,
    bitcast,
    builtin,
    cast,
    const,
    fma,
    lift,
    load,
    math,
    param,
    pload,
    result_dtype,
    select,
    sload,
    unary,
    var,
    walk_expr,
)
from .irtypes import (  # noqa: F401
    DTYPE_BY_NAME,
    I32_MAX,
    I32_MIN,
    NOLOC,
    STORAGE_DTYPES,
    U32_MAX,
    VALUE_DTYPES,
    AtomicOp,
    DType,
    IRTypeError,
    Loc,
    Op,
    ParamKind,
    Reduce,
    boolean,
    f32,
    i32,
    u32,
)
from .printer import format_kernel
from .stmts import (  # noqa: F401
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
        return format_kernel(self)

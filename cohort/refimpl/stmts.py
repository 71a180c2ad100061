"""Statements: one frozen dataclass and one `StmtDef` record per kind (the protocol of
issue 23), and the walks, maps and rebuilds every pass shares. Re-exported by ir.py."""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Optional, Union

from .expr import Expr
from .irtypes import NOLOC, AtomicOp, DType, Loc, Reduce

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

"""IR-level reduction of a failing case (after Hypothesis' own shrinking): delete
statements, replace an `if` by a branch or a loop by its body, a value by an
operand, drop unused parameters - each step kept only while the failure stays
(delta debugging)."""
from __future__ import annotations

import time
from dataclasses import replace

from ...refimpl.ir import (
    Field,
    For,
    If,
    Kernel,
    Op,
    rewrite_stmts,
    stmt_def,
    stmt_exprs,
    walk_expr,
    walk_stmts,
)
from ..gen import Case


def _with_body(case, body) -> Case:
    return replace(case, kernel=Kernel(case.kernel.name, case.kernel.params, tuple(body), case.kernel.block))


def _without(body, target):
    return rewrite_stmts(body, lambda s: () if s is target else None)


def _replacing(body, target, new):
    return rewrite_stmts(body, lambda s: tuple(new) if s is target else None)


def _delete_statements(case):
    """Each statement removed (outermost first: one step can drop a whole loop)."""
    for s in list(walk_stmts(case.kernel.body)):
        yield _with_body(case, _without(case.kernel.body, s))


def _flatten_control(case):
    """An if replaced by one of its branches; a loop whose body does not use its variable
    replaced by its body."""
    for s in list(walk_stmts(case.kernel.body)):
        if isinstance(s, If):
            for branch in (s.then, s.orelse):
                yield _with_body(case, _replacing(case.kernel.body, s, branch))
        elif isinstance(s, For):
            uses = any(n.op is Op.VAR and n.arg == s.var for b in walk_stmts(s.body)
                       for e in stmt_exprs(b) for n in walk_expr(e))
            if not uses:
                yield _with_body(case, _replacing(case.kernel.body, s, s.body))


def _simplify_values(case):
    """A stored or assigned value replaced by one of its operands of the same type."""
    for s in list(walk_stmts(case.kernel.body)):
        if "value" in stmt_def(s).names(Field.EXPR) and s.value.src:
            for operand in s.value.src:
                if operand.dtype is s.value.dtype:
                    yield _with_body(case, _replacing(case.kernel.body, s, [replace(s, value=operand)]))


REDUCTIONS = (_delete_statements, _flatten_control, _simplify_values, _delete_statements)


def drop_unused_params(case, still_fails) -> Case:
    """Remove parameters nothing refers to (buffers keep their input streams)."""
    used = set()
    for s in walk_stmts(case.kernel.body):
        used.update(getattr(s, f) for f in stmt_def(s).names(Field.NAME))
        for e in stmt_exprs(s):
            used.update(n.arg for n in walk_expr(e) if n.op in (Op.LOAD, Op.PARAM, Op.BUFLEN))
    keep = tuple(p for p in case.kernel.params if p.name in used)
    if len(keep) == len(case.kernel.params):
        return case
    streams = {b.name: b.stream or i + 1 for i, b in enumerate(case.buffers)}
    buffers = tuple(replace(b, stream=streams[b.name]) for b in case.buffers if b.name in used)
    k = Kernel(case.kernel.name, keep, case.kernel.body, case.kernel.block)
    cand = Case(k, case.n, {c: v for c, v in case.consts.items() if c in used}, buffers,
                {n: v for n, v in case.scalars.items() if n in used}, case.seed)
    return cand if still_fails(cand) else case


def reduce_case(case, still_fails, deadline: float):
    """The smallest case reached by the reductions while `still_fails(case)` holds, before
    `deadline` (time.monotonic())."""
    for attempt in REDUCTIONS:
        progress = True
        while progress and time.monotonic() < deadline:
            progress = False
            for cand in attempt(case):
                if time.monotonic() >= deadline:
                    break
                if still_fails(cand):
                    case, progress = cand, True
                    break
    return drop_unused_params(case, still_fails)

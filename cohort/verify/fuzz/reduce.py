"""IR-level reduction of a failing case (after Hypothesis' own shrinking): delete
statements, replace an `if` by a branch or a loop by its body, a value by an
operand, drop unused parameters - each step kept only while the failure stays
(delta debugging)."""
from __future__ import annotations

import time
from dataclasses import replace

from ...refimpl.ir import Assign, For, If, Kernel, Op, PStore, Store, stmt_exprs, walk_expr, walk_stmts
from ..gen import Case


def _with_body(case, body) -> Case:
    return replace(case, kernel=Kernel(case.kernel.name, case.kernel.params, tuple(body), case.kernel.block))


def _without(body, target):
    out = []
    for s in body:
        if s is target:
            continue
        if isinstance(s, If):
            s = If(s.cond, _without(s.then, target), _without(s.orelse, target), s.loc)
        elif isinstance(s, For):
            s = For(s.var, s.start, s.stop, s.step, _without(s.body, target), s.loc)
        out.append(s)
    return tuple(out)


def _replacing(body, target, new):
    out = []
    for s in body:
        if s is target:
            out.extend(new)
            continue
        if isinstance(s, If):
            s = If(s.cond, _replacing(s.then, target, new), _replacing(s.orelse, target, new), s.loc)
        elif isinstance(s, For):
            s = For(s.var, s.start, s.stop, s.step, _replacing(s.body, target, new), s.loc)
        out.append(s)
    return tuple(out)


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
        if isinstance(s, (Store, Assign, PStore)) and s.value.src:
            for operand in s.value.src:
                if operand.dtype is s.value.dtype:
                    yield _with_body(case, _replacing(case.kernel.body, s, [replace(s, value=operand)]))


REDUCTIONS = (_delete_statements, _flatten_control, _simplify_values, _delete_statements)


def drop_unused_params(case, still_fails) -> Case:
    """Remove parameters nothing refers to (buffers keep their input streams)."""
    used = set()
    for s in walk_stmts(case.kernel.body):
        for name in ("buf", "arr"):
            if hasattr(s, name):
                used.add(getattr(s, name))
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

"""Rewrites of a tile program that the native lowering builds instead of the program itself
(DESIGN §10, native mode): each gives the same values at every statement, so the reference's
bits, and saves whole-tile copies the frontend's renaming of loop-carried variables makes.

`pointer_offsets`: a loop-carried pointer tile advanced by the same offset in every element
(`a_ptrs += BLOCK_K * stride_ak`) is its base tile plus one i64 scalar: the base is a pointer
tile assigned once, at the program's top level; every assignment of the variable is the base,
another such variable, or one of them plus a uniform offset (a constant tile or a broadcast
scalar). Each use reads base + offset. Pointer offsets add in i64 with wrap-around (interp's
PTR_ADD), so (base + a) + b is base + (a + b). The loads through it keep the base's
contiguity facts (native_memory.affine) and the loop moves no tile.

`coalesce_copies`: `t = f(...v...)` ... `v = t` in one block (the frontend's loop-carried
`acc = tl.dot(a, b, acc)`), where t is assigned once, read only up to that copy, and v is
not touched in between: t is renamed v, and the copy goes (`v = v`). The statement that
assigned t then writes v's array in place, which the lowering already does safely for
elementwise reads (a temporary when an element moves) and for `dot` (its accumulator).
"""
from __future__ import annotations

import dataclasses

from . import tir
from .tir import TT, Bin, Dt, K, Node

_BODIES = ("cond_body", "body", "then", "orelse")


def _stmts(body):
    """Every statement, nested ones included (pre-order)."""
    for st in body:
        yield st
        for f in _BODIES:
            if hasattr(st, f):
                yield from _stmts(getattr(st, f))


def _nodes(st):
    for f in ("value", "ptr", "mask", "other", "cmp", "cond", "start", "stop", "step"):
        n = getattr(st, f, None)
        if isinstance(n, Node):
            yield n


def _reads(n: Node, out: set, seen: set):
    if id(n) in seen:
        return
    seen.add(id(n))
    if n.op is K.VAR:
        out.add(n.arg)
    for s in n.srcs:
        _reads(s, out, seen)


def _stmt_reads(st) -> set:
    """Variables the statement (with its nested statements) reads."""
    out, seen = set(), set()
    for s in _stmts([st]):
        for n in _nodes(s):
            _reads(n, out, seen)
    return out


def _stmt_writes(st) -> set:
    return {s.var for s in _stmts([st]) if hasattr(s, "var")}


def _map_nodes(body, fn):
    """The body with every expression node replaced by fn's (memoised over the DAG)."""
    memo: dict = {}

    def node(n):
        if n is None:
            return None
        got = memo.get(id(n))
        if got is None:
            srcs = tuple(node(s) for s in n.srcs)
            m = n if all(a is b for a, b in zip(srcs, n.srcs)) else dataclasses.replace(n, srcs=srcs)
            got = memo[id(n)] = fn(m)
        return got

    def stmts(b):
        out = []
        for st in b:
            ch = {f: node(getattr(st, f)) for f in ("value", "ptr", "mask", "other", "cmp", "cond", "start",
                                                     "stop", "step") if isinstance(getattr(st, f, None), Node)}
            ch.update({f: tuple(stmts(getattr(st, f))) for f in _BODIES if hasattr(st, f)})
            out.append(dataclasses.replace(st, **ch) if ch else st)
        return out
    return tuple(stmts(body))


# ---------------------------------------------------------------- pointer offsets
def _uniform(n: Node):
    """A scalar node whose value is every element of n (n a constant tile or a broadcast
    scalar), else None."""
    if n.shape == ():
        return n
    if n.op is K.CONST:
        return Node(K.CONST, TT(n.elem), (), n.arg)
    if n.op in (K.BROADCAST, K.EXPAND):
        return _uniform(n.srcs[0])
    return None


def pointer_offsets(prog: tir.Program) -> tir.Program:
    lets: dict = {}
    other = set()                          # assigned by anything but a Let (a load, a loop, an atomic)
    for st in _stmts(prog.body):
        if isinstance(st, tir.Let):
            lets.setdefault(st.var, []).append(st)
        elif hasattr(st, "var"):
            other.add(st.var)
    top = {st.var for st in prog.body if isinstance(st, tir.Let)}
    ptr_tile = {v for v, t in prog.vars.items() if t.is_ptr and t.shape != ()}
    bases = {v for v in ptr_tile if v in top and len(lets.get(v, ())) == 1 and v not in other}

    def source(st):
        """(w, uniform offset or None) when the Let is w, w broadcast to itself, or w + uniform."""
        n, t = st.value, prog.vars[st.var]
        if n.op is K.BROADCAST and n.srcs[0].type == t:
            n = n.srcs[0]
        if n.op is K.VAR and n.type == t:
            return n.arg, None
        if n.op is K.PTR_ADD and n.srcs[0].op is K.VAR and n.srcs[0].type == t:
            u = _uniform(n.srcs[1])
            if u is not None:
                return n.srcs[0].arg, u
        return None

    cand = {v for v in ptr_tile - bases if v in lets and v not in other}
    edges = {}
    for v in list(cand):
        e = [source(st) for st in lets[v]]
        if any(x is None for x in e):
            cand.discard(v)
        else:
            edges[v] = e
    base_of: dict = {}
    changed = True
    while changed:
        changed = False
        for v in list(cand):
            srcs = {w for w, _ in edges[v]}
            if not srcs <= cand | bases:
                cand.discard(v)
                changed = True
        base_of = {}
        for v in cand:                                   # propagate the base along the edges
            for w, _ in edges[v]:
                if w in bases:
                    base_of.setdefault(v, set()).add(w)
        grow = True
        while grow:
            grow = False
            for v in cand:
                for w, _ in edges[v]:
                    if w in cand and not base_of.get(w, set()) <= base_of.get(v, set()):
                        base_of.setdefault(v, set()).update(base_of[w])
                        grow = True
        for v in list(cand):
            if len(base_of.get(v, ())) != 1:
                cand.discard(v)
                changed = True
    if not cand:
        return prog
    base = {v: next(iter(base_of[v])) for v in cand}
    off = {v: f"{v}~off" for v in cand}
    i64 = TT(Dt.I64)

    def offset_of(w):
        return Node(K.CONST, i64, (), 0) if w in bases else Node(K.VAR, i64, (), off[w])

    def let(st):
        if not (isinstance(st, tir.Let) and st.var in cand):
            return st
        w, u = source(st)
        value = offset_of(w)
        if u is not None:
            u64 = u if u.elem is Dt.I64 else Node(K.CAST, i64, (u,))
            value = u64 if w in bases else Node(K.BINARY, i64, (value, u64), Bin.ADD)
        return tir.Let(off[st.var], value, st.line)

    def stmts(b):
        out = []
        for st in b:
            st = let(st)
            ch = {f: tuple(stmts(getattr(st, f))) for f in _BODIES if hasattr(st, f)}
            out.append(dataclasses.replace(st, **ch) if ch else st)
        return out
    body = tuple(stmts(prog.body))

    def use(n):
        if n.op is K.VAR and n.arg in cand:
            t = prog.vars[n.arg]
            o = Node(K.BROADCAST, TT(Dt.I64, t.shape), (Node(K.VAR, i64, (), off[n.arg]),))
            return Node(K.PTR_ADD, t, (Node(K.VAR, t, (), base[n.arg]), o))
        return n
    body = _map_nodes(body, use)
    vars_ = {v: t for v, t in prog.vars.items() if v not in cand}
    vars_.update({off[v]: i64 for v in cand})
    return dataclasses.replace(prog, body=body, vars=vars_)


# ---------------------------------------------------------------- copies
def coalesce_copies(prog: tir.Program) -> tir.Program:
    assigned: dict = {}
    not_let = set()                           # assigned by a load, a loop, an atomic
    for st in _stmts(prog.body):
        if hasattr(st, "var"):
            assigned[st.var] = assigned.get(st.var, 0) + 1
            if not isinstance(st, tir.Let):
                not_let.add(st.var)
    renames: dict = {}
    body = prog.body
    for _ in range(8):                        # each round coalesces one more link of a chain
        found = _one_round(body, assigned, prog.vars, not_let)
        if not found:
            break
        renames.update(found)
        body = _rename(body, found)
        for t in found:
            assigned.pop(t, None)
    if not renames:
        return prog
    vars_ = {v: t for v, t in prog.vars.items() if v not in renames}
    return dataclasses.replace(prog, body=body, vars=vars_)


def _is_copy(st, vars_):
    """The variable t when st is `v = t` or `v = t` broadcast to its own type."""
    if not isinstance(st, tir.Let):
        return None
    n = st.value
    if n.op is K.BROADCAST and n.srcs[0].type == n.type:
        n = n.srcs[0]
    if n.op is K.VAR and n.arg != st.var and vars_[n.arg] == vars_[st.var]:
        return n.arg
    return None


def _one_round(body, assigned, vars_, not_let) -> dict:
    found: dict = {}

    def block(stmts):
        for j, st in enumerate(stmts):
            for f in _BODIES:
                if hasattr(st, f):
                    block(getattr(st, f))
            t = _is_copy(st, vars_)
            taken = set(found) | set(found.values())        # one link per variable and round
            if t is None or assigned.get(t) != 1 or t in not_let or st.var in not_let or t in taken \
                    or st.var in taken:
                continue
            v = st.var
            i = next((k for k in range(j) if isinstance(stmts[k], tir.Let) and stmts[k].var == t), None)
            if i is None:
                continue
            between = stmts[i + 1:j]
            if any(v in _stmt_reads(s) or v in _stmt_writes(s) for s in between):
                continue
            if any(t in _stmt_reads(s) for s in stmts[j + 1:]) or any(t in _stmt_reads(s) for s in stmts[:i]):
                continue
            found[t] = v
    block(body)
    return found


def _rename(body, names: dict):
    def fn(n):
        if n.op is K.VAR and n.arg in names:
            return Node(K.VAR, n.type, (), names[n.arg])
        return n
    body = _map_nodes(body, fn)

    def stmts(b):
        out = []
        for st in b:
            if hasattr(st, "var") and st.var in names:
                st = dataclasses.replace(st, var=names[st.var])
            if isinstance(st, tir.Let) and _self_copy(st):
                continue
            ch = {f: tuple(stmts(getattr(st, f))) for f in _BODIES if hasattr(st, f)}
            out.append(dataclasses.replace(st, **ch) if ch else st)
        return out
    return tuple(stmts(body))


def _self_copy(st) -> bool:
    n = st.value
    if n.op is K.BROADCAST and n.srcs[0].type == n.type:
        n = n.srcs[0]
    return n.op is K.VAR and n.arg == st.var


# ---------------------------------------------------------------- whole-tile nodes
_WHOLE = (K.REDUCE, K.ARGREDUCE, K.SCAN, K.DOT, K.HISTOGRAM)   # whole-tile nodes that cannot fail


def _may_fail(n: Node, seen: set) -> bool:
    if id(n) in seen:
        return False
    seen.add(id(n))
    if n.op is K.COMBINE or n.op is K.GATHER or (n.op is K.BINARY and n.arg in (Bin.IDIV, Bin.MOD, Bin.SHL, Bin.SHR)
                             and isinstance(n.elem, Dt) and n.elem.is_int):
        return True
    return any(_may_fail(s, seen) for s in n.srcs)


def hoist_whole_tile(prog: tir.Program) -> tir.Program:
    """`z = x - tl.max(x)` as `m = tl.max(x)` then `z = x - m`: each whole-tile node under a
    Let's value (not its root) gets a Let of its own just before, in post-order — the order
    the lowering computes them in anyway — so the rest of the value is cheap and may be
    recomputed at its uses (`tl.exp(z)` reads x and m, z is never stored). Only in values
    where nothing can fail (no integer division or shift, no user combine function), so no
    error moves."""
    vars_ = dict(prog.vars)
    count = [0]

    def hoisted(st):
        pre, memo = [], {}

        def node(n):
            got = memo.get(id(n))
            if got is None:
                srcs = tuple(node(x) for x in n.srcs)
                got = n if all(a is b for a, b in zip(srcs, n.srcs)) else dataclasses.replace(n, srcs=srcs)
                if n.op in _WHOLE and n is not st.value:
                    name = f"~w{count[0]}"
                    count[0] += 1
                    vars_[name] = got.type
                    pre.append(tir.Let(name, got, st.line))
                    got = Node(K.VAR, got.type, (), name)
                memo[id(n)] = got
            return got
        value = node(st.value)
        return pre + [dataclasses.replace(st, value=value)] if pre else [st]

    def stmts(b):
        out = []
        for st in b:
            if isinstance(st, tir.Let) and not _may_fail(st.value, set()):
                out.extend(hoisted(st))
                continue
            ch = {f: tuple(stmts(getattr(st, f))) for f in _BODIES if hasattr(st, f)}
            out.append(dataclasses.replace(st, **ch) if ch else st)
        return out
    body = tuple(stmts(prog.body))
    if count[0] == 0:
        return prog
    return dataclasses.replace(prog, body=body, vars=vars_)


def rewrite(prog: tir.Program) -> tir.Program:
    """The program the native lowering builds (the same values at every statement)."""
    return hoist_whole_tile(coalesce_copies(pointer_offsets(prog)))


__all__ = ["rewrite", "pointer_offsets", "coalesce_copies", "hoist_whole_tile"]

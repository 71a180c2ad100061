"""The region plan: a kernel's body as work-item loops between its synchronisation points,
and the values that cross them (after pocl's work-group functions and SYCL native-CPU's
WorkItemLoopsPass). An analysis of the specialised IR, before any code: the lowering emits
what it says (lowering/regions.py, collectives.py), `cohort run --dump regions` prints it.

The body is cut at every top-level collective and barrier, and around every `if` or `for`
with a barrier inside (block-uniform, spec.py proves it). What lies between two cuts is a
`Packets` region: the block's packets run it one after another. A cut `if` or `for` runs once
for the block (`BlockIf`, `BlockFor`): its condition or bounds are evaluated for the block's
thread 0, and its bodies are regions again. A variable used in more than one region (or by a
block-level condition or bound) is kept per thread across them (`RegionPlan.cross`); a
block-level loop's variable is one value for the block (`RegionPlan.block_loops`).

Planted bugs (inject.py) that change the plan are read from the `bugs` given (the build's
CodegenConfig.bugs), never from process state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..refimpl.ir import (
    Barrier,
    Collective,
    Expr,
    For,
    If,
    Kernel,
    Op,
    defined_name,
    defined_var,
    stmt_exprs,
    walk_expr,
    walk_stmts,
)


@dataclass(frozen=True)
class Packets:
    stmts: tuple
    coll: Optional[Collective] = None      # the collective that ends it, if one does
    barrier: Optional[Barrier] = None      # the barrier that ends it, if one does


@dataclass(frozen=True)
class BlockIf:
    s: If
    then: tuple
    orelse: tuple


@dataclass(frozen=True)
class BlockFor:
    s: For
    body: tuple


def has_barrier(s) -> bool:
    return any(isinstance(x, Barrier) for x in walk_stmts((s,)))


def split_regions(body, bugs: tuple = ()) -> tuple:
    """The regions of a statement list, in order (never empty at the top level)."""
    items, cur, late = [], [], []

    def flush(**end):
        if cur or end:
            items.append(Packets(tuple(cur), **end))
        cur.clear()

    for s in body:
        if late and not isinstance(s, (Collective, Barrier)) and not has_barrier(s):
            cur.append(s)                 # planted barrier_late: the statement after it joins
            flush(barrier=late.pop())
            continue
        if isinstance(s, Collective):
            flush(coll=s)
        elif isinstance(s, Barrier):
            if "barrier_late" in bugs:
                late.append(s)
            else:
                flush(barrier=s)
        elif isinstance(s, If) and has_barrier(s):
            flush()
            items.append(BlockIf(s, split_regions(s.then, bugs), split_regions(s.orelse, bugs)))
        elif isinstance(s, For) and has_barrier(s):
            flush()
            items.append(BlockFor(s, split_regions(s.body, bugs)))
        else:
            cur.append(s)
    if late:
        flush(barrier=late.pop())
    flush()
    return tuple(items)


def walk_regions(items):
    for it in items:
        yield it
        if isinstance(it, BlockIf):
            yield from walk_regions(it.then)
            yield from walk_regions(it.orelse)
        elif isinstance(it, BlockFor):
            yield from walk_regions(it.body)


def block_exprs(it) -> tuple:
    """The expressions a block-level region evaluates for the block."""
    if isinstance(it, BlockIf):
        return (it.s.cond,)
    if isinstance(it, BlockFor):
        return (it.s.start, it.s.stop)
    return ()


def expr_vars(e: Expr) -> set:
    return {n.arg for n in walk_expr(e) if n.op is Op.VAR}


def names_in(stmts, coll=None) -> set:
    """Variable names a region reads or writes."""
    names = set()
    for s in walk_stmts(stmts):
        if defined_name(s) is not None:
            names.add(defined_name(s))
        for e in stmt_exprs(s):
            names.update(n.arg for n in walk_expr(e) if n.op is Op.VAR)
    if coll is not None:
        names.update(n.arg for n in walk_expr(coll.value) if n.op is Op.VAR)
    return names


@dataclass(frozen=True)
class RegionPlan:
    regions: tuple          # Packets / BlockIf / BlockFor, in order
    cross: frozenset        # variables kept per thread across regions (collectives' results included)
    block_loops: tuple      # each block-level loop's variable, in order (one value for the block)
    collectives: tuple      # the collectives that end regions, in order
    barriers: int           # barrier statements in the body

    def outline(self) -> list:
        """The region structure as text, one line per region (CompiledKernel.regions)."""
        return _outline(self.regions, 0)

    def describe(self) -> list:
        """The outline, then the values that cross regions (`cohort run --dump regions`)."""
        out = self.outline()
        out.append(f"kept per thread across regions: {', '.join(sorted(self.cross)) or 'none'}")
        loops = list(dict.fromkeys(self.block_loops))
        out.append(f"one value per block (block-level loop variables): {', '.join(loops) or 'none'}")
        return out


def plan_regions(kernel: Kernel, bugs: tuple = ()) -> RegionPlan:
    """The region plan of specialised kernel `kernel`, with planted bugs `bugs` (inject.py)."""
    regions = split_regions(kernel.body, bugs)
    sites, colls, loops = [], [], []
    merge = False
    for it in walk_regions(regions):
        if isinstance(it, Packets):
            if merge:              # planted barrier_live_unsaved: the barrier's two sides one site
                sites[-1] = sites[-1] | names_in(it.stmts, it.coll)
            else:
                sites.append(names_in(it.stmts, it.coll))
            merge = it.barrier is not None and "barrier_live_unsaved" in bugs
            colls += [it.coll] if it.coll is not None else []
        else:
            sites += [expr_vars(e) for e in block_exprs(it)]
            loops += [it.s.var] if isinstance(it, BlockFor) else []
    names = dict(filter(None, (defined_var(s) for s in walk_stmts(kernel.body))))
    cross = {n for n in names if sum(n in c for c in sites) > 1} - set(loops)
    cross |= {c.name for c in colls}
    return RegionPlan(regions, frozenset(cross), tuple(loops), tuple(colls),
                      sum(isinstance(s, Barrier) for s in walk_stmts(kernel.body)))


def _outline(items, indent: int) -> list:
    from ..refimpl.printer import format_expr
    out, pad = [], "  " * indent
    for it in items:
        if isinstance(it, Packets):
            end = (f", then {it.coll.op.value}" if it.coll is not None else
                   ", then barrier" if it.barrier is not None else "")
            out.append(f"{pad}packets: {len(it.stmts)} statement(s){end}")
        elif isinstance(it, BlockIf):
            out.append(f"{pad}block if {format_expr(it.s.cond)}:")
            out += _outline(it.then, indent + 1)
            if it.orelse:
                out.append(f"{pad}else:")
                out += _outline(it.orelse, indent + 1)
        else:
            s = it.s
            out.append(f"{pad}block for {s.var} in range({format_expr(s.start)}, {format_expr(s.stop)}, "
                       f"{format_expr(s.step)}):")
            out += _outline(it.body, indent + 1)
    return out

"""Regions: a block's body as work-item loops between its synchronisation points
(after pocl's work-group functions and SYCL native-CPU's WorkItemLoopsPass).

The body is cut at every top-level collective and barrier, and around every
`if` or `for` with a barrier inside (block-uniform, spec.py proves it). What
lies between two cuts is a `Packets` region: the block's packets run it one
after another. A cut `if` or `for` runs once for the block (`BlockIf`,
`BlockFor`): its condition or bounds are evaluated for the block's thread 0,
and its bodies are regions again. A variable used in more than one region (or
by a block-level condition or bound) is kept per thread across them
(collectives.py); a block-level loop's variable is one value for the block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llvmlite import ir

from ...refimpl.ir import Barrier, Collective, Expr, For, If, Op, walk_expr, walk_stmts
from .. import inject
from ..context import I1, I32T, I64, vector_const
from ..shapes import Access


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


def split_regions(body) -> tuple:
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
            if inject.active("barrier_late"):
                late.append(s)
            else:
                flush(barrier=s)
        elif isinstance(s, If) and has_barrier(s):
            flush()
            items.append(BlockIf(s, split_regions(s.then), split_regions(s.orelse)))
        elif isinstance(s, For) and has_barrier(s):
            flush()
            items.append(BlockFor(s, split_regions(s.body)))
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


def describe(items, indent: int = 0) -> list:
    """The region structure as text (`cohort run --dump`)."""
    from ...refimpl.printer import format_expr
    out, pad = [], "  " * indent
    for it in items:
        if isinstance(it, Packets):
            end = (f", then {it.coll.op.value}" if it.coll is not None else
                   ", then barrier" if it.barrier is not None else "")
            out.append(f"{pad}packets: {len(it.stmts)} statement(s){end}")
        elif isinstance(it, BlockIf):
            out.append(f"{pad}block if {format_expr(it.s.cond)}:")
            out += describe(it.then, indent + 1)
            if it.orelse:
                out.append(f"{pad}else:")
                out += describe(it.orelse, indent + 1)
        else:
            s = it.s
            out.append(f"{pad}block for {s.var} in range({format_expr(s.start)}, {format_expr(s.stop)}, "
                       f"{format_expr(s.step)}):")
            out += describe(it.body, indent + 1)
    return out


class RegionLowering:
    def emit_regions(self, items, base, npk):
        b = self.b
        for p, it in enumerate(items):
            if isinstance(it, Packets):
                self.counted_loop(self.i32(0), npk, lambda q, it=it: self.packet_phase(
                    q, base, it.stmts, it.coll), f"region{p}.packet")
                if it.coll is not None:
                    self.collective(it.coll, npk)
                if it.coll is not None or it.barrier is not None:
                    self.next_phase()          # sanitize builds count the block's phases
            elif isinstance(it, BlockIf):
                self.cur = it.s
                self.annotate(it.s, "if", "", Access("uniform"), "branch")
                self.check_block_control(it, base)     # sanitize builds: every thread's (sanitize_global.py)
                c = self.block_value(it.s.cond, base)
                with b.if_else(c) as (then, otherwise):
                    with then:
                        self.emit_regions(it.then, base, npk)
                    with otherwise:
                        self.emit_regions(it.orelse, base, npk)
            else:
                self.block_loop(it, base, npk)

    def block_loop(self, it: BlockFor, base, npk):
        b, s = self.b, it.s
        self.cur = s
        self.annotate(s, "for", "", Access("uniform"), "branch")
        self.annotate(s.stop, "for-stop", "", Access("uniform"), "branch")
        self.check_block_control(it, base)             # sanitize builds: every thread's (sanitize_global.py)
        start = b.sext(self.block_value(s.start, base), I64)
        stop = b.sext(self.block_value(s.stop, base), I64)
        step = int(s.step.arg)

        def iteration(k):
            v = b.add(start, b.mul(k, self.i64(step)))
            b.store(b.trunc(v, I32T), self.block_slots[s.var])
            self.emit_regions(it.body, base, npk)
        self.counted_loop(self.i64(0), self.scalar_trips(start, stop, step), iteration, f"block.{s.var}")

    def block_value(self, e: Expr, base):
        """e for the block, an i1 or i32 scalar: evaluated for the block's first packet with
        only lane 0 (thread 0, active in every block that runs) on; block-uniform by spec.py."""
        W = self.W
        self.t0 = self.i32(0)
        self.tid = self.consecutive(self.t0)
        self.gid = self.consecutive(base)
        lane0 = None if W == 1 else vector_const(self.vty(I1), [1] + [0] * (W - 1))
        with self.masked(lane0, merge=False):
            self.load_live_in(expr_vars(e))
            v = self.ev(e, {})
        return self.lane0(v)

    def load_live_in(self, used: set):
        """Into the slots: the variables kept per thread (this packet's lanes) and the
        block-level loop variables (one value, splat)."""
        b = self.b
        for n in sorted(used & self.cross):
            b.store(self.load_cross(n), self.slots[n])
        for n in sorted(used & self.block_slots.keys()):
            v = b.load(self.block_slots[n], typ=I32T)
            b.store(self.splat(v, self.types[n]), self.slots[n])

    def block_scalar(self, name: str):
        return self.alloca(ir.IntType(32), f"{name}.block")

"""Emitting the region plan (region_plan.py, which cuts the body and finds the values that
cross): each Packets region as a loop over the block's packets, each BlockIf / BlockFor once
for the block, evaluated for its thread 0; variables kept per thread across regions are
loaded into the packet's slots where a region uses them (collectives.py stores them).
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import Expr
from ..context import I1, I32T, I64, vector_const
from ..region_plan import BlockFor, BlockIf, Packets, expr_vars
from ..shapes import Access


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
                self.now.cur = it.s
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
        self.now.cur = s
        self.annotate(s, "for", "", Access("uniform"), "branch")
        self.annotate(s.stop, "for-stop", "", Access("uniform"), "branch")
        self.check_block_control(it, base)             # sanitize builds: every thread's (sanitize_global.py)
        start = b.sext(self.block_value(s.start, base), I64)
        stop = b.sext(self.block_value(s.stop, base), I64)
        step = int(s.step.arg)

        def iteration(k):
            v = b.add(start, b.mul(k, self.i64(step)))
            b.store(b.trunc(v, I32T), self.storage.block_slots[s.var])
            self.emit_regions(it.body, base, npk)
        self.counted_loop(self.i64(0), self.scalar_trips(start, stop, step), iteration, f"block.{s.var}")

    def block_value(self, e: Expr, base):
        """e for the block, an i1 or i32 scalar: evaluated for the block's first packet with
        only lane 0 (thread 0, active in every block that runs) on; block-uniform by spec.py."""
        W = self.W
        self.now.t0 = self.i32(0)
        self.now.tid = self.consecutive(self.now.t0)
        self.now.gid = self.consecutive(base)
        lane0 = None if W == 1 else vector_const(self.vty(I1), [1] + [0] * (W - 1))
        with self.masked(lane0, merge=False):
            self.load_live_in(expr_vars(e))
            v = self.ev(e, {})
        return self.lane0(v)

    def load_live_in(self, used: set):
        """Into the slots: the variables kept per thread (this packet's lanes) and the
        block-level loop variables (one value, splat)."""
        b = self.b
        for n in sorted(used & self.plan.cross):
            b.store(self.load_cross(n), self.storage.slots[n])
        for n in sorted(used & self.storage.block_slots.keys()):
            v = b.load(self.storage.block_slots[n], typ=I32T)
            b.store(self.splat(v, self.facts.types[n]), self.storage.slots[n])

    def block_scalar(self, name: str):
        return self.alloca(ir.IntType(32), f"{name}.block")

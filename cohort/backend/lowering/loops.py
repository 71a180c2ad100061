"""Loops: one counted-loop emitter for every loop the lowering makes (blocks,
packets, tree steps, a kernel's `for`), and the lowering of a kernel's `for`.

A `for` keeps Python's range semantics with 64-bit trip arithmetic (no wrap
near INT_MAX): the loop counts iterations k, and the variable is
start + k*step. Three shapes, chosen by the lanes' shapes of start and stop:

- uniform bounds (always, at width 1): one scalar trip count, no mask;
- the GPU idiom range(t + c, n, step), an affine start and a uniform stop,
  in a packet running unmasked with full_packet on: the lanes still running at
  iteration k are a prefix, so the iterations every lane runs are split from
  the tail ones, which run under a prefix mask from scalar arithmetic;
- anything else: per-lane trip counts; the iterations every active lane runs
  are split from the tail (full_packet), which alone pays for a mask
  (DESIGN §5). The launch's one partial packet runs its loops masked
  throughout: less code.

The first two make claims about the lanes (annotated on the loop, checked by
the interpreter).
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import DType, For, Op
from .. import jit
from ..context import I32T, I64
from ..shapes import Access

# A loop whose bounds are constants (after specialisation) and that runs at most this many
# times is unrolled in a user's build: CUB-style items[] loops (`for k in range(cols // B)`)
# then index private arrays by constants, so LLVM keeps the items in registers. LLVM's own
# unroller (the pipeline's loop_unrolling) did as much but made some modules 2-3x dearer
# to compile; this asks for it where it pays (docs/private).
UNROLL_TRIPS = 8


class LoopLowering:
    def counted_loop(self, start, stop, body, name: str, unroll: bool = False, counter=None):
        """for (i = start; i < stop; i++) body(i), with i of start's integer type; `unroll`:
        marked for full unrolling (unroll_fully). `counter` = (first, step): body(i, j) with
        j = first + (i - start) * step a counter of its own, stepped with no signed wrap (the
        caller's promise for every iteration that runs)."""
        b = self.b
        pre = b.block
        head = self.fn.append_basic_block(f"{name}.head")
        loop = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(start.type, name=name)
        i.add_incoming(start, pre)
        if counter is not None:
            j = b.phi(counter[0].type, name=f"{name}.var")
            j.add_incoming(counter[0], pre)
        b.cbranch(b.icmp_signed("<", i, stop), loop, done)
        b.position_at_end(loop)
        if counter is None:
            body(i)
        else:
            body(i, j)
            j.add_incoming(b.add(j, counter[0].type(counter[1]), flags=["nsw"]), b.block)
        i.add_incoming(b.add(i, start.type(1)), b.block)
        latch = b.branch(head)
        if unroll:
            self.unroll_fully(latch)
        b.position_at_end(done)

    def lane_loop(self, body, carried=None):
        """body(l, value) for l = 0 .. W-1 in order, l an i32 value, threading `value` (what
        the lanes built so far) through them; returns the last value. Per-lane work (a
        predicated=off effect, an atomic update) is emitted once, not W times: written out
        lane by lane, such builds were a fuzz campaign's largest modules (a 32-lane one 21k
        lines of IR), though level 0 builds them for one run. A user's build asks LLVM to
        unroll it fully (unroll_fully): straight-line code with constant lane numbers, as if
        written out."""
        b, fn = self.b, self.fn
        if self.W == 1:
            return body(self.i32(0), carried)
        pre = b.block
        head, step, done = (fn.append_basic_block(f"lane.{x}") for x in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        lane = b.phi(I32T, name="lane")
        lane.add_incoming(self.i32(0), pre)
        v = None
        if carried is not None:
            v = b.phi(carried.type)
            v.add_incoming(carried, pre)
        lanes = self.W - 1 if self.planted("lane_loop_short") else self.W
        b.cbranch(b.icmp_unsigned("<", lane, self.i32(lanes)), step, done)
        b.position_at_end(step)
        out = body(lane, v)
        lane.add_incoming(b.add(lane, self.i32(1)), b.block)
        if v is not None:
            v.add_incoming(out, b.block)
        self.unroll_fully(b.branch(head))
        b.position_at_end(done)
        return v

    def constant_trips(self, s: For) -> int:
        """range(start, stop, step)'s length when both bounds are known at compile time
        (literals, or variables set once at the top level to them), else -1."""
        start, stop = self.facts.constant_of(s.start), self.facts.constant_of(s.stop)
        step = int(s.step.arg)
        if self.planted("const_trips_unit_step") and Op.VAR in (s.start.op, s.stop.op):
            step = 1                                 # planted: a bound through a variable, the step lost
        return -1 if start is None or stop is None else len(range(start, stop, step))

    def trips_bound(self, s: For) -> int:
        """At most how many times a uniform loop runs, when that is known at compile time though
        its count may not be: a constant start and a stop whose value is at most a constant
        (`range(min(TS, C - c0))`, a partial tile's loop), else -1."""
        start, step = self.facts.constant_of(s.start), int(s.step.arg)
        top = self.upper_bound(s.stop)
        if start is None or top is None or step <= 0:
            return -1
        return len(range(start, top, step))

    def upper_bound(self, e, depth: int = 0):
        """A constant no smaller than the i32 expression's value, or None: its value when known,
        and min(a, b) at most either's bound."""
        c = self.facts.constant_of(e)
        if c is not None or depth > 8 or e.op is not Op.MIN or e.dtype is not DType.I32:   # signed min only
            return c
        tops = [t for t in (self.upper_bound(x, depth + 1) for x in e.src) if t is not None]
        return min(tops) if tops else None

    def unroll_fully(self, latch):
        """Mark the loop whose back edge is `latch` for full unrolling (llvm.loop.unroll.full,
        honoured though the tuning turns the unroller off for everything else): a distinct,
        self-referring loop id each time. Only in a build optimised as a user's is (jit.FULL):
        the fuzzer's quick levels keep the loop, as unrolled it made their modules 2-3x
        dearer to optimise and compile (docs/fuzzing.md, 'per-lane work as one loop')."""
        if self.config.level != jit.FULL:
            return
        m = self.module
        if self.now.unroll_full is None:
            self.now.unroll_full = m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.full")])
        loop_id = ir.values.MDValue(m, [self.now.unroll_full], name=str(len(m.metadata)))
        loop_id.operands = (loop_id, self.now.unroll_full)
        latch.set_metadata("llvm.loop", loop_id)

    def loop(self, s: For):
        # a shared load read through a transposing prologue is this loop's (transposed.py):
        # loops nested in it, and other loops, read theirs as they are
        outer = self.now.transposed
        self.now.transposed = {}
        self.uniform_or_lane_loop(s)
        self.now.transposed = outer

    def uniform_or_lane_loop(self, s: For):
        b, W = self.b, self.W
        memo = {}
        start_v, stop_v = self.ev(s.start, memo), self.ev(s.stop, memo)
        step = int(s.step.arg)
        sh_start, sh_stop = self.shape(s.start), self.shape(s.stop)
        iterate = lambda lo, hi, running=None, unroll=False: self.counted_loop(
            lo, hi, lambda k: self.loop_body(s, start_v, step, k, running and running(k)), "k", unroll)
        if sh_start.uniform and sh_stop.uniform and abs(step) == 1:
            # the variable is a counter of its own, stepped without a wrap (add nsw: it stays in
            # [start, stop) and its last step reaches stop at most), so LLVM widens it and an
            # index built on it (exprs.index_value) keeps 64-bit offsets: matmul's ragged-K
            # loop, docs/README.md, 'matmul at the FMA limit'
            iterate = lambda lo, hi, running=None, unroll=False: self.counted_loop(
                lo, hi, lambda k, j: self.loop_body(s, start_v, step, k, None, j), "k", unroll,
                counter=(self.lane0(start_v), step))
        if sh_start.uniform and sh_stop.uniform:
            self.annotate(s, "for", "", Access("uniform"), "branch")
            self.annotate(s.stop, "for-stop", "", Access("uniform"), "branch")
            # a trip count known at compile time is written as a constant: where the bounds
            # are variables kept in memory across regions, LLVM could not see it and would
            # refuse (and warn about) the unrolling asked for
            trips = self.constant_trips(s)
            if trips >= 0 and Op.VAR in (s.start.op, s.stop.op):
                self.counts["constant_trips_var"] += 1     # bounds through variables (gen/steer.py PATHS)
            # (a sanitize build reads each shared load itself, to check it: sanitize.py)
            self.now.transposed = {} if self.variant.sanitize else self.transposed_reads(
                s, start_v, trips if trips >= 0 else self.trips_bound(s))
            iterate(self.i64(0), self.i64(trips) if trips >= 0 else
                    self.scalar_trips(b.sext(self.lane0(start_v), I64), b.sext(self.lane0(stop_v), I64), step),
                    unroll=0 < trips <= UNROLL_TRIPS)
            return
        stride = sh_start.stride
        if (self.mask is None and sh_stop.uniform and stride is not None and stride > 0 and step > 0
                and self.variant.full_packet):
            self.annotate(s, "for", "", Access("strided", stride), "prefix")
            self.counts["prefix_loops"] += 1
            self.annotate(s.stop, "for-stop", "", Access("uniform"), "prefix")
            first = b.sext(self.lane0(start_v), I64)
            stop = b.sext(self.lane0(stop_v), I64)
            kmax = self.scalar_trips(first, stop, step)
            # the last lane starts stride*(W-1) past the first: it runs the fewest iterations
            last = self.i64((1 if self.planted("prefix_loop_stride") else stride) * (W - 1))
            kmin = self.scalar_trips(b.add(first, last), stop, step)
            iterate(self.i64(0), kmin)

            def prefix(k):
                # lane l runs iteration k iff first + stride*l + k*step < stop
                room = b.sub(b.sub(stop, first), b.mul(k, self.i64(step)))
                up = 0 if self.planted("prefix_lanes_floor") else stride - 1     # planted: rounds down
                lanes = b.sdiv(b.add(room, self.i64(up)), self.i64(stride))
                lanes = b.select(b.icmp_signed("<", lanes, self.i64(0)), self.i64(0), lanes)
                lanes = b.select(b.icmp_signed(">", lanes, self.i64(W)), self.i64(W), lanes)
                return b.icmp_signed("<", self.iota(), self.splat(b.trunc(lanes, I32T), DType.I32))
            iterate(kmin, kmax, prefix)
            return
        start64 = b.sext(start_v, self.vty(I64))
        stop64 = b.sext(stop_v, self.vty(I64))
        # trips = max(0, ceil((stop - start) / step)), exact in 64 bits
        span = b.sub(stop64, start64) if step > 0 else b.sub(start64, stop64)
        a = abs(step)
        trips = b.sdiv(b.add(span, self.vconst64(a - 1)), self.vconst64(a))
        trips = b.select(b.icmp_signed(">", trips, self.vconst64(0)), trips, self.vconst64(0))
        live = trips if self.mask is None else b.select(self.mask, trips, self.vconst64(0))
        kmax = self.intrinsic(f"llvm.vector.reduce.smax.v{W}i64", I64, [live])
        first = self.i64(0)
        if self.variant.full_packet and not self.now.tail_path:
            # lanes beyond the launch never run: they must not shorten the full part
            full_lanes = trips if self.mask is None else b.select(self.mask, trips, self.vconst64(2 ** 62))
            kmin = self.intrinsic(f"llvm.vector.reduce.smin.v{W}i64", I64, [full_lanes])
            kmin = b.select(b.icmp_signed("<", kmin, kmax), kmin, kmax)
            iterate(first, kmin)
            first = kmin
        iterate(first, kmax, lambda k: b.icmp_signed("<", self.splat64(k), trips))

    def scalar_trips(self, start, stop, step: int):
        """max(0, ceil((stop - start) / step)) in 64 bits: no wrap near INT_MAX."""
        b = self.b
        span = b.sub(stop, start) if step > 0 else b.sub(start, stop)
        a = abs(step)
        t = b.sdiv(b.add(span, self.i64(a - 1)), self.i64(a))
        return b.select(b.icmp_signed(">", t, self.i64(0)), t, self.i64(0))

    def loop_body(self, s: For, start_v, step: int, k, running, var=None):
        """Iteration k: the variable is start + k*step (`var`, the loop's own i32 counter, when
        given), on the lanes `running` (None: all)."""
        b = self.b
        if var is not None:
            j = self.splat(var, DType.I32)
        else:
            k32 = b.trunc(k, I32T)
            j = b.add(start_v, b.mul(self.splat(k32, DType.I32), self.cx.const(DType.I32, step)))
        b.store(j, self.storage.slots[s.var])
        outer, self.now.loop_k = self.now.loop_k, k
        with self.masked(running):
            self.stmts(s.body)
        self.now.loop_k = outer

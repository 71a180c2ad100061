"""Atomic updates (DESIGN §3): `atomic_add(target, index, value)` and its kin.

Each active lane does its own read-modify-write, one lane after another in
lane order, so lanes of one packet that hit one address all count. Updates of
a buffer are real atomic instructions when other threads of the launch may run
at the same time (pool workers' updates interleave safely); a call running the
whole launch, and every update of a shared array (one worker's), use a plain
load, op and store. Integer ops are one `atomicrmw` (wrapping add and sub,
and/or/xor, signed or unsigned min/max); f32 min/max are a compare-exchange
loop computing the order-independent definition: the canonical NaN if either
side is NaN, else the least/greatest value with -0 below +0.
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import Atomic, AtomicOp, DType
from ...refimpl.semantics import CANONICAL_NAN_BITS
from ..context import ERR_STORE_OOB, I1, I32T, I64, PTR
from ..shapes import Access

_RMW = {AtomicOp.ADD: "add", AtomicOp.SUB: "sub", AtomicOp.AND: "and", AtomicOp.OR: "or",
        AtomicOp.XOR: "xor"}
_MINMAX = {(AtomicOp.MIN, DType.I32): "min", (AtomicOp.MAX, DType.I32): "max",
           (AtomicOp.MIN, DType.U32): "umin", (AtomicOp.MAX, DType.U32): "umax"}


class AtomicLowering:
    def atomic(self, s: Atomic):
        b, dt = self.b, s.value.dtype
        memo = {}
        idx = self.ev(s.index, memo)
        val = self.ev(s.value, memo)
        if s.target in self.storage.shared_arrays:
            base, _, idx64 = self.shared_index(s.target, idx, s.index, s, s)
            self.check_written(s.target, idx64, s, s)        # an update reads the slot (sanitize.py)
            self.check_race(s.target, idx64, s.op.value, s, s)
        else:
            base = self.entry.bufs[s.target]
            idx64 = self.index64(idx, s.index.dtype)
            self.check_lanes(idx64, self.entry.lens[s.target], ERR_STORE_OOB, s, key=s)
            self.check_global(s.target, idx64, s.op.value, s, s)    # sanitize builds (sanitize_global.py)
        self.annotate(s, "atomic", s.target, Access("scatter"), "per-lane")
        self.counts["atomics"] += 1
        if dt is DType.F32 and s.op in (AtomicOp.MIN, AtomicOp.MAX):
            self.counts["f32_atomic_minmax"] += 1
        bits = b.bitcast(val, self.vty(I32T)) if dt is DType.F32 else val
        if self.planted("atomic_lanes_collide") and self.W > 1:
            ptrs = self.lane_pointers(base, idx64, I32T)
            old = self.gather(ptrs, I32T)
            new = self.combine_lanes(s.op, dt, old, bits)
            self.scatter(new, ptrs, I32T)
            return
        lane_at, lane_on = self.lanes_in_memory(idx64)
        if s.target in self.storage.shared_arrays:
            # A block's shared array is touched only by the worker running the block (a task is
            # whole blocks), so its lanes update it with a plain load, the op and a store, in
            # lane order: exact, and no locked instruction.
            self.plain_updates(s.op, dt, base, bits, lane_at, lane_on, spare_element=True)
            return
        # A buffer takes a real atomic per lane, unless this call runs every block of the
        # launch (the calling thread alone, or one task): then no other thread of the launch
        # exists to interleave with, and plain updates leave the same memory without a locked
        # instruction each (a histogram's flush: one per bin per block).
        def buffer_lane(li, _):
            on = lane_on(li)
            ptr = b.gep(base, [lane_at(li)], source_etype=I32T)
            v = self.lane(bits, li)
            if on is None:
                self.atomic_one(s.op, dt, ptr, v)
            else:
                with b.if_then(on):
                    self.atomic_one(s.op, dt, ptr, v)
        with b.if_else(self.entry.whole_launch) as (alone, with_others):
            with alone:
                self.plain_updates(s.op, dt, base, bits, lane_at, lane_on, spare_element=False)
            with with_others:
                self.lane_loop(buffer_lane)

    def plain_updates(self, op: AtomicOp, dt: DType, base, bits, lane_at, lane_on, spare_element: bool):
        """Each active lane's update as a plain load, op and store, in lane order. An off lane
        rewrites element 0 with its own value where `spare_element` (a shared array: element 0
        always exists; no branch per lane), else it branches around its update (a buffer may be
        empty). A packet whose lanes are all on takes a copy of the loop with no mask at all
        (ISPC's all-on body beside the masked one: every packet but a block's last, in a
        histogram)."""
        b = self.b

        def lanes(masked):
            def one(li, _):
                on = lane_on(li) if masked else None
                at = lane_at(li)
                if on is not None and spare_element:
                    at = b.select(on, at, ir.Constant(at.type, 0))
                    if self.planted("shared_atomic_spare_update"):
                        on = ir.Constant(I1, 1)        # planted: the off lane's update kept at element 0
                ptr = b.gep(base, [at], source_etype=I32T)

                def update(keep=None):
                    old = b.load(ptr, typ=I32T, align=4)
                    new = self.combine(op, dt, old, self.lane(bits, li))
                    b.store(new if keep is None else b.select(keep, new, old), ptr, align=4)
                if on is None:
                    update()
                elif spare_element:
                    update(on)
                else:
                    with b.if_then(on):
                        update()
            self.lane_loop(one)
        if spare_element and self.mask is not None:
            self.counts["shared_atomic_masked"] += 1     # off lanes sent to element 0 (gen/steer.py PATHS)
        if self.mask is None or self.W == 1:
            lanes(self.mask is not None)
            return
        with b.if_else(self.every(self.mask)) as (all_on, some_off):
            with all_on:
                lanes(False)
            with some_off:
                lanes(True)

    def lanes_in_memory(self, idx64):
        """(lane -> i64 index, lane -> i1 or None) for a loop over the packet's lanes that reads
        each lane's index from one store of the packet (and its mask bit from an integer), not
        an extract per lane: X86 extracts lanes past the first 128 bits in two or three
        instructions each and keeps the whole mask in general registers, spilling."""
        b, W = self.b, self.W
        if W == 1:
            return (lambda li: idx64), (lambda li: self.mask)
        slot = self.alloca(ir.ArrayType(I32T, W), "lane.at")
        b.store(b.trunc(idx64, self.vty(I32T)), slot, align=4)
        # an empty asm hands the slot back as a pointer LLVM cannot see through, so it keeps the
        # store and the scalar loads instead of folding them back into extracts
        opaque = b.asm(ir.FunctionType(PTR, [PTR]), "", "=r,0", [slot], False, name="lane.at.p")
        # the mask as an integer of at least 32 bits (64 at 64 lanes: lanes 4 x interleave 16)
        width = max(W, 32)
        bits = None
        if self.mask is not None:
            bits = b.bitcast(self.mask, ir.IntType(W))
            bits = bits if W == width else b.zext(bits, ir.IntType(width))

        def at(li):
            return b.sext(b.load(b.gep(opaque, [li], source_etype=I32T), typ=I32T, align=4), I64)

        def on(li):
            shift = li if width == 32 else b.zext(li, ir.IntType(width))
            return None if bits is None else b.trunc(b.lshr(bits, shift), I1)
        return at, on

    def atomic_one(self, op: AtomicOp, dt: DType, ptr, v):
        """One lane's update of the i32 at `ptr` by the 32 bits `v`."""
        b = self.b
        if self.planted("atomic_plain"):      # planted: a load, the op, a store (updates lost);
            old = b.load_atomic(ptr, "monotonic", 4, typ=I32T)     # each access atomic, so LLVM
            b.atomic_rmw("xchg", ptr, self.combine(op, dt, old, v), "monotonic")   # keeps each
            return
        if dt is not DType.F32:
            name = _RMW.get(op) or _MINMAX[(op, dt)]
            b.atomic_rmw(name, ptr, v, "monotonic")
            return
        pre = b.block
        first = b.load_atomic(ptr, "monotonic", 4, typ=I32T)
        loop = self.fn.append_basic_block("atomic.cas")
        done = self.fn.append_basic_block("atomic.done")
        b.branch(loop)
        b.position_at_end(loop)
        old = b.phi(I32T)
        old.add_incoming(first, pre)
        pair = b.cmpxchg(ptr, old, self.combine(op, dt, old, v), "monotonic", "monotonic")
        old.add_incoming(b.extract_value(pair, 0), loop)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)

    def combine_lanes(self, op: AtomicOp, dt: DType, old, v):
        """The planted atomic_lanes_collide's op on every lane (combine, lane by lane)."""
        b = self.b
        out = old
        for lane in range(self.W):
            i = self.i32(lane)
            out = b.insert_element(out, self.combine(op, dt, b.extract_element(old, i), b.extract_element(v, i)), i)
        return out

    def combine(self, op: AtomicOp, dt: DType, old, v):
        """old op v on 32-bit patterns (semantics.atomic_update, one element)."""
        b = self.b
        if dt is not DType.F32:
            if op in _RMW:
                return {"add": b.add, "sub": b.sub, "and": b.and_, "or": b.or_, "xor": b.xor}[_RMW[op]](old, v)
            signed = dt is DType.I32
            cmp = (b.icmp_signed if signed else b.icmp_unsigned)("<" if op is AtomicOp.MIN else ">", v, old)
            return b.select(cmp, v, old)
        f = ir.FloatType()
        nan = b.fcmp_unordered("uno", b.bitcast(old, f), b.bitcast(old, f))
        if not self.planted("atomic_f32_nan_old"):      # planted: a NaN update value is not seen
            nan = b.or_(nan, b.fcmp_unordered("uno", b.bitcast(v, f), b.bitcast(v, f)))
        key = lambda x: b.xor(x, b.and_(b.ashr(x, ir.Constant(I32T, 31)), ir.Constant(I32T, 0x7FFFFFFF)))
        better = b.icmp_signed("<" if op is AtomicOp.MIN else ">", key(v), key(old))
        if self.planted("atomic_f32_zero_equal"):        # planted: compared as floats, -0.0 == +0.0
            better = b.fcmp_ordered("<" if op is AtomicOp.MIN else ">", b.bitcast(v, f), b.bitcast(old, f))
        return b.select(nan, ir.Constant(I32T, CANONICAL_NAN_BITS), b.select(better, v, old))

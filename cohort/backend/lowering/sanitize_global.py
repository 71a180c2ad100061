"""The sanitizing build (`sanitize=on`) in global memory and at barriers: what the interpreter
rejects there, detected natively, as compute-sanitizer's racecheck and synccheck do on a GPU.

Races and write conflicts in buffers. The interpreter records the accesses of every buffer
the kernel stores to or updates (loads of the others never race) and rejects two accesses of
one element by different threads of a launch - not both loads, not both updates by one atomic
operation - unless the two threads are in one block and a barrier or collective of that block
lies between them (interpreter._Memory). The build keeps, per element of such a buffer, a
shadow of SHADOW_WORDS int64 words (backend/sanitize_record.py allocates it, the entry finds
it in its error record):

    per way (store, load, atomic update), two words
      launch range   the lowest and highest thread (global id) that accessed the element that
                     way in this launch, as (0xFFFFFFFF - lowest) | (highest + 1) << 32, so
                     that zero is "nobody" and both halves only grow (updated by
                     compare-exchange: pool workers run blocks at the same time)
      phase range    the phase of the block it was last accessed in that way and the lowest
                     and highest thread of the block (ids in the block) in that phase, as
                     phase << 32 | lowest << 16 | highest; phases count from 1 at the start
                     of each block, +1 at each barrier or collective
    the atomic operation of the first update (+ 1; 0: none), set before its range

Each active lane of an access, in lane order, records itself in its way's launch range
(compare-exchange), then checks the ways its way conflicts with (its own as it was before it):
another block in the launch range is a race (the interpreter's `other_block`, naming the
lowest or highest such thread), else another thread of the block in the same phase
(`same_phase`); then it records its phase range. Recording before checking, both sequentially
consistent, is what keeps two blocks that pool workers run at the same time from missing each
other. The message is the interpreter's ("store to y[3] races with the load by
thread 4 in this launch", "write conflict: threads 0 and 1 both store to y[0]") with
`[native, VARIANT]` appended. The interpreter runs a statement for every thread at once and
names the second access in its lock-step order; a build runs threads packet after packet, so
it names the pair in the order it ran them (a load before the other thread's store is
reported at the store), and when several pairs race, possibly another pair. One shadow word
for the atomic operation (the first update's, not one range per operation) can name a thread
that made the same update as the one reported, where another thread made a different one; the
race is real.

Barrier divergence. The validator proves every barrier's `if` and `for` block-uniform
(spec.BlockUniform); a build evaluates such a condition or loop's bounds for the block's
thread 0 only (region_plan.py). A sanitize build evaluates them for every thread of the block
first and, where they differ, reports the interpreter's barrier divergence: the threads that
reach the barrier (those taking its branch, or running more iterations than the fewest) and
those that do not. Only IR that bypasses the validator (or a validator bug) can get there.
Tests: tests/test_sanitize_global.py, tests/test_sanitize_barrier.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...refimpl.ir import AtomicOp, Barrier, Loc, walk_stmts
from ..context import ERR_BARRIER_DIVERGENCE, ERR_GLOBAL_RACE, ERR_SHADOW, I1, I32T, I64, PTR
from ..region_plan import BlockIf, expr_vars, has_barrier
from ..sanitize_record import OTHER, SHADOW_WORDS, WAYS, layout

_OPS = list(AtomicOp)


@dataclass(frozen=True)
class SharedSite:
    """What a report names: the statement's location, the array and the way of access."""
    loc: Loc
    arr: str
    how: str = "read"



class GlobalSanitizer:
    def global_shadows(self) -> tuple:
        """(buffer -> its shadow, the phase counter, sanitize_record.layout) of the buffers the
        kernel writes (sanitize builds; ({}, None, None) in the others): the shadows' addresses
        from the error record; a buffer longer than its shadow stops the entry before it touches
        any memory (ERR_SHADOW: the launcher fits the shadows and runs the launch again)."""
        gshadow = {}
        record = layout(self.k, self.variant)
        if record is None:
            return gshadow, None, None
        b = self.b
        gphase_ptr = self.alloca(I32T, "gphase")
        b.store(self.i32(1), gphase_ptr)
        word = lambda i: b.load(b.gep(self.entry.err_ptr, [self.i64(i)], source_etype=I64), typ=I64, align=8)
        for j, name in enumerate(record.shadowed):
            at = record.shadow_slot(j)
            short = b.icmp_unsigned("<", word(at + 1), self.entry.lens[name])
            with b.if_then(short, likely=False):
                b.store(self.i64(ERR_SHADOW), self.entry.err_ptr, align=8)
                b.ret_void()
            gshadow[name] = b.inttoptr(word(at), PTR)
        return gshadow, gphase_ptr, record

    def global_phase(self, first: bool):
        """A block starts (phase 1) or passes a barrier or collective (+1)."""
        if self.shadow.gphase_ptr is None:
            return
        b = self.b
        v = self.i32(1) if first else b.add(b.load(self.shadow.gphase_ptr, typ=I32T), self.i32(1))
        b.store(v, self.shadow.gphase_ptr)

    def site_id(self, tag, how: str, key, stmt, name: str) -> int:
        site = (tag, how, id(key))
        if site not in self.stmt_ids:
            self.stmt_ids[site] = len(self.stmt_table)
            self.stmt_table.append(SharedSite(stmt.loc, name, how))
        return self.stmt_ids[site]

    def each_active_lane(self, lane):
        """lane(li) for every active lane, in order (li an i32)."""
        b = self.b
        if self.W == 1:
            if self.mask is None:
                lane(self.i32(0))
            else:
                with b.if_then(self.mask):
                    lane(self.i32(0))
            return

        def each(li):
            if self.mask is None:
                lane(li)
            else:
                with b.if_then(self.lane_on(self.mask, li)):
                    lane(li)
        self.counted_loop(self.i32(0), self.i32(self.W), each, "grace.lane")

    def check_global(self, name: str, idx64, how: str, key, stmt):
        """Each active lane, in order: report a race of its access of buffer `name` (module
        notes), then record it. `how`: "read", "write" or an atomic operation's name."""
        if name not in self.shadow.gshadow:
            return
        b, shadow = self.b, self.shadow.gshadow[name]
        self.counts["globalchecks"] += 1
        sid = self.site_id("grace", how, key, stmt, name)
        phase = b.load(self.shadow.gphase_ptr, typ=I32T)
        mine = WAYS.index(how) if how in WAYS else 2
        op = self.i32(_OPS.index(AtomicOp(how)) if mine == 2 else 0)
        slot_of = self.lane_indices(idx64)
        t0, g0 = self.lane0(self.now.tid), self.lane0(self.now.gid)       # a packet's threads are consecutive

        def lane(li):
            slot = slot_of(li)
            t, g = (t0, g0) if self.W == 1 else (b.add(t0, li), b.add(g0, li))
            at = b.gep(shadow, [b.mul(slot, self.i64(SHADOW_WORDS))], source_etype=I64)
            r = b.call(self.grace_function(), [at, g, t, phase, self.i32(mine), op])
            with b.if_then(b.icmp_unsigned("!=", r, self.i64(0)), likely=False):
                with b.if_then(self.claim_error(b.sext(g, I64))):
                    for k, v in ((1, self.i64(sid)), (2, slot), (3, b.sext(g, I64)), (OTHER, b.sub(r, self.i64(1)))):
                        b.store(v, b.gep(self.entry.err_ptr, [self.i64(k)], source_etype=I64), align=8)
                    self.release_error(ERR_GLOBAL_RACE)
                b.ret_void()
        self.each_active_lane(lane)

    def lane_indices(self, idx64):
        """lane -> its i64 index: read from one store of the packet's indices, not extracted lane
        by lane (a variable extract is a spill of the vector each time; atomics.lanes_in_memory)."""
        b, W = self.b, self.W
        if W == 1 or not isinstance(idx64.type, ir.VectorType):
            return lambda li: idx64
        at = self.alloca(ir.ArrayType(I64, W), "grace.at")
        b.store(idx64, at, align=8)
        # an empty asm hides the slot from LLVM, which would fold the loads back into extracts
        opaque = b.asm(ir.FunctionType(PTR, [PTR]), "", "=r,0", [at], False, name="grace.at.p")
        return lambda li: b.load(b.gep(opaque, [li], source_etype=I64), typ=I64, align=8)

    def grace_function(self) -> ir.Function:
        """i64 grace(ptr element's shadow, i32 thread, i32 thread in block, i32 phase, i32 way,
        i32 op): 0, or 1 + (other thread | other way << 32) of the first conflicting access;
        records the access (module notes)."""
        fn = self.module.globals.get("cohort.grace")
        if fn is not None:
            return fn
        fn = ir.Function(self.module, ir.FunctionType(I64, [PTR, I32T, I32T, I32T, I32T, I32T]), "cohort.grace")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        e, gid, tid, phase, mine, op = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        c64 = lambda v: ir.Constant(I64, v)
        c32 = lambda v: ir.Constant(I32T, v)
        word = lambda i: b.gep(e, [i if isinstance(i, ir.Value) and not isinstance(i, ir.Constant) else c64(i)],
                               source_etype=I64)
        load = lambda p: b.load_atomic(p, "monotonic", 8, typ=I64)
        fenced = lambda p: b.load_atomic(p, "seq_cst", 8, typ=I64)

        def store(v, p):      # llvmlite's store_atomic wants a typed pointer: the instruction itself
            b._insert(ir.instructions.StoreAtomicInstr(b.block, v, p, "monotonic", 8))
        B = c64(self.B)
        g64, t64, ph64 = b.zext(gid, I64), b.zext(tid, I64), b.zext(phase, I64)
        blk = b.udiv(g64, B)
        base = b.sub(g64, t64)
        # the atomic operation word: the first update's operation + 1 (0: none yet), published
        # by compare-exchange before the update records its range, so that whoever sees the
        # range sees the operation (read before it was written, a zero read as atomic_add: a
        # race reported between two atomic_max updates on the pool, tests/test_sanitize_global.py)
        op1 = b.add(b.zext(op, I64), c64(1))
        pre_op = b.block
        publish = fn.append_basic_block("op.publish")
        published = fn.append_basic_block("op.published")
        b.cbranch(b.icmp_unsigned("==", mine, c32(2)), publish, published)
        b.position_at_end(publish)
        was = b.extract_value(b.cmpxchg(word(6), c64(0), op1, "seq_cst", "seq_cst"), 0)
        first_op = b.select(b.icmp_unsigned("==", was, c64(0)), op1, was)
        b.branch(published)
        b.position_at_end(published)
        seen_op = b.phi(I64)
        seen_op.add_incoming(op1, pre_op)
        seen_op.add_incoming(first_op, publish)
        # First this access's launch range, by a sequentially consistent compare-exchange, then
        # the other ways' ranges by sequentially consistent loads: of two accesses from blocks
        # that pool workers run at the same time, the later of the two sees the other (as in
        # Dekker's algorithm); checking before recording, both could miss each other. The
        # access's own way is checked against the range as it was before it (`prev`).
        w64 = b.zext(mine, I64)
        span_p = word(b.mul(w64, c64(2)))
        first = fenced(span_p)
        pre = b.block
        head = fn.append_basic_block("record.head")
        swap = fn.append_basic_block("record.swap")
        done = fn.append_basic_block("record.done")
        b.branch(head)
        b.position_at_end(head)
        prev = b.phi(I64)
        prev.add_incoming(first, pre)
        low, top = b.and_(prev, c64(0xFFFFFFFF)), b.lshr(prev, c64(32))
        mine_low, mine_top = b.sub(c64(0xFFFFFFFF), g64), b.add(g64, c64(1))
        low = b.select(b.icmp_unsigned(">", mine_low, low), mine_low, low)
        top = b.select(b.icmp_unsigned(">", mine_top, top), mine_top, top)
        new = b.or_(low, b.shl(top, c64(32)))
        b.cbranch(b.icmp_unsigned("==", new, prev), done, swap)
        b.position_at_end(swap)
        res = b.cmpxchg(span_p, prev, new, "seq_cst", "seq_cst")
        prev.add_incoming(b.extract_value(res, 0), swap)
        b.cbranch(b.extract_value(res, 1), done, head)
        b.position_at_end(done)
        for w in range(3):
            if w == 0:
                conflicts = ir.Constant(I1, 1)
                code = c64(0)
            elif w == 1:
                conflicts = b.icmp_unsigned("!=", mine, c32(1))                 # loads with loads: no
                code = c64(1)
            else:                                                               # one op's updates commute
                conflicts = b.not_(b.and_(b.icmp_unsigned("==", mine, c32(2)), b.icmp_unsigned("==", seen_op, op1)))
                code = b.add(fenced(word(6)), c64(1))
            span = b.select(b.icmp_unsigned("==", mine, c32(w)), prev, fenced(word(2 * w)))
            top = b.lshr(span, c64(32))
            lo = b.sub(c64(0xFFFFFFFF), b.and_(span, c64(0xFFFFFFFF)))
            hi = b.sub(top, c64(1))
            lo_out = b.icmp_unsigned("!=", b.udiv(lo, B), blk)
            hi_out = b.icmp_unsigned("!=", b.udiv(hi, B), blk)
            cross = b.and_(b.and_(b.icmp_unsigned("!=", top, c64(0)), b.or_(lo_out, hi_out)), conflicts)
            with b.if_then(cross, likely=False):
                who = b.select(lo_out, lo, hi)
                b.ret(b.add(b.or_(who, b.shl(code, c64(32))), c64(1)))
            ph = load(word(2 * w + 1))
            plo, phi = b.and_(b.lshr(ph, c64(16)), c64(0xFFFF)), b.and_(ph, c64(0xFFFF))
            same = b.and_(b.icmp_unsigned("!=", ph, c64(0)), b.icmp_unsigned("==", b.lshr(ph, c64(32)), ph64))
            other_t = b.or_(b.icmp_unsigned("!=", plo, t64), b.icmp_unsigned("!=", phi, t64))
            with b.if_then(b.and_(b.and_(same, other_t), conflicts), likely=False):
                who = b.add(base, b.select(b.icmp_unsigned("!=", plo, t64), plo, phi))
                b.ret(b.add(b.or_(who, b.shl(code, c64(32))), c64(1)))
        # the phase range: this block's alone (another block's access is a race reported above)
        ph_p = word(b.add(b.mul(w64, c64(2)), c64(1)))
        ph = load(ph_p)
        fresh = b.or_(b.icmp_unsigned("==", ph, c64(0)), b.icmp_unsigned("!=", b.lshr(ph, c64(32)), ph64))
        plo, phi = b.and_(b.lshr(ph, c64(16)), c64(0xFFFF)), b.and_(ph, c64(0xFFFF))
        nlo = b.select(fresh, t64, b.select(b.icmp_unsigned("<", t64, plo), t64, plo))
        nhi = b.select(fresh, t64, b.select(b.icmp_unsigned(">", t64, phi), t64, phi))
        store(b.or_(b.or_(b.shl(ph64, c64(32)), b.shl(nlo, c64(16))), nhi), ph_p)
        b.ret(c64(0))
        return fn

    # ------------------------------------------------------------ barrier divergence
    def check_block_control(self, it, base):
        """Sanitize builds: the block-level `if` or `for` around a barrier (region_plan.py), evaluated
        for every thread of the block; where the threads would not all reach its barrier, the
        interpreter's barrier divergence (module notes)."""
        if self.shadow.record is None or self.shadow.record.values_at == 0:
            return
        b, W, B = self.b, self.W, self.B
        s = it.s
        if isinstance(it, BlockIf):
            branch = s.then if has_barrier_in(s.then) else s.orelse
            exprs = (s.cond,)
        else:
            branch, exprs = s.body, (s.start, s.stop)
        barrier = next(x for x in walk_stmts(branch) if isinstance(x, Barrier))
        sid = self.site_id("diverge", "barrier", s, barrier, "")
        vals = self.alloca(ir.ArrayType(I32T, B), "control.values")
        starts = self.alloca(ir.ArrayType(I32T, B), "control.starts")

        def packet(q):
            self.now.t0 = b.mul(q, self.i32(W))
            self.now.tid = self.consecutive(self.now.t0)
            self.now.gid = self.consecutive(b.add(base, self.now.t0))
            self.load_live_in(set().union(*(expr_vars(x) for x in exprs)))
            got = [self.ev(x, {}) for x in exprs]
            if isinstance(it, BlockIf):
                v = got[0] if branch is s.then else b.not_(got[0])
                v = b.zext(v, self.vty(I32T))
                start = self.zero(self.vty(I32T))
            else:
                start, stop = (b.sext(x, self.vty(I64)) for x in got)
                step = int(s.step.arg)
                span = b.sub(stop, start) if step > 0 else b.sub(start, stop)
                t = b.sdiv(b.add(span, self.vconst64(abs(step) - 1)), self.vconst64(abs(step)))
                t = b.select(b.icmp_signed(">", t, self.vconst64(0)), t, self.vconst64(0))
                v, start = b.trunc(t, self.vty(I32T)), got[0]
            for arr, x in ((vals, v), (starts, start)):
                b.store(x, b.gep(arr, [self.i64(0), self.now.t0], source_etype=ir.ArrayType(I32T, B)), align=4)
        with self.masked(None, merge=False):
            self.counted_loop(self.i32(0), self.i32(B // W), packet, "control.packet")
        at = lambda arr, t: b.gep(arr, [self.i64(0), t], source_etype=ir.ArrayType(I32T, B))
        v0, s0 = b.load(at(vals, self.i32(0)), typ=I32T), b.load(at(starts, self.i32(0)), typ=I32T)
        flags = self.alloca(ir.ArrayType(I1, 2), "control.split")
        split_p, start_p = (b.gep(flags, [self.i64(0), self.i32(i)], source_etype=ir.ArrayType(I1, 2)) for i in (0, 1))
        b.store(ir.Constant(I1, 0), split_p)
        b.store(ir.Constant(I1, 0), start_p)

        def compare(t):
            b.store(b.or_(b.load(split_p, typ=I1), b.icmp_unsigned("!=", b.load(at(vals, t), typ=I32T), v0)), split_p)
            b.store(b.or_(b.load(start_p, typ=I1), b.icmp_unsigned("!=", b.load(at(starts, t), typ=I32T), s0)),
                    start_p)
        self.counted_loop(self.i32(1), self.i32(B), compare, "control.compare")
        split, start_split = b.load(split_p, typ=I1), b.load(start_p, typ=I1)
        with b.if_then(b.or_(split, start_split), likely=False):
            bid64 = b.sext(self.now.bid, I64)
            with b.if_then(self.claim_error(b.mul(bid64, self.i64(B)))):
                # thread word: 0 the threads split at the barrier, 1 a block-level loop whose
                # start differs between threads that run it equally often (values: the starts)
                for k, x in ((1, self.i64(sid)), (2, bid64), (3, b.zext(b.not_(split), I64))):
                    b.store(x, b.gep(self.entry.err_ptr, [self.i64(k)], source_etype=I64), align=8)
                out = b.gep(self.entry.err_ptr, [self.i64(self.shadow.record.values_at)], source_etype=I64)
                src = b.select(split, vals, starts)
                self.counted_loop(self.i32(0), self.i32(B), lambda t: b.store(
                    b.load(at(src, t), typ=I32T), b.gep(out, [t], source_etype=I32T), align=4), "control.out")
                self.release_error(ERR_BARRIER_DIVERGENCE)
            b.ret_void()


def has_barrier_in(body) -> bool:
    return any(has_barrier(s) for s in body)


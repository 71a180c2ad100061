"""The sanitizing build (`sanitize=on`): native code that detects what the interpreter detects
in shared memory, as compute-sanitizer's initcheck does on a GPU.

Uninitialised shared reads: each shared array has a written flag per slot (a byte, on the
entry's stack: the worker that runs a block owns its shared arrays, DESIGN §5), cleared at
the start of every block. A store or an atomic update sets the flags of its active lanes;
a load, or an atomic update, of a slot whose flag is clear records the error - the
statement, the slot, the first such thread - and leaves the entry. The launch then raises
the interpreter's message (compiler.PreparedLaunch.raise_error):

    kernel K, line L: `...`: read of shared s[8] before any thread of block 0 stored to it
    (uninitialised) (thread 0, block 0) [native, VARIANT]

Races in shared memory between two barriers: each shared slot has a shadow per way of
access - store, load, atomic update - holding the phase it was last used in and the lowest
and highest thread of the block that used it that way in that phase (the interpreter's
_Accessors, per block). A block's phase counts its barriers and collectives (a counter per
call of the entry, so a new block is a new phase and older shadows are stale without
clearing). Every active lane of an access checks the shadows of the other ways, in lane
order, then records itself: two accesses of one slot by different threads in one phase are
reported whichever of them runs second (stores and updates conflict with everything, loads
with stores and updates, updates of the same operation commute), with the interpreter's
message ("load of shared s[7] races with the store by thread 7 in this launch", "write
conflict: threads 0 and 1 both store to shared s[0]"). The pair named can differ from the
interpreter's when several pairs race (the interpreter runs a statement for every thread
at once, a build one packet after another); a racy program can also be reported as an
uninitialised read natively (its other thread's store has not run yet) where the
interpreter names the race - both are errors, never a silent answer.

Loads that would read a loop's shared windows through in-register transposes
(transposed.py) are read one by one in this build, so that each is checked.
Races in global memory and barrier divergence: sanitize_global.py.
Tests: tests/test_sanitize.py (planted missing stores and races must be reported),
tests/test_sanitize_wide.py (the same at many lanes, flags read lane by lane).
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import AtomicOp
from ..context import ERR_SHARED_RACE, ERR_UNINIT_SHARED, I1, I8, I32T, I64, PTR
from .sanitize_global import GlobalSanitizer, SharedSite
from .state import SanitizeShadows

# a slot's shadow: (phase, lowest thread, highest thread) per way, and the update's operation
WAYS = ("write", "read", "atomic")
FIELDS = 10
# Above this many lanes the written flags are read and set lane by lane, not gathered and
# scattered: LLVM scalarises a 256-lane gather (interleave 32) into seconds of code generation
# (benchmarks/sanitize_cost.py --compile: 2.7 s for a packet build of a 256-thread block)
FLAG_VECTOR_LANES = 16
_OPS = list(AtomicOp)


def _noun(how: str) -> str:
    return {"read": "load", "write": "store"}.get(how, f"{how}() update")


def race_message(site, slot: int, thread: int, other: int, other_how: str) -> str:
    """The interpreter's words for a race (interpreter.Interpreter.track)."""
    where = f"shared {site.arr}[{slot}]"
    if site.how == other_how == "write":
        return f"write conflict: threads {other} and {thread} both store to {where}"
    prep = "of" if site.how != "write" else "to"
    return f"{_noun(site.how)} {prep} {where} races with the {_noun(other_how)} by thread {other} in this launch"


def decode_race(index: int):
    """(slot, other thread in its block, the other access's way) from an error record's index."""
    way = index >> 48
    return index & 0xFFFFFFFF, (index >> 32) & 0xFFFF, WAYS[way] if way < 2 else _OPS[way - 2].value


class Sanitizer(GlobalSanitizer):
    def sanitize_arrays(self, shared_arrays: dict) -> SanitizeShadows:
        """The written flags (whole 8-byte words) and race shadows of every shared array
        (`shared_arrays`: name -> (pointer, size, dtype)) and of the buffers the kernel writes
        (sanitize builds; empty in the others); the shadows cleared once per call of the entry."""
        gshadow, gphase_ptr, record = self.global_shadows()
        written_flags, shadows, phase_ptr = {}, {}, None
        if self.variant.sanitize and shared_arrays:
            b = self.b
            phase_ptr = self.alloca(I32T, "phase")
            b.store(self.i32(0), phase_ptr)
            for name, (_, size, _) in shared_arrays.items():
                words = -(-size // 8)
                written_flags[name] = (self.alloca(ir.ArrayType(I64, words), f"{name}.written"), words)
                shadow = shadows[name] = self.alloca(ir.ArrayType(I32T, size * FIELDS), f"{name}.shadow")
                self.counted_loop(self.i64(0), self.i64(size * FIELDS), lambda w, shadow=shadow: b.store(
                    self.i32(0), b.gep(shadow, [w], source_etype=I32T)), "shadow.clear")
        return SanitizeShadows(written_flags=written_flags, shadows=shadows, phase_ptr=phase_ptr,
                               gshadow=gshadow, gphase_ptr=gphase_ptr, record=record)

    def next_phase(self):
        """A barrier or collective passed, or a new block: a new phase (sanitize builds)."""
        self.global_phase(first=False)
        if self.shadow.phase_ptr is not None:
            b = self.b
            b.store(b.add(b.load(self.shadow.phase_ptr, typ=I32T), self.i32(1)), self.shadow.phase_ptr)

    def check_race(self, name: str, idx64, how: str, key, stmt):
        """Each active lane, in order: report a race with another thread's access of the slot in
        this phase, then record its own (module notes; the work is race_function's, called per
        lane, so that a kernel's many shared accesses do not each grow the code W times)."""
        if name not in self.shadow.shadows:
            return
        b, shadow = self.b, self.shadow.shadows[name]
        self.counts["racechecks"] += 1
        site = ("race", how, id(key))
        if site not in self.stmt_ids:
            self.stmt_ids[site] = len(self.stmt_table)
            self.stmt_table.append(SharedSite(stmt.loc, name, how))
        phase = b.load(self.shadow.phase_ptr, typ=I32T)
        mine = WAYS.index(how) if how in WAYS else 2
        op = self.i32(_OPS.index(AtomicOp(how)) if mine == 2 else -1)

        slot_of = self.lane_indices(idx64)       # one store of the packet's indices (sanitize_global.py)
        t0, g0 = self.lane0(self.now.tid), self.lane0(self.now.gid)       # a packet's threads are consecutive

        def lane(li):
            slot = slot_of(li)
            t = t0 if self.W == 1 else b.add(t0, li)
            at = b.gep(shadow, [b.mul(slot, self.i64(FIELDS))], source_etype=I32T)
            r = b.call(self.race_function(), [at, t, phase, self.i32(mine), op])
            with b.if_then(b.icmp_unsigned("!=", r, self.i64(0)), likely=False):
                r1 = b.sub(r, self.i64(1))
                who, way = b.and_(r1, self.i64(0xFFFF)), b.lshr(r1, self.i64(16))
                index = b.or_(b.or_(slot, b.shl(who, self.i64(32))), b.shl(way, self.i64(48)))
                gid = g0 if self.W == 1 else b.add(g0, li)
                with b.if_then(self.claim_error(b.sext(gid, I64))):
                    for k, v in enumerate((self.i64(self.stmt_ids[site]), index, b.sext(gid, I64)), 1):
                        b.store(v, b.gep(self.entry.err_ptr, [self.i64(k)], source_etype=I64), align=8)
                    self.release_error(ERR_SHARED_RACE)
                b.ret_void()

        self.each_active_lane(lane)

    def race_function(self) -> ir.Function:
        """i64 race(ptr shadow of the slot, i32 thread, i32 phase, i32 way, i32 operation): 0, or
        1 + (other thread | other way << 16) of the first conflicting access; records the access."""
        fn = self.module.globals.get("cohort.race")
        if fn is not None:
            return fn
        fn = ir.Function(self.module, ir.FunctionType(I64, [PTR, I32T, I32T, I32T, I32T]), "cohort.race")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        base, t, phase, mine, op = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        c32 = lambda v: ir.Constant(I32T, v)
        at = lambda f: b.gep(base, [f], source_etype=I32T)
        for w in range(3):
            skip = b.and_(b.icmp_unsigned("==", mine, c32(1)), ir.Constant(I1, w == 1))   # loads with loads
            same = b.icmp_unsigned("==", b.load(at(c32(3 * w)), typ=I32T), phase)
            lo, hi = b.load(at(c32(3 * w + 1)), typ=I32T), b.load(at(c32(3 * w + 2)), typ=I32T)
            bad = b.and_(b.and_(same, b.not_(skip)),
                         b.or_(b.icmp_unsigned("!=", lo, t), b.icmp_unsigned("!=", hi, t)))
            way = c32(w)
            if w == 2:                        # updates by one operation commute
                other_op = b.load(at(c32(9)), typ=I32T)
                commute = b.and_(b.icmp_unsigned("==", mine, c32(2)), b.icmp_unsigned("==", other_op, op))
                bad = b.and_(bad, b.not_(commute))
                way = b.add(other_op, c32(2))
            with b.if_then(bad, likely=False):
                who = b.select(b.icmp_unsigned("!=", lo, t), lo, hi)
                packed = b.or_(b.zext(who, I64), b.shl(b.zext(way, I64), ir.Constant(I64, 16)))
                b.ret(b.add(packed, ir.Constant(I64, 1)))
        # record this access: a new phase starts the slot's range of this way at this thread
        f0 = b.mul(mine, c32(3))
        ph, lo_p, hi_p = at(f0), at(b.add(f0, c32(1))), at(b.add(f0, c32(2)))
        fresh = b.icmp_unsigned("!=", b.load(ph, typ=I32T), phase)
        lo, hi = b.load(lo_p, typ=I32T), b.load(hi_p, typ=I32T)
        b.store(phase, ph)
        b.store(b.select(fresh, t, b.select(b.icmp_signed("<", t, lo), t, lo)), lo_p)
        b.store(b.select(fresh, t, b.select(b.icmp_signed(">", t, hi), t, hi)), hi_p)
        with b.if_then(b.icmp_unsigned("==", mine, c32(2))):
            b.store(b.select(fresh, op, b.load(at(c32(9)), typ=I32T)), at(c32(9)))
        b.ret(ir.Constant(I64, 0))
        return fn

    def clear_written(self):
        """A new block: none of its shared slots is written yet, and a new phase."""
        b = self.b
        self.next_phase()
        self.global_phase(first=True)
        for ptr, words in self.shadow.written_flags.values():
            self.counted_loop(self.i64(0), self.i64(words), lambda w, ptr=ptr: b.store(
                self.i64(0), b.gep(ptr, [w], source_etype=I64), align=8), "written.clear")

    def mark_written(self, name: str, idx64):
        """The active lanes' slots of `name` are written."""
        if name not in self.shadow.written_flags:
            return
        b, flags = self.b, self.shadow.written_flags[name][0]
        one = ir.Constant(I8, 1)
        if self.W == 1 or self.W > FLAG_VECTOR_LANES:
            slot_of = self.lane_indices(idx64)
            self.each_active_lane(lambda li: b.store(one, b.gep(flags, [slot_of(li)], source_etype=I8)))
            return
        ptrs = self.lane_pointers(flags, idx64, I8)
        self.intrinsic(f"llvm.masked.scatter.v{self.W}i8.v{self.W}p0", ir.VoidType(),
                       [ir.Constant(self.vty(I8), [1] * self.W), ptrs, self.i32(1),
                        self.mask if self.mask is not None else self.all_true()])

    def check_written(self, name: str, idx64, key, stmt):
        """Record an uninitialised read by the first active lane whose slot is not written."""
        if name not in self.shadow.written_flags:
            return
        b, flags = self.b, self.shadow.written_flags[name][0]
        self.counts["initchecks"] += 1
        if self.W > FLAG_VECTOR_LANES:
            self.check_written_per_lane(name, flags, idx64, key, stmt)
            return
        if self.W == 1:
            fresh = b.icmp_unsigned("==", b.load(b.gep(flags, [idx64], source_etype=I8), typ=I8), ir.Constant(I8, 0))
        else:
            got = self.intrinsic(f"llvm.masked.gather.v{self.W}i8.v{self.W}p0", self.vty(I8),
                                 [self.lane_pointers(flags, idx64, I8), self.i32(1),
                                  self.mask if self.mask is not None else self.all_true(),
                                  ir.Constant(self.vty(I8), [1] * self.W)])     # masked-off lanes: written
            fresh = b.icmp_unsigned("==", got, self.zero(self.vty(I8)))
        if self.mask is not None:
            fresh = b.and_(fresh, self.mask)
        bad_bb = self.fn.append_basic_block("uninit")
        ok_bb = self.fn.append_basic_block("init")
        b.cbranch(self.any(fresh), bad_bb, ok_bb)
        b.position_at_end(bad_bb)
        lane = self.first_lane(fresh)
        self.report_uninitialised(name, idx64, lane, key, stmt)
        b.position_at_end(ok_bb)

    def report_uninitialised(self, name: str, idx64, lane, key, stmt):
        """Record lane `lane`'s read of an unwritten slot and leave the entry."""
        b = self.b
        site = ("uninitialised", id(key))     # its own entry: the statement's may name no array
        if site not in self.stmt_ids:
            self.stmt_ids[site] = len(self.stmt_table)
            self.stmt_table.append(SharedSite(stmt.loc, name))
        thread = b.sext(self.lane(self.now.gid, lane), I64)
        with b.if_then(self.claim_error(thread)):
            for slot, v in enumerate((self.i64(self.stmt_ids[site]), self.lane(idx64, lane), thread), start=1):
                b.store(v, b.gep(self.entry.err_ptr, [self.i64(slot)], source_etype=I64), align=8)
            self.release_error(ERR_UNINIT_SHARED)
        b.ret_void()

    def check_written_per_lane(self, name: str, flags, idx64, key, stmt):
        """check_written lane by lane: at many lanes (a wide interleave) a gather of the flags
        is scalarised by LLVM's code generator, seconds of compile time per access."""
        b = self.b
        slot_of = self.lane_indices(idx64)

        def lane(li):
            fresh = b.load(b.gep(flags, [slot_of(li)], source_etype=I8), typ=I8)
            with b.if_then(b.icmp_unsigned("==", fresh, ir.Constant(I8, 0)), likely=False):
                self.report_uninitialised(name, idx64, li, key, stmt)
        self.each_active_lane(lane)


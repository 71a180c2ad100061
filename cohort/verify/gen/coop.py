"""Cooperative programs: shared arrays, barriers and atomics, race-free by construction.

A cooperative section stands at the top level of a generated kernel (between the
phases and the epilogue). Each piece follows a pattern that is correct for any
launch: a thread stages values in its own shared slot, a barrier, then it reads
another thread's slot - guarded by that thread being below n (every thread of a
cooperative kernel's blocks runs and stages, DESIGN §2, so the guard is not
needed for correctness; it keeps the reads to the launch's own threads, a
CUDA habit, and the programs the fuzzer draws the same);
reduction trees written by hand over the block's live threads; the same exchange
in a block-uniform loop or under a block-uniform `if`; histograms of atomic
updates with colliding indices (one operation per buffer: updates by different
operations would race), into a global buffer or into shared bins flushed to one; a
loop walking staged slots along its variable, the lanes strided (a transpose's read).
"""
from __future__ import annotations

from ...refimpl.ir import (
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    For,
    If,
    Op,
    Shared,
    SStore,
    Store,
    binary,
    bitcast,
    builtin,
    cast,
    const,
    param,
    select,
    sload,
    var,
)
from .base import F32, I32, U32
from .case import BufferSpec

_INT_OPS = (AtomicOp.ADD, AtomicOp.SUB, AtomicOp.MIN, AtomicOp.MAX, AtomicOp.AND, AtomicOp.OR, AtomicOp.XOR)
_COMBINE = {F32: (Op.ADD, Op.MIN, Op.MAX, Op.MUL), I32: (Op.ADD, Op.XOR, Op.MIN, Op.MAX, Op.SUB),
            U32: (Op.ADD, Op.OR, Op.MIN, Op.MAX, Op.XOR)}


class Cooperative:
    def coop_section(self) -> list:
        """Statements of one to three cooperative pieces."""
        sw = self.sw
        out = []
        for _ in range(self.int(1, 3)):
            kind = self.weighted([(sw(3, "statement:Barrier", "op:SLOAD"), "exchange"),
                                  (sw(2, "structure:barrier:loop"), "tree"),
                                  (sw(2, "structure:barrier:loop"), "rounds"),
                                  (sw(2, "structure:barrier:if"), "uniform_if"),
                                  (sw(2, "structure:shared:walk"), "walk"),
                                  (sw(3, "structure:atomic:global", "structure:atomic:f32"), "atomics"),
                                  (sw(2, "structure:atomic:shared"), "bins")])
            out += getattr(self, f"coop_{kind}")()
        return out

    # ------------------------------------------------------------ pieces
    def shared_array(self, dt, size: int, out: list) -> str:
        name = self.fresh("sh")
        out.append(Shared(name, dt, self.ci(size)))
        return name

    def live(self, thread):
        """Thread `thread` of this block is below n (num_threads())."""
        return binary(Op.LT, self.b() * self.ci(self.B) + thread, builtin(Op.NUM_THREADS))

    def partner(self, shift=None):
        """Another thread of the block, a permutation of 0..B-1: t + d, B-1-t, t ^ m, a transpose."""
        t, B = self.t(), self.B
        if shift is not None:
            return binary(Op.MOD, t + shift, self.ci(B))
        forms = ["rotate", "mirror", "xor"] + (["transpose"] if B in (16, 64) else [])
        how = self.pick(forms)
        if how == "rotate":
            return binary(Op.MOD, t + self.ci(self.int(1, B - 1) if B > 1 else 0), self.ci(B))
        if how == "mirror":
            return self.ci(B - 1) - t
        if how == "xor":
            return binary(Op.XOR, t, self.ci(self.int(0, B - 1)))
        T = 4 if B == 16 else 8
        return binary(Op.MOD, t, self.ci(T)) * self.ci(T) + binary(Op.DIV, t, self.ci(T))

    def read_partner(self, sh, dt, src):
        return select(self.live(src), sload(sh, src, dt), self.literal(dt))

    def new_var(self, dt, value) -> Assign:
        name = self.fresh({F32: "f", I32: "i", U32: "u"}[dt])
        self.vtypes[name] = dt
        self.defined.add(name)
        return Assign(name, value)

    def observe_var(self, name: str, dt) -> list:
        slots = self.free_slots()
        if not slots:
            return []
        o, j = self.pick_slot(slots)
        return [self.own_store(o, j, self.store_value(var(name, dt), o.dtype))]

    def coop_exchange(self) -> list:
        """Stage a value, barrier, combine a live partner's slot with one's own value (which
        lives across the barrier: kept per thread, or lost)."""
        dt = self.pick([F32, F32, I32, U32])
        out = []
        sh = self.shared_array(dt, self.B, out)
        mine = self.new_var(dt, self.expr(dt, 1))
        out += [mine, SStore(sh, self.t(), var(mine.name, dt)), Barrier()]
        read = self.read_partner(sh, dt, self.partner())
        a = self.new_var(dt, binary(self.pick(_COMBINE[dt][:3]), read, var(mine.name, dt)))
        return out + [a] + self.observe_var(a.name, dt)

    def coop_tree(self) -> list:
        """A reduction tree by hand over the block's live threads: barriers in a uniform loop,
        a divergent if inside."""
        dt = self.pick([F32, I32, U32])
        op = self.pick(_COMBINE[dt][:4])
        out = []
        sh = self.shared_array(dt, self.B, out)
        out += [SStore(sh, self.t(), self.expr(dt, 1)), Barrier()]
        steps = self.B.bit_length() - 1
        k = self.fresh("k")
        half = binary(Op.SHR, self.ci(self.B), var(k, I32) + self.ci(1))
        t = self.t()
        active = binary(Op.MIN, self.ci(self.B), builtin(Op.NUM_THREADS) - self.b() * self.ci(self.B))
        combine = SStore(sh, t, binary(op, sload(sh, t, dt), sload(sh, t + half, dt)))
        body = (If(binary(Op.AND, binary(Op.LT, t, half), binary(Op.LT, t + half, active)), (combine,)),
                Barrier())
        out.append(For(k, self.ci(0), self.ci(steps), self.ci(1), body))
        a = self.new_var(dt, sload(sh, self.ci(0), dt))
        return out + [a] + self.observe_var(a.name, dt)

    def coop_rounds(self) -> list:
        """acc combined with a rotating partner's staged value, R rounds of stage/barrier/read/barrier."""
        dt = self.pick([F32, I32, U32])
        out = []
        sh = self.shared_array(dt, self.B, out)
        acc = self.new_var(dt, self.expr(dt, 1))
        out.append(acc)
        r = self.fresh("q")
        stop = self.ci(self.int(1, 3))
        if self.consts and self.maybe(40):     # a Const parameter (0..5) in the trip count
            stop = stop + param(sorted(self.consts)[0], I32)
        ri = var(r, I32)
        staged = binary(self.pick(_COMBINE[dt]), var(acc.name, dt), cast(ri, dt))
        op = self.pick(_COMBINE[dt][:3])
        src = self.partner(ri + self.ci(1))
        body = (SStore(sh, self.t(), staged), Barrier(),
                Assign(acc.name, binary(op, var(acc.name, dt), self.read_partner(sh, dt, src))), Barrier())
        out.append(For(r, self.ci(0), stop, self.ci(1), body))
        return out + self.observe_var(acc.name, dt)

    def coop_uniform_if(self) -> list:
        """An exchange under a block-uniform condition."""
        dt = self.pick([F32, I32, U32])
        out = []
        sh = self.shared_array(dt, self.B, out)
        acc = self.new_var(dt, self.expr(dt, 1))
        cond = binary(self.pick([Op.LT, Op.EQ, Op.GE, Op.NE]), self.uniform_int(), self.literal(I32))
        then = (SStore(sh, self.t(), self.expr(dt, 1)), Barrier(),
                Assign(acc.name, binary(self.pick(_COMBINE[dt][:3]), var(acc.name, dt),
                                        self.read_partner(sh, dt, self.partner()))))
        return out + [acc, If(cond, then)] + self.observe_var(acc.name, dt)

    def coop_walk(self) -> list:
        """R slots per thread staged, a barrier, then a loop walking a window along its
        variable with the lanes S apart: thread t reads slot t*S + c + k at k (or, counting
        down, slot t*S + c + T-1 - k), the transposed read of a tiled transpose
        (backend/lowering/transposed.py). A read is guarded by the slot existing and its
        owner (slot % B) being live."""
        dt = self.pick([F32, F32, I32, U32])
        B, R = self.B, self.int(1, 3)
        size = B * R
        out = []
        sh = self.shared_array(dt, size, out)
        i, k = self.fresh("i"), self.fresh("k")
        t = self.t()
        out += [For(i, self.ci(0), self.ci(R), self.ci(1),
                    (SStore(sh, var(i, I32) * self.ci(B) + t, self.expr(dt, 1)),)), Barrier()]
        acc = self.new_var(dt, self.expr(dt, 1))
        T = self.pick([2, 3, self.int(4, 20), self.int(20, 40)])
        first = t * self.ci(self.pick([2, 3, R, B // 2 or 1, B])) + self.ci(self.int(0, 5))
        if self.maybe(70):
            loop, at = (self.ci(0), self.ci(T), self.ci(1)), first + var(k, I32)
        else:
            loop, at = (self.ci(T - 1), self.ci(-1), self.ci(-1)), first + self.ci(T - 1) - var(k, I32)
        inside = binary(Op.AND, binary(Op.LT, at, self.ci(size)), self.live(binary(Op.MOD, at, self.ci(B))))
        read = select(inside, sload(sh, at, dt), self.literal(dt))
        body = (Assign(acc.name, binary(self.pick(_COMBINE[dt][:3]), var(acc.name, dt), read)),)
        out += [acc, For(k, *loop, body)]
        return out + self.observe_var(acc.name, dt)

    def atomic_buffer(self, dt, length: int, fill=None) -> str:
        name = f"ya{len(self.atomic_buffers)}"
        fill = fill or (self.pick(["data", "special", "nanzero"]) if dt is F32 else self.pick(["data", "finite"]))
        self.atomic_buffers.append(BufferSpec(name, dt, length, fill))
        return name

    def bin_index(self, L: int):
        """A bin in [0, L) from a per-thread integer (often colliding across lanes)."""
        dt = self.pick([I32, U32])
        e = self.expr(dt, 1) if self.maybe(60) else cast(self.g(), dt)
        if dt is U32:
            return cast(binary(Op.MOD, e, const(L, U32)), I32)
        m = binary(Op.MOD, e, self.ci(L))
        return binary(Op.MOD, m + self.ci(L), self.ci(L))

    def edge_f32(self, op=AtomicOp.MIN, how=None):
        """An f32 value for an atomic min/max: both zeros across the lanes and nothing else (a NaN
        anywhere would make the element NaN and hide their order), a NaN in chosen lanes and
        ordinary values in the others (the NaN test), or edge-rich values everywhere. The NaN is
        the one the operation's order never picks (DESIGN §3 orders f32 by its bits' key: a
        positive NaN is above +inf, a negative one below -inf): for a min a positive NaN, for a max
        a negative one, so an update that missed the NaN test keeps the old value, and shows."""
        how = how or self.pick(["zeros", "nan", "mixed"])
        if how == "zeros":
            # the zero a min keeps (-0.0) after the other: thread 0 takes the condition
            first = 0.0 if op is AtomicOp.MIN else -0.0
            return select(self.mixed_condition(first_on=True), const(first, F32),
                          const(-0.0 if op is AtomicOp.MIN else 0.0, F32))
        if how == "nan":
            return select(self.lane_condition(), self.unpicked_nan(op), self.ordinary(1))
        return select(self.lane_condition(), self.pick([self.unpicked_nan(op), const(-0.0, F32), const(0.0, F32)]),
                      self.lane_special(1))

    def stray(self, op, dt):
        """A value that changes an element whatever it holds if `op` updates it with it: past
        the far end of the order for min/max (a NaN for f32), odd for add, sub, xor and or, zero
        for and."""
        if dt is F32:
            return bitcast(const(-0x00400000 if op is AtomicOp.MIN else 0x7FC00000, I32), F32) if self.maybe(50) \
                else const(float("-inf") if op is AtomicOp.MIN else float("inf"), F32)
        if op in (AtomicOp.MIN, AtomicOp.MAX):
            lo, hi = (-(2 ** 31), 2 ** 31 - 1) if dt is I32 else (0, 2 ** 32 - 1)
            return const(lo if op is AtomicOp.MIN else hi, dt)
        return const(0 if op is AtomicOp.AND else self.pick([1, 3, 0x40000001]), dt)

    def unpicked_nan(self, op):
        """The NaN a min (max) never picks by its order alone: its sign bit clear (set)."""
        return bitcast(const(0x7FC00000 if op is AtomicOp.MIN else -0x00400000, I32), F32)

    def coop_atomic_edges(self, shared: bool) -> list:
        """`atomic:f32-edge` (global) or `atomic:shared-edge` made on purpose (steer.SHAPES):
        f32 atomic min/max of NaN, ±0 and edge values colliding on a few elements; the shared
        one under a condition that turns lanes off inside a packet (an off lane must leave the
        bins as they were), its bins set by thread 0 and stored, each block's to a region of its
        own, in a global buffer (a flush by atomics would let the buffer's old values hide a bin)."""
        op = self.pick([AtomicOp.MIN, AtomicOp.MAX])
        L = self.int(1, 3)
        out = []
        if not shared:
            # a buffer each (one's NaN would hide another's zeros): both zeros, whose order shows
            # only where the first one is taken (the buffer above zero for a min, below for a max),
            # and a NaN, in every program (drawn one of three, a program's one form was the other
            # in most programs that missed a plant of the zeros), sometimes edge values besides
            kinds = ["zeros", "nan"] + (["mixed"] if self.maybe(30) else [])
            for how in kinds:
                fill = ("positive" if op is AtomicOp.MIN else "negative") if how == "zeros" else "finite"
                buf = self.atomic_buffer(F32, L, fill)     # no NaN to start from either
                # both zeros on one element, mostly (a bin per lane could give each element one)
                at = self.ci(self.int(0, L - 1)) if how == "zeros" and self.maybe(70) else self.bin_index(L)
                s = Atomic(op, buf, at, self.edge_f32(op, how))
                out.append(If(self.lane_condition(), (s,)) if how != "zeros" and self.maybe(30) else s)
            self.shapes.add("atomic:f32-edge")
            return out
        dt = F32 if self.maybe(70) else self.pick([I32, U32])
        iop = op if dt is F32 else self.pick(_INT_OPS)
        bins = self.shared_array(dt, L, out)
        j, j2 = self.fresh("j"), self.fresh("j")
        first = binary(Op.EQ, self.t(), self.ci(0))
        # bins above what a min's updates bring (below, for a max): an off lane's stray update
        # of element 0 changes it
        init = const(self.pick([1.5, 0.0] if op is AtomicOp.MIN else [-1.5, -0.0]), F32) if dt is F32 \
            else self.literal(dt)
        out.append(If(first, (For(j, self.ci(0), self.ci(L), self.ci(1), (SStore(bins, var(j, I32), init),)),)))
        out.append(Barrier())
        value = self.edge_f32(op) if dt is F32 else self.expr(dt, 1)
        cond = self.mixed_condition()
        if self.maybe(85):     # an off lane's value one that any update by it would show
            value = select(cond, value, self.stray(iop, dt))
        upd = Atomic(iop, bins, self.bin_index(L), value)
        out.append(If(cond, (upd,)))         # lanes off inside the packet
        out.append(Barrier())
        buf = self.atomic_buffer(dt, self.nblocks * L, "finite" if dt is F32 else None)
        at = self.b() * self.ci(L) + var(j2, I32)
        out.append(If(first, (For(j2, self.ci(0), self.ci(L), self.ci(1),
                                  (Store(buf, at, sload(bins, var(j2, I32), dt)),)),)))
        self.shapes.add("atomic:shared-edge")
        return out

    def coop_stress(self) -> list:
        """Integer updates of small global buffers only (the stress check's programs, fuzz/stress.py)."""
        return [s for _ in range(self.int(1, 2))
                for s in (self.coop_atomics(ints=True) if self.maybe(70) else self.coop_bins())]

    def coop_atomics(self, ints: bool = False) -> list:
        """One to three updates of a small global buffer by one operation, some under a divergent if."""
        dt = self.weighted([(3, I32), (2, U32), (0 if ints else self.sw(2, "structure:atomic:f32"), F32)])
        op = self.pick([AtomicOp.MIN, AtomicOp.MAX] if dt is F32 else _INT_OPS)
        L = self.int(1, 8)
        buf = self.atomic_buffer(dt, L)
        out = []
        for _ in range(self.int(1, 3)):
            s = Atomic(op, buf, self.bin_index(L), self.expr(dt, 1))
            out.append(If(self.condition(), (s,)) if self.maybe(30) else s)
        return out

    def coop_bins(self) -> list:
        """Shared bins set by thread 0, updated by every thread, flushed by thread 0 into a
        global buffer with the same operation."""
        dt = self.pick([I32, U32])
        op = self.pick(_INT_OPS)
        L = self.int(1, 8)
        out = []
        bins = self.shared_array(dt, L, out)
        j, j2 = self.fresh("j"), self.fresh("j")
        first = binary(Op.EQ, self.t(), self.ci(0))
        out.append(If(first, (For(j, self.ci(0), self.ci(L), self.ci(1),
                                  (SStore(bins, var(j, I32), self.literal(dt)),)),)))
        out.append(Barrier())
        upd = Atomic(op, bins, self.bin_index(L), self.expr(dt, 1))
        out.append(If(self.condition(), (upd,)) if self.maybe(30) else upd)
        out.append(Barrier())
        buf = self.atomic_buffer(dt, L)
        out.append(If(first, (For(j2, self.ci(0), self.ci(L), self.ci(1),
                                  (Atomic(op, buf, var(j2, I32), sload(bins, var(j2, I32), dt)),)),)))
        return out

"""Values of the width the lowering works in, and the mask.

A lowering of width W holds every per-thread value as W lanes: a `<W x T>`
vector, or at W = 1 (`whole`) the scalar itself. Every helper here is the
identity, or its one-lane form, at width 1, which is what lets the rest of the
lowering be written once for every width.

The mask is `None` (every lane, statically) or an i1 per lane. Two are kept:
`mask`, the lanes whose effects happen (the launch tail, control flow, a lazy
select arm), and `cmask`, the lanes whose control flow is live, which decides
where an assignment must merge with the old value. Lanes beyond the launch
and the lanes of the other select arm never merge: their values are dead, and
leaving them unmerged keeps affine values (j = t + 32k) exact in every lane,
which the memory-access classification relies on. Both change only through
`masked`, a context that restores them on the way out.
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from ...refimpl.ir import DType
from ..context import I1, I32T, I64, vector_const, zero_of


class Lanes:
    W: int              # lanes the lowering works in: packets x interleave, 1 for `whole`

    @property
    def mask(self):
        """The lanes whose effects happen now (None: every lane); set only by `masked`."""
        return self.now.mask

    @property
    def cmask(self):
        """The lanes whose control flow is live now (None: every lane); set only by `masked`."""
        return self.now.cmask

    def vty(self, t):
        """The type of W lanes of element type t."""
        return t if self.W == 1 else ir.VectorType(t, self.W)

    def i32(self, v):
        return ir.Constant(I32T, v)

    def i64(self, v):
        return ir.Constant(I64, v)

    def splat(self, scalar, dt: DType):
        """A uniform value in every lane."""
        if self.W == 1:
            return scalar
        b = self.b
        v = b.insert_element(zero_of(self.cx.ty(dt)), scalar, self.i32(0))
        return b.shuffle_vector(v, zero_of(self.cx.ty(dt)), vector_const(self.vty(I32T), 0))

    def splat64(self, scalar):
        if self.W == 1:
            return scalar
        b = self.b
        v = b.insert_element(zero_of(self.vty(I64)), scalar, self.i32(0))
        return b.shuffle_vector(v, zero_of(self.vty(I64)), vector_const(self.vty(I32T), 0))

    def vconst64(self, v):
        return self.i64(v) if self.W == 1 else vector_const(self.vty(I64), v)

    def iota(self):
        return vector_const(self.vty(I32T), list(range(self.W)))

    def consecutive(self, first):
        """first + l in lane l (an i32): the thread ids of a packet whose lane 0 is `first`."""
        return first if self.W == 1 else self.b.add(self.splat(first, DType.I32), self.iota())

    def lane(self, v, index):
        """Lane `index` (an i32 value) of v."""
        return v if self.W == 1 else self.b.extract_element(v, index)

    def lane0(self, v):
        return self.lane(v, self.i32(0))

    def any(self, mask):
        """Whether any lane of a mask is on (an i1)."""
        if self.W == 1:
            return mask
        bits = self.b.bitcast(mask, ir.IntType(self.W))
        return self.b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(self.W), 0))

    def every(self, mask):
        """Whether every lane of a mask is on (an i1)."""
        if self.W == 1:
            return mask
        bits = self.b.bitcast(mask, ir.IntType(self.W))
        return self.b.icmp_unsigned("==", bits, ir.Constant(ir.IntType(self.W), (1 << self.W) - 1))

    def first_lane(self, mask):
        """The lowest lane that is on (an i32), for a mask with some lane on."""
        if self.W == 1:
            return self.i32(0)
        bits = self.b.bitcast(mask, ir.IntType(self.W))
        lane = self.intrinsic(f"llvm.cttz.i{self.W}", ir.IntType(self.W), [bits, ir.Constant(I1, 0)])
        if self.W == 32:
            return lane
        # i64 at 64 lanes (lanes 4 x interleave 16): its count fits an i32
        return self.b.zext(lane, I32T) if self.W < 32 else self.b.trunc(lane, I32T)

    def lane_on(self, mask, lane):
        """Whether lane `lane` (an i32 value) of a mask is on. Past 32 lanes, read from the mask
        as an integer: LLVM's fast code generator (the fuzzer's quick levels) aborts on a
        variable-index extract from <64 x i1> ("Unexpected illegal type")."""
        if self.W <= 32:
            return self.b.extract_element(mask, lane)
        bits = self.b.bitcast(mask, ir.IntType(self.W))
        return self.b.trunc(self.b.lshr(bits, self.b.zext(lane, ir.IntType(self.W))), I1)

    def all_true(self):
        return vector_const(self.vty(I1), 1)

    @staticmethod
    def zero(ty):
        """Masked-off lanes of a masked load read as zero (llvmlite's null constant)."""
        return zero_of(ty)

    def and_mask(self, m, c):
        return c if m is None else self.b.and_(m, c)

    @contextmanager
    def masked(self, cond, merge: bool = True, narrowed=None):
        """Narrow the effects to the lanes where `cond` holds (None: no narrowing).
        `merge`: the narrowing is control flow (an `if`, a loop's running lanes), so
        assignments in it merge with the old value; a lazy select arm assigns nothing,
        and lanes beyond the launch are dead. `narrowed`: the new mask, when the
        caller has it already (mask & cond)."""
        now = self.now
        saved = now.mask, now.cmask
        if cond is not None:
            now.mask = narrowed if narrowed is not None else self.and_mask(now.mask, cond)
            if merge:
                now.cmask = self.and_mask(now.cmask, cond)
        try:
            yield now.mask
        finally:
            now.mask, now.cmask = saved

    @contextmanager
    def masked_if_any(self, cond):
        """Control flow narrowed to `cond`'s lanes, skipped when none of them is on."""
        m = self.and_mask(self.mask, cond)
        with self.b.if_then(self.any(m)), self.masked(cond, narrowed=m):
            yield

    # ------------------------------------------------------------ intrinsics
    def intrinsic(self, name: str, ret, args):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, args)

    def vsuffix(self, elem, count: int = 0) -> str:
        """The overload suffix of a masked intrinsic on `count` (default W) lanes of elem."""
        return f"v{count or self.W}{'f32' if isinstance(elem, ir.FloatType) else f'i{elem.width}'}"

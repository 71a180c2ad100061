"""Whole-tile nodes of the native lowering (native_lower.py, DESIGN §10): computed before
the statement's fused loop, into arrays of their own, in the reference's post-order —
reductions in interp.tree's order (one packet loop per step), argmax/argmin on (value,
index) pairs, scans in Hillis-Steele order, user combine functions applied to packets,
`dot` as one fma chain per element over k ascending (register-blocked), and integer
division and shifts whose divisor or amount can fail (checked element by element).
"""
from __future__ import annotations

import math

from llvmlite import ir

from ..backend.context import Ctx
from ..backend.lower_ops import LOWER
from ..refimpl.ir import DType, Op
from . import tir
from .native_ops import F32T, I32T, I64T, NativeUnsupported, i64, reg_type
from .native_ops import const_of as _const_of
from .tir import Bin, Dt, K, Node

MATERIAL = (K.REDUCE, K.ARGREDUCE, K.SCAN, K.DOT, K.COMBINE, K.GATHER, K.HISTOGRAM)


def _numel(shape) -> int:
    return int(math.prod(shape)) if shape else 1


class TileLowering:
    def _needs_material(self, n: Node, seen=None) -> bool:
        seen = set() if seen is None else seen
        if id(n) in seen:
            return False
        seen.add(id(n))
        return self._material(n) or any(self._needs_material(s, seen) for s in n.srcs)

    def _material(self, n: Node) -> bool:
        if n.op in MATERIAL:
            return True
        if n.op is K.BINARY and n.arg in (Bin.IDIV, Bin.MOD, Bin.SHL, Bin.SHR) and not n.elem.is_float:
            c = _const_of(n.srcs[1])
            if c is None:
                return True
            if n.arg in (Bin.IDIV, Bin.MOD):
                return c == 0
            return not 0 <= c < n.elem.bits
        return False

    def prepare(self, n: Node):
        """Compute the whole-tile nodes under n (post-order, as the reference evaluates)."""
        if id(n) in self.mat or n.op is K.VAR:
            return
        for s in n.srcs:
            self.prepare(s)
        if not self._material(n):
            return
        if n.op is K.REDUCE:
            self.mat[id(n)] = self.reduce(n)
        elif n.op is K.ARGREDUCE:
            self.mat[id(n)] = self.argreduce(n)
        elif n.op is K.SCAN:
            self.mat[id(n)] = self.scan(n)
        elif n.op is K.DOT:
            self.mat[id(n)] = self.dot(n)
        elif n.op is K.COMBINE:
            self.mat[id(n)] = self.combine_node(n)
        elif n.op is K.GATHER:
            self.mat[id(n)] = self.gather_node(n)
        elif n.op is K.HISTOGRAM:
            self.mat[id(n)] = self.histogram(n)
        else:
            self.mat[id(n)] = self.checked_binary(n)

    def _tile_array(self, n: Node):
        """n's elements in a row-major array: a stored variable's own (an inlined one has none),
        a whole-tile result's, else a new one."""
        got = self._array_of(n)
        if got is not None:
            return got
        arr = self.alloca(n.type)
        self.store_tile(n, arr)
        return arr

    def _row_major(self, arr):
        return (arr, None)

    def checked_binary(self, n: Node):
        """An integer //, % or shift whose divisor/amount may fail: checked element by element
        (values._int_binary): a zero divisor, or the first amount outside 0..bits-1."""
        b = self.b
        arr = self.alloca(n.type)
        d = n.elem
        with self.loops(n.shape) as idx:
            memo = {}
            x, y = self.ev(n.srcs[0], idx, memo), self.ev(n.srcs[1], idx, memo)
            if n.arg in (Bin.IDIV, Bin.MOD):
                with b.if_then(b.icmp_unsigned("==", y, ir.Constant(y.type, 0)), likely=False):
                    self.fail("div" if n.arg is Bin.IDIV else "mod")
            else:
                bad = b.icmp_unsigned(">=", y, ir.Constant(y.type, d.bits))   # negatives included
                with b.if_then(bad, likely=False):
                    self.fail("shift", self._to64(y, d), d)
            self.write(arr, d, self.flat(idx, n.shape), self.ops.binary(n.arg, d, x, y))
        return self._row_major(arr)

    def gather_node(self, n: Node):
        """interp._gather: out[..i..] = src[..index[..i..]..] along the axis, elements in row-major
        order, the first index outside the axis reported (as the reference)."""
        b = self.b
        src_n, index_n = n.srcs
        axis, size = n.arg, src_n.shape[n.arg]
        src = self._tile_array(src_n)
        out = self.alloca(n.type)
        with self.loops(n.shape) as idx:
            j = self._to64(self.ev(index_n, idx, {}), index_n.elem)
            with b.if_then(b.icmp_unsigned(">=", j, i64(size)), likely=False):    # negatives included
                self.fail("gather", j, (axis, size))
            at = idx[:axis] + (j,) + idx[axis + 1:]
            self.write(out, n.elem, self.flat(idx, n.shape), self.read(src, n.elem, self.flat(at, src_n.shape)))
        return self._row_major(out)

    def histogram(self, n: Node):
        """interp: counts of the values in 0..bins-1 (of those the mask keeps), as i32."""
        b = self.b
        bins = n.arg
        out = self.alloca(n.type)
        with self.loops((bins,)) as (i,):
            self.write(out, Dt.I32, i, ir.Constant(I32T, 0))
        with self.loops(n.srcs[0].shape) as idx:
            memo = {}
            v = self.ev(n.srcs[0], idx, memo)
            take = b.icmp_unsigned("<", v, ir.Constant(v.type, bins))    # negatives are not counted
            if len(n.srcs) > 1:
                take = b.and_(take, self.ev(n.srcs[1], idx, memo))
            with b.if_then(take):
                at = b.zext(v, I64T)
                self.write(out, Dt.I32, at, b.add(self.read(out, Dt.I32, at), ir.Constant(I32T, 1)))
        return self._row_major(out)

    def _split(self, shape, axis):
        return _numel(shape[:axis]), shape[axis], _numel(shape[axis + 1:])

    def reduce(self, n: Node):
        """interp.tree over the axis: v[o, i, j] = v[o, i, j] ⊕ v[o, i + s, j], s = R/2 .. 1."""
        axis, red = n.arg
        src = n.srcs[0]
        d = src.elem
        outer, r, inner = self._split(src.shape, axis)
        if r & (r - 1):
            raise NativeUnsupported(f"line {self.line}: a reduction over a non-power-of-two axis")
        buf = self.alloca(src.type)
        first = self._array_of(src) if r > 1 and not self.config.planted("triton_tree_order") else None
        if first is None:
            self.store_tile(src, buf)
        self._tree(buf, d, outer, r, inner, lambda a, x: self.ops.combine(red, d, a, x), first=first)
        return (buf, lambda idx: self._reduced_flat(idx, n.shape, axis, r, inner))

    def _array_of(self, n: Node):
        """n's row-major array when it already has one (a stored variable, a whole-tile result)."""
        if n.op is K.VAR and n.arg not in self.inline and (self.region_env is None or n.arg not in self.region_env):
            return self.arrays[n.arg]
        got = self.mat.get(id(n))
        return got[0] if got is not None and got[1] is None else None

    def _tree(self, buf, d, outer, r, inner, fn, ibuf=None, first=None):
        """One loop per step s; for each o the pairs (o, i, j), i < s, sit contiguously in
        [o*r*inner, o*r*inner + s*inner), their partners s*inner further: packets of lanes.
        With `first` (the operand's own array), the first step reads it, leaving it unchanged."""
        b = self.b
        steps = [r >> k for k in range(1, r.bit_length())]
        if self.config.planted("triton_tree_order"):
            steps = steps[::-1]
        for s in steps:
            src = buf
            if first is not None and s == r // 2:
                src = first
            with self.packets((outer, s * inner)) as (o, t):
                t0 = self.ramps.get(id(t), t)
                n = t.type.count if isinstance(t.type, ir.VectorType) else 1
                lo = b.add(b.mul(o, i64(r * inner)), t0)
                hi = b.add(lo, i64(s * inner))
                v1, v2 = self.load_run(src, d, lo, n), self.load_run(src, d, hi, n)
                if ibuf is None:
                    self.store_run(buf, d, lo, fn(v1, v2))
                else:
                    i1, i2 = self.load_run(ibuf, Dt.I32, lo, n), self.load_run(ibuf, Dt.I32, hi, n)
                    pick = fn(v1, i1, v2, i2)
                    self.store_run(buf, d, lo, b.select(pick, v1, v2))
                    self.store_run(ibuf, Dt.I32, lo, b.select(pick, i1, i2))

    def _reduced_flat(self, idx, shape, axis, r, inner):
        o = self.flat(idx[:axis], shape[:axis])
        j = self.flat(idx[axis:], shape[axis:])
        return self.add(self.mul(o, r * inner), j)

    def argreduce(self, n: Node):
        axis, is_max = n.arg
        src = n.srcs[0]
        d = src.elem
        outer, r, inner = self._split(src.shape, axis)
        if r & (r - 1):
            raise NativeUnsupported(f"line {self.line}: an argmax/argmin over a non-power-of-two axis")
        buf = self.alloca(src.type)
        self.store_tile(src, buf)
        ibuf = self.alloca(tir.TT(Dt.I32, src.shape))
        with self.loops((outer, r, inner)) as (o, i, j):
            f = self.b.add(self.b.mul(self.b.add(self.b.mul(o, i64(r)), i), i64(inner)), j)
            self.write(ibuf, Dt.I32, f, self.b.trunc(i, I32T))
        self._tree(buf, d, outer, r, inner, lambda v1, i1, v2, i2: self.ops.arg_pick(is_max, d, v1, i1, v2, i2),
                   ibuf)
        return (ibuf, lambda idx: self._reduced_flat(idx, n.shape, axis, r, inner))

    def scan(self, n: Node):
        axis, red, reverse = n.arg
        d = n.srcs[0].elem
        return self._row_major(self._scan(n.srcs, axis, reverse,
                                          lambda a, x: [self.ops.combine(red, d, a[0], x[0])])[0])

    def _scan(self, srcs, axis, reverse, fn):
        """interp.hillis_steele along the axis (reverse: from the end), two arrays per input in
        turn: for d = 1, 2, 4, ...: v[i] = fn(v[i - d], v[i]) where i >= d (reverse: fn(v[i + d],
        v[i]) where i < r - d), all from the previous step's arrays."""
        b = self.b
        shape = srcs[0].shape
        outer, r, inner = self._split(shape, axis)
        cur = [self.alloca(x.type) for x in srcs]
        nxt = [self.alloca(x.type) for x in srcs]
        for x, arr in zip(srcs, cur):
            self.store_tile(x, arr)
        elems = [x.elem for x in srcs]
        dist = 1
        while dist < r:
            with self.loops((outer, r, inner)) as (o, i, j):
                f = b.add(b.mul(b.add(b.mul(o, i64(r)), i), i64(inner)), j)
                here = [self.read(a, e, f) for a, e in zip(cur, elems)]
                if reverse:
                    take = b.icmp_signed("<", i, i64(r - dist))
                    other = b.add(f, i64(dist * inner))
                else:
                    take = b.icmp_signed(">=", i, i64(dist))
                    other = b.sub(f, i64(dist * inner))
                pre = b.block
                with b.if_then(take):
                    c = fn([self.read(a, e, other) for a, e in zip(cur, elems)], here)
                    got = b.block
                phis = []                     # every phi first: a block's phis lead it
                for e, h, v in zip(elems, here, c):
                    phis.append(b.phi(reg_type(e)))
                    phis[-1].add_incoming(v, got)
                    phis[-1].add_incoming(h, pre)
                for arr, e, ph in zip(nxt, elems, phis):
                    self.write(arr, e, f, ph)
            cur, nxt = nxt, cur
            dist *= 2
        return cur

    def apply_region(self, region: tir.Region, values: list) -> list:
        """A user combine function on (packets of) elements: its parameters bound to `values`
        (the left operand's then the right's), its statements, its results."""
        saved = self.region_env
        self.region_env = dict(saved or {})
        self.region_env.update(zip(region.params, values))
        try:
            for st in region.body:
                self.region_env[st.var] = self.ev(st.value, (), {})
            memo = {}
            out = [self.ev(r, (), memo) for r in region.results]
        finally:
            self.region_env = saved
        n = self.width(*values)
        return [self.splat(v, n) for v in out]

    def combine_node(self, n: Node):
        kind, axis, region, which, reverse = n.arg
        srcs = n.srcs
        k = len(srcs)
        if kind == "scan":
            bufs = self._scan(srcs, axis, reverse, lambda a, x: self.apply_region(region, list(a) + list(x)))
            return self._row_major(bufs[which])
        shape = srcs[0].shape
        outer, r, inner = self._split(shape, axis)
        if r & (r - 1):
            raise NativeUnsupported(f"line {self.line}: tl.reduce over a non-power-of-two axis")
        bufs = [self.alloca(x.type) for x in srcs]
        for x, arr in zip(srcs, bufs):
            self.store_tile(x, arr)
        elems = [x.elem for x in srcs]
        b = self.b
        for s in [r >> q for q in range(1, r.bit_length())]:
            with self.packets((outer, s * inner)) as (o, t):
                t0 = self.ramps.get(id(t), t)
                w = t.type.count if isinstance(t.type, ir.VectorType) else 1
                lo = b.add(b.mul(o, i64(r * inner)), t0)
                hi = b.add(lo, i64(s * inner))
                left = [self.load_run(a, e, lo, w) for a, e in zip(bufs, elems)]
                right = [self.load_run(a, e, hi, w) for a, e in zip(bufs, elems)]
                for a, e, v in zip(bufs, elems, self.apply_region(region, left + right)[:k]):
                    self.store_run(a, e, lo, v)
        return (bufs[which], lambda idx: self._reduced_flat(idx, n.shape, axis, r, inner))

    def dot(self, n: Node):
        """interp._dot: c[i, j] = fma(a[i, k], b[k, j], c[i, j]) for k ascending; a 3-D dot is
        its batch of 2-D products, one after another."""
        a_n, b_n, c_n = n.srcs
        *batch, m, kk = a_n.shape
        nn = b_n.shape[-1]
        d = n.elem
        a, bm = self._tile_array(a_n), self._tile_array(b_n)
        target, value = self.let_target or (None, None)
        if (value is n and c_n.op is K.VAR and c_n.arg == target and target not in self.inline and d is Dt.F32
                and not any(x.op is K.VAR and x.arg == target for x in (a_n, b_n))):
            c = self.arrays[target]        # `acc = tl.dot(a, b, acc)`: C is acc's own array (blocks are disjoint)
        else:
            c = self.alloca(n.type)
            self.store_tile(c_n, c)
        if d not in (Dt.F32, Dt.I32):
            raise NativeUnsupported(f"line {self.line}: tl.dot accumulating in {d!r}")
        b = self.b
        mty = F32T if d is Dt.F32 else I32T
        for q in range(batch[0] if batch else 1):
            aq, bq, cq = (b.gep(x, [i64(q * size)], source_etype=mty) if q else x
                          for x, size in ((a, m * kk), (bm, kk * nn), (c, m * nn)))
            if d is Dt.F32:
                self._dot_f32(aq, bq, cq, m, kk, nn)
                continue
            with self.loops((m, kk, nn)) as (i, k, j):
                ci = b.add(b.mul(i, i64(nn)), j)
                p = b.mul(self.read(aq, d, b.add(b.mul(i, i64(kk)), k)), self.read(bq, d, b.add(b.mul(k, i64(nn)), j)))
                self.write(cq, d, ci, b.add(self.read(cq, d, ci), p))
        return self._row_major(c)

    def _dot_f32(self, a, bm, c, m, kk, nn):
        """Register-blocked: a block of C — up to 8 rows by up to 2 packets of V columns — held in
        registers across the whole k loop (per k: the block's packets of b, one broadcast of
        a[i, k] per row, one fma per accumulator); every element still one fma chain over k
        ascending, as interp._dot."""
        b = self.b
        v = min(nn, self.lanes)
        rows = min(m, 8)
        cols = min(nn // v, 2)
        vt = ir.VectorType(F32T, v)
        cx = Ctx(self.m, b, v, self.config)
        fma = LOWER[Op.FMA]

        def cptr(i0, r, j0, q):
            p = b.gep(c, [b.add(b.mul(b.add(i0, i64(r)), i64(nn)), b.add(j0, i64(q * v)))], source_etype=F32T)
            return b.bitcast(p, ir.PointerType(vt))
        blocks = [(r, q) for r in range(rows) for q in range(cols)]
        with self.loops((m // rows, nn // (v * cols))) as (ib, jb):
            i0 = b.mul(ib, i64(rows))
            j0 = b.mul(jb, i64(v * cols))
            accs = [b.load(cptr(i0, r, j0, q), typ=vt, align=4) for r, q in blocks]
            pre = b.block
            head, body, out = (b.append_basic_block(x) for x in ("dotk", "dotkb", "dotko"))
            b.branch(head)
            b.position_at_end(head)
            k = b.phi(I64T)
            k.add_incoming(i64(0), pre)
            phis = []
            for acc in accs:
                ph = b.phi(vt)
                ph.add_incoming(acc, pre)
                phis.append(ph)
            b.cbranch(b.icmp_signed("<", k, i64(kk)), body, out)
            b.position_at_end(body)
            kr = b.sub(i64(kk - 1), k) if self.config.planted("triton_dot_k_descending") else k
            bvs = []
            for q in range(cols):
                p = b.gep(bm, [b.add(b.mul(kr, i64(nn)), b.add(j0, i64(q * v)))], source_etype=F32T)
                bvs.append(b.load(b.bitcast(p, ir.PointerType(vt)), typ=vt, align=4))
            splats = []
            for r in range(rows):
                av = b.load(b.gep(a, [b.add(b.mul(b.add(i0, i64(r)), i64(kk)), kr)], source_etype=F32T), typ=F32T)
                sp = b.insert_element(ir.Constant(vt, ir.Undefined), av, ir.Constant(I32T, 0))
                splats.append(b.shuffle_vector(sp, ir.Constant(vt, ir.Undefined),
                                               ir.Constant(ir.VectorType(I32T, v), [0] * v)))
            new = [fma(cx, DType.F32, splats[r], bvs[q], ph) for (r, q), ph in zip(blocks, phis)]
            k.add_incoming(b.add(k, i64(1)), b.block)
            for ph, nv in zip(phis, new):
                ph.add_incoming(nv, b.block)
            b.branch(head)
            b.position_at_end(out)
            for (r, q), ph in zip(blocks, phis):
                b.store(ph, cptr(i0, r, j0, q), align=4)

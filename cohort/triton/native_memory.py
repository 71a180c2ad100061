"""Tile arrays, packets and memory of the native lowering (native_lower.py, DESIGN §10).

Values are scalars (the same in every lane) or packets (vectors of the statement's lanes).
A tile array is read and written a packet at a time where the packet's lanes are
consecutive, else gathered. A tensor access first tries to show from the tile program that
a packet's storage indices are g0, g0 + 1, ... (`affine`: offsets linear in the lane, each
widening of a varying 32-bit value guarded by a run-time no-wrap condition) and inside the
storage: then one (masked) vector load or store with a scalar check (`whole_linear`: one
check for a whole 1-D tile, none per packet); otherwise every lane is
checked, and the packet is loaded with one masked load when consecutive at run time, else a
gather (stores: a masked store, else a scatter whose later lanes win, as row-major order).
An active element outside its tensor's storage stops the program with the first such
element (row-major); a store or an atomic checks every element before it writes any.
"""
from __future__ import annotations

import contextlib

from llvmlite import ir

from . import tir
from .native_ops import F64T, I1T, I32T, I64T, PTR, const, from_mem, i64, kc, like_i1, mem_type, reg_type, to_mem
from .native_ops import const_of as _const_of
from .tir import Bin, Dt, K, Node

# the operations whose element is another element of their operand (view_source)
VIEWS = (K.BROADCAST, K.EXPAND, K.PERMUTE)


class MemoryLowering:
    _NO_BAD = 2 ** 63 - 1
    span = None          # set by whole_linear: the lanes `affine`'s no-wrap conditions cover

    def width(self, *vs) -> int:
        return max((v.type.count for v in vs if isinstance(v.type, ir.VectorType)), default=1)

    def splat(self, v, n: int):
        if n == 1 or isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, n)
        if isinstance(v, ir.Constant) and v.constant is not None and not isinstance(v.constant, (list, tuple)):
            return kc(vt, v.constant)
        b = self.b
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32T, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32T, n), [0] * n))

    def unify(self, *vs):
        n = self.width(*vs)
        return [self.splat(v, n) for v in vs]

    def add(self, x, y):
        x, y = self.unify(x, y)
        return self.b.add(x, y)

    def mul(self, x, c: int):
        return x if c == 1 else self.b.mul(x, kc(x.type, c))

    def elem_ptr(self, arr, elem, flat):
        return self.b.gep(arr, [flat], source_etype=mem_type(elem))

    def read(self, arr, elem, flat):
        """Element(s) of a tile array at a flat index: a scalar, or a packet gathered."""
        b = self.b
        if isinstance(flat.type, ir.VectorType):
            return from_mem(b, self.gather(arr, mem_type(elem), flat, None, None), elem)
        return from_mem(b, b.load(self.elem_ptr(arr, elem, flat), typ=mem_type(elem)), elem)

    def write(self, arr, elem, flat, v):
        self.b.store(to_mem(self.b, v, elem), self.elem_ptr(arr, elem, flat))

    def ptrs(self, base, mty, flat):
        """A packet of element addresses base + flat * size (flat: <n x i64>)."""
        b = self.b
        n = flat.type.count
        size = {8: 1, 16: 2, 32: 4, 64: 8}[mty.width] if isinstance(mty, ir.IntType) else (8 if mty == F64T else 4)
        addr = b.add(self.splat(b.ptrtoint(base, I64T), n), self.mul(flat, size))
        return b.inttoptr(addr, ir.VectorType(PTR, n))

    def _align(self, mty):
        return ir.Constant(I32T, {8: 1, 16: 2, 32: 4, 64: 8}[mty.width] if isinstance(mty, ir.IntType)
                           else (8 if mty == F64T else 4))

    def gather(self, base, mty, flat, mask, other):
        n = flat.type.count
        vt = ir.VectorType(mty, n)
        mask = kc(ir.VectorType(I1T, n), 1) if mask is None else mask
        other = ir.Constant(vt, ir.Undefined) if other is None else other
        return self.ops.call("llvm.masked.gather", vt, [self.ptrs(base, mty, flat), self._align(mty), mask, other],
                             vt, ir.VectorType(PTR, n))

    def contiguous(self, idx, shape):
        """The flat index of lane 0 when idx is a packet along the last axis (else None)."""
        if not idx or id(idx[-1]) not in self.ramps or any(isinstance(i.type, ir.VectorType) for i in idx[:-1]):
            return None
        return self.flat(idx[:-1] + (self.ramps[id(idx[-1])],), shape)

    def read_at(self, arr, elem, idx, shape):
        f0 = self.contiguous(idx, shape)
        if f0 is None:
            return self.read(arr, elem, self.flat(idx, shape))
        return self.load_run(arr, elem, f0, idx[-1].type.count)

    def write_at(self, arr, elem, idx, shape, v):
        f0 = self.contiguous(idx, shape)
        if f0 is None:
            assert not isinstance(self.flat(idx, shape).type, ir.VectorType)
            return self.write(arr, elem, self.flat(idx, shape), v)
        self.store_run(arr, elem, f0, self.splat(v, idx[-1].type.count))

    def flat(self, idx, shape):
        f = i64(0)
        for i, d in zip(idx, shape):
            f = self.add(self.mul(f, d), i)
        return f

    def unflat(self, f, shape):
        b = self.b
        out = []
        for d in reversed(shape):
            out.append(b.urem(f, kc(f.type, d)))
            f = b.udiv(f, kc(f.type, d))
        return tuple(reversed(out))

    def _address(self, ptr: Node, idx, memo):  # scalar elements (atomics)
        name = self.base_of(ptr)
        data, size, base = self.bufs[name]
        gi = self.b.add(self.ev(ptr, idx, memo), base)
        return name, data, size, gi

    def _track_bad(self, first, bad, f):
        """first = min(first, the lowest flat index where bad) (scalars or packets)."""
        b = self.b
        if isinstance(bad.type, ir.VectorType):
            anybad = self.ops.call("llvm.vector.reduce.or", I1T, [bad], bad.type)
            with b.if_then(anybad, likely=False):
                cand = b.select(bad, self.splat(f, bad.type.count), kc(ir.VectorType(I64T, bad.type.count), self._NO_BAD))
                m = self.ops.call("llvm.vector.reduce.smin", I64T, [cand], cand.type)
                cur = b.load(first, typ=I64T)
                b.store(b.select(b.icmp_signed("<", m, cur), m, cur), first)
        else:
            with b.if_then(bad, likely=False):
                cur = b.load(first, typ=I64T)
                b.store(b.select(b.icmp_signed("<", f, cur), f, cur), first)

    def _report_bad(self, first, ptr: Node, what: str):
        b = self.b
        k = b.load(first, typ=I64T)
        with b.if_then(b.icmp_signed("!=", k, i64(self._NO_BAD)), likely=False):
            off = self.ev(ptr, self.unflat(k, ptr.shape), {})
            self.fail("oob", off, (what, self.base_of(ptr)))

    def _access(self, ptr: Node, mask, idx, memo):
        """(data, packet width, element indices in the storage, in-bounds, active) at idx."""
        b = self.b
        name = self.base_of(ptr)
        data, size, base = self.bufs[name]
        off = self.ev(ptr, idx, memo)
        active = self.ev(mask, self._bidx(mask.shape, ptr.shape, idx), memo) if mask is not None else None
        n = self.width(off, *([active] if active is not None else []), *(i for i in idx))
        gi = self.add(self.splat(off, n), base)
        inb = b.icmp_unsigned("<", gi, self.splat(size, n))
        active = self.splat(active if active is not None else kc(like_i1(n), 1), n)
        return data, n, gi, inb, active

    def affine(self, n: Node, idx, memo):
        """(v0, c, conditions): n's value at lane l of the packet is v0 + c*l — integers modulo
        their width, pointer offsets exactly — whenever every condition (i1 scalars) holds;
        None when not of that form. A widening of an integer that varies along the lanes is
        exact only when it does not wrap within the packet: that is a condition."""
        b = self.b
        ramp = next((i for i in idx if id(i) in self.ramps), None)
        if ramp is None or not any(isinstance(i.type, ir.VectorType) for i in idx):
            v = self.ev(n, idx, memo)
            return None if isinstance(v.type, ir.VectorType) else (v, 0, [])
        op = n.op
        if op in (K.CONST, K.PARAM, K.PROGRAM_ID, K.NUM_PROGRAMS):
            return self.ev(n, (), memo), 0, []
        if any(isinstance(i.type, ir.VectorType) and id(i) not in self.ramps for i in idx):
            return None
        if op is K.ARANGE:
            j0 = self.ramps[id(idx[0])]
            return b.add(b.trunc(j0, I32T), ir.Constant(I32T, n.arg)), 1, []
        s0 = n.srcs[0] if n.srcs else None
        if op in VIEWS:
            return self.affine(s0, self.view_source(n, idx), memo)
        if op is K.VAR:
            value = self.inline.get(n.arg)
            if value is None or (self.region_env is not None and n.arg in self.region_env):
                return None
            return self.affine(value, idx, memo)
        if op is K.BINARY and isinstance(n.elem, Dt) and n.elem.is_int and n.elem is not Dt.I1 \
                and n.arg in (Bin.ADD, Bin.SUB, Bin.MUL):
            x, y = self.affine(s0, idx, memo), self.affine(n.srcs[1], idx, memo)
            if x is None or y is None:
                return None
            if n.arg is Bin.MUL:
                if x[1] and y[1]:
                    return None
                k = _const_of(n.srcs[1]) if x[1] else _const_of(s0) if y[1] else 0
                if k is None:
                    return None
                c = (x[1] or y[1]) * k
                return b.mul(x[0], y[0]), c, x[2] + y[2]
            fn = b.add if n.arg is Bin.ADD else b.sub
            c = x[1] + y[1] if n.arg is Bin.ADD else x[1] - y[1]
            return fn(x[0], y[0]), c, x[2] + y[2]
        if op is K.CAST and isinstance(n.elem, Dt) and n.elem.is_int and n.elem is not Dt.I1 \
                and isinstance(s0.elem, Dt) and s0.elem.is_int and s0.elem is not Dt.I1:
            x = self.affine(s0, idx, memo)
            if x is None:
                return None
            v0, c, conds = x
            if n.elem.bits <= s0.elem.bits:
                return self.ops.cast(v0, s0.elem, n.elem), c, conds
            return self.ops.cast(v0, s0.elem, n.elem), c, conds + self._no_wrap(v0, c, s0.elem, self.span or ramp.type.count)
        if op is K.PTR_ADD:
            p, o = self.affine(s0, idx, memo), self.affine(n.srcs[1], idx, memo)
            if p is None or o is None:
                return None
            d = n.srcs[1].elem
            conds = p[2] + o[2] + (self._no_wrap(o[0], o[1], d, self.span or ramp.type.count) if d.bits < 64 else [])
            return b.add(p[0], self._to64(o[0], d)), p[1] + o[1], conds
        return None

    def _no_wrap(self, v0, c: int, d: Dt, w: int) -> list:
        """[v0 + c*(w-1) stays inside d's range] (so the widening of every lane is v0 + c*l)."""
        if c == 0:
            return []
        if abs(c) >= 2 ** 31:
            return [ir.Constant(I1T, 0)]
        b = self.b
        last = b.add(self._to64(v0, d), i64(c * (w - 1)))
        lo, hi = tir.int_range(d)
        return [b.and_(b.icmp_signed(">=", last, i64(lo)), b.icmp_signed("<=", last, i64(hi)))]

    def _linear(self, ptr: Node, idx, memo, w: int):
        """(flag, g0): flag holds when the packet's storage indices are g0, g0 + 1, ..., all inside
        the storage (then no lane needs its own check); None when that cannot be shown."""
        if w <= 1:
            return None
        aff = self.affine(ptr, idx, memo)
        if aff is not None and aff[1] > 1 and self.config.planted("triton_stride_as_contiguous"):
            aff = (aff[0], 1, aff[2])
        if aff is None or aff[1] != 1:
            return None
        b = self.b
        data, size, base = self.bufs[self.base_of(ptr)]
        g0 = b.add(aff[0], base)
        flag = b.and_(b.icmp_signed(">=", g0, i64(0)), b.icmp_signed("<=", g0, b.sub(size, i64(w))))
        for c in aff[2]:
            flag = b.and_(flag, c)
        return flag, g0

    def whole_linear(self, ptr: Node, shape):
        """A flag that holds when every storage index of a 1-D access is consecutive and inside
        the storage (then no packet needs a check of its own); None when that cannot be shown
        or the tile is one packet. `affine` at packet 0 over a span of the whole axis: its
        operations are linear, so the lanes' rule holds along the axis when no widening wraps
        within it (tests/test_triton_native_fast.py: the last rows of a softmax, offsets near
        the i32 limit)."""
        n = shape[0] if len(shape) == 1 else 0
        if n <= self.lanes or self.lanes <= 1:
            return None
        ramp = ir.Constant(ir.VectorType(I64T, self.lanes), list(range(self.lanes)))
        self.ramps[id(ramp)] = i64(0)
        self.span = n
        try:
            lin = self._linear(ptr, (ramp,), {}, n)
        finally:
            self.span = None
            del self.ramps[id(ramp)]
        return None if lin is None else lin[0]

    def check(self, ptr: Node, mask, what: str):
        """interp._addresses: every active element inside its storage, else the first one
        (row-major) that is not is reported, before the access does anything."""
        b = self.b
        first = self.alloca(tir.TT(Dt.I64))
        b.store(i64(self._NO_BAD), first)
        with self.packets(ptr.shape) as idx:
            memo = {}
            w = idx[-1].type.count if idx and isinstance(idx[-1].type, ir.VectorType) else 1
            lin = self._linear(ptr, idx, memo, w)
            slow = contextlib.nullcontext() if lin is None else b.if_then(b.not_(lin[0]))
            with slow:
                data, n, gi, inb, active = self._access(ptr, mask, idx, dict(memo))
                self._track_bad(first, b.and_(active, b.not_(inb)), self.flat(idx, ptr.shape))
        self._report_bad(first, ptr, what)

    def view_source(self, n: Node, idx):
        """The index of view n's operand that n's element at idx is (VIEWS: no data moves)."""
        if n.op is K.BROADCAST:
            return self._bidx(n.srcs[0].shape, n.shape, idx)
        if n.op is K.EXPAND:
            return idx[:n.arg] + idx[n.arg + 1:]
        src = [None] * len(idx)                 # K.PERMUTE
        for dpos, axis in enumerate(n.arg):
            src[axis] = idx[dpos]
        return tuple(src)

    def _bidx(self, src_shape, dst_shape, idx):
        """numpy broadcasting of `src_shape` against `dst_shape` at dst index idx."""
        if not src_shape:
            return ()
        lead = len(dst_shape) - len(src_shape)
        return tuple(i64(0) if s == 1 and d != 1 else i for s, d, i in
                     zip(src_shape, dst_shape[lead:], idx[lead:]))

    def _lane0_contiguous(self, gi):
        """Whether a packet of element indices is gi[0], gi[0] + 1, ...: (flag, gi[0])."""
        b = self.b
        n = gi.type.count
        g0 = b.extract_element(gi, ir.Constant(I32T, 0))
        want = b.add(self.splat(g0, n), ir.Constant(ir.VectorType(I64T, n), list(range(n))))
        same = b.icmp_unsigned("==", gi, want)
        return self.ops.call("llvm.vector.reduce.and", I1T, [same], same.type), g0

    def mem_load(self, data, elem, gi, on, other):
        """Packet load of data[gi] where `on`, `other` elsewhere: one masked load when the
        packet is contiguous, else a gather; off lanes never touch memory."""
        b = self.b
        mty = mem_type(elem)
        n = gi.type.count
        vt = ir.VectorType(mty, n)
        other = to_mem(b, other, elem)
        flag, g0 = self._lane0_contiguous(gi)
        pre = b.block
        with b.if_else(flag) as (then, otherwise):
            with then:
                p = self.elem_ptr(data, elem, g0)
                v1 = self.ops.call("llvm.masked.load", vt, [p, self._align(mty), on, other], vt, PTR)
                bb1 = b.block
            with otherwise:
                v2 = self.gather(data, mty, gi, on, other)
                bb2 = b.block
        del pre
        v = b.phi(vt)
        v.add_incoming(v1, bb1)
        v.add_incoming(v2, bb2)
        return from_mem(b, v, elem)

    def mem_store(self, data, elem, gi, on, v):
        b = self.b
        mty = mem_type(elem)
        n = gi.type.count
        vt = ir.VectorType(mty, n)
        v = to_mem(b, v, elem)
        flag, g0 = self._lane0_contiguous(gi)
        with b.if_else(flag) as (then, otherwise):
            with then:
                p = self.elem_ptr(data, elem, g0)
                if on is None:
                    b.store(v, b.bitcast(p, ir.PointerType(vt)), align=self._align(mty).constant)
                else:
                    self.ops.call("llvm.masked.store", ir.VoidType(), [v, p, self._align(mty), on], vt, PTR)
            with otherwise:          # lanes in order: of two lanes at one address the later one wins
                on = kc(ir.VectorType(I1T, n), 1) if on is None else on
                self.ops.call("llvm.masked.scatter", ir.VoidType(), [v, self.ptrs(data, mty, gi), self._align(mty), on],
                              vt, ir.VectorType(PTR, n))

    def load(self, st: tir.Load):
        b = self.b
        self.prepare(st.ptr)
        if st.mask is not None:
            self.prepare(st.mask)
        fused_other = st.other is None or not self._needs_material(st.other)
        if not fused_other:
            self.check(st.ptr, st.mask, "load")
            self.prepare(st.other)
        arr = self.arrays[st.var]
        shape = st.type.shape
        whole = self.whole_linear(st.ptr, shape) if fused_other else None
        if whole is not None:
            with b.if_else(whole) as (fast, slow):
                with fast:           # every packet consecutive and inside: no packet checks
                    self._load_inside(st, arr, shape)
                with slow:
                    self._load_packets(st, arr, shape, fused_other)
        else:
            self._load_packets(st, arr, shape, fused_other)

    def _load_inside(self, st, arr, shape):
        elem = st.type.elem
        data = self.bufs[self.base_of(st.ptr)][0]
        with self.packets(shape) as idx:
            memo = {}
            w = idx[-1].type.count
            mask_v = self.ev(st.mask, idx, memo) if st.mask is not None else None
            other = self.ev(st.other, self._bidx(st.other.shape, shape, idx), memo) if st.other is not None \
                else const(0, elem)
            g0 = self._linear(st.ptr, idx, memo, w)[1]
            v = self.mem_run(data, elem, g0, w, self.splat(mask_v, w) if mask_v is not None else None,
                             self.splat(other, w))
            self.write_at(arr, elem, idx, shape, v)

    def _load_packets(self, st, arr, shape, fused_other):
        b = self.b
        elem = st.type.elem
        first = self.alloca(tir.TT(Dt.I64)) if fused_other else None
        if first is not None:
            b.store(i64(self._NO_BAD), first)
        with self.packets(shape) as idx:
            memo = {}
            w = idx[-1].type.count if idx and isinstance(idx[-1].type, ir.VectorType) else 1
            mask_v = self.ev(st.mask, idx, memo) if st.mask is not None else None
            other = self.ev(st.other, self._bidx(st.other.shape, shape, idx), memo) if st.other is not None \
                else const(0, elem)
            other = self.splat(other, w)
            lin = self._linear(st.ptr, idx, memo, w)
            if lin is not None:
                data = self.bufs[self.base_of(st.ptr)][0]
                with b.if_else(lin[0]) as (fast, slow):
                    with fast:
                        v1 = self.mem_run(data, elem, lin[1], w, self.splat(mask_v, w) if mask_v is not None
                                          else None, other)
                        bb1 = b.block
                    with slow:
                        v2 = self._load_slow(st, idx, dict(memo), first, other, shape)
                        bb2 = b.block
                val = b.phi(v1.type)
                val.add_incoming(v1, bb1)
                val.add_incoming(v2, bb2)
            elif w > 1:
                val = self._load_slow(st, idx, memo, first, other, shape)
            else:
                data, n, gi, inb, active = self._access(st.ptr, st.mask, idx, memo)
                if first is not None:
                    self._track_bad(first, b.and_(active, b.not_(inb)), self.flat(idx, shape))
                on = b.and_(active, inb)
                pre = b.block
                with b.if_then(on):
                    v = self.read(data, elem, gi)
                    got = b.block
                val = b.phi(reg_type(elem))
                val.add_incoming(v, got)
                val.add_incoming(other, pre)
            self.write_at(arr, elem, idx, shape, val)
        if first is not None:
            self._report_bad(first, st.ptr, "load")

    def _load_slow(self, st, idx, memo, first, other, shape):
        """A packet of a load whose addresses are not shown consecutive and inside: each lane
        checked, a masked load when consecutive at run time, else a gather."""
        b = self.b
        data, n, gi, inb, active = self._access(st.ptr, st.mask, idx, memo)
        if first is not None:
            self._track_bad(first, b.and_(active, b.not_(inb)), self.flat(idx, shape))
        return self.mem_load(data, st.type.elem, gi, b.and_(active, inb), other)

    def mem_run(self, data, elem, g0, w, on, other):
        """w consecutive elements of a tensor from storage index g0, all inside it: a masked load
        (off lanes read `other`), or a plain one without a mask."""
        b = self.b
        mty = mem_type(elem)
        vt = ir.VectorType(mty, w)
        p = self.elem_ptr(data, elem, g0)
        if on is None:
            v = b.load(b.bitcast(p, ir.PointerType(vt)), typ=vt, align=self._align(mty).constant)
        else:
            v = self.ops.call("llvm.masked.load", vt, [p, self._align(mty), on, to_mem(b, other, elem)], vt, PTR)
        return from_mem(b, v, elem)

    def store(self, st: tir.Store):
        b = self.b
        self.prepare(st.ptr)
        self.prepare(st.value)
        if st.mask is not None:
            self.prepare(st.mask)
        shape = st.ptr.shape
        whole = self.whole_linear(st.ptr, shape)
        if whole is not None:
            with b.if_else(whole) as (fast, slow):
                with fast:           # every packet consecutive and inside: no check, no packet test
                    self._store_inside(st, shape)
                with slow:
                    self._store_packets(st, shape)
        else:
            self._store_packets(st, shape)

    def _store_inside(self, st, shape):
        elem = self.buf_elem[self.base_of(st.ptr)]
        data = self.bufs[self.base_of(st.ptr)][0]
        with self.packets(shape) as idx:
            memo = {}
            w = idx[-1].type.count
            g0 = self._linear(st.ptr, idx, memo, w)[1]
            if st.mask is None:
                v = self.splat(self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo), w)
                self.store_vec(data, elem, g0, v, None)
            else:
                mask_v = self.splat(self.ev(st.mask, idx, memo), w)
                # a packet with no active lane stores nothing: its value (which cannot fail, the
                # whole-tile nodes are computed) is not computed (softmax's division of the tail)
                some = self.ops.call("llvm.vector.reduce.or", I1T, [mask_v], mask_v.type)
                with self.b.if_then(some):
                    v = self.splat(self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo), w)
                    self.store_vec(data, elem, g0, v, mask_v)

    def _store_packets(self, st, shape):
        b = self.b
        self.check(st.ptr, st.mask, "store")
        elem = self.buf_elem[self.base_of(st.ptr)]
        with self.packets(shape) as idx:
            memo = {}
            w = idx[-1].type.count if idx and isinstance(idx[-1].type, ir.VectorType) else 1
            lin = self._linear(st.ptr, idx, memo, w)
            if lin is not None:
                mask_v = self.splat(self.ev(st.mask, idx, memo), w) if st.mask is not None else None
                v = self.splat(self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo), w)
                data = self.bufs[self.base_of(st.ptr)][0]
                with b.if_else(lin[0]) as (fast, slow):
                    with fast:
                        self.store_vec(data, elem, lin[1], v, mask_v)
                    with slow:
                        _, n, gi, inb, active = self._access(st.ptr, st.mask, idx, dict(memo))
                        self.mem_store(data, elem, gi, None if st.mask is None else active, v)
            elif w > 1:
                data, n, gi, inb, active = self._access(st.ptr, st.mask, idx, memo)
                v = self.splat(self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo), n)
                self.mem_store(data, elem, gi, None if st.mask is None else active, v)
            else:
                data, n, gi, inb, active = self._access(st.ptr, st.mask, idx, memo)
                v = self.splat(self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo), n)
                if st.mask is None:
                    self.write(data, elem, gi, v)
                else:
                    with b.if_then(active):
                        self.write(data, elem, gi, v)

    def store_vec(self, data, elem, g0, v, on):
        b = self.b
        mty = mem_type(elem)
        vt = ir.VectorType(mty, v.type.count)
        p = self.elem_ptr(data, elem, g0)
        v = to_mem(b, v, elem)
        if on is not None and self.config.planted("triton_masked_store_whole"):
            on = None
        if on is None:
            b.store(v, b.bitcast(p, ir.PointerType(vt)), align=self._align(mty).constant)
        else:
            self.ops.call("llvm.masked.store", ir.VoidType(), [v, p, self._align(mty), on], vt, PTR)

    def atomic(self, st: tir.Atomic):
        b = self.b
        for n in (st.ptr, st.value, st.cmp, st.mask):
            if n is not None:
                self.prepare(n)
        self.check(st.ptr, st.mask, f"atomic_{st.op}")
        shape = st.ptr.shape
        elem = self.buf_elem[self.base_of(st.ptr)]
        arr = self.arrays[st.var]
        with self.loops(shape) as idx:
            memo = {}
            name, data, size, gi = self._address(st.ptr, idx, memo)
            f = self.flat(idx, shape)
            self.write(arr, elem, f, const(0, elem))
            on = self.ev(st.mask, idx, memo) if st.mask is not None else ir.Constant(I1T, 1)
            with b.if_then(on):
                v = self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo)
                c = self.ev(st.cmp, self._bidx(st.cmp.shape, shape, idx), memo) if st.cmp is not None else None
                old = self.read(data, elem, gi)
                self.write(arr, elem, f, old)
                self.write(data, elem, gi, self.ops.atomic_new(st.op, elem, old, v, c))

    def load_run(self, arr, elem, f0, n: int):
        """n consecutive elements of a tile array from flat index f0 (a scalar when n == 1)."""
        if n == 1:
            return self.read(arr, elem, f0)
        mty = mem_type(elem)
        v = self.b.load(self.b.bitcast(self.elem_ptr(arr, elem, f0), ir.PointerType(ir.VectorType(mty, n))),
                        typ=ir.VectorType(mty, n), align=self._align(mty).constant)
        return from_mem(self.b, v, elem)

    def store_run(self, arr, elem, f0, v):
        if not isinstance(v.type, ir.VectorType):
            return self.write(arr, elem, f0, v)
        mty = mem_type(elem)
        self.b.store(to_mem(self.b, v, elem), self.b.bitcast(self.elem_ptr(arr, elem, f0),
                                                             ir.PointerType(ir.VectorType(mty, v.type.count))),
                     align=self._align(mty).constant)

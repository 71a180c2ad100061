"""Buffer and private-array accesses, by access class.

Every buffer access is classified by the shape of its index across the lanes
(shapes.py): uniform (one scalar load, broadcast), contiguous (a vector
load/store), strided(2..4) (a span load and a shuffle), or gather /
scatter. Under a partial mask, effects are masked vector operations
(`predicated`) or one branch per lane. Each classification is exported as a
lane claim (`annotate`) the interpreter checks at run time.

At width 1 the classification is trivial: a load is one element (the uniform
path, which also runs only when its one lane is on, as in a lazy select arm),
a store is one element (the contiguous path, never masked: statements at
width 1 run only for live threads).
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import DType, Expr, PStore, SStore, Store
from ..context import (
    ERR_LOAD_OOB,
    ERR_PRIVATE_OOB,
    ERR_SHARED_OOB,
    ERR_STORE_OOB,
    I1,
    I8,
    I32T,
    I64,
    PTR,
    mem_type,
    vector_const,
)
from ..lower_ops import narrow, widen
from ..shapes import Access, classify


class MemoryLowering:
    # ------------------------------------------------------------ addressing
    def index64(self, idx, dt: DType):
        t = self.vty(I64) if isinstance(idx.type, ir.VectorType) else I64
        return self.b.sext(idx, t) if dt is DType.I32 else self.b.zext(idx, t)

    def access_class(self, index: Expr, store: bool) -> Access:
        if self.W == 1:
            return Access("contiguous", 1) if store else Access("uniform")
        return classify(self.shape(index), store, self.config.bugs)

    def effect_mode(self) -> str:
        """How an effect under the current mask is carried out (a lane claim's mode)."""
        if self.mask is None:
            return "unmasked"
        return "masked" if self.variant.predicated else "per-lane"

    def lane_pointers(self, base, index64, elem):
        ptrs = self.b.gep(base, [index64], source_etype=elem)
        ptrs.type = self.vty(PTR)
        return ptrs

    # ------------------------------------------------------------ buffers
    def buffer_load(self, e: Expr, idx):
        b, dt = self.b, e.dtype
        st = self.k.param(e.arg).dtype      # the element type: bf16/f16 load their i16 bits, then widen
        acc = self.access_class(e.src[0], store=False)
        self.annotate(e, "load", e.arg, acc, self.effect_mode())
        elem = mem_type(st)
        buf = self.entry.bufs[e.arg]
        idx64 = self.index64(idx, e.src[0].dtype)
        self.check_lanes(idx64, self.entry.lens[e.arg], ERR_LOAD_OOB, self.now.cur, key=e)
        self.check_global(e.arg, idx64, "read", e, self.now.cur)          # sanitize builds (sanitize_global.py)
        if acc.kind == "uniform":
            v = self.uniform_load(b.gep(buf, [self.lane0(idx64)], source_etype=elem), elem)
            if dt is DType.BOOL:  # any nonzero byte is True, as in NumPy (not just its low bit)
                v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
            if st.is_storage:
                v = widen(self.sx, v, st)
            return self.splat(v, dt)
        vec = self.vty(elem)
        if acc.kind == "contiguous":
            ptr = b.gep(buf, [self.lane0(idx64)], source_etype=elem)
            if self.mask is None:
                v = b.load(ptr, typ=vec, align=1)
            elif self.variant.predicated:
                self.counts["masked_loads"] += 1

                def masked():
                    return self.intrinsic(f"llvm.masked.load.{self.vsuffix(elem)}.p0", vec,
                                          [ptr, self.i32(1), self.mask, self.zero(vec)])
                # every lane on (a lazy arm's condition true across the packet, cumsum's
                # `x[j] if j < C`): a plain load, which streams from memory as a masked one
                # does not (cumsum 1024x4096 at the native entry: 1.78-1.80 ms against
                # 2.96-3.25 masked; DESIGN §5)
                v = self.plain_or_masked(self.every(self.mask) if not self.planted("masked_load_all_on_any")
                                         else self.any(self.mask),
                                         lambda: b.load(ptr, typ=vec, align=1), masked, vec)
            else:
                v = self.per_lane_load(lambda l: b.gep(buf, [b.extract_element(idx64, l)],
                                                       source_etype=elem), elem)
        elif acc.kind == "strided" and (self.mask is None or self.variant.predicated):
            v = self.strided_load(buf, self.entry.lens[e.arg], self.lane0(idx64), acc.stride, elem)
        else:
            ptrs = self.lane_pointers(buf, idx64, elem)
            if self.mask is not None and not self.variant.predicated:
                v = self.per_lane_load(lambda l: b.extract_element(ptrs, l), elem)
            else:
                v = self.gather(ptrs, elem)
        if st.is_storage:
            return widen(self.cx, v, st)
        return b.icmp_unsigned("!=", v, self.zero(vec)) if dt is DType.BOOL else v

    def buffer_store(self, s: Store, idx, val):
        b = self.b
        dt = self.k.param(s.buf).dtype
        acc = self.access_class(s.index, store=True)
        self.annotate(s, "store", s.buf, acc, self.effect_mode())
        elem = mem_type(dt)
        if dt is DType.BOOL:
            val = b.zext(val, self.vty(I8))
        if dt.is_storage:
            val = narrow(self.cx, val, dt)
        buf = self.entry.bufs[s.buf]
        idx64 = self.index64(idx, s.index.dtype)
        self.check_lanes(idx64, self.entry.lens[s.buf], ERR_STORE_OOB, s, key=s)
        self.check_global(s.buf, idx64, "write", s, s)                # sanitize builds (sanitize_global.py)
        if acc.kind == "contiguous":
            self.contiguous_store(val, b.gep(buf, [self.lane0(idx64)], source_etype=elem), elem)
        else:
            self.scatter(val, self.lane_pointers(buf, idx64, elem), elem)

    # ------------------------------------------------------------ access classes
    def span_inside(self, first, count: int, length):
        """Whether elements [first, first + count) all lie in an array of `length` (i64s)."""
        b = self.b
        if self.planted("span_overread"):
            return ir.Constant(I1, 1)
        return b.and_(b.icmp_signed(">=", first, self.i64(0)),
                      b.icmp_signed("<=", b.add(first, self.i64(count)), length))

    def plain_or_masked(self, inside, plain, masked, ty=None):
        """plain() where `inside` holds, masked() elsewhere: one branch, which every packet
        but those at an array's edge takes the same way. Returns the phi of their values
        (ty given) or nothing."""
        b = self.b
        with b.if_else(inside) as (then, otherwise):
            with then:
                a = plain()
                a_end = b.block
            with otherwise:
                m = masked()
                m_end = b.block
        if ty is None:
            return None
        v = b.phi(ty)
        v.add_incoming(a, a_end)
        v.add_incoming(m, m_end)
        return v

    def uniform_load(self, ptr, elem):
        """One element for every lane; under a mask, read only if some lane is on."""
        b = self.b
        if self.mask is None:
            return b.load(ptr, typ=elem, align=1)
        pre = b.block
        with b.if_then(self.any(self.mask)):
            loaded = b.load(ptr, typ=elem, align=1)
            then_end = b.block
        v = b.phi(elem)
        v.add_incoming(ir.Constant(elem, 0), pre)
        v.add_incoming(loaded, then_end)
        return v

    def contiguous_store(self, val, ptr, elem):
        b = self.b
        if self.mask is None:
            b.store(val, ptr, align=1)
        elif self.variant.predicated:
            self.masked_store(val, ptr, self.mask, elem)
        else:
            self.per_lane_store(val, lambda l: b.gep(ptr, [l], source_etype=elem))

    def masked_store(self, val, ptr, mask, elem):
        """llvm.masked.store of the vector `val` at `ptr` under `mask`. Where the target's
        masked stores are microcoded (the build's config.masked_store), each vector
        register's worth of lanes branches first: nothing when none of its lanes is on, a
        plain store when all are, the masked store only for a mixed register. A partial
        tile's rows leave whole registers off or on (transpose 1x5x64: 4 masked stores per
        column, 3 of them with every lane off)."""
        b = self.b
        n = val.type.count
        self.counts["masked_stores"] += 1
        bits = 32 if isinstance(elem, ir.FloatType) else elem.width
        per = min(n, max(1, self.config.target.vector_bits // bits))
        mixed_whole = self.planted("masked_store_mixed_whole")    # the plant forces the dispatch
        if self.config.masked_store != "dispatch" and not mixed_whole:
            self.intrinsic(f"llvm.masked.store.{self.vsuffix(elem, n)}.p0", ir.VoidType(),
                           [val, ptr, self.i32(1), mask])
            return
        self.counts["masked_store_dispatch"] += 1      # a lowering path the fuzzer steers to (gen/steer.py PATHS)
        for c0 in range(0, n, per):
            c = min(per, n - c0)
            pick = vector_const(ir.VectorType(I32T, c), list(range(c0, c0 + c)))
            v = val if c == n else b.shuffle_vector(val, val, pick)
            m = mask if c == n else b.shuffle_vector(mask, mask, pick)
            p = ptr if c0 == 0 else b.gep(ptr, [self.i64(c0)], source_etype=elem)
            word = b.bitcast(m, ir.IntType(c))
            # planted masked_store_dispatch_first_lane: "none on" read from the register's first lane
            some = ir.Constant(ir.IntType(c), 1 if self.planted("masked_store_dispatch_first_lane") else 0)
            test = b.and_(word, some) if some.constant else word
            with b.if_then(b.icmp_unsigned("!=", test, ir.Constant(ir.IntType(c), 0))):
                every = b.icmp_unsigned("==", word, ir.Constant(ir.IntType(c), (1 << c) - 1))
                if mixed_whole:
                    every = ir.Constant(I1, 1)
                with b.if_else(every) as (whole, mixed):
                    with whole:
                        b.store(v, p, align=1)
                    with mixed:
                        self.intrinsic(f"llvm.masked.store.{self.vsuffix(elem, c)}.p0", ir.VoidType(),
                                       [v, p, self.i32(1), m])

    def gather(self, ptrs, elem):
        self.counts["gathers"] += 1
        vec = self.vty(elem)
        return self.intrinsic(f"llvm.masked.gather.{self.vsuffix(elem)}.v{self.W}p0", vec,
                              [ptrs, self.i32(1), self.mask if self.mask is not None else self.all_true(),
                               self.zero(vec)])

    def scatter(self, val, ptrs, elem):
        if self.mask is not None and not self.variant.predicated:
            self.per_lane_store(val, lambda l: self.b.extract_element(ptrs, l))
            return
        self.counts["scatters"] += 1
        self.intrinsic(f"llvm.masked.scatter.{self.vsuffix(elem)}.v{self.W}p0", ir.VoidType(),
                       [val, ptrs, self.i32(1), self.mask if self.mask is not None else self.all_true()])

    def spread_mask(self, k: int):
        """The mask with each lane repeated k times (a span of k*W elements)."""
        return self.b.shuffle_vector(self.mask, self.zero(self.vty(I1)),
                                     vector_const(ir.VectorType(I32T, k * self.W),
                                                  [j % self.W if self.planted("group_spread_mask") else j // k
                                                   for j in range(k * self.W)]))

    def strided_load(self, buf, length, first, k: int, elem):
        """Lanes at first + k*l: one load of the span, then a shuffle. The span's last
        k - 1 elements are past the last lane's; under a mask, or where they would leave
        the buffer, it is a masked load of the lanes' elements only (no overread). With
        every lane on and the span inside the buffer (a branch every launch but the
        buffer's last packet takes), a plain load: masked loads ran rope's stride-2 reads
        from DRAM at half the speed on docs/native's machine (docs/README.md, 'Measurements behind
        the code'; rope 1024x4098 in docs/native)."""
        b, W = self.b, self.W
        span = ir.VectorType(elem, k * W)
        keep = vector_const(ir.VectorType(I1, k * W), [1 if j % k == 0 else 0 for j in range(k * W)])
        smask = keep if self.mask is None else b.and_(self.spread_mask(k), keep)
        ptr = b.gep(buf, [first], source_etype=elem)
        self.counts["masked_loads"] += 1
        self.counts["shuffles"] += 1

        def masked():
            return self.intrinsic(f"llvm.masked.load.{self.vsuffix(elem, k * W)}.p0", span,
                                  [ptr, self.i32(1), smask, self.zero(span)])

        if self.mask is None:
            whole = self.plain_or_masked(self.span_inside(first, k * W, length),
                                         lambda: b.load(ptr, typ=span, align=1), masked, span)
        else:
            whole = masked()
        return b.shuffle_vector(whole, self.zero(span),
                                vector_const(self.vty(I32T), [k * l for l in range(W)]))

    def per_lane_load(self, ptr_of_lane, elem):
        """predicated=off: one branch per lane, a scalar load where the lane is active."""
        b = self.b

        def lane(l, v):
            pre = b.block
            with b.if_then(self.lane_on(self.mask, l)):
                with_x = b.insert_element(v, b.load(ptr_of_lane(l), typ=elem, align=1), l)
                then_end = b.block
            phi = b.phi(self.vty(elem))
            phi.add_incoming(v, pre)
            phi.add_incoming(with_x, then_end)
            return phi
        self.counts["scalarised_lanes"] += self.W
        return self.lane_loop(lane, self.zero(self.vty(elem)))

    def per_lane_store(self, val, ptr_of_lane):
        b = self.b

        def lane(l, _):
            with b.if_then(self.lane_on(self.mask, l)):
                b.store(b.extract_element(val, l), ptr_of_lane(l), align=1)
        self.counts["scalarised_lanes"] += self.W
        self.lane_loop(lane)

    # ------------------------------------------------------------ private arrays
    def private_addr(self, name: str, idx, idx_node: Expr, key, stmt, what: str):
        """Clamped element addresses: (pointer, True) when the packet's elements are
        side by side (one vector access), else (per-lane pointers, False). The index is
        clamped, so a wrong index can never touch memory outside the array, checked
        or not; checked builds report it first."""
        b = self.b
        ptr, size, dt = self.storage.privates[name]
        elem = mem_type(dt)
        idx64 = self.index64(idx, idx_node.dtype)
        bad = b.icmp_unsigned(">=", idx64, self.vconst64(size))
        if self.checked:
            self.check_lanes(idx64, self.i64(size), ERR_PRIVATE_OOB, stmt)
        idx64 = b.select(bad, self.vconst64(size - 1), idx64)
        t64 = b.sext(self.now.tid, self.vty(I64))
        uniform = self.shape(idx_node).uniform
        if self.facts.private_order == "cohort":        # element x of thread t at x*B + t
            if uniform:
                first = b.mul(self.lane0(idx64), self.i64(self.B))
                first = first if self.planted("private_uniform_t0") else b.add(first, b.sext(self.now.t0, I64))
                self.annotate(key, what, name, Access("contiguous", 1), "cohort")
                return b.gep(ptr, [first], source_etype=elem), True
            flat = b.add(b.mul(idx64, self.vconst64(self.B)),
                         self.splat64(b.sext(self.now.t0, I64)) if self.planted("private_scatter_t0") else t64)
            if what == "pload" and self.planted("private_swap"):
                flat = b.add(b.mul(t64, self.vconst64(size)), idx64)
            acc = Access("gather" if what == "pload" else "scatter")
        else:                                      # thread-major: t*size + x
            flat = b.add(b.mul(t64, self.vconst64(size)), idx64)
            acc = Access("gather" if what == "pload" else "scatter", size if uniform else 0)
        self.annotate(key, what, name, acc, self.facts.private_order)
        if self.W == 1:                            # one thread: its element, one address
            return b.gep(ptr, [flat], source_etype=elem), True
        return self.lane_pointers(ptr, flat, elem), False

    def private_load(self, e: Expr, idx):
        b = self.b
        _, _, dt = self.storage.privates[e.arg]
        elem = mem_type(dt)
        where, side_by_side = self.private_addr(e.arg, idx, e.src[0], e, self.now.cur, "pload")
        if side_by_side:
            v = b.load(where, typ=self.vty(elem), align=1)   # private memory is always ours to read
        else:
            self.counts["gathers"] += 1
            v = self.intrinsic(f"llvm.masked.gather.{self.vsuffix(elem)}.v{self.W}p0", self.vty(elem),
                               [where, self.i32(1), self.all_true(), self.zero(self.vty(elem))])
        return b.trunc(v, self.vty(I1)) if dt is DType.BOOL else v

    def private_store(self, s: PStore, idx, val):
        b = self.b
        _, _, dt = self.storage.privates[s.arr]
        elem = mem_type(dt)
        if dt is DType.BOOL:
            val = b.zext(val, self.vty(I8))
        where, side_by_side = self.private_addr(s.arr, idx, s.index, s, s, "pstore")
        if side_by_side and self.mask is not None:
            self.counts["private_masked_side_by_side"] += 1
        if side_by_side and self.planted("private_store_unmasked") and self.mask is not None:
            self.b.store(val, where, align=1)       # planted: the off lanes' elements overwritten too
        elif side_by_side:
            self.contiguous_store(val, where, elem)
        else:
            self.scatter(val, where, elem)

    # ------------------------------------------------------------ shared arrays
    def shared_index(self, name: str, idx, idx_node: Expr, stmt, key):
        """(array pointer, element type, i64 indices) of an access to shared `name` (`key`:
        the SLOAD node or the statement). Every build but an unsafe one stops at an index
        outside the array: a safe build proves it in the launch's prologue where the index
        is boundable against the array's compile-time size (bounds.py), else checks it here,
        one compare per packet."""
        ptr, size, dt = self.storage.shared_arrays[name]
        idx64 = self.index64(idx, idx_node.dtype)
        if self.planted("shared_per_packet"):      # planted: packet q at q*size (scratch has B copies)
            q = self.b.udiv(self.b.zext(self.now.t0, I64), self.i64(self.W))
            ptr = self.b.gep(ptr, [self.b.mul(q, self.i64(size))], source_etype=mem_type(dt))
        if not self.variant.unsafe and (self.facts.bounds is None or id(key) not in self.facts.bounds.proven):
            self.counts["shared_checks"] += 1
            self.check_lanes(idx64, self.i64(size), ERR_SHARED_OOB, stmt, always=True)
        return ptr, mem_type(dt), idx64

    def shared_load(self, e: Expr, idx):
        b, dt = self.b, e.dtype
        ptr, elem, idx64 = self.shared_index(e.arg, idx, e.src[0], self.now.cur, e)
        self.check_written(e.arg, idx64, e, self.now.cur)        # sanitize builds (sanitize.py)
        self.check_race(e.arg, idx64, "read", e, self.now.cur)
        acc = self.access_class(e.src[0], store=False)
        self.annotate(e, "sload", e.arg, acc, self.effect_mode())
        vec = self.vty(elem)
        scratch = self.now.transposed.get(id(e))
        if scratch is not None:         # transposed before the loop (transposed.py): row loop_k
            v = b.load(b.gep(scratch, [b.mul(self.now.loop_k, self.i64(self.W))], source_etype=elem), typ=vec, align=1)
        elif acc.kind == "uniform":
            x = self.uniform_load(b.gep(ptr, [self.lane0(idx64)], source_etype=elem), elem)
            if dt is DType.BOOL:
                x = b.icmp_unsigned("!=", x, ir.Constant(I8, 0))
            return self.splat(x, dt)
        elif acc.kind == "contiguous" and self.mask is None:
            v = b.load(b.gep(ptr, [self.lane0(idx64)], source_etype=elem), typ=vec, align=1)
        elif acc.kind == "contiguous" and self.variant.predicated:
            # masked off lanes are not read (their indices may lie outside: s[t - 1] for t = 0);
            # shared arrays sit in L1, where a plain load and a select (slots inside the array)
            # measured no faster than the masked load (cumsum 129x768, buffers' loads done the
            # same way: 42-52 us against 39-40), unlike masked stores (blend_store)
            self.counts["masked_loads"] += 1
            v = self.intrinsic(f"llvm.masked.load.{self.vsuffix(elem)}.p0", vec,
                               [b.gep(ptr, [self.lane0(idx64)], source_etype=elem), self.i32(1), self.mask,
                                self.zero(vec)])
        else:
            ptrs = self.lane_pointers(ptr, idx64, elem)
            if self.mask is not None and not self.variant.predicated:
                v = self.per_lane_load(lambda l: b.extract_element(ptrs, l), elem)
            else:
                v = self.gather(ptrs, elem)
        return b.icmp_unsigned("!=", v, self.zero(vec)) if dt is DType.BOOL else v

    def shared_store(self, s: SStore, idx, val):
        b = self.b
        _, _, dt = self.storage.shared_arrays[s.arr]
        ptr, elem, idx64 = self.shared_index(s.arr, idx, s.index, s, s)
        self.check_race(s.arr, idx64, "write", s, s)          # sanitize builds (sanitize.py)
        self.mark_written(s.arr, idx64)
        acc = self.access_class(s.index, store=True)
        self.annotate(s, "sstore", s.arr, acc, self.effect_mode())
        if dt is DType.BOOL:
            val = b.zext(val, self.vty(I8))
        if acc.kind != "contiguous":
            self.scatter(val, self.lane_pointers(ptr, idx64, elem), elem)
            return
        at = b.gep(ptr, [self.lane0(idx64)], source_etype=elem)
        if self.mask is not None and self.variant.predicated:
            self.blend_store(val, at, self.lane0(idx64), self.storage.shared_arrays[s.arr][1], elem)
        else:
            self.contiguous_store(val, at, elem)

    def blend_store(self, val, ptr, first, size: int, elem):
        """A store under a mask to a shared array: where the W slots lie inside the array, read
        them, keep the masked-off lanes' old values and write all W back (a blend; a masked
        store is microcoded on some cores: transpose's ragged tiles spent a third of their
        time in them). Only the block's one worker touches its shared arrays (§5), so no
        other thread can write a slot between the read and the write. Elsewhere, the masked
        store."""
        b, vec = self.b, self.vty(elem)
        if not (isinstance(elem, ir.FloatType) or elem.width == 32):
            self.contiguous_store(val, ptr, elem)
            return
        fvec = self.vty(ir.FloatType())

        def blend():
            # LLVM turns store(select(m, v, load p), p) back into a masked store; an arithmetic
            # fence on the loaded value (no instruction) hides the load from that pattern
            old = b.load(ptr, typ=vec, align=1)
            old = self.intrinsic(f"llvm.arithmetic.fence.v{self.W}f32", fvec,
                                 [old if old.type == fvec else b.bitcast(old, fvec)])
            old = old if vec == fvec else b.bitcast(old, vec)
            keep_new = self.mask if not self.planted("blend_store_inverted") else b.not_(self.mask)
            b.store(b.select(keep_new, val, old), ptr, align=1)
        self.plain_or_masked(self.span_inside(first, self.W, self.i64(size)), blend,
                             lambda: self.contiguous_store(val, ptr, elem))

    # ------------------------------------------------------------ per-thread arrays
    def elem(self, array, index, dt: DType):
        return self.b.gep(array, [index], source_etype=mem_type(dt))

    def load_lanes(self, array, index, dt: DType):
        """W elements of a per-thread array from `index` (bool is a byte in memory)."""
        v = self.b.load(self.elem(array, index, dt), typ=self.vty(mem_type(dt)), align=1)
        return self.b.trunc(v, self.cx.ty(DType.BOOL)) if dt is DType.BOOL else v

    def store_lanes(self, value, array, index, dt: DType):
        if dt is DType.BOOL:
            value = self.b.zext(value, self.vty(mem_type(dt)))
        self.b.store(value, self.elem(array, index, dt), align=1)

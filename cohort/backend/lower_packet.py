"""Packet variants (lanes = 4, 8, 16): a block is a cohort of B/W packets, each a
W-lane SIMD vector of threads, run under masks (after ISPC's foreach).

Per block and phase, packets p = 0.. run one after another. A packet whose W
threads are all active takes the full path (mask statically all-true: plain
vector loads and stores) when `full_packet` is on; the launch's last, partial
packet takes the masked path. A build specialised for launches of whole blocks
(`full_blocks`, chosen when the launch size is known to be a multiple of the
block, as Triton specialises on divisibility) has no masked path at all and
refuses any other launch. Divergent `if` and loops with per-lane trip
counts narrow the mask; a loop's iterations that every active lane runs are
split from the tail iterations, which alone pay for a mask.

A mask is `None` (all lanes, statically) or an `<W x i1>` value. Two masks
are tracked: `mask` (lanes whose effects happen: launch tail and control
flow) and `cmask` (control flow only), which decides when an assignment must
merge with the old value. Lanes beyond the launch never merge: their values
are dead, and leaving them unmerged keeps affine values (j = t + 32k) exact in
every lane, which the memory-access classification relies on.

Every load and store is classified by the shape of its index across lanes
(shapes.py): uniform (one scalar load, broadcast), contiguous (a vector
load/store), strided(2..4) (a masked span load and a shuffle), or gather /
scatter. Each classification is exported as an annotation the interpreter
checks at run time.
"""
from __future__ import annotations

from collections import Counter

from llvmlite import ir

from ..refimpl import mathlib
from ..refimpl.ir import (Assign, DType, Expr, For, If, Kernel, Op, Private, PStore, Store, walk_expr)
from ..refimpl.printer import format_expr
from ..refimpl.semantics import REDUCE_IDENTITY, REDUCE_OP
from .context import (ERR_LOAD_OOB, ERR_PRIVATE_OOB, ERR_STORE_OOB, I1, I32T, I64, I8, PTR, Ctx, mem_type,
                      vector_const)
from .lower_ops import LOWER, bitcast, convert, scalar_type
from . import inject
from .claims import LaneClaim
from .lower_whole import WholeLowering, contains_load, names_in, tree_steps
from .shapes import Access, ShapeAnalysis, choose_interleave, classify


class PacketLowering(WholeLowering):
    def __init__(self, kernel: Kernel, symbol: str, variant, checked: bool = False, full_blocks: bool = False):
        super().__init__(kernel, symbol, fast_math=variant.fast_math, checked=checked,
                         full_blocks=full_blocks and variant.full_packet, unsafe=variant.unsafe)
        if kernel.block < variant.lanes or kernel.block % variant.lanes:
            raise ValueError(f"block {kernel.block} is smaller than lanes {variant.lanes}")
        # W is the width the lowering works in: `interleave` packets of `lanes`
        # side by side, split by LLVM into hardware vectors of `lanes` (the
        # function attributes below keep it from using wider registers)
        self.packet = variant.lanes
        self.interleave = choose_interleave(kernel, variant.lanes, variant.interleave)
        self.W = self.packet * self.interleave
        bits = str(32 * self.packet)
        self.fn_attributes = {"prefer-vector-width": bits, "min-legal-vector-width": bits, "no-builtin-memset": ""}
        self.tuning = {"loop_unrolling": False, "loop_vectorization": False, "slp_vectorization": False}
        self.variant = variant
        self.cx = Ctx(self.module, self.b, self.W, variant.fast_math)
        self.sx = Ctx(self.module, self.b, 1, variant.fast_math)
        self.shapes = ShapeAnalysis(kernel, self.W)
        self.annotations: dict = {}     # id(node or stmt) -> LaneClaim
        self.counts = Counter()
        self.mask = None
        self.cmask = None
        self.tail_path = False

    # ------------------------------------------------------------ vector helpers
    def vty(self, t):
        return ir.VectorType(t, self.W)

    def splat(self, scalar, dt: DType):
        b = self.b
        v = b.insert_element(ir.Constant(self.cx.ty(dt), None), scalar, self.i32(0))
        return b.shuffle_vector(v, ir.Constant(self.cx.ty(dt), None),
                                vector_const(self.vty(I32T), 0))

    def iota(self):
        return vector_const(self.vty(I32T), list(range(self.W)))

    def lane0(self, v):
        return self.b.extract_element(v, self.i32(0))

    def any(self, mask):
        bits = self.b.bitcast(mask, ir.IntType(self.W))
        return self.b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(self.W), 0))

    @staticmethod
    def zero(ty):
        """Masked-off lanes of a masked load read as zero (llvmlite's null constant)."""
        return ir.Constant(ty, None)

    def all_true(self):
        return vector_const(self.vty(I1), 1)

    def and_mask(self, m, c):
        return c if m is None else self.b.and_(m, c)

    def index64(self, idx, dt: DType):
        t = self.vty(I64) if isinstance(idx.type, ir.VectorType) else I64
        return self.b.sext(idx, t) if dt is DType.I32 else self.b.zext(idx, t)

    def annotate(self, key, kind: str, name: str, access, mode: str):
        """Record the lane claim this lowering of `key` rests on (claims.py)."""
        self.annotations[id(key)] = LaneClaim.of(kind, name, access, mode, self.annotations.get(id(key)))

    def intrinsic(self, name: str, ret, args):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, args)

    def _vsuffix(self, elem) -> str:
        return f"v{self.W}{'f32' if isinstance(elem, ir.FloatType) else f'i{elem.width}'}"

    # ------------------------------------------------------------ blocks, packets
    def block_body(self, bid):
        b, W = self.b, self.W
        self.bid = bid
        base = b.mul(bid, self.i32(self.B))
        if self.full_blocks:       # every packet of every block is full: one path, no tail
            npk = self.i32(self.B // W)
        else:
            left = b.sub(self.n32, base)
            active = b.select(b.icmp_signed("<", left, self.i32(self.B)), left, self.i32(self.B))
            npk = b.udiv(b.add(active, self.i32(W - 1)), self.i32(W))
        self.zero_privates()
        for p, (stmts, coll) in enumerate(self.phases):
            self.counted_loop(self.i32(0), npk, lambda q: self.packet_phase(q, base, stmts, coll),
                              f"phase{p}.packet")
            if coll is not None:
                self.collective(coll, npk)

    def packet_phase(self, q, base, stmts, coll):
        b, W = self.b, self.W
        self.t0 = b.mul(q, self.i32(W))
        self.tid = b.add(self.splat(self.t0, DType.I32), self.iota())
        g0 = b.add(base, self.t0)
        self.gid = b.add(self.splat(g0, DType.I32), self.iota())
        self.launch_mask = b.icmp_signed("<=" if inject.active("tail_mask") else "<", self.gid,
                                         self.splat(self.n32, DType.I32))
        if not self.variant.full_packet:
            self.packet_body(stmts, coll, self.launch_mask)
            return
        if self.full_blocks:
            self.packet_body(stmts, coll, None)
            return
        full = b.icmp_signed("<=", b.add(g0, self.i32(W - inject.active("tail_mask"))), self.n32)
        if inject.active("full_packet_always"):
            full = ir.Constant(I1, 1)
        with b.if_else(full) as (full_path, tail_path):
            with full_path:
                self.packet_body(stmts, coll, None)
            with tail_path:
                self.tail_path = True
                self.packet_body(stmts, coll, self.launch_mask)
                self.tail_path = False

    def packet_body(self, stmts, coll, mask):
        b = self.b
        self.mask, self.cmask = mask, None
        used = names_in(stmts, coll)
        for n in sorted(used & self.cross):
            b.store(self.load_cross(n), self.slots[n])
        self.stmts(stmts)
        assigned = {s.name for s in _walk_assigns(stmts)}
        for n in sorted(assigned & self.cross):
            self.store_cross(n, b.load(self.slots[n], typ=self.cx.ty(self.types[n])))
        if coll is not None:
            self.cur = coll
            dt = coll.value.dtype
            v = self.ev(coll.value, {})
            if mask is not None:
                ident = self.cx.const(dt, REDUCE_IDENTITY[(coll.op.value, dt)].item())
                v = b.select(mask, v, ident)
            self.store_lane(v, self.scratch[id(coll)], self.t0, dt)

    # A value living across a collective is kept per thread; when its shape is
    # uniform or affine only lane 0 is stored, and the vector rebuilt from it.
    def load_cross(self, n: str):
        b, dt = self.b, self.types[n]
        shape = self.shapes.vars.get(n)
        if shape is None or shape.stride is None or dt is DType.BOOL:
            return self.load_lane(self.arrays[n], self.t0, dt)
        v0 = b.load(self.elem(self.arrays[n], self.t0, dt), typ=self.sx.ty(dt), align=4)
        v = self.splat(v0, dt)
        if shape.stride:
            v = b.add(v, vector_const(self.cx.ty(dt), [shape.stride * l for l in range(self.W)]))
        return v

    def store_cross(self, n: str, v):
        dt = self.types[n]
        shape = self.shapes.vars.get(n)
        if shape is None or shape.stride is None or dt is DType.BOOL:
            return self.store_lane(v, self.arrays[n], self.t0, dt)
        self.b.store(self.lane0(v), self.elem(self.arrays[n], self.t0, dt), align=4)

    def collective(self, c, npk):
        """Packets that ran are in the scratch array; the others contribute the
        identity. Then the fixed tree: whole packets while s >= W, lanes after."""
        b, W, dt = self.b, self.W, c.value.dtype
        tree = self.scratch[id(c)]
        ident = self.sx.const(dt, REDUCE_IDENTITY[(c.op.value, dt)].item())
        self.counted_loop(b.mul(npk, self.i32(W)), self.i32(self.B),
                          lambda t: b.store(ident, self.elem(tree, t, dt)), "identity")
        op = REDUCE_OP[c.op.value]
        ty = self.cx.ty(dt)
        for s in tree_steps(self.B, W):
            def step(qq, s=s):
                at = b.mul(qq, self.i32(W))
                x = b.load(self.elem(tree, at, dt), typ=ty, align=4)
                y = b.load(self.elem(tree, b.add(at, self.i32(s)), dt), typ=ty, align=4)
                b.store(LOWER[op](self.cx, dt, x, y), self.elem(tree, at, dt), align=4)
            self.counted_loop(self.i32(0), self.i32(s // W), step, f"tree{s}")
        v = b.load(self.elem(tree, self.i32(0), dt), typ=ty, align=4)
        for s in tree_steps(W, 1):
            lanes = [t + s if t + s < W else t for t in range(W)]
            moved = b.shuffle_vector(v, ir.Constant(ty, None), vector_const(self.vty(I32T), lanes))
            self.counts["shuffles"] += 1
            v = LOWER[op](self.cx, dt, v, moved)
        r = self.splat(self.lane0(v), dt)
        arr = self.arrays[c.name]
        self.counted_loop(self.i32(0), self.i32(self.B // W),
                          lambda qq: b.store(r, self.elem(arr, b.mul(qq, self.i32(W)), dt), align=4),
                          "broadcast")

    # ------------------------------------------------------------ statements
    def stmts(self, body):
        body = tuple(body)
        i = 0
        while i < len(body):
            s = body[i]
            self.cur = s
            group = self.interleaved_group(body, i) if isinstance(s, Store) else None
            if group:
                self.interleaved_store(group)
                i += len(group)
                continue
            i += 1
            if isinstance(s, Assign):
                self.assign(s.name, self.ev(s.value, {}))
            elif isinstance(s, Store):
                memo = {}
                self.store(s, self.ev(s.index, memo), self.ev(s.value, memo))
            elif isinstance(s, PStore):
                memo = {}
                self.private_store(s, self.ev(s.index, memo), self.ev(s.value, memo))
            elif isinstance(s, If):
                self.if_(s)
            elif isinstance(s, For):
                self.loop(s)
            elif isinstance(s, Private):
                pass
            else:
                raise TypeError(f"cannot lower {type(s).__name__} here")

    def interleaved_group(self, body, i):
        """k adjacent stores to buf[k*t + c], buf[k*t + c + 1], ... (k = 2..4, rope's
        y[2i], y[2i+1]): one interleaving shuffle and one vector store instead of
        k scatters. The later stores must not read the buffer, so storing them
        together changes nothing."""
        s = body[i]
        k = self.shapes.shape(s.index).stride
        if k not in (2, 3, 4) or i + k > len(body) or (self.mask is not None and not self.variant.predicated):
            return None
        base = format_expr(s.index)
        group = [s]
        for j in range(1, k):
            t = body[i + j]
            if not (isinstance(t, Store) and t.buf == s.buf and _offset(t.index, base) == j):
                return None
            if any(n.op is Op.LOAD and n.arg == s.buf for e in (t.index, t.value) for n in walk_expr(e)):
                return None
            group.append(t)
        return group

    def interleaved_store(self, group):
        b, W = self.b, self.W
        k = len(group)
        first = group[0]
        dt = self.k.param(first.buf).dtype
        elem = mem_type(dt)
        vals, idx0 = [], None
        for j, s in enumerate(group):
            self.cur = s
            memo = {}
            idx = self.index64(self.ev(s.index, memo), s.index.dtype)
            self.check_lanes(idx, self.lens[s.buf], ERR_STORE_OOB, s, key=s)
            v = self.ev(s.value, memo)
            vals.append(b.zext(v, self.vty(I8)) if dt is DType.BOOL else v)
            mode = "unmasked" if self.mask is None else "masked"
            self.annotate(s, "store", s.buf, Access("strided", k), mode)
            idx0 = idx0 if idx0 is not None else self.lane0(idx)
        wide = _concat(b, vals)
        order = [(j % k) * W + j // k for j in range(k * W)]
        span = ir.VectorType(elem, k * W)
        inter = b.shuffle_vector(wide, ir.Constant(wide.type, None), vector_const(ir.VectorType(I32T, k * W), order))
        self.counts["shuffles"] += 1
        self.counts["interleaved_stores"] += 1
        ptr = b.gep(self.bufs[first.buf], [idx0], source_etype=elem)
        if self.mask is None:
            b.store(inter, ptr, align=1)
            return
        spread = b.shuffle_vector(self.mask, ir.Constant(self.vty(I1), None),
                                  vector_const(ir.VectorType(I32T, k * W), [j // k for j in range(k * W)]))
        self.counts["masked_stores"] += 1
        suffix = f"v{k * W}{'f32' if isinstance(elem, ir.FloatType) else f'i{elem.width}'}"
        self.intrinsic(f"llvm.masked.store.{suffix}.p0", ir.VoidType(), [inter, ptr, self.i32(1), spread])

    def assign(self, name: str, v):
        if self.cmask is not None:
            old = self.b.load(self.slots[name], typ=v.type)
            v = self.b.select(self.cmask, v, old)
        self.b.store(v, self.slots[name])

    def if_(self, s: If):
        b = self.b
        c = self.ev(s.cond, {})
        if self.shapes.shape(s.cond).uniform:
            self.annotate(s, "if", "", Access("uniform"), "branch")
            with b.if_else(self.lane0(c)) as (then, otherwise):
                with then:
                    self.stmts(s.then)
                with otherwise:
                    self.stmts(s.orelse)
            return
        self.annotate(s, "if", "", None, "masked")
        saved = self.mask, self.cmask
        for body, cond in ((s.then, c), (s.orelse, b.not_(c))):
            if not body:
                continue
            m = self.and_mask(saved[0], cond)
            with b.if_then(self.any(m)):
                self.mask, self.cmask = m, self.and_mask(saved[1], cond)
                self.stmts(body)
            self.mask, self.cmask = saved

    def loop(self, s: For):
        """Per-lane trip counts; the iterations every active lane runs are split
        from the tail, which runs under a mask (DESIGN §5, full_packet).

        Two shapes get scalar trip arithmetic (claims annotated on the loop and
        checked by the interpreter): uniform bounds (one trip count), and the
        GPU idiom range(t + c, n, step) - an affine start and a uniform stop,
        where the lanes still running at iteration k are a prefix."""
        b, W = self.b, self.W
        memo = {}
        start_v, stop_v = self.ev(s.start, memo), self.ev(s.stop, memo)
        step = int(s.step.arg)
        sh_start, sh_stop = self.shapes.shape(s.start), self.shapes.shape(s.stop)
        if sh_start.uniform and sh_stop.uniform:
            self.annotate(s, "for", "", Access("uniform"), "branch")
            self.annotate(s.stop, "for-stop", "", Access("uniform"), "branch")
            total = self.scalar_trips(b.sext(self.lane0(start_v), I64), b.sext(self.lane0(stop_v), I64), step)
            self.count_loop(self.i64(0), total, lambda k: self.loop_body(s, start_v, step, k, None))
            return
        stride = sh_start.stride
        if (self.mask is None and sh_stop.uniform and stride is not None and stride > 0 and step > 0
                and self.variant.full_packet):
            self.annotate(s, "for", "", Access("strided", stride), "prefix")
            self.annotate(s.stop, "for-stop", "", Access("uniform"), "prefix")
            first = b.sext(self.lane0(start_v), I64)
            stop = b.sext(self.lane0(stop_v), I64)
            kmax = self.scalar_trips(first, stop, step)
            kmin = self.scalar_trips(b.add(first, self.i64(stride * (W - 1))), stop, step)
            self.count_loop(self.i64(0), kmin, lambda k: self.loop_body(s, start_v, step, k, None))

            def prefix(k):
                # lane l runs iteration k iff first + stride*l + k*step < stop
                room = b.sub(b.sub(stop, first), b.mul(k, self.i64(step)))
                lanes = b.sdiv(b.add(room, self.i64(stride - 1)), self.i64(stride))
                lanes = b.select(b.icmp_signed("<", lanes, self.i64(0)), self.i64(0), lanes)
                lanes = b.select(b.icmp_signed(">", lanes, self.i64(W)), self.i64(W), lanes)
                return b.icmp_signed("<", self.iota(), self.splat(b.trunc(lanes, I32T), DType.I32))
            self.count_loop(kmin, kmax, lambda k: self.loop_body(s, start_v, step, k, prefix(k)))
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
        running = lambda k: b.icmp_signed("<", self.splat64(k), trips)
        if self.variant.full_packet and not self.tail_path:
            # (the launch's one partial packet runs its loops masked throughout: less code)
            # lanes beyond the launch never run: they must not shorten the full part
            full_lanes = trips if self.mask is None else b.select(self.mask, trips, self.vconst64(2 ** 62))
            kmin = self.intrinsic(f"llvm.vector.reduce.smin.v{W}i64", I64, [full_lanes])
            kmin = b.select(b.icmp_signed("<", kmin, kmax), kmin, kmax)
            self.count_loop(self.i64(0), kmin, lambda k: self.loop_body(s, start_v, step, k, None))
            first = kmin
        else:
            first = self.i64(0)
        self.count_loop(first, kmax, lambda k: self.loop_body(s, start_v, step, k, running(k)))

    def scalar_trips(self, start, stop, step: int):
        """max(0, ceil((stop - start) / step)) in 64 bits: no wrap near INT_MAX."""
        b = self.b
        span = b.sub(stop, start) if step > 0 else b.sub(start, stop)
        a = abs(step)
        t = b.sdiv(b.add(span, self.i64(a - 1)), self.i64(a))
        return b.select(b.icmp_signed(">", t, self.i64(0)), t, self.i64(0))

    def vconst64(self, v):
        return vector_const(self.vty(I64), v)

    def count_loop(self, lo, hi, body):
        b = self.b
        pre = b.block
        head = self.fn.append_basic_block("k.head")
        loop = self.fn.append_basic_block("k.body")
        done = self.fn.append_basic_block("k.done")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64, name="k")
        k.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", k, hi), loop, done)
        b.position_at_end(loop)
        body(k)
        k.add_incoming(b.add(k, self.i64(1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def loop_body(self, s: For, start_v, step: int, k, running):
        b = self.b
        k32 = b.trunc(k, I32T)
        j = b.add(start_v, b.mul(self.splat(k32, DType.I32), self.cx.const(DType.I32, step)))
        b.store(j, self.slots[s.var])
        saved = self.mask, self.cmask
        if running is not None:
            self.mask = self.and_mask(saved[0], running)
            self.cmask = self.and_mask(saved[1], running)
        self.stmts(s.body)
        self.mask, self.cmask = saved

    # ------------------------------------------------------------ checked builds
    def check_lanes(self, idx64, length, kind: int, stmt, key=None):
        """Report the first active lane whose index is out of bounds. `key`: the buffer
        access (checked unless proven, bounds.py); None: a private array (checked builds)."""
        if not (self.checked if key is None else self.needs_check(key)):
            return
        if key is not None:
            self.counts["bounds_checks"] += 1
        b = self.b
        bad = b.icmp_unsigned(">=", idx64, self.splat64(length))
        if self.mask is not None:
            bad = b.and_(bad, self.mask)
        bits = b.bitcast(bad, ir.IntType(self.W))
        err_bb = self.fn.append_basic_block("oob")
        ok_bb = self.fn.append_basic_block("inbounds")
        b.cbranch(b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(self.W), 0)), err_bb, ok_bb)
        b.position_at_end(err_bb)
        lane = self.intrinsic(f"llvm.cttz.i{self.W}", ir.IntType(self.W), [bits, ir.Constant(I1, 0)])
        lane32 = b.zext(lane, I32T) if self.W < 32 else lane
        index = b.extract_element(idx64, lane32)
        thread = b.sext(b.extract_element(self.gid, lane32), I64)
        self.record_error(kind, stmt, index, thread)
        b.ret_void()
        b.position_at_end(ok_bb)

    def splat64(self, scalar):
        b = self.b
        v = b.insert_element(ir.Constant(self.vty(I64), None), scalar, self.i32(0))
        return b.shuffle_vector(v, ir.Constant(self.vty(I64), None), vector_const(self.vty(I32T), 0))

    # ------------------------------------------------------------ buffer memory
    def load(self, e: Expr, idx):
        b, W, dt = self.b, self.W, e.dtype
        acc = classify(self.shapes.shape(e.src[0]), store=False)
        mode = "unmasked" if self.mask is None else ("masked" if self.variant.predicated else "per-lane")
        self.annotate(e, "load", e.arg, acc, mode)
        elem = mem_type(dt)
        buf = self.bufs[e.arg]
        idx64 = self.index64(idx, e.src[0].dtype)
        self.check_lanes(idx64, self.lens[e.arg], ERR_LOAD_OOB, self.cur, key=e)
        if acc.kind == "uniform":
            ptr = b.gep(buf, [self.lane0(idx64)], source_etype=elem)
            if self.mask is None:
                v = b.load(ptr, typ=elem, align=1)
            else:
                pre = b.block
                with b.if_then(self.any(self.mask)) as _:
                    loaded = b.load(ptr, typ=elem, align=1)
                    then_end = b.block
                v = b.phi(elem)
                v.add_incoming(ir.Constant(elem, 0), pre)
                v.add_incoming(loaded, then_end)
            if dt is DType.BOOL:  # any nonzero byte is True, as in NumPy
                v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
            return self.splat(v, dt)
        vec = self.vty(elem)
        if acc.kind == "contiguous":
            ptr = b.gep(buf, [self.lane0(idx64)], source_etype=elem)
            if self.mask is None:
                v = b.load(ptr, typ=vec, align=1)
            elif self.variant.predicated:
                self.counts["masked_loads"] += 1
                v = self.intrinsic(f"llvm.masked.load.{self._vsuffix(elem)}.p0", vec,
                                   [ptr, self.i32(1), self.mask, self.zero(vec)])
            else:
                v = self.per_lane_load(lambda l: b.gep(buf, [b.extract_element(idx64, self.i32(l))],
                                                       source_etype=elem), elem)
        elif acc.kind == "strided" and (self.mask is None or self.variant.predicated):
            v = self.strided_load(buf, self.lane0(idx64), acc.stride, elem)
        else:
            ptrs = b.gep(buf, [idx64], source_etype=elem)
            ptrs.type = self.vty(PTR)
            if self.mask is not None and not self.variant.predicated:
                v = self.per_lane_load(lambda l: b.extract_element(ptrs, self.i32(l)), elem)
            else:
                self.counts["gathers"] += 1
                v = self.intrinsic(f"llvm.masked.gather.{self._vsuffix(elem)}.v{W}p0", vec,
                                   [ptrs, self.i32(1), self.mask if self.mask is not None else self.all_true(),
                                    self.zero(vec)])
        return b.icmp_unsigned("!=", v, self.zero(vec)) if dt is DType.BOOL else v

    def strided_load(self, buf, first, k: int, elem):
        """Lanes at first + k*l: one masked load of the span, then a shuffle. Only
        the elements the lanes need are read, so the span never overreads."""
        b, W = self.b, self.W
        span = self.vty(elem).__class__(elem, k * W)
        keep = [1 if j % k == 0 else 0 for j in range(k * W)]
        if self.mask is None:
            smask = vector_const(ir.VectorType(I1, k * W), keep)
        else:
            spread = b.shuffle_vector(self.mask, ir.Constant(self.vty(I1), None),
                                      vector_const(ir.VectorType(I32T, k * W), [j // k for j in range(k * W)]))
            smask = b.and_(spread, vector_const(ir.VectorType(I1, k * W), keep))
        ptr = b.gep(buf, [first], source_etype=elem)
        suffix = f"v{k * W}{'f32' if isinstance(elem, ir.FloatType) else f'i{elem.width}'}"
        self.counts["masked_loads"] += 1
        self.counts["shuffles"] += 1
        whole = self.intrinsic(f"llvm.masked.load.{suffix}.p0", span, [ptr, self.i32(1), smask,
                                                                        self.zero(span)])
        return b.shuffle_vector(whole, ir.Constant(span, None),
                                vector_const(self.vty(I32T), [k * l for l in range(W)]))

    def per_lane_load(self, ptr_of_lane, elem):
        """predicated=off: one branch per lane, a scalar load where the lane is active."""
        b = self.b
        v = self.zero(self.vty(elem))
        for l in range(self.W):
            self.counts["scalarised_lanes"] += 1
            pre = b.block
            with b.if_then(b.extract_element(self.mask, self.i32(l))):
                x = b.load(ptr_of_lane(l), typ=elem, align=1)
                with_x = b.insert_element(v, x, self.i32(l))
                then_end = b.block
            phi = b.phi(self.vty(elem))
            phi.add_incoming(v, pre)
            phi.add_incoming(with_x, then_end)
            v = phi
        return v

    def per_lane_store(self, val, ptr_of_lane):
        b = self.b
        for l in range(self.W):
            self.counts["scalarised_lanes"] += 1
            with b.if_then(b.extract_element(self.mask, self.i32(l))):
                b.store(b.extract_element(val, self.i32(l)), ptr_of_lane(l), align=1)

    def store(self, s: Store, idx, val):
        b, W = self.b, self.W
        dt = self.k.param(s.buf).dtype
        acc = classify(self.shapes.shape(s.index), store=True)
        mode = "unmasked" if self.mask is None else ("masked" if self.variant.predicated else "per-lane")
        self.annotate(s, "store", s.buf, acc, mode)
        elem = mem_type(dt)
        if dt is DType.BOOL:
            val = b.zext(val, self.vty(I8))
        buf = self.bufs[s.buf]
        idx64 = self.index64(idx, s.index.dtype)
        self.check_lanes(idx64, self.lens[s.buf], ERR_STORE_OOB, s, key=s)
        if acc.kind == "contiguous":
            ptr = b.gep(buf, [self.lane0(idx64)], source_etype=elem)
            if self.mask is None:
                b.store(val, ptr, align=1)
            elif self.variant.predicated:
                self.counts["masked_stores"] += 1
                self.intrinsic(f"llvm.masked.store.{self._vsuffix(elem)}.p0", ir.VoidType(),
                               [val, ptr, self.i32(1), self.mask])
            else:
                self.per_lane_store(val, lambda l: b.gep(ptr, [self.i32(l)], source_etype=elem))
            return
        ptrs = b.gep(buf, [idx64], source_etype=elem)
        ptrs.type = self.vty(PTR)
        if self.mask is not None and not self.variant.predicated:
            self.per_lane_store(val, lambda l: b.extract_element(ptrs, self.i32(l)))
            return
        self.counts["scatters"] += 1
        self.intrinsic(f"llvm.masked.scatter.{self._vsuffix(elem)}.v{W}p0", ir.VoidType(),
                       [val, ptrs, self.i32(1), self.mask if self.mask is not None else self.all_true()])

    # ------------------------------------------------------------ private memory
    def private_addr(self, name: str, idx, idx_node: Expr, key, stmt, what: str):
        """Clamped per-lane element addresses; (pointer, contiguous?) or (pointers, False)."""
        b, W = self.b, self.W
        ptr, size, dt = self.privates[name]
        elem = mem_type(dt)
        idx64 = self.index64(idx, idx_node.dtype)
        bad = b.icmp_unsigned(">=", idx64, self.vconst64(size))
        if self.checked:
            self.check_lanes(idx64, self.i64(size), ERR_PRIVATE_OOB, stmt)
        idx64 = b.select(bad, self.vconst64(size - 1), idx64)
        t64 = b.sext(self.tid, self.vty(I64))
        uniform = self.shapes.shape(idx_node).uniform
        if self.variant.private == "cohort":      # element x of thread t at x*B + t
            if uniform:
                acc = Access("contiguous", 1)
                first = b.add(b.mul(self.lane0(idx64), self.i64(self.B)), b.sext(self.t0, I64))
                self.annotate(key, what, name, acc, "cohort")
                return b.gep(ptr, [first], source_etype=elem), True
            flat = b.add(b.mul(idx64, self.vconst64(self.B)), t64)
            if what == "pload" and inject.active("private_swap"):
                flat = b.add(b.mul(t64, self.vconst64(size)), idx64)
            acc = Access("gather" if what == "pload" else "scatter")
        else:                                      # thread-major: t*size + x
            flat = b.add(b.mul(t64, self.vconst64(size)), idx64)
            acc = Access("gather" if what == "pload" else "scatter", size if uniform else 0)
        self.annotate(key, what, name, acc, self.variant.private)
        ptrs = b.gep(ptr, [flat], source_etype=elem)
        ptrs.type = self.vty(PTR)
        return ptrs, False

    def private_load(self, e: Expr, idx):
        b, W = self.b, self.W
        _, _, dt = self.privates[e.arg]
        elem = mem_type(dt)
        where, contiguous = self.private_addr(e.arg, idx, e.src[0], e, self.cur, "pload")
        if contiguous:
            v = b.load(where, typ=self.vty(elem), align=1)   # private memory is always ours to read
        else:
            self.counts["gathers"] += 1
            v = self.intrinsic(f"llvm.masked.gather.{self._vsuffix(elem)}.v{W}p0", self.vty(elem),
                               [where, self.i32(1), self.all_true(), self.zero(self.vty(elem))])
        return b.trunc(v, self.vty(I1)) if dt is DType.BOOL else v

    def private_store(self, s: PStore, idx, val):
        b, W = self.b, self.W
        _, _, dt = self.privates[s.arr]
        elem = mem_type(dt)
        if dt is DType.BOOL:
            val = b.zext(val, self.vty(I8))
        where, contiguous = self.private_addr(s.arr, idx, s.index, s, s, "pstore")
        if contiguous:
            if self.mask is None:
                b.store(val, where, align=1)
            elif self.variant.predicated:
                self.counts["masked_stores"] += 1
                self.intrinsic(f"llvm.masked.store.{self._vsuffix(elem)}.p0", ir.VoidType(),
                               [val, where, self.i32(1), self.mask])
            else:
                self.per_lane_store(val, lambda l: b.gep(where, [self.i32(l)], source_etype=elem))
            return
        if self.mask is not None and not self.variant.predicated:
            self.per_lane_store(val, lambda l: b.extract_element(where, self.i32(l)))
            return
        self.counts["scatters"] += 1
        self.intrinsic(f"llvm.masked.scatter.{self._vsuffix(elem)}.v{W}p0", ir.VoidType(),
                       [val, where, self.i32(1), self.mask if self.mask is not None else self.all_true()])

    # ------------------------------------------------------------ expressions
    def _ev(self, e: Expr, memo: dict):
        b, op = self.b, e.op
        if op is Op.CONST:
            return self.cx.const(e.dtype, e.arg)
        if op is Op.VAR:
            return b.load(self.slots[e.arg], typ=self.cx.ty(e.dtype))
        if op is Op.PARAM:
            return self.splat(self.scalars[e.arg], e.dtype)
        if op is Op.ARG:
            return memo[("arg", e.arg)]
        if op is Op.THREAD_ID:
            return self.tid
        if op is Op.BLOCK_ID:
            return self.splat(self.bid, DType.I32)
        if op is Op.GLOBAL_ID:
            return self.gid
        if op is Op.BLOCK_SIZE:
            return self.cx.const(DType.I32, self.B)
        if op is Op.NUM_THREADS:
            return self.splat(self.n32, DType.I32)
        if op is Op.BUFLEN:
            return self.splat(b.trunc(self.lens[e.arg], I32T), DType.I32)
        if op is Op.SELECT:
            return self.select(e, memo)
        if op is Op.LOAD:
            return self.load(e, self.ev(e.src[0], memo))
        if op is Op.PLOAD:
            return self.private_load(e, self.ev(e.src[0], memo))
        if op is Op.CAST:
            return convert(self.cx, self.ev(e.src[0], memo), e.src[0].dtype, e.dtype)
        if op is Op.BITCAST:
            return bitcast(self.cx, self.ev(e.src[0], memo), e.src[0].dtype, e.dtype)
        if op is Op.MATH:
            x = self.ev(e.src[0], memo)
            return self.ev(mathlib.template(e.arg), {("arg", 0): x})
        srcs = [self.ev(s, memo) for s in e.src]
        return LOWER[op](self.cx, e.src[0].dtype, *srcs)

    def select(self, e: Expr, memo: dict):
        """Lazy like the interpreter: a branch that loads runs only under its lanes' mask."""
        b = self.b
        c = self.ev(e.src[0], memo)
        lazy = self.checked   # a checked build must not speculate a private index either
        if not (contains_load(e.src[1], self.spec_cache, lazy) or contains_load(e.src[2], self.spec_cache, lazy)):
            return b.select(c, self.ev(e.src[1], memo), self.ev(e.src[2], memo))
        saved = self.mask
        self.mask = self.and_mask(saved, c)
        a = self.ev(e.src[1], dict(memo))
        self.mask = self.and_mask(saved, b.not_(c))
        v = self.ev(e.src[2], dict(memo))
        self.mask = saved
        return b.select(c, a, v)


def _offset(e: Expr, base_text: str):
    """c when e is `<base> + c` (as printed), else None."""
    if e.op is Op.ADD and e.src[1].op is Op.CONST and format_expr(e.src[0]) == base_text:
        return e.src[1].arg
    return None


def _concat(b, vals):
    """One vector holding every value of `vals` (equal types) end to end."""
    while len(vals) > 1:
        nxt = []
        for a, c in zip(vals[0::2], vals[1::2]):
            n = a.type.count
            nxt.append(b.shuffle_vector(a, c, vector_const(ir.VectorType(I32T, 2 * n), list(range(2 * n)))))
        if len(vals) % 2:
            last = vals[-1]
            n = last.type.count
            pad = b.shuffle_vector(last, ir.Constant(last.type, None),
                                   vector_const(ir.VectorType(I32T, 2 * n), list(range(n)) + [n] * n))
            nxt.append(pad)
        vals = nxt
    return vals[0]


def _walk_assigns(stmts):
    from ..refimpl.ir import walk_stmts
    return (s for s in walk_stmts(stmts) if isinstance(s, Assign))

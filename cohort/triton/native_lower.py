"""A tile program in LLVM IR: one native function per program instance (DESIGN §10, native mode).

Every tile variable is a fixed-size array (row-major, its element type's memory carrier) in
the program's frame; a statement is one loop nest over its result's shape, its expression
fused element by element (`ev`: each node's element at a multi-index, broadcasts and
reshapes as index maps), innermost axis contiguous, so LLVM's vectoriser makes packets of
the target's width. Nodes that need the whole tile — reductions, scans, `dot`, and integer
divisions and shifts whose divisor/amount can fail — are computed first, into arrays of
their own, in the reference's evaluation order (post-order), so a failure is the one the
reference reports. Reductions keep interp.tree (pairs v[i] ⊕ v[i+s], s = P/2 .. 1), scans
interp.hillis_steele, `dot` the fma chain over k ascending (register-blocked: a 4-row
block of C in vector registers across the whole k loop). Memory: every active element is
checked against its tensor's storage before a store writes anything (as interp._addresses);
a load reads only active in-bounds elements. A failure writes (site, value) to the
program's error record and returns 1; native.py turns the site into the reference's message.

ABI of the entry `void entry(int64_t *args)` (the backend pool's: [1] first program,
[2] end, [3] error record; then from slot 7): grid sizes (3), per pointer argument
(data address, storage elements, first element), per scalar argument (its bits).
"""
from __future__ import annotations

import contextlib
import math

from llvmlite import ir

from ..backend import inject
from ..backend import target as btarget
from ..backend.context import Ctx
from ..backend.lower_ops import LOWER
from ..refimpl.ir import DType, Op
from . import tir
from .native_ops import F32T, F64T, I64T, NativeUnsupported, Ops, const, from_mem, kc, mem_type, reg_type, to_mem
from .tir import Bin, Dt, K, Node, Ptr, Red

I1T, I8T, I16T, I32T = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32)
PTR = ir.PointerType()
SLOT_GRID = 7
FRAME_LIMIT = 2 << 20          # bytes of tile arrays per program (they live on the thread's stack)
_MATERIAL = (K.REDUCE, K.ARGREDUCE, K.SCAN, K.DOT, K.COMBINE)


def i64(v) -> ir.Constant:
    return ir.Constant(I64T, v)


def _numel(shape) -> int:
    return int(math.prod(shape)) if shape else 1


def like_i1(n: int) -> ir.Type:
    return ir.VectorType(I1T, n) if n > 1 else I1T


def _const_of(n: Node):
    while n.op is K.BROADCAST:
        n = n.srcs[0]
    return n.arg if n.op is K.CONST else None


def _inlinable(body) -> dict:
    """{variable: its value} for the variables a use may recompute instead of reading an array:
    assigned by one Let only, its value cheap (no math, nothing whole-tile, at most 24 nodes),
    every variable it reads a loop variable, another such variable, or assigned once earlier
    in program order (so no use can see a later assignment of what it reads)."""
    order, lets, once = {}, {}, {}
    loop_vars = set()

    def walk(stmts):
        for st in stmts:
            pos = len(order)
            order[id(st)] = pos
            if isinstance(st, tir.Let):
                lets.setdefault(st.var, []).append(st)
            elif isinstance(st, (tir.Load, tir.Atomic)):
                once.setdefault(st.var, []).append(pos)
            elif isinstance(st, tir.For):
                loop_vars.add(st.var)
            for f in ("cond_body", "body", "then", "orelse"):
                if hasattr(st, f):
                    walk(getattr(st, f))
    walk(body)
    out: dict = {}
    for var, sts in lets.items():
        if len(sts) != 1 or var in once or var in loop_vars:
            continue
        st = sts[0]
        nodes, deps, ok = {}, set(), True
        stack = [st.value]
        while stack and ok:
            n = stack.pop()
            if id(n) in nodes:
                continue
            nodes[id(n)] = n
            if n.op is K.VAR:
                deps.add(n.arg)
            elif n.op in _MATERIAL or n.op is K.MATH or (n.op is K.BINARY and n.arg in (Bin.IDIV, Bin.MOD, Bin.SHL,
                                                                                        Bin.SHR)):
                ok = False
            stack.extend(n.srcs)
        if not ok or len(nodes) > 24:
            continue
        pos = order[id(st)]
        for d in deps:
            if d in loop_vars or d in out:
                continue
            if d in once and len(once[d]) == 1 and d not in lets and once[d][0] < pos:
                continue
            if d in lets and len(lets[d]) == 1 and d not in once and order[id(lets[d][0])] < pos:
                continue
            ok = False
        if ok:
            out[var] = st.value
    return out


def abi(prog: tir.Program) -> tuple:
    """(buffers, scalars): the pointer and scalar arguments in slot order."""
    bufs = [(n, t) for n, t in prog.params if t.is_ptr]
    scal = [(n, t) for n, t in prog.params if not t.is_ptr]
    return bufs, scal


class Site:
    """Where a program can fail: what, the kernel line, and what the message needs."""

    def __init__(self, kind: str, line: int, info=None):
        self.kind, self.line, self.info = kind, line, info


class Lowering:
    def __init__(self, prog: tir.Program, symbol: str):
        self.p, self.symbol = prog, symbol
        self.m = ir.Module(name=prog.name)
        self.sites: list = []
        self.frame_bytes = 0
        self.line = 0
        self.has_atomics = False
        self.lanes = max(1, btarget.current().vector_bits // 32)
        self.ramps = {}
        self.region_env = None
        self.let_target = None
        bufs, scal = abi(prog)
        self.buf_index = {n: i for i, (n, _) in enumerate(bufs)}
        self.buf_elem = {n: t.elem.elem for n, t in bufs}
        self.scalar_types = dict(scal)
        self.slots, k = {}, SLOT_GRID + 3
        for n, _ in bufs:
            self.slots[n] = (k, k + 1, k + 2)
            k += 3
        for n, _ in scal:
            self.slots[n] = (k,)
            k += 1
        self.nslots = k
        self.var_base = {}
        self._bases(prog.body)
        self.inline = _inlinable(prog.body)

    # ------------------------------------------------------------ pointer bases
    def base_of(self, n: Node) -> str:
        if n.op is K.PARAM:
            return n.arg
        if n.op is K.VAR:
            return self.var_base[n.arg]
        if n.op is K.JOIN:
            a, b = (self.base_of(s) for s in n.srcs)
            if a != b:
                raise NativeUnsupported("tl.join of pointers into two arguments")
            return a
        return self.base_of(n.srcs[0])

    def _bases(self, stmts):
        for st in stmts:
            if isinstance(st, tir.Let) and st.value.type.is_ptr:
                base = self.base_of(st.value)
                if self.var_base.setdefault(st.var, base) != base:
                    raise NativeUnsupported(f"line {st.line}: pointer variable `{st.var}` points into two "
                                            f"arguments (`{self.var_base[st.var]}`, `{base}`)")
            elif isinstance(st, tir.Atomic):
                self.has_atomics = True
            elif isinstance(st, tir.Print):
                raise NativeUnsupported(f"line {st.line}: tl.device_print")
            for f in ("body", "then", "orelse", "cond_body"):
                if hasattr(st, f):
                    self._bases(getattr(st, f))

    # ------------------------------------------------------------ module
    def build(self) -> str:
        body = self._body()
        self._entry(body)
        if self.frame_bytes > FRAME_LIMIT:
            raise NativeUnsupported(f"the program's tiles need {self.frame_bytes} bytes; native mode holds up "
                                    f"to {FRAME_LIMIT} per program")
        return str(self.m)

    def _body(self):
        fnty = ir.FunctionType(I32T, [PTR, I64T, PTR])
        fn = ir.Function(self.m, fnty, f"{self.symbol}_program")
        fn.linkage = "internal"
        self.fn = fn
        args, pid, self.err = fn.args
        self.allocas = fn.append_basic_block("frame")
        start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        self.ops = Ops(self.m, self.b)
        b = self.b
        self.ret_ok = fn.append_basic_block("done")

        def slot(k):
            return b.load(b.gep(args, [i64(k)], source_etype=I64T), typ=I64T)
        g = [slot(SLOT_GRID + a) for a in range(3)]
        self.grid = [b.trunc(x, I32T) for x in g]
        x = b.urem(pid, g[0])
        yz = b.udiv(pid, g[0])
        self.pid = [b.trunc(v, I32T) for v in (x, b.urem(yz, g[1]), b.udiv(yz, g[1]))]
        self.bufs = {}
        for n, (kd, ks, kb) in ((n, s) for n, s in self.slots.items() if len(s) == 3):
            self.bufs[n] = (b.inttoptr(slot(kd), PTR), slot(ks), slot(kb))
        self.scalars = {}
        for n, t in self.scalar_types.items():
            v = slot(self.slots[n][0])
            ty = reg_type(t.elem)
            iv = b.trunc(v, ir.IntType(t.elem.bits)) if t.elem.bits < 64 else v
            self.scalars[n] = iv if ty == iv.type else (b.bitcast(iv, ty) if t.elem.bits > 1 else b.trunc(v, I1T))
        self.arrays = {name: self.alloca(t) for name, t in self.p.vars.items()}
        self.block(self.p.body)
        if not b.block.is_terminated:
            b.branch(self.ret_ok)
        b.position_at_end(self.ret_ok)
        b.ret(ir.Constant(I32T, 0))
        b.position_at_end(self.allocas)
        b.branch(start)
        return fn

    def _entry(self, body):
        fn = ir.Function(self.m, ir.FunctionType(ir.VoidType(), [PTR]), self.symbol)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = fn.args[0]

        def slot(k):
            return b.load(b.gep(args, [i64(k)], source_etype=I64T), typ=I64T)
        begin, end = slot(1), slot(2)
        shared = b.inttoptr(slot(3), PTR)
        local = b.alloca(ir.ArrayType(I64T, 2))
        head, run, fail, out = (fn.append_basic_block(x) for x in ("head", "run", "fail", "out"))
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        pid = b.phi(I64T)
        pid.add_incoming(begin, pre)
        b.cbranch(b.icmp_signed("<", pid, end), run, out)
        b.position_at_end(run)
        st = b.call(body, [args, pid, local])
        nxt = b.add(pid, i64(1))
        pid.add_incoming(nxt, run)
        b.cbranch(b.icmp_signed("!=", st, ir.Constant(I32T, 0)), fail, head)
        b.position_at_end(fail)
        # the failing program with the lowest id is reported (the reference stops at it): a lock word
        lock = b.gep(shared, [i64(0)], source_etype=I64T)
        spin, got = fn.append_basic_block("spin"), fn.append_basic_block("got")
        b.branch(spin)
        b.position_at_end(spin)
        cx = b.cmpxchg(lock, i64(0), i64(1), "acquire", "monotonic")
        b.cbranch(b.extract_value(cx, 1), got, spin)
        b.position_at_end(got)
        first = b.gep(shared, [i64(1)], source_etype=I64T)
        lower = b.icmp_signed("<", pid, b.load(first, typ=I64T))
        with b.if_then(lower):
            b.store(pid, first)
            for k in range(2):
                v = b.load(b.gep(local, [i64(0), i64(k)], source_etype=local.allocated_type), typ=I64T)
                b.store(v, b.gep(shared, [i64(2 + k)], source_etype=I64T))
        b.atomic_rmw("xchg", lock, i64(0), "release")
        b.branch(out)
        b.position_at_end(out)
        b.ret_void()

    # ------------------------------------------------------------ helpers
    def alloca(self, t: tir.TT, numel: int = None):
        numel = t.numel if numel is None else numel
        ty = mem_type(t.elem)
        self.frame_bytes += numel * (8 if ty in (F64T, I64T) else 4 if ty in (F32T, I32T) else 2 if ty == I16T else 1)
        with self.b.goto_block(self.allocas):
            return self.b.alloca(ty, size=i64(numel), name="tile")

    # values are scalars (the same in every lane) or packets (vectors of the statement's lanes)
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

    def fail(self, kind: str, value=None, info=None):
        """Record a failure of this statement and leave the program (in the current block)."""
        b = self.b
        self.sites.append(Site(kind, self.line, info))
        b.store(i64(len(self.sites)), b.gep(self.err, [i64(0)], source_etype=I64T))
        b.store(value if value is not None else i64(0), b.gep(self.err, [i64(1)], source_etype=I64T))
        b.ret(ir.Constant(I32T, 1))

    @contextlib.contextmanager
    def loop(self, count, start=0):
        b = self.b
        count = i64(count) if isinstance(count, int) else count
        pre = b.block
        head, body, out = (b.append_basic_block(x) for x in ("head", "body", "out"))
        b.branch(head)
        b.position_at_end(head)
        iv = b.phi(I64T)
        iv.add_incoming(i64(start) if isinstance(start, int) else start, pre)
        b.cbranch(b.icmp_signed("<", iv, count), body, out)
        b.position_at_end(body)
        yield iv
        if not b.block.is_terminated:
            iv.add_incoming(b.add(iv, i64(1)), b.block)
            b.branch(head)
        b.position_at_end(out)

    @contextlib.contextmanager
    def packets(self, shape):
        """A loop nest over `shape` whose last axis goes in packets of the target's lanes: the
        index tuple's last entry is then a vector (lane l of packet p: p * lanes + l)."""
        n = shape[-1] if shape else 1
        w = min(n, self.lanes)
        if w == 1:
            with self.loops(shape) as idx:
                yield idx
            return
        with self.loops(tuple(shape[:-1]) + (n // w,)) as idx:
            j0 = self.mul(idx[-1], w)
            ramp = self.b.add(self.splat(j0, w), ir.Constant(ir.VectorType(I64T, w), list(range(w))))
            self.ramps[id(ramp)] = j0
            yield tuple(idx[:-1]) + (ramp,)

    @contextlib.contextmanager
    def loops(self, shape):
        """A loop nest over `shape` (row-major; axes of 1 are index 0), yielding the index tuple."""
        with contextlib.ExitStack() as stack:
            idx = []
            for d in shape:
                idx.append(i64(0) if d == 1 else stack.enter_context(self.loop(d)))
            yield tuple(idx)

    # ------------------------------------------------------------ statements
    def block(self, stmts):
        for st in stmts:
            self.line = st.line
            if self.b.block.is_terminated:          # after a return: unreachable, still well formed
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.stmt(st)

    def stmt(self, st):
        b = self.b
        self.mat = {}
        if isinstance(st, tir.Let):
            if st.var in self.inline:
                return
            self.let_target = (st.var, st.value)
            try:
                self.prepare(st.value)
            finally:
                self.let_target = None
            arr, t = self.arrays[st.var], self.p.vars[st.var]
            done = self.mat.get(id(st.value))
            if done is not None and done[0] is arr:      # computed in place (dot into its accumulator)
                return
            if self._reads_moved(st.value, st.var):
                tmp = self.alloca(t)
                self.store_tile(st.value, tmp)
                with self.packets(t.shape) as idx:
                    self.write_at(arr, t.elem, idx, t.shape, self.read_at(tmp, t.elem, idx, t.shape))
            else:
                self.store_tile(st.value, arr)
        elif isinstance(st, tir.Load):
            self.load(st)
        elif isinstance(st, tir.Store):
            self.store(st)
        elif isinstance(st, tir.Atomic):
            self.atomic(st)
        elif isinstance(st, tir.For):
            self.for_(st)
        elif isinstance(st, tir.While):
            head, body, out = (b.append_basic_block(x) for x in ("while", "wbody", "wout"))
            b.branch(head)
            b.position_at_end(head)
            self.block(st.cond_body)
            self.line, self.mat = st.line, {}
            self.prepare(st.cond)
            b.cbranch(self.ev(st.cond, (), {}), body, out)
            b.position_at_end(body)
            self.block(st.body)
            if not b.block.is_terminated:
                b.branch(head)
            b.position_at_end(out)
        elif isinstance(st, tir.If):
            self.prepare(st.cond)
            c = self.ev(st.cond, (), {})
            then, other, out = (b.append_basic_block(x) for x in ("then", "else", "endif"))
            b.cbranch(c, then, other)
            for blk, stmts in ((then, st.then), (other, st.orelse)):
                b.position_at_end(blk)
                self.block(stmts)
                if not b.block.is_terminated:
                    b.branch(out)
            b.position_at_end(out)
        elif isinstance(st, tir.Return):
            b.branch(self.ret_ok)
        elif isinstance(st, tir.Assert):
            self.prepare(st.cond)
            ok = self._all(st.cond)
            with b.if_then(b.not_(ok), likely=False):
                self.fail("assert", info=st.message)
        else:
            raise NativeUnsupported(f"line {st.line}: statement {type(st).__name__}")

    def _all(self, n: Node):
        b = self.b
        acc = self.alloca(tir.TT(Dt.I1))
        b.store(ir.Constant(I8T, 1), acc)
        with self.loops(n.shape) as idx:
            v = b.and_(b.load(acc, typ=I8T), b.zext(self.ev(n, idx, {}), I8T))
            b.store(v, acc)
        return b.icmp_unsigned("!=", b.load(acc, typ=I8T), ir.Constant(I8T, 0))

    def for_(self, st: tir.For):
        b = self.b
        self.prepare(st.start)
        self.prepare(st.stop)
        self.prepare(st.step)
        memo = {}
        a, e, c = (self._to64(self.ev(x, (), memo), x.elem) for x in (st.start, st.stop, st.step))
        with b.if_then(b.icmp_signed("==", c, i64(0)), likely=False):
            self.fail("step")
        pre = b.block
        head, body, out = (b.append_basic_block(x) for x in ("for", "fbody", "fout"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64T)
        i.add_incoming(a, pre)
        up = b.icmp_signed(">", c, i64(0))
        go = b.select(up, b.icmp_signed("<", i, e), b.icmp_signed(">", i, e))
        b.cbranch(go, body, out)
        b.position_at_end(body)
        t = st.type.elem
        self.write(self.arrays[st.var], t, i64(0), self.ops.cast(i, Dt.I64, t) if t is not Dt.I64 else i)
        self.block(st.body)
        if not b.block.is_terminated:
            i.add_incoming(b.add(i, c), b.block)
            b.branch(head)
        b.position_at_end(out)
        self.line = st.line

    def _to64(self, v, d: Dt):
        if d.bits == 64:
            return v
        t = ir.VectorType(I64T, v.type.count) if isinstance(v.type, ir.VectorType) else I64T
        return self.b.sext(v, t) if d.is_signed else self.b.zext(v, t)

    def _reads_moved(self, n: Node, var: str, moved=False, seen=None) -> bool:
        """Whether `n` reads `var` at another element than the one being written (then a Let
        writes through a temporary)."""
        seen = set() if seen is None else seen
        if (id(n), moved) in seen or id(n) in self.mat:
            return False
        seen.add((id(n), moved))
        if n.op is K.VAR:
            if n.arg in self.inline:
                return self._reads_moved(self.inline[n.arg], var, moved, seen)
            return moved and n.arg == var
        shifts = n.op in (K.BROADCAST, K.RESHAPE, K.PERMUTE, K.EXPAND, K.JOIN, K.SPLIT)
        return any(self._reads_moved(s, var, moved or shifts, seen) for s in n.srcs)

    def store_tile(self, n: Node, arr):
        with self.packets(n.shape) as idx:
            self.write_at(arr, n.elem, idx, n.shape, self.ev(n, idx, {}))

    # ------------------------------------------------------------ memory
    def _address(self, ptr: Node, idx, memo):  # scalar elements (atomics)
        name = self.base_of(ptr)
        data, size, base = self.bufs[name]
        gi = self.b.add(self.ev(ptr, idx, memo), base)
        return name, data, size, gi

    _NO_BAD = 2 ** 63 - 1

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

    def check(self, ptr: Node, mask, what: str):
        """interp._addresses: every active element inside its storage, else the first one
        (row-major) that is not is reported, before the access does anything."""
        b = self.b
        first = self.alloca(tir.TT(Dt.I64))
        b.store(i64(self._NO_BAD), first)
        with self.packets(ptr.shape) as idx:
            data, n, gi, inb, active = self._access(ptr, mask, idx, {})
            self._track_bad(first, b.and_(active, b.not_(inb)), self.flat(idx, ptr.shape))
        self._report_bad(first, ptr, what)

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
        elem = st.type.elem
        fused_other = st.other is None or not self._needs_material(st.other)
        if not fused_other:
            self.check(st.ptr, st.mask, "load")
            self.prepare(st.other)
        arr = self.arrays[st.var]
        shape = st.type.shape
        first = self.alloca(tir.TT(Dt.I64)) if fused_other else None
        if first is not None:
            b.store(i64(self._NO_BAD), first)
        with self.packets(shape) as idx:
            memo = {}
            data, n, gi, inb, active = self._access(st.ptr, st.mask, idx, memo)
            if st.other is not None:
                other = self.ev(st.other, self._bidx(st.other.shape, shape, idx), memo)
            else:
                other = const(0, elem)
            other = self.splat(other, n)
            if first is not None:
                self._track_bad(first, b.and_(active, b.not_(inb)), self.flat(idx, shape))
            on = b.and_(active, inb)
            if n > 1:
                val = self.mem_load(data, elem, gi, on, other)
            else:
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

    def store(self, st: tir.Store):
        b = self.b
        self.prepare(st.ptr)
        self.prepare(st.value)
        if st.mask is not None:
            self.prepare(st.mask)
        self.check(st.ptr, st.mask, "store")
        shape = st.ptr.shape
        elem = self.buf_elem[self.base_of(st.ptr)]
        with self.packets(shape) as idx:
            memo = {}
            data, n, gi, inb, active = self._access(st.ptr, st.mask, idx, memo)
            v = self.splat(self.ev(st.value, self._bidx(st.value.shape, shape, idx), memo), n)
            if n > 1:
                self.mem_store(data, elem, gi, None if st.mask is None else active, v)
            elif st.mask is None:
                self.write(data, elem, gi, v)
            else:
                with b.if_then(active):
                    self.write(data, elem, gi, v)

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

    # ------------------------------------------------------------ whole-tile nodes
    def _needs_material(self, n: Node, seen=None) -> bool:
        seen = set() if seen is None else seen
        if id(n) in seen:
            return False
        seen.add(id(n))
        return self._material(n) or any(self._needs_material(s, seen) for s in n.srcs)

    def _material(self, n: Node) -> bool:
        if n.op in _MATERIAL:
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
        else:
            self.mat[id(n)] = self.checked_binary(n)

    def _tile_array(self, n: Node):
        """n's elements in a row-major array: a variable's own, else a new one."""
        if n.op is K.VAR:
            return self.arrays[n.arg]
        if id(n) in self.mat and self.mat[id(n)][1] is None:
            return self.mat[id(n)][0]
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
        first = self._array_of(src) if r > 1 and not inject.active("triton_tree_order") else None
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
        if inject.active("triton_tree_order"):
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
                for arr, e, h, v in zip(nxt, elems, here, c):
                    ph = b.phi(reg_type(e))
                    ph.add_incoming(v, got)
                    ph.add_incoming(h, pre)
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
        """interp._dot: c[i, j] = fma(a[i, k], b[k, j], c[i, j]) for k ascending."""
        a_n, b_n, c_n = n.srcs
        m, kk = a_n.shape
        nn = b_n.shape[1]
        d = n.elem
        a, bm = self._tile_array(a_n), self._tile_array(b_n)
        target, value = self.let_target or (None, None)
        if (value is n and c_n.op is K.VAR and c_n.arg == target and target not in self.inline and d is Dt.F32
                and not any(x.op is K.VAR and x.arg == target for x in (a_n, b_n))):
            c = self.arrays[target]        # `acc = tl.dot(a, b, acc)`: C is acc's own array (blocks are disjoint)
        else:
            c = self.alloca(n.type)
            self.store_tile(c_n, c)
        if d is Dt.F32:
            self._dot_f32(a, bm, c, m, kk, nn)
        elif d is Dt.I32:
            b = self.b
            with self.loops((m, kk, nn)) as (i, k, j):
                ci = b.add(b.mul(i, i64(nn)), j)
                p = b.mul(self.read(a, d, b.add(b.mul(i, i64(kk)), k)), self.read(bm, d, b.add(b.mul(k, i64(nn)), j)))
                self.write(c, d, ci, b.add(self.read(c, d, ci), p))
        else:
            raise NativeUnsupported(f"line {self.line}: tl.dot accumulating in {d!r}")
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
        cx = Ctx(self.m, b, v, False)
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
            kr = b.sub(i64(kk - 1), k) if inject.active("triton_dot_k_descending") else k
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

    # ------------------------------------------------------------ elements
    def ev(self, n: Node, idx: tuple, memo: dict):
        key = (id(n),) + tuple(id(i) for i in idx)
        r = memo.get(key)
        if r is None:
            r = memo[key] = self._ev(n, idx, memo)
        return r

    def _ev(self, n: Node, idx, memo):
        b, op, t = self.b, n.op, n.type
        got = self.mat.get(id(n))
        if got is not None:
            arr, where = got
            if where is None:
                return self.read_at(arr, n.elem, idx, n.shape)
            return self.read(arr, n.elem, where(idx))
        if op is K.VAR:
            if self.region_env is not None and n.arg in self.region_env:
                return self.region_env[n.arg]
            value = self.inline.get(n.arg)
            if value is not None:
                return self.ev(value, idx, memo)
            return self.read_at(self.arrays[n.arg], n.elem, idx, n.shape)
        if op is K.CONST:
            return const(n.arg, t.elem)
        if op is K.PARAM:
            return i64(0) if t.is_ptr else self.scalars[n.arg]
        if op is K.PROGRAM_ID:
            return self.pid[n.arg]
        if op is K.NUM_PROGRAMS:
            return self.grid[n.arg]
        if op is K.ARANGE:
            i = idx[0]
            return b.add(b.trunc(i, ir.VectorType(I32T, i.type.count) if isinstance(i.type, ir.VectorType) else I32T),
                         kc(ir.VectorType(I32T, i.type.count) if isinstance(i.type, ir.VectorType) else I32T, n.arg))
        s0 = n.srcs[0] if n.srcs else None
        if op is K.BROADCAST:
            return self.ev(s0, self._bidx(s0.shape, t.shape, idx), memo)
        if op is K.RESHAPE:
            return self.ev(s0, self.unflat(self.flat(idx, t.shape), s0.shape), memo)
        if op is K.PERMUTE:
            src = [None] * len(idx)
            for dpos, axis in enumerate(n.arg):
                src[axis] = idx[dpos]
            return self.ev(s0, tuple(src), memo)
        if op is K.EXPAND:
            return self.ev(s0, idx[:n.arg] + idx[n.arg + 1:], memo)
        if op is K.JOIN:
            x, y = self.ev(n.srcs[0], idx[:-1], memo), self.ev(n.srcs[1], idx[:-1], memo)
            c, x, y = self.unify(b.icmp_unsigned("==", idx[-1], kc(idx[-1].type, 0)), x, y)
            return b.select(c, x, y)
        if op is K.SPLIT:
            return self.ev(s0, idx + (i64(n.arg),), memo)
        if op is K.PTR_ADD:
            o = self.ev(n.srcs[1], idx, memo)
            d = n.srcs[1].elem
            o = self._to64(o, d)
            return self.add(self.ev(s0, idx, memo), o)
        s = self.unify(*[self.ev(x, idx, memo) for x in n.srcs])
        sd = s0.elem if s0 is not None else None
        ops = self.ops
        if op is K.CAST:
            return ops.cast(s[0], sd, t.elem)
        if op is K.BITCAST:
            return ops.bitcast(s[0], sd, t.elem)
        if op is K.UNARY:
            return ops.unary(n.arg, sd, s[0])
        if op is K.BINARY:
            return ops.binary(n.arg, sd, s[0], s[1])
        if op is K.MINMAX:
            return ops.minmax(n.arg[0], n.arg[1], sd, s[0], s[1])
        if op is K.CMP:
            return ops.compare(n.arg, sd, s[0], s[1])
        if op is K.WHERE:
            return b.select(s[0], s[1], s[2])
        if op is K.FMA:
            return ops.fma(sd, s[0], s[1], s[2])
        if op is K.MATH:
            return ops.math(n.arg, sd, s[0])
        if op is K.UMULHI:
            return ops.umulhi(sd, s[0], s[1])
        raise NativeUnsupported(f"line {self.line}: operation {op.name}")


__all__ = ["Lowering", "Site", "abi", "NativeUnsupported", "FRAME_LIMIT", "Red", "Ptr"]

"""A tile program in LLVM IR: one native function per program instance (DESIGN §10, native mode).

Every tile variable is a fixed-size array (row-major, its element type's memory carrier) in
the program's frame; a statement is one loop nest over its result's shape, the last axis in
packets of the target's lanes, its expression fused element by element (`ev`: each node's
element, or packet of elements, at a multi-index; broadcasts, reshapes and permutes as index
maps). A variable assigned once to a cheap pure value is recomputed at its uses. Nodes that
need the whole tile (native_tiles.py) are computed first, in the reference's post-order, so a
failure is the one the reference reports; memory accesses are native_memory.py. A failure
writes (site, value) to the program's error record and returns 1; native.py turns the site
into the reference's message.

ABI of the entry `void entry(int64_t *args)` (the backend pool's: [1] first program,
[2] end, [3] error record; then from slot 7): grid sizes (3), per pointer argument
(data address, storage elements, first element), per scalar argument (its bits).
"""
from __future__ import annotations

import contextlib

from llvmlite import ir

from ..backend import target as btarget
from . import tir
from .native_memory import VIEWS, MemoryLowering
from .native_ops import (
    F32T,
    F64T,
    I1T,
    I8T,
    I16T,
    I32T,
    I64T,
    PTR,
    NativeUnsupported,
    Ops,
    const,
    i64,
    kc,
    mem_type,
    reg_type,
)
from .native_rewrite import rewrite
from .native_tiles import MATERIAL, TileLowering
from .tir import Bin, Dt, K, Node, Ptr, Red

SLOT_GRID = 7
FRAME_LIMIT = 2 << 20          # bytes of tile arrays per program (they live on the thread's stack)


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
            elif n.op in MATERIAL or n.op is K.MATH or (n.op is K.BINARY and n.arg in (Bin.IDIV, Bin.MOD, Bin.SHL,
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


class _Callee:
    """A function pointer as a call's callee (llvmlite calls only values that know their
    function type; a pointer loaded from memory is opaque)."""

    def __init__(self, pointer, function_type):
        self.pointer, self.function_type, self.type = pointer, function_type, pointer.type

    def get_reference(self):
        return self.pointer.get_reference()


class Lowering(MemoryLowering, TileLowering):
    def __init__(self, prog: tir.Program, symbol: str, config):
        prog = rewrite(prog)                   # the same values, fewer tile copies (native_rewrite.py)
        self.p, self.symbol, self.config = prog, symbol, config
        self.m = ir.Module(name=prog.name)
        self.sites: list = []
        self.frame_bytes = 0
        self.line = 0
        self.has_atomics = False
        self.prints: list = []                 # per tl.device_print: (prefix, [(elem, shape)]) (native.Printer)
        self.print_hook = None                 # the module's global holding the printer's address
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
                if any(v.type.is_ptr for v in st.values):
                    raise NativeUnsupported(f"line {st.line}: tl.device_print of a pointer")
                self.has_atomics = True         # printed in program-id order, as the reference prints
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
        self.ops = Ops(self.m, self.b, self.config)
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
        elif isinstance(st, tir.Print):
            self.device_print(st)
        else:
            raise NativeUnsupported(f"line {st.line}: statement {type(st).__name__}")

    def device_print(self, st: tir.Print):
        """Each value stored whole into an array of its own, then the printer called with the
        print's site, the program id and the arrays (native.Printer formats them as the
        reference prints)."""
        b = self.b
        if self.print_hook is None:
            self.print_hook = ir.GlobalVariable(self.m, PTR, f"{self.symbol}_print")
            self.print_hook.initializer = ir.Constant(PTR, None)
        site = len(self.prints)
        self.prints.append((st.prefix, [(v.type.elem, v.type.shape) for v in st.values]))
        ptrs = self.alloca(tir.TT(Dt.I64), max(1, len(st.values)))
        for k, v in enumerate(st.values):
            self.mat = {}
            self.prepare(v)
            arr = self.alloca(v.type)
            self.store_tile(v, arr)
            b.store(b.ptrtoint(arr, I64T), b.gep(ptrs, [i64(k)], source_etype=I64T))
        hook = _Callee(b.load(self.print_hook, typ=PTR), ir.FunctionType(ir.VoidType(), [I64T] * 4 + [PTR]))
        b.call(hook, [i64(site), *(b.zext(p, I64T) for p in self.pid), ptrs])

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

    # ------------------------------------------------------------ whole-tile nodes
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
            j0 = self.ramps.get(id(i))
            if j0 is not None:            # a packet's lanes j0 + l: in i32 from the start (one add, no i64 lanes)
                w = i.type.count
                first = b.add(b.trunc(j0, I32T), ir.Constant(I32T, n.arg))
                return b.add(self.splat(first, w), ir.Constant(ir.VectorType(I32T, w), list(range(w))))
            return b.add(b.trunc(i, ir.VectorType(I32T, i.type.count) if isinstance(i.type, ir.VectorType) else I32T),
                         kc(ir.VectorType(I32T, i.type.count) if isinstance(i.type, ir.VectorType) else I32T, n.arg))
        s0 = n.srcs[0] if n.srcs else None
        if op in VIEWS:
            return self.ev(s0, self.view_source(n, idx), memo)
        if op is K.RESHAPE:
            return self.ev(s0, self.unflat(self.flat(idx, t.shape), s0.shape), memo)
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

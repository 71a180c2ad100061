"""The `whole` variant (lanes = 1): every thread of a block runs as scalar code.

For each block in the entry's range, the kernel body is cut at its top-level
collectives into phases; each phase runs threads 0..B-1 one after another
(inactive tail threads skipped), then the phase's collective combines the
block's values in the fixed tree of DESIGN §3. Variables that live across a
phase boundary are kept per thread in a [B x T] array; all others are plain
allocas that LLVM promotes to registers. Private arrays are thread-major.
"""
from __future__ import annotations

import hashlib

from llvmlite import ir

from ..refimpl import mathlib
from ..refimpl.ir import (Assign, Collective, DType, Expr, For, If, Kernel, Op, ParamKind, Private,
                          PStore, Store, walk_expr, walk_stmts, stmt_exprs)
from ..refimpl.printer import format_kernel
from ..refimpl.semantics import REDUCE_IDENTITY, REDUCE_OP
from collections import Counter

from .bounds import Bounds
from .context import (ERR_LOAD_OOB, ERR_PARTIAL_BLOCK, ERR_PRIVATE_OOB, ERR_SCRATCH, ERR_STORE_OOB, ERR_UNPROVEN, I1, I32T,
                      I64, I8, PTR, SLOT_BEGIN, SLOT_END, SLOT_ERR, SLOT_N, SLOT_PROOF, SLOT_SCRATCH, SLOT_SCRATCH_BYTES, VOID, Ctx,
                      abi_slots, mem_type, private_layout)
from . import inject
from .lower_ops import LOWER, bitcast, convert


def tree_steps(B: int, lo: int) -> list:
    """The strides s = B/2, B/4, ..., lo of the fixed reduction tree (DESIGN §3)."""
    steps = []
    s = B // 2
    while s >= lo:
        steps.append(s)
        s //= 2
    return steps[::-1] if inject.active("tree_order") else steps


def split_phases(body) -> list:
    """[(statements, collective or None), ...]: the body cut after each top-level collective."""
    phases, cur = [], []
    for s in body:
        if isinstance(s, Collective):
            phases.append((tuple(cur), s))
            cur = []
        else:
            cur.append(s)
    phases.append((tuple(cur), None))
    return phases


def names_in(stmts, coll=None) -> set:
    """Variable names a phase reads or writes."""
    names = set()
    for s in walk_stmts(stmts):
        if isinstance(s, (Assign, Collective)):
            names.add(s.name)
        if isinstance(s, For):
            names.add(s.var)
        for e in stmt_exprs(s):
            names.update(n.arg for n in walk_expr(e) if n.op is Op.VAR)
    if coll is not None:
        names.update(n.arg for n in walk_expr(coll.value) if n.op is Op.VAR)
    return names


def contains_load(e: Expr, cache: dict, private: bool = False) -> bool:
    """Whether evaluating e may touch a buffer (then it must not be speculated).

    With `private`, private-array loads count too: a checked build reports an
    out-of-range private index, so it must not speculate one either (unchecked
    builds clamp the index, which makes speculating it harmless). `cache` must
    be used with one value of `private` only.
    """
    r = cache.get(id(e))
    if r is None:
        r = cache[id(e)] = (e.op is Op.LOAD or (private and e.op is Op.PLOAD)
                            or any(contains_load(s, cache, private) for s in e.src))
    return r


def var_types(kernel: Kernel) -> dict:
    types = {}
    for s in walk_stmts(kernel.body):
        if isinstance(s, (Assign, Collective)):
            types[s.name] = s.value.dtype
        elif isinstance(s, For):
            types[s.var] = DType.I32
    return types


class WholeLowering:
    def __init__(self, kernel: Kernel, symbol: str, fast_math: bool = False, checked: bool = False,
                 full_blocks: bool = False, unsafe: bool = False):
        self.k = kernel
        self.B = kernel.block
        self.checked = checked
        # the default build is safe: affine indices proven per launch in the prologue,
        # the others checked per access; `unsafe` builds check nothing
        self.bounds = None if checked or unsafe else Bounds(kernel)
        self.counts = Counter()
        self.full_blocks = full_blocks     # only launches of whole blocks (n % B == 0) are accepted
        self.module = ir.Module(name=kernel.name)
        self.fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), symbol)
        self.fn.attributes.add("nounwind")
        # The W8 machine width: whatever LLVM vectorises on its own stays in 256-bit
        # registers, as the packet variants do (lanes=16 asks for 512).
        self.fn_attributes = {"prefer-vector-width": "256", "no-builtin-memset": ""}
        self.tuning = {"loop_unrolling": False, "slp_vectorization": False}
        self.entry_bb = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry_bb)
        self.cx = Ctx(self.module, self.b, 1, fast_math)
        self.stmt_ids: dict = {}      # id(stmt) -> index into self.stmt_table
        self.stmt_table: list = []
        self.types = var_types(kernel)
        self.spec_cache: dict = {}

    # ------------------------------------------------------------ helpers
    def alloca(self, ty, name=""):
        with self.b.goto_block(self.entry_bb):
            self.b.position_at_start(self.entry_bb)
            a = self.b.alloca(ty, name=name)
        a.type = PTR  # opaque, like every pointer in LLVM 22; GEPs name their element type
        return a

    def const(self, dt, v):
        return self.cx.const(dt, v)

    def i32(self, v):
        return ir.Constant(I32T, v)

    def i64(self, v):
        return ir.Constant(I64, v)

    def stmt_id(self, s) -> int:
        if id(s) not in self.stmt_ids:
            self.stmt_ids[id(s)] = len(self.stmt_table)
            self.stmt_table.append(s)
        return self.stmt_ids[id(s)]

    def counted_loop(self, start, stop, body, name: str, step: int = 1):
        """for (i = start; i < stop; i += step) body(i), i32 counters."""
        b = self.b
        pre = b.block
        head = self.fn.append_basic_block(f"{name}.head")
        loop = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I32T, name=name)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", i, stop), loop, done)
        b.position_at_end(loop)
        body(i)
        nxt = b.add(i, self.i32(step))
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)

    def needs_check(self, key) -> bool:
        """Whether the buffer access `key` (a Store or a LOAD node) is checked where it happens."""
        if self.checked:
            return True
        return self.bounds is not None and id(key) not in self.bounds.proven

    def bounds_prologue(self):
        """Safe builds: prove every affine index of the launch in bounds, or leave at once
        with ERR_UNPROVEN, having touched no buffer (bounds.py)."""
        b = self.b
        proven = sum(1 for key, _, _ in self.bounds.accesses if id(key) in self.bounds.proven)
        self.counts["bounds_proven"] = proven
        self.counts["bounds_unprovable"] = len(self.bounds.accesses) - proven
        if not proven:
            return
        # once per argument block: a block proven for this kernel carries the kernel's tag (pool
        # tasks of one launch share a copy of the block, so each job proves once). The tag names
        # the kernel, not the build: every safe build of a kernel proves the same accesses
        # (Bounds reads the kernel alone), and builds that differ only in layout stay identical.
        text = format_kernel(self.k)
        tag = self.i64(int(hashlib.sha256(text.encode()).hexdigest()[:15], 16) | 1)
        memo = b.gep(self.fn.args[0], [self.i64(SLOT_PROOF)], source_etype=I64)
        seen = b.load_atomic(memo, "monotonic", 8, typ=I64)
        with b.if_then(b.icmp_unsigned("!=", seen, tag), likely=False):
            # the lengths loaded here, in the cold path: loaded at the top they would stay live
            # in registers through the whole entry (measured: +13% at rmsnorm 17x65)
            slots, args = abi_slots(self.k), self.fn.args[0]
            lens = {name: b.load(b.gep(args, [self.i64(slots[name][1])], source_etype=I64), typ=I64, align=8)
                    for name in self.lens}
            ok = self.bounds.emit(b, self.n64, self.B, lens, self.scalar_bits)
            with b.if_then(b.not_(ok), likely=False):
                err = b.inttoptr(b.load(b.gep(args, [self.i64(SLOT_ERR)], source_etype=I64), typ=I64, align=8), PTR)
                b.cmpxchg(err, self.i64(0), self.i64(ERR_UNPROVEN), "monotonic", "monotonic")
                b.ret_void()
            b.atomic_rmw("xchg", memo, tag, "monotonic")

    def fail_if(self, bad, kind: int, stmt, index64):
        """Checked builds: record the error and leave the entry."""
        b = self.b
        err_bb = self.fn.append_basic_block("oob")
        ok_bb = self.fn.append_basic_block("inbounds")
        b.cbranch(bad, err_bb, ok_bb)
        b.position_at_end(err_bb)
        self.record_error(kind, stmt, index64, b.sext(self.gid, I64))
        b.ret_void()
        b.position_at_end(ok_bb)

    def record_error(self, kind: int, stmt, index64, thread64):
        """The first error of a launch wins: tasks on other threads may fail at once."""
        b = self.b
        claim = b.cmpxchg(self.err_ptr, self.i64(0), self.i64(kind), "monotonic", "monotonic")
        with b.if_then(b.extract_value(claim, 1)):
            for slot, v in enumerate((self.i64(self.stmt_id(stmt)), index64, thread64), start=1):
                b.store(v, b.gep(self.err_ptr, [self.i64(slot)], source_etype=I64), align=8)

    # ------------------------------------------------------------ entry
    def lower(self) -> ir.Module:
        b, k = self.b, self.k
        args = self.fn.args[0]
        slot = lambda i: b.load(b.gep(args, [self.i64(i)], source_etype=I64), typ=I64, align=8)
        self.n64 = slot(SLOT_N)
        self.n32 = b.trunc(self.n64, I32T)
        begin = b.trunc(slot(SLOT_BEGIN), I32T)
        end = b.trunc(slot(SLOT_END), I32T)
        self.err_ptr = b.inttoptr(slot(SLOT_ERR), PTR)
        slots = abi_slots(k)
        self.bufs, self.lens = {}, {}
        for p in k.params:
            if p.kind is ParamKind.BUFFER:
                ps, ls = slots[p.name]
                self.bufs[p.name] = b.inttoptr(slot(ps), PTR)
                self.lens[p.name] = slot(ls)
        self.scalars, self.scalar_bits = {}, {}
        for p in k.scalars:
            bits = self.scalar_bits[p.name] = b.trunc(slot(slots[p.name][0]), I32T)
            self.scalars[p.name] = b.bitcast(bits, ir.FloatType()) if p.dtype is DType.F32 else bits
        if self.full_blocks:
            # specialised for launches of whole blocks: anything else is refused, never run
            partial = b.icmp_unsigned("!=", b.urem(self.n64, self.i64(self.B)), self.i64(0))
            with b.if_then(partial, likely=False):
                b.store(self.i64(ERR_PARTIAL_BLOCK), self.err_ptr, align=8)
                b.store(self.n64, b.gep(self.err_ptr, [self.i64(2)], source_etype=I64), align=8)
                b.ret_void()
        if self.bounds is not None:
            self.bounds_prologue()
        # never run blocks past the launch, whatever the caller asked
        nblocks = b.trunc(b.udiv(b.add(self.n64, self.i64(self.B - 1)), self.i64(self.B)), I32T)
        end = b.select(b.icmp_signed("<", end, nblocks), end, nblocks)

        self.phases = split_phases(k.body)
        counts = [names_in(st, c) for st, c in self.phases]
        self.cross = {n for n in self.types if sum(n in c for c in counts) > 1}
        self.cross |= {c.name for _, c in self.phases if c is not None}
        self.slots = {n: self.alloca(self.cx.ty(t), n) for n, t in self.types.items()}
        # per-thread storage: one element per thread, packets read W at a time
        self.arrays = {n: self.alloca(ir.ArrayType(mem_type(self.types[n]), self.B), f"{n}.all")
                       for n in sorted(self.cross)}
        self.privates = {}
        offsets, self.scratch_bytes = private_layout(k)
        if offsets:
            scratch = b.inttoptr(slot(SLOT_SCRATCH), PTR)
            # too little scratch (a misused entry) is an error, never a write past it
            short = b.icmp_unsigned("<", slot(SLOT_SCRATCH_BYTES), self.i64(self.scratch_bytes))
            with b.if_then(short, likely=False):
                b.store(self.i64(ERR_SCRATCH), self.err_ptr, align=8)
                b.ret_void()
        for s in k.body:
            if isinstance(s, Private):
                ptr = b.gep(scratch, [self.i64(offsets[s.name])], source_etype=I8)
                self.privates[s.name] = (ptr, int(s.size.arg), s.dtype)
        self.scratch = {}
        for _, c in self.phases:
            if c is not None:
                self.scratch[id(c)] = self.alloca(ir.ArrayType(mem_type(c.value.dtype), self.B), "tree")

        self.counted_loop(begin, end, self.block_body, "block")
        b.ret_void()
        return self.module

    def block_body(self, bid):
        b = self.b
        self.bid = bid
        base = b.mul(bid, self.i32(self.B))
        left = b.sub(self.n32, base)
        active = b.select(b.icmp_signed("<", left, self.i32(self.B)), left, self.i32(self.B))
        self.zero_privates()
        for p, (stmts, coll) in enumerate(self.phases):
            self.counted_loop(self.i32(0), active, lambda t: self.thread_phase(t, base, stmts, coll),
                              f"phase{p}.thread")
            if coll is not None:
                self.collective(coll, active)

    def zero_privates(self):
        """Every block's private arrays start at zero: 32-byte vector stores in a loop, and
        bytes for the rest (arrays start 64-byte aligned in scratch). Not llvm.memset,
        which becomes a call into libc at these sizes; the function attribute
        no-builtin-memset keeps LLVM from turning the loop back into one, so the entry
        calls nothing outside the generated code (code facts: direct CFG)."""
        b = self.b
        zero = ir.Constant(ir.VectorType(I32T, 8), None)
        for ptr, size, dt in self.privates.values():
            nbytes = size * self.B * (1 if dt is DType.BOOL else 4)
            self.counted_loop(self.i32(0), self.i32(nbytes // 32), lambda c, ptr=ptr: b.store(
                zero, b.gep(ptr, [b.mul(b.zext(c, I64), self.i64(32))], source_etype=I8), align=32), "zero")
            for k in range(nbytes // 32 * 32, nbytes):
                b.store(ir.Constant(I8, 0), b.gep(ptr, [self.i64(k)], source_etype=I8), align=1)

    def thread_phase(self, t, base, stmts, coll):
        b = self.b
        self.tid = t
        self.gid = b.add(base, t)
        used = names_in(stmts, coll)
        for n in sorted(used & self.cross):
            b.store(self.load_lane(self.arrays[n], t, self.types[n]), self.slots[n])
        self.stmts(stmts)
        assigned = {s.name for s in walk_stmts(stmts) if isinstance(s, Assign)}
        for n in sorted(assigned & self.cross):
            self.store_lane(b.load(self.slots[n], typ=self.cx.ty(self.types[n])), self.arrays[n], t,
                            self.types[n])
        if coll is not None:
            self.cur = coll
            v = self.ev(coll.value, {})
            b.store(v, self.elem(self.scratch[id(coll)], t, coll.value.dtype))

    def elem(self, array, index, dt: DType):
        return self.b.gep(array, [index], source_etype=mem_type(dt))

    def mem_ty(self, dt: DType):
        """A value's type in memory: bool is a byte; W lanes side by side in packets."""
        t = mem_type(dt)
        return t if self.cx.lanes == 1 else ir.VectorType(t, self.cx.lanes)

    def load_lane(self, array, index, dt: DType):
        """Thread `index`'s element of a per-thread array (W elements from there, in packets)."""
        v = self.b.load(self.elem(array, index, dt), typ=self.mem_ty(dt), align=1)
        return self.b.trunc(v, self.cx.ty(DType.BOOL)) if dt is DType.BOOL else v

    def store_lane(self, value, array, index, dt: DType):
        if dt is DType.BOOL:
            value = self.b.zext(value, self.mem_ty(dt))
        self.b.store(value, self.elem(array, index, dt), align=1)

    def collective(self, c: Collective, active):
        """Inactive threads contribute the identity, then the fixed tree (DESIGN §3)."""
        b, dt = self.b, c.value.dtype
        tree = self.scratch[id(c)]
        ident = self.const(dt, REDUCE_IDENTITY[(c.op.value, dt)].item())
        self.counted_loop(active, self.i32(self.B), lambda t: b.store(ident, self.elem(tree, t, dt)),
                          "identity")
        op = REDUCE_OP[c.op.value]
        for s in tree_steps(self.B, 1):
            def step(t, s=s):
                x = b.load(self.elem(tree, t, dt), typ=self.cx.ty(dt))
                y = b.load(self.elem(tree, b.add(t, self.i32(s)), dt), typ=self.cx.ty(dt))
                b.store(LOWER[op](self.cx, dt, x, y), self.elem(tree, t, dt))
            self.counted_loop(self.i32(0), self.i32(s), step, f"tree{s}")
        r = b.load(self.elem(tree, self.i32(0), dt), typ=self.cx.ty(dt))
        arr = self.arrays[c.name]
        self.counted_loop(self.i32(0), self.i32(self.B), lambda t: b.store(r, self.elem(arr, t, dt)),
                          "broadcast")

    # ------------------------------------------------------------ statements
    def stmts(self, body):
        b = self.b
        for s in body:
            self.cur = s
            if isinstance(s, Assign):
                b.store(self.ev(s.value, {}), self.slots[s.name])
            elif isinstance(s, Store):
                memo = {}
                idx = self.ev(s.index, memo)
                val = self.ev(s.value, memo)
                ptr = self.buffer_ptr(s.buf, idx, s.index.dtype, ERR_STORE_OOB, s, s)
                dt = self.k.param(s.buf).dtype
                b.store(b.zext(val, I8) if dt is DType.BOOL else val, ptr, align=1 if dt is DType.BOOL else 4)
            elif isinstance(s, PStore):
                memo = {}
                ptr, dt = self.private_ptr(s.arr, self.ev(s.index, memo), s.index.dtype, s)
                val = self.ev(s.value, memo)
                b.store(b.zext(val, I8) if dt is DType.BOOL else val, ptr)
            elif isinstance(s, If):
                cond = self.ev(s.cond, {})
                then_bb = self.fn.append_basic_block("then")
                else_bb = self.fn.append_basic_block("else")
                merge = self.fn.append_basic_block("endif")
                b.cbranch(cond, then_bb, else_bb)
                b.position_at_end(then_bb)
                self.stmts(s.then)
                b.branch(merge)
                b.position_at_end(else_bb)
                self.stmts(s.orelse)
                b.branch(merge)
                b.position_at_end(merge)
            elif isinstance(s, For):
                self.loop(s)
            elif isinstance(s, Private):
                pass  # allocated at entry, zeroed at each block start
            else:
                raise TypeError(f"cannot lower {type(s).__name__} here")

    def loop(self, s: For):
        """Python range semantics with a 64-bit counter: no wrap near INT_MAX."""
        b = self.b
        memo = {}
        start = b.sext(self.ev(s.start, memo), I64)
        stop = b.sext(self.ev(s.stop, memo), I64)
        step = int(s.step.arg)
        pre = b.block
        head = self.fn.append_basic_block("for.head")
        body = self.fn.append_basic_block("for.body")
        done = self.fn.append_basic_block("for.done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=s.var)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<" if step > 0 else ">", i, stop), body, done)
        b.position_at_end(body)
        b.store(b.trunc(i, I32T), self.slots[s.var])
        self.stmts(s.body)
        i.add_incoming(b.add(i, self.i64(step)), b.block)
        b.branch(head)
        b.position_at_end(done)

    # ------------------------------------------------------------ memory
    def index64(self, idx, dt: DType):
        return self.b.sext(idx, I64) if dt is DType.I32 else self.b.zext(idx, I64)

    def buffer_ptr(self, name: str, idx, idx_dt: DType, kind: int, stmt, key):
        i = self.index64(idx, idx_dt)
        if self.needs_check(key):
            self.counts["bounds_checks"] += 1
            self.fail_if(self.b.icmp_unsigned(">=", i, self.lens[name]), kind, stmt, i)
        return self.b.gep(self.bufs[name], [i], source_etype=mem_type(self.k.param(name).dtype))

    def private_ptr(self, name: str, idx, idx_dt: DType, stmt):
        """Thread-major: element i of thread t at t*size + i. The index is clamped
        so a wrong index can never write outside the array, checked or not."""
        b = self.b
        ptr, size, dt = self.privates[name]
        i = self.index64(idx, idx_dt)
        bad = b.icmp_unsigned(">=", i, self.i64(size))
        if self.checked:
            self.fail_if(bad, ERR_PRIVATE_OOB, stmt, i)
        i = b.select(bad, self.i64(size - 1), i)
        flat = b.add(b.mul(b.sext(self.tid, I64), self.i64(size)), i)
        return b.gep(ptr, [flat], source_etype=mem_type(dt)), dt

    # ------------------------------------------------------------ expressions
    def ev(self, e: Expr, memo: dict):
        r = memo.get(id(e))
        if r is None:
            r = memo[id(e)] = self._ev(e, memo)
        return r

    def _ev(self, e: Expr, memo: dict):
        b, op = self.b, e.op
        if op is Op.CONST:
            return self.const(e.dtype, e.arg)
        if op is Op.VAR:
            return b.load(self.slots[e.arg], typ=self.cx.ty(e.dtype))
        if op is Op.PARAM:
            return self.scalars[e.arg]
        if op is Op.ARG:
            return memo[("arg", e.arg)]
        if op is Op.THREAD_ID:
            return self.tid
        if op is Op.BLOCK_ID:
            return self.bid
        if op is Op.GLOBAL_ID:
            return self.gid
        if op is Op.BLOCK_SIZE:
            return self.i32(self.B)
        if op is Op.NUM_THREADS:
            return self.n32
        if op is Op.BUFLEN:
            return b.trunc(self.lens[e.arg], I32T)
        if op is Op.SELECT:
            return self.select(e, memo)
        if op is Op.LOAD:
            ptr = self.buffer_ptr(e.arg, self.ev(e.src[0], memo), e.src[0].dtype, ERR_LOAD_OOB, self.cur, e)
            if e.dtype is DType.BOOL:  # any nonzero byte is True, as in NumPy (not just its low bit)
                return b.icmp_unsigned("!=", b.load(ptr, typ=I8, align=1), ir.Constant(I8, 0))
            return b.load(ptr, typ=self.cx.ty(e.dtype), align=4)
        if op is Op.PLOAD:
            ptr, dt = self.private_ptr(e.arg, self.ev(e.src[0], memo), e.src[0].dtype, self.cur)
            v = b.load(ptr, typ=mem_type(dt))
            return b.trunc(v, I1) if dt is DType.BOOL else v
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
        """`a if c else b`: a plain select unless a branch may touch memory, which
        then runs only when taken (the interpreter's lazy semantics)."""
        b = self.b
        c = self.ev(e.src[0], memo)
        if not (contains_load(e.src[1], self.spec_cache, self.checked)
                or contains_load(e.src[2], self.spec_cache, self.checked)):
            return b.select(c, self.ev(e.src[1], memo), self.ev(e.src[2], memo))
        then_bb = self.fn.append_basic_block("sel.a")
        else_bb = self.fn.append_basic_block("sel.b")
        merge = self.fn.append_basic_block("sel.end")
        b.cbranch(c, then_bb, else_bb)
        b.position_at_end(then_bb)
        a = self.ev(e.src[1], dict(memo))
        a_end = b.block
        b.branch(merge)
        b.position_at_end(else_bb)
        v = self.ev(e.src[2], dict(memo))
        v_end = b.block
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(self.cx.ty(e.dtype))
        phi.add_incoming(a, a_end)
        phi.add_incoming(v, v_end)
        return phi

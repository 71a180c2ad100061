"""Coverage plants: statements that exercise a category the steering says a campaign
has never seen and the kernel built so far does not contain either.

Steered weights make unseen operations likelier everywhere; a plant makes one
certain. Each plant is a small statement of the ordinary kinds (a store of an
expression rooted at the operation, an `if` with an `else`, a nested loop, a
read of the thread's own slot, ...), built from the same pieces as the rest of
the kernel, so it is valid and observed by construction. The builder plants at
the end of the last phase, a few categories per program (`PLANTS_PER_PROGRAM`),
choosing among the missing ones with its draws: concurrent programs under one
steering plant different ones.
"""
from __future__ import annotations

from typing import Optional

from ...refimpl.ir import (
    Collective,
    Expr,
    For,
    If,
    Op,
    PStore,
    Store,
    binary,
    bitcast,
    builtin,
    cast,
    const,
    load,
    math,
    pload,
    select,
    stmt_exprs,
    unary,
    walk_expr,
)
from .base import BOOL, F32, I32, MATH_FUNCTIONS, U32, LoopRecord
from .case import BufferSpec

PLANTS_PER_PROGRAM = 8
MATH_PLANTS_PER_PROGRAM = 3
_BUILTINS = {Op.GLOBAL_ID, Op.THREAD_ID, Op.BLOCK_ID, Op.BLOCK_SIZE, Op.NUM_THREADS, Op.BUFLEN}
_LEAVES = {Op.CONST, Op.VAR, Op.PARAM, Op.ARG}
# categories a plant can guarantee (others: only their weights are steered)
PLANTABLE_STRUCTURE = ("if:else", "if:nested", "for:uniform", "for:per-thread", "for:nested",
                       "private:uniform-index", "private:per-thread-index", "read:own-slot",
                       "store:read-modify-write", "read:neighbour")


def present(body) -> set:
    """Categories a kernel body evidently contains (syntactically: a plant is skipped
    when its category is already there)."""
    out = set()

    def visit(stmts, ifs, loops):
        for s in stmts:
            out.add(f"statement:{type(s).__name__}")
            for e in stmt_exprs(s):
                for node in walk_expr(e):
                    out.add(f"op:{node.op.name}")
                    if node.op is Op.MATH:
                        out.add(f"math:{node.arg}")
            if isinstance(s, If):
                if s.orelse:
                    out.add("structure:if:else")
                if ifs:
                    out.add("structure:if:nested")
                visit(s.then, ifs + 1, loops)
                visit(s.orelse, ifs + 1, loops)
            elif isinstance(s, For):
                if loops:
                    out.add("structure:for:nested")
                per_thread = any(n.op in (Op.THREAD_ID, Op.GLOBAL_ID, Op.LOAD, Op.VAR)
                                 for e in (s.start, s.stop) for n in walk_expr(e))
                out.add("structure:for:per-thread" if per_thread else "structure:for:uniform")
                visit(s.body, ifs, loops + 1)
            elif isinstance(s, Collective):
                out.add(f"structure:collective:{s.op.value}")
                out.add(f"structure:collective:{s.value.dtype.value}")
    visit(body, 0, 0)
    return out


class Plants:
    def plants(self, body) -> list:
        """Statements for missing categories (at most PLANTS_PER_PROGRAM), appended by the
        builder at the end of the last phase."""
        if self.steer is None:
            return []
        have = present(body)
        todo = [c for c in self.steer.missing if c not in have and self.plantable(c)]
        out, maths = [], 0
        while todo and len(out) < PLANTS_PER_PROGRAM:
            c = todo.pop(self.int(0, len(todo) - 1))
            if c.startswith("math:"):
                if maths >= MATH_PLANTS_PER_PROGRAM:
                    continue
                maths += 1
            s = self.src.span(self.plant, c)
            if s is not None:
                out.append(s)
        return out

    def plantable(self, c: str) -> bool:
        group, _, what = c.partition(":")
        if group == "math":
            return what in MATH_FUNCTIONS
        if group == "op":
            op = getattr(Op, what, None)
            if op is None or op in _LEAVES:
                return False
            return op is not Op.PLOAD or bool(self.privates)
        if group == "structure":
            if what.startswith("private:"):
                return bool(self.privates)
            if what == "read:neighbour":
                return bool(self.exchange)
            return what in PLANTABLE_STRUCTURE
        return False

    # ------------------------------------------------------------ one plant
    def plant(self, c: str):
        group, _, what = c.partition(":")
        if group == "math":
            self.math_budget -= 1
            self.node_budget -= 25 * self.weight
            return self.observe(math(what, self.ordinary(1)))
        if group == "op":
            e = self.rooted(getattr(Op, what))
            return None if e is None else self.observe(e)
        return self.structure_plant(what)

    def witness(self, value: Expr) -> Store:
        """Store `value`'s bits at the thread's global id in an output of its own (u32), which no
        other statement writes: a probe's result cannot be hidden by a later store to its slot
        (a loop probe's trip witness, overwritten so, left a planted trip count unseen)."""
        name = f"yw{len(self.atomic_buffers)}"
        self.atomic_buffers.append(BufferSpec(name, U32, self.npad, "data"))
        return Store(name, self.g(), self.store_value(value, U32))

    def observe(self, value: Expr, avoid=None) -> Optional[Store]:
        """Store `value` (converted, every bit kept) at a free slot of the thread's own."""
        slots = [s for s in self.free_slots() if s != avoid]
        if not slots:
            return None
        o, j = self.pick_slot(slots)
        return self.own_store(o, j, self.store_value(value, o.dtype))

    def rooted(self, op: Op) -> Optional[Expr]:
        """An expression whose root is `op`, with small random operands."""
        sub = lambda dt: self.expr(dt, 1)
        num = lambda: self.pick([F32, I32, U32])
        ints = lambda: self.pick([I32, U32])
        if op in _BUILTINS:
            if op is Op.BUFLEN:
                return builtin(op, self.pick([b.name for b in self.inputs]))
            return builtin(op)
        if op in (Op.NEG, Op.ABS):
            return unary(op, sub(num()))
        if op is Op.NOT:
            return unary(op, sub(self.pick([BOOL, I32, U32])))
        if op is Op.SQRT:
            return unary(op, sub(F32))
        if op in (Op.DIV, Op.MOD):
            dt = ints() if op is Op.MOD or self.maybe(50) else F32
            return binary(op, sub(dt), self.safe_divisor(dt, 1) if dt.is_int else sub(F32))
        if op in (Op.SHL, Op.SHR):
            dt = ints()
            return binary(op, sub(dt), self.shift_amount(dt, 1))
        if op in (Op.ADD, Op.SUB, Op.MUL, Op.MIN, Op.MAX):
            dt = num()
            return binary(op, sub(dt), sub(dt))
        if op in (Op.AND, Op.OR, Op.XOR):
            dt = self.pick([BOOL, I32, U32])
            return binary(op, sub(dt), sub(dt))
        if op in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE):
            dt = num()
            return binary(op, sub(dt), sub(dt))
        if op is Op.SELECT:
            dt = num()
            return select(sub(BOOL), sub(dt), sub(dt))
        if op is Op.CAST:
            src, dst = self.pick([(F32, I32), (I32, F32), (U32, F32), (F32, U32), (BOOL, I32), (I32, BOOL)])
            return cast(sub(src), dst)
        if op is Op.BITCAST:
            return bitcast(sub(self.pick([I32, U32])), F32)
        if op is Op.LOAD:
            buf = self.pick(self.inputs)
            return load(buf.name, self.in_index(buf), buf.dtype)
        if op is Op.PLOAD:
            p = self.pick(self.privates)
            return pload(p.name, self.private_index(p), p.dtype)
        if op is Op.MATH:
            return self.math_call(lambda: self.ordinary(1))
        return None

    def structure_plant(self, what: str):
        if what == "if:else":
            before = set(self.defined)
            cond, then = self.condition(), self.branch(lambda: self.store(1) or self.assign(1))
            then_defined, self.defined = self.defined, set(before)
            orelse = self.branch(lambda: self.store(1) or self.assign(1))
            self.defined = before | (then_defined & self.defined)
            return If(cond, then, orelse)
        if what == "if:nested":
            before = set(self.defined)
            cond = self.condition()
            inner = self.branch(lambda: If(self.condition(), self.branch(lambda: self.store(1) or self.assign(1))))
            self.defined = before
            return If(cond, inner)
        if what in ("for:uniform", "for:per-thread", "for:nested"):
            return self.loop_plant(what)
        if what == "private:uniform-index" or what == "private:per-thread-index":
            p = self.pick(self.privates)
            idx = self.private_index_of(p, uniform=what.endswith("uniform-index"))
            if self.maybe(50):
                return PStore(p.name, idx, self.expr(p.dtype, 1))
            return self.observe(pload(p.name, idx, p.dtype))
        if what == "read:own-slot":
            o, j = self.pick([(o, j) for o in self.outputs for j in range(o.slots)])
            back = load(o.name, self.out_address(o, j, self.g(), self.t(), self.b()), o.dtype)
            return self.observe(back, avoid=(o, j))
        if what == "store:read-modify-write":
            slots = [s for s in self.free_slots() if s[0].dtype.is_number]
            if not slots:
                return None
            o, j = self.pick_slot(slots)
            addr = self.out_address(o, j, self.g(), self.t(), self.b())
            return self.own_store(o, j, binary(Op.ADD, load(o.name, addr, o.dtype), self.expr(o.dtype, 1)), addr)
        if what == "read:neighbour":
            o, j = self.pick(sorted(self.exchange, key=lambda x: (x[0].name, x[1])))
            return self.observe(load(o.name, self.neighbour_address(o, j), o.dtype))
        return None

    def branch(self, make) -> tuple:
        """A one-statement body of an if or a loop (what it assigns is the caller's to drop)."""
        self.if_depth += 1
        try:
            return (self.nested(make),)
        finally:
            self.if_depth -= 1

    def private_index_of(self, p, uniform: bool) -> Expr:
        if uniform:
            return const(self.int(0, p.size - 1), I32)
        return binary(Op.MOD, self.t(), const(p.size, I32))

    def loop_plant(self, what: str) -> For:
        kind = "v_affine" if what == "for:per-thread" else "u_literal"
        start_e, stop_e, step_e, lo, hi, uniform, unit = self.loop_bounds(kind)
        name = self.fresh("j")
        self.loops.append(LoopRecord(name, lo, hi, uniform, unit))
        self.loopvars.add(name)
        self.vtypes[name] = I32
        before = set(self.defined)
        self.defined.add(name)
        saved = self.weight
        self.weight *= 2
        try:
            if what == "for:nested":
                body = (self.loop_plant("for:uniform"),)
            else:
                body = (self.nested(lambda: self.store(1) or self.assign(1)),)
        finally:
            self.weight = saved
            self.defined = before            # nothing assigned in a loop is defined after it
            self.loops.pop()
        return For(name, start_e, stop_e, step_e, body)


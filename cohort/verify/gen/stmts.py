"""Statements: stores (that are observed), assignments, ifs, loops (uniform and per
thread, affine starts of any stride, steps of either sign), probes, store groups that
read back what they wrote; the program's end (collectives: collectives.py)."""
from __future__ import annotations

from typing import Optional

from ...refimpl.ir import (
    Assign,
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
    fma,
    load,
    param,
    pload,
    var,
)
from .base import BOOL, F32, I32, U32, LoopRecord


class Statements:
    # ------------------------------------------------------------ stores
    def pick_slot(self, slots: list):
        """An output slot, preferring the least stored to so far: a later store to the same
        slot would hide this one's value."""
        least = min(self.slot_uses[(o.name, j)] for o, j in slots)
        if self.maybe(85):
            slots = [(o, j) for o, j in slots if self.slot_uses[(o.name, j)] == least]
        o, j = self.pick(slots)
        self.slot_uses[(o.name, j)] += 1
        return o, j

    def store_value(self, value: Expr, dt) -> Expr:
        """Convert `value` for a buffer of dtype dt, keeping every bit observable."""
        if value.dtype is dt:
            return value
        if value.dtype is F32 and dt.is_int:
            return self.canonical_bitcast(value, dt)
        if value.dtype.is_int and dt is F32:
            return bitcast(value, F32)
        return cast(value, dt)

    def own_store(self, o, j, value: Expr, addr: Optional[Expr] = None) -> Store:
        self.stored_at.append((o, j))
        return Store(o.name, addr if addr is not None else self.out_address(o, j, self.g(), self.t(), self.b()),
                     value)

    def free_slots(self, dtypes=None) -> list:
        return [(o, j) for o in self.outputs for j in range(o.slots)
                if (o, j) not in self.exchange and (dtypes is None or o.dtype in dtypes)]

    def store(self, depth: int) -> Optional[Store]:
        slots = self.free_slots()
        if not slots:
            return None
        o, j = self.pick_slot(slots)
        addr = self.out_address(o, j, self.g(), self.t(), self.b())
        if self.maybe(8):
            addr = cast(addr, U32)
        how = self.weighted([(4, "expr"), (2, "var"), (self.sw(1, "structure:store:read-modify-write"), "rmw")])
        if how == "var" and self.defined_vars(o.dtype):
            value = var(self.pick(self.defined_vars(o.dtype)), o.dtype)
        elif how == "rmw" and o.dtype.is_number:   # read-modify-write of the thread's own element
            value = binary(Op.ADD, load(o.name, addr, o.dtype), self.expr(o.dtype, depth))
        else:
            value = self.expr(o.dtype, depth)
        return self.own_store(o, j, value, addr)

    def combine(self, back: Expr, value: Expr) -> Expr:
        """A value read back from memory mixed into another of its type (both observed)."""
        if back.dtype is BOOL:
            return binary(Op.XOR, back, value)
        ops = [Op.ADD, Op.SUB, Op.MAX] if back.dtype is F32 else [Op.XOR, Op.ADD, Op.SUB]
        op = self.pick(ops)
        return binary(op, back, value) if self.maybe(50) else binary(op, value, back)

    def group_store(self, depth: int, aim: Optional[str] = None) -> Optional[tuple]:
        """y[K*p(g)], y[K*p(g) + 1], ..., y[K*p(g) + K-1] in a row: every slot of an
        interleaved output (the packet backend may fuse them into one shuffled vector
        store). Sometimes a later store of the group, or the statement after it, reads
        back a slot the group just wrote (no fusion then; a hazard if the lowering
        reorders the two). `aim` (or a tenth of the groups unaimed): a near miss, K stores
        that are not the group but look like it under one slip, none reading the buffer -
        `unordered` (slot 0, then the others out of order or one twice: a matcher that
        takes the later offsets in any order) or `sign-slip` (a slot spelled with `- c`
        that reads as the expected next slot if the sign of c slips)."""
        outs = [o for o in self.outputs if o.interleaved and all((o, j) not in self.exchange
                                                                  for j in range(o.slots))]
        if not outs:
            return None
        shifted = aim == "offset"      # a group whose slot constants are negative, zero or positive
        if shifted:
            aim = None
            outs = [o for o in outs if o.offset] or outs
        elif aim is None and self.maybe(10):
            aim = self.pick(["unordered", "sign-slip"])
        if aim is not None:
            outs = [o for o in outs if o.slots >= 3] or outs
        o = self.pick(outs)
        k = o.slots
        order = list(range(k))
        # slots as base + constants of any sign and split (issue 28); an output whose slots start
        # c elements in: `(pi(g) + d)*K + (c + j - d*K)` (offset_address), d of 1 or 2 mostly
        d = self.weighted([(1, 0), (3, 1), (2, 2)]) if o.offset and (shifted or self.maybe(60)) else None
        spelled = d is None and self.maybe(45)
        if aim == "unordered" and k >= 3:
            rest = list(range(1, k))
            if self.maybe(50):
                rest[-1] = rest[self.int(0, k - 3)]                       # one slot twice, the last one never
            else:
                while rest == sorted(rest):
                    rest = [rest[i] for i in self.src.permutation(k - 1)]
            order = [0] + rest
        elif aim == "sign-slip" and k >= 3:     # slots 0..k-1 in order but one, whose spelling reads as its own
            p = self.pick([p for p in range(1, k) if any((p + j) % 2 == 0 and j != p for j in range(k))])
            order[p] = self.pick([j for j in range(k) if (p + j) % 2 == 0 and j != p])
        elif spelled and self.maybe(50):
            order = self.src.permutation(k) if self.maybe(70) else order + [self.int(0, k - 1)]
        slips = 0
        group = []
        for pos, j in enumerate(order):
            value = self.expr(o.dtype, depth)
            if pos and aim is None and not shifted and self.maybe(50):
                back = load(o.name, self.spelled_address(o, self.pick(order[:pos]), spelled), o.dtype)
                value = self.combine(back, value)
            if aim == "sign-slip" and k >= 3 and j != pos:
                addr = self.slip_address(o, j, pos)
                slips += 1
            elif d is not None:
                addr = self.offset_address(o, j, d)
            else:
                addr = self.spelled_address(o, j, spelled and aim is None)
            group.append(self.own_store(o, j, value, addr))
        if aim == "unordered" and k >= 3 or slips:
            self.shapes.add(f"group:{aim}")
        if o.offset and aim is None and order == list(range(k)) and _trailing_const(group[0].index):
            self.shapes.add("group:offset")     # a group (it may fuse) whose first slot carries a constant
        if aim is not None:      # every slot observed at once, in witnesses `w` nothing reassigns
            for j in range(k):
                name = self.fresh("w")
                self.vtypes[name] = o.dtype
                self.defined.add(name)
                group.append(Assign(name, load(o.name, self.out_address(o, j, self.g(), self.t(), self.b()),
                                               o.dtype)))
        elif self.maybe(35):
            group.append(self.read_back(depth, (o, self.int(0, k - 1))))
        return tuple(group)

    def spelled_address(self, o, j: int, spelled: bool) -> Expr:
        """Slot j of an interleaved output at base = pi(g)*K, as `base + j` or, spelled, as
        `(base + c) + (j - c)`, `(base + 0) + j`, `(base + c) - (c - j)`, `(base - c) + (j + c)`
        (c of either sign): the same address, which a store-group matcher must see as base + j
        and never as base + something else."""
        if not spelled:
            return self.out_address(o, j, self.g(), self.t(), self.b())
        base = self.out_address(o, 0, self.g(), self.t(), self.b())
        c = self.pick([1, 2, -1, -2, 3, 0, -3, 5])
        how = self.pick(["split", "zero", "sub", "neg"])
        if how == "zero":
            return base + self.ci(0) + self.ci(j)
        if how == "sub":
            return binary(Op.SUB, base + self.ci(c), self.ci(c - j))
        if how == "neg":
            return binary(Op.SUB, base, self.ci(c)) + self.ci(j + c)
        return base + self.ci(c) + self.ci(j - c)

    def read_back(self, depth: int, slot=None) -> Assign:
        """v = y[own address] (op) expr, for an element stored earlier in this run."""
        o, j = slot if slot is not None else self.pick(self.stored_at)
        back = load(o.name, self.out_address(o, j, self.g(), self.t(), self.b()), o.dtype)
        existing = [v for v in self.defined_vars(o.dtype) if v not in self.loopvars and not v.startswith(("r", "w"))]
        if existing and self.maybe(50):
            name = self.pick(existing)
        else:
            name = self.fresh({F32: "f", I32: "i", U32: "u", BOOL: "c"}[o.dtype])
        value = self.combine(back, self.expr(o.dtype, depth)) if self.maybe(70) else back
        self.vtypes[name] = o.dtype
        self.defined.add(name)
        return Assign(name, value)

    def assign(self, depth: int) -> Assign:
        dt = self.weighted([(5, F32), (3, I32), (2, U32), (1, BOOL)])
        existing = sorted(v for v, d in self.vtypes.items() if d is dt and v not in self.loopvars
                          and not v.startswith(("r", "w")))
        # inside a branch or loop, prefer a variable defined outside it: its new value then
        # survives the statement and reaches the outputs (a fresh name would die with the body)
        outer = [v for v in existing if v in self.outer_defined]
        if self.nesting and outer and self.maybe(70):
            name = self.pick(outer)
        elif existing and self.maybe(50):
            name = self.pick(existing)
        else:
            name = self.fresh({F32: "f", I32: "i", U32: "u", BOOL: "c"}[dt])
        if name in self.defined and dt.is_number and self.maybe(40):
            op = self.pick([Op.ADD, Op.MUL, Op.MAX, Op.SUB, Op.MIN])
            value = binary(op, var(name, dt), self.expr(dt, depth))      # an accumulator
        else:
            value = self.expr(dt, depth)
        self.vtypes[name] = dt
        self.defined.add(name)
        return Assign(name, value)

    def pstore(self, depth: int) -> PStore:
        p = self.pick(self.privates)
        idx = self.private_index(p)
        if p.dtype.is_number and self.maybe(30):
            value = binary(Op.ADD, pload(p.name, idx, p.dtype), self.expr(p.dtype, depth))
        else:
            value = self.expr(p.dtype, depth)
        return PStore(p.name, idx, value)

    # ------------------------------------------------------------ control
    def condition(self) -> Expr:
        kind = self.weighted([(3, "any"), (self.sw(2, "access:if:divergent", "effect:masked"), "lanes"),
                              (1, "data"), (self.sw(2, "access:if:uniform", "effect:branch"), "uniform")])
        if kind == "any":
            return self.expr(BOOL, 2)
        if kind == "lanes":    # diverges inside a packet
            how = self.pick(["tlt", "gmask", "gmod", "gdiv"])
            if how == "tlt":
                return binary(Op.LT, self.t(), self.ci(self.int(0, self.B)))
            if how == "gdiv":    # g // k: neither uniform nor affine across a packet (k not a multiple of W)
                q = binary(Op.DIV, self.g(), self.ci(self.pick([3, 2, 5, 6, 12])))
                return binary(Op.EQ, binary(Op.AND, q, self.ci(1)), self.ci(0))
            if how == "gmask":
                return binary(Op.EQ, binary(Op.AND, self.g(), self.ci(self.int(1, 7))), self.ci(0))
            return binary(Op.EQ, binary(Op.MOD, self.g(), self.ci(self.int(2, 5))), self.ci(self.int(0, 1)))
        if kind == "data":
            dt = self.number_type()
            return binary(self.pick([Op.GT, Op.LT, Op.NE]), self.expr(dt, 1), self.literal(dt))
        how = self.weighted([(2, "int"), (1, "float")])
        if how == "int":
            return binary(self.pick([Op.LT, Op.EQ, Op.GE, Op.NE]), self.uniform_int(), self.literal(I32))
        sf = [n for n, d in self.scalars.items() if d is F32]
        fv = [v for v in self.defined_vars(F32) if v.startswith("r")]
        if sf or fv:
            x = param(self.pick(sf), F32) if sf and (not fv or self.maybe(50)) else var(self.pick(fv), F32)
            return binary(self.pick([Op.GT, Op.LE, Op.EQ]), x, self.literal(F32))
        return binary(Op.EQ, binary(Op.MOD, self.b(), self.ci(2)), self.ci(0))

    def nested(self, fn):
        if not self.nesting:
            self.outer_defined = set(self.defined)
        self.nesting += 1
        saved, self.stored_at = self.stored_at, []
        try:
            return fn()
        finally:
            self.nesting -= 1
            self.stored_at = saved

    def if_stmt(self, depth: int) -> If:
        cond = self.condition()
        before = set(self.defined)
        self.if_depth += 1
        then = self.nested(lambda: self.stmts(depth + 1))
        after_then = self.defined
        self.defined = set(before)
        orelse = self.nested(lambda: self.stmts(depth + 1)) if self.maybe(
            90 if self.boost("structure:if:else") > 1 else 60) else ()
        self.if_depth -= 1
        after_else = self.defined
        self.defined = before | (after_then & after_else)
        return If(cond, then, orelse)

    def loop_kind(self) -> str:
        u, v = self.boost("structure:for:uniform"), self.boost("structure:for:per-thread")
        return self.weighted([(3 * u, "u_literal"), (u if self.consts else 0, "u_const"),
                              (u if any(d is I32 for d in self.scalars.values()) else 0, "u_scalar"),
                              (3 * v, "v_block"), (2 * v, "v_count"), (v, "v_data"), (v, "v_start"),
                              (6 * v, "v_affine")])

    def loop_bounds(self, kind: str):
        """(start, stop, step expressions, variable range lo..hi, uniform, unit)."""
        one = self.ci(1)
        if kind == "u_literal":
            step = self.pick([1, 2, -1, 3, -2])
            start = self.int(-2, 4)
            trips = self.int(0, 4)
            stop = start + trips * step
            step_e = self.ci(step)
            if step > 0 and self.consts and self.maybe(20):     # a compile-time step from a Const
                c = self.pick(sorted(self.consts))
                step_e = param(c, I32) + self.ci(step)
                step = self.consts[c] + step
            last = start + max(trips - 1, 0) * step
            lo, hi = min(start, last), max(start, last)
            if step > 0:
                hi = max(start, stop - 1)
            else:
                lo = min(start, stop + 1)
            return self.ci(start), self.ci(stop), step_e, lo, hi, True, False
        if kind == "u_const":
            c = self.pick(sorted(self.consts))
            return self.ci(0), param(c, I32), one, 0, max(self.consts[c] - 1, 0), True, False
        if kind == "u_scalar":
            s = self.pick(sorted(n for n, d in self.scalars.items() if d is I32))
            return self.ci(0), binary(Op.AND, param(s, I32), self.ci(3)), one, 0, 2, True, False
        if kind == "v_block":           # for j in range(t, LIM, B): lanes consecutive
            lim = self.int(0, 3 * self.B)
            bs = builtin(Op.BLOCK_SIZE) if self.maybe(50) else self.ci(self.B)
            return self.t(), self.ci(lim), bs, 0, max(lim - 1, 0), False, True
        if kind == "v_count":
            how = self.pick(["g", "t", "gdiv"])
            k = self.int(2, 5)
            src = self.g() if how == "g" else self.t() if how == "t" else \
                binary(Op.DIV, self.g(), self.ci(self.pick([3, 2, 6])))
            return self.ci(0), binary(Op.MOD, src, self.ci(k)), one, 0, k - 2, False, False
        if kind == "v_data":
            dt = self.pick([I32, U32])
            e = self.expr(dt, 1)
            return self.ci(0), cast(binary(Op.AND, e, const(3, dt)), I32), one, 0, 2, False, False
        if kind == "v_start":           # per-thread start, uniform stop, maybe counting down
            k = self.int(2, 4)
            start_e = binary(Op.MOD, self.t(), self.ci(k))
            if self.maybe(50):
                step = self.pick([-1, -2, -3])
                return start_e, self.ci(-1), self.ci(step), 0, k - 1, False, False
            stop = self.int(0, 6)
            return start_e, self.ci(stop), self.ci(self.pick([1, 2])), 0, max(stop - 1, 0), False, False
        return self.affine_loop()

    def affine_loop(self):
        """range(a*t + c, stop, step): an affine start of any stride (negative too), a step
        of either sign and any size, and a stop that is uniform (lanes leave the loop at
        different iterations) or start + d (every lane runs the same count). At most
        about four trips per thread."""
        a = self.pick([2, 3, -2, 1, -1, 4, -3])
        use_g = self.maybe(25)
        base, R = (self.g(), self.npad - 1) if use_g else (self.t(), self.B - 1)
        c = self.int(-4, 6)
        if a == 2 and self.maybe(30):
            start_e = binary(Op.SHL, base, self.ci(1)) + self.ci(c)
        elif a == 1:
            start_e = base + self.ci(c)
        elif a == -1:
            start_e = self.ci(c) - base
        else:
            start_e = base * a + self.ci(c)
        smin, smax = c + min(0, a * R), c + max(0, a * R)
        step = self.pick([2, 3, -2, -3, 4, -4, 5, self.B, -self.B, 1, -1, 2 * self.B])
        s = abs(step)
        if self.maybe(50):              # a uniform stop, near the first lane's start or the last's
            # far: every lane runs, the first ones more (a packet's prefix split); <= ~36 trips
            far = not use_g and abs(a) * R <= 32 * s and self.maybe(40)
            if step > 0:
                stop = (smax if far else smin) + self.int(-s, 4 * s)
                lo, hi = smin, max(smin, stop - 1)
            else:
                stop = (smin if far else smax) - self.int(-s, 4 * s)
                lo, hi = min(smax, stop + 1), smax
            stop_e = self.ci(stop)
        else:                           # the same trip count in every lane
            d = self.int(-1, 4 * s) * (1 if step > 0 else -1)
            stop_e = start_e + self.ci(d)
            lo, hi = (smin, max(smin, smax + d - 1)) if step > 0 else (min(smax, smin + d + 1), smax)
        return start_e, stop_e, self.ci(step), lo, hi, False, a == 1

    def for_stmt(self, depth: int) -> For:
        name = self.fresh("j")
        start_e, stop_e, step_e, lo, hi, uniform, unit = self.loop_bounds(self.loop_kind())
        lit = lambda e: e.arg if e.op is Op.CONST else None
        self.loops.append(LoopRecord(name, lo, hi, uniform, unit, lit(start_e), lit(step_e)))
        self.loopvars.add(name)
        self.vtypes[name] = I32
        before = set(self.defined)
        self.defined.add(name)
        saved = self.weight
        if not uniform:                  # packets split per-thread loops into full and tail parts
            self.weight *= 2
        body = self.nested(lambda: self.stmts(depth + 1))
        self.weight = saved
        self.defined = before            # nothing assigned in a loop is defined after it
        self.loops.pop()
        return For(name, start_e, stop_e, step_e, body)

    # ------------------------------------------------------------ probes
    def signed_value(self, d: int) -> Expr:
        """An i32 value that is negative in some threads (and not always a multiple of 2^k)."""
        how = self.pick(["tid", "data", "expr"])
        if how == "tid":
            return self.t() - self.ci(self.int(1, self.B + 3))
        ints = [b for b in self.inputs if b.dtype is I32 and self.nest < 2]
        if how == "data" and ints:
            buf = self.pick(ints)
            return load(buf.name, self.in_index(buf), I32)
        return self.expr(I32, d) - self.ci(self.int(0, 9))

    def probe(self, depth: int) -> Optional[Store]:
        """Store an expression whose rounding, NaN handling, sign or range is easy to get
        wrong (a multiply feeding an add; min/max with NaN, ±0 or ±inf, alone or nested with
        a shared operand; a float to int
        conversion out of range; integer // and % of a negative value by a power of two;
        a float compare with a NaN operand) at the thread's own slot."""
        sw = self.sw
        kind = self.weighted([(2, "fma"), (sw(2, "op:MIN", "op:MAX"), "minmax"),
                              (sw(5, "op:MIN", "op:MAX"), "minmax_nest"), (sw(2, "op:CAST"), "convert"),
                              (sw(3, "op:DIV", "op:MOD"), "divmod"), (sw(3, "op:NE", "op:LE"), "compare"),
                              (2 if self.privates else 0, "private")])
        want = {"convert": (I32, U32), "divmod": (I32, U32, F32), "compare": (I32, U32, F32),
                "private": (F32, I32, U32, BOOL)}.get(kind, (F32,))
        slots = self.free_slots(want)
        if not slots:
            return None
        o, j = self.pick_slot(slots)
        d = max(depth, 1)
        if kind == "fma":
            a, b, c = self.ordinary(d), self.ordinary(d), self.ordinary(d)
            op = self.pick([Op.ADD, Op.SUB, Op.FMA])
            value = fma(a, b, c) if op is Op.FMA else binary(op, binary(Op.MUL, a, b), c)
        elif kind == "minmax":
            a, b = self.special(d), self.ordinary(d)
            if self.maybe(50):
                a, b = b, a
            value = binary(self.pick([Op.MIN, Op.MAX]), a, b)
        elif kind == "minmax_nest":    # min(min(s, b), s) and its relatives (issue 29)
            value = self.minmax_nest(d, lambda: self.ordinary(d))
        elif kind == "convert":
            x = self.special(d) if self.maybe(50) else self.ordinary(d) * const(self.pick([1e10, -3e9, 1.0]), F32)
            value = cast(x, o.dtype)
        elif kind == "divmod":        # quotient and remainder of one signed value: x // k * 64 + x % k
            x = self.signed_value(d)
            k = const(self.pick([2, 8, 4, 16, -2, -8, 3, 7, 1 << 20]), I32)
            value = self.store_value(binary(Op.DIV, x, k) * self.ci(64) + binary(Op.MOD, x, k), o.dtype)
        elif kind == "compare":       # all six predicates on one pair, one with NaN often: a bit each
            a = const(float("nan"), F32) if self.maybe(30) else self.special(d)
            b = self.ordinary(d)
            if self.maybe(50):
                a, b = b, a
            bits = None
            for i, op in enumerate((Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)):
                term = cast(binary(op, a, b), I32) * self.ci(1 << i)
                bits = term if bits is None else bits + term
            value = self.store_value(bits, o.dtype)
        else:                 # a private element read back: which thread's, which element's?
            p = self.pick(self.privates)
            value = self.store_value(pload(p.name, self.private_index(p), p.dtype), o.dtype)
        return self.own_store(o, j, value)

    # ------------------------------------------------------------ statement lists
    def stmt(self, depth: int):
        return self.src.span(self._stmt, depth)   # a span per statement (deletable whole)

    def _stmt(self, depth: int):
        sw = self.sw
        if_w = sw(2, "statement:If", "structure:if:else", "access:if:uniform", "access:if:divergent")
        if self.if_depth:
            if_w = sw(if_w, "structure:if:nested")
        for_w = (2, 1, 0)[len(self.loops)]
        for_w = sw(for_w, "statement:For", "structure:for:uniform", "structure:for:per-thread")
        if self.loops:
            for_w = sw(for_w, "structure:for:nested")
        table = [(5, "assign"), (sw(3, "access:store:contiguous", "access:store:scatter"), "store"), (4, "probe"),
                 (3, "group"), (2 if self.stored_at else 0, "readback"),
                 (sw(2, "statement:PStore", "access:pstore:contiguous", "access:pstore:scatter")
                  if self.privates else 0, "pstore"),
                 (if_w if depth < 3 else 0, "if"), (for_w if depth < 3 else 0, "for")]
        kind = self.weighted(table)
        self.stmt_budget -= self.weight
        edepth = self.int(1, 3)
        if kind in ("store", "probe", "group"):
            s = {"store": self.store, "probe": self.probe, "group": self.group_store}[kind](edepth)
            if s is not None:
                return s
            kind = "assign"
        if kind == "assign":
            return self.assign(edepth)
        if kind == "readback":
            return self.read_back(edepth)
        if kind == "pstore":
            return self.pstore(edepth)
        if kind == "if":
            return self.if_stmt(depth)
        return self.for_stmt(depth)

    def stmts(self, depth: int) -> tuple:
        count = self.int(1, 4 if depth == 0 else 3)
        out = []
        for _ in range(count):
            if self.stmt_budget <= 0:
                break
            s = self.stmt(depth)
            out.extend(s if isinstance(s, tuple) else (s,))
        return tuple(out)

    # ------------------------------------------------------------ collectives
    def lane_condition(self) -> Expr:
        """True in chosen lane positions of a packet: one thread, a lane of every packet
        (t mod W == r), a prefix or a suffix of the block. The one thread is often an end
        of the block: where a tree's operand order decides which value survives."""
        widths = [w for w in (4, 8, 16) if w <= self.B] or [1]
        how = self.pick(["one", "lane", "prefix", "suffix"])
        if how == "one":
            r = self.pick([0, self.B - 1]) if self.maybe(50) else self.int(0, self.B - 1)
            return binary(Op.EQ, self.t(), self.ci(r))
        if how == "lane":
            w = self.pick(widths)
            return binary(Op.EQ, binary(Op.AND, self.t(), self.ci(w - 1)), self.ci(self.int(0, w - 1)))
        k = self.ci(self.int(0, self.B))
        return binary(Op.LT, self.t(), k) if how == "prefix" else binary(Op.GE, self.t(), k)

    def mixed_condition(self, first_on: bool = False) -> Expr:
        """True in some lanes and false in others of every packet of 4 or more lanes (of the
        first packet, for a prefix): where an off lane must be left alone. `first_on`: true in
        thread 0."""
        how = self.pick(["mod", "bit", "prefix"])
        if how == "mod":
            m = self.pick([2, 3, 5])
            r = 0 if first_on else self.int(0, 1) * (m - 1)
            return binary(Op.EQ, binary(Op.MOD, self.t(), self.ci(m)), self.ci(r))
        if how == "bit":
            return binary(Op.EQ, binary(Op.AND, self.t(), self.ci(self.pick([1, 2]))), self.ci(0))
        return binary(Op.LT, self.t(), self.ci(self.int(1, min(self.B, 4) - 1)))

    # ------------------------------------------------------------ the end
    def sink(self, out) -> Optional[Store]:
        """One store of a hash of every variable still defined: a wrong value anywhere shows."""
        h = None
        for v in sorted(self.defined - self.loopvars):
            if not self.maybe(85):
                continue
            dt = self.vtypes[v]
            x = var(v, dt)
            term = self.canonical_bitcast(x, U32) if dt is F32 else cast(x, U32)
            h = term if h is None else binary(Op.XOR, h * const(16777619, U32), term)
        if h is None:
            return None
        return Store(out.name, self.out_address(out, 0, self.g(), self.t(), self.b()), h)

    def epilogue(self) -> list:
        """Stores that make values computed so far observable."""
        out = []
        top = sorted(v for v in self.defined if v not in self.loopvars)
        # collective results first: a wrong reduction shows in every thread's copy
        top = [v for v in top if v.startswith("r")] + [v for v in top if not v.startswith("r")]
        colls = sum(1 for v in top if v.startswith("r"))
        for _ in range(max(self.int(1, 4), min(colls, 4))):
            if not top:
                break
            v = top.pop(0 if colls else self.int(0, len(top) - 1))
            colls = max(colls - 1, 0)
            slots = self.free_slots()
            if not slots:
                break
            o, j = self.pick_slot(slots)
            out.append(self.own_store(o, j, self.store_value(var(v, self.vtypes[v]), o.dtype)))
        return out


def _trailing_const(e) -> int:
    """The sum of e's trailing `+ c` terms (a store group's first slot at k*t + c: its base
    pointer must take c in; the lowering's interleaved_offset_stores count)."""
    c = 0
    while e.op is Op.ADD and e.src[1].op is Op.CONST:
        c += e.src[1].arg
        e = e.src[0]
    return c

"""Index forms: in-bounds indices of input buffers and private arrays, and the
conflict-free output addresses (a bijection of [0, M) per output slot)."""
from __future__ import annotations

from math import gcd
from typing import Optional

from ...refimpl.ir import (
    Assign,
    DType,
    Expr,
    For,
    If,
    Op,
    PStore,
    binary,
    builtin,
    cast,
    const,
    load,
    param,
    pload,
    select,
    unary,
    var,
)
from .base import BOOL, F32, I32, MASK31, U32, OutputLayout, PrivateArray, RangedExpr
from .case import BufferSpec


def trunc_div(a: int, b: int) -> int:
    """C division (the IR's `//` on integers): truncation towards zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_rem_range(lo: int, hi: int, m: int) -> tuple:
    """The range of x % m (C remainder: the sign of x) for x in [lo, hi], m > 0."""
    if lo > -m and hi < m:
        return lo, hi
    return (-(m - 1) if lo < 0 else 0), ((m - 1) if hi > 0 else 0)


class Indices:
    # ------------------------------------------------------------ index forms
    def base(self, cands: list):
        """One of `cands`; inside a loop, the innermost loop variable half the time (an index
        that moves with the loop: where loop bounds and strides show)."""
        if self.loops and self.maybe(50):
            inner = [c for c in cands if c[0].expr.op is Op.VAR and c[0].expr.arg == self.loops[-1].name]
            if inner:
                return inner[0]
        return self.pick(cands)

    def bases(self) -> list:
        """i32 expressions with known ranges: (range, per-lane stride 1?)."""
        out = [(RangedExpr(self.g(), 0, self.npad - 1), True), (RangedExpr(self.t(), 0, self.B - 1), True),
               (RangedExpr(self.b(), 0, self.nblocks - 1), False)]
        for lp in self.loops:            # (possibly negative: affine starts, steps below -1)
            out.append((RangedExpr(var(lp.name, I32), lp.lo, lp.hi), lp.unit))
        return out

    def uniform_int(self) -> Expr:
        """An i32 value that is the same in every thread of a block (maybe negative)."""
        opts = [(2, "literal"), (2, "block")]
        sc = [n for n, d in self.scalars.items() if d is I32]
        opts.append((2 if sc else 0, "scalar"))
        ul = [lp for lp in self.loops if lp.uniform]
        opts.append((2 if ul else 0, "loop"))
        coll = [v for v in self.defined_vars(I32) if v.startswith("r")]
        opts.append((1 if coll else 0, "collective"))
        opts.append((1 if self.consts else 0, "constparam"))
        kind = self.weighted(opts)
        if kind == "literal":
            return self.literal(I32)
        if kind == "block":
            return self.b()
        if kind == "scalar":
            return param(self.pick(sc), I32)
        if kind == "loop":
            return var(self.pick(ul).name, I32)
        if kind == "collective":
            return var(self.pick(coll), I32)
        return param(self.pick(sorted(self.consts)), I32)

    def length_expr(self, name: str, L: int) -> Expr:
        return builtin(Op.BUFLEN, name) if self.maybe(40) else self.ci(L)

    def forced(self, e: Expr, name: str, L: int) -> Expr:
        """In [0, L) whatever e is: (e & 0x7fffffff) % L, or ((e % L) + L) % L (where the
        remainder sees negative operands)."""
        if self.maybe(30):
            n = self.length_expr(name, L)
            return binary(Op.MOD, binary(Op.MOD, e, n) + n, n)
        return binary(Op.MOD, binary(Op.AND, e, self.ci(MASK31)), self.length_expr(name, L))

    def in_index(self, buf: BufferSpec) -> Expr:
        self.nest += 1
        try:
            return self._in_index(buf)
        finally:
            self.nest -= 1

    def _in_index(self, buf: BufferSpec) -> Expr:
        L = buf.length
        sw = self.sw
        if self.wrap_loops(L) and self.aims("wrap:loop") and self.maybe(60):
            form = "wrapped"
        else:
            form = self.weighted([(sw(3, "access:load:uniform"), "uniform"),
                                  (sw(4, "access:load:contiguous"), "contiguous"),
                                  (sw(3, "access:load:strided"), "strided"), (3, "divided"), (1, "reversed"),
                                  (sw(3, "access:load:gather", "effect:per-lane"), "gather"), (1, "gather_u32"),
                                  (1, "clamp"), (sw(2, "access:load:contiguous", "op:MOD"), "wrapped"),
                                  (sw(3, "op:MOD", "op:DIV", "op:SHR"), "signed"),
                                  (1 if self.perm is not None else 0, "perm")])
        idx = self.index_form(form, buf.name, L)
        if idx is None:
            idx = self.forced(self.g() * self.int(1, 9) + self.ci(self.int(0, 5)), buf.name, L)
        if idx.dtype is I32 and self.maybe(8):
            idx = cast(idx, U32)                                     # a u32 index, same value
        return idx

    def wrap_probe(self) -> list:
        """`wrap:loop` made on purpose (steer.SHAPES): w = 0; for j in range(0, T): w = w +
        x[(t + j) % k + c], k 8 or 16, on an f32 input; w is a witness (nothing reassigns it)
        that the hash output takes. On most trips the packet's lanes wrap inside it, so only a
        right alignment of j (from its start and its step) lowers the load as the interpreter
        reads it."""
        xs = [b for b in self.inputs if b.dtype is F32 and b.length >= 8]
        ks = [k for k in (8, 16) if k <= self.B]
        if not xs or not ks:
            return []
        x = self.pick(xs)
        k = self.pick([k for k in ks if k <= x.length] or ks[:1])
        j, w = self.fresh("j"), self.fresh("w")
        idx = binary(Op.MOD, self.t() + var(j, I32), self.ci(k)) + self.ci(self.int(0, x.length - k))
        loop = For(j, self.ci(0), self.ci(self.int(2, 5)), self.ci(1),
                   (Assign(w, binary(Op.ADD, var(w, F32), load(x.name, idx, F32))),))
        self.vtypes[w] = F32
        self.defined.add(w)
        self.shapes.add("wrap:loop")
        return [Assign(w, const(0.0, F32)), loop]

    def _witness_load(self, lo: int, hi: int):
        """(an f32 input that holds [lo, hi] shifted in, the shift), or None."""
        xs = [b for b in self.inputs if b.dtype is F32 and b.length >= hi - lo + 1]
        if not xs:
            return None
        # an input of finite values where there is one: a NaN in a NaN-rich input would make
        # the sum NaN whatever trips ran
        x = self.pick([b for b in xs if b.fill == "finite"] or xs)
        return x, self.int(-lo, x.length - 1 - hi)

    def trip_witness(self, j: str) -> tuple:
        """(init, update) of an i32 witness of a loop's trips, `h = h * 5 + j`: every trip, its
        order and its variable's value show whatever the inputs hold."""
        h = self.fresh("w")
        self.vtypes[h] = I32
        self.defined.add(h)
        return Assign(h, self.ci(self.int(0, 9))), Assign(h, var(h, I32) * self.ci(5) + var(j, I32))

    def const_loop_probe(self) -> list:
        """`loop:const-var` made on purpose (steer.SHAPES): bounds that are compile-time constants
        reached through top-level variables set once (`n = 5; for j in range(s, n, step)`, the
        lowering's constant trip count, loops.constant_trips, and its full unrolling at O3), a step
        of either sign and size; every trip adds x[j + c] into a witness."""
        start, step, trips = self.int(-2, 4), self.pick([2, 3, -1, -2, 1, 4]), self.int(1, 5)
        stop, last = start + trips * step, start + (trips - 1) * step
        got = self._witness_load(min(start, last), max(start, last))
        if got is None:
            return []
        x, shift = got
        hi_name, j, w = self.fresh("w"), self.fresh("j"), self.fresh("w")
        out = [Assign(hi_name, self.ci(stop))]      # a `w` name: nothing reassigns it
        start_e = self.ci(start)
        if self.maybe(50):
            lo_name = self.fresh("w")
            out.append(Assign(lo_name, self.ci(start)))
            start_e = var(lo_name, I32)
            self.vtypes[lo_name] = I32
            self.defined.add(lo_name)
        self.vtypes[hi_name], self.vtypes[w] = I32, F32
        self.defined.update((hi_name, w))
        h0, h = self.trip_witness(j)
        body = (Assign(w, binary(Op.ADD, var(w, F32), load(x.name, var(j, I32) + self.ci(shift), F32))), h)
        self.shapes.add("loop:const-var")
        seen = self.witness(var(h.name, I32))      # to an output of its own (Plants.witness)
        return out + [Assign(w, const(0.0, F32)), h0, For(j, start_e, var(hi_name, I32), self.ci(step), body), seen]

    def prefix_probe(self) -> list:
        """`loop:prefix` made on purpose (steer.SHAPES): range(a*t + c, stop, step) with a uniform
        stop that the lanes of a packet pass at different iterations (a full packet's loop runs
        the trips every lane takes, then the rest on a prefix of the lanes: loops.py), a, c and
        the step of every sign (the prefix split is for a > 0 and step > 0, the others take the
        general loop); every trip adds x[j + c'] into a witness."""
        # three in four of the split's kind (a > 0 and step > 0, a of 2 or more mostly: the
        # lanes still running are then a rounded quotient), the rest of the other signs
        if self.maybe(75):
            a, step = self.pick([2, 3, 4, 2, 3, 1]), self.pick([1, 2, 3, 5, 2, 4])
        else:
            a, step = self.pick([-2, -1, 2, 3, -3]), self.pick([-1, -2, 1, 2, -3])
            step = -abs(step) if a > 0 else step
        c = self.int(-6, 6)
        R = min(self.B, 16) - 1                        # the lanes of the first packets
        smin, smax = c + min(0, a * R), c + max(0, a * R)
        if step > 0:                                   # the last lanes stop first (a > 0)
            stop = smin + self.int(1, max(2, abs(a) * 8 + 2 * step))
            lo, hi = min(smin, c + min(0, a * (self.B - 1))), stop - 1
        else:
            stop = smax - self.int(1, max(2, abs(a) * 8 + 2 * abs(step)))
            lo, hi = stop + 1, max(smax, c + max(0, a * (self.B - 1)))
        if hi < lo:
            return []
        got = self._witness_load(lo, hi)
        if got is None:
            return []
        x, shift = got
        j, w = self.fresh("j"), self.fresh("w")
        t = self.t()
        start_e = t + self.ci(c) if a == 1 else self.ci(c) - t if a == -1 else t * a + self.ci(c)
        self.vtypes[w] = F32
        self.defined.add(w)
        h0, h = self.trip_witness(j)
        body = (Assign(w, binary(Op.ADD, var(w, F32), load(x.name, var(j, I32) + self.ci(shift), F32))), h)
        self.shapes.add("loop:prefix")
        seen = self.witness(var(h.name, I32))
        return [Assign(w, const(0.0, F32)), h0, For(j, start_e, self.ci(stop), self.ci(step), body), seen]

    def private_probe(self) -> list:
        """`private:store-masked` made on purpose (steer.SHAPES): a private store under a condition
        that turns lanes off inside a packet, at a uniform index (the cohort layout puts the
        lanes' elements side by side: one vector store under the mask) and at a per-thread one (a
        scatter), each element read back into a witness: an off lane must keep its old
        element (zero, or what the array was filled with)."""
        if not self.privates:
            return []
        p = self.pick(self.privates)
        out = []
        # both forms in each probe, the uniform one first (its lanes' elements side by side)
        for idx in (self.ci(self.int(0, p.size - 1)), binary(Op.MOD, self.t(), self.ci(p.size))):
            # mostly a value that differs from the element it replaces in every bit pattern (its
            # negation), so an off lane's element overwritten shows whatever the array held
            old = pload(p.name, idx, p.dtype)
            value = self.expr(p.dtype, 1) if self.maybe(30) else \
                unary(Op.NOT if p.dtype in (BOOL, I32, U32) else Op.NEG, old)
            store = If(self.mixed_condition(), (PStore(p.name, idx, value),))
            w = self.fresh("w")                  # defined after the store's value is drawn
            self.vtypes[w] = p.dtype
            self.defined.add(w)
            seen = self.witness(var(w, p.dtype))     # to an output of its own (Plants.witness)
            out += [store, Assign(w, pload(p.name, idx, p.dtype)), seen]
        self.shapes.add("private:store-masked")
        return out

    def guard_probe(self) -> list:
        """A loaded index used behind guards that bound it on both sides (bounds.py proves such
        a data-dependent variable whatever its definition): v = i32(x[i] * k) + c, then
        w = y[v if v >= 0 and v < L else s] or `if v >= 0 and v < L: w = y[v]`. Never out of
        bounds: a loaded index past one side would fail in several threads, an error whose
        first thread depends on the order threads run in (boundary.py makes one-past programs
        whose error is one fact; tests/test_plants28.py tries a one-sided guard directly)."""
        xs = [b for b in self.inputs if b.dtype is F32 and b.fill == "finite"]
        ys = [b for b in self.inputs if b.dtype is F32]
        if not xs or not ys:
            return []
        x, y = self.pick(xs), self.pick(ys)
        v, w = self.fresh("v"), self.fresh("w")
        L = y.length
        scale = const(float(self.pick([2.0, 8.0, 64.0, float(L)])), F32)
        value = cast(binary(Op.MUL, load(x.name, self.in_index(x), F32), scale), I32) + self.ci(self.int(-3, 3))
        vv = var(v, I32)
        cond = select(binary(Op.GE, vv, self.ci(0)), binary(Op.LT, vv, self.ci(L)), const(False, BOOL))
        self.vtypes[v], self.vtypes[w] = I32, F32
        self.defined.update((v, w))
        self.shapes.add("guard:loaded")
        if self.maybe(50):
            spare = self.ci(self.int(0, L - 1))
            return [Assign(v, value), Assign(w, load(y.name, select(cond, vv, spare), F32))]
        return [Assign(v, value), Assign(w, const(0.0, F32)),
                If(cond, (Assign(w, load(y.name, vv, F32)),))]

    def either_side_probe(self) -> list:
        """`store:either-side` made on purpose (steer.SHAPES): `if c: y[i] = a` / `else: y[i] =
        b`, which a packet build lowers as one store of `a if c else b` (stmts.store_either_side),
        and beside it the same with the else side at another slot of y (two stores: a lowering
        that took them for one would store the else side's value at the then side's index)."""
        slots = [(o, j) for o in self.outputs if not o.interleaved for j in range(o.slots)
                 if (o, j) not in self.exchange]
        if not slots:
            return []
        # the then side at a slot whose address is g (side by side across the lanes: one store),
        # of an output with another slot where there is one (the second pair's else side)
        ids = [(o, j) for o, j in slots if o.forms[j][0] == "id"]
        more = [(o, j) for o, j in ids if sum(x is o for x, _ in slots) >= 2]
        o, j = self.pick(more or ids or slots)
        others = [k for x, k in slots if x is o and k != j]
        out = []
        for k in [j] + ([self.pick(others)] if others else []):
            # the second pair diverges inside a packet and its values load nothing (an unproven
            # load would keep it two stores in any build, a wrong lowering's included)
            cond = self.condition() if k == j else self.lane_condition()
            # each side's value its own per lane (a lane term g*a + c, a different a per side), so
            # the fused store's select of the two, each evaluated under its own lanes, shows a
            # lane given the other side's value or the other lane's (stmts.store_either_side)
            a1 = self.pick([1, 3, -1, 5])
            a2 = self.pick([a for a in (2, -3, 7, -1) if a != a1])
            then = self.own_store(o, j, self.store_value(self.lane_value(o.dtype, a1, k == j), o.dtype))
            orelse = self.own_store(o, k, self.store_value(self.lane_value(o.dtype, a2, k == j), o.dtype))
            self.slot_uses[(o.name, j)] += 1
            self.slot_uses[(o.name, k)] += 1
            out.append(If(cond, (then,), (orelse,)))
        self.shapes.add("store:either-side")
        return out

    def lane_value(self, dt, a: int, drawn: bool) -> Expr:
        """A value of dt that differs from lane to lane and loads nothing: g*a + c as dt, added
        to (xor'ed with, for bits) a drawn expression where `drawn`."""
        term = self.g() * self.ci(a) + self.ci(self.int(-9, 9))
        if dt is BOOL:
            return binary(Op.EQ, binary(Op.AND, term, self.ci(1)), self.ci(self.int(0, 1)))
        if dt is F32:
            term = binary(Op.MUL, cast(term, F32), const(self.pick([0.5, 1.25, -0.75]), F32))
            return binary(Op.ADD, self.expr(F32, 1), term) if drawn else term
        term = cast(term, dt)
        return binary(Op.XOR, self.expr(dt, 1), term) if drawn else term

    def wrap_loops(self, L: int) -> list:
        """Uniform loops from 0 by 1 that take a second trip: (t + j) % k with such a j wraps
        inside a packet whenever j is not a multiple of the packet (`wrap:loop`, steer.SHAPES;
        a loop variable's alignment must come from its start and its step)."""
        if min(L, self.B) < 8:
            return []
        return [x for x in self.loops if x.uniform and x.start == 0 and x.step == 1 and x.hi >= 1]

    def shifted(self, e: Expr, lo: int, hi: int, L: int) -> Optional[Expr]:
        """e + c for a literal c that brings [lo, hi] inside [0, L), or None."""
        c_lo = max(0, -lo)
        if hi + c_lo > L - 1:
            return None
        c = self.int(c_lo, L - 1 - hi)
        return e + self.ci(c) if c or self.maybe(50) else e

    def index_form(self, form: str, name: str, L: int) -> Optional[Expr]:
        if form == "uniform":
            how = self.weighted([(2, "literal"), (3, "forced")])
            if how == "literal":
                return self.ci(self.int(0, L - 1))
            return self.forced(self.uniform_int(), name, L)
        if form in ("contiguous", "strided", "divided", "reversed"):
            cands = self.bases()
            if form == "contiguous":
                cands = [c for c in cands if c[1]] or cands
            r, _ = self.base(cands)
            if form == "contiguous":
                e, lo, hi = r.expr, r.lo, r.hi
            elif form == "strided":
                k = self.pick([2, 3, 2, 4])
                e = binary(Op.SHL, r.expr, self.ci(1)) if k == 2 and self.maybe(30) else r.expr * k
                lo, hi = r.lo * k, r.hi * k
            elif form == "divided":
                k = self.pick([3, 2, 4, 5, 8, 16, 32])
                e, lo, hi = binary(Op.DIV, r.expr, self.ci(k)), trunc_div(r.lo, k), trunc_div(r.hi, k)
            else:                       # L-1-c - r
                c_lo = max(0, -r.lo)
                if r.hi + c_lo > L - 1:
                    return None
                c = self.int(c_lo, L - 1 - r.hi)
                return self.ci(L - 1 - c) - r.expr
            return self.shifted(e, lo, hi, L)
        if form == "signed":
            return self.signed_form(L)
        if form == "wrapped":
            # (t [+ j] + c) % k, k a multiple of the packet: contiguous inside a packet unless
            # it wraps there, which depends on what divides t + j (a loop from 0 adds 1, 2, ...)
            wl = self.wrap_loops(L)
            if wl and self.aims("wrap:loop"):      # made on purpose: (t + j) % k, j from 0 by 1
                k = self.pick([k for k in (8, 16) if k <= min(L, self.B)])
                self.shapes.add("wrap:loop")
                return self.shifted(binary(Op.MOD, self.t() + var(self.pick(wl).name, I32), self.ci(k)), 0, k - 1, L)
            k = self.pick([8, 16, 32, 64])
            if k > L:
                return None
            e = self.t() if self.maybe(60) else self.g()
            lp = [x for x in self.loops if x.uniform and x.lo >= 0]
            j = self.pick(lp) if lp and self.maybe(70) else None
            if j is not None:
                e = e + var(j.name, I32)
            inner = self.maybe(40)
            if j in wl and not inner and k <= self.B:
                self.shapes.add("wrap:loop")       # the same shape by chance
            e = binary(Op.MOD, e + self.ci(self.int(1, 3)) if inner else e, self.ci(k))
            return self.shifted(e, 0, k - 1, L)
        if form == "gather":
            how = self.weighted([(2, "affine"), (3, "any")])
            if how == "affine":
                e = self.g() * self.int(2, 41) + self.ci(self.int(0, 9))
            else:
                e = self.expr(I32, 2)
            return self.forced(e, name, L)
        if form == "gather_u32":
            return binary(Op.MOD, self.expr(U32, 2), const(L, U32))
        if form == "clamp":
            e = self.expr(I32, 2)
            return binary(Op.MIN, binary(Op.MAX, e, self.ci(0)), self.ci(L - 1))
        if form == "perm":
            p = load(self.perm.name, self.g() if self.perm.length >= self.npad else
                     self.forced(self.g(), self.perm.name, self.perm.length), I32)
            return p if L >= self.perm.length else binary(Op.MOD, p, self.ci(L))
        raise AssertionError(form)

    def signed_form(self, L: int) -> Optional[Expr]:
        """(r - d) % k, (r - d) // k or (r - d) >> s, then shifted into [0, L): index
        arithmetic whose %, // and >> see negative operands in some threads (C remainder
        and truncating division, arithmetic shift), exact ranges known."""
        r, _ = self.base(self.bases())
        d = self.int(1, max(1, r.hi - r.lo + 2))
        x, lo, hi = r.expr - self.ci(d), r.lo - d, r.hi - d
        how = self.weighted([(self.boost("op:MOD") * 3, "mod"), (self.boost("op:DIV") * 3, "div"),
                             (self.boost("op:SHR") * 2, "shr")])
        if how == "mod":
            k = self.pick([2, 4, 3, 8, 5, 16, -4, -3])
            e = binary(Op.MOD, x, self.ci(k))
            lo, hi = c_rem_range(lo, hi, abs(k))
        elif how == "div":
            k = self.pick([2, 4, 3, 8, -2, 16, -3])
            e = binary(Op.DIV, x, self.ci(k))
            lo, hi = sorted((trunc_div(lo, k), trunc_div(hi, k)))
        else:
            s = self.int(1, 4)
            e = binary(Op.SHR, x, self.ci(s))
            lo, hi = lo >> s, hi >> s
        return self.shifted(e, lo, hi, L)

    def private_index(self, p: PrivateArray) -> Expr:
        self.nest += 1
        try:
            return self._private_index(p)
        finally:
            self.nest -= 1

    def _private_index(self, p: PrivateArray) -> Expr:
        kind = self.weighted([(self.sw(3, "structure:private:uniform-index", "access:pload:contiguous",
                                       "access:pstore:contiguous"), "uniform"),
                              (self.sw(3, "structure:private:per-thread-index", "access:pload:gather",
                                       "access:pstore:scatter"), "thread")])
        size = p.size
        if kind == "uniform":
            ul = [lp for lp in self.loops if lp.uniform and 0 <= lp.lo and lp.hi < size]
            how = self.weighted([(2, "literal"), (3 if ul else 0, "loop"), (2, "forced")])
            if how == "literal":
                return self.ci(self.int(0, size - 1))
            if how == "loop":
                return var(self.pick(ul).name, I32)
            return binary(Op.MOD, binary(Op.AND, self.uniform_int(), self.ci(MASK31)), self.ci(size))
        how = self.weighted([(2, "tid"), (2, "affine"), (1, "divided"), (2, "any"), (2, "signed")])
        if how == "tid":
            return binary(Op.MOD, self.t(), self.ci(size))
        if how == "divided":
            return binary(Op.MOD, binary(Op.DIV, self.g(), self.ci(self.pick([3, 2, 5]))), self.ci(size))
        if how == "affine":
            return binary(Op.MOD, self.g() * self.int(1, 7) + self.ci(self.int(0, 5)), self.ci(size))
        if how == "signed":          # ((t - d) % size + size) % size: a negative dividend first
            r, _ = self.pick(self.bases())
            x = r.expr - self.ci(self.int(1, 40))
            return binary(Op.MOD, binary(Op.MOD, x, self.ci(size)) + self.ci(size), self.ci(size))
        return binary(Op.MOD, binary(Op.AND, self.expr(I32, 2), self.ci(MASK31)), self.ci(size))

    # ------------------------------------------------------------ outputs
    def _out_spec(self, o: OutputLayout) -> BufferSpec:
        return BufferSpec(o.name, o.dtype, o.slots * o.region + o.offset, o.fill)

    def make_output(self, name: str, dt: DType, interleave: Optional[int] = None,
                    offset: Optional[bool] = None) -> OutputLayout:
        """An output of K slots per thread; `interleave`: K slots side by side at pi(g)*K + j, pi
        the identity (a store group's stride K, where groups fuse). An interleaved output may
        start its slots c elements in (pi(g)*K + c + j: a store group whose first slot carries
        a constant; `offset`: always)."""
        K = interleave or self.weighted([(3, 1), (3, 2), (2, 3), (1, 4)])
        interleaved = K > 1 and (interleave is not None or self.maybe(40))
        nforms = 1 if interleaved else K
        # (the stress check's launches are large: an affine or xor form's products would overflow)
        kinds = ["id"] * nforms if interleave or getattr(self, "stress", False) else [self.weighted([(self.sw(3, "access:store:contiguous"), "id"),
                                (self.sw(2, "access:store:scatter"), "affine"), (1, "rev"), (1, "xor"),
                                (1 if self.perm is not None else 0, "perm"), (1, "transpose"),
                                (1, "inblock")]) for _ in range(nforms)]
        if "xor" in kinds:
            M = 1
            while M < self.npad:
                M *= 2
        else:
            M = self.npad + self.int(0, 3)
        forms = []
        for kind in kinds:
            if kind == "affine":
                a = self.int(1, 2 * M + 1)
                while gcd(a, M) != 1:
                    a += 1
                forms.append((kind, (a, self.int(0, M - 1))))
            elif kind == "xor":
                forms.append((kind, (self.int(0, M - 1),)))
            elif kind == "inblock":
                forms.append((kind, (2 * self.int(0, self.B) + 1, self.int(0, self.B - 1))))
            else:
                forms.append((kind, ()))
        fill = "bytes" if dt is BOOL and self.maybe(50) else "data"   # unstored bool bytes stay as they were
        off = self.int(1, 2 * K) if interleaved and (offset or offset is None and self.maybe(30)) else 0
        return OutputLayout(name, dt, K, M, interleaved, forms, fill, off)

    def bijection(self, form, M: int, g: Expr, t: Expr, b: Expr) -> Expr:
        kind, ps = form
        if kind == "id":
            return g
        if kind == "rev":
            return self.ci(M - 1) - g
        if kind == "affine":
            a, c = ps
            return binary(Op.MOD, g * a + self.ci(c), self.ci(M))
        if kind == "xor":
            return binary(Op.XOR, g, self.ci(ps[0]))
        if kind == "perm":
            return load(self.perm.name, g, I32)
        if kind == "transpose":
            return t * self.nblocks + b
        if kind == "inblock":
            a, c = ps
            return b * self.B + binary(Op.AND, t * a + self.ci(c), self.ci(self.B - 1))
        raise AssertionError(kind)

    def out_address(self, o: OutputLayout, j: int, g: Expr, t: Expr, b: Expr) -> Expr:
        if o.interleaved:
            a = self.bijection(o.forms[0], o.region, g, t, b) * o.slots
            return a + self.ci(j + o.offset) if j + o.offset else a
        a = self.bijection(o.forms[j], o.region, g, t, b)
        return a + self.ci(j * o.region) if j else a

    def offset_address(self, o, j: int, d: int) -> Expr:
        """Slot j of an interleaved output whose slots start c = o.offset elements in, as
        `(pi(g) + d)*K + (c + j - d*K)`: the constant negative, zero or positive by slot (d >= 1:
        the group's first slots below the spelled base, the later ones at or above it)."""
        a = self.bijection(o.forms[0], o.region, self.g(), self.t(), self.b())
        base = (a + self.ci(d)) * o.slots if d else a * o.slots
        c = o.offset + j - d * o.slots
        return base + self.ci(c) if c or self.maybe(30) else base

    def slip_address(self, o, j: int, seen_as: int) -> Expr:
        """Slot j of an interleaved output at base = pi(g)*K, spelled `(base + c) - (c - j)` or
        `(base - c) + (j + c)` with c chosen so that the address reads as base + seen_as when a
        `- c` is taken as `+ c` (j + seen_as even)."""
        base = self.out_address(o, 0, self.g(), self.t(), self.b())
        if self.maybe(50):
            c = (seen_as + j) // 2
            return binary(Op.SUB, base + self.ci(c), self.ci(c - j))
        c = (seen_as - j) // 2
        return binary(Op.SUB, base, self.ci(c)) + self.ci(j + c)

    def neighbour_address(self, o: OutputLayout, j: int) -> Expr:
        """Slot j of thread (t + d) mod B of this block: written in an earlier phase."""
        d = self.int(1, self.B - 1) if self.B > 1 else 0
        bs = builtin(Op.BLOCK_SIZE) if self.maybe(50) else self.ci(self.B)
        t2 = binary(Op.MOD, self.t() + self.ci(d), bs)
        g2 = self.g() - self.t() + t2
        return self.out_address(o, j, g2, t2, self.b())

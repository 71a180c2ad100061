"""The launch-time half of the bounds proof (bounds.py): the IR that computes, once per
argument block, each proven access's index interval over the whole launch and checks it
against its buffer's length (or its shared array's size)."""
from __future__ import annotations

from llvmlite import ir

from ..refimpl.ir import DType, Expr, For, Op
from ..refimpl.opdefs import OPDEFS
from .bounds import I64, RANGE, Bounds, const_int

_GLOBAL_ID = Expr(Op.GLOBAL_ID, DType.I32)


def prologue(bounds: Bounds, b: ir.IRBuilder, n64, block: int, lens: dict, scalars: dict):
    """IR computing whether every boundable access of `bounds`' kernel, in a launch of n64 threads,
    stays inside its buffer (an i1). `lens`: buffer -> i64 length; `scalars`: name -> i32 bits."""
    return _Emitter(bounds, b, n64, block, lens, scalars).verdict()


def _inside_operands(e: Expr) -> bool:
    """Whether e's interval lies inside its operands' (each checked for its type's range
    on its own), so that e cannot have wrapped when they did not: a variable, min, max, a select's arms,
    a remainder, a mask, a right shift, a division by anything but -1 (the divisor is a
    constant or proven >= 1). Only these skip the range check; +, -, *, <<, negation, abs
    and casts keep it. About half of a large proof's checks (attention) were these."""
    same = lambda *xs: all(x.dtype is e.dtype for x in xs)
    if e.op is Op.VAR:      # the hull of its definitions' intervals, each checked (a loop
        return True         # variable's: start..stop - 1, empty when the loop cannot run)
    if e.op in (Op.MIN, Op.MAX):
        return same(*e.src)
    if e.op is Op.SELECT:
        return same(e.src[1], e.src[2])
    if e.op in (Op.MOD, Op.SHR):
        return same(e.src[0])
    if e.op is Op.AND:
        return any(const_int(x) is not None and const_int(x) >= 0 for x in e.src) and same(*e.src)
    if e.op is Op.DIV:
        c = const_int(e.src[1])
        return same(e.src[0]) and (c is None or c >= 1 or c <= -2)
    return False


class _Emitter:
    def __init__(self, bounds: Bounds, b, n64, block: int, lens: dict, scalars: dict, bad=None, narrow=None,
                 outer=None):
        self.bd, self.b, self.n, self.B, self.lens, self.scalars = bounds, b, n64, block, lens, scalars
        # the threads that run: n, or every thread of the started blocks of a cooperative kernel
        # (DESIGN §2), whose global ids reach ceil(n / B) * B - 1
        self.live = (b.mul(b.udiv(b.add(n64, self.c(block - 1)), self.c(block)), self.c(block))
                     if bounds.k.cooperative else n64) if outer is None else outer.live
        # memo keyed by the expression's structure: the same index arithmetic written at several
        # accesses (attention's c0*D + d ...) is emitted once, not left for LLVM to merge at O3
        self.memo, self.vars = {}, {}
        self.bad = [] if bad is None else bad
        self.narrow = narrow or {}     # variable -> its interval under the access's guards
        self.outer = outer             # the unguarded emitter (for guard bounds and variables)
        self.guarded_by = {}           # the accesses' guard facts -> their emitter (outer only)
        # shared with the outer emitter: id(expr) -> its variables, and -> its structure's number
        self.free, self.keys, self.interned = ({}, {}, {}) if outer is None else (outer.free, outer.keys,
                                                                                 outer.interned)

    def c(self, v: int):
        return ir.Constant(I64, v)

    def smin(self, x, y):
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    def smax(self, x, y):
        return self.b.select(self.b.icmp_signed(">", x, y), x, y)

    def verdict(self):
        b = self.b
        ok = ir.Constant(ir.IntType(1), 1)
        for key, buf, index in self.bd.accesses:
            if id(key) not in self.bd.proven:
                continue
            lo, hi = self.guarded(key).interval(index)
            length = self.c(self.bd.shared[buf]) if buf in self.bd.shared else self.lens[buf]
            inside = b.and_(b.icmp_signed(">=", lo, self.c(0)),
                            b.icmp_signed("<=" if self.bd.planted("bounds_len_inclusive") else "<", hi, length))
            ok = b.and_(ok, b.or_(inside, b.icmp_signed(">", lo, hi)))
        for bad in self.bad:
            ok = b.and_(ok, b.not_(bad))
        return ok

    def guarded(self, key) -> "_Emitter":
        """The emitter for an access: this one, or one whose variables are narrowed by the
        access's guards (v < e: v <= e.hi - 1; v >= e: v >= e.lo; ...). A guard holds on every
        path to the access and its variable is not assigned between them, so the narrowed
        interval still covers every index the access is reached with."""
        facts = self.bd.bounds_of(key)
        if not facts:
            return self
        known = self.guarded_by.get(tuple(facts))
        if known is not None:
            return known
        narrow = {}
        for name, side, bound, offset in facts:
            # a data-dependent variable starts from its type's range: the guards bound it
            lo, hi = narrow.get(name) or (self.var(name) if self.bd.var_boundable(name) else
                                          tuple(self.c(x) for x in self.bd.open_side(DType.I32)))
            blo, bhi = self.interval(bound)
            if side == "hi":
                hi = self.smin(hi, self.b.add(bhi, self.c(offset)))
            else:
                lo = self.smax(lo, self.b.add(blo, self.c(offset)))
            narrow[name] = (lo, hi)
        em = _Emitter(self.bd, self.b, self.n, self.B, self.lens, self.scalars, self.bad, narrow, self)
        self.guarded_by[tuple(facts)] = em
        return em

    def variables(self, e: Expr) -> frozenset:
        r = self.free.get(id(e))
        if r is None:
            r = self.free[id(e)] = (frozenset((e.arg,)) if e.op is Op.VAR else
                                    frozenset().union(*(self.variables(s) for s in e.src)))
        return r

    def key(self, e: Expr) -> int:
        """A number per expression structure (hash-consing): equal trees, equal numbers."""
        k = self.keys.get(id(e))
        if k is None:
            arg = (type(e.arg).__name__, repr(e.arg)) if isinstance(e.arg, float) else e.arg
            t = (e.op, e.dtype, arg, tuple(self.key(s) for s in e.src))
            k = self.keys[id(e)] = self.interned.setdefault(t, len(self.interned))
        return k

    def interval(self, e: Expr):
        if self.outer is not None and not (self.variables(e) & self.narrow.keys()):
            return self.outer.interval(e)      # no narrowed variable in it: the same interval
        key = self.key(e)
        r = self.memo.get(key)
        if r is None:
            r = self.memo[key] = self._interval(e)
            if e.dtype in RANGE and OPDEFS[e.op].scope != "kernel" and not _inside_operands(e):
                # outside its type's range the kernel's value wrapped: no longer this interval
                # (a value known when compiling, a literal or the block size, is in range)
                rlo, rhi = RANGE[e.dtype]
                self.bad.append(self.b.or_(self.b.icmp_signed("<", r[0], self.c(rlo)),
                                           self.b.icmp_signed(">", r[1], self.c(rhi))))
        return r

    def _interval(self, e: Expr):
        b, op = self.b, e.op
        if op is Op.CONST:
            return self.c(int(e.arg)), self.c(int(e.arg))
        if op is Op.PARAM:
            bits = self.scalars[e.arg]
            v = b.sext(bits, I64) if e.dtype is DType.I32 else b.zext(bits, I64)
            return v, v
        if op is Op.BLOCK_SIZE:
            return self.c(self.B), self.c(self.B)
        if op is Op.NUM_THREADS:
            return self.n, self.n
        if op is Op.BUFLEN:
            return self.lens[e.arg], self.lens[e.arg]
        if op is Op.GLOBAL_ID:
            return self.c(0), b.sub(self.live, self.c(1))
        if op is Op.THREAD_ID:
            return self.c(0), b.sub(self.smin(self.live, self.c(self.B)), self.c(1))
        if op is Op.BLOCK_ID:
            return self.block_ids()
        if op is Op.ADD and self.is_global_id(e):
            return self.interval(_GLOBAL_ID)
        if op is Op.SUB and e.src[0].op is Op.GLOBAL_ID and e.src[1].op is Op.THREAD_ID:
            # a thread's block base (gid = block_id * B + tid): apart, the two would spread it
            # over [-(B - 1), n - 1], and every neighbour index block_base + (tid + c) % B
            # (the usual exchange within a block) would fail its proof
            lo, hi = self.block_ids()
            return b.mul(lo, self.c(self.B)), b.mul(hi, self.c(self.B))
        if op is Op.VAR:
            return self.var(e.arg)
        if op is Op.CAST:
            return (self.c(0), self.c(1)) if e.src[0].dtype is DType.BOOL else self.interval(e.src[0])
        if op is Op.SELECT:
            (alo, ahi), (blo, bhi) = self.arm(e.src[0], True, e.src[1]), self.arm(e.src[0], False, e.src[2])
            return self.smin(alo, blo), self.smax(ahi, bhi)
        if op is Op.AND:
            c = max(c for c in (self.bd.constant(s) for s in e.src) if c is not None)
            return self.c(0), self.c(c)
        lo, hi = self.interval(e.src[0])
        if op is Op.NEG:
            return b.neg(hi), b.neg(lo)
        if op is Op.ABS:
            if e.dtype is DType.U32:
                return lo, hi
            nlo = b.select(b.icmp_signed(">=", lo, self.c(0)), lo,
                           b.select(b.icmp_signed("<=", hi, self.c(0)), b.neg(hi), self.c(0)))
            return nlo, self.smax(b.neg(lo), hi)
        if op in (Op.SHL, Op.SHR):
            k = self.c(const_int(e.src[1]))
            return (b.shl(lo, k), b.shl(hi, k)) if op is Op.SHL else (b.ashr(lo, k), b.ashr(hi, k))
        if op is Op.MOD:
            return self.mod(lo, hi, abs(const_int(e.src[1])))
        if op is Op.DIV:
            return self.div(lo, hi, e.src[1])
        c = const_int(e.src[1])
        blo, bhi = self.interval(e.src[1])
        if op is Op.ADD:
            return b.add(lo, blo), b.add(hi, bhi)
        if op is Op.SUB:
            r = b.sub(lo, bhi), b.sub(hi, blo)
            m = self.remainder_of(e)
            if m:     # a - (a // m) * m with a >= 0 lies in [0, m - 1]
                nonneg = b.icmp_signed(">=", lo, self.c(0))
                r = (b.select(nonneg, self.smax(r[0], self.c(0)), r[0]),
                     b.select(nonneg, self.smin(r[1], self.c(m - 1)), r[1]))
            return r
        if op is Op.MIN:
            return self.smin(lo, blo), self.smin(hi, bhi)
        if op is Op.MAX:
            return self.smax(lo, blo), self.smax(hi, bhi)
        if op is Op.MUL:
            if e.dtype is DType.U32:
                # u32 products reach 2^64: past 2^63 they would wrap in i64 (an inverted,
                # "empty" interval); above 2^31 a factor proves nothing anyway
                self.bad.append(b.or_(b.icmp_signed(">", hi, self.c(2 ** 31)), b.icmp_signed(">", bhi, self.c(2 ** 31))))
            if c is None and const_int(e.src[0]) is not None:
                c, (lo, hi) = const_int(e.src[0]), (blo, bhi)
            if c is not None:   # operands fit in 33 bits (range checks): products fit in i64
                p, q = b.mul(lo, self.c(c)), b.mul(hi, self.c(c))
                return (p, q) if c >= 0 else (q, p)
            corners = [b.mul(x, y) for x in (lo, hi) for y in (blo, bhi)]
            return self.fold(self.smin, corners), self.fold(self.smax, corners)
        raise AssertionError(f"no interval rule for {op}")

    def arm(self, cond: Expr, polarity: bool, x: Expr):
        """A select arm's interval: its own, or, for a variable the condition bounds on both
        sides (Bounds.clamp_facts), the bounds' (v >= e: e.lo; v < e: e.hi - 1)."""
        if self.bd.boundable(x):
            return self.interval(x)
        lo = hi = None
        for _, side, bound, offset in self.bd.clamp_facts(cond, polarity, x):
            blo, bhi = self.interval(bound)
            if side == "hi":
                v = self.b.add(bhi, self.c(offset))
                hi = v if hi is None else self.smin(hi, v)
            else:
                v = self.b.add(blo, self.c(offset))
                lo = v if lo is None else self.smax(lo, v)
        rlo, rhi = self.bd.open_side(x.dtype)
        return (self.c(rlo) if lo is None else lo), (self.c(rhi) if hi is None else hi)

    def is_global_id(self, e: Expr) -> bool:
        """e is block_id() * B + thread_id() (either order), B the block size: the global id,
        whose interval [0, n - 1] (cooperative: to the last started block's end) is narrower than its parts' sum when n is not a multiple of B."""
        for base, t in (e.src, e.src[::-1]):
            if t.op is Op.THREAD_ID and base.op is Op.MUL and e.dtype is DType.I32:
                for bid, size in (base.src, base.src[::-1]):
                    if bid.op is Op.BLOCK_ID and (size.op is Op.BLOCK_SIZE or const_int(size) == self.B):
                        return True
        return False

    def block_ids(self):
        """The launch's block ids: [0, ceil(n / B) - 1] (empty for n = 0)."""
        b = self.b
        blocks = self.n if self.bd.planted("bounds_block_floor") else b.add(self.n, self.c(self.B - 1))
        return self.c(0), b.sub(b.udiv(blocks, self.c(self.B)), self.c(1))

    def fold(self, f, values):
        r = values[0]
        for v in values[1:]:
            r = f(r, v)
        return r

    def div(self, lo, hi, d: Expr):
        """C truncation by a divisor of known sign: monotone in each operand, so the
        quotient's extremes are at the corners."""
        b = self.b
        c = const_int(d)
        if c == -1:        # (sdiv of INT64_MIN by -1 would trap on a failed proof's garbage)
            return b.neg(hi), b.neg(lo)
        if c is not None:
            p, q = b.sdiv(lo, self.c(c)), b.sdiv(hi, self.c(c))
            return (p, q) if c > 0 else (q, p)
        dlo, dhi = self.interval(d)
        self.bad.append(b.icmp_signed("<", dlo, self.c(1)))      # only positive divisors are proved
        safe = lambda v: b.select(b.icmp_signed("<", v, self.c(1)), self.c(1), v)   # no division by 0 here
        corners = [b.sdiv(x, safe(y)) for x in (lo, hi) for y in (dlo, dhi)]
        return self.fold(self.smin, corners), self.fold(self.smax, corners)

    def mod(self, lo, hi, m: int):
        """C remainder (sign of the dividend): |r| < m; exact when already inside (-m, m)."""
        b = self.b
        inside = b.and_(b.icmp_signed(">", lo, self.c(-m)), b.icmp_signed("<", hi, self.c(m)))
        rlo = b.select(b.icmp_signed(">=", lo, self.c(0)), self.c(0),
                       self.c(0 if self.bd.planted("bounds_mod_nonneg") else -(m - 1)))
        rhi = b.select(b.icmp_signed("<=", hi, self.c(0)), self.c(0), self.c(m - 1))
        return b.select(inside, lo, rlo), b.select(inside, hi, rhi)

    def remainder_of(self, e: Expr):
        """m when e is a - (a // m) * m (either factor order, a and the quotient possibly
        through variables defined once at the top level), else None."""
        a, prod = e.src
        if prod.op is not Op.MUL:
            return None
        top = self.bd.top_single
        through = lambda v: self.bd.defs[v.arg][0] if v.op is Op.VAR and v.arg in top else v
        for q0, m in ((prod.src[0], prod.src[1]), (prod.src[1], prod.src[0])):
            mv = self.bd.constant(m)             # m: a literal, or a variable set once to one
            q = through(q0)
            if not (mv and mv > 0 and q.op is Op.DIV and self.bd.constant(q.src[1]) == mv):
                continue
            x = q.src[0]
            # the same value: one node of this very expression, or one variable set once for good
            if (x is a and q is q0) or (x.op is Op.VAR and a.op is Op.VAR and x.arg == a.arg and x.arg in top):
                return mv
        return None

    def var(self, name: str):
        if name in self.narrow:
            return self.narrow[name]
        if self.outer is not None:     # an unnarrowed variable: its interval as computed outside
            return self.outer.var(name)
        r = self.vars.get(name)
        if r is None:
            parts = []
            for d in self.bd.defs[name]:
                if isinstance(d, For):
                    (slo, shi), (tlo, thi) = self.interval(d.start), self.interval(d.stop)
                    step = int(d.step.arg)
                    parts.append((slo, self.b.sub(tlo if self.bd.planted("bounds_loop_stop_lo") else thi, self.c(1)))
                                 if step > 0 else
                                 (self.b.add(tlo, self.c(1)), shi))
                else:
                    parts.append(self.interval(d))
            lo = self.fold(self.smin, [p[0] for p in parts])
            hi = self.fold(self.smax, [p[1] for p in parts])
            r = self.vars[name] = (lo, hi)
        return r

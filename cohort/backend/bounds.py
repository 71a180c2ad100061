"""Bounds proofs for the default (safe) build: which buffer accesses need no
per-access check, and the entry prologue that proves it for one launch.

An access's index is *boundable* when it is built from constants, scalar
parameters, the launch built-ins, buffer lengths, loop variables of loops
with boundable bounds and variables whose every definition is boundable (no
cycle: `j = j + 1` in a loop is not), with + - * neg abs min max, `select`
(both arms; the condition is ignored), int casts, // and % (constant or
provably positive divisors), shifts and `&` by constants. Everything else
(a loaded value, a private-array value, a block reduction, a float) is
data-dependent: such accesses keep a per-access check in the safe build -
unless guards bound the data-dependent variable on both sides where it is used:
a select arm `v if 0 <= v < n else spare`, or an access inside
`if v >= 0 and v < n:` that nothing in the branch reassigns v in (a histogram's
loaded bin). There the variable's interval is the guards' (`clamp_facts`,
`two_sided`), whatever its definition.

For each boundable access the prologue computes the interval [lo, hi] of its
index over the WHOLE launch (every block, every thread gid < n), in i64,
once per argument block, and checks 0 <= lo and hi < len(buf). The interval
is conservative: a loop variable spans [start.lo, stop.hi - 1] (step > 0);
two identities of the ids are known (`global_id() - thread_id()` is the block's base,
[0, (blocks - 1) * B]; `block_id() * B + thread_id()` is the global id, [0, n - 1]);
a guard narrows a variable only where it is sound: `v < e` (<=, >, >=, and
`and`/`not`/the else branch) with v a variable that nothing in the guarded
region assigns, for the accesses inside that `if` branch or select arm and
on no other path (an access reached on several paths keeps the guards common
to all). Any other guard is ignored. Any node whose interval leaves its type's range
(where the kernel's i32/u32 arithmetic would wrap) fails the proof, so every
interval is of the value the kernel really computes; on in-range operands
no i64 operation here overflows (u32 products are limited to factors of at
most 2^31 for that). An empty interval
(lo > hi) can only come from code no thread reaches (a loop that never runs
for any thread, a launch of no threads) and proves its access.

Every task of a launch computes the same verdict (the launch, not the task's
block range), so a failed proof means no task touched memory; the caller
then reruns the launch with the checked build (compiler.PreparedLaunch).
"""
from __future__ import annotations

from collections import defaultdict

from llvmlite import ir

from ..refimpl.ir import (
    Assign,
    DType,
    Expr,
    For,
    If,
    Kernel,
    Op,
    ParamKind,
    Shared,
    defined_name,
    stmt_bodies,
    stmt_exprs,
    walk_stmts,
    written_name,
)
from ..refimpl.opdefs import OPDEFS
from . import inject

I64 = ir.IntType(64)
RANGE = {DType.I32: (-(2 ** 31), 2 ** 31 - 1), DType.U32: (0, 2 ** 32 - 1)}
# leaves whose value the launch fixes (literals, parameters, built-ins): each has a known interval
_LEAVES = frozenset(op for op, d in OPDEFS.items() if d.scope is not None)
_ARITH = {Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.ABS, Op.MIN, Op.MAX}


_COMPARE = {Op.LT, Op.LE, Op.GT, Op.GE}
_NEGATED = {Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT}
_FLIPPED = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}    # a < b  is  b > a


def _assigned(body) -> set:
    return {defined_name(s) for s in walk_stmts(body)} - {None}


_GLOBAL_ID = Expr(Op.GLOBAL_ID, DType.I32)


def _const_int(e: Expr):
    return e.arg if e.op is Op.CONST and e.dtype.is_int else None


class Bounds:
    """The static part: every buffer access of a kernel and whether its index is boundable."""

    def __init__(self, kernel: Kernel):
        self.k = kernel
        self.defs = defaultdict(list)        # variable -> its definitions (Expr, For, or None: opaque)
        for s in walk_stmts(kernel.body):
            name = defined_name(s)
            if name is not None:   # any definition but these two is opaque
                self.defs[name].append(s.value if isinstance(s, Assign) else s if isinstance(s, For) else None)
        # defined once, at the top level: one value per thread for the whole kernel
        top = [s.name for s in kernel.body if isinstance(s, Assign)]
        self.top_single = {n for n in top if top.count(n) == 1 and len(self.defs[n]) == 1}
        self._node: dict = {}
        self._var: dict = {}
        self._busy: set = set()
        self.accesses = []                   # (key: Store or LOAD node, buffer, index expr)
        self.guards = {}                     # id(key) -> the guards every path to it passes
        self._visited = set()
        self.buffers = {p.name for p in kernel.buffers}
        # shared arrays: proven like buffers, against their compile-time size (issue 23)
        self.shared = {s.name: int(s.size.arg) for s in kernel.body if isinstance(s, Shared)}
        self._visit_stmts(kernel.body, ())
        self.proven = {id(key) for key, _, index in self.accesses
                       if self.boundable(index) or self.boundable(index, self.two_sided(key))}

    # ------------------------------------------------------------ guards
    # A guard is (cond, polarity, names assigned inside the guarded region): an `if`'s
    # branch, or a select's arm (which the backends evaluate lazily: a branch in whole
    # builds, a masked arm in packets). An access reached on several paths keeps only
    # the guards common to all of them.
    def _record(self, key, buf: str, index: Expr, guards: tuple):
        k = id(key)
        if k in self.guards:
            self.guards[k] = tuple(g for g in self.guards[k] if any(g[0] is h[0] and g[1] == h[1] for h in guards))
            return
        self.guards[k] = guards
        self.accesses.append((key, buf, index))

    def _visit_stmts(self, body, guards: tuple):
        for s in body:
            for e in stmt_exprs(s):
                self._visit_expr(e, guards)
            target = written_name(s)
            if target in self.buffers or target in self.shared:
                self._record(s, target, s.index, guards)
            if isinstance(s, If):
                for branch, polarity in ((s.then, True), (s.orelse, False)):
                    assigned = frozenset(_assigned(branch))
                    self._visit_stmts(branch, guards + ((s.cond, polarity, assigned),))
            else:
                for branch in stmt_bodies(s):
                    self._visit_stmts(branch, guards)

    def _visit_expr(self, e: Expr, guards: tuple):
        key = (id(e), tuple((id(g[0]), g[1]) for g in guards))
        if key in self._visited:
            return
        self._visited.add(key)
        if e.op is Op.SELECT:
            self._visit_expr(e.src[0], guards)
            self._visit_expr(e.src[1], guards + ((e.src[0], True, frozenset()),))
            self._visit_expr(e.src[2], guards + ((e.src[0], False, frozenset()),))
            return
        if e.op in (Op.LOAD, Op.SLOAD):
            self._record(e, e.arg, e.src[0], guards)
        for x in e.src:
            self._visit_expr(x, guards)

    def bounds_of(self, key) -> list:
        """What the guards of an access say of its variables: (name, side, bound expr, offset),
        meaning name <= bound + offset (side "hi") or name >= bound + offset (side "lo"). Only
        a variable no statement of the guarded region assigns, compared with an integer
        expression that is itself boundable."""
        out = []
        for cond, polarity, assigned in self.guards.get(id(key), ()):
            out += self._facts(cond, polarity, assigned)
        return out

    def data_facts(self, key) -> list:
        """The guard facts of an access on any variable, data-dependent ones included."""
        out = []
        for cond, polarity, assigned in self.guards.get(id(key), ()):
            out += self._facts(cond, polarity, assigned, any_var=True)
        return out

    def two_sided(self, key) -> frozenset:
        """The variables the access's guards bound from below and above (a planted bug: from
        either side)."""
        sides = defaultdict(set)
        for name, side, _, _ in self.data_facts(key):
            sides[name].add(side)
        one = inject.active("bounds_clamp_one_side")
        return frozenset(n for n, x in sides.items() if x == {"lo", "hi"} or (one and x))

    def clamp_facts(self, cond: Expr, polarity: bool, arm: Expr):
        """The facts bounding a select's arm when it is a variable that the select's condition
        (holding as `polarity` in that arm) bounds from below and above by boundable
        expressions, else None. The condition and the arm read the variable in one expression,
        so nothing assigns it between them: the arm's value lies between the bounds whatever
        the variable's definition (a loaded index, `v if 0 <= v < n else spare`)."""
        if arm.op is not Op.VAR or not arm.dtype.is_int:
            return None
        facts = [f for f in self._facts(cond, polarity, frozenset(), any_var=True) if f[0] == arm.arg]
        sides = {f[1] for f in facts}
        if inject.active("bounds_clamp_one_side"):
            return facts or None
        return facts if sides == {"lo", "hi"} else None

    def open_side(self, dtype: DType) -> tuple:
        """The bounds of a side no guard gives (only a planted one-sided clamp leaves one
        open): the type's, or, planted, 0 below (as if indices could not be negative)."""
        lo, hi = RANGE[dtype]
        return (0 if inject.active("bounds_clamp_one_side") else lo), hi

    def _facts(self, cond: Expr, polarity: bool, assigned, any_var: bool = False) -> list:
        if cond.op is Op.NOT and cond.dtype is DType.BOOL:
            return self._facts(cond.src[0], not polarity, assigned, any_var)
        if cond.op is Op.AND and cond.dtype is DType.BOOL and polarity:   # both hold
            return self._facts(cond.src[0], True, assigned, any_var) + self._facts(cond.src[1], True, assigned, any_var)
        if cond.op is Op.OR and cond.dtype is DType.BOOL and not polarity:  # neither holds
            return (self._facts(cond.src[0], False, assigned, any_var)
                    + self._facts(cond.src[1], False, assigned, any_var))
        if cond.op is Op.SELECT and cond.dtype is DType.BOOL:
            # the frontend's short-circuit `a and b` is `b if a else False`, `a or b` is
            # `True if a else b`
            c, x, y = cond.src
            if polarity and y.op is Op.CONST and y.arg is False:         # a and b holds
                return self._facts(c, True, assigned, any_var) + self._facts(x, True, assigned, any_var)
            if not polarity and x.op is Op.CONST and x.arg is True:      # a or b fails
                return self._facts(c, False, assigned, any_var) + self._facts(y, False, assigned, any_var)
            return []
        if cond.op not in _COMPARE or not cond.src[0].dtype.is_int:
            return []
        op = cond.op if polarity else _NEGATED[cond.op]
        out = []
        for v, other, flip in ((cond.src[0], cond.src[1], False), (cond.src[1], cond.src[0], True)):
            if (v.op is not Op.VAR or v.arg in assigned or not (any_var or self.boundable(v))
                    or not self.boundable(other)):
                continue
            o = _FLIPPED[op] if flip else op        # as `v o other`
            if o is Op.LT:
                out.append((v.arg, "hi", other, -1))
            elif o is Op.LE:
                out.append((v.arg, "hi", other, -1 if inject.active("bounds_le_guard") else 0))
            elif o is Op.GT:
                out.append((v.arg, "lo", other, 1))
            elif o is Op.GE:
                out.append((v.arg, "lo", other, 0))
        return out

    # ------------------------------------------------------------ static
    def constant(self, e: Expr, depth: int = 0):
        """The value of an i32 expression of literals and variables set once at the top
        level to such expressions (a launch's tile counts after specialisation), else None."""
        if e.op is Op.CONST:
            return _const_int(e)
        if depth > 16 or e.dtype is not DType.I32:
            return None
        if e.op is Op.VAR:
            return self.constant(self.defs[e.arg][0], depth + 1) if e.arg in self.top_single else None
        if e.op not in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX):
            return None
        x, y = (self.constant(s, depth + 1) for s in e.src)
        if x is None or y is None or (e.op is Op.DIV and y == 0):
            return None
        v = {Op.ADD: lambda: x + y, Op.SUB: lambda: x - y, Op.MUL: lambda: x * y, Op.MIN: lambda: min(x, y),
             Op.MAX: lambda: max(x, y),
             Op.DIV: lambda: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)}[e.op]()   # C truncation
        return v if -2 ** 31 <= v < 2 ** 31 else None     # i32 arithmetic that would wrap: no constant

    def boundable(self, e: Expr, bounded: frozenset = frozenset()) -> bool:
        """`bounded`: variables the access's guards bound on both sides (two_sided), boundable
        there whatever their definitions."""
        k = (id(e), bounded)
        r = self._node.get(k)
        if r is None:
            r = self._node[k] = self._boundable(e, bounded)
        return r

    def _boundable(self, e: Expr, bounded: frozenset) -> bool:
        op = e.op
        if op in _LEAVES:
            return op is not Op.PARAM or (e.dtype.is_int and self.k.param(e.arg).kind is ParamKind.SCALAR)
        if not e.dtype.is_int:
            return False
        if op is Op.VAR:
            return e.arg in bounded or self.var_boundable(e.arg)
        if op is Op.CAST:
            return e.src[0].dtype is DType.BOOL or (e.src[0].dtype.is_int and self.boundable(e.src[0], bounded))
        if op is Op.SELECT:
            return all(self.boundable(x, bounded) or self.clamp_facts(e.src[0], pol, x) is not None
                       for x, pol in ((e.src[1], True), (e.src[2], False)))
        if op in _ARITH:
            return all(self.boundable(s, bounded) for s in e.src)
        if op is Op.DIV:
            return self.boundable(e.src[0], bounded) and (bool(_const_int(e.src[1])) or self.boundable(e.src[1]))
        if op is Op.MOD:
            return bool(_const_int(e.src[1])) and self.boundable(e.src[0], bounded)
        if op in (Op.SHL, Op.SHR):
            k = _const_int(e.src[1])
            return k is not None and 0 <= k < 32 and self.boundable(e.src[0], bounded)
        if op is Op.AND:
            return any(_const_int(s) is not None and _const_int(s) >= 0 for s in e.src)
        return False

    def var_boundable(self, name: str) -> bool:
        r = self._var.get(name)
        if r is not None:
            return r
        if name in self._busy:            # a cycle: the variable depends on itself
            return False
        self._busy.add(name)
        ok = bool(self.defs.get(name))
        for d in self.defs.get(name, ()):
            if d is None:
                ok = False
            elif isinstance(d, For):
                ok = ok and self.boundable(d.start) and self.boundable(d.stop)
            else:
                ok = ok and self.boundable(d)
            if not ok:
                break
        self._busy.discard(name)
        self._var[name] = ok
        return ok

    # ------------------------------------------------------------ the prologue
    def emit(self, b: ir.IRBuilder, n64, block: int, lens: dict, scalars: dict):
        """IR computing whether every boundable access of a launch of n64 threads stays
        inside its buffer (an i1). `lens`: buffer -> i64 length; `scalars`: name -> i32 bits."""
        return _Emitter(self, b, n64, block, lens, scalars).verdict()


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
        return any(_const_int(x) is not None and _const_int(x) >= 0 for x in e.src) and same(*e.src)
    if e.op is Op.DIV:
        c = _const_int(e.src[1])
        return same(e.src[0]) and (c is None or c >= 1 or c <= -2)
    return False


class _Emitter:
    def __init__(self, bounds: Bounds, b, n64, block: int, lens: dict, scalars: dict, bad=None, narrow=None,
                 outer=None):
        self.bd, self.b, self.n, self.B, self.lens, self.scalars = bounds, b, n64, block, lens, scalars
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
                            b.icmp_signed("<=" if inject.active("bounds_len_inclusive") else "<", hi, length))
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
        data = self.bd.two_sided(key)
        facts += [f for f in self.bd.data_facts(key) if f[0] in data and not self.bd.var_boundable(f[0])]
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
            return self.c(0), b.sub(self.n, self.c(1))
        if op is Op.THREAD_ID:
            return self.c(0), b.sub(self.smin(self.n, self.c(self.B)), self.c(1))
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
            c = max(_const_int(s) for s in e.src if _const_int(s) is not None)
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
            k = self.c(_const_int(e.src[1]))
            return (b.shl(lo, k), b.shl(hi, k)) if op is Op.SHL else (b.ashr(lo, k), b.ashr(hi, k))
        if op is Op.MOD:
            return self.mod(lo, hi, abs(_const_int(e.src[1])))
        if op is Op.DIV:
            return self.div(lo, hi, e.src[1])
        c = _const_int(e.src[1])
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
            if c is None and _const_int(e.src[0]) is not None:
                c, (lo, hi) = _const_int(e.src[0]), (blo, bhi)
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
        whose interval [0, n - 1] is narrower than its parts' sum when n is not a multiple of B."""
        for base, t in (e.src, e.src[::-1]):
            if t.op is Op.THREAD_ID and base.op is Op.MUL and e.dtype is DType.I32:
                for bid, size in (base.src, base.src[::-1]):
                    if bid.op is Op.BLOCK_ID and (size.op is Op.BLOCK_SIZE or _const_int(size) == self.B):
                        return True
        return False

    def block_ids(self):
        """The launch's block ids: [0, ceil(n / B) - 1] (empty for n = 0)."""
        b = self.b
        blocks = self.n if inject.active("bounds_block_floor") else b.add(self.n, self.c(self.B - 1))
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
        c = _const_int(d)
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
                       self.c(0 if inject.active("bounds_mod_nonneg") else -(m - 1)))
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
                    parts.append((slo, self.b.sub(tlo if inject.active("bounds_loop_stop_lo") else thi, self.c(1)))
                                 if step > 0 else
                                 (self.b.add(tlo, self.c(1)), shi))
                else:
                    parts.append(self.interval(d))
            lo = self.fold(self.smin, [p[0] for p in parts])
            hi = self.fold(self.smax, [p[1] for p in parts])
            r = self.vars[name] = (lo, hi)
        return r

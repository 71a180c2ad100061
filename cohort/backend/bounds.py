"""Bounds proofs for the default (safe) build: which buffer accesses need no
per-access check (this module, at compile time), and the entry prologue that proves it
for one launch (bounds_emit.prologue, the IR it runs).

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
once per argument block, and checks 0 <= lo and hi < len(buf). (A cooperative kernel's
threads are every thread of its ceil(n / B) blocks, DESIGN §2: its ids span those.) The interval
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


def const_int(e: Expr):
    """The value of an integer literal, else None (the proof and its prologue, bounds_emit, read it)."""
    return e.arg if e.op is Op.CONST and e.dtype.is_int else None


class Bounds:
    """The static part: every buffer access of a kernel and whether its index is boundable;
    `bugs`: the build's planted bugs (inject.py, codegen.CodegenConfig.bugs), none for a
    clean proof. The launch-time half (bounds_emit.py) asks `planted` too."""

    def __init__(self, kernel: Kernel, bugs: tuple = ()):
        self.k = kernel
        self.bugs = frozenset(bugs)
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

    def planted(self, bug: str) -> bool:
        """Whether deliberate bug `bug` (inject.BUGS) is in the build this proof is for."""
        return bug in self.bugs

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
        expression that is itself boundable; the variable boundable itself, or bounded by
        the guards on both sides (two_sided)."""
        facts = self.data_facts(key)
        both = self.two_sided(key, facts)
        return [f for f in facts if f[0] in both or self.var_boundable(f[0])]

    def data_facts(self, key) -> list:
        """The guard facts of an access on any variable, data-dependent ones included."""
        out = []
        for cond, polarity, assigned in self.guards.get(id(key), ()):
            out += self._facts(cond, polarity, assigned, any_var=True)
        return out

    def two_sided(self, key, facts=None) -> frozenset:
        """The variables the access's guards (`facts`, its data_facts) bound from below and
        above (a planted bug: from either side)."""
        sides = defaultdict(set)
        for name, side, _, _ in (self.data_facts(key) if facts is None else facts):
            sides[name].add(side)
        one = self.planted("bounds_clamp_one_side")
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
        if self.planted("bounds_clamp_one_side"):
            return facts or None
        return facts if sides == {"lo", "hi"} else None

    def open_side(self, dtype: DType) -> tuple:
        """The bounds of a side no guard gives (only a planted one-sided clamp leaves one
        open): the type's, or, planted, 0 below (as if indices could not be negative)."""
        lo, hi = RANGE[dtype]
        return (0 if self.planted("bounds_clamp_one_side") else lo), hi

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
            # planted bounds_not_flip: a negated, reversed `<` (not (K < v)) narrows v to K - 1
            slip = self.planted("bounds_le_guard") or (self.planted("bounds_not_flip") and flip and not polarity)
            if o is Op.LT:
                out.append((v.arg, "hi", other, -1))
            elif o is Op.LE:
                out.append((v.arg, "hi", other, -1 if slip else 0))
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
            return const_int(e)
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
            return self.boundable(e.src[0], bounded) and (bool(const_int(e.src[1])) or self.boundable(e.src[1]))
        if op is Op.MOD:
            return bool(const_int(e.src[1])) and self.boundable(e.src[0], bounded)
        if op in (Op.SHL, Op.SHR):
            k = const_int(e.src[1])
            return k is not None and 0 <= k < 32 and self.boundable(e.src[0], bounded)
        if op is Op.AND:     # a mask: a literal, or a variable set once to one (k & (kt - 1))
            return any((c := self.constant(s)) is not None and c >= 0 for s in e.src)
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

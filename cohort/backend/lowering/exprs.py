"""Expression lowering: one rule per `Op`, in a table shaped like the
interpreter's dispatch (`refimpl.interpreter.Interpreter._ev`), so an
operation's meaning and its code can be read side by side.

A rule is `rule(L, e, memo) -> value`: L is the lowering, e the node, memo the
values of nodes already evaluated in this statement (DAG nodes are shared, so
evaluation is memoised by identity, as in the interpreter). Every value has
the lowering's width (lanes.py): a scalar in `whole`, a W-lane vector in
packets. The arithmetic rules share one form: evaluate the sources, then the
op's entry of `lower_ops.LOWER`, which mirrors `refimpl.semantics.ALU`.
"""
from __future__ import annotations

from ...refimpl import mathlib
from ...refimpl.ir import DType, Expr, Op
from ..context import I32T
from ..lower_ops import LOWER, bitcast, convert


def contains_load(e: Expr, cache: dict, private: bool = False) -> bool:
    """Whether evaluating e may touch a buffer (then it must not be speculated).

    Shared-array loads always count: their indices are checked in every safe build.
    With `private`, private-array loads count too: a checked build reports an
    out-of-range private index, so it must not speculate one either (unchecked
    builds clamp the index, which makes speculating it harmless). `cache` must
    be used with one value of `private` only.
    """
    r = cache.get(id(e))
    if r is None:
        r = cache[id(e)] = (e.op in (Op.LOAD, Op.SLOAD) or (private and e.op is Op.PLOAD)
                            or any(contains_load(s, cache, private) for s in e.src))
    return r


def _src(L, e: Expr, memo: dict, i: int = 0):
    return L.ev(e.src[i], memo)


_WRAPPING = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul"}


def _alu(L, e: Expr, memo: dict):
    """Every arithmetic, bitwise and comparison op: sources first, then LOWER[op]."""
    srcs = [L.ev(s, memo) for s in e.src]
    r = LOWER[e.op](L.cx, e.src[0].dtype, *srcs)
    if L.now.no_wrap and e.op in _WRAPPING and e.dtype.is_int and getattr(r, "opname", None) == _WRAPPING[e.op]:
        r.flags.append("nsw" if e.dtype is DType.I32 else "nuw")
    return r


def index_value(L, index: Expr, key, memo: dict):
    """An access's index. Where the launch's bounds proof covers it (bounds.py: every node's
    value over the launch lies in its type's range) and every lane of the packet is live
    (each lane a thread of the launch that passed the access's guards), its + - * cannot
    wrap: marked so (nsw, nuw), LLVM keeps i32 offsets such as a row's base plus a loop's k
    in 64 bits without a sign extension per use (matmul's ragged-K loop, docs/README.md,
    'matmul at the FMA limit'). Plain safe builds only: checked builds prove nothing, and a
    sanitize build's records compare every lane's index."""
    proof = L.facts.bounds
    if L.now.mask is not None or L.checked or L.variant.sanitize or proof is None or id(key) not in proof.proven:
        return L.ev(index, memo)
    L.now.no_wrap = True
    try:
        return L.ev(index, memo)
    finally:
        L.now.no_wrap = False


def _math(L, e: Expr, memo: dict):
    """A math-library call is its template (mathlib), lowered op by op like any
    expression, with the argument bound to ARG 0."""
    x = _src(L, e, memo)
    return L.ev(mathlib.template(e.arg), {("arg", 0): x})


def _select(L, e: Expr, memo: dict):
    """`a if c else b`, lazy like the interpreter: a plain select unless an arm
    may touch memory; such an arm is evaluated under its lanes' mask (one lane in
    `whole`: its loads run only when taken), so `x[i] if i < n else 0.0` never
    reads x out of bounds."""
    b = L.b
    c = _src(L, e, memo)
    lazy = L.checked   # a checked build must not speculate a private index either
    if not (contains_load(e.src[1], L.spec_cache, lazy) or contains_load(e.src[2], L.spec_cache, lazy)):
        return b.select(c, _src(L, e, memo, 1), _src(L, e, memo, 2))
    with L.masked(c, merge=False):
        a = _src(L, e, dict(memo), 1)
    with L.masked(b.not_(c), merge=False):
        v = _src(L, e, dict(memo), 2)
    return b.select(c, a, v)


EXPR_RULES = {
    # leaves
    Op.CONST:       lambda L, e, memo: L.cx.const(e.dtype, e.arg),
    Op.PARAM:       lambda L, e, memo: L.splat(L.entry.scalars[e.arg], e.dtype),
    Op.VAR:         lambda L, e, memo: L.b.load(L.storage.slots[e.arg], typ=L.cx.ty(e.dtype)),
    Op.ARG:         lambda L, e, memo: memo[("arg", e.arg)],
    # built-ins
    Op.THREAD_ID:   lambda L, e, memo: L.now.tid,
    Op.BLOCK_ID:    lambda L, e, memo: L.splat(L.now.bid, DType.I32),
    Op.GLOBAL_ID:   lambda L, e, memo: L.now.gid,
    Op.BLOCK_SIZE:  lambda L, e, memo: L.cx.const(DType.I32, L.B),
    Op.NUM_THREADS: lambda L, e, memo: L.splat(L.entry.n32, DType.I32),
    Op.BUFLEN:      lambda L, e, memo: L.splat(L.b.trunc(L.entry.lens[e.arg], I32T), DType.I32),
    # unary, binary arithmetic, bitwise, comparisons
    **{op: _alu for op in LOWER},
    # selection and conversion
    Op.SELECT:      _select,
    Op.CAST:        lambda L, e, memo: convert(L.cx, _src(L, e, memo), e.src[0].dtype, e.dtype),
    Op.BITCAST:     lambda L, e, memo: bitcast(L.cx, _src(L, e, memo), e.src[0].dtype, e.dtype),
    # memory (memory.py: the access classes)
    Op.LOAD:        lambda L, e, memo: L.buffer_load(e, index_value(L, e.src[0], e, memo)),
    Op.PLOAD:       lambda L, e, memo: L.private_load(e, _src(L, e, memo)),
    Op.SLOAD:       lambda L, e, memo: L.shared_load(e, index_value(L, e.src[0], e, memo)),
    # math library
    Op.MATH:        _math,
}


class ExprLowering:
    def ev(self, e: Expr, memo: dict):
        r = memo.get(id(e))
        if r is None:
            r = memo[id(e)] = EXPR_RULES[e.op](self, e, memo)
        return r

"""Interpreter-level mutation score of the generator: a fast, load-independent proxy for
how soon a campaign finds a backend bug of a given kind.

For each program, each mutant below changes the *meaning* of one kind of
operation the way a planted backend bug does (cohort/backend/inject.py), and
the interpreter runs the original and the mutant on the same inputs; the
mutant is killed when any output differs (bit for bit, NaNs equal). The score
is the percent of programs that kill it: with a score p, a campaign of k
programs finds a bug of that kind with probability about 1 - (1 - p)^k (the
compiled variants see at least what the interpreter sees for these kinds).

    rem_pow2_mask         i32 x % 2^k   ->  x & (2^k - 1)
    div_pow2_shift        i32 x // 2^k  ->  x >> k
    ne_ordered            f32 a != b    ->  ordered (false when NaN)
    le_unordered          f32 a <= b    ->  not (a > b)
    sum_identity_sign     f32 block_sum pads inactive threads with +0.0
    packet_tree_operands  the tree's last three steps (inside an 8-lane packet) take
                          their operands in the other order

    PYTHONPATH=. python benchmarks/gen_mutants.py [--programs 300] [--before REV]
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from gen_breadth import BEFORE, hypothesis_programs, load_before  # noqa: E402

from cohort.refimpl import interpreter as interp_mod  # noqa: E402
from cohort.refimpl import semantics  # noqa: E402
from cohort.refimpl.interpreter import interpret  # noqa: E402
from cohort.refimpl.ir import (  # noqa: E402
    DType,
    Expr,
    Kernel,
    Op,
    binary,
    const,
    map_stmts,
    unary,
)
from cohort.verify.checksum import bitwise_equal  # noqa: E402

I32, F32 = DType.I32, DType.F32


def _pow2(e: Expr) -> bool:
    return e.op is Op.CONST and e.dtype is I32 and e.arg > 1 and not e.arg & (e.arg - 1)


EXPR_MUTANTS = {
    "rem_pow2_mask": lambda e: binary(Op.AND, e.src[0], const(e.src[1].arg - 1, I32))
    if e.op is Op.MOD and _pow2(e.src[1]) else None,
    "div_pow2_shift": lambda e: binary(Op.SHR, e.src[0], const(e.src[1].arg.bit_length() - 1, I32))
    if e.op is Op.DIV and e.dtype is I32 and _pow2(e.src[1]) else None,
    "ne_ordered": lambda e: binary(Op.AND, e, binary(Op.AND, binary(Op.EQ, e.src[0], e.src[0]),
                                                      binary(Op.EQ, e.src[1], e.src[1])))
    if e.op is Op.NE and e.src[0].dtype is F32 else None,
    "le_unordered": lambda e: unary(Op.NOT, binary(Op.GT, e.src[0], e.src[1]))
    if e.op is Op.LE and e.src[0].dtype is F32 else None,
}


def rewrite(k: Kernel, fn) -> Kernel:
    memo = {}

    def ex(e):
        r = memo.get(id(e))
        if r is None:
            src = tuple(ex(s) for s in e.src)
            r = e if src == e.src else Expr(e.op, e.dtype, src, e.arg)
            r = memo[id(e)] = fn(r) or r
        return r

    return Kernel(k.name, k.params, map_stmts(k.body, ex), k.block, k.consts, k.specialised)


def _swapped_tree(values, reduce_name, dt, W=8):
    v = values.copy()
    op = semantics.REDUCE_OP[reduce_name]
    s = v.shape[1] // 2
    while s >= 1:
        a, b = (v[:, s:2 * s], v[:, :s]) if s < W else (v[:, :s], v[:, s:2 * s])
        v[:, :s] = semantics.apply(op, dt, (a, b))
        s //= 2
    return v[:, 0]


class _Patched:
    """Swap a semantics entry in the interpreter for the duration of one run."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.ident, self.tree = dict(semantics.REDUCE_IDENTITY), interp_mod.tree_reduce
        if self.name == "sum_identity_sign":
            interp_mod.REDUCE_IDENTITY[("block_sum", F32)] = np.float32(0.0)
        else:
            interp_mod.tree_reduce = _swapped_tree

    def __exit__(self, *exc):
        interp_mod.REDUCE_IDENTITY.clear()
        interp_mod.REDUCE_IDENTITY.update(self.ident)
        interp_mod.tree_reduce = self.tree


def outputs(k: Kernel, case, make_args):
    args = make_args(case)
    try:
        interpret(k, case.n, args, case.consts)
    except Exception:  # noqa: BLE001 - a mutant that breaks the launch is killed
        return None
    return {n: a for n, a in args.items() if isinstance(a, np.ndarray)}


def score(programs: list, make_args) -> Counter:
    killed = Counter()
    for case in programs:
        ref = outputs(case.kernel, case, make_args)
        if ref is None:
            continue
        runs = [(name, rewrite(case.kernel, fn), None) for name, fn in EXPR_MUTANTS.items()]
        runs += [(name, case.kernel, name) for name in ("sum_identity_sign", "packet_tree_operands")]
        for name, k, patch in runs:
            if patch:
                with _Patched(patch):
                    out = outputs(k, case, make_args)
            else:
                out = outputs(k, case, make_args)
            if out is None or any(not bitwise_equal(a, out[n]) for n, a in ref.items()):
                killed[name] += 1
    return killed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=300)
    p.add_argument("--before", default=BEFORE)
    a = p.parse_args(argv)
    from cohort.verify import gen
    before = load_before(a.before)
    columns = {f"before ({a.before}, cases)": score(hypothesis_programs(before.cases(), a.programs), before.make_args),
               "after (cases)": score(hypothesis_programs(gen.cases(), a.programs), gen.make_args),
               "after (generate)": score([gen.generate(s) for s in range(a.programs)], gen.make_args)}
    names = list(columns)
    print(f"{'mutant killed in % of ' + str(a.programs) + ' programs':34}" + "".join(f"{n:>24}" for n in names))
    for m in list(EXPR_MUTANTS) + ["sum_identity_sign", "packet_tree_operands"]:
        print(f"{m:34}" + "".join(f"{100 * columns[n][m] / a.programs:>23.1f}%" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())

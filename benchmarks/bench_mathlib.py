"""The math library before and after, paired in one run: native-entry times of each
operator's kernel with this tree's library (`after`) and with the library of an
earlier commit inlined into the same kernel (`before`), same variant, AB/BA rounds
(DESIGN §7: p50 per round, ratio = median of per-round ratios, its range, rounds
won). Each column is checked bit for bit against the interpreter running that
same kernel (the `before` kernel carries the old library as plain IR, so the
interpreter defines it too). Also prints the operation count of every function
in both libraries.

    python benchmarks/bench_mathlib.py --before 1a90b00 [--ops swiglu,gelu_residual]
        [--sizes 17x65,...] [--variant packet] [--rounds 6] [--samples 7]
"""
import argparse
import dataclasses
import importlib.util
import subprocess
import sys
import types

from cohort.audit.measure import run_rounds
from cohort.backend import target, timer
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import mathlib, ops
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.ir import Expr, For, If, Op, walk_expr
from cohort.verify.checksum import bitwise_equal


def load_library(rev: str) -> types.ModuleType:
    """The math library module of commit `rev`, loaded beside this tree's IR (the IR
    of that commit must build with today's constructors, true for libraries without fma)."""
    text = subprocess.run(["git", "show", f"{rev}:cohort/refimpl/mathlib.py"], capture_output=True,
                          text=True, check=True).stdout
    name = "cohort.refimpl._mathlib_" + rev.replace("~", "_").replace("^", "_")
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "cohort.refimpl"
    sys.modules[name] = mod                  # dataclasses look their module up
    exec(compile(text, f"{rev}:mathlib.py", "exec"), mod.__dict__)
    return mod


def substitute(e: Expr, arg: Expr, memo: dict) -> Expr:
    """`e` with the placeholder ARG 0 replaced by `arg` (shared nodes stay shared)."""
    r = memo.get(id(e))
    if r is None:
        if e.op is Op.ARG:
            r = arg
        elif not e.src:
            r = e
        else:
            src = tuple(substitute(s, arg, memo) for s in e.src)
            r = e if all(a is b for a, b in zip(src, e.src)) else Expr(e.op, e.dtype, src, e.arg)
        memo[id(e)] = r
    return r


def inline_math(kernel, library):
    """`kernel` with every MATH node replaced by `library`'s template for it."""
    memo: dict = {}

    def ex(e):
        r = memo.get(id(e))
        if r is None:
            if e.op is Op.MATH:
                r = substitute(library.template(e.arg), ex(e.src[0]), {})
            elif not e.src:
                r = e
            else:
                src = tuple(ex(s) for s in e.src)
                r = e if all(a is b for a, b in zip(src, e.src)) else Expr(e.op, e.dtype, src, e.arg)
            memo[id(e)] = r
        return r

    def st(s):
        changes = {f.name: ex(getattr(s, f.name)) for f in dataclasses.fields(s)
                   if isinstance(getattr(s, f.name), Expr)}
        if isinstance(s, If):
            changes.update(then=tuple(map(st, s.then)), orelse=tuple(map(st, s.orelse)))
        elif isinstance(s, For):
            changes["body"] = tuple(map(st, s.body))
        return dataclasses.replace(s, **changes)
    return dataclasses.replace(kernel, body=tuple(map(st, kernel.body)))


def op_counts(library) -> dict:
    out = {}
    for name in sorted(library.FUNCTIONS):
        nodes = list(walk_expr(library.template(name)))
        out[name] = (sum(n.op not in (Op.CONST, Op.ARG) for n in nodes),
                     sum(n.op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FMA, Op.SQRT, Op.MIN, Op.MAX, Op.NEG, Op.ABS)
                         and n.dtype.value == "f32" for n in nodes),
                     sum(n.op is Op.SELECT for n in nodes))
    return out


def column(kernel, op, shape, inputs, variant):
    launch = op.launch(shape)
    ref = ops.allocate(op, shape, inputs)
    interpret(kernel, launch.n, {**ref, **launch.scalars}, launch.consts)
    ck = compile_kernel(kernel, launch.consts, variant, n=launch.n)
    bufs = ops.allocate(op, shape, inputs)
    prepared = ck.prepare(launch.n, {**bufs, **launch.scalars})
    prepared.run()

    def verify(*_):
        if not bitwise_equal(bufs[op.output], ref[op.output]):
            raise SystemExit(f"{op.name} {ops.fmt_shape(shape)} {variant}: output differs from the interpreter")
        return True
    verify()
    iters = timer.calibrate_iters(prepared.entry, prepared.address)
    return (lambda n: timer.time_entry(prepared.entry, prepared.address, iters, n)), verify


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="the commit whose library is the baseline")
    ap.add_argument("--ops", default="swiglu,gelu_residual")
    ap.add_argument("--sizes", default="", help="comma-separated shapes (default: every seed size)")
    ap.add_argument("--variant", default="packet")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--samples", type=int, default=7)
    args = ap.parse_args()
    old = load_library(args.before)
    before, after = op_counts(old), op_counts(mathlib)
    print(target.host().summary())
    print(f"operations per function (all / float / selects), {args.before} -> this tree:")
    for name in sorted(after):
        b = before.get(name, ("-", "-", "-"))
        print(f"  {name:8s} {b[0]:>4} / {b[1]:>3} / {b[2]:>3}  ->  {after[name][0]:>4} / {after[name][1]:>3} / {after[name][2]:>3}")
    print(f"\n{'op':15s} {'shape':14s} {'before us':>10s} {'after us':>10s} {'after/before':>12s} {'range':>13s} {'won':>5s}")
    for name in args.ops.split(","):
        op = ops.get(name)
        sizes = [op.parse_shape(s) for s in args.sizes.split(",")] if args.sizes else op.seed_sizes
        k_after = op.kernel.ir
        k_before = inline_math(k_after, old)
        for shape in sizes:
            inputs = op.make_inputs(shape, 0)
            cols, checks = {}, {}
            for label, k in (("before", k_before), ("after", k_after)):
                cols[label], checks[label] = column(k, op, shape, inputs, args.variant)
            m = run_rounds(cols, args.rounds, args.samples, "native_entry", between=lambda c, r: checks[c]())
            p = m.paired("after", "before")
            print(f"{op.name:15s} {ops.fmt_shape(shape):14s} {m.time_ns('before') / 1e3:10.2f} "
                  f"{m.time_ns('after') / 1e3:10.2f} {p['ratio']:12.3f} {p['min']:6.3f}-{p['max']:<6.3f} "
                  f"{p['won']:>2d}/{p['rounds']:<2d}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

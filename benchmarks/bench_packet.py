"""Native-entry times of two variants (default `whole` and `packet`) per operator
and seed size, and the paired ratio candidate/baseline (DESIGN §7: rounds in AB/BA order, p50 per
round, median over rounds, ratio = median of per-round ratios, its range and
rounds won). Every column is checked bit for bit against the interpreter,
guard bands intact, before and after it is timed.

For each operator's largest row size, also the effective bandwidth: minimal
bytes (inputs read once, output written once) over the packet time.

    python benchmarks/bench_packet.py [--ops rmsnorm,rope] [--rounds 6] [--samples 7]
    python benchmarks/bench_packet.py --baseline packet --candidate packet,lanes=16   # W8 vs 16 lanes
"""
import argparse

import numpy as np

from cohort.audit.measure import run_rounds
from cohort.backend import target, timer
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.verify.compare import verify_build


def column(op, shape, inputs, ref, variant):
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)

    def first_run(n, args):          # the entry timed below, run once and checked
        prepared = ck.prepare(n, args)
        prepared.run()
        return prepared
    verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars}, {op.output: ref},
                           claims=False, launch=first_run)
    prepared = verdict.launch_result

    def verify(*_):
        if not verdict.ok or not verdict.recheck():
            raise SystemExit(f"{op.name}/{op.form} {ops.fmt_shape(shape)} {variant}: output or guard band wrong"
                             f" ({verdict.detail or 'after timed runs'})")
        return True
    verify()
    iters = timer.calibrate_iters(prepared.entry, prepared.address)
    sample = lambda n: timer.time_entry(prepared.entry, prepared.address, iters, n)
    return sample, verify, ck


def minimal_bytes(op, shape):
    total = 0
    for name, s in op.buffer_shapes(shape).items():
        itemsize = 1 if name == "mask" else 4
        total += int(np.prod(s)) * itemsize
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(ops.OPERATORS))
    ap.add_argument("--sizes", default="", help="comma-separated shapes (default: every seed size)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--baseline", default="whole", help="the ratio's denominator (a variant spelling)")
    ap.add_argument("--candidate", default="packet", help="the ratio's numerator (a variant spelling)")
    args = ap.parse_args()
    a, b = args.baseline, args.candidate
    print(target.host().summary())
    print(f"{'op':15s} {'shape':20s} {a + ' us':>18s} {b + ' us':>18s} {'ratio':>8s} "
          f"{'range':>13s} {'won':>5s} {'GB/s':>7s}   (ratio = {b}/{a}; GB/s: {b})")
    for name in args.ops.split(","):
        op = ops.get(name)
        sizes = [op.parse_shape(s) for s in args.sizes.split(",")] if args.sizes else op.seed_sizes
        for shape in sizes:
            inputs = op.make_inputs(shape, 0)
            ref = ops.run_reference(op, shape, inputs)
            cols, checks = {}, {}
            for v in (a, b):
                cols[v], checks[v], _ = column(op, shape, inputs, ref, v)
            m = run_rounds(cols, args.rounds, args.samples, "native_entry", between=lambda c, r: checks[c]())
            p = m.paired(b, a)
            t_b = m.time_ns(b) / 1e3
            gbs = minimal_bytes(op, shape) / (t_b * 1e3)
            print(f"{op.name:15s} {ops.fmt_shape(shape):20s} {m.time_ns(a) / 1e3:18.3f} {t_b:18.3f} "
                  f"{p['ratio']:8.3f} {p['min']:6.3f}-{p['max']:<6.3f} {p['won']:>2d}/{p['rounds']:<2d} "
                  f"{gbs:7.1f}", flush=True)


if __name__ == "__main__":
    main()

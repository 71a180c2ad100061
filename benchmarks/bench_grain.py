"""Runtime E2E times per operator and seed size for the task-grain policies
(caller, fixed grains 1 and 3, grain 0, legacy, auto) on the packet variant,
and the paired ratio auto / best fixed (DESIGN §7: balanced orders over
rounds, p50 per round, ratio = median of per-round ratios, its range and the
rounds won). Outputs are checked bit for bit before and after timing.

    python benchmarks/bench_grain.py [--ops rmsnorm] [--workers 2] [--rounds 6] [--samples 7]
"""
import argparse

from cohort.audit.measure import e2e_loop, run_rounds
from cohort.backend.compiler import compile_kernel
from cohort.backend.runtime import default_workers
from cohort.refimpl import ops
from cohort.verify.checksum import bitwise_equal
from cohort.verify.opcheck import e2e_samples

POLICIES = ["caller", "1", "3", "0", "legacy", "auto"]
FIXED = ["caller", "1", "3", "0", "legacy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(ops.OPERATORS))
    ap.add_argument("--sizes", default="")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--lanes", default="packet")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--samples", type=int, default=7)
    args = ap.parse_args()
    head = " ".join(f"{p:>9s}" for p in POLICIES)
    print(f"workers={args.workers}, {args.lanes}, runtime E2E, us")
    print(f"{'op':15s} {'shape':20s} {head} {'auto/best':>9s} {'best':>6s} {'range':>13s} {'won':>5s}")
    for name in args.ops.split(","):
        op = ops.get(name)
        sizes = [op.parse_shape(s) for s in args.sizes.split(",")] if args.sizes else op.seed_sizes
        for shape in sizes:
            inputs = op.make_inputs(shape, 0)
            ref = ops.run_reference(op, shape, inputs)
            launch = op.launch(shape)
            cols, checks = {}, {}
            for pol in POLICIES:
                ck = compile_kernel(op.kernel, launch.consts, f"{args.lanes},grain={pol},workers={args.workers}",
                                    n=launch.n)
                bufs = ops.allocate(op, shape, inputs)
                call_args = {**bufs, **launch.scalars}
                run = (lambda ck=ck, a=call_args: ck.launch(launch.n, a))
                run()
                if pol == "auto":   # time the steady state, after auto's trial launches
                    from cohort.backend import runtime
                    for _ in range(1000):
                        p = next(reversed(ck._recent.values()))
                        if runtime.choose(p, args.workers).chosen is not None:
                            break
                        run()
                iters, _ = e2e_samples(run, 1)
                cols[pol] = (lambda k, run=run, iters=iters: e2e_loop(run, iters, k))
                checks[pol] = (lambda b=bufs: check(b[op.output].reshape(ref.shape), ref, name, shape))
                checks[pol]()
            m = run_rounds(cols, args.rounds, args.samples, "runtime_e2e", between=lambda c, r: checks[c]())
            times = {p: m.time_ns(p) / 1e3 for p in POLICIES}
            best = min(FIXED, key=lambda p: times[p])
            pr = m.paired("auto", best)
            row = " ".join(f"{times[p]:9.2f}" for p in POLICIES)
            print(f"{op.name:15s} {ops.fmt_shape(shape):20s} {row} {pr['ratio']:9.3f} {best:>6s} "
                  f"{pr['min']:6.3f}-{pr['max']:<6.3f} {pr['won']:>2d}/{pr['rounds']:<2d}", flush=True)


def check(y, ref, name, shape):
    if not bitwise_equal(y, ref):
        raise SystemExit(f"{name} {ops.fmt_shape(shape)}: output differs from the interpreter")
    return True


if __name__ == "__main__":
    main()

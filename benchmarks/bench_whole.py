"""The `whole` variant per operator and seed size: compile time, native-entry
time (median of samples, each averaging enough calls to last ~0.2 ms) next to
the interpreter's time, with bitwise agreement checked before timing.

    python benchmarks/bench_whole.py [--ops rmsnorm,rope] [--samples 11]
"""
import argparse
import time

from cohort.backend import target
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
from cohort.verify.opcheck import check_operator


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(ops.OPERATORS))
    ap.add_argument("--samples", type=int, default=11)
    args = ap.parse_args()
    variant = parse_variant("whole")
    print(target.host().summary())
    print(f"{'op':15s} {'shape':20s} {'agree':>5s} {'compile ms':>10s} {'interp ms':>10s} "
          f"{'whole us':>10s} {'interp/whole':>12s}")
    for name in args.ops.split(","):
        op = ops.get(name)
        for shape in op.seed_sizes:
            t0 = time.perf_counter()
            r = check_operator(op, shape, 0, variant, timing=True, samples=args.samples)
            _ = time.perf_counter() - t0
            t_us = r.get("time_us", float("nan"))
            ratio = r["interpreter_seconds"] * 1e6 / t_us if t_us == t_us else float("nan")
            print(f"{op.name:15s} {ops.fmt_shape(shape):20s} {str(r['agree']):>5s} "
                  f"{r['compile_seconds'] * 1e3:10.1f} {r['interpreter_seconds'] * 1e3:10.1f} "
                  f"{t_us:10.2f} {ratio:12.0f}", flush=True)


if __name__ == "__main__":
    main()

"""Interpreter time per operator at its largest seed size (issue: rmsnorm
1024x4097 well under 2 s, attention 1x4x1x64x128x32x32 well under 5 s).

    python benchmarks/bench_interpreter.py [--repeat 3]
"""
import argparse
import time

import numpy as np

from cohort.refimpl import ops


def largest(op):
    return max(op.seed_sizes, key=lambda s: int(np.prod(op.buffer_shapes(s)[op.output])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'op':16s} {'shape':22s} {'threads':>9s} {'best s':>8s} {'median s':>9s}")
    for op in ops.OPERATORS.values():
        shape = largest(op)
        inputs = op.make_inputs(shape, 0)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ops.run_reference(op, shape, inputs)
            times.append(time.perf_counter() - t0)
        print(f"{op.name:16s} {ops.fmt_shape(shape):22s} {op.launch(shape).n:9d} {min(times):8.3f} "
              f"{float(np.median(times)):9.3f}")


if __name__ == "__main__":
    main()

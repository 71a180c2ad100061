"""gelu's error, cohort's against eager torch's, on a dense grid of float32 inputs.

Issue 25's gelu cells: eager ATen's F.gelu (approximate="none") is 2-13% faster than cohort's
at the native entry. Both compute 0.5*x*(1 + erf(x/sqrt(2))); they differ in erf. This measures
what each costs in accuracy against a float64 gelu (math.erf), in float32 ulps of the exact
value, where |gelu| > 1e-3 (below, the formula's own cancellation for x < -3 dominates both:
an absolute error about 1e-7, cohort's documented limit). On the grid below (docs/README.md):
cohort max 515 ulp, median 0.39; eager torch max 2148, median 0.75.

    python benchmarks/gelu_accuracy.py [--points 200001] [--lo -6] [--hi 6]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200001)
    ap.add_argument("--lo", type=float, default=-6.0)
    ap.add_argument("--hi", type=float, default=6.0)
    args = ap.parse_args()
    import torch

    from cohort.backend.compiler import compile_kernel
    from cohort.refimpl import ops
    x = np.linspace(args.lo, args.hi, args.points).astype(np.float32)
    op = ops.get("gelu")
    shape = (1, x.size)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, "packet", n=launch.n)
    bufs = ops.allocate(op, shape, {"x": x.reshape(1, -1)})
    ck.prepare(launch.n, {**bufs, **launch.scalars}).run()
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.astype(np.float64)])
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    shown = np.abs(exact) > 1e-3
    torch.set_num_threads(1)
    for name, y in (("cohort", bufs[op.output].reshape(-1)),
                    ("eager torch", torch.nn.functional.gelu(torch.from_numpy(x)).numpy())):
        e = (np.abs(y.astype(np.float64) - exact) / ulp)[shown]
        print(f"{name:12s} ulp where |gelu| > 1e-3: max {e.max():8.1f}  median {np.median(e):.3f}  "
              f"p99 {np.percentile(e, 99):.2f}  ({shown.sum()} of {x.size} points in [{args.lo}, {args.hi}])")


if __name__ == "__main__":
    main()

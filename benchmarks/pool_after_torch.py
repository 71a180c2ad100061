"""The worker pool's launch before and after torch has run at the same thread count.

docs/native-mt once saw matmul 256x512x256 at 2 workers either 1.9x faster than
one thread or no faster, round by round. The cause: after each parallel region
ATen's OpenMP threads (libgomp) spin for milliseconds (about 10 ms here), and the pool's
own worker shares a core with the spinner (/proc/self/task/*/schedstat: the worker waiting
runnable for most of the launch). So a process with an OpenMP runtime runs cohort's launches
on that runtime's team (runtime.pool_host, COHORT_POOL). This times one launch entry at 2
workers (runtime.NativeLaunch, the native timer, no Python between launches): alone, then
after a torch.matmul at 2 threads on the pool's own threads (COHORT_POOL=cohort) and on the
OpenMP team (auto), alternating, then the same after a pause of 0.5 s.

    python benchmarks/pool_after_torch.py [--op matmul] [--shape 256x512x256] [--workers 2]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="matmul")
    ap.add_argument("--shape", default="256x512x256")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    from cohort.backend import runtime
    from cohort.backend.compiler import compile_kernel
    from cohort.backend.variant import parse_variant
    from cohort.refimpl import ops
    op = ops.get(args.op)
    shape = tuple(int(x) for x in args.shape.split("x"))
    launch = op.launch(shape)
    bufs = ops.allocate(op, shape, op.make_inputs(shape, 0))

    def entry(workers):
        v = parse_variant(f"packet,grain=0,workers={workers}")
        p = compile_kernel(op.kernel, launch.consts, v, n=launch.n).prepare(launch.n, {**bufs, **launch.scalars})
        nl = runtime.NativeLaunch(p, v)
        nl.launch()
        return nl, nl.calibrate()

    def line(label, nl, iters):
        us = nl.time(iters, 7) / 1e3
        print(f"{label:28s} median {np.median(us):8.1f} us  samples {' '.join(f'{x:.0f}' for x in us)}", flush=True)

    one, it1 = entry(1)
    many, it = entry(args.workers)
    for r in range(args.rounds):
        line("1 worker", one, it1)
        line(f"{args.workers} workers alone", many, it)
    import torch
    torch.set_num_threads(args.workers)
    a, b = torch.randn(256, 512), torch.randn(512, 256)
    for pause in (0.0, 0.5):
        for r in range(args.rounds):
            for how in ("cohort", "auto"):
                os.environ[runtime.POOL_ENV] = how
                torch.matmul(a, b)
                time.sleep(pause)
                line(f"{runtime.pool_host():6s} after torch{f', {pause} s' if pause else ''}", many, it)
    os.environ.pop(runtime.POOL_ENV)


if __name__ == "__main__":
    main()

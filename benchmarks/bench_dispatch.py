"""Dispatch cost of the runtime: a launch of one tiny block, timed from Python
(median over many launches), on the caller and through the worker pool, and
the Python launch API's overhead over the native entry for rmsnorm 17x65.

    python benchmarks/bench_dispatch.py
"""
import time

import numpy as np

from cohort import Buffer, f32, global_id, kernel
from cohort.backend import timer
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops


@kernel(block=8)
def touch(y: Buffer[f32]):
    y[global_id()] = 1.0


def median_us(call, n=20000):
    for _ in range(200):
        call()
    ts = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter_ns()
        call()
        ts[i] = time.perf_counter_ns() - t0
    return float(np.median(ts)) / 1e3


def main():
    y = np.zeros(16, np.float32)
    print("one-block launch (8 threads), median us per launch from Python:")
    for v in ("packet", "packet,grain=1,workers=2", "packet,grain=1,workers=8"):
        ck = compile_kernel(touch, None, v)
        p = ck.prepare(16, {"y": y})
        prepared = median_us(lambda: ck.run_prepared(p))
        api = median_us(lambda: ck.launch(16, {"y": y}))
        print(f"  {v:28s} prepared {prepared:7.2f}   launch API {api:7.2f}")
    op = ops.get("rmsnorm")
    shape = (17, 65)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, "packet", n=launch.n)
    args = {**ops.allocate(op, shape, op.make_inputs(shape, 0)), **launch.scalars}
    p = ck.prepare(launch.n, args)
    native = float(np.median(timer.time_entry(p.entry, p.address, 2000, 15))) / 1e3
    api = median_us(lambda: ck.launch(launch.n, args))
    print(f"rmsnorm 17x65 packet: native entry {native:.3f} us, launch API {api:.3f} us, "
          f"overhead {api - native:.3f} us")


if __name__ == "__main__":
    main()

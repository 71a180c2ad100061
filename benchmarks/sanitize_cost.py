"""What the sanitizing build (sanitize=on: uninitialised-shared-read and shared-race detection,
backend/lowering/sanitize.py) costs against the default build, per launch.

    PYTHONPATH=. python benchmarks/sanitize_cost.py

Median of 5 launches on the calling thread (after one untimed), NumPy buffers, compiles
excluded; the interpreter's time for the same launch for scale (the check it replaces)."""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.refimpl.interpreter import interpret

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from block_sum import block_sum  # noqa: E402


def median_s(fn, reps=5):
    fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def cases():
    n = 1_000_000
    x = np.random.default_rng(0).integers(-1000, 1000, n).astype(np.int32)
    yield "block_sum", block_sum, {}, n, lambda: {"x": x, "sums": np.zeros(-(-n // 32), np.int32)}
    for name, shape in (("cumsum", (64, 4096)), ("transpose", (4, 512, 512)), ("matmul", (96, 256, 256)),
                        ("histogram", (1_000_000, 1000))):
        op = ops.get(name)
        launch = op.launch(shape)
        inputs = op.make_inputs(shape, 0)
        yield (f"{name} {ops.fmt_shape(shape)}", op.kernel, launch.consts, launch.n,
               lambda op=op, shape=shape, inputs=inputs, launch=launch: {**ops.allocate(op, shape, inputs),
                                                                         **launch.scalars})


def main():
    print(f"{'case':24s} {'threads':>9s} {'packet ms':>10s} {'sanitize ms':>12s} {'ratio':>6s} "
          f"{'whole ms':>9s} {'sanitize ms':>12s} {'ratio':>6s} {'interp. ms':>11s}")
    for label, k, consts, n, make in cases():
        row = []
        for base in ("packet", "whole"):
            t = [median_s(lambda v=v: compile_kernel(k, consts, v, n=n, verify="never").launch(n, make()))
                 for v in (base, base + ",sanitize=on")]
            row += [t[0] * 1e3, t[1] * 1e3, t[1] / t[0]]
        ir = getattr(k, "ir", k)
        t0 = time.perf_counter()
        interpret(ir, n, make(), consts)
        ref = (time.perf_counter() - t0) * 1e3
        print(f"{label:24s} {n:9d} {row[0]:10.2f} {row[1]:12.2f} {row[2]:6.1f} {row[3]:9.2f} {row[4]:12.2f} "
              f"{row[5]:6.1f} {ref:11.0f}")


if __name__ == "__main__":
    main()

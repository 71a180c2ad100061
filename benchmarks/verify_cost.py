"""The cost of verify="first" (backend/verify_launch.py): a new shape's first launch runs the
interpreter on copies of the arguments and compares; later launches of the shape do not.

    PYTHONPATH=. python benchmarks/verify_cost.py

Prints, per kernel and n: the first launch with verify="first" (interpreter + native +
compare), a later launch of the same shape (a set lookup more than verify="never"), and a
launch with verify="never", each the median of a few runs on fresh compiled handles."""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from cohort import Buffer, atomic_add, barrier, block_id, f32, global_id, i32, kernel, shared, thread_id
from cohort.backend.compiler import compile_kernel


@kernel(block=32)
def axpy(x: Buffer[f32], y: Buffer[f32], out: Buffer[f32], a: f32):
    g = global_id()
    out[g] = a * x[g] + y[g]


@kernel(block=32)
def block_reduce(x: Buffer[i32], total: Buffer[i32], sums: Buffer[i32]):
    t = thread_id()
    g = global_id()
    s = shared(i32, 32)
    s[t] = x[g] if g < len(x) else 0
    barrier()
    for k in range(5):
        h = 16 >> k
        if t < h:
            s[t] = s[t] + s[t + h]
        barrier()
    if t == 0:
        sums[block_id()] = s[0]
        atomic_add(total, 0, s[0])


def args_for(name, n):
    rng = np.random.default_rng(0)
    if name == "axpy":
        return {"x": rng.standard_normal(n).astype(np.float32), "y": rng.standard_normal(n).astype(np.float32),
                "out": np.zeros(n, np.float32), "a": np.float32(2.0)}
    return {"x": rng.integers(-100, 100, n).astype(np.int32), "total": np.zeros(1, np.int32),
            "sums": np.zeros(-(-n // 32), np.int32)}


def seconds(fn, reps=3):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main(sizes=(10_000, 100_000, 1_000_000)):
    print(f"{'kernel':14s} {'n':>9s} {'first (s)':>10s} {'later (ms)':>11s} {'never (ms)':>11s}")
    for k in (axpy, block_reduce):
        for n in sizes:
            a = args_for(k.ir.name, n)
            compile_kernel(k, {}, "packet", n=n, verify="never").launch(n, a)      # compiled, warm

            def first():
                ck = compile_kernel(k, {}, "packet", n=n, verify="always")         # every launch checked
                ck.launch(n, a)
            ck = compile_kernel(k, {}, "packet", n=n)
            ck.launch(n, a)
            later = seconds(lambda: ck.launch(n, a), 9)
            never_ck = compile_kernel(k, {}, "packet", n=n, verify="never")
            never = seconds(lambda: never_ck.launch(n, a), 9)
            print(f"{k.ir.name:14s} {n:9d} {seconds(first):10.3f} {later * 1e3:11.3f} {never * 1e3:11.3f}")


if __name__ == "__main__":
    main(tuple(int(s) for s in sys.argv[1:]) or (10_000, 100_000, 1_000_000))

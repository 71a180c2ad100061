"""What the sanitizing build (sanitize=on: uninitialised shared reads, races in shared and
global memory, barrier divergence; backend/lowering/sanitize.py, sanitize_global.py) costs
against the default build, per launch, and what it costs to compile.

    PYTHONPATH=. python benchmarks/sanitize_cost.py [--reps 7] [--no-interpreter] [--compile]

Launch time: per case and base variant (packet, whole), the default and the sanitize build
launched alternately (paired: a load change hits both), `--reps` times after one untimed
launch each, on the calling thread, NumPy buffers, compiles excluded, through
CompiledKernel.launch (verify="never"), so a sanitize launch includes fitting its global
shadows (56 bytes per element of every buffer the kernel writes). Printed: the median and
the range (min-max) of each, in ms, and the median of the paired ratios. The interpreter's
time for the same launch (once) is the scale: the check a sanitize build replaces.

`--compile`: the time to build (lower, optimise, link) a kernel with one shared array of
S slots, default and sanitize, for growing S (issue: big shared arrays in sanitize builds)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from cohort import Buffer, barrier, f32, global_id, i32, kernel, shared, thread_id
from cohort.backend import compiler, objcache
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.refimpl.interpreter import interpret

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from block_sum import block_sum  # noqa: E402


@kernel(block=256)
def axpy(x: Buffer[f32], y: Buffer[f32], a: f32):
    g = global_id()
    if g < len(y):
        y[g] = a * x[g] + y[g]


@kernel(block=256)
def scatter(idx: Buffer[i32], x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    if g < len(x):
        y[idx[g]] = x[g]


def cases():
    n = 1_000_000
    rng = np.random.default_rng(0)
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    yield "block_sum (examples/)", block_sum, {}, n, lambda: {"x": x, "sums": np.zeros(-(-n // 32), np.int32)}
    xf = rng.standard_normal(n).astype(np.float32)
    yield "axpy", axpy, {}, n, lambda: {"x": xf, "y": np.ones(n, np.float32), "a": np.float32(2.0)}
    perm = rng.permutation(n).astype(np.int32)
    yield "scatter (permutation)", scatter, {}, n, lambda: {"idx": perm, "x": xf, "y": np.zeros(n, np.float32)}
    for name, shape in (("cumsum", (64, 4096)), ("transpose", (4, 512, 512)), ("matmul", (96, 256, 256)),
                        ("histogram", (1_000_000, 1000))):
        op = ops.get(name)
        launch = op.launch(shape)
        inputs = op.make_inputs(shape, 0)
        yield (f"{name} {ops.fmt_shape(shape)}", op.kernel, launch.consts, launch.n,
               lambda op=op, shape=shape, inputs=inputs, launch=launch: {**ops.allocate(op, shape, inputs),
                                                                         **launch.scalars})


def paired(runs: list, reps: int) -> list:
    """Per run, its times (s): the runs called in turn, `reps` rounds, after one untimed round."""
    for r in runs:
        r()
    out = [[] for _ in runs]
    for _ in range(reps):
        for i, r in enumerate(runs):
            t0 = time.perf_counter()
            r()
            out[i].append(time.perf_counter() - t0)
    return out


def cell(ts: list) -> str:
    ms = [t * 1e3 for t in ts]
    return f"{statistics.median(ms):.3g} ({min(ms):.3g}-{max(ms):.3g})"


def launch_costs(reps: int, with_interpreter: bool):
    print(f"{'case':26s} {'threads':>9s} | {'packet ms':>20s} {'sanitize ms':>20s} {'x':>5s} | "
          f"{'whole ms':>20s} {'sanitize ms':>20s} {'x':>5s} | {'interp. ms':>10s}")
    for label, k, consts, n, make in cases():
        row = []
        for base in ("packet", "whole"):
            builds = [compile_kernel(k, consts, v, n=n, verify="never") for v in (base, base + ",sanitize=on")]
            args = [make() for _ in builds]
            off, on = paired([lambda ck=ck, a=a: ck.launch(n, a) for ck, a in zip(builds, args)], reps)
            ratio = statistics.median(b / a for a, b in zip(off, on))
            row += [cell(off), cell(on), f"{ratio:.1f}"]
        ref = ""
        if with_interpreter:
            t0 = time.perf_counter()
            interpret(getattr(k, "ir", k), n, make(), consts)
            ref = f"{(time.perf_counter() - t0) * 1e3:.0f}"
        print(f"{label:26s} {n:9d} | {row[0]:>20s} {row[1]:>20s} {row[2]:>5s} | {row[3]:>20s} {row[4]:>20s} "
              f"{row[5]:>5s} | {ref:>10s}", flush=True)


def staged(size: int):
    """A kernel staging through one shared array of `size` slots (block 256)."""
    @kernel(block=256)
    def stage(x: Buffer[f32], y: Buffer[f32]):
        t = thread_id()
        g = global_id()
        s = shared(f32, size)
        for j in range(size // 256):
            s[j * 256 + t] = x[g] if g < len(x) else 0.0
        barrier()
        if g < len(y):
            y[g] = s[(t * 7) % size]
    return stage


def compile_costs():
    print(f"{'shared slots':>12s} {'packet s':>9s} {'sanitize s':>11s} {'whole s':>8s} {'sanitize s':>11s}")
    for size in (1024, 4096, 16384):
        k = staged(size)
        row = []
        for v in ("packet", "packet,sanitize=on", "whole", "whole,sanitize=on"):
            compiler._cache.clear()
            compiler._bound.clear()
            compiler._handles.clear()
            t0 = time.perf_counter()
            with objcache.disabled():
                compile_kernel(k, {}, v, verify="never")
            row.append(time.perf_counter() - t0)
        print(f"{size:12d} {row[0]:9.2f} {row[1]:11.2f} {row[2]:8.2f} {row[3]:11.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-interpreter", action="store_true")
    ap.add_argument("--compile", action="store_true", help="also time compiles with big shared arrays")
    a = ap.parse_args()
    launch_costs(a.reps, not a.no_interpreter)
    if a.compile:
        compile_costs()


if __name__ == "__main__":
    main()

"""Dispatch cost of the runtime and of the Python launch path.

    python benchmarks/bench_dispatch.py                      # this checkout
    python benchmarks/bench_dispatch.py --before OTHER_ROOT  # before/after table

The first part times a launch of one tiny block from Python (median over many
launches), on the caller and through the worker pool. The second times, for
rmsnorm (packet variant) at 17x65 and 34x128: the native entry alone (the JIT
timer's loop, no Python), a launch with the same arrays again, a launch with
fresh NumPy arrays, a launch with fresh torch tensors (each new array made
outside the timed call), and compile_kernel of an already built kernel.

With --before, the launch-path part runs in child processes alternating
between this checkout and OTHER_ROOT (another checkout of the package, put on
PYTHONPATH instead), ROUNDS times each, and prints each figure's median over
the rounds with the range of the rounds' medians, and the load (uptime).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SHAPES = [(17, 65), (34, 128)]
COLUMNS = [("native", "native entry"), ("reused", "launch, same arrays"), ("fresh", "launch, fresh NumPy"),
           ("torch", "launch, fresh torch"), ("compile", "compile_kernel (built)")]


def median_us(call, n=20000):
    for _ in range(200):
        call()
    ts = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter_ns()
        call()
        ts[i] = time.perf_counter_ns() - t0
    return float(np.median(ts)) / 1e3


def median_fresh_us(make, launch, n=4000):
    """A launch with arguments never seen before, each made outside the timed call."""
    for _ in range(100):
        launch(make())
    ts = np.empty(n)
    for i in range(n):
        args = make()
        t0 = time.perf_counter_ns()
        launch(args)
        ts[i] = time.perf_counter_ns() - t0
    return float(np.median(ts)) / 1e3


def one_block():
    # the frontend resolves a kernel's annotations in its module's globals
    global Buffer, f32, global_id, kernel
    from cohort import Buffer, f32, global_id, kernel
    from cohort.backend.compiler import compile_kernel

    @kernel(block=8)
    def touch(y: Buffer[f32]):
        y[global_id()] = 1.0

    y = np.zeros(16, np.float32)
    print("one-block launch (8 threads), median us per launch from Python:")
    for v in ("packet", "packet,grain=1,workers=2", "packet,grain=1,workers=8"):
        ck = compile_kernel(touch, None, v)
        p = ck.prepare(16, {"y": y})
        prepared = median_us(lambda: ck.run_prepared(p))
        api = median_us(lambda: ck.launch(16, {"y": y}))
        print(f"  {v:28s} prepared {prepared:7.2f}   launch API {api:7.2f}")


def launch_path() -> dict:
    """{shape: {column: median us}} for the code on this process's path."""
    from cohort.backend import timer
    from cohort.backend.compiler import compile_kernel
    from cohort.refimpl import ops
    try:
        import torch
    except ImportError:
        torch = None
    op = ops.get("rmsnorm")
    out = {}
    for shape in SHAPES:
        launch = op.launch(shape)
        ck = compile_kernel(op.kernel, launch.consts, "packet", n=launch.n)
        bufs = ops.allocate(op, shape, op.make_inputs(shape, 0))
        args = {**bufs, **launch.scalars}
        p = ck.prepare(launch.n, args)
        row = {"native": float(np.median(timer.time_entry(p.entry, p.address, 2000, 15))) / 1e3,
               "reused": median_us(lambda: ck.launch(launch.n, args))}
        run = lambda a: ck.launch(launch.n, a)
        row["fresh"] = median_fresh_us(lambda: {**{k: v.copy() for k, v in bufs.items()}, **launch.scalars}, run)
        if torch is not None:
            row["torch"] = median_fresh_us(
                lambda: {**{k: torch.from_numpy(v.copy()) for k, v in bufs.items()}, **launch.scalars}, run)
        row["compile"] = median_us(lambda: compile_kernel(op.kernel, launch.consts, "packet", n=launch.n), 400)
        out["x".join(map(str, shape))] = row
    return out


def _child(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
                       cwd=str(root), timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"child on {root} failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def compare(after: Path, before: Path, rounds: int):
    from cohort.backend import target
    print(target.host().summary())
    print(f"load before: {_uptime()}")
    runs = {"before": [], "after": []}
    for i in range(rounds):
        for label, root in (("before", before), ("after", after)) if i % 2 == 0 else \
                (("after", after), ("before", before)):
            runs[label].append(_child(root))
    print(f"load after:  {_uptime()}")
    print(f"rmsnorm, packet variant; us; median of {rounds} rounds' medians [min-max of the rounds]")
    print(f"before = {before}, after = {after}")
    for shape in ("x".join(map(str, s)) for s in SHAPES):
        print(f"\nrmsnorm {shape}")
        print(f"  {'':24s} {'before':>24s} {'after':>24s}")
        for key, name in COLUMNS:
            cells = []
            for label in ("before", "after"):
                vals = [r[shape][key] for r in runs[label] if key in r[shape]]
                cells.append(f"{np.median(vals):8.2f} [{min(vals):.2f}-{max(vals):.2f}]" if vals else "n/a")
            print(f"  {name:24s} {cells[0]:>24s} {cells[1]:>24s}")
        for label in ("before", "after"):
            over = [r[shape]["fresh"] - r[shape]["native"] for r in runs[label]]
            print(f"  {label}: fresh NumPy launch over the native entry {np.median(over):.2f} us "
                  f"[{min(over):.2f}-{max(over):.2f}]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another checkout's root, timed alternately with this one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(launch_path()))
        return
    if a.before is not None:
        compare(Path(__file__).resolve().parents[1], a.before.resolve(), a.rounds)
        return
    one_block()
    print(f"launch path, rmsnorm packet, median us ({_uptime()}):")
    for shape, row in launch_path().items():
        print(f"  {shape:8s} " + "  ".join(f"{name} {row[key]:.2f}" for key, name in COLUMNS if key in row))


if __name__ == "__main__":
    main()

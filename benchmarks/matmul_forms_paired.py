"""matmul's tiled forms, two versions of the schedule paired in one process.

Loads refimpl/ops/matmul.py as it is in this checkout and a second copy of it (`--before`,
e.g. the file from a checkout of an earlier commit), builds each one's tiled form (`--form`;
the copy's `--before-form`, default the same) for the shape's launch, checks that both give
the same bits, then times their native entries in rounds of rotating order (drift hits both
alike). Printed per shape: GFLOP/s of each (median over rounds) and after's speed over
before's per round, median [range].

    git show <commit>:cohort/refimpl/ops/matmul.py > /tmp/matmul_before.py
    python benchmarks/matmul_forms_paired.py --before /tmp/matmul_before.py \\
        [--form tiled64] [--before-form tiled32] [--variant packet,lanes=16] [--rounds 7] \\
        [--shapes 1024x1024x1024,...]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cohort", "refimpl", "ops",
                    "matmul.py")
SHAPES = "1024x1024x1024,1023x1021x997,257x511x129,200x300x500,37x129x70,64x64x64"
FORMS = {"tiled": ("matmul", 16), "tiled32": ("matmul32", 32), "tiled64": ("matmul64", 64)}   # kernel, block


def load(path: str, name: str):
    """The module at `path`, its package-relative imports made absolute (a copy of matmul.py
    taken out of its package)."""
    src = open(path).read()
    src = src.replace("from ... import", "from cohort import").replace("from .base import",
                                                                       "from cohort.refimpl.ops.base import")
    mod = type(sys)(name)
    mod.__file__ = path
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod


def aligned(a: np.ndarray) -> np.ndarray:
    """A copy starting on a 64-byte line, as torch's allocator places tensors."""
    buf = np.empty(a.size + 16, a.dtype)
    off = (-buf.ctypes.data % 64) // a.itemsize
    out = buf[off:off + a.size].reshape(a.shape)
    out[...] = a
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="path of the other matmul.py")
    ap.add_argument("--form", choices=tuple(FORMS), default="tiled32")
    ap.add_argument("--before-form", choices=tuple(FORMS), default=None, help="default: --form")
    ap.add_argument("--variant", default=None, help="default: packet,lanes=16 for tiled32 and tiled64, "
                                                    "packet for tiled")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default=SHAPES)
    args = ap.parse_args()
    if not os.path.isfile(args.before):
        ap.error(f"--before {args.before!r} is not a file")
    try:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
        assert all(len(s) == 3 and min(s) >= 1 for s in shapes)
    except (ValueError, AssertionError):
        ap.error(f"--shapes wants MxKxN[,MxKxN...] of positive sizes, got {args.shapes!r}")
    from cohort.backend import runtime
    from cohort.backend.compiler import compile_kernel
    from cohort.backend.variant import parse_variant
    spelled = args.variant or ("packet" if args.form == "tiled" else "packet,lanes=16")
    try:
        v = parse_variant(spelled)
    except ValueError as e:
        ap.error(f"--variant: {e}")
    mods = {"before": load(args.before, "matmul_before"), "after": load(HERE, "matmul_after")}
    forms = {"before": args.before_form or args.form, "after": args.form}
    missing = [f"{n}'s {f}" for n, f in forms.items() if not hasattr(mods[n], FORMS[f][0])]
    if missing:
        ap.error(f"no {' and no '.join(missing)} form in that matmul.py")
    rng = np.random.default_rng(0)
    print(f"# after {forms['after']}, before {forms['before']}, variant {spelled}, {args.rounds} rounds, "
          f"one thread; before = {args.before}")
    for M, K, N in shapes:
        a = aligned(rng.standard_normal((M, K), dtype=np.float32))
        b = aligned(rng.standard_normal((K, N), dtype=np.float32))
        runs, outs = {}, {}
        for name, m in mods.items():
            attr, bn = FORMS[forms[name]]
            kern = getattr(m, attr)
            launch = m.tiled_launch(bn)((M, K, N))
            c = aligned(np.zeros((M, N), np.float32))
            p = compile_kernel(kern, launch.consts, v, n=launch.n).prepare(launch.n, {"a": a, "b": b, "c": c,
                                                                                       **launch.scalars})
            runtime.run(p, v)
            if p.fallback is not None:
                print(f"  note: {name}: {p.fallback}")
            outs[name] = c.copy()
            runs[name] = (lambda p=p: runtime.run(p, v))
        if not np.array_equal(outs["before"].view(np.uint32), outs["after"].view(np.uint32)):
            sys.exit(f"matmul_forms_paired: {M}x{K}x{N}: before and after give different bits")
        t0 = time.perf_counter()
        runs["after"]()
        reps = max(1, int(0.15 / max(time.perf_counter() - t0, 1e-7)))
        times = {n: [] for n in runs}
        order = list(runs)
        for r in range(args.rounds):
            for n in order[r % 2:] + order[:r % 2]:
                t0 = time.perf_counter()
                for _ in range(reps):
                    runs[n]()
                times[n].append((time.perf_counter() - t0) / reps)
        flop = 2.0 * M * K * N
        speed = [times["before"][i] / times["after"][i] for i in range(args.rounds)]
        print(f"{M}x{K}x{N:<6d} before {flop / statistics.median(times['before']) / 1e9:6.1f} GFLOP/s  "
              f"after {flop / statistics.median(times['after']) / 1e9:6.1f} GFLOP/s  "
              f"speed after/before {statistics.median(speed):.2f} [{min(speed):.2f}, {max(speed):.2f}]",
              flush=True)


if __name__ == "__main__":
    main()

"""One operator's native entry at given shapes: median time, bytes per second, bits checked.

The entry is called by the native timer (no Python, runtime or allocation inside), one
thread, on inputs with guard bands, after one run whose output is compared bit for bit with
the interpreter's. For an A/B of two trees, alternate runs with PYTHONPATH set to each (a
`git worktree` of the other commit), as docs/README.md's measurements of matmul's tile rows and
histogram's whole blocks:

    python benchmarks/entry_time.py matmul packet 64x64x64 256x512x256 1024x1024x1024
    PYTHONPATH=/path/to/other/tree python benchmarks/entry_time.py histogram packet 4194304x256
"""
import argparse
import os
import sys

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("op")
    ap.add_argument("variant")
    ap.add_argument("shapes", nargs="+", help="e.g. 256x512x256")
    ap.add_argument("--samples", type=int, default=11)
    args = ap.parse_args()
    from cohort.backend import timer
    from cohort.backend.compiler import compile_kernel
    from cohort.refimpl import ops
    from cohort.verify.guard import GuardedSet
    op = ops.get(args.op)
    for text in args.shapes:
        try:
            shape = tuple(int(x) for x in text.split("x"))
        except ValueError:
            ap.error(f"shape {text!r}: expected integers joined by x, e.g. 256x512x256")
        launch = op.launch(shape)
        ck = compile_kernel(op.kernel, launch.consts, args.variant, n=launch.n)
        inputs = op.make_inputs(shape, 0)
        bufs = GuardedSet(ops.allocate(op, shape, inputs)).arrays
        p = ck.prepare(launch.n, {**bufs, **launch.scalars})
        p.run()
        want = ops.run_reference(op, shape, inputs).reshape(-1)
        got = bufs[op.output].reshape(-1)
        same = np.array_equal(got.view(np.uint32), want.view(np.uint32))
        once = np.median(timer.time_entry(p.entry, p.address, 1, 3))
        iters = max(1, int(2e5 / max(1.0, once)))
        ns = timer.time_entry(p.entry, p.address, iters, args.samples)
        nbytes = sum(a.nbytes for a in bufs.values())
        print(f"{args.op} {text} {args.variant}: median {np.median(ns) / 1e3:.2f} us "
              f"[{ns.min() / 1e3:.2f}, {ns.max() / 1e3:.2f}] over {args.samples} samples of {iters}, "
              f"{nbytes / np.median(ns):.1f} GB/s, bits {'equal the interpreter' if same else 'DIFFER'}",
              flush=True)


if __name__ == "__main__":
    main()

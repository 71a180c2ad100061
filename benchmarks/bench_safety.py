"""The cost of memory safety: the default (safe) build against unsafe=on, at the
native entry, every operator, a few seed sizes. Both builds of a case are
timed in alternating rounds (order flipped every round) on the very same
argument block (same buffers: the entry ABI is one for every build), so
data placement is not part of the difference; each round gives one paired
ratio safe/unsafe of the two medians.
Outputs of both builds are checked bit for bit against the interpreter, and
a case whose safe build fell back to the checked build says so.

    python benchmarks/bench_safety.py [--rounds 5] [--samples 5] [--variant packet] [--ops a,b]
"""
import argparse
import os

import numpy as np

from cohort.backend import target, timer
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.verify.checksum import bitwise_equal

SIZES = {"attention": [(1, 4, 2, 16, 32, 16, 16), (1, 4, 1, 64, 128, 32, 32)],
         "rope": [(17, 66), (129, 768), (1024, 4098)]}
DEFAULT_SIZES = [(17, 65), (129, 768), (1024, 4097)]


def prepared(op, shape, spec, inputs, ref):
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, spec, n=launch.n)
    bufs = ops.allocate(op, shape, inputs)
    p = ck.prepare(launch.n, {**bufs, **launch.scalars})
    p.run()
    y = bufs[op.output].reshape(ref.shape)
    assert bitwise_equal(y, ref), f"{op.name} {shape} {spec}: differs from the interpreter"
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--variant", default="packet")
    ap.add_argument("--ops", default="")
    ap.add_argument("--target-us", type=float, default=2000.0, help="length of one sample")
    a = ap.parse_args()
    names = [n for n in a.ops.split(",") if n] or list(ops.OPERATORS)
    print(target.host().summary())
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}  variant {a.variant}, "
          f"{a.rounds} rounds x {a.samples} samples")
    print("| op | size | unsafe µs | safe µs | safe/unsafe | range | fallback |")
    print("|---|---|---:|---:|---:|---:|---|")
    worst = 0.0
    for name in names:
        op = ops.get(name)
        for shape in SIZES.get(name, DEFAULT_SIZES):
            inputs = op.make_inputs(shape, 0)
            ref = ops.run_reference(op, shape, inputs)
            unsafe = prepared(op, shape, a.variant + ",unsafe=on", inputs, ref)
            safe = prepared(op, shape, a.variant, inputs, ref)
            assert safe.code.scratch_bytes == unsafe.code.scratch_bytes
            entries = {"unsafe": unsafe.entry, "safe": safe.entry}
            iters = timer.calibrate_iters(safe.entry, safe.address, a.target_us * 1e3)
            meds = {k: [] for k in entries}
            ratios = []
            for r in range(a.rounds):
                order = ("unsafe", "safe") if r % 2 == 0 else ("safe", "unsafe")
                for k in order:
                    meds[k].append(float(np.median(timer.time_entry(entries[k], safe.address, iters, a.samples))))
                ratios.append(meds["safe"][-1] / meds["unsafe"][-1])
            med = float(np.median(ratios))
            worst = max(worst, med)
            print(f"| {name} | {ops.fmt_shape(shape)} | {np.median(meds['unsafe']) / 1e3:.3f} | "
                  f"{np.median(meds['safe']) / 1e3:.3f} | {med:.3f} | {min(ratios):.3f}–{max(ratios):.3f} | "
                  f"{safe.fallback or 'no'} |", flush=True)
    print(f"worst median ratio {worst:.3f}; load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

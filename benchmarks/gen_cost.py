"""Compile cost per generated program, this generator against an earlier one, paired.

Programs of the two generators alternate (old i, new i, old i+1, ...), each compiled in
this process in a fixed set of variants; the figure is CPU seconds (process time, which a
loaded machine inflates much less than wall time) per program, and the ratio new/old.
A campaign's programs per second scale with the inverse of this cost.

    PYTHONPATH=. python benchmarks/gen_cost.py [--programs 12] [--before REV]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from gen_breadth import BEFORE, hypothesis_programs, load_before  # noqa: E402

VARIANTS = ("whole", "lanes=8,full_packet=on,predicated=on,private=cohort",
            "lanes=4,full_packet=on,predicated=off,private=cohort",
            "lanes=16,full_packet=off,predicated=on,private=cohort")


def compile_cpu(case) -> float:
    from cohort.backend.compiler import UnsupportedVariant, compile_kernel
    from cohort.backend.variant import parse_variant
    total = 0.0
    for spec in VARIANTS:
        v = parse_variant(spec)
        if v.lanes > case.block:
            continue
        t0 = time.process_time()
        try:
            compile_kernel(case.kernel, case.consts, v, n=case.n)
        except UnsupportedVariant:
            pass
        total += time.process_time() - t0
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=12)
    p.add_argument("--before", default=BEFORE)
    a = p.parse_args(argv)
    from cohort.verify import gen
    old = hypothesis_programs(load_before(a.before).cases(), a.programs)
    new = hypothesis_programs(gen.cases(), a.programs)
    seeded = [gen.generate(s) for s in range(a.programs)]
    costs = {"old": [], "new (cases)": [], "new (generate)": []}
    for o, n, s in zip(old, new, seeded):
        costs["old"].append(compile_cpu(o))
        costs["new (cases)"].append(compile_cpu(n))
        costs["new (generate)"].append(compile_cpu(s))
    base = statistics.mean(costs["old"])
    print(f"compile CPU seconds per program over {len(VARIANTS)} variants ({a.programs} programs each):")
    for name, c in costs.items():
        print(f"  {name:16} mean {statistics.mean(c):6.2f}  median {statistics.median(c):6.2f}  max {max(c):6.2f}"
              f"  ratio to old {statistics.mean(c) / base:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How many expected-error programs (an access one past its buffer, gen/boundary.py) it takes
to catch each launch-time bounds-proof bug: a load-independent proxy for a campaign's time to
catch them (a campaign of k programs, a share e of them one past, catches a bug of rate p
with probability about 1 - (1 - e*p)^k).

Seeded programs (`generate(seed)`) that the interpreter rejects one past an edge are run,
with each bug planted, on `whole` (the proof reads the kernel alone: every safe build proves
the same accesses) and a pool variant; a program catches the bug when a build does not
report the interpreter's error.

    PYTHONPATH=. python benchmarks/edge_rate.py [--seeds 400] [--bugs a,b]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BOUNDS = ("bounds_len_inclusive", "bounds_le_guard", "bounds_block_floor", "bounds_loop_stop_lo",
          "bounds_mod_nonneg", "pool_rerun_unchecked")


def main():
    from cohort.backend.inject import inject_bug_TESTING_ONLY
    from cohort.verify.execute import execute, reference
    from cohort.verify.gen import generate
    from cohort.verify.matrix import variants_for
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--bugs", default=",".join(BOUNDS))
    a = ap.parse_args()
    t0 = time.process_time()
    past = [c for c in (generate(s) for s in range(a.seeds)) if reference(c)[0] is None]
    print(f"{len(past)} of {a.seeds} seeded programs are one past an edge", flush=True)
    for bug in a.bugs.split(","):
        caught = 0
        for case in past:
            pool = next((v for v in variants_for(case) if "grain=1" in v), None)
            with inject_bug_TESTING_ONLY(bug):
                res = execute(case, ["whole"] + ([pool] if pool else []), full=False)
            caught += any(r["status"] == "error_mismatch" for r in res["variants"].values())
        print(f"{bug:24s} caught by {caught} of {len(past)} expected-error programs "
              f"({100 * caught / max(len(past), 1):.1f}%)", flush=True)
    print(f"{time.process_time() - t0:.0f} CPU s")


if __name__ == "__main__":
    main()

"""Coverage of a time-boxed campaign, with and without steering (issue 17, part 4).

Runs real campaigns - every program compiled in every variant of the fuzzer's
matrix on `--jobs` worker processes and compared with the interpreter - for
`--seconds` each, drawing programs with `gen.generate(seed, steer)`: unsteered
(`steer=None`), and steered by the campaign's own coverage report
(`Steering.from_report(coverage.report())` before each program). Prints, per
campaign, the programs run, when (seconds, programs) every operation, math
function, statement and structure class had been seen, and the gaps left at the
end, in `fuzz.Coverage`'s report format. Failures (none on a clean backend) are
counted.

    PYTHONPATH=. python benchmarks/gen_coverage.py [--seconds 60] [--jobs 2] [--seed 0] [--inject BUG]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cohort.verify.fuzz import FAILURE_STATUSES, Coverage, WorkerPool, variants_for  # noqa: E402
from cohort.verify.gen import Steering, generate  # noqa: E402

STATIC = ("op:", "math:", "statement:", "structure:")


def campaign(seconds: float, jobs: int, first_seed: int, steered: bool, bugs=()) -> dict:
    cov = Coverage()
    pool = WorkerPool(jobs, bugs)
    t0 = time.monotonic()
    programs = discarded = failing = 0
    complete_at = None
    seed = first_seed
    first_failure = None
    try:
        while time.monotonic() - t0 < seconds:
            steer = Steering.from_report(cov.report()) if steered else None
            case = generate(seed, steer)
            seed += 1
            res = pool.run(case, variants_for(case), deadline=t0 + seconds)
            if res.get("incomplete"):
                break
            if res["discard"]:
                discarded += 1
                continue
            programs += 1
            cov.program(case)
            fails = [(v, r) for v, r in res["variants"].items() if r["status"] in FAILURE_STATUSES]
            for r in res["variants"].values():
                if r["status"] != "unsupported":
                    cov.variant(r)
            if fails:
                failing += 1
                if first_failure is None:
                    v, r = fails[0]
                    first_failure = {"seconds": round(time.monotonic() - t0, 1), "programs": programs,
                                     "seed": seed - 1, "variant": v, "status": r["status"],
                                     "detail": r.get("detail", "")[:300]}
                    if bugs:
                        break
            if complete_at is None and not [g for g in cov.report()["gaps"] if g.startswith(STATIC)]:
                complete_at = {"seconds": round(time.monotonic() - t0, 1), "programs": programs}
    finally:
        pool.close(kill=True)
    rep = cov.report()
    return {"steered": steered, "seconds": round(time.monotonic() - t0, 1), "programs": programs,
            "discarded": discarded, "failing_programs": failing, "first_failure": first_failure,
            "static_coverage_complete_at": complete_at, "gaps": rep["gaps"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=("both", "steered", "plain"), default="both")
    p.add_argument("--inject", default="", help="testing only: injected backend bug(s), comma-separated")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    bugs = tuple(b for b in a.inject.split(",") if b)
    modes = {"both": (False, True), "steered": (True,), "plain": (False,)}[a.mode]
    out = []
    for steered in modes:
        r = campaign(a.seconds, a.jobs, a.seed, steered, bugs)
        out.append(r)
        done = r["static_coverage_complete_at"]
        print(f"{'steered' if steered else 'plain':8} {r['programs']:4} programs in {r['seconds']:.0f} s "
              f"({r['discarded']} discarded, {r['failing_programs']} failing); every op/math/statement/structure "
              + (f"after {done['seconds']} s, {done['programs']} programs" if done else "NOT reached"))
        print(f"         gaps at the end: {', '.join(r['gaps']) or 'none'}")
        if r["first_failure"]:
            print(f"         first failure: {json.dumps(r['first_failure'])}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

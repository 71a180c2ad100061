"""`python -m cohort.verify.fuzz`: a campaign, the mutation check, or (--worker) a worker process."""
from __future__ import annotations

from .run import run_campaign
from .report import format_report, mutation_table
from .workers import worker_main


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m cohort.verify.fuzz")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--inject", default="", help="testing only: comma-separated injected backend bugs")
    p.add_argument("--mutations", action="store_true", help="run the mutation check table")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args(argv)
    bugs = tuple(b for b in a.inject.split(",") if b)
    if a.worker:
        worker_main(bugs)
        return 0
    if a.mutations:
        rows = mutation_table(a.seconds, a.seed, a.jobs, bugs=bugs or None)
        print(f"{'mutation':22} {'caught':7} {'seconds':>8} {'programs':>8}  failure")
        for r in rows:
            sec = f"{r['seconds_to_catch']:.1f}" if r["caught"] else "-"
            print(f"{r['bug']:22} {'yes' if r['caught'] else 'NO':7} {sec:>8} {r['programs']:>8}  "
                  f"{(r['kind'] or '') + ' on ' + (r['variant'] or '') if r['caught'] else ''}")
        for r in rows:
            if r["caught"]:
                print(f"\n== {r['bug']}: {r['description']}\n{r['kernel']}")
        return 0 if all(r["caught"] for r in rows) else 1
    r = run_campaign(a.seconds, a.seed, bugs=bugs, jobs=a.jobs, progress=True)
    print(format_report(r))
    return 1 if r["failures"] else 0

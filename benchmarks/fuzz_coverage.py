"""What a short campaign covers, by campaign setting: the coverage gaps left after
`--seconds` (operations, math functions, statement structures, access modes the
generator can make but did not; gen/steer.py lists them), programs and variant runs.
Same campaign seed for every setting; settings are `variants per program` x steering.

    python benchmarks/fuzz_coverage.py [--seconds 60] [--jobs 2] [--seeds 0,1]
        [--per-program all,4] [--steer off,on] [--json FILE]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    from cohort.verify.fuzz import run_campaign
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seeds", default="0", help="campaign seeds, each a run per setting")
    ap.add_argument("--per-program", default="all,4")
    ap.add_argument("--steer", default="off,on")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    settings = [(None if p == "all" else int(p), s == "on") for p in a.per_program.split(",")
                for s in a.steer.split(",")]
    rows = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for per_program, steer in settings:
            t0 = time.monotonic()
            r = run_campaign(a.seconds, seed, jobs=a.jobs, shrink=False, corpus_dir=None,
                             variants_per_program=per_program, steer=steer)
            gaps = r["coverage"]["gaps"]
            row = {"seed": seed, "per_program": per_program or "all", "steer": steer, "programs": r["programs"],
                   "variant_runs": r["variant_runs"], "wall": round(time.monotonic() - t0, 1),
                   "mismatches": r["mismatches"], "gaps": gaps}
            rows.append(row)
            print(f"seed {seed} per-program {row['per_program']!s:>3} steer {'on ' if steer else 'off'}: "
                  f"{row['programs']:3d} programs, {row['variant_runs']:4d} variant runs, "
                  f"{row['mismatches']} mismatches, {len(gaps)} gaps: {', '.join(gaps) or '-'}", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

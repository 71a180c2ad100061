"""How fast `cohort fuzz --family tiles` finds each planted bug of the tile lowering
(backend/inject.py, `triton_*`), and what a clean campaign costs.

For every plant and every campaign seed: one campaign with only that plant, stopped at its
first failure (no shrinking). Printed per plant: seconds from the campaign's start to the
failure / programs run, and the machine's 1-minute load average before the campaign; a plant
not found in the time box shows `-`. Then (`--clean S`) a clean campaign of S seconds: programs
run, CPU seconds a program, findings. Campaigns run one after another.

    python benchmarks/fuzz_detect_tiles.py [--seconds 60] [--seeds 0,1,2] [--jobs 0] [--bugs a,b]
        [--clean 120] [--json FILE]
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    from cohort.backend.inject import BUGS
    from cohort.verify.fuzz.tile_campaign import run_tile_campaign
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--jobs", type=int, default=0, help="0: in this process; N: N worker processes")
    ap.add_argument("--bugs", default="")
    ap.add_argument("--clean", type=float, default=0.0, help="seconds of a clean campaign (seed 0) after")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    bugs = a.bugs.split(",") if a.bugs else sorted(b for b in BUGS if b.startswith("triton_"))
    rows = []
    print(f"{'plant':30s} " + " ".join(f"{'seed ' + str(s):>24s}" for s in seeds), flush=True)
    for bug in bugs:
        cells = []
        for seed in seeds:
            load = os.getloadavg()[0]
            r = run_tile_campaign(a.seconds, seed, bugs=(bug,), jobs=a.jobs, shrink=False, stop_on_failure=True)
            f = r["failures"][0] if r["failures"] else None
            rows.append({"bug": bug, "seed": seed, "caught": bool(f), "seconds": f and f["found_after_seconds"],
                         "programs": f["programs_run"] if f else r["programs"], "bin": f and f["bin"],
                         "load": round(load, 1)})
            cells.append(f"{f['found_after_seconds']:.1f} s / {f['programs_run']} ({load:.1f})" if f else
                         f"- / {r['programs']} ({load:.1f})")
        print(f"{bug:30s} " + " ".join(f"{c:>24s}" for c in cells), flush=True)
    caught = sum(r["caught"] for r in rows)
    print(f"caught {caught} of {len(rows)} campaigns")
    if a.clean:
        cpu0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        t0 = time.monotonic()
        r = run_tile_campaign(a.clean, 0, jobs=a.jobs)
        cpu = (resource.getrusage(resource.RUSAGE_SELF).ru_utime +
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - cpu0)
        per = f", {cpu / max(r['programs'], 1):.2f} CPU s a program" if a.jobs == 0 else ""   # workers: not reaped yet
        print(f"clean: {r['programs']} programs in {time.monotonic() - t0:.1f} s{per}, counts {r['counts']}, "
              f"{len(r['failures'])} finding(s)")
        rows.append({"clean": r})
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

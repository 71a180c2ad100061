"""How fast a campaign finds each planted backend bug (backend/inject.py), by campaign setting.

For every bug, every setting and every seed: one campaign with only that bug injected,
stopped at its first failure (no shrinking). Printed per bug: seconds from the campaign's
start to the failure (Dask cluster start-up included for `local:N`), programs run, and the
machine's 1-minute load average before and after the campaign (a shared machine runs fewer
programs a minute); a bug not found in the time box shows `-`. Settings are `variants per
program` x steering x seed, each a column. Campaigns run one after another.

    python benchmarks/fuzz_detect.py [--mode local:2] [--seconds 60] [--seed 0 | --seeds 0,1,2]
        [--per-program all,4] [--steer off,on,mixed] [--bugs a,b] [--json FILE]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


STEER = {"off": dict(steer=False), "on": dict(steer=True, plain_every=0), "mixed": dict(steer=True)}


def run(bug: str, mode: str, seconds: float, seed: int, per_program, steer: str) -> dict:
    from cohort.verify.fuzz import run_campaign
    kind, _, n = mode.partition(":")
    where = {"scheduler": mode} if kind == "local" else {"jobs": int(n or 1)}
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    r = run_campaign(seconds, seed, bugs=(bug,), stop_on_failure=True, shrink=False, corpus_dir=None,
                     variants_per_program=per_program, **STEER[steer], **where)
    wall = time.monotonic() - t0
    f = r["failures"][0] if r["failures"] else None
    return {"bug": bug, "seed": seed, "per_program": per_program or "all", "steer": steer, "caught": bool(f),
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
            "seconds": f and f["found_after_seconds"], "wall": round(wall, 1), "programs": r["programs"],
            "variant_runs": r["variant_runs"], "variant": f and f["variant"], "kind": f and f["kind"]}


def label(per_program, steer: str, seed: int) -> str:
    return f"{per_program or 'all'}/{steer}/seed {seed}"


def main():
    from cohort.backend.inject import BUGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="local:2", help="local:N (a Dask LocalCluster) or pool:J (worker processes)")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default="", help="comma-separated campaign seeds (instead of --seed)")
    ap.add_argument("--per-program", default="all,4")
    ap.add_argument("--steer", default="mixed", help="off, on (every seed steered), mixed (the default: "
                                                      "every other seed steered); comma-separated")
    ap.add_argument("--bugs", default="")
    ap.add_argument("--json", default=None, help="write the rows here")
    a = ap.parse_args()
    seeds = [int(x) for x in a.seeds.split(",")] if a.seeds else [a.seed]
    settings = [(None if p == "all" else int(p), s, sd) for p in a.per_program.split(",")
                for s in a.steer.split(",") for sd in seeds]
    bad = [s for _, s, _ in settings if s not in STEER]
    if bad:
        ap.error(f"--steer: unknown setting(s) {', '.join(bad)}; known: {', '.join(STEER)}")
    # the tile lowering's plants (triton_*) are found by the tile family: benchmarks/fuzz_detect_tiles.py
    bugs = a.bugs.split(",") if a.bugs else sorted(b for b in BUGS if not b.startswith("triton_"))
    rows = []
    head = " ".join(f"{label(p, s, sd):>30s}" for p, s, sd in settings)
    print(f"{'bug':32s} {head}   (seconds to the failure / programs (load before-after); '-' = not found "
          f"in {a.seconds:g} s)", flush=True)
    for bug in bugs:
        cells = []
        for p, s, sd in settings:
            row = run(bug, a.mode, a.seconds, sd, p, s)
            rows.append(row)
            load = f"({row['load'][0]:.1f}-{row['load'][1]:.1f})"
            cells.append(f"{row['seconds']:.1f} s / {row['programs']} {load}" if row["caught"] else
                         f"- / {row['programs']} {load}")
        print(f"{bug:32s} " + " ".join(f"{c:>30s}" for c in cells), flush=True)
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    for p, s, sd in settings:
        mine = [r for r in rows if r["per_program"] == (p or "all") and r["steer"] == s and r["seed"] == sd]
        print(f"{label(p, s, sd)}: caught {sum(r['caught'] for r in mine)}/{len(mine)}, "
              f"under 60 s {sum(bool(r['caught'] and r['seconds'] < 60) for r in mine)}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

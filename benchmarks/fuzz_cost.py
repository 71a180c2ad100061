"""CPU seconds per fuzz program: a campaign's programs, run as a campaign runs them (`whole`
plus 3 variants each, rotation.draw_variants, and the stress check where the tree has one),
in one process, this tree against another (unsteered: a steered campaign's programs depend on
its coverage so far).

Process CPU time is what a loaded machine inflates least (the wall time of a campaign on a
2-vCPU VM shared with other users varies several-fold); a campaign's programs per second
on J idle workers is about J / (CPU seconds per program). Trees alternate seed by seed, each
in a fresh process.

    python benchmarks/fuzz_cost.py [--seeds 2] [--seed 0] [--before /path/to/other/tree]
    python benchmarks/fuzz_cost.py --child TREE SEED   (one seed of one tree; prints JSON)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(seed: int):
    from cohort.verify.corpus import case_key
    from cohort.verify.execute import execute
    from cohort.verify.fuzz.cluster import draw_seed
    from cohort.verify.fuzz.rotation import draw_variants
    from cohort.verify.fuzz.state import seed_value
    from cohort.verify.matrix import DEFAULT_VARIANTS, variants_for
    try:        # a tree with the rotation's preference and the stress check (commit 85878aa on)
        from cohort.verify.fuzz.stress import STRESS, needs_stress
        from cohort.verify.fuzz.workers import run_with_stress
        from cohort.verify.matrix import rerun_sensitive
    except ImportError:
        STRESS, needs_stress, run_with_stress, rerun_sensitive = None, None, None, None
    rows = []
    for case in draw_seed(seed_value(0, seed), 9, 16):
        c0, w0 = time.process_time(), time.perf_counter()
        app = variants_for(case, DEFAULT_VARIANTS)
        if STRESS is None:
            variants = draw_variants(app, case_key(case), 4)
            res = execute(case, variants)
        else:
            variants = draw_variants(app, case_key(case), 4, rerun_sensitive(case, app))
            res = run_with_stress(case, variants + ([STRESS] if needs_stress(case) else []))
        bad = [v for v, r in res["variants"].items() if r["status"] not in ("ok", "unsupported")]
        rows.append({"variants": variants, "cpu": time.process_time() - c0, "wall": time.perf_counter() - w0, "n": case.n,
                     "block": case.block, "error": bool(res.get("expected_error")), "bad": bad,
                     "discard": bool(res["discard"])})
    print(json.dumps(rows))


def run_tree(tree: str, seed: int) -> list:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tree, str(seed)],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": tree}, cwd=tree)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--before", default=None, help="another checkout of cohort to compare with")
    ap.add_argument("--child", nargs=2, default=None)
    a = ap.parse_args()
    if a.child:
        sys.path.insert(0, a.child[0])
        child(int(a.child[1]))
        return
    trees = [("this", ROOT)] + ([("before", os.path.abspath(a.before))] if a.before else [])
    rows = {name: [] for name, _ in trees}
    for s in range(a.seed, a.seed + a.seeds):
        for name, tree in (trees if s % 2 == 0 else trees[::-1]):
            rows[name] += run_tree(tree, s)
            r = rows[name]
            print(f"seed {s} {name}: {len(r)} programs, {sum(x['cpu'] for x in r):.1f} CPU s so far", flush=True)
    for name, r in rows.items():
        cpu = [x["cpu"] for x in r]
        top = sorted(r, key=lambda x: -x["cpu"])[:3]
        print(f"{name}: costliest " + "; ".join(f"{x['cpu']:.1f} s n={x['n']} block={x['block']}"
                                                 f"{' (expected error)' if x['error'] else ''}" for x in top))
        print(f"{name}: {len(r)} programs, CPU s per program mean {statistics.mean(cpu):.2f}, median "
              f"{statistics.median(cpu):.2f}, max {max(cpu):.1f}; {sum(x['error'] for x in r)} expected-error; "
              f"{sum(bool(x['bad']) for x in r)} failing; {60 * 2 / statistics.mean(cpu):.0f} programs per "
              f"60 s on 2 idle workers")


if __name__ == "__main__":
    main()

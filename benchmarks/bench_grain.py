"""Runtime E2E times per operator and seed size for the task-grain policies
(caller, fixed grains 1 and 3, grain 0, legacy, joint_legacy, auto) on the
packet variant, at the native runtime-E2E boundary (the runtime's launch
entry called from the native timer), with an A/A control and the paired
ratios auto/joint_legacy and auto/legacy (DESIGN §7: complete balanced
designs of rounds, p50 per round, ratio = median of per-round ratios, its
range and the rounds won). Outputs are checked bit for bit after every round.

    python benchmarks/bench_grain.py [--ops rmsnorm] [--sizes 17x65] [--workers 8] [--rounds 10] [--samples 7]
"""
import argparse

from cohort.audit import harness
from cohort.audit.suites import Column, Group, Ratio, Suite
from cohort.audit.tables import derive
from cohort.backend import target
from cohort.refimpl import ops

POLICIES = ["caller", "1", "3", "0", "legacy", "joint_legacy", "auto"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(ops.OPERATORS))
    ap.add_argument("--sizes", default="")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--lanes", default="packet")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--samples", type=int, default=7)
    args = ap.parse_args()
    cases = []
    for name in args.ops.split(","):
        op = ops.get(name)
        sizes = [op.parse_shape(s) for s in args.sizes.split(",")] if args.sizes else op.seed_sizes
        cases += [(name, tuple(s)) for s in sizes]
    cols = tuple(Column(p, "variant", f"{args.lanes},grain={p}") for p in POLICIES)
    group = Group("grain", tuple(cases), cols, (Ratio("auto", "joint_legacy", "auto/joint_legacy"),
                                               Ratio("auto", "legacy", "auto/legacy")), control="legacy")
    suite = Suite("bench_grain", "grain policies", "runtime_e2e", (group,), rounds=args.rounds,
                  samples=args.samples, workers=args.workers)
    run = harness.run_suite(suite)
    names = [c.name for c in group.columns]
    print(target.host().summary())
    print(f"workers={args.workers}, {args.lanes}, runtime E2E (native launch entry), us")
    print(f"{'op':15s} {'shape':20s} " + " ".join(f"{n:>12s}" for n in names) + "   ratios (range, won)")
    for cell in derive(run.replay):
        row = " ".join(f"{cell['columns'][n]['us']:12.3f}" if cell["columns"][n]["status"] == "ok" else
                       f"{cell['columns'][n]['status']:>12s}" for n in names)
        rs = "  ".join(f"{r['label']} {r['ratio']:.3f} ({r['min']:.3f}-{r['max']:.3f}, {r['won']}/{r['rounds']})"
                       + ("" if r.get("control") or r.get("stable") else " no stable difference")
                       for r in cell["ratios"] if r["status"] == "ok")
        chose = "; ".join(f"{n}: {', '.join(sorted(set(v)))}" for n, v in cell["choices"].items())
        print(f"{cell['op']:15s} {cell['size']:20s} {row}   {rs}   [{chose}]", flush=True)
    for f in run.failures:
        print(f"FAILED: {f}")
    raise SystemExit(1 if run.failures else 0)


if __name__ == "__main__":
    main()

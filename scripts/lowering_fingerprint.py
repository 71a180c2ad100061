"""Fingerprints of what the lowering emits, for checking that a change to it is a pure refactor.

For every operator's forms (at its first seed size) and the fuzzer's programs of seeds
0..N-1, lowered in a set of variants, clean and under each of the backend's planted bugs,
one hash of the LLVM IR before optimisation and of what the build reports besides (counts,
interleave, width, lane claims, region plan, function attributes, pass tuning); a kernel a
variant refuses is recorded with its error. Nothing is optimised, linked or run.

    python scripts/lowering_fingerprint.py --out before.json [--programs 30] [--no-plants]
    ... change the lowering ...
    python scripts/lowering_fingerprint.py --out after.json
    python scripts/lowering_fingerprint.py --compare before.json after.json    # exit 1 if any differ

The codegen knobs (COHORT_FMA, COHORT_F16, COHORT_MASKED_STORE) are read as in any build:
run it once more with them forced to reach the other sides of those switches.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace

VARIANTS = ("whole", "packet", "lanes=4", "lanes=16", "packet-masked", "packet-thread-private",
            "packet-branchy", "packet-fast", "packet,checked=on", "packet,unsafe=on", "packet,sanitize=on",
            "whole,sanitize=on", "lanes=4,interleave=2")
FULL_BLOCKS = ("packet", "lanes=4")                     # also built for launches of whole blocks
PLANT_VARIANTS = ("whole", "packet", "lanes=4,private=cohort")


def corpus(programs: int) -> list:
    """(name, kernel, constants) of every operator form and of the fuzzer's first programs."""
    from cohort.refimpl.ops import OPERATORS
    from cohort.verify.gen import generate
    out = []
    for op in OPERATORS.values():
        for form in ((op.form, op.kernel, op.launch),) + tuple(op.forms):
            name, kfn = form[0], form[1]
            launch = form[2] if len(form) > 2 else op.launch
            out.append((f"{op.name}:{name}", kfn, launch(op.seed_sizes[0]).consts))
    for seed in range(programs):
        case = generate(seed)
        out.append((f"program{seed}", case.kernel, case.consts))
    return out


def fingerprint(kfn, consts, variant_text: str, full_blocks: bool = False) -> str:
    from cohort.backend import codegen, compiler
    from cohort.backend.lowering import Lowering
    from cohort.backend.variant import parse_variant
    variant = parse_variant(variant_text)
    try:
        k = compiler._specialised(kfn, consts, variant)
        lowering = Lowering(k, "entry", replace(codegen.resolve(variant), full_blocks=full_blocks))
        text = str(lowering.lower())
    except Exception as e:      # a refusal is part of the behaviour to keep
        return f"error {type(e).__name__}: {e}"
    plan = lowering.plan
    claims = sorted((c.site.value, c.name, c.lanes.value, c.stride, sorted(m.value for m in c.modes))
                    for c in lowering.lane_claims.values())
    facts = (sorted(lowering.counts.items()), lowering.interleave, lowering.W, lowering.full_blocks,
             len(lowering.stmt_table), claims, plan.outline(), sorted(plan.cross), plan.block_loops,
             plan.barriers, sorted(lowering.facts.fn_attributes.items()), sorted(lowering.facts.tuning.items()))
    return hashlib.sha256((text + "\n" + json.dumps(facts, default=str)).encode()).hexdigest()[:20]


def collect(programs: int, plants: bool) -> dict:
    from cohort.backend.inject import BUGS, inject_bug_TESTING_ONLY
    kernels = corpus(programs)
    out = {}
    for name, kfn, consts in kernels:
        for v in VARIANTS:
            out[f"{name}|{v}"] = fingerprint(kfn, consts, v)
        for v in FULL_BLOCKS:
            out[f"{name}|{v}|full_blocks"] = fingerprint(kfn, consts, v, True)
    if plants:
        for bug in sorted(b for b in BUGS if not b.startswith("triton_")):
            with inject_bug_TESTING_ONLY(bug):
                for name, kfn, consts in kernels:
                    for v in PLANT_VARIANTS:
                        out[f"{bug}|{name}|{v}"] = fingerprint(kfn, consts, v)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the fingerprints here (JSON)")
    ap.add_argument("--programs", type=int, default=30, help="the fuzzer's programs of seeds 0..N-1 (default 30)")
    ap.add_argument("--no-plants", action="store_true", help="clean builds only")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args(argv)
    if a.compare:
        before, after = (json.load(open(p)) for p in a.compare)
        differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for k in differ[:40]:
            print(f"{k}: {before.get(k)} -> {after.get(k)}")
        print(f"{len(before)} and {len(after)} fingerprints; {len(differ)} differ")
        return 1 if differ else 0
    if not a.out:
        ap.error("give --out FILE or --compare BEFORE AFTER")
    if a.programs < 0:
        ap.error("--programs: expected a count >= 0")
    out = collect(a.programs, not a.no_plants)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    errors = sum(1 for v in out.values() if v.startswith("error"))
    print(f"{len(out)} fingerprints ({errors} refusals) -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

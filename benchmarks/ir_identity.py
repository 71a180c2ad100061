"""Two checkouts of cohort, A and B: is the lowering's LLVM IR the same text, cell by cell?
For a change that must leave generated code unchanged (a refactor of the lowering or of what
feeds it). Nothing is timed or run.

A cell is one operator form (every operator, each storage form) at its first seed size, one
variant, one target and codegen switch setting, and the general or the whole-blocks build:
the unoptimised IR `cross_compile(kind="ir")` returns (the symbol included, so the compile
key is compared too). Targets: the host, an AVX2 znver3 and a baseline AArch64 with the
codegen knobs unset; the host again with COHORT_FMA / COHORT_F16 / COHORT_MASKED_STORE all
forced one way, then all the other. Each checkout runs in its own subprocess (PYTHONPATH =
that checkout) and prints one sha256 prefix per cell; cells whose digests differ are listed.

    python benchmarks/ir_identity.py /work/main /work/wt/config [--ops rmsnorm,cumsum]
"""
import argparse
import json
import os
import subprocess
import sys

VARIANTS = ("whole", "packet", "packet,lanes=4", "packet,lanes=16", "packet-masked", "packet-branchy",
            "packet-thread-private", "packet-fast", "packet,checked=on", "packet,unsafe=on", "packet,sanitize=on")
SWITCHES = ({}, {"COHORT_FMA": "software", "COHORT_F16": "software", "COHORT_MASKED_STORE": "dispatch"},
            {"COHORT_FMA": "hardware", "COHORT_F16": "hardware", "COHORT_MASKED_STORE": "intrinsic"})


def digests(ops_filter) -> dict:
    """{cell: sha256 prefix} in this process's checkout."""
    import hashlib

    from cohort.backend import target
    from cohort.backend.compiler import cross_compile
    from cohort.refimpl import ops
    targets = [target.host(), target.from_triple("x86_64-unknown-linux-gnu", "znver3"),
               target.from_triple("aarch64-unknown-linux-gnu")]
    out = {}
    for name in sorted(ops.OPERATORS):
        if ops_filter and name not in ops_filter:
            continue
        for form in ops.forms(name):
            op = ops.get(form)
            launch = op.launch(op.seed_sizes[0])
            for v in VARIANTS:
                for i, sw in enumerate(SWITCHES):
                    for t in targets if i == 0 else targets[:1]:
                        os.environ.update(sw)
                        try:
                            for whole_blocks in (False, True):
                                cell = f"{form} {v} switches{i} {t.triple}/{t.cpu or 'generic'} full_blocks={whole_blocks}"
                                try:
                                    text = cross_compile(op.kernel, t, v, launch.consts, kind="ir",
                                                         full_blocks=whole_blocks)
                                    out[cell] = hashlib.sha256(text.encode()).hexdigest()[:16]
                                except Exception as e:      # noqa: BLE001 - an error is a cell's answer too
                                    out[cell] = f"error {type(e).__name__}: {e}"
                        finally:
                            for k in sw:
                                os.environ.pop(k)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ops", default="", help="comma-separated operators (default: all)")
    args = ap.parse_args()
    sides = []
    for tree in (args.a, args.b):
        env = {k: v for k, v in os.environ.items() if k not in ("COHORT_FMA", "COHORT_F16", "COHORT_MASKED_STORE")}
        env["PYTHONPATH"] = os.path.abspath(tree)
        p = subprocess.run([sys.executable, __file__, "--child", args.ops], capture_output=True, text=True,
                           env=env, cwd=os.path.abspath(tree))
        if p.returncode != 0:
            sys.exit(f"{tree}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
        sides.append(json.loads(p.stdout))
    a, b = sides
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    errors = sum(str(v).startswith("error") for v in a.values())
    print(f"{len(a)} cells in A, {len(b)} in B ({errors} are errors in A); {len(differ)} differ")
    for k in differ:
        print(f"  {k}: {a.get(k)} -> {b.get(k)}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        print(json.dumps(digests({s for s in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if s})))
    else:
        main()

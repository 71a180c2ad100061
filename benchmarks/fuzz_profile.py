"""Where a fuzz program's time goes, in this process: the interpreter's reference, and per
variant run LLVM's parse / O3 optimise / code generation and link (from
`jit.compile_module`'s own timers), the rest of the variant (lowering, lane-claim and
native checks) by difference; modules whose IR repeats an earlier variant of the same
program; the largest modules.

    python benchmarks/fuzz_profile.py [--seeds 2] [--seed 11] [--per-program all]
"""
import argparse
import collections
import hashlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    from cohort.backend import jit
    from cohort.verify.execute import reference, run_variant
    from cohort.verify.fuzz.cluster import draw_seed
    from cohort.verify.fuzz.rotation import draw_variants
    from cohort.verify.fuzz.state import seed_value
    from cohort.verify.matrix import DEFAULT_VARIANTS, variants_for
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--per-program", default="all")
    a = ap.parse_args()
    per_program = None if a.per_program == "all" else int(a.per_program)
    seconds, counts, modules = collections.Counter(), collections.Counter(), []
    program_ir: set = set()
    compile_module = jit.compile_module

    def timed(text, symbols, tuning=None):
        linked = compile_module(text, symbols, tuning)
        for k, v in linked.seconds.items():
            seconds[k] += v
        digest = hashlib.sha1(re.sub(r"cohort_\w+", "SYM", text).encode()).hexdigest()
        counts["modules"] += 1
        counts["repeated modules"] += digest in program_ir
        program_ir.add(digest)
        modules.append((text.count("\n"), linked.seconds["total"], current["spec"]))
        return linked
    jit.compile_module = timed
    current = {"spec": None}
    cases = [c for i in range(a.seeds) for c in draw_seed(seed_value(a.seed, i), 9, 16)]
    t_all = time.perf_counter()
    for case in cases:
        t0 = time.perf_counter()
        ref, _ = reference(case)
        seconds["reference"] += time.perf_counter() - t0
        if ref is None:
            counts["discarded"] += 1
            continue
        counts["programs"] += 1
        program_ir.clear()
        for spec in draw_variants(variants_for(case, DEFAULT_VARIANTS), "profile", per_program):
            current["spec"] = spec
            t0 = time.perf_counter()
            run_variant(case, spec, ref)
            seconds["variant runs"] += time.perf_counter() - t0
            counts["variant runs"] += 1
    wall = time.perf_counter() - t_all
    v = seconds["variant runs"]
    print(f"{counts['programs']} programs, {counts['variant runs']} variant runs, {counts['modules']} modules "
          f"({counts['repeated modules']} repeat an earlier variant's IR), {wall:.1f} s, "
          f"{counts['programs'] / wall:.3f} programs/s")
    for k in ("parse", "optimise", "codegen_link"):
        print(f"  {k:14s} {seconds[k]:7.2f} s  {100 * seconds[k] / v:5.1f}% of variant time")
    rest = v - seconds["total"]
    print(f"  {'lowering+checks':14s} {rest:7.2f} s  {100 * rest / v:5.1f}%")
    print(f"  {'reference':14s} {seconds['reference']:7.2f} s")
    modules.sort(key=lambda m: -m[1])
    big = sum(m[1] for m in modules[:max(1, len(modules) // 20)])
    print(f"  the largest 5% of modules: {100 * big / seconds['total']:.0f}% of LLVM time; top 3:")
    for lines, sec, spec in modules[:3]:
        print(f"    {lines:6d} lines  {sec:5.2f} s  {spec}")


if __name__ == "__main__":
    main()

"""How often a planted bug shows in the programs of the rare shape made for it, offline.

Of the first K programs that make SHAPE among generate(offset..) under the campaign-start
steering (everything missing, as a campaign's first programs are drawn), each run on the four
variants a campaign would draw for it (rotation.draw_variants) at its drawn compile level and
lowering switches, with BUG injected: how many differ from the interpreter. This is the rate a
campaign meets once it makes the shape; `fuzz_detect.py` measures the whole campaign.

    python benchmarks/plant_rate.py BUG SHAPE [--programs 8] [--offset 0]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    from cohort.backend.inject import BUGS, inject_bug_TESTING_ONLY
    from cohort.verify import corpus, execute
    from cohort.verify.fuzz import Coverage
    from cohort.verify.fuzz.rotation import draw_variants
    from cohort.verify.gen import Steering, generate
    from cohort.verify.gen.steer import SHAPES
    from cohort.verify.matrix import rerun_sensitive, variants_for
    ap = argparse.ArgumentParser()
    ap.add_argument("bug")
    ap.add_argument("shape")
    ap.add_argument("--programs", type=int, default=8)
    ap.add_argument("--offset", type=int, default=0)
    a = ap.parse_args()
    if a.bug not in BUGS:
        ap.error(f"unknown bug {a.bug!r}")
    if a.shape not in SHAPES:
        ap.error(f"unknown shape {a.shape!r}; shapes: {', '.join(SHAPES)}")
    steer = Steering.from_report(Coverage().report())
    made = shown = 0
    t0 = time.time()
    for s in range(a.offset, a.offset + 50 * a.programs):
        case = generate(s, steer)
        if a.shape not in case.shapes:
            continue
        made += 1
        applicable = variants_for(case)
        variants = draw_variants(applicable, corpus.case_key(case), 4, rerun_sensitive(case, applicable))
        with inject_bug_TESTING_ONLY(a.bug):
            out = execute.execute(case, variants)
        hit = [v for v, r in out["variants"].items() if r["status"] not in ("ok", "unsupported")]
        shown += bool(hit)
        print(f"generate({s}) {execute.lowering_switches(case)} {'shows on ' + ', '.join(hit) if hit else '-'}",
              flush=True)
        if made >= a.programs:
            break
    print(f"{a.bug} in {a.shape}: {shown} of {made} programs ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()

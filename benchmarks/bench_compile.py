"""Compile time per (operator, variant), split into its stages, each compile in a
fresh process (so nothing is cached and every LLVM start-up cost is paid the same
way): lowering (Python, IR building), parse, optimise (the O3 pipeline) and
codegen + link, medians over the repeats. LLVM's one-off set-up is paid on a
tiny module first and left out; the first kernel compile of a process still
pays one-time Python work (imports, math templates) and is shown on its own
(`first ms`), next to the median.

    python benchmarks/bench_compile.py [--ops rmsnorm,rope] [--variants whole,packet] [--repeat 3]
    python benchmarks/bench_compile.py --ops attention --variants "packet;packet,lanes=16"
"""
import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
from cohort.backend import compiler, jit
from cohort.refimpl import ops
op_name, variant, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
op = ops.get(op_name)
shape = op.seed_sizes[0]
launch = op.launch(shape)
# warm LLVM up (target machine, LLJIT) on an unrelated tiny compile, timed apart
t0 = time.perf_counter()
jit.compile_module("define void @warm() {\n  ret void\n}\n", ["warm"])
first = time.perf_counter() - t0
rows = []
for i in range(repeat):
    compiler._cache.clear(); compiler._bound.clear(); compiler._handles.clear()
    stages = {}
    real = jit.compile_module
    def timed(text, symbols, tuning=None):
        t = time.perf_counter()
        linked = real(text, symbols, tuning)
        stages.update(linked.seconds)
        stages["ir_chars"] = len(text)
        return linked
    compiler.jit.compile_module = timed
    t = time.perf_counter()
    ck = compiler.compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
    total = time.perf_counter() - t
    compiler.jit.compile_module = real
    stages["total"] = total
    stages["lower"] = total - stages["parse"] - stages["optimise"] - stages["codegen_link"]
    stages["asm_lines"] = len(ck.code.linked.assembly().splitlines()) if hasattr(ck, "code") else None
    rows.append(stages)
print(json.dumps({"first": first, "rows": rows}))
"""


def main():
    from cohort.refimpl import ops
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(ops.OPERATORS))
    ap.add_argument("--variants", default="whole,packet",
                    help="variants separated by commas, or by ';' when a spelling has commas "
                         "(whole;packet,lanes=16)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cols = ("lower", "parse", "optimise", "codegen_link", "total")
    print(f"{'op':15s} {'variant':8s} " + " ".join(f"{c + ' ms':>15s}" for c in cols) + f" {'first ms':>9s}"
          + f" {'IR KiB':>7s}")
    worst = worst_first = 0.0
    for name in args.ops.split(","):
        for variant in args.variants.split(";" if ";" in args.variants else ","):
            out = subprocess.run([sys.executable, "-c", CHILD, name, variant, str(args.repeat)],
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            med = {c: statistics.median(r[c] for r in res["rows"]) for c in cols}
            worst = max(worst, med["total"])
            first = res["rows"][0]["total"]
            worst_first = max(worst_first, first)
            print(f"{name:15s} {variant:8s} " + " ".join(f"{med[c] * 1e3:15.1f}" for c in cols)
                  + f" {first * 1e3:9.1f} {res['rows'][0]['ir_chars'] / 1024:7.0f}", flush=True)
    print(f"worst median total: {worst * 1e3:.1f} ms; worst first compile of a process: {worst_first * 1e3:.1f} ms")


if __name__ == "__main__":
    main()

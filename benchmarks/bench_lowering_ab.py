"""Two checkouts of cohort, A (old) and B (new), timed against each other at
the native entry, cell by cell of the native table (every operator's seed
sizes; columns `whole` and `packet`), to show a change to the lowering costs
nothing.

Each round runs one subprocess per checkout (PYTHONPATH = that checkout), in
the order A,B in even rounds and B,A in odd ones, so load on the machine hits
both alike. A subprocess compiles every cell, checks its output bit for bit
against its own checkout's interpreter (computed once per side, kept in a
temporary directory: a change of semantics, e.g. a new math library, is not a failure) with
guard bands intact, times the native entry (`samples` samples of about
0.2 ms each, p50), and checks the output again. Per cell: the median over
rounds of the per-round ratio B/A, its range over the rounds, and each
side's median time.

`--code` compares the generated code instead (no timing): instructions of the
optimised IR and of the assembly, per cell, A against B. `--compile` times
compiles instead of launches (same rounds and order, nothing cached): the
whole compile and its Python part (lowering: total minus LLVM's parse,
optimise and codegen), median of `samples` compiles per cell and round.

    python benchmarks/bench_lowering_ab.py /work/main /work/wt/lowering [--rounds 6] [--samples 7]
        [--ops rmsnorm,rope] [--variants whole,packet] [--code | --compile]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, statistics, sys, time
import numpy as np
from cohort.backend import compiler, timer
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.verify.checksum import bitwise_equal
from cohort.verify.guard import GuardedSet

cells, samples, refdir, mode = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def reference(op, shape, inputs):
    path = os.path.join(refdir, f"{op.name}-{ops.fmt_shape(shape)}.npy")
    if os.path.exists(path):
        return np.load(path)
    ref = ops.run_reference(op, shape, inputs)
    tmp = path + f".{os.getpid()}.npy"
    np.save(tmp, ref)
    os.replace(tmp, path)
    return ref

def ir_instructions(text):
    n, inside = 0, False
    for line in text.splitlines():
        if line.startswith("define"):
            inside = True
        elif line.startswith("}"):
            inside = False
        elif inside and line.startswith("  ") and not line.lstrip().startswith(";"):
            n += 1
    return n

def compile_times(op, launch, variant):
    totals, lowers = [], []
    for _ in range(samples):
        compiler._cache.clear(); compiler._bound.clear(); compiler._handles.clear()
        t = time.perf_counter()
        ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
        total = time.perf_counter() - t
        llvm = ck.code.linked.seconds["total"]
        totals.append(total)
        lowers.append(total - llvm)
    return {"total": statistics.median(totals), "lower": statistics.median(lowers)}

out = {}
compile_kernel(ops.get("rope").kernel, ops.get("rope").launch((3, 64)).consts, "whole")   # LLVM's set-up, untimed
for name, shape, variant in cells:
    op, shape = ops.get(name), tuple(shape)
    launch = op.launch(shape)
    key = f"{name}|{ops.fmt_shape(shape)}|{variant}"
    if mode == "compile":
        out[key] = compile_times(op, launch, variant)
        continue
    ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
    if mode == "code":
        out[key] = {"ir": ir_instructions(ck.llvm_ir), "asm": ck.facts["asm_instructions"]}
        continue
    inputs = op.make_inputs(shape, 0)
    ref = reference(op, shape, inputs)
    guarded = GuardedSet(ops.allocate(op, shape, inputs))
    p = ck.prepare(launch.n, {**guarded.arrays, **launch.scalars})
    def verify(when):
        y = guarded.arrays[op.output].reshape(ref.shape)
        if not (bitwise_equal(y, ref) and guarded.intact()):
            raise SystemExit(f"{key}: output or guard band wrong {when} timing")
    p.run()
    verify("before")
    iters = timer.calibrate_iters(p.entry, p.address)
    ns = timer.time_entry(p.entry, p.address, iters, samples)
    verify("after")
    out[key] = {"p50": float(np.median(ns))}
print(json.dumps(out))
"""


def run_child(checkout: str, cells: list, samples: int, refdir: str, mode: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cells), str(samples), refdir, mode],
                       capture_output=True, text=True, env=env, cwd=os.path.abspath(checkout), check=False)
    if r.returncode != 0:
        raise SystemExit(f"{checkout}: the child failed:\n{r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def cells_of(op_names: list, variants: list) -> list:
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
    from cohort.refimpl import ops
    return [(name, list(shape), v) for name in op_names for shape in ops.get(name).seed_sizes for v in variants]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="checkout A (the baseline)")
    ap.add_argument("new", help="checkout B (the candidate)")
    ap.add_argument("--ops", default="rmsnorm,layernorm,masked_softmax,swiglu,gelu_residual,rope,attention")
    ap.add_argument("--variants", default="whole,packet")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--code", action="store_true", help="compare instruction counts, no timing")
    ap.add_argument("--compile", action="store_true", help="time compiles instead of launches")
    args = ap.parse_args()
    mode = "code" if args.code else "compile" if args.compile else "launch"
    cells = cells_of(args.ops.split(","), args.variants.split(","))
    checkouts = {"A": args.old, "B": args.new}
    with tempfile.TemporaryDirectory(prefix="cohort-ab-") as refdir:
        for side in checkouts:     # each checkout's interpreter defines its own outputs
            os.makedirs(os.path.join(refdir, side))
        if args.code:
            res = {side: run_child(path, cells, 1, os.path.join(refdir, side), mode) for side, path in checkouts.items()}
            print(f"{'op':15s} {'shape':20s} {'variant':8s} {'IR A':>6s} {'IR B':>6s} {'asm A':>6s} {'asm B':>6s} "
                  f"{'asm B-A':>7s}")
            tot = {"A": 0, "B": 0}
            for key in res["A"]:
                a, b = res["A"][key], res["B"][key]
                tot["A"] += a["asm"]
                tot["B"] += b["asm"]
                name, shape, variant = key.split("|")
                print(f"{name:15s} {shape:20s} {variant:8s} {a['ir']:6d} {b['ir']:6d} {a['asm']:6d} {b['asm']:6d} "
                      f"{b['asm'] - a['asm']:+7d}")
            print(f"total asm instructions: A {tot['A']}, B {tot['B']} ({tot['B'] - tot['A']:+d})")
            return
        rounds = []
        for r in range(args.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            got = {side: run_child(checkouts[side], cells, args.samples, os.path.join(refdir, side), mode) for side in order}
            rounds.append(got)
            print(f"round {r + 1}/{args.rounds} done ({'/'.join(order)})", file=sys.stderr, flush=True)
    print(f"A = {args.old}\nB = {args.new}\n{args.rounds} rounds x {args.samples} "
          f"{'compiles' if args.compile else 'samples'}; ratio = median over rounds of B/A, range over rounds")
    fields = ("total", "lower") if args.compile else ("p50",)
    heads = " ".join(f"{f'A {f} {unit}':>12s} {f'B {f} {unit}':>12s} {'B/A':>6s} {'range':>13s}"
                     for f, unit in zip(fields, ("ms", "ms") if args.compile else ("us",)))
    print(f"{'op':15s} {'shape':20s} {'variant':8s} {heads}")
    scale = 1e3 if args.compile else 1e-3
    overall = {f: [] for f in fields}
    for key in rounds[0]["A"]:
        name, shape, variant = key.split("|")
        cols = []
        for f in fields:
            a = [rd["A"][key][f] for rd in rounds]
            b = [rd["B"][key][f] for rd in rounds]
            ratios = [y / x for x, y in zip(a, b)]
            med = statistics.median(ratios)
            overall[f].append(med)
            cols.append(f"{statistics.median(a) * scale:12.2f} {statistics.median(b) * scale:12.2f} {med:6.3f} "
                        f"{min(ratios):6.3f}-{max(ratios):<6.3f}")
        print(f"{name:15s} {shape:20s} {variant:8s} " + " ".join(cols), flush=True)
    for f, meds in overall.items():
        print(f"{f}: {len(meds)} cells; median of the cells' ratios {statistics.median(meds):.3f}, "
              f"geometric mean {statistics.geometric_mean(meds):.3f}, range {min(meds):.3f}-{max(meds):.3f}")


if __name__ == "__main__":
    main()

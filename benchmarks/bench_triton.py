"""Time per launch of examples/triton_kernels.py's kernels at one realistic size each:
cohort.triton's native build and reference, Triton's interpreter (TRITON_INTERPRET=1) and
torch eager; then native against torch eager on softmax, layer norm, matmul and vector add
at a few sizes.

    python benchmarks/bench_triton.py [--launches N] [--paired N] [--skip-interpreter]

cohort native: `kernel[grid](...)` under cohort.triton.on_cpu(mode="native") (one thread),
the kernel's tile program compiled by llvmlite (bit-identical to the reference).
cohort reference: `kernel[grid](...)` under cohort.triton.on_cpu(mode="reference"),
cohort's exact NumPy interpreter of the kernel's tile program. Triton interpreter:
the same launch in a child process started with TRITON_INTERPRET=1 (Triton reads it
when it is imported, so it cannot be switched on in this process). torch eager: the
example's torch reference for that kernel (dropout: F.dropout; layer norm
backward: aten's native_layer_norm_backward). One thread (torch.set_num_threads(1) in
both processes). Each figure is the median over N timed launches, after one untimed
launch (which builds the kernel's program), with the min-max range of the N; the
ratios are of the medians (interpreter / reference > 1: the reference is faster).
The second table is paired: native and eager launches alternate (one of each, N times), so
a change of the machine's load between them falls on both; medians with min-max.
Prints markdown tables.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "triton_kernels.py"

# one realistic size per kernel (rows x hidden of a small model; matmul 256^3)
SIZES = {
    "vector add": dict(n=98_304),
    "fused softmax": dict(rows=129, cols=768),
    "matmul (grouped, masked edges)": dict(M=256, N=256, K=256),
    "low-memory dropout": dict(n=98_304),
    "layer norm forward": dict(rows=129, cols=768),
    "layer norm backward": dict(rows=129, cols=768),
    "attention forward": dict(heads=4, T=129, D=64),
    "attention forward causal": dict(heads=4, T=129, D=64),
    "rmsnorm": dict(rows=129, cols=768),
    "swiglu": dict(rows=129, cols=768),
    "rotary": dict(T=129, heads=12, D=64),
    "cross-entropy": dict(rows=129, vocab=8192),
}
SIZE_TEXT = {
    "vector add": "98304", "fused softmax": "129×768", "matmul (grouped, masked edges)": "256×256×256",
    "low-memory dropout": "98304", "layer norm forward": "129×768", "layer norm backward": "129×768",
    "attention forward": "4 heads × 129 × 64", "attention forward causal": "4 heads × 129 × 64",
    "rmsnorm": "129×768", "swiglu": "129×768", "rotary": "129 × 12 heads × 64", "cross-entropy": "129×8192",
}


def _eager_dropout(n, p=0.3):
    import torch
    x = torch.randn(n)
    return lambda: torch.nn.functional.dropout(x, p, training=True)


def _eager_layer_norm_backward(rows, cols, eps=1e-5):
    import torch
    x, w, b, dy = torch.randn(rows, cols), torch.randn(cols), torch.randn(cols), torch.randn(rows, cols)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [cols], w, b, eps)
    return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [cols], mean, rstd, w, b, [True, True, True])


# torch eager for the kernels whose example reference is not the plain eager op: dropout's reference
# checks the kernel's own mask; layer norm backward's runs autograd (forward and backward)
EAGER = {"low-memory dropout": _eager_dropout, "layer norm backward": _eager_layer_norm_backward}


def _example():
    spec = importlib.util.spec_from_file_location("triton_kernels", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _times(fn, launches: int) -> list:
    fn()
    out = []
    for _ in range(launches):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def measure(side: str, launches: int) -> dict:
    """{kernel: [seconds per launch, ...] or the error's one line} for side 'kernel' or 'torch'."""
    import torch
    torch.set_num_threads(1)
    ex = _example()
    result = {}
    for name, case in ex.CASES.items():
        launch, reference, _ = case(torch.Generator().manual_seed(0), **SIZES[name])
        if side == "torch" and name in EAGER:
            reference = EAGER[name](**SIZES[name])
        try:
            result[name] = _times(launch if side == "kernel" else reference, launches)
        except Exception as e:                          # e.g. Triton's interpreter on rmsnorm's eps.to()
            result[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return result


# the paired table: native against eager at a few sizes (the goal: within 1.5x of eager)
PAIRED = {
    "vector add": [dict(n=4096), dict(n=98_304), dict(n=1_048_576)],
    "fused softmax": [dict(rows=129, cols=768), dict(rows=1024, cols=1000), dict(rows=64, cols=4096)],
    "layer norm forward": [dict(rows=129, cols=768), dict(rows=1024, cols=1000), dict(rows=64, cols=4096)],
    "matmul (grouped, masked edges)": [dict(M=128, N=128, K=128), dict(M=256, N=256, K=256),
                                       dict(M=511, N=257, K=129)],
}


def _size_text(size: dict) -> str:
    return "×".join(str(v) for v in size.values())


def paired(launches: int) -> list:
    """[(kernel, size text, native seconds, eager seconds, reference seconds)], native and eager
    alternating launch by launch; the reference timed on 3 launches."""
    import torch

    import cohort.triton as ct
    torch.set_num_threads(1)
    ex = _example()
    rows = []
    for name, sizes in PAIRED.items():
        for size in sizes:
            launch, reference, _ = ex.CASES[name](torch.Generator().manual_seed(0), **size)
            with ct.on_cpu(mode="native", threads=1):
                launch()
                reference()
                tn, te = [], []
                for _ in range(launches):
                    t0 = time.perf_counter()
                    launch()
                    t1 = time.perf_counter()
                    reference()
                    t2 = time.perf_counter()
                    tn.append(t1 - t0)
                    te.append(t2 - t1)
            with ct.on_cpu(mode="reference"):
                tr = _times(launch, 3)
            rows.append((name, _size_text(size), tn, te, tr))
    return rows


def _interpreter(launches: int) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, __file__, "--worker", "--launches", str(launches)], env=env,
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"bench_triton: the TRITON_INTERPRET=1 child failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout)


def _cell(times) -> str:
    if isinstance(times, str):
        return "fails"
    ms = [t * 1e3 for t in times]
    return f"{_sig(statistics.median(ms))} ({_sig(min(ms))}–{_sig(max(ms))})"


def _sig(x: float) -> str:
    """Three significant figures, thousands separated."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _ratio(a, b) -> str:
    if isinstance(a, str) or isinstance(b, str):
        return "–"
    return _sig(statistics.median(a) / statistics.median(b))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=5, help="timed launches per kernel and column (default 5)")
    ap.add_argument("--paired", type=int, default=30, help="alternating native/eager launches per size in the "
                                                            "second table (default 30; 0: no second table)")
    ap.add_argument("--skip-interpreter", action="store_true", help="no Triton interpreter column (its child "
                                                                     "process takes minutes)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.launches < 1 or ns.paired < 0:
        print("bench_triton: --launches must be at least 1 and --paired at least 0", file=sys.stderr)
        return 2
    if ns.worker:                                       # the TRITON_INTERPRET=1 child
        print(json.dumps(measure("kernel", ns.launches)))
        return 0
    os.environ.pop("TRITON_INTERPRET", None)
    import cohort.triton as ct
    from cohort.backend.target import host
    interp = {} if ns.skip_interpreter else _interpreter(ns.launches)
    with ct.on_cpu(mode="native", threads=1):
        nat = measure("kernel", ns.launches)
    with ct.on_cpu(mode="reference"):
        ours = measure("kernel", ns.launches)
    eager = measure("torch", ns.launches)
    command = f"`python benchmarks/bench_triton.py --launches {ns.launches} --paired {ns.paired}" + \
        (" --skip-interpreter`" if ns.skip_interpreter else "`")
    print(f"Machine: {host().summary()}; 1 thread.  ")
    print(f"Command: {command}; ms per launch, median of {ns.launches} launches (min–max).\n")
    print("| kernel | size | cohort native ms | cohort reference ms | Triton interpreter ms | torch eager ms "
          "| interpreter / native | native / eager |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in ours:
        it = interp.get(name, "not run")
        print(f"| {name} | {SIZE_TEXT[name]} | {_cell(nat[name])} | {_cell(ours[name])} | "
              f"{_cell(it) if it != 'not run' else 'not run'} | {_cell(eager[name])} "
              f"| {_ratio(it, nat[name]) if it != 'not run' else '–'} | {_ratio(nat[name], eager[name])} |")
    for column, side in (("cohort native", nat), ("cohort reference", ours), ("Triton interpreter", interp),
                         ("torch eager", eager)):
        for name, err in side.items():
            if isinstance(err, str):
                print(f"\n{name} fails under {column}: {err}")
    if ns.paired:
        print(f"\nPaired: native and eager alternate, {ns.paired} launches each; ms per launch, median "
              "(min–max); the reference on 3 launches.\n")
        print("| kernel | size | cohort native ms | torch eager ms | native / eager | cohort reference ms "
              "| reference / native |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for name, size, tn, te, tr in paired(ns.paired):
            print(f"| {name} | {size} | {_cell(tn)} | {_cell(te)} | {_ratio(tn, te)} | {_cell(tr)} "
                  f"| {_ratio(tr, tn)} |")
    return 1 if any(isinstance(v, str) for v in list(ours.values()) + list(nat.values())) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Time per launch of examples/triton_kernels.py's kernels at one realistic size each:
cohort.triton's reference, Triton's interpreter (TRITON_INTERPRET=1) and torch eager.

    python benchmarks/bench_triton.py [--launches N]

cohort reference: `kernel[grid](...)` under cohort.triton.on_cpu(mode="reference"),
cohort's exact NumPy interpreter of the kernel's tile program. Triton interpreter:
the same launch in a child process started with TRITON_INTERPRET=1 (Triton reads it
when it is imported, so it cannot be switched on in this process). torch eager: the
example's torch reference for that kernel (dropout: F.dropout; layer norm
backward: aten's native_layer_norm_backward). One thread (torch.set_num_threads(1) in
both processes). Each figure is the median over N timed launches, after one untimed
launch (which builds the kernel's program), with the min-max range of the N; the
ratios are of the medians (interpreter / reference > 1: the reference is faster).
Prints a markdown table.
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
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.launches < 1:
        print("bench_triton: --launches must be at least 1", file=sys.stderr)
        return 2
    if ns.worker:                                       # the TRITON_INTERPRET=1 child
        print(json.dumps(measure("kernel", ns.launches)))
        return 0
    os.environ.pop("TRITON_INTERPRET", None)
    import cohort.triton as ct
    from cohort.backend.target import host
    interp = _interpreter(ns.launches)
    with ct.on_cpu(mode="reference"):
        ours = measure("kernel", ns.launches)
    eager = measure("torch", ns.launches)
    print(f"Machine: {host().summary()}; 1 thread.  ")
    print(f"Command: `python benchmarks/bench_triton.py --launches {ns.launches}`; ms per launch, "
          f"median of {ns.launches} launches (min–max).\n")
    print("| kernel | size | cohort reference ms | Triton interpreter ms | torch eager ms "
          "| interpreter / reference | reference / eager |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in ours:
        print(f"| {name} | {SIZE_TEXT[name]} | {_cell(ours[name])} | {_cell(interp[name])} | {_cell(eager[name])} "
              f"| {_ratio(interp[name], ours[name])} | {_ratio(ours[name], eager[name])} |")
    for column, side in (("cohort reference", ours), ("Triton interpreter", interp), ("torch eager", eager)):
        for name, err in side.items():
            if isinstance(err, str):
                print(f"\n{name} fails under {column}: {err}")
    return 1 if any(isinstance(v, str) for v in ours.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

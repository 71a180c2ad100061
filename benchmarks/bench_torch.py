"""cohort.torch: the cost of a torch call, what the kept Consts buy, and the
Llama example's forward pass.

    python benchmarks/bench_torch.py                 # all three parts
    python benchmarks/bench_torch.py --part overhead # one part: overhead, consts or llama

overhead: per op at a small shape, the median time of one call (each call
timed on its own, perf_counter_ns, median over many) of cohort.torch.<op>
(eager: the op's implementation, no dispatcher), torch.ops.cohort.<op> (the
dispatcher: custom_op's autograd and checking layers), the same under
torch.inference_mode(), and eager PyTorch's own expression; and the native
entry alone (the JIT timer's loop: no Python). overhead = cohort.torch's
call minus the native entry. Rounds alternate the columns' order; each
figure is the median over rounds, with the range.

consts: the rope and attention kernels take lengths at run time (one build
serves every length); their D, R, DV and the convention stay Const. Timed
at the native entry, paired in one loop: rope with D and R as Const (the
kernel) against a copy taking them at run time; attention with its lengths
and head counts at run time (the kernel) against the same kernel with them
bound as Consts (one build per length, as before). Outputs are checked
bitwise equal first.

llama: examples/llama.py's model (a small LlamaForCausalLM), one forward of a
prompt: eager PyTorch (SDPA), cohort, torch.compile of each (cohort's with
fullgraph=True), best and median of --repeat, one thread.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import cohort.torch as ct
from cohort import Buffer, block_id, block_size, f32, i32, kernel, thread_id
from cohort.backend.compiler import compile_kernel
from cohort.backend.timer import calibrate_iters, time_entry
from cohort.refimpl import ops
from cohort.refimpl.ir import Kernel, Param, ParamKind
from cohort.torch import launch

ROOT = Path(__file__).resolve().parent.parent


def per_call_us(call, n: int) -> float:
    for _ in range(max(50, n // 10)):
        call()
    ts = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter_ns()
        call()
        ts[i] = time.perf_counter_ns() - t0
    return float(np.median(ts)) / 1e3


def native_us(p) -> float:
    """A prepared launch's native entry, timed by the JIT loop (no Python)."""
    iters = calibrate_iters(p.entry, p.address, target_ns=2e5)
    return float(np.median(time_entry(p.entry, p.address, iters, 7))) / 1e3


# ---------------------------------------------------------------- overhead

def overhead_cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    x, w, b = r(17, 65), r(65), r(65)
    mask = torch.rand(17, 65, generator=g) > 0.3
    q, k, v = r(1, 4, 16, 16), r(1, 2, 32, 16), r(1, 2, 32, 16)
    xr, cos, sin = r(1, 4, 16, 16), r(16, 8), r(16, 8)
    rep = lambda t: t.repeat_interleave(2, dim=1)
    return [
        ("rmsnorm 17x65", "rmsnorm", (x, w), lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
        ("layernorm 17x65", "layernorm", (x, w, b), lambda: F.layer_norm(x, (65,), w, b, 1e-5)),
        ("masked_softmax 17x65", "masked_softmax", (x, mask), lambda: torch.softmax(x.masked_fill(~mask, -1e30), -1)),
        ("swiglu 17x65", "swiglu", (x, x), lambda: F.silu(x) * x),
        ("gelu 17x65", "gelu", (x,), lambda: F.gelu(x)),
        ("rope 1x4x16x16", "rope", (xr, cos, sin, False), None),
        ("attention 1x4x2x16x32x16x16", "attention", (q, k, v, True),
         lambda: F.scaled_dot_product_attention(q, rep(k), rep(v), is_causal=True)),
    ]


def part_overhead(rounds: int, n: int):
    print("## overhead: one call, median µs (range over rounds); overhead = cohort.torch − native entry\n")
    print("| op | native entry | cohort.torch | overhead | torch.ops.cohort | torch.ops, inference_mode | eager PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, name, args, eager in overhead_cases():
        fn, op = getattr(ct, name), getattr(torch.ops.cohort, name)
        with launch.recording() as launches:
            fn(*args)
        launcher, n_threads, tensors, scalars = launches[-1]
        prep = launcher.prepare(n_threads, tensors, scalars)
        with torch.inference_mode():
            iargs = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        cols = {"native": lambda: None, "direct": lambda: fn(*args), "ops": lambda: op(*args)}
        if eager is not None:
            cols["eager"] = eager
        res = {c: [] for c in list(cols) + ["infmode"]}
        for r in range(rounds):
            order = list(cols) if r % 2 == 0 else list(cols)[::-1]
            for c in order:
                res[c].append(native_us(prep) if c == "native" else per_call_us(cols[c], n))
            with torch.inference_mode():
                res["infmode"].append(per_call_us(lambda: op(*iargs), n))
        med = {c: float(np.median(v)) for c, v in res.items() if v}
        rng = lambda c: f"{min(res[c]):.2f}–{max(res[c]):.2f}"
        over = [d - nat for d, nat in zip(res["direct"], res["native"])]
        print(f"| {label} | {med['native']:.2f} | {med['direct']:.2f} ({rng('direct')}) | "
              f"{float(np.median(over)):.2f} ({min(over):.2f}–{max(over):.2f}) | {med['ops']:.2f} | "
              f"{med['infmode']:.2f} | {med['eager']:.2f} |" if "eager" in med else
              f"| {label} | {med['native']:.2f} | {med['direct']:.2f} ({rng('direct')}) | "
              f"{float(np.median(over)):.2f} ({min(over):.2f}–{max(over):.2f}) | {med['ops']:.2f} | "
              f"{med['infmode']:.2f} | — |")


# ---------------------------------------------------------------- consts

@kernel(block=32)
def rope_rows_runtime(x: Buffer[f32], cos: Buffer[f32], sin: Buffer[f32], y: Buffer[f32], N: i32, S: i32,
                      CS: i32, D: i32, R: i32, HALF: i32):
    """rope_rows (refimpl/ops/rotary.py) with D, R and HALF at run time: the same operations."""
    pos = block_id()
    t = thread_id()
    for j in range(t, N * (R // 2), block_size()):
        c = cos[(j // (R // 2) * CS + pos) * (R // 2) + j % (R // 2)]
        s = sin[(j // (R // 2) * CS + pos) * (R // 2) + j % (R // 2)]
        x0 = x[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF)]
        x1 = x[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF) + HALF * (R // 2 - 1) + 1]
        y[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF)] = x0 * c - x1 * s
        y[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF) + HALF * (R // 2 - 1) + 1] = x0 * s + x1 * c
    for r in range(N):
        for f in range(R + t, D, block_size()):
            y[(r * S + pos) * D + f] = x[(r * S + pos) * D + f]


def bind_as_consts(k: Kernel, names) -> Kernel:
    """k with the scalar parameters `names` turned into Const parameters."""
    params = tuple(Param(p.name, ParamKind.CONST, p.dtype) if p.name in names else p for p in k.params)
    return Kernel(k.name, params, k.body, k.block)


def paired_native(entries: dict, rounds: int) -> dict:
    """{name: [round medians]} of native entries timed in alternating order."""
    first = next(iter(entries.values()))
    iters = calibrate_iters(first.entry, first.address, target_ns=2e5)
    res = {n: [] for n in entries}
    for r in range(rounds):
        for n in (list(entries) if r % 2 == 0 else list(entries)[::-1]):
            p = entries[n]
            res[n].append(float(np.median(time_entry(p.entry, p.address, iters, 5))) / 1e3)
    return res


def prepared(op, kernel_, shape, consts, scalars, variant="packet"):
    inputs = op.make_inputs(shape, 0)
    bufs = ops.allocate(op, shape, inputs)
    t0 = time.process_time()
    ck = compile_kernel(kernel_, consts, variant)
    build_s = time.process_time() - t0
    launch = op.launch(shape)
    p = ck.prepare(launch.n, {**bufs, **scalars})
    p.run()
    return p, bufs[op.output].copy(), build_s


def part_consts(rounds: int):
    print("\n## consts: native entry µs, packet, paired (median over rounds, range); build: CPU seconds\n")
    print("| kernel | shape | kept Const | µs | runtime instead | µs | ratio Const/runtime | builds (s) |")
    print("|---|---|---|---:|---|---:|---:|---|")
    for name, shape in (("rope_half", (32, 128, 128, 128)), ("rope_pairs", (8, 17, 64, 32)),
                        ("rope_half", (4, 7, 64, 64))):
        op = ops.get(name)
        la = op.launch(shape)
        pc, yc, bc = prepared(op, op.kernel, shape, la.consts, la.scalars)
        pr, yr, br = prepared(op, rope_rows_runtime, shape, {}, {**la.scalars, **la.consts})
        assert np.array_equal(yc.view(np.uint32), yr.view(np.uint32)), "runtime copy differs"
        res = paired_native({"const": pc, "runtime": pr}, rounds)
        ratio = [a / b for a, b in zip(res["const"], res["runtime"])]
        how = "" if pr.fallback is None else " (checked build: bounds not provable)"
        print(f"| {name} | {ops.fmt_shape(shape)} | D, R, convention | {np.median(res['const']):.2f} | "
              f"at run time{how} | {np.median(res['runtime']):.2f} | {np.median(ratio):.3f} "
              f"({min(ratio):.3f}–{max(ratio):.3f}) | {bc:.3f} / {br:.3f} |")
    for name, shape in (("attention", (1, 4, 2, 16, 32, 16, 16)), ("attention", (1, 4, 1, 64, 128, 32, 32)),
                        ("attention_causal", (1, 4, 2, 64, 64, 16, 16))):
        op = ops.get(name)
        la = op.launch(shape)
        lengths = ("H", "HKV", "SQ", "SKV")
        bound = bind_as_consts(op.kernel.ir, lengths)
        pr, yr, br = prepared(op, op.kernel, shape, la.consts, la.scalars)
        pc, yc, bc = prepared(op, bound, shape, {**la.consts, **{n: la.scalars[n] for n in lengths}},
                              {"scale": la.scalars["scale"]})
        assert np.array_equal(yc.view(np.uint32), yr.view(np.uint32)), "Const-bound copy differs"
        res = paired_native({"const": pc, "runtime": pr}, rounds)
        ratio = [a / b for a, b in zip(res["const"], res["runtime"])]
        print(f"| {name} | {ops.fmt_shape(shape)} | D, Dv, causal; lengths bound too | {np.median(res['const']):.2f} | "
              f"H, Hkv, Sq, Skv at run time | {np.median(res['runtime']):.2f} | {np.median(ratio):.3f} "
              f"({min(ratio):.3f}–{max(ratio):.3f}) | {bc:.3f} / {br:.3f} |")


# ---------------------------------------------------------------- llama

def load_example():
    spec = importlib.util.spec_from_file_location("cohort_example_llama", ROOT / "examples" / "llama.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod                     # torch.compile looks modules up by name
    spec.loader.exec_module(mod)
    return mod


def part_llama(repeat: int, prompt: int, layers: int, hidden: int, heads: int, kv_heads: int, inter: int):
    import copy
    ex = load_example()
    cfg = ex.config(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, intermediate=inter)
    ref = ex.build_model(cfg)
    model = ex.use_cohort(copy.deepcopy(ref))
    ids = torch.randint(0, cfg.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(1))
    cols = {"eager PyTorch (SDPA)": ref, "cohort (eager)": model,
            "torch.compile(eager PyTorch)": torch.compile(ref),
            "torch.compile(cohort, fullgraph)": torch.compile(model, fullgraph=True)}
    print(f"\n## llama: forward of {prompt} tokens, {layers} layers, hidden {hidden}, heads {heads}/{kv_heads}, "
          f"intermediate {inter}; ms, {repeat} calls per round, one thread\n")
    res = {c: [] for c in cols}
    with torch.no_grad():
        for m in cols.values():
            m(ids)
            m(ids)
        for r in range(3):
            for c in (list(cols) if r % 2 == 0 else list(cols)[::-1]):
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    cols[c](ids)
                    res[c].append(time.perf_counter() - t0)
    base = float(np.median(res["eager PyTorch (SDPA)"]))
    print("| model | best ms | median ms | median / eager PyTorch |")
    print("|---|---:|---:|---:|")
    for c, ts in res.items():
        print(f"| {c} | {min(ts) * 1e3:.3f} | {np.median(ts) * 1e3:.3f} | {np.median(ts) / base:.3f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("overhead", "consts", "llama", "all"), default="all")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=4000, help="timed calls per figure (overhead)")
    ap.add_argument("--repeat", type=int, default=20, help="forward passes per round (llama)")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=176)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"variant: {ct.current_variant().label}; load average at start: "
          f"{open('/proc/loadavg').read().split()[:3] if Path('/proc/loadavg').exists() else '?'}\n")
    if a.part in ("overhead", "all"):
        part_overhead(a.rounds, a.calls)
    if a.part in ("consts", "all"):
        part_consts(a.rounds)
    if a.part in ("llama", "all"):
        part_llama(a.repeat, a.prompt, a.layers, a.hidden, a.heads, a.kv_heads, a.intermediate)
    print(f"\nload average at end: {open('/proc/loadavg').read().split()[:3] if Path('/proc/loadavg').exists() else '?'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

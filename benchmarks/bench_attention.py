"""cohort.torch.attention against F.scaled_dot_product_attention, one thread, paired.

    python benchmarks/bench_attention.py                      # the default shapes, packet and lanes=16
    python benchmarks/bench_attention.py --variants packet --rounds 9
    python benchmarks/bench_attention.py --rows               # also rmsnorm / layernorm / softmax

Each round times every column once, in an order that alternates between rounds
(the columns share whatever else the machine runs): a column's time is the
median of --calls calls (perf_counter_ns around each call, after a warm-up).
The table gives the median over rounds and the [min, max] range; ratio is
cohort's time over SDPA's, taken per round (paired) and then the median.

Shapes are B x H x Sq x D with Skv = Sq (prompt, not causal) unless given as
B x H x Hkv x Sq x Skv x D (a decode shape: Sq = 1). Outputs are checked
bitwise equal between the variants before timing (every variant is exact).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

import cohort.torch as ct

SHAPES = ("1x16x200x64", "1x32x256x128", "1x32x8x1x1024x128")


def parse_shape(text: str):
    d = tuple(int(x) for x in text.split("x"))
    if len(d) == 4:
        b, h, s, dd = d
        return b, h, h, s, s, dd
    if len(d) == 6:
        return d
    raise SystemExit(f"--shapes: expected BxHxSqxD or BxHxHkvxSqxSkvxD, got {text!r}")


def median_call_ns(call, calls: int) -> float:
    for _ in range(max(3, calls // 5)):
        call()
    ts = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter_ns()
        call()
        ts[i] = time.perf_counter_ns() - t0
    return float(np.median(ts))


def paired(columns: dict, rounds: int, calls: int) -> dict:
    """columns: name -> call. Returns name -> per-round times (ns)."""
    names = list(columns)
    out = {n: [] for n in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            out[n].append(median_call_ns(columns[n], calls))
    return out


def fmt(xs, scale=1e-3) -> str:
    a = np.asarray(xs) * scale
    return f"{np.median(a):.4g} [{a.min():.4g}, {a.max():.4g}]"


def attention_columns(shape, variants):
    b, h, hkv, sq, skv, d = shape
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, h, sq, d, generator=g)
    k = torch.randn(b, hkv, skv, d, generator=g)
    v = torch.randn(b, hkv, skv, d, generator=g)
    rep = h // hkv
    kr, vr = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    cols = {"sdpa": lambda: F.scaled_dot_product_attention(q, kr, vr)}
    outs = {}
    for name in variants:
        var = ct.variant(name)   # a setting; each column enters its own scope below

        def call(var=var):
            with var:
                return ct.attention(q, k, v)
        outs[name] = call()
        cols[name] = call
    first = next(iter(outs.values()))
    for name, o in outs.items():
        if not torch.equal(o.view(torch.int32), first.view(torch.int32)):
            raise SystemExit(f"variant {name} differs bitwise from {variants[0]} at {shape}")
    return cols


def row_columns(op, shape, variants):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g)
    w, bb = torch.randn(shape[-1], generator=g), torch.randn(shape[-1], generator=g)
    eager = {"rmsnorm": lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
             "layernorm": lambda: F.layer_norm(x, (shape[-1],), w, bb, 1e-5),
             "softmax": lambda: torch.softmax(x, -1)}[op]
    mine = {"rmsnorm": lambda: ct.rmsnorm(x, w), "layernorm": lambda: ct.layernorm(x, w, bb),
            "softmax": lambda: ct.softmax(x, -1)}[op]
    cols = {"eager": eager}
    for name in variants:
        var = ct.variant(name)

        def call(var=var):
            with var:
                return mine()
        call()
        cols[name] = call
    return cols


def table(title, cols, base, rounds, calls):
    res = paired(cols, rounds, calls)
    print(f"\n{title}")
    print(f"| column | time us: median [range] | ratio to {base}: median [range] |")
    print("|---|---|---|")
    for n, ts in res.items():
        ratio = "" if n == base else fmt(np.asarray(ts) / np.asarray(res[base]), 1.0)
        print(f"| {n} | {fmt(ts)} | {ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--variants", nargs="*", default=["packet", "lanes=16"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--rows", action="store_true", help="also time rmsnorm, layernorm and softmax")
    a = ap.parse_args()
    if a.rounds < 1 or a.calls < 1:
        raise SystemExit("--rounds and --calls must be >= 1")
    torch.set_num_threads(1)
    ct.variant("packet")
    for text in a.shapes:
        shape = parse_shape(text)
        table(f"attention {text} (B,H,Hkv,Sq,Skv,D = {shape})", attention_columns(shape, a.variants), "sdpa",
              a.rounds, a.calls)
    if a.rows:
        for op in ("rmsnorm", "layernorm", "softmax"):
            for shape in ((64, 4096), (512, 1024), (2048, 128)):
                table(f"{op} {shape[0]}x{shape[1]}", row_columns(op, shape, a.variants), "eager",
                      a.rounds, 4 * a.calls)


if __name__ == "__main__":
    main()

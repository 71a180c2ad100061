"""cohort.torch.attention against F.scaled_dot_product_attention, one thread, paired.

    python benchmarks/bench_attention.py                      # the default shapes, packet and lanes=16
    python benchmarks/bench_attention.py --variants packet --rounds 9
    python benchmarks/bench_attention.py --rows               # also rmsnorm / layernorm / masked_softmax

Each round times every column once, in an order that alternates between rounds
(the columns share whatever else the machine runs): a column's time is the
median of --calls calls (after a warm-up), by the thread's CPU time
(time.thread_time_ns: on a shared machine the wall clock also counts the time
the thread waited for a core; --clock wall for perf_counter_ns). The table
gives the median over rounds and the [min, max] range; ratio is the column's
time over SDPA's, taken per round (paired) and then the median.

Columns per variant: `<variant>` is cohort.torch.attention as it runs (the form
attention_op.form_for picks on this machine, named in the table);
`<variant> stream` forces the 16-row "stream" form (the kernel before the
32-row forms: the same code) through the same call; `--forms F ...` adds a
column `<variant> F` per named form, forced the same way (a before/after pair
in one run).

Shapes are B x H x Sq x D with Skv = Sq (prompt, not causal) unless given as
B x H x Hkv x Sq x Skv x D (a decode shape: Sq = 1). Outputs are checked
bitwise equal between the variants before timing (every variant is exact).
"""
from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import torch
import torch.nn.functional as F

import cohort.torch as ct
from cohort.backend import target
from cohort.refimpl.ops import attention as attention_op
from cohort.torch import attention_ops

SHAPES = ("1x16x200x64", "1x32x256x128", "1x32x8x1x1024x128", "1x32x32x1x1024x128")


def parse_shape(text: str):
    d = tuple(int(x) for x in text.split("x"))
    if len(d) == 4:
        b, h, s, dd = d
        return b, h, h, s, s, dd
    if len(d) == 6:
        return d
    raise SystemExit(f"--shapes: expected BxHxSqxD or BxHxHkvxSqxSkvxD, got {text!r}")


CLOCK = [time.thread_time_ns]


def median_call_ns(call, calls: int) -> float:
    clock = CLOCK[0]
    for _ in range(max(3, calls // 5)):
        call()
    ts = np.empty(calls)
    for i in range(calls):
        t0 = clock()
        call()
        ts[i] = clock() - t0
    return float(np.median(ts))


class forced_form:
    """Inside the block, cohort.torch.attention runs attention_op's `form` (a benchmark's
    column; the op itself always takes form_for's choice)."""

    class _Table(dict):
        def __init__(self, entry):
            super().__init__()
            self.entry = entry

        def get(self, key, default=None):
            return self.entry

    def __init__(self, form: str):
        self.form = form

    def __enter__(self):
        self.saved = attention_ops._FORMS
        attention_ops._FORMS = self._Table(attention_op.FORMS[self.form])

    def __exit__(self, *exc):
        attention_ops._FORMS = self.saved
        return False


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


def attention_columns(shape, variants, forms=()):
    b, h, hkv, sq, skv, d = shape
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, h, sq, d, generator=g)
    k = torch.randn(b, hkv, skv, d, generator=g)
    v = torch.randn(b, hkv, skv, d, generator=g)
    rep = h // hkv
    kr, vr = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    cols = {"sdpa": lambda: F.scaled_dot_product_attention(q, kr, vr)}
    outs = {}
    bits = target.current().vector_bits
    for name in variants:
        var = ct.variant(name)   # a setting; each column enters its own scope below
        chosen = attention_op.form_for(sq, h // hkv, var.variant.lanes, bits)

        def call(var=var):
            with var:
                return ct.attention(q, k, v)

        def forced(var, form):
            with var, forced_form(form):
                return ct.attention(q, k, v)
        # each forced column its own variant object: the native call path keys the launch it
        # replays by the variant's id, so a column sharing one would replay another's form
        named = [(f"{name} ({chosen})", call)] + [(f"{name} {f}", functools.partial(forced, ct.variant(name), f))
                                                 for f in ("stream", *forms) if f != chosen]
        for label, c in named:
            outs[label] = c()
            cols[label] = c
    first = next(iter(outs.values()))
    for name, o in outs.items():
        if not torch.equal(o.view(torch.int32), first.view(torch.int32)):
            raise SystemExit(f"variant {name} differs bitwise from {variants[0]} at {shape}")
    return cols


def row_columns(op, shape, variants):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g)
    w, bb = torch.randn(shape[-1], generator=g), torch.randn(shape[-1], generator=g)
    keep = torch.rand(*shape, generator=g) > 0.1
    eager = {"rmsnorm": lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
             "layernorm": lambda: F.layer_norm(x, (shape[-1],), w, bb, 1e-5),
             "masked_softmax": lambda: torch.softmax(x.masked_fill(~keep, float("-inf")), -1)}[op]
    mine = {"rmsnorm": lambda: ct.rmsnorm(x, w), "layernorm": lambda: ct.layernorm(x, w, bb),
            "masked_softmax": lambda: ct.masked_softmax(x, keep)}[op]
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
    ap.add_argument("--forms", nargs="*", default=[], choices=sorted(attention_op.FORMS),
                    help="also time these forms of attention, forced (each a column per variant)")
    ap.add_argument("--rows", action="store_true", help="also time rmsnorm, layernorm and masked_softmax")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    a = ap.parse_args()
    if a.rounds < 1 or a.calls < 1:
        raise SystemExit("--rounds and --calls must be >= 1")
    CLOCK[0] = time.thread_time_ns if a.clock == "cpu" else time.perf_counter_ns
    print(f"target: {target.current().cpu} ({target.current().vector_isa}), torch {torch.__version__}, "
          f"one thread, clock {a.clock}, {a.rounds} rounds x {a.calls} calls")
    torch.set_num_threads(1)
    ct.variant("packet")
    for text in a.shapes:
        shape = parse_shape(text)
        table(f"attention {text} (B,H,Hkv,Sq,Skv,D = {shape})", attention_columns(shape, a.variants, a.forms), "sdpa",
              a.rounds, a.calls)
    if a.rows:
        for op in ("rmsnorm", "layernorm", "masked_softmax"):
            for shape in ((64, 4096), (512, 1024), (2048, 128)):
                table(f"{op} {shape[0]}x{shape[1]}", row_columns(op, shape, a.variants), "eager",
                      a.rounds, 4 * a.calls)


if __name__ == "__main__":
    main()

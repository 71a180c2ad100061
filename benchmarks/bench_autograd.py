"""Forward + backward of each cohort.torch op against eager PyTorch's autograd (one thread):
time (best of --repeat) and the largest gradient difference relative to the gradient's max.

    python benchmarks/bench_autograd.py [--repeat 20] [--variant packet]

Builds happen in a warm-up call, outside the timings. Times are wall-clock per
forward+backward (loss = sum(out * fixed random weights)), so they include
PyTorch's autograd bookkeeping on both sides.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import cohort.torch as ct


def _rep(t, n):
    return t.repeat_interleave(n, dim=1)


def _rope(x, c, s):
    R = 2 * c.shape[-1]
    x0, x1 = x[..., :R // 2], x[..., R // 2:R]
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c, x[..., R:]], -1)


def cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)   # noqa: E731
    x, w, b, u = r(512, 1024), r(1024), r(1024), r(512, 1024)
    keep = torch.rand(512, 1024, generator=g) > 0.3
    q, k, v = r(1, 8, 256, 64), r(1, 2, 256, 64), r(1, 2, 256, 64)
    cos, sin = r(256, 32), r(256, 32)
    causal = torch.ones(256, 256, dtype=torch.bool).tril()
    return [
        ("rmsnorm 512x1024", lambda x, w: ct.rmsnorm(x, w), lambda x, w: F.rms_norm(x, (1024,), w, 1e-6), (x, w)),
        ("layernorm 512x1024", ct.layernorm, lambda x, w, b: F.layer_norm(x, (1024,), w, b), (x, w, b)),
        ("masked_softmax 512x1024", lambda x: ct.masked_softmax(x, keep),
         lambda x: torch.softmax(x.masked_fill(~keep, float("-inf")), -1), (x,)),
        ("swiglu 512x1024", ct.swiglu, lambda a, b: F.silu(a) * b, (x, u)),
        ("gelu 512x1024", ct.gelu, F.gelu, (x,)),
        ("gelu_tanh 512x1024", ct.gelu_tanh, lambda x: F.gelu(x, approximate="tanh"), (x,)),
        ("rope 1x8x256x64", lambda x: ct.rope(x, cos, sin, interleaved=False), lambda x: _rope(x, cos, sin), (q,)),
        ("attention causal 1x8x2x256x256x64", lambda q, k, v: ct.attention(q, k, v, causal=True),
         lambda q, k, v: F.scaled_dot_product_attention(q, _rep(k, 4), _rep(v, 4), attn_mask=causal), (q, k, v)),
    ]


def run(f, args, weights):
    args = [a.detach().requires_grad_(True) for a in args]
    out = f(*args)
    (out * weights).sum().backward()
    return [a.grad for a in args]


def best(fn, repeat):
    fn()
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--variant", default="packet")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ct.variant(a.variant)
    print(f"{'case':38} {'eager ms':>9} {'cohort ms':>10} {'cohort/eager':>12} {'max grad diff / max':>20}")
    for name, mine, ref, args in cases():
        with torch.no_grad():
            weights = torch.randn(ref(*args).shape, generator=torch.Generator().manual_seed(1))
        got, want = run(mine, args, weights), run(ref, args, weights)
        diff = max(float((g - w).abs().max() / w.abs().max()) for g, w in zip(got, want))
        te, tc = best(lambda: run(ref, args, weights), a.repeat), best(lambda: run(mine, args, weights), a.repeat)
        print(f"{name:38} {te * 1e3:9.3f} {tc * 1e3:10.3f} {tc / te:12.2f} {diff:20.2e}")


if __name__ == "__main__":
    main()

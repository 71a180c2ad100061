"""attention: o = softmax(q k^T / sqrt(D)) v per head, grouped KV heads, no mask.

One thread per query row, online softmax (running max m and sum l): the
query row is read once into a private array, the output row accumulated in
another (acc[DV]), flash-attention style.
Head h reads KV head h*HKV//H."""
import numpy as np

from ... import INF, Buffer, Const, exp, f32, global_id, kernel, private, sqrt
from .base import Launch, Operator, ShapeError, seeded_normal


@kernel(block=32)
def attention(q: Buffer[f32], k: Buffer[f32], v: Buffer[f32], o: Buffer[f32],
              H: Const[int], HKV: Const[int], SQ: Const[int], SKV: Const[int], D: Const[int],
              DV: Const[int]):
    g = global_id()                      # query row: ((b*H + h)*SQ + s)
    bh = g // SQ
    b = bh // H
    h = bh - b * H
    kv = b * HKV + h * HKV // H
    qbase = g * D
    kbase = kv * SKV * D
    vbase = kv * SKV * DV
    scale = 1.0 / sqrt(f32(D))
    qrow = private(f32, D)               # the thread's query row, read once
    acc = private(f32, DV)
    for d in range(D):
        qrow[d] = q[qbase + d]
    m = -INF
    l = 0.0
    for j in range(SKV):
        s = 0.0
        for d in range(D):
            s += qrow[d] * k[kbase + j * D + d]
        s = s * scale
        m_new = max(m, s)
        corr = exp(m - m_new)
        p = exp(s - m_new)
        l = l * corr + p
        for e in range(DV):
            acc[e] = acc[e] * corr + p * v[vbase + j * DV + e]
        m = m_new
    for e in range(DV):
        o[g * DV + e] = acc[e] / l


def check(s):
    B, H, HKV, SQ, SKV, D, DV = s
    if H % HKV:
        raise ShapeError(f"attention needs H a multiple of Hkv, got H={H}, Hkv={HKV}")


def oracle(inp):
    q, k, v = (inp[n].astype(np.float64) for n in ("q", "k", "v"))
    H, HKV = q.shape[1], k.shape[1]
    kh = np.arange(H) * HKV // H
    s = np.einsum("bhqd,bhkd->bhqk", q, k[:, kh]) / np.sqrt(q.shape[-1])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", s / s.sum(axis=-1, keepdims=True), v[:, kh])


def shapes(s):
    B, H, HKV, SQ, SKV, D, DV = s
    return {"q": (B, H, SQ, D), "k": (B, HKV, SKV, D), "v": (B, HKV, SKV, DV), "o": (B, H, SQ, DV)}


OP = Operator(
    name="attention", kernel=attention, dims=("B", "H", "Hkv", "Sq", "Skv", "D", "Dv"),
    buffer_shapes=shapes, output="o",
    launch=lambda s: Launch(s[0] * s[1] * s[3], dict(zip(("H", "HKV", "SQ", "SKV", "D", "DV"), s[1:])), {}),
    make_inputs=lambda s, seed: {n: seeded_normal(seed, "attention", n, sh)
                                 for n, sh in shapes(s).items() if n != "o"},
    oracle=oracle, check=check,
    seed_sizes=None, rel_tol=1e-5, fast_math_ulps=32.0,
    definition="o = softmax(q k^T / sqrt(D)) v; head h reads kv head h*Hkv/H",
)

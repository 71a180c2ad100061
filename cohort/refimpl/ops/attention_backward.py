"""attention's backward, flash-attention style (issue 26, autograd): the
probabilities are recomputed from q and k, never stored.

Three kernels, in the forward's layouts, with its masking (causal aligned
bottom-right, SDPA's float/bool mask as a bias read through strides, a
sliding window) and its grouped KV heads:

1. attention_bwd_stats (a thread per query row, the forward's geometry): per
   row, L = m + log(l), the log of the softmax's normaliser (online, key by
   key: m the running max, l = l*exp(m - m') + exp(s - m')), and
   Dr = sum_e dO[e]*O[e] (sequential fma). st[row] = (L, Dr). A row that sees
   no key with a finite score (the forward's 0 rows) has L = +inf, so every
   probability recomputed from it is exp(s - inf) = 0.
2. attention_bwd_dq (a thread per query row): per visible key j,
   P = exp(s - L), dP = dO . v_j, dS = P*(dP - Dr), dq += dS*k_j; dq = scale*dq.
3. attention_bwd_dkv (a block per (batch, KV head, tile of 16 keys), a thread
   per key: every query, dO and statistics load is uniform across a packet):
   per query head of the KV head's group, per query row i that sees key j, in
   order: P and dS as above, dv += P*dO_i, dk += dS*q_i; dk = scale*dk. dk and
   dv go to one buffer, dk first (B*Hkv*Skv*D values), then dv.

The score s of (i, j) is the forward's, bit for bit: s = fma(q[D-1]*scale,
k[D-1], ... fma(q[0]*scale, k[0], 0)), plus the bias (one rounding); kernels
2 and 3 compute it, and dP (fma(dO[e], v[e], .) from e = 0), with the same
operations, so they agree on every P and dS. A key a row does not see has
P = 0 (a select, not exp of -inf), and adds nothing: masked contributions are
skipped by a select, so a NaN or inf in an unseen value cannot leak in.

Keys (kernels 1, 2) and query rows (kernel 3) go in tiles of 4: the tile's
four dot products are independent chains (one load of q[d], or of the key's
k[d], feeds four), then the accumulators take the four in order - the same
operations in the same order as one at a time, so the same bits (checked when
the tiles were introduced; their speed-up: docs/README.md, 'Measurements
behind the code', measured by benchmarks/bench_autograd.py).
Rows and keys past a tile's end are clamped to a real row for their loads and
are not visible.
"""
import numpy as np

from ... import INF, Buffer, Const, block_id, block_size, exp, f32, fma, i32, kernel, log, private, thread_id
from .attention import BLOCK, default_scale
from .attention import check as forward_check
from .attention import launch as forward_launch
from .attention import reference as forward_reference
from .base import Launch, Operator, seeded_normal


@kernel(block=BLOCK)
def attention_bwd_stats(q: Buffer[f32], k: Buffer[f32], bias: Buffer[f32], o: Buffer[f32], do: Buffer[f32],
                        st: Buffer[f32], scale: f32, H: i32, HKV: i32, SQ: i32, SKV: i32, BSB: i32, BSH: i32,
                        BSQ: i32, WIN: i32, D: Const[int], DV: Const[int], CAUSAL: Const[int], MASK: Const[int]):
    # the forward's block geometry and key ranges (attention.py)
    tiles = (SQ + block_size() - 1) // block_size()
    bh = block_id() // tiles
    tile = min(max(block_id() - bh * tiles, 0), tiles - 1)
    b = bh // H
    h = min(max(bh - b * H, 0), H - 1)
    key0 = (b * HKV + h * HKV // H) * SKV
    first = tile * block_size()
    last = min(first + block_size() - 1, SQ - 1)
    s = first + thread_id()
    sr = min(s, SQ - 1)                               # rows past SQ compute on row SQ-1, store nothing
    kend = min(max(s + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
    kend_hi = min(max(last + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
    kbeg = min(max(s + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
    kbeg_lo = min(max(first + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
    brow = b * BSB + h * BSH + sr * BSQ if MASK == 1 else 0
    qrow = private(f32, D)
    for d in range(D):
        qrow[d] = q[(bh * SQ + sr) * D + d] * scale
    m = -INF
    l = 0.0
    for jt in range(kbeg_lo // 4, (kend_hi + 3) // 4):
        j0 = jt * 4
        c0 = key0 + min(j0, kend_hi - 1)
        c1 = key0 + min(j0 + 1, kend_hi - 1)
        c2 = key0 + min(j0 + 2, kend_hi - 1)
        c3 = key0 + min(j0 + 3, kend_hi - 1)
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for d in range(D):
            qd = qrow[d]
            s0 = fma(qd, k[c0 * D + d], s0)
            s1 = fma(qd, k[c1 * D + d], s1)
            s2 = fma(qd, k[c2 * D + d], s2)
            s3 = fma(qd, k[c3 * D + d], s3)
        vis0 = j0 < kend and j0 >= kbeg if CAUSAL == 2 else j0 < kend
        x0 = (s0 + bias[brow + min(j0, kend_hi - 1)] if MASK == 1 else s0) if vis0 else -INF
        m_new = max(m, x0)
        mz = m_new if m_new > -INF else 0.0           # no finite score yet: shift by 0, not by -inf
        l = l * exp(m - mz) + exp(x0 - mz)
        m = m_new
        vis1 = j0 + 1 < kend and j0 + 1 >= kbeg if CAUSAL == 2 else j0 + 1 < kend
        x1 = (s1 + bias[brow + min(j0 + 1, kend_hi - 1)] if MASK == 1 else s1) if vis1 else -INF
        m_new = max(m, x1)
        mz = m_new if m_new > -INF else 0.0           # no finite score yet: shift by 0, not by -inf
        l = l * exp(m - mz) + exp(x1 - mz)
        m = m_new
        vis2 = j0 + 2 < kend and j0 + 2 >= kbeg if CAUSAL == 2 else j0 + 2 < kend
        x2 = (s2 + bias[brow + min(j0 + 2, kend_hi - 1)] if MASK == 1 else s2) if vis2 else -INF
        m_new = max(m, x2)
        mz = m_new if m_new > -INF else 0.0           # no finite score yet: shift by 0, not by -inf
        l = l * exp(m - mz) + exp(x2 - mz)
        m = m_new
        vis3 = j0 + 3 < kend and j0 + 3 >= kbeg if CAUSAL == 2 else j0 + 3 < kend
        x3 = (s3 + bias[brow + min(j0 + 3, kend_hi - 1)] if MASK == 1 else s3) if vis3 else -INF
        m_new = max(m, x3)
        mz = m_new if m_new > -INF else 0.0           # no finite score yet: shift by 0, not by -inf
        l = l * exp(m - mz) + exp(x3 - mz)
        m = m_new
    dr = 0.0
    for e in range(DV):
        dr = fma(do[(bh * SQ + sr) * DV + e], o[(bh * SQ + sr) * DV + e], dr)
    if s < SQ:
        st[(bh * SQ + s) * 2] = m + log(l) if l != 0.0 else INF
        st[(bh * SQ + s) * 2 + 1] = dr


@kernel(block=BLOCK)
def attention_bwd_dq(q: Buffer[f32], k: Buffer[f32], v: Buffer[f32], bias: Buffer[f32], do: Buffer[f32],
                     st: Buffer[f32], dq: Buffer[f32], scale: f32, H: i32, HKV: i32, SQ: i32, SKV: i32, BSB: i32,
                     BSH: i32, BSQ: i32, WIN: i32, D: Const[int], DV: Const[int], CAUSAL: Const[int],
                     MASK: Const[int]):
    tiles = (SQ + block_size() - 1) // block_size()
    bh = block_id() // tiles
    tile = min(max(block_id() - bh * tiles, 0), tiles - 1)
    b = bh // H
    h = min(max(bh - b * H, 0), H - 1)
    key0 = (b * HKV + h * HKV // H) * SKV
    first = tile * block_size()
    last = min(first + block_size() - 1, SQ - 1)
    s = first + thread_id()
    sr = min(s, SQ - 1)
    kend = min(max(s + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
    kend_hi = min(max(last + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
    kbeg = min(max(s + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
    kbeg_lo = min(max(first + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
    brow = b * BSB + h * BSH + sr * BSQ if MASK == 1 else 0
    qrow = private(f32, D)
    dorow = private(f32, DV)
    acc = private(f32, D)
    for d in range(D):
        qrow[d] = q[(bh * SQ + sr) * D + d] * scale
        acc[d] = 0.0
    for e in range(DV):
        dorow[e] = do[(bh * SQ + sr) * DV + e]
    lse = st[(bh * SQ + sr) * 2]
    dr = st[(bh * SQ + sr) * 2 + 1]
    for jt in range(kbeg_lo // 4, (kend_hi + 3) // 4):
        j0 = jt * 4
        c0 = key0 + min(j0, kend_hi - 1)
        c1 = key0 + min(j0 + 1, kend_hi - 1)
        c2 = key0 + min(j0 + 2, kend_hi - 1)
        c3 = key0 + min(j0 + 3, kend_hi - 1)
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for d in range(D):
            qd = qrow[d]
            s0 = fma(qd, k[c0 * D + d], s0)
            s1 = fma(qd, k[c1 * D + d], s1)
            s2 = fma(qd, k[c2 * D + d], s2)
            s3 = fma(qd, k[c3 * D + d], s3)
        vis0 = j0 < kend and j0 >= kbeg if CAUSAL == 2 else j0 < kend
        vis1 = j0 + 1 < kend and j0 + 1 >= kbeg if CAUSAL == 2 else j0 + 1 < kend
        vis2 = j0 + 2 < kend and j0 + 2 >= kbeg if CAUSAL == 2 else j0 + 2 < kend
        vis3 = j0 + 3 < kend and j0 + 3 >= kbeg if CAUSAL == 2 else j0 + 3 < kend
        p0 = exp((s0 + bias[brow + min(j0, kend_hi - 1)] if MASK == 1 else s0) - lse) if vis0 else 0.0
        p1 = exp((s1 + bias[brow + min(j0 + 1, kend_hi - 1)] if MASK == 1 else s1) - lse) if vis1 else 0.0
        p2 = exp((s2 + bias[brow + min(j0 + 2, kend_hi - 1)] if MASK == 1 else s2) - lse) if vis2 else 0.0
        p3 = exp((s3 + bias[brow + min(j0 + 3, kend_hi - 1)] if MASK == 1 else s3) - lse) if vis3 else 0.0
        dp0 = 0.0
        dp1 = 0.0
        dp2 = 0.0
        dp3 = 0.0
        for e in range(DV):
            de = dorow[e]
            dp0 = fma(de, v[c0 * DV + e], dp0)
            dp1 = fma(de, v[c1 * DV + e], dp1)
            dp2 = fma(de, v[c2 * DV + e], dp2)
            dp3 = fma(de, v[c3 * DV + e], dp3)
        ds0 = p0 * (dp0 - dr)
        ds1 = p1 * (dp1 - dr)
        ds2 = p2 * (dp2 - dr)
        ds3 = p3 * (dp3 - dr)
        for d in range(D):
            a = acc[d]
            a = fma(ds0, k[c0 * D + d], a) if vis0 else a
            a = fma(ds1, k[c1 * D + d], a) if vis1 else a
            a = fma(ds2, k[c2 * D + d], a) if vis2 else a
            a = fma(ds3, k[c3 * D + d], a) if vis3 else a
            acc[d] = a
    if s < SQ:
        for d in range(D):
            dq[(bh * SQ + s) * D + d] = acc[d] * scale


@kernel(block=BLOCK)
def attention_bwd_dkv(q: Buffer[f32], k: Buffer[f32], v: Buffer[f32], bias: Buffer[f32], do: Buffer[f32],
                      st: Buffer[f32], dkv: Buffer[f32], scale: f32, H: i32, HKV: i32, SQ: i32, SKV: i32,
                      BSB: i32, BSH: i32, BSQ: i32, WIN: i32, D: Const[int], DV: Const[int], CAUSAL: Const[int],
                      MASK: Const[int]):
    ktiles = (SKV + block_size() - 1) // block_size()
    bg = block_id() // ktiles                         # (batch, kv head) of this block
    tile = min(max(block_id() - bg * ktiles, 0), ktiles - 1)
    b = bg // HKV
    g = min(max(bg - b * HKV, 0), HKV - 1)
    group = H // HKV                                  # query heads g*group .. g*group + group - 1
    first = tile * block_size()
    last = min(first + block_size() - 1, SKV - 1)
    j = first + thread_id()                           # this thread's key (j >= SKV: computes, stores nothing)
    jr = min(j, SKV - 1)
    off = SKV - SQ
    # query rows that see key j: i + off >= j (causal), i + off - WIN < j (window); the block's union
    ibeg = min(max(j - off, 0), SQ) if CAUSAL >= 1 else 0
    ibeg_lo = min(max(first - off, 0), SQ) if CAUSAL >= 1 else 0
    iend = min(max(j - off + WIN, 0), SQ) if CAUSAL == 2 else SQ
    iend_hi = min(max(last - off + WIN, 0), SQ) if CAUSAL == 2 else SQ
    krow = private(f32, D)
    vrow = private(f32, DV)
    acck = private(f32, D)
    accv = private(f32, DV)
    for d in range(D):
        krow[d] = k[(bg * SKV + jr) * D + d]
        acck[d] = 0.0
    for e in range(DV):
        vrow[e] = v[(bg * SKV + jr) * DV + e]
        accv[e] = 0.0
    for hh in range(group):
        h = g * group + hh
        qb = (b * H + h) * SQ                         # first query row of head h
        bb = b * BSB + h * BSH if MASK == 1 else 0
        for it in range(ibeg_lo // 4, (iend_hi + 3) // 4):
            i0 = it * 4
            r0 = qb + min(i0, SQ - 1)
            r1 = qb + min(i0 + 1, SQ - 1)
            r2 = qb + min(i0 + 2, SQ - 1)
            r3 = qb + min(i0 + 3, SQ - 1)
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for d in range(D):
                kd = krow[d]
                s0 = fma(q[r0 * D + d] * scale, kd, s0)
                s1 = fma(q[r1 * D + d] * scale, kd, s1)
                s2 = fma(q[r2 * D + d] * scale, kd, s2)
                s3 = fma(q[r3 * D + d] * scale, kd, s3)
            vis0 = i0 >= ibeg and i0 < iend
            vis1 = i0 + 1 >= ibeg and i0 + 1 < iend
            vis2 = i0 + 2 >= ibeg and i0 + 2 < iend
            vis3 = i0 + 3 >= ibeg and i0 + 3 < iend
            p0 = exp((s0 + bias[bb + min(i0, SQ - 1) * BSQ + jr] if MASK == 1 else s0) - st[r0 * 2]) if vis0 else 0.0
            p1 = exp((s1 + bias[bb + min(i0 + 1, SQ - 1) * BSQ + jr] if MASK == 1 else s1) - st[r1 * 2]) if vis1 else 0.0
            p2 = exp((s2 + bias[bb + min(i0 + 2, SQ - 1) * BSQ + jr] if MASK == 1 else s2) - st[r2 * 2]) if vis2 else 0.0
            p3 = exp((s3 + bias[bb + min(i0 + 3, SQ - 1) * BSQ + jr] if MASK == 1 else s3) - st[r3 * 2]) if vis3 else 0.0
            dp0 = 0.0
            dp1 = 0.0
            dp2 = 0.0
            dp3 = 0.0
            for e in range(DV):
                vr = vrow[e]
                a = accv[e]
                o0 = do[r0 * DV + e]
                o1 = do[r1 * DV + e]
                o2 = do[r2 * DV + e]
                o3 = do[r3 * DV + e]
                dp0 = fma(o0, vr, dp0)
                dp1 = fma(o1, vr, dp1)
                dp2 = fma(o2, vr, dp2)
                dp3 = fma(o3, vr, dp3)
                a = fma(p0, o0, a) if vis0 else a
                a = fma(p1, o1, a) if vis1 else a
                a = fma(p2, o2, a) if vis2 else a
                a = fma(p3, o3, a) if vis3 else a
                accv[e] = a
            ds0 = p0 * (dp0 - st[r0 * 2 + 1])
            ds1 = p1 * (dp1 - st[r1 * 2 + 1])
            ds2 = p2 * (dp2 - st[r2 * 2 + 1])
            ds3 = p3 * (dp3 - st[r3 * 2 + 1])
            for d in range(D):
                a = acck[d]
                a = fma(ds0, q[r0 * D + d], a) if vis0 else a
                a = fma(ds1, q[r1 * D + d], a) if vis1 else a
                a = fma(ds2, q[r2 * D + d], a) if vis2 else a
                a = fma(ds3, q[r3 * D + d], a) if vis3 else a
                acck[d] = a
    if j < SKV:
        for d in range(D):
            dkv[(bg * SKV + j) * D + d] = acck[d] * scale
        for e in range(DV):
            dkv[len(k) + (bg * SKV + j) * DV + e] = accv[e]


# ---------------------------------------------------------------- launches

def launch_rows(s, causal=False, scale=None, mask_strides=None, window=None):
    """stats and dq: the forward's launch (a block per (batch, head, tile of query rows))."""
    return forward_launch(s, causal, scale, mask_strides, window)


def launch_keys(s, causal=False, scale=None, mask_strides=None, window=None):
    """dkv: a block per (batch, KV head, tile of BLOCK keys)."""
    B, H, HKV, SQ, SKV, D, DV = s
    L = forward_launch(s, causal, scale, mask_strides, window)
    return Launch(B * HKV * -(-SKV // BLOCK) * BLOCK, L.consts, L.scalars)


# ---------------------------------------------------------------- float64 oracle

def _scores(q, k, causal, scale, bias, window):
    """float64 scores (-inf where unseen), the visibility, scale and KV head of each head."""
    H, HKV, SQ, SKV, D = q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]
    kh = np.arange(H) * HKV // H
    sc = np.float64(np.float32(default_scale(D) if scale is None else scale))
    s = np.einsum("bhqd,bhkd->bhqk", q, k[:, kh]) * sc
    if bias is not None:
        s = s + np.asarray(bias, np.float64)
    keep = np.ones((SQ, SKV), bool)
    if causal:
        i = np.arange(SQ)[:, None] + (SKV - SQ)
        keep = np.arange(SKV)[None, :] <= i
        if window is not None:
            keep &= np.arange(SKV)[None, :] > i - window
    return np.where(keep, s, -np.inf), keep, sc, kh


def reference_lse(q, k, causal=False, scale=None, bias=None, window=None):
    """float64 log sum exp of each row's scores; +inf for a row with no finite score."""
    q, k = (np.asarray(a, np.float64) for a in (q, k))
    s, _, _, _ = _scores(q, k, causal, scale, bias, window)
    mx = s.max(axis=-1, keepdims=True)
    fin = np.isfinite(mx)
    total = np.exp(s - np.where(fin, mx, 0.0)).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.where(total > 0, np.where(fin, mx, 0.0) + np.log(np.where(total > 0, total, 1.0)), np.inf)


def reference_backward(q, k, v, do, causal=False, scale=None, bias=None, window=None, st=None):
    """(dq, dk, dv) in float64: SDPA's gradients for cohort's masking (a row with no key has
    output 0 and no gradient). With `st` given (the kernels' input), P = exp(s - L) and dS use
    its L and Dr, as the kernels do; else they are computed exactly."""
    q, k, v, do = (np.asarray(a, np.float64) for a in (q, k, v, do))
    B, H, SQ, D = q.shape
    HKV, SKV = k.shape[1], k.shape[2]
    s, keep, sc, kh = _scores(q, k, causal, scale, bias, window)
    if st is None:
        lse = reference_lse(q, k, causal, scale, bias, window)
        dr = (do * forward_reference(q, k, v, causal, scale, bias, window)).sum(axis=-1, keepdims=True)
    else:
        st = np.asarray(st, np.float64)
        lse, dr = st[..., :1], st[..., 1:]
    with np.errstate(invalid="ignore"):
        p = np.where(keep & np.isfinite(lse), np.exp(s - lse), 0.0)
    dp = np.einsum("bhqe,bhke->bhqk", do, v[:, kh])
    ds = p * (dp - dr)
    dq = np.einsum("bhqk,bhkd->bhqd", ds, k[:, kh]) * sc
    dk_h = np.einsum("bhqk,bhqd->bhkd", ds, q) * sc
    dv_h = np.einsum("bhqk,bhqe->bhke", p, do)
    group = H // HKV
    dk = dk_h.reshape(B, HKV, group, SKV, D).sum(axis=2)
    dv = dv_h.reshape(B, HKV, group, SKV, v.shape[3]).sum(axis=2)
    return dq, dk, dv


# ---------------------------------------------------------------- operators

def shapes(s):
    B, H, HKV, SQ, SKV, D, DV = s
    return {"q": (B, H, SQ, D), "k": (B, HKV, SKV, D), "v": (B, HKV, SKV, DV), "bias": (1,),
            "o": (B, H, SQ, DV), "do": (B, H, SQ, DV), "st": (B, H, SQ, 2), "dq": (B, H, SQ, D),
            "dkv": (B * HKV * SKV * (D + DV),)}


def make_inputs(s, seed, causal=False):
    inp = {n: seeded_normal(seed, "attention_bwd", n, sh) for n, sh in shapes(s).items()
           if n in ("q", "k", "v", "do")}
    inp["o"] = forward_reference(inp["q"], inp["k"], inp["v"], causal).astype(np.float32)
    inp["st"] = _stats_oracle(inp, causal).astype(np.float32)
    return inp


def _stats_oracle(inp, causal=False):
    dr = (np.asarray(inp["do"], np.float64) * np.asarray(inp["o"], np.float64)).sum(-1, keepdims=True)
    return np.concatenate([reference_lse(inp["q"], inp["k"], causal), dr], axis=-1)


def _dq_oracle(inp, causal=False):
    return reference_backward(inp["q"], inp["k"], inp["v"], inp["do"], causal, st=inp["st"])[0]


def _dkv_oracle(inp, causal=False):
    _, dk, dv = reference_backward(inp["q"], inp["k"], inp["v"], inp["do"], causal, st=inp["st"])
    return np.concatenate([dk.reshape(-1), dv.reshape(-1)])


def _operator(name, kern, inputs, output, oracle, launch, causal, definition, rel_tol):
    return Operator(
        name=name + ("_causal" if causal else ""), kernel=kern, dims=("B", "H", "Hkv", "Sq", "Skv", "D", "Dv"),
        buffer_shapes=lambda s: {**{n: shapes(s)[n] for n in inputs + ("bias",)}, output: shapes(s)[output]},
        output=output, launch=lambda s: launch(s, causal),
        make_inputs=lambda s, seed: {n: a for n, a in make_inputs(s, seed, causal).items() if n in inputs},
        aux=("bias",), oracle=lambda inp: oracle(inp, causal), check=forward_check, seed_sizes=None,
        rel_tol=rel_tol, definition=definition)


def _ops(causal):
    """The three kernels as operators (default scale; unmasked or causal); masks and windows
    are launch arguments, exercised by tests/test_autograd.py."""
    return [
        _operator("attention_bwd_stats", attention_bwd_stats, ("q", "k", "o", "do"), "st", _stats_oracle,
                  launch_rows, causal,
                  "per query row (L, Dr): L = log sum exp(scale q.k), Dr = dO.O; L = inf for a row with no key",
                  1e-5),
        _operator("attention_bwd_dq", attention_bwd_dq, ("q", "k", "v", "do", "st"), "dq", _dq_oracle,
                  launch_rows, causal,
                  "dq = scale * sum_j P(dP - Dr) k_j, P = exp(s - L), dP = dO.v_j", 1e-5),
        _operator("attention_bwd_dkv", attention_bwd_dkv, ("q", "k", "v", "do", "st"), "dkv", _dkv_oracle,
                  launch_keys, causal,
                  "dk = scale * sum_i P(dP - Dr) q_i, dv = sum_i P dO_i (over the KV head's query heads); "
                  "dk then dv, flat", 1e-5),
    ]


BACKWARD = _ops(False) + _ops(True)

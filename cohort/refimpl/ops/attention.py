"""attention: o = softmax(scale * q k^T [+ causal mask]) v per head, grouped KV heads.

Layouts are scaled_dot_product_attention's: q [B,H,Sq,D], k [B,Hkv,Skv,D],
v [B,Hkv,Skv,Dv], o [B,H,Sq,Dv]; head h reads KV head h*Hkv//H (H a multiple
of Hkv: SDPA's enable_gqa, repeat_interleave of the KV heads).

Geometry: a block per (batch, head, tile of BLOCK query rows), a thread per
query row. The block's rows share one KV head, so every key and value load is
uniform across a packet (one broadcast feeds all lanes) while each lane's
query row and accumulator sit in private arrays: a packet runs the outer
product of 8 query rows with one key, the register-blocked shape of a GEMM
micro-kernel. The forms (`FORMS`, chosen by `form_for`) are this one code at
other shapes: "stream" blocks of 16 rows, scores in two passes of four keys;
"rows32" blocks of 32 rows (with 32 vector registers, four packets of 8 or two
of 16 share each key broadcast); "rows32k8" 32 rows and the eight scores in one
pass (16 accumulators of 16 lanes: ten loads per sixteen fma instead of six per
eight); "packed8" and "packed16" blocks of 8 or 16 rows taken from every query
head that reads the block's KV head (decoding: one query row per head fills a
packet with the group's heads instead of one live lane). "keys32"
(attention_keys.py) is a block per query row with lanes across keys, for one row
per KV head. "fold32"
(attention_fold.py) is another code for the same operations: 32 rows whose
value fold runs with lanes across the output's columns, a matrix product with
the weights in shared memory and the accumulators in registers. Every score, max, exp
and fold is the same float32 operation on the same operands in every form: the
outputs are bit-identical (tests/test_attention_forms.py). The measurements are
in docs/kernels.md, 'attention's forms'.

Keys are taken in tiles of TILE = 8 (flash attention's online softmax at tile
granularity): the tile's eight scores are independent accumulators over d,
each step one fused multiply-add s = fma(q[d], k[d], s), in two passes of four
(each score's chain is the same either way; four live accumulators per packet
let two packets run side by side in sixteen vector registers, so one key
broadcast feeds both: the timing is in docs/README.md, 'Measurements behind the code';
the "rows32k8" form runs the eight in one pass);
the running max m moves once per tile, so one correction
exp(m - m_new) rescales l and acc per tile, not per key; the values are folded
in as acc[e] = fma(p7, v7[e], ... fma(p0, v0[e], acc[e]*corr)), p0 first. Fused
steps halve the rounding of a dot product and the instructions of the inner
loops (docs/README.md, 'Measurements behind the code'). A row's last partial
tile is a tile of 8 whose missing keys score -inf (weight exactly 0, the key
row read clamped to the block's last key). This order of float32 operations is
the operator's definition (DESIGN §4); the oracle is float64.

Lengths are runtime: SQ, SKV, H and HKV are scalar arguments, so one build of a
form serves every sequence length, batch and head count (cohort.torch builds at
most one per form it picks: a few rows, more rows); D and DV stay Const (the
private arrays' sizes and the unrolled dot products), and so does CAUSAL.

Causal masking aligns the last query with the last key (bottom-right, as
FlashAttention and KV-cache decoding): query row s sees keys j <= i, i = s +
SKV - SQ. When SQ > SKV the first SQ - SKV rows see no key and are 0. (SDPA's
is_causal aligns top-left, j <= s; the two agree when SQ == SKV.) A sliding
window W (CAUSAL = 2, W the scalar WIN >= 1) also hides keys j <= i - W, as
Mistral and Qwen2 define it; tiles wholly before the block's first visible key
are skipped. A tile every row of the block takes (before the block's first
row's diagonal) updates the state directly, in a block-uniform branch; only
the diagonal's tiles select per row (a row past its diagonal keeps its state).
A select of an element's old value stored back is a masked store once code
generation sees it, slow on some CPUs (microcoded there: Target.slow_masked_store; the
measurement is in docs/README.md, 'Measurements behind the code').

A mask (MASK = 1) is SDPA's float attn_mask: bias[b, h, s, j] is added to the
scaled score (after the dot product, before the max), the bias read through
strides BSB, BSH, BSQ (0 for a broadcast dimension) and 1 along the keys. A
boolean mask arrives as 0 / -inf. A key whose score is -inf has weight exactly
0; a row that sees no key with a finite score (fully masked, or before its
window and diagonal) is 0, where SDPA gives NaN. Until a row has seen a finite
score its running max is -inf and the shift is taken as 0 (exp(-inf - 0) = 0,
not exp(NaN)); for rows with finite scores nothing changes."""
import numpy as np

from ... import INF, Buffer, Const, block_id, block_size, exp, f32, fma, i32, kernel, private, thread_id
from .attention_fold import fold32
from .attention_keys import keys32
from .base import Launch, Operator, ShapeError, seeded_normal

BLOCK = 16    # query rows per block in the "stream" form: two packets of 8 lanes, one of 16
TILE = 8      # keys per online-softmax step


def _attention(rows: int, keys: int, packed: int):
    """The kernel for blocks of `rows` query rows whose eight scores per tile run in passes
    of `keys` (4 or 8) over d; packed = 1: a block's rows are (query head of the group, query
    row) pairs of one KV head, rather than query rows of one head. The forms' shapes; the
    operations of every row are the same."""

    @kernel(block=rows)
    def attention(q: Buffer[f32], k: Buffer[f32], v: Buffer[f32], bias: Buffer[f32], o: Buffer[f32], scale: f32,
                  H: i32, HKV: i32, SQ: i32, SKV: i32, BSB: i32, BSH: i32, BSQ: i32, WIN: i32,
                  D: Const[int], DV: Const[int], CAUSAL: Const[int], MASK: Const[int]):
        # Block-level values (uniform across the block's packets). The clamps change no value:
        # they state the ranges (tile < tiles, h < H) the bounds proof cannot derive. A
        # (batch, head) owns SQ rows; packed, a (batch, KV head) owns G * SQ: row r is query
        # row r % SQ of its group's head r // SQ (G = H / HKV heads read one KV head).
        G = H // HKV
        grp = G * SQ if packed == 1 else SQ
        tiles = (grp + block_size() - 1) // block_size()
        bh = block_id() // tiles                          # (batch, head), packed (batch, KV head)
        tile = min(max(block_id() - bh * tiles, 0), tiles - 1)
        b = bh // HKV if packed == 1 else bh // H
        hk = min(max(bh - b * HKV, 0), HKV - 1)           # packed: the block's KV head
        r = tile * block_size() + thread_id()             # this thread's row (r >= grp: computes, stores nothing)
        g = min(r // SQ, G - 1)                           # packed: the row's head in the group
        h = min(max(hk * G + g, 0), H - 1) if packed == 1 else min(max(bh - b * H, 0), H - 1)
        s = min(max(r - g * SQ, 0), SQ - 1) if packed == 1 else r   # the row's query position
        row0 = (b * H + hk * G) * SQ if packed == 1 else bh * SQ   # q's and o's row of r = 0
        key0 = (b * HKV + hk) * SKV if packed == 1 else (b * HKV + h * HKV // H) * SKV   # its KV head's first key
        # the block's first and last query positions (packed: a block whose rows reach into a
        # second head has them all, 0 to SQ - 1)
        r0 = tile * block_size()
        r1 = min(r0 + block_size() - 1, grp - 1)
        first = (0 if r1 // SQ > r0 // SQ else r0 - r0 // SQ * SQ) if packed == 1 else r0
        last = (SQ - 1 if r1 // SQ > r0 // SQ else r1 - r1 // SQ * SQ) if packed == 1 else r1
        # keys a row sees: all, or (causal) up to its diagonal aligned bottom-right
        kend = min(max(s + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
        kend_hi = min(max(last + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
        kend_lo = min(max(first + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV   # the block's first row's
        # and (sliding window) from i - WIN + 1 on; the block's first row starts first
        kbeg = min(max(s + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
        kbeg_lo = min(max(first + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
        brow = b * BSB + h * BSH + min(s, SQ - 1) * BSQ if MASK == 1 else 0   # this row's mask
        qrow = private(f32, D)                            # the row, pre-scaled, read once
        acc = private(f32, DV)
        w = private(f32, 8)                               # a tile's scores, then its weights
        for d in range(D):
            # (row0 + r spelled out under its guard: the launch's bounds proof narrows r there)
            qrow[d] = q[(row0 + r) * D + d] * scale if r < grp else 0.0
        for e in range(DV):
            acc[e] = 0.0
        m = -INF
        l = 0.0
        for jt in range(kbeg_lo // 8, (kend_hi + 7) // 8):
            j0 = jt * 8
            # the key rows of keys j0..j0+7; past the block's last key clamped (an in-bounds row,
            # whose score is masked below); uniform across the packet, so every load is a broadcast.
            # The max changes no value (the loop runs only when kend_hi >= 1): it states the lower
            # bound the launch's proof cannot see, for blocks with no key (causal, Sq > Skv)
            c0 = key0 + max(min(j0, kend_hi - 1), 0)
            c1 = key0 + max(min(j0 + 1, kend_hi - 1), 0)
            c2 = key0 + max(min(j0 + 2, kend_hi - 1), 0)
            c3 = key0 + max(min(j0 + 3, kend_hi - 1), 0)
            c4 = key0 + max(min(j0 + 4, kend_hi - 1), 0)
            c5 = key0 + max(min(j0 + 5, kend_hi - 1), 0)
            c6 = key0 + max(min(j0 + 6, kend_hi - 1), 0)
            c7 = key0 + max(min(j0 + 7, kend_hi - 1), 0)
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            s4 = 0.0
            s5 = 0.0
            s6 = 0.0
            s7 = 0.0
            for d in range(D):
                qd = qrow[d]
                s0 = fma(qd, k[c0 * D + d], s0)
                s1 = fma(qd, k[c1 * D + d], s1)
                s2 = fma(qd, k[c2 * D + d], s2)
                s3 = fma(qd, k[c3 * D + d], s3)
                if keys == 8:                         # one pass of eight (a constant: 512-bit registers)
                    s4 = fma(qd, k[c4 * D + d], s4)
                    s5 = fma(qd, k[c5 * D + d], s5)
                    s6 = fma(qd, k[c6 * D + d], s6)
                    s7 = fma(qd, k[c7 * D + d], s7)
            if keys == 4:                             # the second pass of four
                for d in range(D):
                    qd = qrow[d]
                    s4 = fma(qd, k[c4 * D + d], s4)
                    s5 = fma(qd, k[c5 * D + d], s5)
                    s6 = fma(qd, k[c6 * D + d], s6)
                    s7 = fma(qd, k[c7 * D + d], s7)
            # keys this row does not see score -inf: weight exactly 0
            vis0 = j0 < kend and j0 >= kbeg if CAUSAL == 2 else j0 < kend
            vis1 = j0 + 1 < kend and j0 + 1 >= kbeg if CAUSAL == 2 else j0 + 1 < kend
            vis2 = j0 + 2 < kend and j0 + 2 >= kbeg if CAUSAL == 2 else j0 + 2 < kend
            vis3 = j0 + 3 < kend and j0 + 3 >= kbeg if CAUSAL == 2 else j0 + 3 < kend
            vis4 = j0 + 4 < kend and j0 + 4 >= kbeg if CAUSAL == 2 else j0 + 4 < kend
            vis5 = j0 + 5 < kend and j0 + 5 >= kbeg if CAUSAL == 2 else j0 + 5 < kend
            vis6 = j0 + 6 < kend and j0 + 6 >= kbeg if CAUSAL == 2 else j0 + 6 < kend
            vis7 = j0 + 7 < kend and j0 + 7 >= kbeg if CAUSAL == 2 else j0 + 7 < kend
            w[0] = (s0 + bias[brow + max(min(j0, kend_hi - 1), 0)] if MASK == 1 else s0) if vis0 else -INF
            w[1] = (s1 + bias[brow + max(min(j0 + 1, kend_hi - 1), 0)] if MASK == 1 else s1) if vis1 else -INF
            w[2] = (s2 + bias[brow + max(min(j0 + 2, kend_hi - 1), 0)] if MASK == 1 else s2) if vis2 else -INF
            w[3] = (s3 + bias[brow + max(min(j0 + 3, kend_hi - 1), 0)] if MASK == 1 else s3) if vis3 else -INF
            w[4] = (s4 + bias[brow + max(min(j0 + 4, kend_hi - 1), 0)] if MASK == 1 else s4) if vis4 else -INF
            w[5] = (s5 + bias[brow + max(min(j0 + 5, kend_hi - 1), 0)] if MASK == 1 else s5) if vis5 else -INF
            w[6] = (s6 + bias[brow + max(min(j0 + 6, kend_hi - 1), 0)] if MASK == 1 else s6) if vis6 else -INF
            w[7] = (s7 + bias[brow + max(min(j0 + 7, kend_hi - 1), 0)] if MASK == 1 else s7) if vis7 else -INF
            m_new = max(m, max(max(max(w[0], w[1]), max(w[2], w[3])), max(max(w[4], w[5]), max(w[6], w[7]))))
            # a row with no finite score yet shifts by 0: exp(-inf - 0) = 0, not exp(-inf + inf)
            mz = (m_new if m_new > -INF else 0.0) if MASK == 1 or CAUSAL == 2 else m_new
            corr = exp(m - mz)
            for c in range(8):                            # a loop: one copy of exp in the code
                w[c] = exp(w[c] - mz)
            p0 = w[0]
            p1 = w[1]
            p2 = w[2]
            p3 = w[3]
            p4 = w[4]
            p5 = w[5]
            p6 = w[6]
            p7 = w[7]
            if CAUSAL == 0 or j0 < kend_lo:
                # every row of the block takes this tile (a block-uniform branch): no per-row select
                l = l * corr + (((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)))
                for e in range(DV):
                    acc[e] = fma(p7, v[c7 * DV + e], fma(p6, v[c6 * DV + e], fma(p5, v[c5 * DV + e], fma(
                        p4, v[c4 * DV + e], fma(p3, v[c3 * DV + e], fma(p2, v[c2 * DV + e], fma(
                            p1, v[c1 * DV + e], fma(p0, v[c0 * DV + e], acc[e] * corr))))))))
                m = m_new
            else:
                # the diagonal's tiles: a row whose keys end before this tile keeps its state (a
                # select, not a branch: the packet stays unmasked)
                take = j0 < kend
                l = l * corr + (((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))) if take else l
                for e in range(DV):
                    acc[e] = fma(p7, v[c7 * DV + e], fma(p6, v[c6 * DV + e], fma(p5, v[c5 * DV + e], fma(
                        p4, v[c4 * DV + e], fma(p3, v[c3 * DV + e], fma(p2, v[c2 * DV + e], fma(
                            p1, v[c1 * DV + e], fma(p0, v[c0 * DV + e], acc[e] * corr)))))))) if take else acc[e]
                m = m_new if take else m
        if r < grp:
            for e in range(DV):
                o[(row0 + r) * DV + e] = acc[e] / l if kend > 0 and (l != 0.0 if MASK == 1 or CAUSAL == 2 else True) else 0.0

    return attention


attention = _attention(BLOCK, 4, 0)     # "stream": 8 accumulators of 16 rows (16 registers of 8 lanes)
attention32 = _attention(32, 4, 0)     # "rows32": 16 vector accumulators of 8 lanes, 32 registers
attention32k8 = _attention(32, 8, 0)   # "rows32k8": 16 accumulators of 16 lanes, one pass over d
packed8 = _attention(8, 4, 1)          # "packed8": a packet of 8 rows, the heads of a KV group
packed16 = _attention(16, 4, 1)        # "packed16": 16 rows, the heads of a KV group

# form -> (kernel, threads per block, packed: 0 a tile of one head's rows, 1 of a KV group's rows, 2 one query row)
FORMS = {"stream": (attention, BLOCK, 0), "rows32": (attention32, 32, 0), "rows32k8": (attention32k8, 32, 0),
         "packed8": (packed8, 8, 1), "packed16": (packed16, 16, 1),
         "fold32": (fold32, 32, 0),      # attention_fold.py: the value fold as a matrix product
         "keys32": (keys32, 32, 2)}      # attention_keys.py: a block per query row, lanes across keys


def form_for(SQ: int, G: int, lanes: int, vector_bits: int, causal: bool = False) -> str:
    """The form a launch of SQ query rows and G = H / Hkv query heads per KV head runs best
    in, in packets of `lanes` on a machine whose vector registers are `vector_bits` wide
    (Target.vector_bits); `causal`: masked to the diagonal (causal or windowed). Few rows
    (decoding: SQ = 1): the packed forms fill a block with the rows of every head that reads
    one KV head, G * SQ rows instead of SQ (and read each key once for all of them); 8 rows
    when they fit a packet of 8. More than 16 rows on a 512-bit machine: the 32-row forms,
    whose 16 vector accumulators only 32 registers keep (256-bit machines have 16: they would
    spill); at 16 lanes without a causal mask, "fold32" (the value fold as a matrix product),
    with one "rows32k8" (fold32's diagonal tiles select per row, and measured slower there).
    One query row per KV head (decoding without grouped heads): "keys32", a block per row with
    lanes across keys (a packed block would hold one live row). Measured: docs/kernels.md,
    'attention's forms'. All give the same bits."""
    if G * SQ == 1:
        return "keys32"
    if SQ <= BLOCK:
        return "packed8" if lanes <= 8 and G * SQ <= 8 else "packed16"
    if vector_bits < 512:
        return "stream"
    if lanes < 16:
        return "rows32"
    return "rows32k8" if causal else "fold32"


def check(s):
    B, H, HKV, SQ, SKV, D, DV = s
    if H % HKV:
        raise ShapeError(f"attention needs H a multiple of Hkv, got H={H}, Hkv={HKV}")


def default_scale(D: int) -> float:
    """SDPA's default, 1/sqrt(D) in double rounded to float32."""
    return float(np.float32(1.0 / np.sqrt(np.float64(D))))


def launch(s, causal: bool = False, scale=None, mask_strides=None, window=None, rows: int = BLOCK,
           packed: int = 0):
    """mask_strides: (batch, head, query) strides of the bias in elements (0 where it
    broadcasts; keys contiguous), or None for no mask. window: W >= 1 (causal only).
    rows, packed: the form's query rows per block and geometry (FORMS)."""
    B, H, HKV, SQ, SKV, D, DV = s
    # packed 1: blocks of a KV head's rows; 2: a block per query row (rows: its threads)
    heads, tiles = (B * HKV, -(-(H // HKV) * SQ // rows)) if packed == 1 else (B * H, SQ if packed else -(-SQ // rows))
    if window is not None and not causal:
        raise ShapeError("attention: a sliding window needs causal=True (keys i - W < j <= i)")
    mode = 2 if window is not None else int(causal)
    bsb, bsh, bsq = mask_strides or (0, 0, 0)
    return Launch(heads * tiles * rows, {"D": D, "DV": DV, "CAUSAL": mode, "MASK": int(mask_strides is not None)},
                  {"scale": default_scale(D) if scale is None else float(scale),
                   "H": H, "HKV": HKV, "SQ": SQ, "SKV": SKV, "BSB": bsb, "BSH": bsh, "BSQ": bsq,
                   "WIN": int(window or 0)})


def reference(q, k, v, causal=False, scale=None, bias=None, window=None):
    """The float64 oracle: SDPA's definition, with causal masking aligned bottom-right,
    `bias` (broadcast to [B, H, Sq, Skv]) added to the scaled scores, a sliding window, and
    rows that see no key (or only -inf scores) 0."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    H, HKV, SQ, SKV, D = q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]
    kh = np.arange(H) * HKV // H
    sc = np.float64(np.float32(default_scale(D) if scale is None else scale))
    s = np.einsum("bhqd,bhkd->bhqk", q, k[:, kh]) * sc
    if bias is not None:
        s = s + np.asarray(bias, np.float64)
    if causal:
        i = np.arange(SQ)[:, None] + (SKV - SQ)
        keep = np.arange(SKV)[None, :] <= i
        if window is not None:
            keep &= np.arange(SKV)[None, :] > i - window
        s = np.where(keep, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(mx), mx, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    p = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return np.einsum("bhqk,bhkd->bhqd", p, v[:, kh])


def shapes(s):
    B, H, HKV, SQ, SKV, D, DV = s
    # bias: the mask's buffer, one unused element when there is no mask
    return {"q": (B, H, SQ, D), "k": (B, HKV, SKV, D), "v": (B, HKV, SKV, DV), "bias": (1,),
            "o": (B, H, SQ, DV)}


def _operator(name, causal, definition, **facts):
    return Operator(
        name=name, kernel=attention, dims=("B", "H", "Hkv", "Sq", "Skv", "D", "Dv"),
        buffer_shapes=shapes, output="o",
        launch=lambda s: launch(s, causal),
        make_inputs=lambda s, seed: {n: seeded_normal(seed, "attention", n, sh)
                                     for n, sh in shapes(s).items() if n not in ("o", "bias")},
        aux=("bias",),
        oracle=lambda inp: reference(inp["q"], inp["k"], inp["v"], causal),
        check=check, seed_sizes=None, rel_tol=1e-5, fast_math_ulps=32.0, definition=definition,
        choose_form=lambda s, lanes, bits: form_for(s[3], s[1] // s[2], lanes, bits, causal),
        forms=tuple((f, kern, (lambda s, rows=rows, packed=packed: launch(s, causal, rows=rows, packed=packed)))
                    for f, (kern, rows, packed) in FORMS.items() if f != "stream"), **facts)


OP = _operator("attention", False,
               "o = softmax(q k^T / sqrt(D)) v; head h reads kv head h*Hkv/H",
               tags={"llm"}, llm_sizes=((1, 32, 8, 1, 1024, 128, 128),       # decode, 8B's grouped KV heads
                                        (1, 32, 32, 256, 256, 128, 128)))    # an encoder's prompt: not causal
CAUSAL_OP = _operator("attention_causal", True,
                      "attention with key j masked for query s when j > s + Skv - Sq (bottom-right); "
                      "a row that sees no key is 0",
                      tags={"llm"}, llm_sizes=((1, 32, 8, 512, 512, 128, 128),))   # prefill

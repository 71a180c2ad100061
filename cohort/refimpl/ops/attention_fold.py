"""attention's "fold32" form: the same operator as attention.py's kernel (its docstring states
the float32 order), with the value fold run as a matrix product through shared memory.

The other forms fold a tile's values with a thread per query row: each row's acc[e] is a
private array, loaded, given its nine dependent operations (acc*corr, p0..p7) and stored once
per tile of 8 keys. Here a block of 32 query rows alternates two layouts over a chunk of
CHUNK tiles (64 keys), with a barrier between them:

- scores, a thread per query row (as rows32k8: the eight scores of a tile in one pass over
  d): the online softmax's max, correction and weights, and l; each tile's weights p and
  correction corr are written to shared memory;
- the fold, a thread per column e of the output (lanes across e): O[rows, Dv] =
  corr*O + P[rows, 8] @ V[8, Dv] tile after tile, one register block of 4 rows by 2 column
  chunks per thread at a time (16 vector accumulators with the block's two packets of 16),
  each row's p and corr broadcast from shared memory, each load of v[key, e:e+16] feeding 4
  rows' fma, the accumulators in registers for the whole chunk.

Each O[r, e] still sees acc*corr first, then fma(p0, v0[e], .) .. fma(p7, v7[e], .) per tile,
tile after tile, the same keys (past the block's last key clamped to it, with weight 0), the
same tile boundaries and the same final division: the interpreter's bits of every other form
(tests/test_attention_forms.py). The fold has three paths, chosen by block-uniform values: a
whole tile every row of the block takes (no key clamp, no select), a tile the register
block's 4 rows take (keys clamped as in the scores), and a tile the causal diagonal crosses
within the 4 rows (a row that does not take it keeps its O: a select per operation).

The output columns: thread t takes e = c * 32 + t in chunk c of ceil(Dv / 32); the last chunk
is shifted left to end at Dv - 1 (its columns shared with the chunk before computed twice,
stored once), so every v load is contiguous and in bounds; a Dv below 32 clamps e (a gather,
small heads only). Chosen at 16 lanes on 512-bit registers without a causal mask
(attention.form_for); measured in docs/kernels.md, 'attention's forms'.
"""
from ... import (
    INF,
    Buffer,
    Const,
    barrier,
    block_id,
    block_size,
    exp,
    f32,
    fma,
    i32,
    kernel,
    private,
    shared,
    thread_id,
)

CHUNK = 8     # tiles of 8 keys whose weights a fold takes from shared memory (64 keys)


def _fold(rows: int, keys: int):
    """The kernel for blocks of `rows` query rows, the scores in passes of `keys` (4 or 8) keys
    over d, and fold register blocks of 4 rows by 2 column chunks per thread."""

    @kernel(block=rows)
    def attention_fold(q: Buffer[f32], k: Buffer[f32], v: Buffer[f32], bias: Buffer[f32], o: Buffer[f32],
                       scale: f32, H: i32, HKV: i32, SQ: i32, SKV: i32, BSB: i32, BSH: i32, BSQ: i32, WIN: i32,
                       D: Const[int], DV: Const[int], CAUSAL: Const[int], MASK: Const[int]):
        # The block's geometry is attention.py's unpacked one: a block per (batch, head, tile of
        # `rows` query rows); the clamps state ranges for the bounds proof and change no value.
        t = thread_id()
        tiles = (SQ + block_size() - 1) // block_size()
        bh = block_id() // tiles
        tile = min(max(block_id() - bh * tiles, 0), tiles - 1)
        b = bh // H
        h = min(max(bh - b * H, 0), H - 1)
        r0 = tile * block_size()
        r = r0 + t                                       # the score layout's row
        s = r
        row0 = bh * SQ
        key0 = (b * HKV + h * HKV // H) * SKV
        last = min(r0 + block_size() - 1, SQ - 1)
        kend = min(max(s + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
        kend_hi = min(max(last + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
        kend_lo = min(max(r0 + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
        kbeg = min(max(s + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
        kbeg_lo = min(max(r0 + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
        brow = b * BSB + h * BSH + min(s, SQ - 1) * BSQ if MASK == 1 else 0
        qrow = private(f32, D)
        w = private(f32, 8)
        # the fold layout's state: O[row, e] of the block's rows at this thread's columns
        acc = private(f32, rows * ((DV + rows - 1) // rows))
        sp = shared(f32, CHUNK * 8 * rows)                 # p of (tile u, key c, row): [u][c][row]
        sc = shared(f32, CHUNK * rows)                     # corr of (tile u, row)
        sl = shared(f32, rows)                             # each row's l after its last tile
        sok = shared(i32, rows)                            # 1: the row's output is acc / l (else 0)
        for d in range(D):
            qrow[d] = q[(row0 + r) * D + d] * scale if r < SQ else 0.0
        nc = (DV + rows - 1) // rows                       # column chunks of `rows` columns
        for i in range(rows * ((DV + rows - 1) // rows)):
            acc[i] = 0.0
        m = -INF
        l = 0.0
        t_lo = kbeg_lo // 8
        t_hi = (kend_hi + 7) // 8
        for ch in range(t_lo, t_hi, CHUNK):
            nt = min(CHUNK, t_hi - ch)                     # tiles in this chunk
            # scores: a thread per query row, as attention.py's kernel
            for u in range(nt):
                j0 = (ch + u) * 8
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
                    if keys == 8:
                        s4 = fma(qd, k[c4 * D + d], s4)
                        s5 = fma(qd, k[c5 * D + d], s5)
                        s6 = fma(qd, k[c6 * D + d], s6)
                        s7 = fma(qd, k[c7 * D + d], s7)
                if keys == 4:
                    for d in range(D):
                        qd = qrow[d]
                        s4 = fma(qd, k[c4 * D + d], s4)
                        s5 = fma(qd, k[c5 * D + d], s5)
                        s6 = fma(qd, k[c6 * D + d], s6)
                        s7 = fma(qd, k[c7 * D + d], s7)
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
                mz = (m_new if m_new > -INF else 0.0) if MASK == 1 or CAUSAL == 2 else m_new
                corr = exp(m - mz)
                for c in range(8):
                    w[c] = exp(w[c] - mz)
                    sp[(u * 8 + c) * rows + t] = w[c]
                sc[u * rows + t] = corr
                # a row whose keys end before this tile (the causal diagonal) keeps its state
                take = j0 < kend
                l = l * corr + (((w[0] + w[1]) + (w[2] + w[3])) + ((w[4] + w[5]) + (w[6] + w[7]))) if take else l
                m = m_new if take else m
            barrier()
            # the fold: a thread per column, 4 rows x 2 column chunks in registers (the packets of a
            # block run side by side: 16 vector accumulators with two packets)
            for rb in range(rows // 4):
                rg = rb * 4        # (not range(0, rows, 4): the bounds proof takes a stepped loop to stop - 1)
                # the 4 rows' kend, as the scores' (nondecreasing in the row)
                k0 = min(max(r0 + rg + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
                k1 = min(max(r0 + rg + 1 + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
                k2 = min(max(r0 + rg + 2 + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
                k3 = min(max(r0 + rg + 3 + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
                for cb in range((nc + 1) // 2):
                    cp = cb * 2
                    cq = min(cp + 1, nc - 1)              # an odd count: the last chunk twice
                    e0 = min(cp * rows, DV - rows) + t if DV >= rows else min(t, DV - 1)
                    e1 = min(cq * rows, DV - rows) + t if DV >= rows else min(t, DV - 1)
                    x0 = acc[rg * nc + cp]
                    x1 = acc[(rg + 1) * nc + cp]
                    x2 = acc[(rg + 2) * nc + cp]
                    x3 = acc[(rg + 3) * nc + cp]
                    y0 = acc[rg * nc + cq]
                    y1 = acc[(rg + 1) * nc + cq]
                    y2 = acc[(rg + 2) * nc + cq]
                    y3 = acc[(rg + 3) * nc + cq]
                    for u in range(nt):
                        j0 = (ch + u) * 8
                        g0 = sc[u * rows + rg]
                        g1 = sc[u * rows + rg + 1]
                        g2 = sc[u * rows + rg + 2]
                        g3 = sc[u * rows + rg + 3]
                        # branches on block-uniform values only (the packet stays unmasked)
                        if j0 <= kend_lo - 8:
                            # a whole tile every row of the block takes: no key to clamp
                            x0 = x0 * g0
                            x1 = x1 * g1
                            x2 = x2 * g2
                            x3 = x3 * g3
                            y0 = y0 * g0
                            y1 = y1 * g1
                            y2 = y2 * g2
                            y3 = y3 * g3
                            for c in range(8):
                                v0 = v[(key0 + j0 + c) * DV + e0]
                                v1 = v[(key0 + j0 + c) * DV + e1]
                                p0 = sp[(u * 8 + c) * rows + rg]
                                p1 = sp[(u * 8 + c) * rows + rg + 1]
                                p2 = sp[(u * 8 + c) * rows + rg + 2]
                                p3 = sp[(u * 8 + c) * rows + rg + 3]
                                x0 = fma(p0, v0, x0)
                                x1 = fma(p1, v0, x1)
                                x2 = fma(p2, v0, x2)
                                x3 = fma(p3, v0, x3)
                                y0 = fma(p0, v1, y0)
                                y1 = fma(p1, v1, y1)
                                y2 = fma(p2, v1, y2)
                                y3 = fma(p3, v1, y3)
                        else:
                            if j0 < k0:
                                # the 4 rows take the tile (a last partial tile, or the diagonal's
                                # rows past it): its keys clamped as in the scores
                                x0 = x0 * g0
                                x1 = x1 * g1
                                x2 = x2 * g2
                                x3 = x3 * g3
                                y0 = y0 * g0
                                y1 = y1 * g1
                                y2 = y2 * g2
                                y3 = y3 * g3
                                for c in range(8):
                                    v0 = v[(key0 + max(min(j0 + c, kend_hi - 1), 0)) * DV + e0]
                                    v1 = v[(key0 + max(min(j0 + c, kend_hi - 1), 0)) * DV + e1]
                                    p0 = sp[(u * 8 + c) * rows + rg]
                                    p1 = sp[(u * 8 + c) * rows + rg + 1]
                                    p2 = sp[(u * 8 + c) * rows + rg + 2]
                                    p3 = sp[(u * 8 + c) * rows + rg + 3]
                                    x0 = fma(p0, v0, x0)
                                    x1 = fma(p1, v0, x1)
                                    x2 = fma(p2, v0, x2)
                                    x3 = fma(p3, v0, x3)
                                    y0 = fma(p0, v1, y0)
                                    y1 = fma(p1, v1, y1)
                                    y2 = fma(p2, v1, y2)
                                    y3 = fma(p3, v1, y3)
                            else:
                                if j0 < k3:
                                    # the diagonal crosses the 4 rows: a row that does not take the
                                    # tile keeps its O (a select per operation)
                                    f0 = j0 < k0
                                    f1 = j0 < k1
                                    f2 = j0 < k2
                                    f3 = j0 < k3
                                    x0 = x0 * g0 if f0 else x0
                                    x1 = x1 * g1 if f1 else x1
                                    x2 = x2 * g2 if f2 else x2
                                    x3 = x3 * g3 if f3 else x3
                                    y0 = y0 * g0 if f0 else y0
                                    y1 = y1 * g1 if f1 else y1
                                    y2 = y2 * g2 if f2 else y2
                                    y3 = y3 * g3 if f3 else y3
                                    for c in range(8):
                                        v0 = v[(key0 + max(min(j0 + c, kend_hi - 1), 0)) * DV + e0]
                                        v1 = v[(key0 + max(min(j0 + c, kend_hi - 1), 0)) * DV + e1]
                                        p0 = sp[(u * 8 + c) * rows + rg]
                                        p1 = sp[(u * 8 + c) * rows + rg + 1]
                                        p2 = sp[(u * 8 + c) * rows + rg + 2]
                                        p3 = sp[(u * 8 + c) * rows + rg + 3]
                                        x0 = fma(p0, v0, x0) if f0 else x0
                                        x1 = fma(p1, v0, x1) if f1 else x1
                                        x2 = fma(p2, v0, x2) if f2 else x2
                                        x3 = fma(p3, v0, x3) if f3 else x3
                                        y0 = fma(p0, v1, y0) if f0 else y0
                                        y1 = fma(p1, v1, y1) if f1 else y1
                                        y2 = fma(p2, v1, y2) if f2 else y2
                                        y3 = fma(p3, v1, y3) if f3 else y3
                    acc[rg * nc + cp] = x0
                    acc[(rg + 1) * nc + cp] = x1
                    acc[(rg + 2) * nc + cp] = x2
                    acc[(rg + 3) * nc + cp] = x3
                    acc[rg * nc + cq] = y0                # (an odd count: the x's chunk again, the same values)
                    acc[(rg + 1) * nc + cq] = y1
                    acc[(rg + 2) * nc + cq] = y2
                    acc[(rg + 3) * nc + cq] = y3
            barrier()                                       # the next chunk's scores overwrite sp, sc
        sl[t] = l
        sok[t] = 1 if kend > 0 and (l != 0.0 if MASK == 1 or CAUSAL == 2 else True) else 0
        barrier()
        # the output in the fold layout: row r0 + ro's columns, acc / l as the other forms
        for ro in range(rows):
            ra = r0 + ro
            if ra < SQ:
                for co in range(nc):
                    own = co * rows
                    e = min(own, DV - rows) + t if DV >= rows else t
                    if e >= own and e < DV:
                        o[(row0 + ra) * DV + e] = acc[ro * nc + co] / sl[ro] \
                            if sok[ro] == 1 else 0.0

    return attention_fold


fold32 = _fold(32, 8)    # 512-bit registers at 16 lanes: scores as rows32k8, 16 fold accumulators

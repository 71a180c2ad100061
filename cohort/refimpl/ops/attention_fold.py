"""attention's GEMM-shaped forms ("fold32", "fold16"): the same operator as attention.py's
kernel (its docstring states the float32 order), with the value fold run as a matrix product.

The other forms fold a tile's values with a thread per query row: acc[e] is a private array
(memory), loaded, given its nine dependent operations (acc*corr, p0..p7) and stored once per
tile of 8 keys. Here a block alternates two layouts over a chunk of CHUNK tiles:

- scores, a thread per query row (as the other forms): each tile's eight scores, the online
  softmax's max, correction and weights, and l; the weights p (8 per tile) and corr are
  written to shared memory;
- the fold, a thread per column e of the output (lanes across e): O[rows, Dv] =
  corr*O + P[rows, 8] @ V[8, Dv] for every tile of the chunk, one register block of REG rows
  by two columns per thread at a time, each row's p and corr broadcast from shared memory and
  each load of v[key, e:e+lanes] feeding REG rows' fma. The block's accumulators stay in
  registers for the chunk's CHUNK tiles (CHUNK * 9 operations per load and store).

Each O[r, e] still sees acc*corr first, then fma(p0, v0[e], .) .. fma(p7, v7[e], .) per tile,
tile after tile, the same keys (past the block's last key clamped to it, with weight 0), the
same tile boundaries and the same final division: the interpreter's bits of every other form
(tests/test_attention_forms.py). A row that does not take a tile of the causal diagonal keeps
its O: a select per operation there, in a block-uniform branch taken only on the diagonal.

The output columns: thread t takes e = c * block + t in chunk c of NC = ceil(Dv / block);
the last chunk is shifted left to end at Dv - 1 (its columns shared with the chunk before
computed twice, stored once), so every v load is contiguous and in bounds; a Dv below the
block clamps e (a gather, small heads only). Measured: docs/kernels.md, 'attention's forms'.
"""
from ... import INF, Buffer, Const, barrier, block_id, block_size, exp, f32, fma, i32, kernel, private, shared, \
    thread_id

CHUNK = 8     # tiles of 8 keys whose weights a fold takes from shared memory (64 keys)


def _fold(rows: int, keys: int, REG: int):
    """The kernel for blocks of `rows` query rows, the scores in passes of `keys` (4 or 8) keys
    over d, and fold register blocks of REG (4 or 8) rows by two columns per thread."""

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
        sk = shared(i32, rows)                             # each row's kend (which diagonal tiles it takes)
        sl = shared(f32, rows)                             # each row's l, then
        sok = shared(i32, rows)                            # whether it divides by l (else 0)
        for d in range(D):
            qrow[d] = q[(row0 + r) * D + d] * scale if r < SQ else 0.0
        for i in range(rows * ((DV + rows - 1) // rows)):
            acc[i] = 0.0
        sk[t] = kend
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
            # the fold: a thread per column, REG rows of one column in registers (the packets of
            # a block run side by side: REG x packets vector accumulators)
            for rb in range(rows // REG):
                rg = rb * REG                             # (a loop of step REG: its bound would be rows - 1)
                for cc in range((DV + rows - 1) // rows):
                    e0 = min(cc * rows, DV - rows) + t if DV >= rows else min(t, DV - 1)
                    a0 = (rg + 0) * ((DV + rows - 1) // rows) + cc
                    a1 = (rg + 1) * ((DV + rows - 1) // rows) + cc
                    a2 = (rg + 2) * ((DV + rows - 1) // rows) + cc
                    a3 = (rg + 3) * ((DV + rows - 1) // rows) + cc
                    a4 = (rg + REG - 4) * ((DV + rows - 1) // rows) + cc   # rows 4..7 (REG = 8)
                    a5 = (rg + REG - 3) * ((DV + rows - 1) // rows) + cc
                    a6 = (rg + REG - 2) * ((DV + rows - 1) // rows) + cc
                    a7 = (rg + REG - 1) * ((DV + rows - 1) // rows) + cc
                    x0 = acc[a0]
                    x1 = acc[a1]
                    x2 = acc[a2]
                    x3 = acc[a3]
                    x4 = acc[a4]
                    x5 = acc[a5]
                    x6 = acc[a6]
                    x7 = acc[a7]
                    for u in range(nt):
                        j0 = (ch + u) * 8
                        g0 = sc[u * rows + rg]
                        g1 = sc[u * rows + rg + 1]
                        g2 = sc[u * rows + rg + 2]
                        g3 = sc[u * rows + rg + 3]
                        g4 = sc[u * rows + rg + REG - 4]
                        g5 = sc[u * rows + rg + REG - 3]
                        g6 = sc[u * rows + rg + REG - 2]
                        g7 = sc[u * rows + rg + REG - 1]
                        if CAUSAL == 0 or j0 < kend_lo:
                            # every row of the block takes this tile (a block-uniform branch)
                            x0 = x0 * g0
                            x1 = x1 * g1
                            x2 = x2 * g2
                            x3 = x3 * g3
                            if REG == 8:
                                x4 = x4 * g4
                                x5 = x5 * g5
                                x6 = x6 * g6
                                x7 = x7 * g7
                            for c in range(8):
                                v0 = v[(key0 + max(min(j0 + c, kend_hi - 1), 0)) * DV + e0]
                                x0 = fma(sp[(u * 8 + c) * rows + rg], v0, x0)
                                x1 = fma(sp[(u * 8 + c) * rows + rg + 1], v0, x1)
                                x2 = fma(sp[(u * 8 + c) * rows + rg + 2], v0, x2)
                                x3 = fma(sp[(u * 8 + c) * rows + rg + 3], v0, x3)
                                if REG == 8:
                                    x4 = fma(sp[(u * 8 + c) * rows + rg + REG - 4], v0, x4)
                                    x5 = fma(sp[(u * 8 + c) * rows + rg + REG - 3], v0, x5)
                                    x6 = fma(sp[(u * 8 + c) * rows + rg + REG - 2], v0, x6)
                                    x7 = fma(sp[(u * 8 + c) * rows + rg + REG - 1], v0, x7)
                        else:
                            # the diagonal's tiles: a row that does not take the tile keeps its O
                            # (a select per operation: the old value is not kept alive beside it)
                            f0 = j0 < sk[rg]
                            f1 = j0 < sk[rg + 1]
                            f2 = j0 < sk[rg + 2]
                            f3 = j0 < sk[rg + 3]
                            f4 = j0 < sk[rg + REG - 4]
                            f5 = j0 < sk[rg + REG - 3]
                            f6 = j0 < sk[rg + REG - 2]
                            f7 = j0 < sk[rg + REG - 1]
                            x0 = x0 * g0 if f0 else x0
                            x1 = x1 * g1 if f1 else x1
                            x2 = x2 * g2 if f2 else x2
                            x3 = x3 * g3 if f3 else x3
                            if REG == 8:
                                x4 = x4 * g4 if f4 else x4
                                x5 = x5 * g5 if f5 else x5
                                x6 = x6 * g6 if f6 else x6
                                x7 = x7 * g7 if f7 else x7
                            for c in range(8):
                                v0 = v[(key0 + max(min(j0 + c, kend_hi - 1), 0)) * DV + e0]
                                x0 = fma(sp[(u * 8 + c) * rows + rg], v0, x0) if f0 else x0
                                x1 = fma(sp[(u * 8 + c) * rows + rg + 1], v0, x1) if f1 else x1
                                x2 = fma(sp[(u * 8 + c) * rows + rg + 2], v0, x2) if f2 else x2
                                x3 = fma(sp[(u * 8 + c) * rows + rg + 3], v0, x3) if f3 else x3
                                if REG == 8:
                                    x4 = fma(sp[(u * 8 + c) * rows + rg + REG - 4], v0, x4) if f4 else x4
                                    x5 = fma(sp[(u * 8 + c) * rows + rg + REG - 3], v0, x5) if f5 else x5
                                    x6 = fma(sp[(u * 8 + c) * rows + rg + REG - 2], v0, x6) if f6 else x6
                                    x7 = fma(sp[(u * 8 + c) * rows + rg + REG - 1], v0, x7) if f7 else x7
                    acc[a0] = x0
                    acc[a1] = x1
                    acc[a2] = x2
                    acc[a3] = x3
                    if REG == 8:
                        acc[a4] = x4
                        acc[a5] = x5
                        acc[a6] = x6
                        acc[a7] = x7
            barrier()                                       # the next chunk's scores overwrite sp, sc
        sl[t] = l
        sok[t] = 1 if kend > 0 and (l != 0.0 if MASK == 1 or CAUSAL == 2 else True) else 0
        barrier()
        # the output in the fold layout: row r0 + ro's columns, acc / l as the other forms
        for ro in range(rows):
            ra = r0 + ro
            if ra < SQ:
                for co in range((DV + rows - 1) // rows):
                    own = co * rows
                    e = min(own, DV - rows) + t if DV >= rows else t
                    if e >= own and e < DV:
                        o[(row0 + ra) * DV + e] = acc[ro * ((DV + rows - 1) // rows) + co] / sl[ro] \
                            if sok[ro] == 1 else 0.0

    return attention_fold


fold32 = _fold(32, 8, 8)    # 512-bit registers: scores as rows32k8, folds of 8 rows x 2 columns (16 accumulators)
fold16 = _fold(16, 4, 4)    # 16 registers: scores as stream, folds of 4 rows x 2 columns (8 accumulators)

"""attention's "keys32" form: the same operator as attention.py's kernel (its docstring states
the float32 order), for a query row whose block would otherwise hold one live lane.

Decoding with as many KV heads as query heads gives each KV head one query row: the packed
forms then run a block of 16 rows with 15 lanes idle, each key's dot product and value fold
in one lane. Here a block of KB threads serves one query row, and the lanes share the work
across keys, in chunks of CT tiles (8 keys a tile, as everywhere):

- the chunk's key rows copied to shared memory, lanes along d (front to back through k);
- scores, lanes across keys: each thread computes the dot products of 2 keys
  j = j0 + i * KB + t (i < 2), each one fma chain over d ascending, the keys' rows gathered
  from the shared copy; each key's score (masked to -inf outside the row's keys) goes to
  shared memory;
- the online softmax's running max, tile after tile, by every thread alike (block-uniform
  values, no exp); thread 0 writes each tile's shift mz and the max before it;
- the weights p = exp(w - mz) of each thread's own keys, and a tile's correction
  exp(m - mz) by the thread of the tile's number (lanes across keys and tiles);
- l, tile after tile, block-uniform as the max; the value fold with lanes across the
  output's columns (e = c * KB + t), acc*corr first, then fma(p0, v0[e], .) .. fma(p7, ...).

Every score, max, shift, exp, sum and fold is the operation the other forms run on the same
operands, in the same order per output element, over the same tiles (a single row's own:
from kbeg // 8 to its last key), so the outputs are the interpreter's bits of every form
(tests/test_attention_forms.py). The output's last column chunk is shifted left to end at
Dv - 1 (columns shared with the chunk before computed twice, stored once); a Dv below KB
clamps e. Chosen for one query row per KV head (attention.form_for); measured in
docs/kernels.md, 'attention's forms'.
"""
from ... import INF, Buffer, Const, barrier, block_id, exp, f32, fma, i32, kernel, private, shared, thread_id

KB = 32     # threads per block, one query row
CT = 8      # tiles of 8 keys per chunk: 64 keys, 2 per thread (CT * 8 == 2 * KB)


@kernel(block=KB)
def keys32(q: Buffer[f32], k: Buffer[f32], v: Buffer[f32], bias: Buffer[f32], o: Buffer[f32],
           scale: f32, H: i32, HKV: i32, SQ: i32, SKV: i32, BSB: i32, BSH: i32, BSQ: i32, WIN: i32,
           D: Const[int], DV: Const[int], CAUSAL: Const[int], MASK: Const[int]):
    # a block per (batch, head, query row); the clamps state ranges for the bounds proof
    t = thread_id()
    bh = block_id() // SQ
    s = min(max(block_id() - bh * SQ, 0), SQ - 1)
    b = bh // H
    h = min(max(bh - b * H, 0), H - 1)
    row = bh * SQ + s                                   # q's and o's row
    key0 = (b * HKV + h * HKV // H) * SKV
    kend = min(max(s + SKV - SQ + 1, 0), SKV) if CAUSAL >= 1 else SKV
    kbeg = min(max(s + SKV - SQ - WIN + 1, 0), SKV) if CAUSAL == 2 else 0
    brow = b * BSB + h * BSH + s * BSQ if MASK == 1 else 0
    nc = (DV + KB - 1) // KB                            # output column chunks per thread
    acc = private(f32, (DV + KB - 1) // KB)
    sw = shared(f32, CT * 8)                            # the chunk's scores, then its weights
    sk = shared(f32, CT * 8 * D)                        # the chunk's key rows
    smz = shared(f32, CT)                               # each tile's shift
    smp = shared(f32, CT)                               # the running max before each tile
    scr = shared(f32, CT)                               # each tile's correction
    for e0 in range(nc):
        acc[e0] = 0.0
    m = -INF
    l = 0.0
    t_lo = kbeg // 8
    t_hi = (kend + 7) // 8
    for ch in range(t_lo, t_hi, CT):
        nt = min(CT, t_hi - ch)                         # tiles in this chunk
        j0 = ch * 8
        # the chunk's key rows, copied row by row with lanes along d (past the row's last key
        # clamped to it: an in-bounds row, its score masked below, as the other forms clamp).
        # The scores gathered from k itself touched a line of every key row of the chunk per d;
        # this copy of 64 rows stays in the L1 cache (docs/kernels.md, 'attention's forms')
        for x in range(CT * 8):
            krow = (key0 + max(min(j0 + x, kend - 1), 0)) * D
            for cd in range((D + KB - 1) // KB):
                if t < D - cd * KB:                     # (t spelled out: the packet's loads stay contiguous)
                    sk[x * D + cd * KB + t] = k[krow + cd * KB + t]
        barrier()
        # scores: thread t takes keys j0 + i * KB + t, each one fma chain over d
        s0 = 0.0
        s1 = 0.0
        for d in range(D):
            qd = q[row * D + d] * scale                 # the row's scaled element, as qrow[d]
            s0 = fma(qd, sk[t * D + d], s0)
            s1 = fma(qd, sk[(KB + t) * D + d], s1)
        # each key's score, -inf where the row does not see the key (weight exactly 0)
        ja = j0 + t
        vis = ja < kend and ja >= kbeg if CAUSAL == 2 else ja < kend
        sw[t] = (s0 + bias[brow + max(min(ja, kend - 1), 0)] if MASK == 1 else s0) if vis else -INF
        ja = j0 + KB + t
        vis = ja < kend and ja >= kbeg if CAUSAL == 2 else ja < kend
        sw[KB + t] = (s1 + bias[brow + max(min(ja, kend - 1), 0)] if MASK == 1 else s1) if vis else -INF
        barrier()
        # the running max, tile after tile (every thread alike); thread 0 records it
        for u in range(nt):
            m_new = max(m, max(max(max(sw[u * 8], sw[u * 8 + 1]), max(sw[u * 8 + 2], sw[u * 8 + 3])),
                               max(max(sw[u * 8 + 4], sw[u * 8 + 5]), max(sw[u * 8 + 6], sw[u * 8 + 7]))))
            # a row with no finite score yet shifts by 0: exp(-inf - 0) = 0, not exp(-inf + inf)
            mz = (m_new if m_new > -INF else 0.0) if MASK == 1 or CAUSAL == 2 else m_new
            if t == 0:
                smp[u] = m
                smz[u] = mz
            m = m_new
        barrier()
        # the weights of this thread's keys, and the correction of tile t
        for i in range(2):
            xw = i * KB + t                             # (not x: the copy's x stays uniform)
            sw[xw] = exp(sw[xw] - smz[max(min(xw // 8, nt - 1), 0)])     # (tiles past nt: never read)
        if t < nt:
            scr[t] = exp(smp[t] - smz[t])
        barrier()
        # l (every thread alike) and the value fold, lanes across the output's columns
        for u in range(nt):
            p0 = sw[u * 8]
            p1 = sw[u * 8 + 1]
            p2 = sw[u * 8 + 2]
            p3 = sw[u * 8 + 3]
            p4 = sw[u * 8 + 4]
            p5 = sw[u * 8 + 5]
            p6 = sw[u * 8 + 6]
            p7 = sw[u * 8 + 7]
            corr = scr[u]
            l = l * corr + (((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)))
            ju = j0 + u * 8
            v0 = (key0 + max(min(ju, kend - 1), 0)) * DV
            v1 = (key0 + max(min(ju + 1, kend - 1), 0)) * DV
            v2 = (key0 + max(min(ju + 2, kend - 1), 0)) * DV
            v3 = (key0 + max(min(ju + 3, kend - 1), 0)) * DV
            v4 = (key0 + max(min(ju + 4, kend - 1), 0)) * DV
            v5 = (key0 + max(min(ju + 5, kend - 1), 0)) * DV
            v6 = (key0 + max(min(ju + 6, kend - 1), 0)) * DV
            v7 = (key0 + max(min(ju + 7, kend - 1), 0)) * DV
            for ec in range(nc):
                e = min(ec * KB, DV - KB) + t if DV >= KB else min(t, DV - 1)
                acc[ec] = fma(p7, v[v7 + e], fma(p6, v[v6 + e], fma(p5, v[v5 + e], fma(p4, v[v4 + e], fma(
                    p3, v[v3 + e], fma(p2, v[v2 + e], fma(p1, v[v1 + e], fma(p0, v[v0 + e], acc[ec] * corr))))))))
        barrier()                                       # the next chunk's scores overwrite sw
    for ec1 in range(nc):
        e1 = min(ec1 * KB, DV - KB) + t if DV >= KB else min(t, DV - 1)
        own = e1 >= ec1 * KB if DV >= KB else t < DV    # a column the chunk before did not store
        if own:
            o[row * DV + e1] = acc[ec1] / l if kend > 0 and (l != 0.0 if MASK == 1 or CAUSAL == 2 else True) else 0.0

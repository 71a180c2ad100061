"""matmul: c = a @ b for float32 a [M, K] and b [K, N], as torch.matmul.

The definition (DESIGN §4): c[i, j] is one fma chain over k in ascending order,
starting from +0.0 - acc = fma(a[i, k], b[k, j], acc) for k = 0, 1, ..., K-1.
The tile sizes below are the schedule, not the definition: any tiling that
keeps each chain in ascending k gives the same bits.

The schedule is a CPU GEMM in GPU form, written once (`_tiled`) and built for
three register shapes: blocks of BN = 16 columns with register blocks of 6 rows
("tiled": 12 accumulators of 8 lanes), of 32 columns with 8 rows ("tiled32": 16
accumulators of 16 lanes) and of 64 columns with 6 rows ("tiled64": 24 accumulators of 16
lanes), the last two for 512-bit registers at lanes=16; `tiled_form` chooses by the
target's vector width, the packet's lanes and b's width. A block owns a tile of up to
ROWS rows (M split evenly into tiles) by PANELS panels of BN columns (one column per thread
in each panel; COLS columns, twice that in tiled64 where a has TALL rows or more).
For each step of kt along k it stages b's kt x (PANELS x BN) slab in shared
memory once (the packing of a GEMM: b is read with stride N, row by row; the
shared copy holds each panel's kt x BN rows contiguously; kt = KT with every
panel in use and more when b has fewer columns, the slab's size fixed), then
runs, panel by panel (a panel stays in the L1 cache), every register block:
REG accumulators per thread, REG rows x BN columns, enough independent fma
chains to cover the latency of two FMA units, a's rows read in place as
broadcasts. The first step starts the sums from +0.0, the steps between keep
them in a private array; where K fits one step the sums go to c from registers, else
in tiled64 the last step leaves them in the private array too and a last pass stores them row by
row, each row's columns front to back (tiled32 and tiled store from registers). The k loops
stop at K (no padding in k); the last row tile computes its rows rounded up to
a register block (rows past M a copy of the last row, never stored); the last
panel of columns is shifted left to end at column N - 1 when N >= BN (its
columns shared with the panel before are stored by that panel: the same fma
chains, the same bits), and a b narrower than BN reads zeros past N. The
"wide" forms (matrix-vector products and small batches: one row or groups of four per block)
are below. Measured: docs/README.md,
'matmul at the FMA limit'.
"""
import numpy as np

from ... import Buffer, Const, barrier, block_id, f32, fma, kernel, private, shared, thread_id
from .base import Launch, Operator, seeded_normal

# rows per register block, by block width: 6 rows x 16 columns (12 vector accumulators of 8
# lanes: with the b packets and a broadcast, 15 of AVX2's 16 registers), 8 rows x 32 columns
# (16 of 16 lanes, of AVX-512's 32 registers: 10 loads per 16 fma) and 6 rows x 64 columns
# (24 of 16 lanes and 4 b packets, 29 of 32 registers: 10 loads per 24 fma, and 6 a rows'
# addresses in general registers; 8 rows would spill)
REGS = {16: 6, 32: 8, 64: 6}
ROWS = 192   # rows per block: one staged slab of b serves 32 register blocks per panel
KT = 128     # k per staged step with every panel in use (fewer panels: more k, the same slab)
COLS = 256   # columns per block: PANELS = COLS // BN panels; the slab is KT x COLS floats (128 KiB)
# tiled64's blocks take twice the columns (a 256 KiB slab) where a has at least TALL rows: a is
# then read from memory half as often (N / 512 times), and its rows serve 8 panels from the L2
# cache (2048^3 +12%, 4096x1024x1024 +8%, 512^3 +4%; fewer rows lose: 32x4096x11008 -7%,
# 200x300x500 -5%: docs/README.md, 'matmul at the FMA limit')
TALL = 512
WIDENS = {16: 0, 32: 0, 64: 1}
# tiled64 stores its sums in a last pass where K spans several steps (see the kernel); paired,
# tiled32 and tiled measured 1.00-1.01 and 0.98-1.00 that way, so they store from registers
PASSES = {16: 0, 32: 0, 64: 1}


def panels_of(m: int, bn: int) -> int:
    """Panels of bn columns in a block of the tiled form for m rows (the kernel's PANELS)."""
    return COLS // bn * (1 + WIDENS[bn] * min(1, m // TALL))


def _tiled(BN: int, REG: int):
    """The tiled matmul for blocks of BN threads (BN columns per panel) and register blocks of
    REG rows (6 or 8)."""
    WIDEN = WIDENS[BN]
    PASS = PASSES[BN]

    @kernel(block=BN)
    def matmul(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], M: Const[int], K: Const[int], N: Const[int]):
        # Every index below is written so that the launch's bounds proof (interval arithmetic,
        # DESIGN §5.1) covers it and no access is checked one by one: k runs over absolute
        # positions, the slab's row is k & (kt - 1) (k0 a multiple of kt, a power of two), rows past the edge are
        # clamped to the last one and columns past it read 0 (computed, never stored). A
        # clamped column index would be a gather: the guard keeps b's loads contiguous.
        t = thread_id()
        bid = block_id()
        # rows per block: M split evenly into as few tiles of at most ROWS rows as cover it,
        # rounded up to whole register blocks (a matrix-vector product computes one register
        # block, not 192 rows; 257 rows make two blocks of 136, not 192 and 72, so that two
        # workers share the work: docs/README.md, 'matmul at the FMA limit'); panels likewise
        rb = ((M + (M + ROWS - 1) // ROWS - 1) // ((M + ROWS - 1) // ROWS) + REG - 1) // REG * REG
        PANELS = COLS // BN * (1 + WIDEN * min(1, M // TALL))     # panels_of(M, BN)
        np_ = min(PANELS, (N + BN - 1) // BN)
        tiles_m = (M + rb - 1) // rb
        bj = bid // tiles_m                   # consecutive blocks share a column slab (kept in cache)
        i0 = (bid - bj * tiles_m) * rb
        # the rows this block computes: rb, or the last tile's rows rounded up to a register block
        rows = min(rb, (M - i0 + REG - 1) // REG * REG)
        j0 = bj * np_ * BN
        # the panels holding a column below N; the last one is shifted left to end at N - 1
        panels = min(np_, (N - j0 + BN - 1) // BN)
        # k per staged step: the slab holds KT x COLS floats, so fewer panels stage more k (b 32
        # columns wide: 1024 k per step in tiled32, a's rows read 4 KiB at a time): KT times
        # PANELS / panels rounded down to a power of two (f <= 16), so that a k's row in the slab
        # is k & (kt - 1). A remainder there, where K is not a multiple of kt, left LLVM a signed
        # remainder per k; the mask is one `and` (54 -> 33 instructions per k in tiled32 at
        # 1023x1021x997: docs/README.md, 'matmul at the FMA limit')
        f = PANELS // min(PANELS, (N + BN - 1) // BN)
        kt = KT * (1 + min(1, f // 2) + 2 * min(1, f // 4) + 4 * min(1, f // 8) + 8 * min(1, f // 16))
        sb = shared(f32, KT * COLS * (1 + WIDEN))
        # running sums between staged steps (zeroed by DESIGN §3; a block whose K fits one step never touches it)
        # (PANELS written out: a private array's size is an expression of constants only)
        acc = private(f32, min(ROWS, (M + REG - 1) // REG * REG)
                      * min(COLS // BN * (1 + WIDEN * min(1, M // TALL)), (N + BN - 1) // BN))
        for ks in range((K + kt - 1) // kt):
            k0 = ks * kt
            kend = min(k0 + kt, K)
            for kb in range(k0, kend):
                kr = kb & (kt - 1)     # the slab's row: kb - k0 (k0 a multiple of kt)
                for qs in range(np_):
                    if qs < panels:
                        js = max(min(j0 + qs * BN, N - BN), 0) + t
                        sb[(qs * kt + kr) * BN + t] = b[kb * N + js] if js < N else 0.0    # masked if N < BN
            barrier()
            for q in range(np_):
                if q < panels:    # constant trip counts, panels and rows past the end skipped block-uniformly
                    for r in range(0, rb, REG):
                        if r < rows:
                            # a's rows, clamped on both sides: with both bounds LLVM proves that
                            # the i32 offsets a0 + k do not wrap and steps one address per row
                            # (clamped above only, each k recomputed six sign-extended offsets:
                            # 35 instructions per k instead of 24 in the 6-row block). Rows past
                            # REG name row REG - 1 again and go unused (REG is a constant)
                            a0 = max(min(i0 + r, M - 1), 0) * K
                            a1 = max(min(i0 + r + 1, M - 1), 0) * K
                            a2 = max(min(i0 + r + 2, M - 1), 0) * K
                            a3 = max(min(i0 + r + 3, M - 1), 0) * K
                            a4 = max(min(i0 + r + 4, M - 1), 0) * K
                            a5 = max(min(i0 + r + 5, M - 1), 0) * K
                            a6 = max(min(i0 + r + min(6, REG - 1), M - 1), 0) * K
                            a7 = max(min(i0 + r + min(7, REG - 1), M - 1), 0) * K
                            s = q * rb + r
                            # the first step starts every chain from +0.0, later steps from the running
                            # sums (block-uniform branches: no load of acc when K fits one step)
                            c0 = 0.0
                            c1 = 0.0
                            c2 = 0.0
                            c3 = 0.0
                            c4 = 0.0
                            c5 = 0.0
                            c6 = 0.0
                            c7 = 0.0
                            if k0 > 0:
                                c0 = acc[s]
                                c1 = acc[s + 1]
                                c2 = acc[s + 2]
                                c3 = acc[s + 3]
                                c4 = acc[s + 4]
                                c5 = acc[s + 5]
                                c6 = acc[s + min(6, REG - 1)]
                                c7 = acc[s + min(7, REG - 1)]
                            for k in range(k0, kend):
                                bk = sb[(q * kt + (k & (kt - 1))) * BN + t]
                                c0 = fma(a[a0 + k], bk, c0)
                                c1 = fma(a[a1 + k], bk, c1)
                                c2 = fma(a[a2 + k], bk, c2)
                                c3 = fma(a[a3 + k], bk, c3)
                                c4 = fma(a[a4 + k], bk, c4)
                                c5 = fma(a[a5 + k], bk, c5)
                                if REG == 8:       # a constant: rows 6 and 7
                                    c6 = fma(a[a6 + k], bk, c6)
                                    c7 = fma(a[a7 + k], bk, c7)
                            if kend < K or K * PASS > kt:
                                acc[s] = c0
                                acc[s + 1] = c1
                                acc[s + 2] = c2
                                acc[s + 3] = c3
                                acc[s + 4] = c4
                                acc[s + 5] = c5
                                if REG == 8:
                                    acc[s + 6] = c6
                                    acc[s + 7] = c7
                            else:
                                # K fits one step (or not tiled64): the sums go to c from
                                # registers, no pass over acc follows (measured: docs/README.md,
                                # 'matmul at the FMA limit'). Rows past M and columns another
                                # panel owns are not stored.
                                own = j0 + q * BN
                                j = max(min(own, N - BN), 0) + t
                                # one variable per row: the bounds proof narrows a variable by a
                                # guard `v < e`, not an expression (bounds.py)
                                w0 = i0 + r
                                w1 = w0 + 1
                                w2 = w0 + 2
                                w3 = w0 + 3
                                w4 = w0 + 4
                                w5 = w0 + 5
                                w6 = w0 + 6
                                w7 = w0 + 7
                                if w0 < M and j < N and j >= own:
                                    c[w0 * N + j] = c0
                                if w1 < M and j < N and j >= own:
                                    c[w1 * N + j] = c1
                                if w2 < M and j < N and j >= own:
                                    c[w2 * N + j] = c2
                                if w3 < M and j < N and j >= own:
                                    c[w3 * N + j] = c3
                                if w4 < M and j < N and j >= own:
                                    c[w4 * N + j] = c4
                                if w5 < M and j < N and j >= own:
                                    c[w5 * N + j] = c5
                                if REG == 8:
                                    if w6 < M and j < N and j >= own:
                                        c[w6 * N + j] = c6
                                    if w7 < M and j < N and j >= own:
                                        c[w7 * N + j] = c7
            barrier()
        if K * PASS > kt:
            # tiled64, K over several steps: the sums stored from acc row by row, each row's
            # columns of the block front to back (storing from registers at the end of each register
            # block wrote six rows' lines of c, not in any cache, at once; where b's rows are
            # not whole lines each vector store touched two: 1023x1021x997 1.05-1.19 faster
            # this way, the other shapes within 2-4% either way: docs/README.md, 'matmul at
            # the FMA limit'). The same rule as above for rows past M and shared columns.
            for rr in range(rb):
                w = i0 + rr
                if rr < rows:
                    for q2 in range(np_):
                        if q2 < panels:
                            own2 = j0 + q2 * BN
                            j2 = max(min(own2, N - BN), 0) + t
                            if w < M and j2 < N and j2 >= own2:
                                c[w * N + j2] = acc[q2 * rb + rr]
    return matmul


matmul = _tiled(16, REGS[16])      # 8-lane registers (AVX2, and the 8-lane packet on any machine)
matmul32 = _tiled(32, REGS[32])    # 16-lane registers (AVX-512): two packets of 16 side by side
matmul64 = _tiled(64, REGS[64])    # 16-lane registers: four packets of 16 side by side


# the wide forms: columns per thread. A block's row panel is 2048 columns wide, so that a
# 4096-wide b makes two blocks for two workers (1x4096x4096 at two threads: 0.56 of torch's rate
# with one 4096-column block, 1.00 with two; one thread 1.09 and 0.98: docs/README.md)
WIDE = 128
BW = 16      # the wide form's block: threads side by side in one row
PANEL = BW * WIDE


def _wide(R: int):
    """The wide form for row groups of R rows (1 or 4): a block per group and panel."""

    @kernel(block=BW)
    def matmul_wide(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], M: Const[int], K: Const[int], N: Const[int]):
        # For a few rows (a matrix-vector product, decoding a small batch) of a wide b
        # (N >= PANEL): a group of R rows per block and a panel of PANEL columns, so that each
        # k reads 8 KiB of b's row k front to back (the tiled form's 16-column panels read 64
        # bytes of every row: a page each at N = 4096; docs/README.md, 'Measurements behind the
        # code'), once for the group's rows. The last panel is shifted left to end at column
        # N - 1, so no load needs a mask; the columns it shares with its neighbour are stored
        # by the neighbour (the same bits: the same fma chains in the same order); a last group
        # past M repeats row M - 1 (computed, never stored). With N < PANEL the panel would
        # start before column 0: the launch's bounds proof fails and the checked build reports
        # the load (form_for never picks this form then).
        t = thread_id()
        bid = block_id()
        tiles_n = (N + PANEL - 1) // PANEL
        g = bid // tiles_n
        own = (bid - g * tiles_n) * PANEL          # the first column this block stores
        j0 = min(own, N - PANEL)
        acc = private(f32, R * WIDE)
        ak = private(f32, 4 * R)                   # the group's a[i, k..k+3], in registers
        for q0 in range(R * WIDE):
            acc[q0] = 0.0
        # four k per pass over the sums: a quarter of the private array's loads and stores, and
        # four rows of b streamed side by side (each sum still one chain in ascending k)
        for k in range(0, K - 3, 4):
            for r in range(R):
                ar = min(g * R + r, M - 1) * K + k
                ak[4 * r] = a[ar]
                ak[4 * r + 1] = a[ar + 1]
                ak[4 * r + 2] = a[ar + 2]
                ak[4 * r + 3] = a[ar + 3]
            for q in range(WIDE):
                j = j0 + q * BW + t
                b0 = b[k * N + j]
                b1 = b[(k + 1) * N + j]
                b2 = b[(k + 2) * N + j]
                b3 = b[(k + 3) * N + j]
                for r1 in range(R):
                    s = fma(ak[4 * r1 + 1], b1, fma(ak[4 * r1], b0, acc[r1 * WIDE + q]))
                    acc[r1 * WIDE + q] = fma(ak[4 * r1 + 3], b3, fma(ak[4 * r1 + 2], b2, s))
        for k1 in range(K - K % 4, K):
            for r2 in range(R):
                ak[r2] = a[min(g * R + r2, M - 1) * K + k1]
            for q1 in range(WIDE):
                bk = b[k1 * N + j0 + q1 * BW + t]
                for r3 in range(R):
                    acc[r3 * WIDE + q1] = fma(ak[r3], bk, acc[r3 * WIDE + q1])
        for r4 in range(R):
            row = g * R + r4
            for q2 in range(WIDE):
                j = j0 + q2 * BW + t
                if row < M and j >= own:
                    c[row * N + j] = acc[r4 * WIDE + q2]

    return matmul_wide


matmul_wide = _wide(1)
matmul_wide4 = _wide(4)     # up to four rows: b streamed once for all of them


def tiled_form(lanes: int, vector_bits: int, n: int = 0) -> str:
    """The tiled form for packets of `lanes` on a machine whose vector registers are
    `vector_bits` wide (the backend's Target.vector_bits), for b `n` columns wide (0: any).
    Where a packet fills a 16-float register (512-bit registers at lanes=16): "tiled64"
    (blocks of 64 columns, 6-row register blocks: 24 accumulators, 10 loads per 24 fma),
    unless it would compute more columns than "tiled32" (32 columns, 8 rows: 16
    accumulators, 10 loads per 16 fma), that is unless n mod 64 lies in 1..32 (b 96 columns
    wide: 128 columns computed against 96; 129 wide: 192 against 160). Else "tiled" (16 columns, 6 rows: 12
    accumulators of 8 lanes; at 8 lanes the wider forms' accumulators would spill).
    Measured: docs/README.md, 'matmul at the FMA limit'."""
    if vector_bits < 512 or lanes < 16:
        return "tiled"
    return "tiled32" if 1 <= n % 64 <= 32 else "tiled64"


WIDE_ROWS = 8   # at most this many rows run a wide form (wide4 streams b once per group of 4)


def form_for(shape, lanes: int, vector_bits: int) -> str:
    """The form a launch of `shape` runs best in, in packets of `lanes` with vector registers
    of `vector_bits`: for at most WIDE_ROWS rows of a b at least PANEL columns wide, "wide"
    (one row) or "wide4" (groups of four rows), else tiled_form (streams b once for up to ROWS
    rows). Measured with benchmarks/bench_coop.py, rate / torch.matmul's at one thread on the
    512-bit VM, 16 and 8 lanes (docs/README.md, 'matmul at the FMA limit'): at 4x4096x4096
    wide4 1.47 and 1.52 against the tiled form's 0.59 and 0.87 and wide's 0.56 and 0.96; at
    8x4096x4096 wide4 1.55 and 1.12 against tiled 1.37 and 1.00; at 16 rows tiled 1.20
    against wide4's 0.97; one row: wide 0.96 against wide4's 0.70 (three rows computed for
    nothing). All give the same bits."""
    if shape[0] <= WIDE_ROWS and shape[2] >= PANEL:
        return "wide" if shape[0] == 1 else "wide4"
    return tiled_form(lanes, vector_bits, shape[2])


def wide_launch(R: int):
    return lambda s: Launch(-(-s[0] // R) * ((s[2] + PANEL - 1) // PANEL) * BW, {"M": s[0], "K": s[1], "N": s[2]}, {})


def row_tile(m: int, reg: int) -> int:
    """Rows per block of the tiled forms (the kernel computes the same): m split evenly into
    ceil(m / ROWS) tiles, rounded up to whole register blocks of reg rows."""
    tiles = (m + ROWS - 1) // ROWS
    return ((m + tiles - 1) // tiles + reg - 1) // reg * reg


def blocks(s, bn: int = 16) -> int:
    """Blocks of the tiled form with bn columns per panel (the kernel's geometry)."""
    m, _, n = s
    reg = REGS[bn]
    rb = row_tile(m, reg)
    cols = min(panels_of(m, bn), (n + bn - 1) // bn) * bn
    return ((m + rb - 1) // rb) * ((n + cols - 1) // cols)


def tiled_launch(bn: int):
    return lambda s: Launch(blocks(s, bn) * bn, {"M": s[0], "K": s[1], "N": s[2]}, {})


def oracle(inp):
    return inp["a"].astype(np.float64) @ inp["b"].astype(np.float64)


OP = Operator(
    name="matmul", kernel=matmul, dims=("M", "K", "N"),
    buffer_shapes=lambda s: {"a": (s[0], s[1]), "b": (s[1], s[2]), "c": (s[0], s[2])},
    output="c",
    launch=tiled_launch(16),
    make_inputs=lambda s, seed: {"a": seeded_normal(seed, "matmul", "a", (s[0], s[1])),
                                 "b": seeded_normal(seed, "matmul", "b", (s[1], s[2]))},
    oracle=oracle,
    seed_sizes=None,
    # one fma chain of K terms: |error| <= K u sum_k |a b| in the worst case; on these
    # inputs the error grows like sqrt(K) u relative to the row's largest |c|: measured
    # 3.2-3.9e-6 at K = 4096 and 11008, 0.6-1.6e-5 at K = 65536 (three seeds each)
    rel_tol=3e-5,
    tags={"cooperative"},
    definition="c[i,j] = fma chain over k = 0..K-1 ascending, from +0.0",
    form="tiled",
    choose_form=form_for,
    forms=(("tiled32", matmul32, tiled_launch(32)), ("tiled64", matmul64, tiled_launch(64)),
           ("wide", matmul_wide, wide_launch(1)),
           ("wide4", matmul_wide4, wide_launch(4))),
)

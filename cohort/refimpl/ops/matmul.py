"""matmul: c = a @ b for float32 a [M, K] and b [K, N], as torch.matmul.

The definition (DESIGN §4): c[i, j] is one fma chain over k in ascending order,
starting from +0.0 - acc = fma(a[i, k], b[k, j], acc) for k = 0, 1, ..., K-1.
The tile sizes below are the schedule, not the definition: any tiling that
keeps each chain in ascending k gives the same bits.

The schedule is a CPU GEMM micro-kernel in GPU form. A block owns a tile of up
to ROWS rows by BN columns (one column per thread). For each step of KT along k
it stages b's KT x BN panel in shared memory (the packing of a GEMM: b is read
with stride N, the shared copy is contiguous; a's rows are read in place, each
a contiguous stream of broadcasts), then each thread runs REG rows at a time
with REG accumulators in registers - a register block of REG rows x one packet
of columns - and keeps its running sums in a private array between steps.
The k loops stop at K (no padding in k); the last row tile computes its rows
rounded up to a register block, rows past M a copy of the last row, columns
past N read zeros, and neither is stored. The "wide" form
(matrix-vector products) is below.
"""
import numpy as np

from ... import Buffer, Const, barrier, block_id, f32, fma, kernel, private, shared, thread_id
from .base import Launch, Operator, seeded_normal

BN = 16      # columns per block: one per thread (two packets of 8 lanes, one of 16)
REG = 6      # rows per register block: 6 rows x 16 columns = 12 vector accumulators
ROWS = 48    # rows per block: the staged panel of b serves 8 register blocks
KT = 128     # k per staged step: the panel is KT x BN floats (8 KiB)


@kernel(block=BN)
def matmul(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], M: Const[int], K: Const[int], N: Const[int]):
    # Every index below is written so that the launch's bounds proof (interval arithmetic,
    # DESIGN §5.1) covers it and no access is checked one by one: k runs over absolute
    # positions, the panel's row is k % KT (k0 is a multiple of KT), rows past the edge are
    # clamped to the last one and columns past it read 0 (computed, never stored). A
    # clamped column index would be a gather: the guard keeps b's loads contiguous.
    t = thread_id()
    bid = block_id()
    # rows per block: ROWS, or M rounded up to whole register blocks when M is smaller
    # (a matrix-vector product computes 6 rows, not 48)
    rb = min(ROWS, (M + REG - 1) // REG * REG)
    tiles_m = (M + rb - 1) // rb
    bj = bid // tiles_m                   # consecutive blocks share a column panel (kept in cache)
    i0 = (bid - bj * tiles_m) * rb
    # the rows this block computes: rb, or the last tile's rows rounded up to a register block
    # (M = 64 computed 96 rows with rb for every tile); register blocks past them are skipped
    rows = min(rb, (M - i0 + REG - 1) // REG * REG)
    j = bj * BN + t
    sb = shared(f32, KT * BN)
    acc = private(f32, min(ROWS, (M + REG - 1) // REG * REG))
    for r0 in range(rb):
        acc[r0] = 0.0
    for k0 in range(0, K, KT):
        kend = min(k0 + KT, K)
        for kb in range(k0, kend):
            sb[(kb % KT) * BN + t] = b[kb * N + j] if j < N else 0.0    # a masked vector load
        barrier()
        for r in range(0, rb, REG):
            if r < rows:          # a constant trip count, rows past the end skipped block-uniformly
                a0 = min(i0 + r, M - 1) * K
                a1 = min(i0 + r + 1, M - 1) * K
                a2 = min(i0 + r + 2, M - 1) * K
                a3 = min(i0 + r + 3, M - 1) * K
                a4 = min(i0 + r + 4, M - 1) * K
                a5 = min(i0 + r + 5, M - 1) * K
                c0 = acc[r]
                c1 = acc[r + 1]
                c2 = acc[r + 2]
                c3 = acc[r + 3]
                c4 = acc[r + 4]
                c5 = acc[r + 5]
                for k in range(k0, kend):
                    bk = sb[(k % KT) * BN + t]
                    c0 = fma(a[a0 + k], bk, c0)
                    c1 = fma(a[a1 + k], bk, c1)
                    c2 = fma(a[a2 + k], bk, c2)
                    c3 = fma(a[a3 + k], bk, c3)
                    c4 = fma(a[a4 + k], bk, c4)
                    c5 = fma(a[a5 + k], bk, c5)
                acc[r] = c0
                acc[r + 1] = c1
                acc[r + 2] = c2
                acc[r + 3] = c3
                acc[r + 4] = c4
                acc[r + 5] = c5
        barrier()
    for ro in range(rb):
        row = i0 + ro
        if row < M and j < N:
            c[row * N + j] = acc[ro]


WIDE = 256   # the "wide" form: columns per thread (a block's row panel is 4096 columns wide)
PANEL = BN * WIDE


@kernel(block=BN)
def matmul_wide(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], M: Const[int], K: Const[int], N: Const[int]):
    # For a few rows (a matrix-vector product, decoding) of a wide b (N >= PANEL): one row
    # per block and a panel of PANEL columns, so that each k reads 16 KiB of b's row k front
    # to back (the tiled form's 16-column panels read 64 bytes of every row: a page each at
    # N = 4096; docs/README.md, 'Measurements behind the code'). The last panel is shifted left to end at column N - 1,
    # so no load needs a mask; the columns it shares with its neighbour are stored by the
    # neighbour (the same bits: the same fma chains in the same order). With N < PANEL the
    # panel would start before column 0: the launch's bounds proof fails and the checked
    # build reports the load (form_for never picks this form then).
    t = thread_id()
    bid = block_id()
    tiles_n = (N + PANEL - 1) // PANEL
    i = bid // tiles_n
    own = (bid - i * tiles_n) * PANEL          # the first column this block stores
    j0 = min(own, N - PANEL)
    acc = private(f32, WIDE)
    for q0 in range(WIDE):
        acc[q0] = 0.0
    for k in range(K):
        ak = a[i * K + k]
        for q in range(WIDE):
            acc[q] = fma(ak, b[k * N + j0 + q * BN + t], acc[q])
    for q2 in range(WIDE):
        j = j0 + q2 * BN + t
        if j >= own:
            c[i * N + j] = acc[q2]


def form_for(shape) -> str:
    """The form a launch of `shape` runs best in: "wide" for fewer rows than a register
    block of a b at least PANEL columns wide (measured: benchmarks/bench_coop.py), else
    "tiled". Both give the same bits."""
    return "wide" if shape[0] < REG and shape[2] >= PANEL else "tiled"


def wide_launch(s):
    m, k, n = s
    return Launch(m * ((n + PANEL - 1) // PANEL) * BN, {"M": m, "K": k, "N": n}, {})


def blocks(s) -> int:
    m, _, n = s
    rb = min(ROWS, (m + REG - 1) // REG * REG)
    return ((m + rb - 1) // rb) * ((n + BN - 1) // BN)


def oracle(inp):
    return inp["a"].astype(np.float64) @ inp["b"].astype(np.float64)


OP = Operator(
    name="matmul", kernel=matmul, dims=("M", "K", "N"),
    buffer_shapes=lambda s: {"a": (s[0], s[1]), "b": (s[1], s[2]), "c": (s[0], s[2])},
    output="c",
    launch=lambda s: Launch(blocks(s) * BN, {"M": s[0], "K": s[1], "N": s[2]}, {}),
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
    forms=(("wide", matmul_wide, wide_launch),),
)

"""transpose: y[n, c, r] = x[n, r, c] for x [N, R, C], as x.transpose(-1, -2).contiguous().

Exact by construction (a copy). A block moves one TS x TS tile: its threads
read the tile's rows from x side by side (thread t: column c0 + t), stage them
in shared memory, and after a barrier write the tile's columns to y side by
side (thread t: row r0 + t). Reads and writes of memory are both contiguous
across threads; the transposition happens in the shared tile, which lives in
the core's L1. Tiles at the edges are partial: positions past R or C are
neither read nor written, and their shared slots are never stored or read.
Each thread's loop runs a block-uniform count (the tile's rows or columns)
under one per-thread `if` outside it, so no iteration computes a mask; the
column walk tile[t*TS + k] is read through in-register transposes (backend
lowering, transposed.py)."""
import numpy as np

from ... import Buffer, Const, barrier, block_id, f32, kernel, shared, thread_id
from .base import Launch, Operator, seeded_normal

TS = 32


@kernel(block=TS)
def transpose(x: Buffer[f32], y: Buffer[f32], R: Const[int], C: Const[int]):
    t = thread_id()
    bid = block_id()
    tiles_c = (C + TS - 1) // TS
    tiles = ((R + TS - 1) // TS) * ((C + TS - 1) // TS)    # per matrix (one constant)
    n = bid // tiles
    rest = bid - n * tiles
    tr = rest // tiles_c
    r0 = tr * TS
    c0 = (rest - tr * tiles_c) * TS
    tile = shared(f32, TS * TS)
    cc = c0 + t
    # min(r0 + i, R - 1) is r0 + i (i < R - r0): written so the launch's bounds proof, an
    # interval per index, sees the row stay inside x (else every access is checked)
    if cc < C:
        for i in range(min(TS, R - r0)):
            tile[i * TS + t] = x[(n * R + min(r0 + i, R - 1)) * C + cc]
    barrier()
    row = r0 + t
    if row < R:
        for k in range(min(TS, C - c0)):
            y[(n * C + min(c0 + k, C - 1)) * R + row] = tile[t * TS + k]


def oracle(inp):
    return np.swapaxes(inp["x"].astype(np.float64), 1, 2)


def blocks(s) -> int:
    n, r, c = s
    return n * ((r + TS - 1) // TS) * ((c + TS - 1) // TS)


OP = Operator(
    name="transpose", kernel=transpose, dims=("N", "R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1], s[2]), "y": (s[0], s[2], s[1])},
    output="y",
    launch=lambda s: Launch(blocks(s) * TS, {"R": s[1], "C": s[2]}, {}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "transpose", "x", s)},
    oracle=oracle,
    seed_sizes=None,
    rel_tol=0.0,
    tags={"cooperative"},
    definition="y[n, c, r] = x[n, r, c] (a copy)",
)

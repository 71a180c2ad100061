"""histogram: counts[b] = the number of i with idx[i] == b, for b in [0, BINS), as
torch.bincount(idx, minlength=BINS) on in-range indices; int32 in, int32 out.

Indices outside [0, BINS) are not counted (as torch.histc ignores values outside
its range), here and in cohort.torch's op. Counts wrap at 2^32 like every i32
in the language (at most 2^30 - 1 elements per buffer, so they never do). A
launch adds into counts: it must be zero first (the op allocates it zeroed).

A launch of one block (L <= HB * items) counts straight into counts with
global atomics; at most HB indices are launched as L threads, one per index. Otherwise a block counts HB * items consecutive indices
(items: 16, or more so that there are at least PER_BIN per shared bin) into
its own bins in shared memory
(zeroed by the block; atomics on shared memory: colliding threads all count),
then adds its non-zero bins to the output with one global atomic each.
Integer addition is associative, so every order of the updates gives the same
counts. The first SHARED_BINS bins live in shared memory; indices past them are
counted with global atomics directly. When every bin is shared, indices outside
[0, BINS) are counted in one more shared bin, never flushed. The "global" form
counts every index with global atomics (no shared memory).
"""
import numpy as np

from ... import Buffer, Const, atomic_add, barrier, block_id, i32, kernel, shared, thread_id
from .base import Launch, Operator, seeded_ints

HB = 256            # threads per block
WARP = 32           # threads whose indices are one contiguous segment
ITEMS = 16          # indices per thread: a block counts 4096
SHARED_BINS = 16384  # 64 KiB of i32 bins per block
# indices per shared bin in a block, at least: every block zeroes and flushes all its bins (a
# flush is an atomic add to memory, locked when the pool shares the launch), so fewer, larger
# blocks do less of it. 16 rather than 4: 100003 indices into 1000 bins take 7 blocks, not 25
PER_BIN = 16


@kernel(block=HB)
def histogram(idx: Buffer[i32], counts: Buffer[i32], L: Const[int], BINS: Const[int]):
    t = thread_id()
    # indices per thread: at least PER_BIN per shared bin in a block, so that zeroing and
    # flushing the bins (one global atomic each) stay a small part of the block's work
    items = max(ITEMS, (PER_BIN * min(BINS, SHARED_BINS) + HB - 1) // HB)
    base = block_id() * (HB * items)
    # the first SHARED_BINS bins in shared memory, any further ones counted in memory directly;
    # one more, a spare never flushed, counts the indices outside [0, BINS) when every bin is
    # shared, so that a packet's lanes all update (no mask: branch-free)
    S = min(BINS, SHARED_BINS)
    bins = shared(i32, min(BINS, SHARED_BINS) + 1)
    if L <= HB * items:
        # one block (a constant): no other block's counts to merge with, so it counts into
        # counts directly, with no bins to zero or flush (and one worker runs it, so natively
        # its updates need no locked instruction)
        for k in range(min(items, (L + HB - 1) // HB)):
            e = k * HB + t
            if e < L:
                v = idx[e]
                if v >= 0 and v < BINS:
                    atomic_add(counts, v, 1)
    else:
        for q in range(t, S + 1, HB):
            bins[q] = 0
        barrier()
        # warp-striped (CUB's BLOCK_LOAD_WARP_TRANSPOSE input): each group of WARP threads reads
        # its own contiguous segment of the block's indices, WARP side by side per item, so a
        # packet's loads walk its segment in order (block-striped, a packet would stride across
        # the whole block, item after item: past the caches' reach, a miss a load)
        off = (t // WARP) * (WARP * items) + t % WARP
        seg = base + off
        if BINS <= SHARED_BINS and base <= L - HB * items:
            # every bin shared and the block's indices all inside (block-uniform): no mask
            # (the index names base, which the guard bounds: the launch's bounds proof narrows
            # a guarded variable where it appears, not through seg's definition)
            for k0 in range(items):
                v0 = idx[base + off + k0 * WARP]
                atomic_add(bins, v0 if v0 >= 0 and v0 < BINS else S, 1)
        else:
            for k in range(items):
                e = seg + k * WARP
                if e < L:
                    v = idx[e]
                    if BINS <= SHARED_BINS:               # a constant: the other branch is no code
                        atomic_add(bins, v if v >= 0 and v < BINS else S, 1)
                    elif v >= 0 and v < BINS:
                        if v < SHARED_BINS:
                            atomic_add(bins, v, 1)
                        else:
                            atomic_add(counts, v, 1)
        barrier()
        for q2 in range(t, S, HB):
            n = bins[q2]
            if n != 0:
                atomic_add(counts, q2, n)


@kernel(block=HB)
def histogram_global(idx: Buffer[i32], counts: Buffer[i32], L: Const[int], BINS: Const[int]):
    base = block_id() * (HB * ITEMS)
    t = thread_id()
    for k in range(ITEMS):
        e = base + k * HB + t
        if e < L:
            v = idx[e]
            if v >= 0 and v < BINS:
                atomic_add(counts, v, 1)


def items(bins: int) -> int:
    """Indices per thread of the shared form (the kernel's `items`)."""
    return max(ITEMS, (PER_BIN * min(bins, SHARED_BINS) + HB - 1) // HB)


def launch(s):
    chunk = HB * items(s[1])
    # at most one index per thread of one block: a thread per index (the block's others would
    # count nothing), so a tiny launch runs one partial packet, not HB / lanes of them
    n = s[0] if s[0] <= HB else ((s[0] + chunk - 1) // chunk) * HB
    return Launch(n, {"L": s[0], "BINS": s[1]}, {})


def launch_global(s):
    return Launch(((s[0] + HB * ITEMS - 1) // (HB * ITEMS)) * HB, {"L": s[0], "BINS": s[1]}, {})


def oracle(inp, s):
    bins = s[1]
    v = inp["idx"].astype(np.int64)
    v = v[(v >= 0) & (v < bins)]
    return np.bincount(v, minlength=bins).astype(np.float64)


def make_inputs(s, seed):
    # a tenth of a bin's width past each end, so out-of-range indices occur at every size
    pad = max(1, s[1] // 10)
    return {"idx": seeded_ints(seed, "histogram", "idx", (s[0],), -pad, s[1] + pad)}


OP = Operator(
    name="histogram", kernel=histogram, dims=("L", "BINS"),
    buffer_shapes=lambda s: {"idx": (s[0],), "counts": (s[1],)},
    output="counts",
    launch=launch,
    make_inputs=make_inputs,
    oracle=oracle, oracle_shape=True, accumulates=True,
    seed_sizes=None,
    rel_tol=0.0,
    tags={"cooperative"},
    definition="counts[b] = #{i : idx[i] == b}, 0 <= b < BINS; other indices not counted",
    form="shared",
    forms=(("global", histogram_global, launch_global),),
)

"""Deliberate backend bugs, for proving that the checkers catch real ones
(after Inductor's inject_*_bug_TESTING_ONLY knobs). Never on by default;
active bugs are part of the compile-cache key, so a buggy build is never
served to a clean run or the other way round.

    with inject_bug_TESTING_ONLY("tree_order"):
        ...   # every compile in here carries the bug
"""
from __future__ import annotations

import contextlib
import threading

BUGS = {
    "tree_order": "collectives reduce with s = 1, 2, 4, ... instead of B/2, ..., 1",
    "tail_mask": "the packet launch mask admits one thread past n (gid <= n)",
    "minmax_nan": "min/max select on the unordered compare (NaN handling flips)",
    "minmax_unfenced": "f32 min/max without the arithmetic fence: LLVM folds min(min(a, b), b) to "
                       "min(a, b) (issue 29's miscompile put back; lower_ops._minmax)",
    "fma_contract": "float multiplies and adds carry the `contract` flag (FMA fusion)",
    "stride_as_contiguous": "stride-2 indices are classified contiguous",
    "div_uniform": "integer division by any constant is classified uniform across lanes",
    "full_packet_always": "every packet takes the unmasked full-packet path, the launch's partial one too",
    "private_swap": "cohort-layout private loads with a per-lane index address x + t*size (thread-major)",
    "fptosi_unsat": "f32 -> int uses plain fptosi (poison out of range) instead of the saturating form",
    # issue 17: bugs of the kinds that survived the fuzzer (an integer remainder's sign, an
    # ordered/unordered compare, a strided loop, the pool's last task), one or two lines each
    "rem_pow2_mask": "i32 x % 2^k by a constant is lowered as x & (2^k - 1) (wrong sign for negative x)",
    "div_pow2_shift": "i32 x // 2^k by a constant is lowered as x >> k (rounds down, not towards zero)",
    "ne_ordered": "f32 != uses the ordered compare (NaN != x becomes false)",
    "le_unordered": "f32 a <= b is lowered as not (a > b) (true when either is NaN)",
    "loop_stride_unit": "the variable of a loop whose start is affine with stride k is given stride 1",
    "loop_align_start": "a loop variable's known divisor is its start's alone, not gcd(start, step): "
                        "(t + j) % 32 over range(0, C) taken as contiguous (shapes; found on main in "
                        "session 8)",
    # issue 23: the cooperative lowering (regions.py, core.py, memory.py, atomics.py)
    "barrier_late": "a region ends one statement after its barrier: the statement after a barrier runs in "
                    "the packet loop before it (regions.split_regions)",
    "barrier_live_unsaved": "a variable used on both sides of a barrier is not kept per thread: each packet "
                            "sees the last packet's value (core.lower)",
    "shared_per_packet": "each packet gets its own copy of a shared array, not one per block "
                         "(memory.shared_index)",
    "atomic_plain": "an atomic update is a plain load, the op and a store, lane by lane: under the pool, "
                    "workers updating one element lose updates (atomics.atomic_one)",
    "atomic_lanes_collide": "a packet's atomic updates are one gather, the op per lane and one scatter: lanes "
                            "that hit one element lose all but one update (atomics.atomic)",
    "pool_partial_task": "the pool's block count is rounded down to a multiple of the grain (last task lost)",
    # issue 17's closing note, sites in the one lowering (backend/lowering/)
    "sum_identity_sign": "f32 block_sum pads inactive threads and packets with +0.0 instead of -0.0 "
                         "(collectives.identity)",
    "packet_tree_operands": "the in-packet steps of a collective's tree combine (moved, v), not (v, moved): "
                            "f32 max/min with a NaN or signed zeros change (collectives.collective)",
    "prefix_loop_stride": "range(k*t + c, n, step) in packets: the all-lanes trip count takes the last "
                          "lane's start as first + (W - 1), stride 1 (loops.loop)",
    "group_readback": "a fused interleaved store group checks the first store, not the later ones, for a "
                      "read of the buffer (stmts.interleaved_group)",
}

_active: set = set()
_lock = threading.Lock()


def active(name: str) -> bool:
    return name in _active


def key() -> tuple:
    return tuple(sorted(_active))


@contextlib.contextmanager
def inject_bug_TESTING_ONLY(*names: str):
    unknown = set(names) - set(BUGS)
    if unknown:
        raise ValueError(f"unknown injected bug(s) {sorted(unknown)}; known: {sorted(BUGS)}")
    with _lock:
        _active.update(names)
    try:
        yield
    finally:
        with _lock:
            _active.difference_update(names)

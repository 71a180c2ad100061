"""Deliberate backend bugs, for proving that the checkers catch real ones
(after Inductor's inject_*_bug_TESTING_ONLY knobs). Never on by default;
active bugs are part of the compile-cache key, so a buggy build is never
served to a clean run or the other way round.

    with inject_bug_TESTING_ONLY("tree_order"):
        ...   # every compile in here carries the bug

Who reads the switches. A build takes the set once, when its configuration is resolved
(`key()`, codegen.resolve), and every codegen-time question - the backend's lowering and
analyses, the Triton tile lowering - asks that record (codegen.CodegenConfig.planted, or the
`bugs` an analysis was given): a switch toggled on another thread during a compile reaches
neither the code nor the cache key of that build (tests/test_planted_config.py). The plants
in RUNTIME_PLANTS act at launch or when the process builds its worker pool, not in a
kernel's code; they are read through `runtime_planted` alone.
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
    "span_overread": "a strided load with every lane on reads its whole span even where the span's last "
                     "k - 1 elements leave the buffer (memory.span_inside)",
    "masked_load_all_on_any": "a contiguous load under a mask takes the plain (unmasked) load when any lane "
                              "is on, not every lane (memory.buffer_load)",
    "masked_store_mixed_whole": "a masked store's vector register with some lanes off is stored whole, as "
                                "if every lane were on (memory.masked_store's dispatch, forced on)",
    "store_either_side_index": "an if/else storing to one buffer on both sides is one store at the then "
                               "side's index even where the else side's index differs (stmts.store_either_side)",
    "blend_store_inverted": "a shared store under a mask keeps the old value in the active lanes and "
                            "writes the new one in the others (memory.blend_store)",
    "if_all_on_any": "a varying if's all-on body runs when any lane takes the branch, not every lane "
                     "(stmts.varying_branch)",
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
                        "(t + j) % 32 over range(0, C) taken as contiguous (shapes; a bug once found "
                        "on main)",
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
    # issue 28: the code written since the one lowering, several per path
    "bounds_len_inclusive": "the launch-time proof accepts an index interval whose top equals the buffer's "
                            "length (hi <= len, not hi < len; bounds_emit._Emitter.verdict)",
    "bounds_le_guard": "a guard v <= e narrows v to e - 1 (as v < e would), not e (bounds.Bounds._facts)",
    "bounds_block_floor": "the proof's block_id() interval ends at n // B - 1, not ceil(n / B) - 1: the "
                          "partial last block is left out (bounds_emit._Emitter._interval)",
    "bounds_loop_stop_lo": "a loop variable's interval ends at its stop's lowest value - 1, not its highest "
                           "(bounds_emit._Emitter.var)",
    "bounds_mod_nonneg": "x % m is taken as >= 0 for a dividend that may be negative (Python's remainder, "
                         "not C's; bounds_emit._Emitter.mod)",
    "whole_block_past_task": "the whole-block body runs up to the launch's last whole block, not to the task's "
                             "end: a pool task re-runs the blocks of the tasks after it (core.lower)",
    "partial_packets_floor": "the partial block's packet count rounds down: its last, partial packet never "
                             "runs (core.block_body)",
    "launch_mask_tid": "the partial block's launch mask compares the thread id, not the global id, with n "
                       "(core.packet_phase)",
    "group_sub_sign": "a store group's index constants: a trailing `- c` is taken as `+ c` "
                      "(stmts._split_const)",
    "group_offset_unordered": "a store group accepts its later stores at any offset 1..k-1, not at offset j "
                              "for the j-th (stmts.interleaved_group)",
    "group_spread_mask": "a masked store group's mask repeats the lanes (l % W), not each lane k times "
                         "(memory.spread_mask)",
    "private_uniform_t0": "a cohort-layout private access at a uniform index leaves out the packet's first "
                          "thread: every packet uses packet 0's elements (memory.private_addr)",
    "private_scatter_t0": "a cohort-layout private access at a per-lane index adds the packet's first thread, "
                          "not each lane's (memory.private_addr)",
    "private_zero_packet": "each block zeroes its private arrays for one packet's threads, not the block's "
                           "(core.zero_privates)",
    "fma_operand_order": "fma(a, b, c) is emitted as llvm.fma(a, c, b) (lower_ops._fma)",
    "pool_rerun_unchecked": "a pool launch whose bounds proof failed is rerun with the unproven build again, "
                            "not its checked twin (runtime.WorkerPool.run)",
    "runtime_caller_one_task": "the runtime's native launch entry, deciding to run on the caller, runs the "
                               "blocks of one task (0..grain), not all of them (pool_ir "
                               "cohort_runtime_launch; active when the process first builds the pool)",
    "bounds_clamp_one_side": "a select arm that is a variable counts as bounded when its condition bounds it "
                             "on one side only (bounds.Bounds.clamp_facts): v if v < n else spare is "
                             "'proven' though v may be negative",
    "openmp_publish_late": "a launch handed to the process's OpenMP team stores the job's generation after "
                           "the team has run, so the team claims nothing (pool_ir cohort_pool_launch; "
                           "active when the process first builds the pool)",
    "launch_nblocks_floor": "a launch's block count is n // B, not ceil(n / B): the partial last block never "
                            "runs (launch_plan.LaunchPlan._put_launch, every launch's block)",
    # per-lane work (predicated=off's effects, atomics) as one loop over the lanes (loops.lane_loop)
    "lane_loop_short": "the loop over a packet's lanes stops one lane early: the last lane's predicated=off "
                       "load or store, or its atomic update, never happens (loops.lane_loop)",
    # a loop's strided shared reads transposed in registers before it (DESIGN §5)
    "transposed_last_stage": "the in-register transpose of a loop's shared windows skips its last round (bit 0 "
                             "of row and column never swapped; transposed.transpose_rows)",
    # issue 53: paths a campaign reached rarely or on some hosts only (lowering switches, f32 and
    # shared atomics); tests/test_plants53.py has a named kernel for each
    "atomic_f32_nan_old": "an f32 atomic min/max tests the old value for NaN, not the update's: a NaN "
                          "update is lost (atomics.combine)",
    "atomic_f32_zero_equal": "an f32 atomic min/max compares as floats, -0.0 == +0.0, so the old zero is "
                             "kept (atomics.combine; the contract orders -0.0 below +0.0)",
    "shared_atomic_spare_update": "a shared-array atomic's off lane, sent to element 0, keeps its update "
                                  "there instead of the old value (atomics.plain_updates)",
    "masked_store_dispatch_first_lane": "the per-register masked-store dispatch reads 'no lane on' from the "
                                        "register's first lane: a register whose first lane is off is not "
                                        "stored (memory.masked_store; live only where the dispatch is "
                                        "chosen: COHORT_MASKED_STORE=dispatch, or a host with slow masked "
                                        "stores)",
    "group_base_unshifted": "a fused store group's base pointer is its first store's index without that "
                            "store's trailing constants: a group whose first slot is at k*t + c stores at "
                            "k*t (stmts.interleaved_store)",
    "bounds_not_flip": "the proof's guard not (K < v) (a negated comparison with v on the right) narrows v "
                       "to K - 1, not K (bounds.Bounds._facts)",
    "const_trips_unit_step": "a uniform loop whose bound is a top-level variable set to a constant gets the "
                             "constant trip count of range(start, stop), the step left out "
                             "(loops.constant_trips)",
    "prefix_lanes_floor": "a prefix loop's lanes still running at iteration k are (stop - first - k*step) // "
                          "stride, rounded down, not up: with a stride of 2 or more the last running lane "
                          "skips its iteration (loops.uniform_or_lane_loop)",
    "private_store_unmasked": "a private store whose lanes' elements sit side by side (the cohort layout at a "
                              "uniform index) is stored whole under a mask: the off lanes' elements are "
                              "overwritten (memory.private_store)",
    "fma_software_order": "the software fma (no FMA instructions, or COHORT_FMA=software) computes "
                          "a*c + b (lower_ops._fma_software)",
    # issue 48: the Triton tile lowering (cohort/triton/native_lower.py)
    "triton_tree_order": "a tile reduction's tree pairs v[i] with v[i + s] for s = 1, 2, 4, ... instead of "
                         "R/2, ..., 1 (native_tiles._tree)",
    "triton_dot_k_descending": "tl.dot's fma chain runs over k descending (native_tiles._dot_f32)",
    # the fuzzer's tile family (verify/gen/tiles*.py) must find each of these (tests/test_fuzz_tiles.py)
    "triton_masked_store_whole": "a masked tile store whose packet is shown consecutive and inside the tensor "
                                 "stores the whole packet: masked-off lanes of a partial last block are "
                                 "written (native_memory.store_vec)",
    "triton_idiv_floor": "signed integer // rounds down (Python's floor division), not toward zero "
                         "(native_ops.binary)",
    "triton_stride_as_contiguous": "a pointer tile whose offsets step by k > 1 along the lanes is taken as "
                                   "consecutive: the fast path loads/stores g0, g0 + 1, ... "
                                   "(native_memory._linear)",
    "triton_argmax_tie_last": "argmax/argmin's tie goes to the higher index, not the lower "
                              "(native_ops.arg_pick)",
    "triton_bf16_truncate": "f32 -> bf16 keeps the top 16 bits (toward zero), not round-to-nearest-even "
                            "(native_ops.from_f32)",
}

# read at launch (runtime.py, launch_plan.py) or when the process first builds its pool
# (pool_ir.py), through runtime_planted; every other plant changes a kernel's code
RUNTIME_PLANTS = frozenset({"pool_partial_task", "pool_rerun_unchecked", "launch_nblocks_floor",
                            "runtime_caller_one_task", "openmp_publish_late"})

_active: set = set()
_lock = threading.Lock()


def runtime_planted(name: str) -> bool:
    """Whether runtime plant `name` (RUNTIME_PLANTS) is switched on now: the one read of the
    switches at launch time (tests/test_planted_config.py checks every caller names one)."""
    return name in _active


def key() -> tuple:
    """The plants switched on now, sorted: what a build resolves once (codegen.resolve)."""
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

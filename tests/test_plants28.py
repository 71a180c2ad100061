"""Issue 28: the planted bugs of the paths written since the one lowering (the launch-time
bounds proof, the whole-block/partial-block choice, store groups, the runtime's launch,
private forms, fma) are live: each changes what a small kernel does, through the fuzzer's own
comparison (`execute`), while the clean build agrees. A bounds-proof bug shows on a launch one
element out of bounds, an expected-error program: every build must report the interpreter's
error (statement, load or store, index, thread, block)."""
from __future__ import annotations

import pytest

from cohort import Buffer, block_id, block_sum, f32, fma, global_id, i32, kernel, private, thread_id
from cohort.backend.inject import BUGS, inject_bug_TESTING_ONLY
from cohort.verify.execute import error_facts, execute, reference
from cohort.verify.gen import BufferSpec, Case

N = 37          # 4 whole blocks of 8 and a partial one of 5 threads


@kernel(block=8)
def _past_end(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g + 1]                      # x has N elements: thread N-1 reads one past


@kernel(block=8)
def _le_guard(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    i = g
    if i <= 20:
        y[g] = x[i + 2]                  # x has 22 elements: thread 20 reads x[22]


@kernel(block=8)
def _by_block(x: Buffer[f32], y: Buffer[f32]):
    y[global_id()] = x[block_id() + 2]   # x has 6 elements: block 4 (partial) reads x[6]


@kernel(block=8)
def _thread_stop(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    acc = 0.0
    for j in range(0, g % 3 + 1):        # thread 35 (j = 2) reads x[43], one past
        acc = acc + x[g + 4 * j]
    y[g] = acc


@kernel(block=8)
def _neg_rem(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[(g - 5) % 4 + 2]            # C remainder: -3 at thread 2, index -1


@kernel(block=8)
def _rmw(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = y[g] + x[g]                   # twice is not once


@kernel(block=8)
def _copy(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g] * 2.0


@kernel(block=8)
def _group_sub(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[3 * g] = x[g]
    y[3 * g + 1] = x[g] + 1.0
    y[(3 * g + 1) - 1] = x[g] + 2.0      # slot 0 again, spelled with a `- 1`


@kernel(block=8)
def _group_order(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[3 * g] = x[g]
    y[3 * g + 2] = x[g] + 1.0            # slot 2 before slot 1
    y[3 * g + 1] = x[g] + 2.0


@kernel(block=8)
def _group_pair(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[2 * g] = x[g]
    y[2 * g + 1] = x[g] + 1.0            # the partial block's last packet: one lane of four


@kernel(block=8)
def _private_phases(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    p = private(f32, 4)
    for j in range(4):
        p[j] = f32(g * 7 + j)
    s = block_sum(x[g])                  # packet 1 fills its arrays after packet 0's
    y[g] = p[1] + s * 0.0


@kernel(block=8)
def _private_lanes(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    p = private(f32, 4)
    p[thread_id() % 4] = f32(g) + 1.0    # per-lane index, read back at uniform ones
    y[g] = p[0] + p[1] * 3.0


@kernel(block=8)
def _private_stale(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    p = private(f32, 4)
    if g % 5 == 0:
        p[1] = 5.0
    y[g] = p[1]                          # 0.0 wherever this block's thread did not store


@kernel(block=8)
def _fused(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = fma(a[g], b[g], c[g])


@kernel(block=8)
def _divergent(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    if g % 3 != 1:                       # every packet partial: its effects branch per lane
        y[g] = x[g] * 2.0


@kernel(block=8)
def _clamp_above(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    v = i32(x[g] * 8.0)                  # data-dependent, negative where x[g] <= -1/8
    y[g] = x[v if v < 40 else 0]         # bounded above only: a negative v reads before x


@kernel(block=8)
def _either_apart(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    if g % 3 != 1:                       # both sides store to y, at different indices
        y[g] = x[g]
    else:
        y[g + N] = -x[g]


P4 = "lanes=4,full_packet=on,predicated=on,private=cohort"
OFF4 = "lanes=4,full_packet=off,predicated=on,private=cohort"
# bug -> (kernel, {buffer: length}, variants, expected error)
PLANTS = {
    "bounds_len_inclusive": (_past_end, {"x": N}, ("whole", P4), True),
    "bounds_le_guard": (_le_guard, {"x": 22}, ("whole", P4), True),
    "bounds_block_floor": (_by_block, {"x": 6}, ("whole", P4), True),
    "bounds_loop_stop_lo": (_thread_stop, {"x": 43}, ("whole", P4), True),
    "bounds_mod_nonneg": (_neg_rem, {"x": 8}, ("whole", P4), True),
    "bounds_clamp_one_side": (_clamp_above, {}, ("whole", P4), True),
    "pool_rerun_unchecked": (_past_end, {"x": N}, ("whole,grain=1,workers=2",), True),
    "whole_block_past_task": (_rmw, {}, (P4 + ",grain=1,workers=2",), False),
    "partial_packets_floor": (_copy, {}, (OFF4,), False),
    "launch_mask_tid": (_copy, {}, (OFF4,), False),
    "launch_nblocks_floor": (_copy, {}, ("whole", P4), False),
    "group_sub_sign": (_group_sub, {"y": 3 * 40}, (P4,), False),
    "group_offset_unordered": (_group_order, {"y": 3 * 40}, (P4,), False),
    "group_spread_mask": (_group_pair, {"y": 2 * 40}, (P4,), False),
    "private_uniform_t0": (_private_phases, {}, (P4 + ",interleave=1",), False),
    "private_scatter_t0": (_private_lanes, {}, (P4,), False),
    "private_zero_packet": (_private_stale, {}, ("whole",), False),
    "masked_store_mixed_whole": (_divergent, {}, (P4,), False),
    "store_either_side_index": (_either_apart, {"y": 2 * N}, (P4,), False),
    "lane_loop_short": (_divergent, {}, ("lanes=4,full_packet=on,predicated=off,private=cohort",), False),
    "fma_operand_order": (_fused, {}, ("whole", P4), False),
}


def _case(k, lengths: dict) -> Case:
    specs = tuple(BufferSpec(p.name, p.dtype, lengths.get(p.name, 40), "finite") for p in k.ir.params)
    return Case(k.ir, N, {}, specs, {}, 7)


def test_every_issue28_plant_has_a_named_kernel():
    assert set(PLANTS) <= set(BUGS)


@pytest.mark.parametrize("bug", sorted(PLANTS))
def test_issue28_plant_changes_a_small_kernel(bug):
    k, lengths, variants, expect_error = PLANTS[bug]
    case = _case(k, lengths)
    ref, why = reference(case)
    assert (ref is None and error_facts(why[1]) is not None) == expect_error, why
    clean = execute(case, list(variants), full=True)
    assert bool(clean.get("expected_error")) == expect_error
    assert all(r["status"] == "ok" for r in clean["variants"].values()), clean
    with inject_bug_TESTING_ONLY(bug):
        bad = execute(case, list(variants), full=True)
    want = ("error_mismatch",) if expect_error else ("mismatch", "annotation", "native_error", "guard")
    assert any(r["status"] in want for r in bad["variants"].values()), bad


_FRESH = """
import sys
sys.path.insert(0, {tests!r})
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.verify.execute import execute
import test_plants28 as t
with inject_bug_TESTING_ONLY("runtime_caller_one_task"):
    res = execute(t._case(t._copy, {{}}), ["whole", "whole,grain=1,workers=2"], full=True)
print(sorted((v, r["status"]) for v, r in res["variants"].items()))
"""


def test_runtime_entry_plant_changes_a_small_kernel_in_a_fresh_process():
    """The runtime's native launch entry is built once per process (the pool module): its plant
    is live only when the process builds it, as in a fuzz worker started with the bug."""
    import os
    import subprocess
    import sys
    assert "runtime_caller_one_task" in BUGS
    clean = execute(_case(_copy, {}), ["whole", "whole,grain=1,workers=2"], full=True)
    assert all(r["status"] == "ok" for r in clean["variants"].values()), clean
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", _FRESH.format(tests=os.path.dirname(os.path.abspath(__file__)))],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0, out.stderr[-2000:]
    # on the caller (grain caller: policy -1) only block 0 runs; the pool variant is cut into tasks
    assert "('whole', 'mismatch')" in out.stdout, out.stdout

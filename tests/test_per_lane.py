"""Per-lane work - predicated=off's effects under a partial mask (memory.py), every atomic
update (atomics.py) - is emitted once, as a loop over the lanes (loops.lane_loop). A user's
build (jit.FULL) asks LLVM to unroll it fully: straight-line code, as if written out lane by
lane. The fuzzer's quick levels keep the loop, so their code does not grow with the width.
Every level, every width, bit for bit."""
import re

import numpy as np
import pytest

from cohort import Buffer, atomic_add, atomic_max, barrier, f32, global_id, i32, kernel, shared, thread_id
from cohort.backend import jit
from cohort.backend.compiler import compile_kernel
from cohort.refimpl.interpreter import interpret
from cohort.verify.checksum import bitwise_equal
from cohort.verify.guard import GuardedSet

B = 32


@kernel(block=B)
def divergent(x: Buffer[f32], idx: Buffer[i32], y: Buffer[f32], z: Buffer[f32]):
    g = global_id()
    if thread_id() % 3 != 2:           # lanes 0 and 31 of a block on: first and last lane
        a = x[g]                       # contiguous load, masked
        b = x[idx[g]]                  # gather, masked
        y[g] = a * 2.0 + b             # contiguous store, masked
        z[(g * 7) % 97] = a - b        # scatter, masked (7 and 97 coprime: no two lanes collide)


@kernel(block=B)
def counts(x: Buffer[f32], h: Buffer[i32], m: Buffer[f32], y: Buffer[i32]):
    g = global_id()
    t = thread_id()
    bins = shared(i32, 8)
    if t < 8:
        bins[t] = 0
    barrier()
    if t % 3 != 2 and g < len(x):        # (every thread of the last block runs: DESIGN §2)
        k = (g * 5) % 8                  # lanes of one packet hit one bin: each counts
        atomic_add(h, k, 1)              # a buffer: a real atomic per lane
        atomic_max(m, k, x[g])           # f32: a compare-exchange loop per lane
        atomic_add(bins, k, 2)           # shared: a plain update per lane, in lane order
    barrier()
    if t < 8:
        y[(g // B) * 8 + t] = bins[t]


def _inputs(n):
    rng = np.random.default_rng(n)
    return {"x": rng.standard_normal(n).astype(np.float32),
            "idx": rng.integers(0, n, n).astype(np.int32),
            "y": np.zeros(n, np.float32), "z": np.zeros(97, np.float32)}


def _build(lanes, level, n, interleave="1"):
    with jit.quick_compiles(level):
        return compile_kernel(divergent, None, f"packet-branchy,lanes={lanes},interleave={interleave}", n=n)


LEVELS = [0, 1, jit.FULL]


def _lane_loops(text: str) -> int:
    return len(re.findall(r"^lane\.head(?:\.\d+)?:", text, re.M))


@pytest.mark.parametrize("lanes,interleave", [(4, "1"), (8, "1"), (16, "1"), (4, "auto")])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [32, 45, 97])
def test_per_lane_effects_are_exact_at_every_level(lanes, interleave, level, n):
    ck = _build(lanes, level, n, interleave)
    assert ck.lowering_counts["scalarised_lanes"] > 0
    want = _inputs(n)
    got = GuardedSet({k: v.copy() for k, v in want.items()})
    ck.launch(n, got.arrays)
    interpret(divergent.ir, n, want)
    assert got.intact()
    for name in ("y", "z"):
        assert bitwise_equal(got.arrays[name], want[name]), (name, lanes, interleave, level, n)


def test_the_lane_loop_stays_one_copy_in_quick_builds_and_is_unrolled_in_full_ones():
    n = 64
    for level in (0, 1):
        texts = {lanes: _build(lanes, level, n).llvm_ir for lanes in (4, 16)}
        for text in texts.values():
            assert re.search(r"^lane\.body(?:\.\d+)?:", text, re.M), level    # the loop is there
            assert text.count("load float, ptr") == 2, level    # one scalar load per masked load
        assert len(texts[16]) < 1.1 * len(texts[4]), level      # the code does not grow with the width
    full = _build(16, jit.FULL, n)
    assert "lane.head" not in full.llvm_ir      # llvm.loop.unroll.full honoured
    assert len(re.findall(r"^lane\.body\.if(?:\.\d+)?:", full.llvm_ir, re.M)) >= 16   # a branch per lane
    assert full.lowering_counts["scalarised_lanes"] == _build(16, 0, n).lowering_counts["scalarised_lanes"]


@pytest.mark.parametrize("lanes", [4, 16])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("variant", ["packet,interleave=1", "packet-branchy,interleave=1", "packet-branchy"])
def test_atomic_lanes_are_exact_at_every_level(lanes, level, variant):
    n = 3 * B - 5
    rng = np.random.default_rng(lanes)
    want = {"x": rng.standard_normal(n).astype(np.float32), "h": np.zeros(8, np.int32),
            "m": np.full(8, -np.inf, np.float32), "y": np.zeros(3 * 8, np.int32)}
    with jit.quick_compiles(level):
        ck = compile_kernel(counts, None, f"{variant},lanes={lanes}", n=n)
    got = GuardedSet({k: v.copy() for k, v in want.items()})
    ck.launch(n, got.arrays)
    interpret(counts.ir, n, want)
    assert got.intact()
    for name in ("h", "m", "y"):
        assert bitwise_equal(got.arrays[name], want[name]), (name, variant, lanes, level)
    if level == 0:
        assert _lane_loops(ck.llvm_ir) >= 3       # one loop per atomic statement

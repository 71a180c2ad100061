"""predicated=off: an effect under a partial mask is one branch per lane (memory.py), emitted
once as a loop over the lanes that asks LLVM to unroll it fully. Unoptimised builds (the
fuzzer's level 0) keep the loop, so their code does not grow with the width; optimised ones
are straight-line, as if written out lane by lane. Every level, every width, bit for bit."""
import numpy as np
import pytest

from cohort import Buffer, f32, global_id, i32, kernel, thread_id
from cohort.backend import jit
from cohort.backend.compiler import compile_kernel
from cohort.refimpl.interpreter import interpret
from cohort.verify.checksum import bitwise_equal
from cohort.verify.guard import GuardedSet

B = 32


@kernel(block=B)
def divergent(x: Buffer[f32], idx: Buffer[i32], y: Buffer[f32], z: Buffer[f32]):
    g = global_id()
    if thread_id() % 3 != 1:
        a = x[g]                       # contiguous load, masked
        b = x[idx[g]]                  # gather, masked
        y[g] = a * 2.0 + b             # contiguous store, masked
        z[(g * 7) % 97] = a - b        # scatter, masked (7 and 97 coprime: no two lanes collide)


def _inputs(n):
    rng = np.random.default_rng(n)
    return {"x": rng.standard_normal(n).astype(np.float32),
            "idx": rng.integers(0, n, n).astype(np.int32),
            "y": np.zeros(n, np.float32), "z": np.zeros(97, np.float32)}


def _build(lanes, level, n):
    with jit.quick_compiles(level):
        return compile_kernel(divergent, None, f"packet-branchy,lanes={lanes}", n=n)


LEVELS = [0, 1, jit.FULL]


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [32, 45, 97])
def test_per_lane_effects_are_exact_at_every_level(lanes, level, n):
    ck = _build(lanes, level, n)
    assert ck.lowering_counts["scalarised_lanes"] > 0
    want = _inputs(n)
    got = GuardedSet({k: v.copy() for k, v in want.items()})
    ck.launch(n, got.arrays)
    interpret(divergent.ir, n, want)
    assert got.intact()
    for name in ("y", "z"):
        assert bitwise_equal(got.arrays[name], want[name]), (name, lanes, level, n)


def test_the_lane_loop_stays_one_copy_unoptimised_and_is_unrolled_optimised():
    n = 64
    per_width = {}
    for lanes in (4, 16):
        text = _build(lanes, 0, n).llvm_ir
        per_width[lanes] = (text.count("lane.head:"), text.count("load float, ptr"))
        assert per_width[lanes][0] > 0
    assert per_width[4] == per_width[16]        # the code does not grow with the width
    full = _build(16, jit.FULL, n)
    assert "lane.head" not in full.llvm_ir      # llvm.loop.unroll.full honoured
    assert full.lowering_counts["scalarised_lanes"] == _build(16, 0, n).lowering_counts["scalarised_lanes"]

"""The sanitizing build at a wide interleave (many lanes per packet: written flags read and set
lane by lane, lowering/sanitize.py's FLAG_VECTOR_LANES): planted uninitialised reads and races
reported as the interpreter reports them, correct kernels clean and bit-identical."""
from __future__ import annotations

import numpy as np
import pytest

from cohort import Buffer, KernelRuntimeError, barrier, f32, global_id, kernel, shared, thread_id
from cohort.backend.compiler import compile_kernel
from cohort.backend.lowering.sanitize import FLAG_VECTOR_LANES
from cohort.backend.variant import parse_variant
from cohort.refimpl.interpreter import interpret

WIDE = ("packet,sanitize=on", "lanes=4,interleave=16,sanitize=on", "packet,predicated=off,interleave=8,sanitize=on")


@kernel(block=64)
def one_missing(x: Buffer[f32], y: Buffer[f32]):
    t = thread_id()
    s = shared(f32, 64)
    if t != 37:                                  # thread 37 stages nothing
        s[t] = x[global_id()] if global_id() < len(x) else 0.0
    barrier()
    if global_id() < len(y):
        y[global_id()] = s[63 - t]


@kernel(block=64)
def reversed_stage(x: Buffer[f32], y: Buffer[f32]):
    t = thread_id()
    s = shared(f32, 64)
    s[t] = x[global_id()] if global_id() < len(x) else 0.0
    barrier()
    if global_id() < len(y):
        y[global_id()] = s[63 - t] + s[t]


def _args(n=150):
    return {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32)}


def _wide(ck) -> bool:
    return ck.code.lowering_counts["interleave"] * ck.variant.lanes > FLAG_VECTOR_LANES


def test_a_missing_stage_is_reported_at_a_wide_interleave():
    with pytest.raises(KernelRuntimeError) as ref:
        interpret(one_missing.ir, 150, _args())
    assert "(uninitialised)" in str(ref.value)
    for v in WIDE:
        ck = compile_kernel(one_missing, {}, v, n=150, verify="never")
        assert _wide(ck), v
        with pytest.raises(KernelRuntimeError) as got:
            ck.launch(150, _args())
        assert str(got.value) == f"{ref.value} [native, {parse_variant(v).label}]", v


def test_a_correct_stage_runs_clean_and_agrees_at_a_wide_interleave():
    want = interpret(reversed_stage.ir, 150, _args())["y"]
    for v in WIDE:
        ck = compile_kernel(reversed_stage, {}, v, n=150, verify="never")
        assert _wide(ck), v
        assert ck.launch(150, _args())["y"].tobytes() == want.tobytes(), v

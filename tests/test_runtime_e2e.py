"""The runtime's native launch entry (the runtime-E2E boundary, DESIGN §6):
outputs bit-identical for every grain policy and worker count, errors inside
tasks reported, auto-style choices recorded."""
import functools

import numpy as np
import pytest

from cohort import Buffer, f32, global_id, kernel
from cohort.backend import launch_policy, runtime
from cohort.backend.compiler import compile_kernel
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
from cohort.refimpl.interpreter import KernelRuntimeError
from cohort.verify.checksum import bitwise_equal

GRAINS = ["caller", "0", "1", "3", "legacy", "auto", "joint_legacy"]
CASES = [("rmsnorm", (17, 65)), ("layernorm", (129, 768)), ("rope", (3, 64)),
         ("attention", (1, 4, 2, 16, 32, 16, 16))]


@functools.lru_cache(maxsize=None)
def _reference(name, shape, seed):
    """Inputs and the interpreter's output, once per case (not once per grain and worker count:
    42 interpreter runs of attention were most of this file's time). Read only by the callers."""
    op = ops.get(name)
    inputs = op.make_inputs(shape, seed)
    return inputs, ops.run_reference(op, shape, inputs)


def _native_launch(name, shape, spec, seed=0):
    op = ops.get(name)
    inputs, ref = _reference(name, shape, seed)
    launch = op.launch(shape)
    variant = parse_variant(spec)
    ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
    bufs = ops.allocate(op, shape, inputs)
    p = ck.prepare(launch.n, {**bufs, **launch.scalars})
    return runtime.NativeLaunch(p, variant), bufs[op.output], ref


@pytest.mark.parametrize("name,shape", CASES, ids=lambda v: v if isinstance(v, str) else ops.fmt_shape(v))
def test_native_launch_is_bit_identical_for_every_grain_and_worker_count(name, shape):
    for lanes in ("whole", "packet"):
        for grain in GRAINS:
            for workers in (1, 2, 8):
                nl, out, ref = _native_launch(name, shape, f"{lanes},grain={grain},workers={workers}")
                for _ in range(3):
                    out[...] = -1234.5
                    nl.launch()
                    assert bitwise_equal(out.reshape(ref.shape), ref), (name, shape, lanes, grain, workers)
                out[...] = -1234.5
                ns = nl.time(2, 2)   # the native timer's loop: launches through the entry
                assert len(ns) == 2 and bitwise_equal(out.reshape(ref.shape), ref)
                if grain in ("auto", "joint_legacy"):
                    assert nl.choice and nl.choice.startswith(("lanes=8", "lanes=1"))
                    if grain == "joint_legacy":
                        assert "grain=legacy" in nl.choice or nl.choice.endswith(",caller")


def test_joint_legacy_only_tries_the_legacy_split():
    op = ops.get("rmsnorm")
    shape = (257, 1538)
    inputs = op.make_inputs(shape, 0)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, "packet,grain=joint_legacy,workers=8", n=launch.n)
    p = ck.prepare(launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars})
    legacy = launch_policy.grain_for("legacy", p.nblocks, 8)
    c = runtime.AutoChoice(p, 8, "joint_legacy")
    assert [x.route.grain for x in c.candidates] == [legacy, legacy]
    assert [x.label.split(",")[0] for x in c.candidates] == ["lanes=8", "lanes=1"]
    a = runtime.AutoChoice(p, 8, "auto")
    assert {x.route.grain for x in a.candidates} > {legacy}   # auto also tries the caller and the runtime's grain


@kernel(block=8)
def _reads_past_the_end(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i + 1]


@pytest.mark.parametrize("spec", ["whole,grain=caller,workers=1", "packet,grain=1,workers=8",
                                  "packet,grain=legacy,workers=2", "packet,grain=auto,workers=2"])
def test_an_error_inside_a_task_is_reported(spec):
    variant = parse_variant(spec + ",checked=on")
    ck = compile_kernel(_reads_past_the_end, None, variant)
    n = 4096
    x, y = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    p = ck.prepare(n, {"x": x, "y": y})
    if variant.grain == "auto":
        with pytest.raises(KernelRuntimeError, match="load index 4096 out of bounds"):
            runtime.NativeLaunch(p, variant)   # the choice's trial launches fail already
        return
    nl = runtime.NativeLaunch(p, variant)
    with pytest.raises(KernelRuntimeError, match="load index 4096 out of bounds"):
        nl.launch()
    with pytest.raises(KernelRuntimeError, match="load index 4096 out of bounds"):
        nl.time(1, 1)
    # a correct launch through the entry right after is exact
    x2 = np.arange(n + 1, dtype=np.float32)
    ok = runtime.NativeLaunch(ck.prepare(n, {"x": x2, "y": y}), variant)
    ok.launch()
    assert np.array_equal(y, x2[1:])


def test_cohort_run_times_pool_variants_at_the_native_launch_entry():
    from cohort.verify.opcheck import check_operator
    op = ops.get("rmsnorm")
    for spec, choice in (("packet,grain=legacy,workers=2", False), ("packet,grain=joint_legacy,workers=2", True)):
        out = check_operator(op, (17, 65), 0, parse_variant(spec), timing=True, samples=3)
        assert out["agree"] and out["agree_after_timing"] and out["boundary"] == "runtime_e2e"
        assert len(out["timing_samples_us"]) == 3 and ("auto_choice" in out) == choice

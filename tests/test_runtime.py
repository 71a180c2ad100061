"""The runtime: outputs byte-identical whatever the grain, worker count and
task order; concurrent launches; errors inside tasks; clean shutdown."""
import functools
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

from cohort import Buffer, f32, global_id, i32, kernel
from cohort.backend import compiler as _compiler
from cohort.backend import launch_policy, runtime
from cohort.refimpl import ops
from cohort.refimpl.interpreter import KernelRuntimeError, interpret
from cohort.verify.checksum import bitwise_equal

# this module checks the builds' own behaviour and errors: launches go straight to native
# code (the default verify="first" would report the interpreter's error before the build's)
compile_kernel = functools.partial(_compiler.compile_kernel, verify="never")

GRAINS = ["caller", "0", "1", "3", "legacy", "auto"]
WORKERS = [1, 2, 8]
SIZES = {"attention": [(1, 4, 2, 16, 32, 16, 16), (2, 3, 3, 37, 5, 4, 4)],
         "attention_causal": [(1, 4, 2, 16, 32, 16, 16), (2, 3, 3, 37, 5, 4, 4)],
         "rope": [(17, 66), (129, 768), (300, 2)],
         "rope_half": [(4, 17, 64, 64), (3, 41, 20, 12)], "rope_pairs": [(4, 17, 64, 64), (3, 41, 20, 12)],
         "matmul": [(50, 33, 70), (5, 17, 3)], "transpose": [(3, 70, 45), (1, 1, 300)],
         "histogram": [(20000, 300), (300, 3)]}
DEFAULT_SIZES = [(17, 65), (129, 768), (300, 3)]
CASES = [(name, shape) for name in ops.OPERATORS for shape in SIZES.get(name, DEFAULT_SIZES)]


@pytest.mark.parametrize("name,shape", CASES, ids=lambda v: v if isinstance(v, str) else ops.fmt_shape(v))
def test_outputs_identical_across_grains_and_workers(name, shape):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 0)
    ref = ops.run_reference(op, shape, inputs)
    launch = op.launch(shape)
    for lanes in ("whole", "packet"):
        for grain in GRAINS:
            for workers in WORKERS:
                ck = compile_kernel(op.kernel, launch.consts, f"{lanes},grain={grain},workers={workers}")
                bufs = ops.allocate(op, shape, inputs)
                ck.launch(launch.n, {**bufs, **launch.scalars})
                y = bufs[op.output].reshape(ref.shape)
                assert bitwise_equal(y, ref), (name, shape, lanes, grain, workers)


def test_concurrent_launches_from_eight_threads():
    op = ops.get("layernorm")
    shape = (257, 1538)
    inputs = op.make_inputs(shape, 1)
    ref = ops.run_reference(op, shape, inputs)
    launch = op.launch(shape)
    variants = ["packet,grain=2,workers=2", "packet,grain=auto,workers=2", "whole,grain=legacy,workers=8",
                "packet"]
    errors = []

    def hammer(i):
        ck = compile_kernel(op.kernel, launch.consts, variants[i % len(variants)])
        for _ in range(6):
            bufs = ops.allocate(op, shape, inputs)
            ck.launch(launch.n, {**bufs, **launch.scalars})
            if not bitwise_equal(bufs["y"].reshape(ref.shape), ref):
                errors.append(i)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)          # a hang detector, generous for a loaded machine
    assert not any(t.is_alive() for t in threads)
    assert errors == []


@kernel(block=8)
def reads_past_the_end(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i + 1]


@pytest.mark.parametrize("variant", ["whole,checked=on,grain=1,workers=2", "packet,checked=on,grain=2,workers=8",
                                     "packet,checked=on,grain=auto,workers=2"])
def test_error_in_a_task_reaches_the_caller_and_the_pool_survives(variant):
    ck = compile_kernel(reads_past_the_end, None, variant)
    n = 4096
    x, y = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    with pytest.raises(KernelRuntimeError, match=r"load index 4096 out of bounds.*thread 4095"):
        ck.launch(n, {"x": x, "y": y})
    # the pool is still usable, and a correct launch right after is exact
    x2, y2 = np.arange(n + 1, dtype=np.float32), np.zeros(n, np.float32)
    ck.launch(n, {"x": x2, "y": y2})
    assert np.array_equal(y2, x2[1:])


@kernel(block=8)
def every_block_fails(x: Buffer[f32], y: Buffer[f32], lim: i32, spin: i32):
    i = global_id()
    acc = 0.0
    if i < 8:
        for k in range(spin):               # block 0 fails last in time: the others do not wait
            acc = acc + x[k % 8]
    if i % 8 >= 5:
        y[i] = x[i + lim] + acc             # threads 5..7 of every block read past x's end


@pytest.mark.parametrize("variant", ["whole,checked=on,grain=1,workers=2", "packet,grain=1,workers=4",
                                     "lanes=4,checked=on,grain=2,workers=8"])
def test_of_many_failing_blocks_the_lowest_thread_is_reported_every_time(variant):
    # every block fails, block 0 last in time; pool workers run blocks side by side and each
    # failing block stops only itself, so the record keeps the lowest thread's error: the
    # interpreter's first, every launch (the first to claim it was another block's)
    n = 4096
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    with pytest.raises(KernelRuntimeError) as ref:
        interpret(every_block_fails.ir, n, {"x": x, "y": y.copy(), "lim": np.int32(n), "spin": np.int32(3)})
    assert "thread 5, block 0" in str(ref.value)
    ck = compile_kernel(every_block_fails, None, variant, verify="never")
    for _ in range(15):
        with pytest.raises(KernelRuntimeError) as got:
            ck.launch(n, {"x": x, "y": y, "lim": np.int32(n), "spin": np.int32(200_000)})
        where = [re.search(r"index (\d+) out of bounds.*\(thread (\d+), block (\d+)\)", str(e.value)).groups()
                 for e in (got, ref)]
        assert where[0] == where[1] == ("4101", "5", "0"), str(got.value)


def test_grain_policies():
    assert launch_policy.grain_for("legacy", 100, 8) == 13
    assert launch_policy.grain_for(0, 100, 2) == 13
    assert launch_policy.grain_for(3, 100, 2) == 3
    assert launch_policy.grain_for(0, 1, 8) == 1


def test_auto_tries_every_candidate_then_keeps_the_fastest_median(monkeypatch):
    # the choice follows the recorded trial times; the times here come from a fake clock
    # (pool candidates dear, as waking a worker is for a tiny launch), so nothing depends
    # on how loaded the machine is; every trial is still a real launch
    op = ops.get("rmsnorm")
    launch = op.launch((3, 63))
    ck = compile_kernel(op.kernel, launch.consts, "packet,grain=auto,workers=2")
    inputs = op.make_inputs((3, 63), 0)
    bufs = ops.allocate(op, (3, 63), inputs)
    p = ck.prepare(launch.n, {**bufs, **launch.scalars})
    monkeypatch.setattr(runtime, "_auto", {})
    clock = [0]
    cost = {"lanes=8,caller": 100, "lanes=1,caller": 300}
    real_run = runtime.AutoChoice._run

    def timed_run(self, c, prepared):
        clock[0] += cost.get(c.label, 5000)
        return real_run(self, c, prepared)

    monkeypatch.setattr(runtime.AutoChoice, "_run", timed_run)
    monkeypatch.setattr(runtime, "time", type("FakeTime", (), {"perf_counter_ns": staticmethod(lambda: clock[0])}))
    choice = runtime.choose(p, 2)
    assert {c.label for c in choice.candidates} >= {"lanes=8,caller", "lanes=1,caller", "lanes=8,grain=1"}
    for i in range(runtime.TRIALS * len(choice.candidates)):
        assert choice.chosen is None, i
        bufs[op.output][:] = np.nan
        ck.run_prepared(p)
        assert bitwise_equal(bufs[op.output], ops.run_reference(op, (3, 63), inputs).reshape(-1))
    assert all(len(t) == runtime.TRIALS for t in choice.trials.values())
    assert choice.chosen is not None and choice.label == "lanes=8,caller"


def test_pool_shuts_down_at_exit_without_hanging():
    code = ("from cohort.refimpl import ops\nfrom cohort.backend.compiler import compile_kernel\n"
            "op = ops.get('swiglu'); s = (64, 256); L = op.launch(s)\n"
            "ck = compile_kernel(op.kernel, L.consts, 'packet,grain=1,workers=8')\n"
            "b = ops.allocate(op, s, op.make_inputs(s, 0)); ck.launch(L.n, {**b, **L.scalars})\n"
            "print('ok')\n")
    # a hang detector, not a speed test: the bound is generous for a loaded machine
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_relaunch_with_fresh_views_never_reuses_a_stale_argument_block():
    # launches keep the argument block of recently seen arrays; a new view object
    # (which may reuse a freed object's id) must never run on the old view's memory
    ck = compile_kernel(reads_past_the_end, None, "packet")
    big = np.arange(1000, dtype=np.float32)
    for start in range(0, 400, 37):
        y = np.zeros(16, np.float32)
        ck.launch(16, {"x": big[start:start + 17], "y": y})
        assert np.array_equal(y, big[start + 1:start + 17])


def test_relaunch_notices_a_reassigned_dtype():
    ck = compile_kernel(reads_past_the_end, None, "whole")
    x, y = np.arange(9, dtype=np.float32), np.zeros(8, np.float32)
    ck.launch(8, {"x": x, "y": y})
    x.dtype = np.int32   # same bytes, other dtype: must be rejected, not run
    from cohort.refimpl.errors import KernelError
    with pytest.raises(KernelError, match="dtype"):
        ck.launch(8, {"x": x, "y": y})


def test_overlapping_buffers_are_rejected_before_anything_runs():
    from cohort.refimpl.errors import KernelError
    ck = compile_kernel(reads_past_the_end, None, "packet")
    a = np.zeros(40, np.float32)
    with pytest.raises(KernelError, match="x and y overlap"):
        ck.launch(8, {"x": a[:9], "y": a[4:12]})
    with pytest.raises(KernelError, match="x and y overlap"):
        reads_past_the_end.interpret(8, x=a[:9], y=a[:8])
    assert not a.any()

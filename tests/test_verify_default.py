"""Defaults that cannot mislead (backend/verify_launch.py): `compile_kernel(...).launch` and
`cohort.torch.kernel_op` check the first launch of each new shape against the interpreter.
A kernel the interpreter rejects raises the interpreter's error before native code runs; a
build that disagrees raises LaunchMismatch; verify="never" is the explicit opt-out."""
from __future__ import annotations

import numpy as np
import pytest

from cohort import Buffer, KernelRuntimeError, barrier, f32, global_id, i32, kernel, shared, thread_id
from cohort.backend import inject, verify_launch
from cohort.backend.compiler import compile_kernel
from cohort.backend.verify_launch import LaunchMismatch


@kernel(block=8)
def shared_race(x: Buffer[f32], y: Buffer[f32]):
    s = shared(f32, 8)
    s[thread_id()] = x[global_id()]
    y[global_id()] = s[7 - thread_id()]          # no barrier


@kernel(block=8)
def uninitialised(x: Buffer[f32], y: Buffer[f32]):
    s = shared(f32, 16)
    s[thread_id()] = x[global_id()]
    barrier()
    y[global_id()] = s[thread_id() + 8]          # nobody stored slots 8..15


@kernel(block=8)
def write_conflict(y: Buffer[i32]):
    y[global_id() % 3] = global_id()             # several threads store one element


@kernel(block=8)
def halve(x: Buffer[i32], y: Buffer[i32]):
    y[global_id()] = x[global_id()] // 2


def _f32(n):
    return {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32)}


@pytest.mark.parametrize("variant", ["whole", "packet", "lanes=4"])
def test_a_kernel_the_interpreter_rejects_raises_its_error_and_touches_nothing(variant):
    for k, match in ((shared_race, r"load of shared s\[7\] races with the store by thread 7"),
                     (uninitialised, r"read of shared s\[8\] before any thread of block 0 stored to it")):
        args = _f32(16)
        with pytest.raises(KernelRuntimeError, match=match):
            compile_kernel(k, {}, variant, n=16).launch(16, args)
        assert not args["y"].any()                  # the native build never ran
    y = np.zeros(3, np.int32)
    with pytest.raises(KernelRuntimeError, match=r"write conflict: threads 0 and 3 both store to y\[0\]"):
        compile_kernel(write_conflict, {}, variant, n=16).launch(16, {"y": y})


def test_verify_never_is_the_explicit_opt_out():
    args = _f32(16)
    compile_kernel(shared_race, {}, "whole", n=16, verify="never").launch(16, args)   # runs, unchecked
    with pytest.raises(ValueError, match="verify must be one of 'first', 'always', 'never', got 'sometimes'"):
        compile_kernel(halve, {}, "whole", verify="sometimes")


@pytest.mark.parametrize("variant", ["whole", "packet"])
def test_a_build_that_disagrees_raises_a_mismatch_naming_the_element(variant):
    x = np.array([-3, 4, -5, 6, 7, -9, 1, 0, -1, 2], np.int32)
    with inject.inject_bug_TESTING_ONLY("div_pow2_shift"):
        ck = compile_kernel(halve, {}, variant, n=10)
        with pytest.raises(LaunchMismatch, match=r"kernel halve \[native, .*\], launch of n = 10: buffer y\[0\] "
                                                 r"is -2, the interpreter gives -1 \(4 elements differ\)"):
            ck.launch(10, {"x": x, "y": np.zeros(10, np.int32)})
        ck = compile_kernel(halve, {}, variant, n=10, verify="never")
        out = ck.launch(10, {"x": x, "y": np.zeros(10, np.int32)})["y"]
        assert out[0] == -2                          # what the opt-out would have returned


def test_first_checks_each_new_shape_once_and_always_every_launch(monkeypatch):
    runs = []
    real = verify_launch.interpret
    monkeypatch.setattr(verify_launch, "interpret", lambda *a, **k: runs.append(a[1]) or real(*a, **k))
    x = np.arange(40, dtype=np.int32)
    ck = compile_kernel(halve, {}, "packet")
    for n, length in ((20, 20), (20, 20), (24, 24), (20, 20), (20, 40)):
        out = ck.launch(n, {"x": x[:length], "y": np.zeros(length, np.int32)})
        assert out["y"][:n].tolist() == (x[:n] // 2).tolist()
    assert runs == [20, 24, 20]                      # a new n, a new buffer length: checked again
    runs.clear()
    ck = compile_kernel(halve, {}, "packet", verify="always")
    for _ in range(3):
        ck.launch(20, {"x": x[:20], "y": np.zeros(20, np.int32)})
    assert runs == [20, 20, 20]


def test_kernel_op_checks_its_first_call_too():
    torch = pytest.importorskip("torch")
    from cohort.torch import kernel_op
    op = kernel_op("cohort_test_verify::shared_race", shared_race, inputs=("x",), output="y",
                   shape=lambda x: x.shape, launch=lambda x: (x.numel(), {}))
    with pytest.raises(KernelRuntimeError, match=r"races with the store by thread 7"):
        op(torch.arange(16, dtype=torch.float32))
    quiet = kernel_op("cohort_test_verify::shared_race_unchecked", shared_race, inputs=("x",), output="y",
                      shape=lambda x: x.shape, launch=lambda x: (x.numel(), {}), verify="never")
    quiet(torch.arange(16, dtype=torch.float32))     # the opt-out: no check
    with pytest.raises(ValueError, match="verify must be one of"):
        kernel_op("cohort_test_verify::bad", halve, inputs=("x",), output="y", shape=lambda x: x.shape,
                  launch=lambda x: (x.numel(), {}), verify=True)


def test_a_fast_math_build_is_checked_for_the_kernels_errors_not_for_its_bits():
    args = _f32(16)
    with pytest.raises(KernelRuntimeError, match="races with the store"):
        compile_kernel(shared_race, {}, "packet-fast", n=16).launch(16, args)
    x = np.random.default_rng(0).integers(-50, 50, 40).astype(np.int32)
    out = compile_kernel(halve, {}, "packet-fast", n=40).launch(40, {"x": x, "y": np.zeros(40, np.int32)})
    assert out["y"].tolist() == (np.trunc(x / 2)).astype(np.int32).tolist()

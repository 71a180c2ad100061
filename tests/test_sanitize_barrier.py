"""Barrier divergence in the sanitizing build (`sanitize=on`, backend/lowering/sanitize_global.py).

The validator proves a barrier's `if` and `for` block-uniform, so only IR that bypasses it
(or a validator bug) can split a block at run time; a native build evaluates such control
for the block's thread 0 only. These tests make that IR the way a validator bug would: a
kernel the validator accepts, specialised, then its condition or bound replaced by a
thread-dependent one, compiled without validation. The sanitize build must report the
interpreter's divergence (threads that reach the barrier, threads that do not), never run on.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cohort import Buffer, KernelRuntimeError, barrier, f32, global_id, i32, kernel, shared, thread_id
from cohort.backend import codegen
from cohort.backend.compiler import CompiledKernel, _compile, compile_kernel
from cohort.backend.variant import parse_variant
from cohort.refimpl.interpreter import Interpreter
from cohort.refimpl.ir import DType, For, If, Op, binary, builtin, const
from cohort.refimpl.specialize import specialize

SANITIZE = ("whole,sanitize=on", "lanes=4,sanitize=on", "packet,sanitize=on", "packet-masked,sanitize=on",
            "packet,predicated=off,sanitize=on", "lanes=4,interleave=2,sanitize=on",
            "packet,grain=1,workers=2,sanitize=on")


@kernel(block=8)
def under_if(x: Buffer[f32], y: Buffer[f32], a: i32):
    t = thread_id()
    g = global_id()
    s = shared(f32, 8)
    s[t] = x[g] if g < len(x) else 0.0
    if a > 0:
        barrier()
    if g < len(y):
        y[g] = s[t] * 2.0


@kernel(block=8)
def under_else(x: Buffer[f32], y: Buffer[f32], a: i32):
    t = thread_id()
    g = global_id()
    s = shared(f32, 8)
    s[t] = x[g] if g < len(x) else 0.0
    if a > 0:
        s[t] = s[t] + 1.0
    else:
        barrier()
    if g < len(y):
        y[g] = s[t] * 2.0


@kernel(block=8)
def under_for(x: Buffer[f32], y: Buffer[f32], a: i32):
    t = thread_id()
    g = global_id()
    s = shared(f32, 8)
    s[t] = x[g] if g < len(x) else 0.0
    for k in range(a):
        barrier()
        s[t] = s[t] + 1.0
    if g < len(y):
        y[g] = s[t]


def _thread_dependent(k, stmt_type, **fields):
    """k specialised, the top-level `stmt_type` statement's fields replaced (no validation)."""
    k = specialize(k.ir, {})
    body = tuple(dataclasses.replace(s, **fields) if isinstance(s, stmt_type) else s for s in k.body)
    return dataclasses.replace(k, body=body)


def _tid_lt(c):
    return binary(Op.LT, builtin(Op.THREAD_ID), const(c, DType.I32))


SPLIT = {
    "if, thread_id() < 3": _thread_dependent(under_if, If, cond=_tid_lt(3)),
    "else, thread_id() < 5": _thread_dependent(under_else, If, cond=_tid_lt(5)),
    "for, range(thread_id())": _thread_dependent(under_for, For, stop=builtin(Op.THREAD_ID)),
    # only the partial last block splits: its threads 16..19 (live) skip the loop, its threads
    # 20..23 (past n, existing by the launch rule) run it once
    "for, range(global_id() // 20), last block":
        _thread_dependent(under_for, For, stop=binary(Op.DIV, builtin(Op.GLOBAL_ID), const(20, DType.I32))),
}


def _args(n=20):
    return {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32), "a": 1}


def _built(k, v):
    variant = parse_variant(v)
    return CompiledKernel(_compile(k, codegen.resolve(variant)), variant, "never")   # the general build


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_a_split_block_is_reported_in_the_interpreters_words(name):
    k = SPLIT[name]
    args = _args()
    with pytest.raises(KernelRuntimeError, match="barrier divergence in block") as ref:
        Interpreter(k, 20, {b: args[b] for b in ("x", "y")}, {"a": args["a"]}).run()
    for v in SANITIZE:
        with pytest.raises(KernelRuntimeError) as got:
            _built(k, v).launch(20, _args())
        assert str(got.value) == f"{ref.value} [native, {parse_variant(v).label}]", v


def test_without_the_detector_the_block_follows_thread_0():
    # what the check adds: the default build runs the barrier for the whole block (thread 0's
    # choice) and returns numbers
    k = SPLIT["if, thread_id() < 3"]
    _built(k, "packet").launch(20, _args())


def test_a_loop_whose_start_differs_is_refused():
    # equal trip counts, different starts: the interpreter runs it, a native build would give
    # every thread thread 0's loop variable; the sanitize build says so instead
    k = _thread_dependent(under_for, For, start=builtin(Op.THREAD_ID),
                          stop=binary(Op.ADD, builtin(Op.THREAD_ID), const(2, DType.I32)))
    for v in SANITIZE:
        with pytest.raises(KernelRuntimeError, match=r"starts at different values in the threads of block 0 "
                                                     r"\(thread 0: 0, thread 1: 1\)"):
            _built(k, v).launch(20, _args())


@pytest.mark.parametrize("k", [under_if, under_else, under_for])
@pytest.mark.parametrize("a", [0, 1, 3])
def test_uniform_control_runs_clean_with_the_same_bits(k, a):
    want = Interpreter(specialize(k.ir, {}), 20, {"x": np.arange(20, dtype=np.float32),
                                                   "y": np.zeros(20, np.float32)}, {"a": a})
    want.run()
    for v in SANITIZE:
        args = {**_args(), "a": a}
        off = {**_args(), "a": a}
        compile_kernel(k, {}, v, n=20, verify="never").launch(20, args)
        compile_kernel(k, {}, v.replace(",sanitize=on", ""), n=20, verify="never").launch(20, off)
        assert args["y"].tobytes() == want.buffers["y"].tobytes() == off["y"].tobytes(), v

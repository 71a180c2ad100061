"""The launch rule (DESIGN §2): a cooperative kernel (shared arrays or barriers) runs whole
blocks - every thread of a started block exists, global_id() >= n included, and guards itself -
while any other kernel keeps threads past n inactive. The CUDA-style guarded block reduction
must give the same bits in the interpreter, every native variant, the worker pool and
cohort.torch.kernel_op, and those bits must be the NumPy expectation."""
from __future__ import annotations

import numpy as np
import pytest

from cohort import (
    Buffer,
    KernelRuntimeError,
    atomic_add,
    barrier,
    block_id,
    block_sum,
    f32,
    global_id,
    i32,
    kernel,
    num_threads,
    shared,
    thread_id,
)
from cohort.backend.compiler import compile_kernel
from cohort.refimpl.interpreter import interpret

B = 32
SIZES = (33, 1000, 1003, 1024)
VARIANTS = ("whole", "packet", "lanes=4", "lanes=16", "packet-masked", "lanes=16,full_packet=off",
            "whole,checked=on", "packet,checked=on", "packet,unsafe=on",
            "packet,grain=1,workers=2", "packet,grain=3,workers=2", "whole,grain=2,workers=2",
            "lanes=4,grain=auto,workers=2", "packet,grain=0,workers=2")


@kernel(block=B)
def block_reduce(x: Buffer[i32], total: Buffer[i32], sums: Buffer[i32]):
    # the way every CUDA author writes it: one thread per element, guarded load, staged, tree
    t = thread_id()
    g = global_id()
    s = shared(i32, B)
    s[t] = x[g] if g < len(x) else 0
    barrier()
    for k in range(5):
        h = (B // 2) >> k
        if t < h:
            s[t] = s[t] + s[t + h]
        barrier()
    if t == 0:
        sums[block_id()] = s[0]
        atomic_add(total, 0, s[0])


@kernel(block=B)
def block_reduce_f32(x: Buffer[f32], sums: Buffer[f32]):
    t = thread_id()
    g = global_id()
    s = shared(f32, B)
    s[t] = x[g] if g < num_threads() else 0.0
    barrier()
    for k in range(5):
        h = (B // 2) >> k
        if t < h:
            s[t] = s[t] + s[t + h]
        barrier()
    if t == 0:
        sums[block_id()] = s[0]


def _blocks(n):
    return -(-n // B)


def _tree_f32(x, n):
    """The kernel's tree in float32, block by block (NumPy)."""
    v = np.zeros(_blocks(n) * B, np.float32)
    v[:n] = x
    v = v.reshape(-1, B)
    h = B // 2
    while h:
        v[:, :h] = v[:, :h] + v[:, h:2 * h]
        h //= 2
    return v[:, 0]


def _ints(n):
    return np.random.default_rng(n).integers(-1000, 1000, n).astype(np.int32)


def _run_int(run, n):
    x = _ints(n)
    out = run(n, {"x": x, "total": np.zeros(1, np.int32), "sums": np.full(_blocks(n), 7, np.int32)})
    return out["total"].copy(), out["sums"].copy()


@pytest.mark.parametrize("n", SIZES)
def test_the_guarded_block_reduction_is_the_numpy_sum_in_the_interpreter(n):
    x = _ints(n)
    total, sums = _run_int(lambda n, a: interpret(block_reduce.ir, n, a), n)
    pad = np.zeros(_blocks(n) * B, np.int64)
    pad[:n] = x
    assert sums.tolist() == pad.reshape(-1, B).sum(axis=1).tolist()
    assert total[0] == x.astype(np.int64).sum()


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_guarded_block_reduction_agrees_in_every_build(variant):
    for n in SIZES:
        ref = _run_int(lambda n, a: interpret(block_reduce.ir, n, a), n)
        ck = compile_kernel(block_reduce, {}, variant, n=n)
        got = _run_int(ck.launch, n)
        assert got[0].tolist() == ref[0].tolist() and got[1].tolist() == ref[1].tolist(), (variant, n)


@pytest.mark.parametrize("variant", ["whole", "packet", "lanes=4", "lanes=16", "packet-masked",
                                     "packet,grain=1,workers=2"])
def test_the_f32_tree_is_bit_identical_to_numpy(variant):
    for n in (33, 1003):
        x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
        want = _tree_f32(x, n)
        ref = interpret(block_reduce_f32.ir, n, {"x": x.copy(), "sums": np.zeros(_blocks(n), np.float32)})
        got = compile_kernel(block_reduce_f32, {}, variant, n=n).launch(
            n, {"x": x.copy(), "sums": np.zeros(_blocks(n), np.float32)})
        assert ref["sums"].view(np.uint32).tolist() == want.view(np.uint32).tolist()
        assert got["sums"].view(np.uint32).tolist() == want.view(np.uint32).tolist(), (variant, n)


# ---------------------------------------------------------------- what the rule changes, and not


@kernel(block=8)
def coop_unguarded(x: Buffer[f32], y: Buffer[f32]):
    s = shared(f32, 8)
    s[thread_id()] = x[global_id()]          # no guard: threads past n read past x
    barrier()
    y[global_id()] = s[7 - thread_id()]


@kernel(block=8)
def plain_unguarded(x: Buffer[f32], y: Buffer[f32]):
    y[global_id()] = x[global_id()] * 2.0    # not cooperative: threads past n are inactive


@kernel(block=8)
def counts(ones: Buffer[i32], staged: Buffer[i32], n_seen: Buffer[i32]):
    s = shared(i32, 8)
    s[thread_id()] = 1
    barrier()
    c = block_sum(1)                          # every thread of the block takes part
    if thread_id() == 0:
        ones[block_id()] = c
        staged[block_id()] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
        n_seen[block_id()] = num_threads()


@kernel(block=8)
def counts_plain(ones: Buffer[i32]):
    c = block_sum(1)                          # threads past n contribute the identity
    if thread_id() == 0:
        ones[block_id()] = c


@pytest.mark.parametrize("variant", ["ref", "whole", "packet", "lanes=4", "packet-masked", "lanes=4,checked=on"])
def test_an_unguarded_cooperative_kernel_reads_past_its_buffer_and_is_told_so(variant):
    args = {"x": np.zeros(11, np.float32), "y": np.zeros(11, np.float32)}
    with pytest.raises(KernelRuntimeError, match=r"load index 11 out of bounds for buffer x.*thread 11, block 1"
                       if variant == "ref" else r"load index 11 out of bounds \(thread 11, block 1\)"):
        if variant == "ref":
            interpret(coop_unguarded.ir, 11, args)
        else:
            compile_kernel(coop_unguarded, {}, variant, n=11, verify="never").launch(11, args)   # the build's own


@pytest.mark.parametrize("variant", ["ref", "whole", "packet", "lanes=4", "packet-masked"])
def test_every_thread_of_a_cooperative_block_exists_and_num_threads_is_n(variant):
    n = 11
    args = {"ones": np.zeros(2, np.int32), "staged": np.zeros(2, np.int32), "n_seen": np.zeros(2, np.int32)}
    plain = {"ones": np.zeros(2, np.int32)}
    if variant == "ref":
        out, out2 = interpret(counts.ir, n, args), interpret(counts_plain.ir, n, plain)
    else:
        out = compile_kernel(counts, {}, variant, n=n).launch(n, args)
        out2 = compile_kernel(counts_plain, {}, variant, n=n).launch(n, plain)
    assert out["ones"].tolist() == [8, 8] and out["staged"].tolist() == [8, 8]
    assert out["n_seen"].tolist() == [11, 11]
    assert out2["ones"].tolist() == [8, 3]


@pytest.mark.parametrize("variant", ["ref", "whole", "packet", "lanes=4"])
def test_a_kernel_without_shared_or_barrier_keeps_threads_past_n_inactive(variant):
    x = np.arange(11, dtype=np.float32)
    args = {"x": x, "y": np.zeros(11, np.float32)}
    out = (interpret(plain_unguarded.ir, 11, args) if variant == "ref"
           else compile_kernel(plain_unguarded, {}, variant, n=11).launch(11, args))
    assert out["y"].tolist() == (x * 2).tolist()


def test_cooperative_is_a_static_fact_of_the_statements():
    assert block_reduce.ir.cooperative and coop_unguarded.ir.cooperative and counts.ir.cooperative
    assert not plain_unguarded.ir.cooperative and not counts_plain.ir.cooperative


def test_through_kernel_op():
    torch = pytest.importorskip("torch")
    from cohort.torch import kernel_op
    op = kernel_op("cohort_test_launch_rule::block_reduce_f32", block_reduce_f32, inputs=("x",), output="sums",
                   shape=lambda x: (-(-x.numel() // B),), launch=lambda x: (x.numel(), {}))
    for n in (33, 1000, 1003):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        got = op(torch.from_numpy(x.copy())).numpy()
        ref = interpret(block_reduce_f32.ir, n, {"x": x.copy(), "sums": np.zeros(_blocks(n), np.float32)})
        assert got.view(np.uint32).tolist() == ref["sums"].view(np.uint32).tolist()
        assert got.view(np.uint32).tolist() == _tree_f32(x, n).view(np.uint32).tolist()

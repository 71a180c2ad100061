"""Transposed shared reads (backend/lowering/transposed.py): a loop reading shared slots
a_l + i at iteration i, the lanes strided, is read through a prologue that loads each
lane's window and transposes it in registers. It must read exactly what the gathers read,
in every variant, with windows leaving the array, counting down, under a mask; it must
not apply where the loop could change what it reads; and a safe build must still report
an index outside the array at the iteration that makes it."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from cohort import (
    Buffer,
    Const,
    KernelRuntimeError,
    barrier,
    block_id,
    f32,
    global_id,
    i32,
    kernel,
    num_threads,
    shared,
    thread_id,
)
from cohort.backend import compiler as _compiler
from cohort.backend.lowering.transposed import _coefficient
from cohort.refimpl import ops
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.ir import Op, binary, builtin, const, param, var
from cohort.verify.execute import execute
from cohort.verify.gen import BufferSpec, Case
from cohort.verify.matrix import variants_for

# this module checks the builds' own behaviour and errors: launches go straight to native
# code (the default verify="first" would report the interpreter's error before the build's)
compile_kernel = functools.partial(_compiler.compile_kernel, verify="never")

TILE = 320      # 20 rows of 16


@kernel(block=16)
def walk(x: Buffer[f32], y: Buffer[f32], T: Const[int], S: Const[int], OFF: Const[int]):
    """Thread t folds slots t*S + OFF + k of a staged tile, k < T: those inside the tile whose
    owner (slot % 16) is a thread below n (a per-lane guard; every thread of a partial block
    runs, DESIGN §2, so y holds whole blocks)."""
    t = thread_id()
    tile = shared(f32, TILE)
    for i in range(20):
        tile[i * 16 + t] = x[block_id() * TILE + i * 16 + t]
    barrier()
    acc = 0.0
    for k in range(T):
        j = t * S + OFF + k
        if j < TILE and block_id() * 16 + j % 16 < num_threads():
            acc = acc * 0.5 + tile[t * S + OFF + k]
    y[global_id()] = acc


@kernel(block=16)
def walk_down(x: Buffer[i32], y: Buffer[i32], T: Const[int], S: Const[int]):
    """Counting down, i32 slots, an offset from a variable set before the loop."""
    t = thread_id()
    tile = shared(i32, TILE)
    for i in range(20):
        tile[i * 16 + t] = x[block_id() * TILE + i * 16 + t]
    barrier()
    off = block_id() % 3
    acc = 0
    for k in range(T - 1, -1, -1):
        acc = (acc * 3) ^ (tile[t * S + off + (T - 1) - k] if t * S + off + T - 1 - k < TILE else 7)
    y[global_id()] = acc


@kernel(block=16)
def walk_rewritten(x: Buffer[f32], y: Buffer[f32], T: Const[int]):
    """The loop stores its own thread's slot of the array it walks: no prologue may read ahead."""
    t = thread_id()
    tile = shared(f32, TILE)
    for i in range(20):
        tile[i * 16 + t] = x[block_id() * TILE + i * 16 + t]
    barrier()
    acc = 0.0
    for k in range(T):
        acc = acc + tile[t * 16 + k % 16]
        tile[t * 16 + k % 16] = acc
    y[global_id()] = acc


@kernel(block=16)
def walk_scattered(x: Buffer[f32], y: Buffer[f32], T: Const[int]):
    """Lanes not a constant apart (rows (7t) % 16): every window read masked, lane by lane."""
    t = thread_id()
    tile = shared(f32, TILE)
    for i in range(20):
        tile[i * 16 + t] = x[block_id() * TILE + i * 16 + t]
    barrier()
    r = (t * 7) % 16
    acc = 0.0
    for k in range(T):
        acc = acc * 0.5 + tile[r * 20 + k]
    y[global_id()] = acc


@kernel(block=16)
def walk_partial(x: Buffer[f32], y: Buffer[f32], T: Const[int], s: i32):
    """A run-time trip count of at most T (a partial tile's loop): the prologue reads T windows."""
    t = thread_id()
    tile = shared(f32, TILE)
    for i in range(20):
        tile[i * 16 + t] = x[block_id() * TILE + i * 16 + t]
    barrier()
    acc = 0.0
    for k in range(min(T, s)):
        acc = acc * 0.5 + tile[t * 20 + k]
    y[global_id()] = acc


F, I = f32.dtype, i32.dtype


def _walk_case(n, T, S, OFF, seed=5):
    blocks = -(-n // 16)
    return Case(walk.ir, n, {"T": T, "S": S, "OFF": OFF},
                (BufferSpec("x", F, blocks * TILE, "finite"), BufferSpec("y", F, blocks * 16)), {}, seed)


CASES = {
    # T = 20 over W = 16: the second window of the last lanes leaves the tile (masked loads)
    "rows": lambda: _walk_case(48, 20, 20, 0),
    "strided_3": lambda: _walk_case(45, 33, 3, 2),      # a partial block: lanes past n masked by the guard
    "short": lambda: _walk_case(32, 2, 16, 5),
    "whole_tile": lambda: _walk_case(64, 64, 5, 0),
    "down": lambda: Case(walk_down.ir, 48, {"T": 19, "S": 19},
                         (BufferSpec("x", I, 3 * TILE), BufferSpec("y", I, 48)), {}, 2),
    "scattered": lambda: Case(walk_scattered.ir, 32, {"T": 20},
                              (BufferSpec("x", F, 2 * TILE, "finite"), BufferSpec("y", F, 32)), {}, 4),
    **{f"partial_{v}": (lambda v=v: Case(walk_partial.ir, 32, {"T": 20},
                                          (BufferSpec("x", F, 2 * TILE, "finite"), BufferSpec("y", F, 32)),
                                          {"s": np.int32(v)}, 6)) for v in (-3, 0, 1, 7, 20, 99)},
    "rewritten": lambda: Case(walk_rewritten.ir, 32, {"T": 20},
                              (BufferSpec("x", F, 2 * TILE, "finite"), BufferSpec("y", F, 32)), {}, 1),
}
VARIANTS = ("whole", "lanes=16,full_packet=on,predicated=on,private=cohort",
            "lanes=8,full_packet=on,predicated=on,private=cohort,interleave=max",
            "lanes=4,full_packet=off,predicated=off,private=thread",
            "lanes=8,full_packet=off,predicated=on,private=thread,checked=on",
            "lanes=4,full_packet=off,predicated=on,private=thread,unsafe=on",
            "lanes=4,full_packet=off,predicated=on,private=thread,grain=ragged,workers=3")


def _agree(case, variants):
    res = execute(case, variants_for(case, variants))
    assert res["discard"] is None, res["discard"]
    bad = {v: (r["status"], r.get("detail", "")[:300]) for v, r in res["variants"].items() if r["status"] != "ok"}
    assert not bad, bad


@pytest.mark.parametrize("name", sorted(CASES))
def test_walks_agree_with_the_interpreter(name):
    _agree(CASES[name](), VARIANTS)


@pytest.mark.parametrize("variant,reads", [("packet", 1), ("packet,lanes=16", 1), ("lanes=4,interleave=4", 1),
                                           ("packet,checked=on", 1), ("whole", 0)])
def test_the_walk_is_transposed_in_every_packet_build(variant, reads):
    ck = compile_kernel(walk, {"T": 20, "S": 20, "OFF": 0}, variant, n=48)
    assert ck.lowering_counts.get("transposed_reads", 0) == reads
    assert ck.lowering_counts.get("gathers", 0) == 0


def test_lanes_not_a_constant_apart_are_transposed_too():
    ck = compile_kernel(walk_scattered, {"T": 20}, "packet,lanes=16", n=32)
    assert ck.lowering_counts.get("transposed_reads") == 1 and not ck.lowering_counts.get("gathers")


def test_a_loop_of_at_most_a_constant_count_is_transposed():
    ck = compile_kernel(walk_partial, {"T": 20}, "packet,lanes=16", n=32)
    assert ck.lowering_counts.get("transposed_reads") == 1 and not ck.lowering_counts.get("gathers")


@kernel(block=32)
def many_walks(x: Buffer[f32], y: Buffer[f32]):
    """Six walks of 64 trips at 32 lanes: 8 KiB of scratch each, more than the stack allowed."""
    t = thread_id()
    tile = shared(f32, 64 * 32 + 64)
    for i in range(66):
        tile[i * 32 + t] = x[block_id() * 2112 + i * 32 + t]
    barrier()
    acc = 0.0
    for k in range(64):
        acc = acc + tile[t * 64 + k]
    for k in range(64):
        acc = acc * 0.5 + tile[t * 64 + 1 + k]
    for k in range(64):
        acc = acc - tile[t * 64 + 2 + k]
    for k in range(64):
        acc = acc * 0.25 + tile[t * 64 + 3 + k]
    for k in range(64):
        acc = acc + tile[t * 64 + 4 + k]
    for k in range(64):
        acc = acc * 0.75 + tile[t * 64 + 5 + k]
    y[global_id()] = acc


def test_the_prologues_stack_is_bounded_and_the_rest_gather():
    ck = compile_kernel(many_walks, {}, "packet,lanes=16,interleave=2", n=64)
    c = ck.lowering_counts
    assert c["transposed_reads"] == 4 and c["transposed_bytes"] == 4 * 8192 and c["gathers"] == 2
    case = Case(many_walks.ir, 64, {}, (BufferSpec("x", F, 2 * 2112, "finite"), BufferSpec("y", F, 64)), {}, 8)
    _agree(case, ("whole", "lanes=16,full_packet=on,predicated=on,private=cohort,interleave=2"))


def test_no_prologue_where_the_loop_writes_the_array_or_runs_once():
    ck = compile_kernel(walk_rewritten, {"T": 20}, "packet", n=32)
    assert not ck.lowering_counts.get("transposed_reads")
    ck = compile_kernel(walk, {"T": 1, "S": 20, "OFF": 0}, "packet", n=32)
    assert not ck.lowering_counts.get("transposed_reads")


@pytest.mark.parametrize("lanes", [8, 16])
def test_the_transpose_operator_reads_its_tile_without_gathers(lanes):
    op = ops.get("transpose")
    for shape in ((1, 64, 64), (3, 37, 70)):
        launch = op.launch(shape)
        ck = compile_kernel(op.kernel, launch.consts, f"packet,lanes={lanes}", n=launch.n)
        # two: the walk sits under `if row < R`, whose body the full path emits twice (all-on
        # and masked, stmts.varying_branch), each with its own prologue
        assert ck.lowering_counts["transposed_reads"] == 2 and not ck.lowering_counts.get("gathers")


def test_a_walk_past_the_tile_is_still_an_error_at_its_iteration():
    # no guard: lane 15 reads 15*20 + 19 + 5 = 324 >= 320 at k = 19 (the prologue reads that
    # window masked; the loop's own check reports the index)
    @kernel(block=16)
    def walk_oob(x: Buffer[f32], y: Buffer[f32]):
        t = thread_id()
        tile = shared(f32, TILE)
        for i in range(20):
            tile[i * 16 + t] = x[i * 16 + t]
        barrier()
        acc = 0.0
        for k in range(20):
            acc = acc + tile[t * 20 + 5 + k]
        y[global_id()] = acc
    args = lambda: {"x": np.ones(TILE, np.float32), "y": np.zeros(16, np.float32)}
    with pytest.raises(KernelRuntimeError, match="out of bounds"):
        interpret(walk_oob.ir, 16, args())
    for variant in ("packet", "packet,lanes=16", "lanes=4,checked=on"):
        with pytest.raises(KernelRuntimeError, match=r"shared array access index 320 out of bounds \(thread 15"):
            compile_kernel(walk_oob, {}, variant, n=16).launch(16, args())


def test_the_index_must_move_one_slot_per_iteration():
    k, t = var("k", i32.dtype), builtin(Op.THREAD_ID)
    c = lambda v: const(v, i32.dtype)
    assert _coefficient(binary(Op.ADD, binary(Op.MUL, t, c(32)), k), "k", set()) == 1
    assert _coefficient(binary(Op.SUB, c(9), k), "k", set()) == -1
    assert _coefficient(binary(Op.SHL, k, c(1)), "k", set()) == 2
    assert _coefficient(binary(Op.ADD, var("j", i32.dtype), k), "k", {"j"}) is None   # j changes in the loop
    assert _coefficient(binary(Op.MUL, k, param("T", i32.dtype)), "k", set()) is None  # factor unknown
    assert _coefficient(binary(Op.MOD, k, c(16)), "k", set()) is None
    assert _coefficient(binary(Op.ADD, binary(Op.MUL, t, c(3)), builtin(Op.BLOCK_ID)), "k", set()) == 0


def test_a_planted_transpose_slip_is_caught():
    from cohort.backend.inject import inject_bug_TESTING_ONLY
    case = CASES["rows"]()
    vs = ["lanes=8,full_packet=on,predicated=on,private=cohort", "lanes=16,full_packet=off,predicated=on,private=cohort"]
    _agree(case, vs)
    with inject_bug_TESTING_ONLY("transposed_last_stage"):
        bad = execute(case, variants_for(case, vs), full=True)
    assert all(r["status"] == "mismatch" for r in bad["variants"].values()), bad

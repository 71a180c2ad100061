"""The sanitizing build in global memory (`sanitize=on`, backend/lowering/sanitize_global.py):
planted races and write conflicts between threads of a launch must be reported natively in the
interpreter's words at every width, masked and branchy, checked and under the pool; correct
kernels must run clean with the same bits as the default build and the interpreter."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from cohort import (
    Buffer,
    KernelRuntimeError,
    atomic_add,
    atomic_max,
    barrier,
    block_id,
    f32,
    global_id,
    i32,
    kernel,
    shared,
    thread_id,
)
from cohort.backend.compiler import compile_kernel
from cohort.backend.sanitize_record import SHADOW_WORDS
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
from cohort.refimpl.interpreter import interpret

SANITIZE = ("whole,sanitize=on", "lanes=4,sanitize=on", "packet,sanitize=on", "packet-masked,sanitize=on",
            "packet,predicated=off,sanitize=on", "lanes=4,interleave=2,sanitize=on",
            "packet,checked=on,sanitize=on", "packet,grain=1,workers=2,sanitize=on",
            "whole,grain=1,workers=2,sanitize=on")


def _interp_error(k, n, args, consts=None) -> str:
    with pytest.raises(KernelRuntimeError) as ref:
        interpret(k.ir, n, args, consts)
    return str(ref.value)


def _native_error(k, variant, n, args, consts=None) -> str:
    with pytest.raises(KernelRuntimeError) as got:
        compile_kernel(k, consts or {}, variant, n=n, verify="never").launch(n, args)
    return str(got.value)


def _f32(n=24):
    return lambda: {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32)}


# ---------------------------------------------------------------- write conflicts


@kernel(block=8)
def all_to_one(x: Buffer[f32], y: Buffer[f32]):
    y[0] = x[global_id()]                        # every thread stores y[0]


@kernel(block=8)
def two_statements(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g]
    if g == 13:
        y[4] = 1.0                               # thread 4's element, stored again by thread 13


@kernel(block=8)
def tail_conflict(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g if g < 17 else 17] = x[g]                # only the partial last block: 17, 18, 19 -> y[17]


@kernel(block=8)
def tail_conflict_staged(x: Buffer[f32], y: Buffer[f32]):
    t = thread_id()
    g = global_id()
    s = shared(f32, 8)
    s[t] = x[g] if g < len(x) else 0.0
    barrier()
    # every thread of a started block exists (the launch rule): in the partial last block the
    # threads past n all store the buffer's last element
    y[g if g < len(y) else len(y) - 1] = s[7 - t]


EXACT = {"all_to_one": (all_to_one, 24, _f32()), "two_statements": (two_statements, 24, _f32()),
         "tail_conflict": (tail_conflict, 20, _f32(20)), "tail_conflict_staged": (tail_conflict_staged, 20, _f32(20))}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_a_planted_write_conflict_is_reported_in_the_interpreters_words(name):
    k, n, args = EXACT[name]
    ref = _interp_error(k, n, args())
    assert "write conflict: threads" in ref
    for v in SANITIZE:
        got = _native_error(k, v, n, args())
        assert got == f"{ref} [native, {parse_variant(v).label}]", v


@pytest.mark.parametrize("k", [tail_conflict, tail_conflict_staged])
def test_the_tail_only_conflict_is_silent_at_whole_blocks_and_agrees(k):
    # the same kernels at n = 16: no block is partial, nothing races, every bit agrees
    want = interpret(k.ir, 16, _f32(16)())["y"]
    for v in SANITIZE:
        got = compile_kernel(k, {}, v, n=16, verify="never").launch(16, _f32(16)())["y"]
        assert got.tobytes() == want.tobytes(), v


def test_without_the_detector_the_conflict_runs_silently():
    # what sanitize=on adds: the default build returns one of the stored values
    compile_kernel(all_to_one, {}, "packet", n=24, verify="never").launch(24, _f32()())


# ---------------------------------------------------------------- races


@kernel(block=8)
def neighbour(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g]
    if g + 1 < len(y):
        x[g] = y[g + 1]                          # thread g + 1's element, no order between them


@kernel(block=8)
def across_blocks(x: Buffer[f32], y: Buffer[f32], z: Buffer[f32]):
    t = thread_id()
    s = shared(f32, 8)
    s[t] = x[global_id()]
    if t == 0:
        y[block_id()] = s[0]
    barrier()                                    # orders block 0's threads, not block 1's
    z[global_id()] = y[0]


@kernel(block=8)
def add_and_store(y: Buffer[i32]):
    atomic_add(y, 0, 1)
    if global_id() == 11:
        y[0] = 5                                 # a plain store into the updated element


@kernel(block=8)
def add_and_max(y: Buffer[i32]):
    if global_id() < 12:
        atomic_add(y, 0, 1)
    else:
        atomic_max(y, 0, global_id())            # two operations on one element do not commute


@kernel(block=8)
def read_updated(y: Buffer[i32], z: Buffer[i32]):
    atomic_add(y, global_id() % 3, 1)
    z[global_id()] = y[(global_id() + 1) % 3]    # a load of an element others update


def _i32(n=24, m=24):
    return lambda: {"y": np.zeros(n, np.int32), **({"z": np.zeros(m, np.int32)} if m else {})}


RACES = {"neighbour": (neighbour, 24, _f32()),
         "across_blocks": (across_blocks, 24, lambda: {**_f32()(), "z": np.zeros(24, np.float32)}),
         "add_and_store": (add_and_store, 24, lambda: {"y": np.zeros(4, np.int32)}),
         "add_and_max": (add_and_max, 24, lambda: {"y": np.zeros(4, np.int32)}),
         "read_updated": (read_updated, 24, _i32(4, 24))}

_WORDS = re.compile(r"kernel (\w+), line (\d+): `[^`]*`: (?:(load|store|atomic_\w+\(\) update) (?:of|to) (\w+)\[(\d+)\] "
                    r"races with the (load|store|atomic_\w+\(\) update) by thread (\d+) in this launch|"
                    r"write conflict: threads (\d+) and (\d+) both store to (\w+)\[(\d+)\]) "
                    r"\(thread (\d+), block (\d+)\)")


def _pair(message: str):
    """(kernel, buffer, element, {the two threads}, {the two ways}) a race message names."""
    m = _WORDS.match(message)
    assert m, message
    g = m.groups()
    if g[2] is None:
        return g[0], g[9], int(g[10]), {int(g[7]), int(g[8])}, {"store"}
    return g[0], g[3], int(g[4]), {int(g[11]), int(g[6])}, {g[2], g[5]}


@pytest.mark.parametrize("name", sorted(RACES))
def test_a_planted_global_race_is_reported(name):
    k, n, args = RACES[name]
    ref = _interp_error(k, n, args())
    kname, buf, _, _, _ = _pair(ref)
    for v in SANITIZE:
        got = _native_error(k, v, n, args())
        assert got.endswith(f"[native, {parse_variant(v).label}]"), got
        # a build runs threads packet after packet, the interpreter a statement for all of them:
        # the pair it names can be another racing pair (sanitize_global.py), never another kind
        gk, gbuf, element, threads, _ = _pair(got)
        assert (gk, gbuf) == (kname, buf), (v, got, ref)
        assert len(threads) == 2, got
        if name == "neighbour":
            assert threads == {element - 1, element}, got
        if name == "across_blocks":
            assert element == 0 and 0 in threads and max(threads) >= 8, got


def test_the_packet_builds_name_the_interpreters_pair():
    # a packet runs a statement for its lanes at once, as the interpreter does (a whole build
    # runs thread after thread: test_a_planted_global_race_is_reported holds it to the kind)
    ref = _interp_error(neighbour, 24, _f32()())
    for v in [s for s in SANITIZE if not s.startswith("whole")]:
        assert _native_error(neighbour, v, 24, _f32()()) == f"{ref} [native, {parse_variant(v).label}]", v


@kernel(block=8)
def blocks_collide(x: Buffer[f32], y: Buffer[f32]):
    y[thread_id()] = x[global_id()]              # every block stores y[0..7]: blocks race


def test_a_pooled_launch_reports_the_interpreters_finding():
    # pool workers run blocks side by side and any of them may record a finding first; the
    # launch reports what a run in block order finds (sanitize_record.py), every time, and the
    # buffers the pooled run wrote were put back before that run
    x = np.arange(64, dtype=np.float32)
    ref = _interp_error(blocks_collide, 64, {"x": x, "y": np.zeros(8, np.float32)})
    for v in ("whole,grain=1,workers=2,sanitize=on", "packet,grain=1,workers=2,sanitize=on"):
        ck = compile_kernel(blocks_collide, {}, v, verify="never")
        for _ in range(10):
            with pytest.raises(KernelRuntimeError) as got:
                ck.launch(64, {"x": x, "y": np.zeros(8, np.float32)})
            assert str(got.value) == f"{ref} [native, {parse_variant(v).label}]"


def test_blocks_running_at_the_same_time_do_not_miss_each_other():
    # pool workers run blocks side by side: each access records itself before it checks, so of
    # two colliding blocks the later sees the earlier, whatever the interleaving
    ck = compile_kernel(blocks_collide, {}, "whole,grain=1,workers=2,sanitize=on", verify="never")
    for _ in range(20):
        with pytest.raises(KernelRuntimeError, match=r"write conflict: threads \d+ and \d+ both store to y\[\d\]"):
            ck.launch(64, {"x": np.ones(64, np.float32), "y": np.zeros(8, np.float32)})


# ---------------------------------------------------------------- what is not a race


@kernel(block=8)
def staged_in_global(x: Buffer[f32], y: Buffer[f32], z: Buffer[f32]):
    g = global_id()
    t = thread_id()
    s = shared(f32, 8)
    s[t] = x[g]
    y[g] = s[t] * 2.0
    barrier()                                    # orders the block's own threads: no race
    z[g] = y[g - t + (7 - t)] + y[g - t]


@kernel(block=8)
def counts(x: Buffer[i32], y: Buffer[i32]):
    g = global_id()
    atomic_add(y, x[g] % 5, 1)                   # many threads, one operation: they commute
    atomic_max(y, 5 + g % 3, g)


@kernel(block=8)
def reread(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g] + x[0]                           # x is never written: its loads are not tracked
    y[g] = y[g] * 2.0                            # a thread's own element, loaded and stored again


CLEAN = {"staged_in_global": (staged_in_global, 24, lambda: {**_f32()(), "z": np.zeros(24, np.float32)}),
         "counts": (counts, 24, lambda: {"x": np.arange(24, dtype=np.int32) * 7, "y": np.zeros(8, np.int32)}),
         "reread": (reread, 21, _f32(21))}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_correct_kernels_run_clean_with_the_same_bits(name):
    k, n, args = CLEAN[name]
    want = interpret(k.ir, n, args())
    for v in SANITIZE:
        off = compile_kernel(k, {}, v.replace(",sanitize=on", ""), n=n, verify="never").launch(n, args())
        got = compile_kernel(k, {}, v, n=n, verify="never").launch(n, args())
        for b in want:
            assert got[b].tobytes() == want[b].tobytes() == off[b].tobytes(), (v, b)


@pytest.mark.parametrize("op_name, shape", [("matmul", (7, 130, 19)), ("cumsum", (3, 300)),
                                            ("histogram", (5000, 300)), ("transpose", (2, 33, 45)),
                                            ("rmsnorm", (5, 70)), ("masked_softmax", (3, 50)), ("rope", (4, 66))])
@pytest.mark.parametrize("variant", ["whole,sanitize=on", "packet,sanitize=on",
                                     "packet,grain=1,workers=2,sanitize=on"])
def test_cohorts_operators_run_clean_and_agree(op_name, shape, variant):
    op = ops.get(op_name)
    launch = op.launch(shape)
    inputs = op.make_inputs(shape, 0)
    ref = interpret(op.kernel.ir, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars}, launch.consts)
    args = {**ops.allocate(op, shape, inputs), **launch.scalars}
    compile_kernel(op.kernel, launch.consts, variant, n=launch.n, verify="never").launch(launch.n, args)
    assert args[op.output].tobytes() == ref[op.output].tobytes()


def test_the_examples_block_sum_runs_clean_at_a_partial_block():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from block_sum import block_sum
    n = 100_003
    x = np.random.default_rng(1).integers(-1000, 1000, n).astype(np.int32)
    want = interpret(block_sum.ir, n, {"x": x, "sums": np.zeros(3126, np.int32)})["sums"]
    for v in ("packet,sanitize=on", "whole,grain=1,workers=2,sanitize=on"):
        got = compile_kernel(block_sum, {}, v, n=n, verify="never").launch(n, {"x": x, "sums": np.zeros(3126, np.int32)})
        assert got["sums"].tobytes() == want.tobytes(), v


# ---------------------------------------------------------------- the shadows' life


@kernel(block=8)
def scatter(idx: Buffer[i32], x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[idx[g]] = x[g]


def test_each_launch_starts_with_clean_shadows():
    # two launches of one build scatter through different permutations: each alone is clean,
    # together they would "race" if the second saw the first's accesses
    ck = compile_kernel(scatter, {}, "packet,grain=1,workers=2,sanitize=on", verify="never")
    rng = np.random.default_rng(3)
    for _ in range(3):
        p = rng.permutation(40).astype(np.int32)
        y = np.zeros(40, np.float32)
        ck.launch(40, {"idx": p, "x": np.arange(40, dtype=np.float32), "y": y})
        assert (y[p] == np.arange(40, dtype=np.float32)).all()
    p[5] = p[6]
    with pytest.raises(KernelRuntimeError, match=rf"write conflict: threads 5 and 6 both store to y\[{p[6]}\]"):
        ck.launch(40, {"idx": p, "x": np.arange(40, dtype=np.float32), "y": np.zeros(40, np.float32)})


def test_a_longer_buffer_gets_a_longer_shadow():
    # the pooled argument block's shadow grows with the buffers (ERR_SHADOW: nothing ran, rerun)
    ck = compile_kernel(all_to_one, {}, "packet,sanitize=on", verify="never")
    ck.launch(1, {"x": np.ones(1, np.float32), "y": np.zeros(1, np.float32)})
    with pytest.raises(KernelRuntimeError, match=r"write conflict: threads 0 and 1 both store to y\[0\]"):
        ck.launch(3000, _f32(3000)())
    p = ck.prepare(3000, _f32(3000)())          # a prepared launch comes with fitted shadows
    assert len(p.shadows) == 1 and p.shadows[0].size >= 3000 * SHADOW_WORDS
    with pytest.raises(KernelRuntimeError, match=r"write conflict: threads 0 and 1"):
        p.run()
    p.shadows.clear()                            # (as a block built by hand would be: no shadows)
    p.record[p.sanitized.shadows_at + 1] = 0
    with pytest.raises(KernelRuntimeError, match=r"write conflict: threads 0 and 1"):
        p.run()                                  # ERR_SHADOW: nothing ran, fitted, run again
    assert len(p.shadows) == 1


def test_the_native_timer_runs_a_prepared_sanitize_launch():
    # cohort time's path: a prepared block timed by the runtime's native entry, no Python
    # between the calls; the shadows fitted at prepare, repeats of one launch report nothing
    from cohort.backend import runtime
    ck = compile_kernel(staged_in_global, {}, "packet,sanitize=on", verify="never")
    args = {**_f32()(), "z": np.zeros(24, np.float32)}
    native = runtime.NativeLaunch(ck.prepare(24, args), ck.variant)
    native.launch()
    assert len(native.time(3, 3)) == 3
    want = interpret(staged_in_global.ir, 24, {**_f32()(), "z": np.zeros(24, np.float32)})
    assert args["z"].tobytes() == want["z"].tobytes()


def test_buffers_the_kernel_only_reads_have_no_shadow():
    ck = compile_kernel(reread, {}, "packet,sanitize=on", verify="never")
    p = ck.prepare(21, _f32(21)())
    p.run()
    assert ck.code.lowering_counts["globalchecks"] > 0
    assert p.sanitized.shadowed == ("y",)


def test_the_default_build_has_no_global_checks():
    ck = compile_kernel(neighbour, {}, "packet", verify="never")
    assert ck.code.lowering_counts.get("globalchecks", 0) == 0
    assert compile_kernel(neighbour, {}, "packet", verify="never").prepare(24, _f32()()).sanitized is None


@kernel(block=8)
def one_op_from_every_block(x: Buffer[i32], y: Buffer[i32]):
    g = global_id()
    atomic_max(y, g % 2, x[g])                   # every block updates y[0] and y[1] with one operation


def test_one_operation_from_blocks_running_at_once_is_not_a_race():
    # pool workers update one element at the same time: a worker that sees another's range
    # must see its operation too (published first), or it reads "no operation" as another one
    # (two blocks a launch, one on each worker: each launch starts both updates at once)
    n = 16
    x = np.arange(n, dtype=np.int32)
    for v in ("whole,grain=1,workers=2,sanitize=on", "packet,grain=1,workers=2,sanitize=on"):
        ck = compile_kernel(one_op_from_every_block, {}, v, verify="never")
        for _ in range(3000):
            y = np.zeros(2, np.int32)
            ck.launch(n, {"x": x, "y": y})
            assert y.tolist() == [n - 2, n - 1], v

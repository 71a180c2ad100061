"""Property tests for the reference interpreter's execution model (DESIGN §2, §3).

Inactive threads, divergent control flow (against hand-written per-thread
Python models), memory errors, write conflicts and races, launch argument
checks and private arrays. Every kernel runs through `kernel_fn.interpret`.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cohort import (
    Buffer,
    Const,
    KernelError,
    KernelRuntimeError,
    block_id,
    block_size,
    block_sum,
    f32,
    global_id,
    i32,
    kernel,
    num_threads,
    private,
    thread_id,
    u32,
)

I32_MIN, I32_MAX, U32_MAX = -(2 ** 31), 2 ** 31 - 1, 2 ** 32 - 1
BLOCKS = [1, 2, 4, 8, 16, 32, 64]
FAST = settings(max_examples=40, deadline=None)


def wrap_i32(v: int) -> int:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def c_mod(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return a - b * q


def runtime_error(fn, *a, **k) -> str:
    with pytest.raises(KernelRuntimeError) as ei:
        fn(*a, **k)
    return str(ei.value)


# ================================================================== 5. inactive threads

def _ids(y: Buffer[i32], t: Buffer[i32], b: Buffer[i32], nt: Buffer[i32], bs: Buffer[i32],
         x: Buffer[f32], z: Buffer[f32], sentinel: Buffer[i32]):
    i = global_id()
    y[i] = i + 1
    t[i] = thread_id()
    b[i] = block_id()
    nt[i] = num_threads()
    bs[i] = block_size()
    z[i] = x[i] * 2.0
    if i >= num_threads():              # only an inactive thread could take this branch
        sentinel[0] = i


@functools.lru_cache(maxsize=None)
def ids_kernel(B: int):
    return kernel(block=B)(_ids)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(BLOCKS), st.integers(0, 200))
@example(32, 33)
@example(64, 1)
@example(4, 0)
def test_inactive_threads_have_no_effects(B, n):
    y, t, b, nt, bs = (np.full(n, -7, np.int32) for _ in range(5))
    x = np.arange(n, dtype=np.float32)
    z = np.zeros(n, np.float32)
    sentinel = np.full(1, -7, np.int32)
    # len(buffers) == n: threads >= n of the last block would index out of bounds
    ids_kernel(B).interpret(n, y=y, t=t, b=b, nt=nt, bs=bs, x=x, z=z, sentinel=sentinel)
    g = np.arange(n)
    assert y.tolist() == (g + 1).tolist()
    assert t.tolist() == (g % B).tolist()
    assert b.tolist() == (g // B).tolist()
    assert nt.tolist() == [n] * n
    assert bs.tolist() == [B] * n
    assert z.tolist() == (2.0 * g).tolist()
    assert sentinel[0] == -7


# ================================================================== 6. divergent control flow

@kernel(block=8)
def branches(x: Buffer[i32], y: Buffer[i32], z: Buffer[i32]):
    i = global_id()
    v = x[i]
    r = 100
    w = -1
    if v > 10:
        if v % 3 == 0:
            r = v // 3
        else:
            r = v * 2
            w = 7
    elif v < -10:
        r = -v
        if v < -50:
            w = v
    else:
        if v == 0:
            w = 0
        else:
            r = r + v
    y[i] = r
    z[i] = w


def branches_model(v: int):
    r, w = 100, -1
    if v > 10:
        if c_mod(v, 3) == 0:
            r = v // 3                  # v > 0: truncation and floor agree
        else:
            r, w = v * 2, 7
    elif v < -10:
        r = -v
        if v < -50:
            w = v
    else:
        if v == 0:
            w = 0
        else:
            r = r + v
    return r, w


@FAST
@given(st.lists(st.integers(-100, 100), min_size=1, max_size=40))
def test_nested_divergent_if(xs):
    n = len(xs)
    y, z = np.zeros(n, np.int32), np.zeros(n, np.int32)
    branches.interpret(n, x=np.array(xs, np.int32), y=y, z=z)
    want = [branches_model(v) for v in xs]
    assert y.tolist() == [r for r, _ in want]
    assert z.tolist() == [w for _, w in want]


@kernel(block=4)
def loops(a: Buffer[i32], b: Buffer[i32], y: Buffer[i32], cnt: Buffer[i32], last: Buffer[i32]):
    i = global_id()
    acc = 0
    c = 0
    lj = -999
    for j in range(a[i], b[i]):
        acc = acc * 3 + j
        c += 1
        lj = j
    for j in range(b[i], a[i], -2):
        acc = acc ^ (j * 5)
        c += 1
    for j in range(a[i], b[i], 3):
        if j % 2 == 0:
            acc = acc - j
        else:
            for k in range(j, a[i] - 2, -1):
                acc += k
                c += 1
    y[i] = acc
    cnt[i] = c
    last[i] = lj


def loops_model(a: int, b: int):
    acc, c, lj = 0, 0, -999
    for j in range(a, b):
        acc = wrap_i32(acc * 3 + j)
        c += 1
        lj = j
    for j in range(b, a, -2):
        acc = acc ^ (j * 5)
        c += 1
    for j in range(a, b, 3):
        if c_mod(j, 2) == 0:
            acc = wrap_i32(acc - j)
        else:
            for k in range(j, a - 2, -1):
                acc = wrap_i32(acc + k)
                c += 1
    return acc, c, lj


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(-25, 25), st.integers(-25, 25)), min_size=1, max_size=24))
@example([(0, 0), (5, 5), (3, -3), (-20, 20)])
def test_per_thread_loop_trip_counts(ab):
    n = len(ab)
    a = np.array([p[0] for p in ab], np.int32)
    b = np.array([p[1] for p in ab], np.int32)
    y, cnt, last = (np.zeros(n, np.int32) for _ in range(3))
    loops.interpret(n, a=a, b=b, y=y, cnt=cnt, last=last)
    want = [loops_model(x, z) for x, z in ab]
    assert y.tolist() == [w[0] for w in want]
    assert cnt.tolist() == [w[1] for w in want]
    assert last.tolist() == [w[2] for w in want]       # zero-trip threads keep -999


@kernel(block=4)
def strided(a: Buffer[i32], b: Buffer[i32], y: Buffer[i32], step: Const[int]):
    i = global_id()
    s = 0
    for j in range(a[i], b[i], step):
        s = s * 7 + j + 1
    y[i] = s


@FAST
@given(st.sampled_from([-7, -3, -2, -1, 1, 2, 3, 8]),
       st.lists(st.tuples(st.integers(-30, 30), st.integers(-30, 30)), min_size=1, max_size=20))
def test_const_step_loops(step, ab):
    n = len(ab)
    y = np.zeros(n, np.int32)
    strided.interpret(n, {"step": step}, a=np.array([p[0] for p in ab], np.int32),
                      b=np.array([p[1] for p in ab], np.int32), y=y)
    want = []
    for lo, hi in ab:
        s = 0
        for j in range(lo, hi, step):
            s = wrap_i32(s * 7 + j + 1)
        want.append(s)
    assert y.tolist() == want


@kernel(block=4)
def loop_near_int_max(y: Buffer[i32], start: i32):
    i = global_id()
    c = 0
    for j in range(start + i, 2147483647, 2):
        c += 1
    y[i] = c


def test_loop_bounds_do_not_wrap():
    y = np.zeros(4, np.int32)
    loop_near_int_max.interpret(4, y=y, start=I32_MAX - 5)
    assert y.tolist() == [len(range(I32_MAX - 5 + i, I32_MAX, 2)) for i in range(4)]


# ================================================================== 7. memory errors

@kernel(block=4)
def load_at(x: Buffer[f32], idx: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[idx[i]]


@kernel(block=4)
def store_at(idx: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    y[idx[i]] = f32(i)


_OOB = re.compile(r"(load|store) index (-?\d+) out of bounds for (buffer|private array) (\w+) "
                  r"\(length (\d+)\) \(thread (\d+), block (\d+)\)")


def check_oob_message(msg, kname, stmt, what, kind, name, length, idx, B):
    assert f"kernel {kname}" in msg and stmt in msg, msg
    m = _OOB.search(msg)
    assert m, msg
    assert (m.group(1), m.group(3), m.group(4), int(m.group(5))) == (what, kind, name, length), msg
    v, t, blk = int(m.group(2)), int(m.group(6)), int(m.group(7))
    assert v == idx[t] and not 0 <= v < length and blk == t // B, msg


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.integers(1, 14), st.data())
@example(5, 1, None)
def test_out_of_bounds_load(L, n, data):
    if data is None:
        idx = np.array([-1], np.int32)
    else:
        idx = np.array(data.draw(st.lists(st.integers(-2, L + 1), min_size=n, max_size=n)), np.int32)
    x = np.arange(L, dtype=np.float32) + 0.5
    y = np.zeros(n, np.float32)
    bad = (idx < 0) | (idx >= L)
    if bad.any():
        msg = runtime_error(load_at.interpret, n, x=x, idx=idx, y=y)
        check_oob_message(msg, "load_at", "y[i] = x[idx[i]]", "load", "buffer", "x", L, idx, 4)
    else:
        load_at.interpret(n, x=x, idx=idx, y=y)
        assert y.tolist() == x[idx].tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.data())
def test_out_of_bounds_store(L, data):
    idx = np.array(data.draw(st.lists(st.integers(-2, L + 1), min_size=1, max_size=L + 4, unique=True)),
                   np.int32)
    n = len(idx)
    y = np.full(L, -1.0, np.float32)
    bad = (idx < 0) | (idx >= L)
    if bad.any():
        msg = runtime_error(store_at.interpret, n, idx=idx, y=y)
        check_oob_message(msg, "store_at", "y[idx[i]] = f32(i)", "store", "buffer", "y", L, idx, 4)
    else:
        store_at.interpret(n, idx=idx, y=y)
        want = np.full(L, -1.0)
        want[idx] = np.arange(n)
        assert y.tolist() == want.tolist()


def test_out_of_bounds_explicit_edges():
    x = np.arange(6, dtype=np.float32)
    for bad in (-1, 6):
        idx = np.array([0, 1, bad, 2], np.int32)
        msg = runtime_error(load_at.interpret, 4, x=x, idx=idx, y=np.zeros(4, np.float32))
        assert f"load index {bad} out of bounds for buffer x (length 6)" in msg and "thread 2" in msg
        assert "kernel load_at" in msg and "`y[i] = x[idx[i]]`" in msg
        msg = runtime_error(store_at.interpret, 4, idx=idx, y=np.zeros(6, np.float32))
        assert f"store index {bad} out of bounds for buffer y (length 6)" in msg and "thread 2" in msg
        assert "kernel store_at" in msg and "`y[idx[i]] = f32(i)`" in msg


@kernel(block=8)
def guarded(x: Buffer[f32], y: Buffer[f32], z: Buffer[f32], w: Buffer[f32], m: i32):
    i = global_id()
    if i < m:
        y[i] = x[i]
    z[i] = x[i] if i < m else -1.0
    if i < m and x[i] > 2.0:
        w[i] = 1.0
    else:
        w[i] = 0.0


@FAST
@given(st.integers(0, 40), st.integers(0, 40))
def test_guarded_loads_are_not_errors(m, n):
    x = np.arange(m, dtype=np.float32)           # only m elements: threads >= m must not load
    y, z, w = (np.full(n, 9.0, np.float32) for _ in range(3))
    guarded.interpret(n, x=x, y=y, z=z, w=w, m=m)
    g = np.arange(n)
    assert y.tolist() == np.where(g < m, g, 9.0).tolist()
    assert z.tolist() == np.where(g < m, g, -1.0).tolist()
    assert w.tolist() == np.where((g < m) & (g > 2), 1.0, 0.0).tolist()


@kernel(block=4)
def private_store_at(idx: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    p = private(f32, 4)
    p[idx[i]] = 1.0
    y[i] = p[0]


@kernel(block=4)
def private_load_at(idx: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    p = private(f32, 4)
    y[i] = p[idx[i]]


@FAST
@given(st.lists(st.integers(-2, 5), min_size=1, max_size=10))
def test_private_out_of_bounds(idxs):
    idx = np.array(idxs, np.int32)
    n = len(idx)
    bad = ((idx < 0) | (idx >= 4)).any()
    for kfn, what, stmt in ((private_store_at, "store", "p[idx[i]] = 1.0"),
                            (private_load_at, "load", "y[i] = p[idx[i]]")):
        y = np.full(n, 5.0, np.float32)
        if bad:
            msg = runtime_error(kfn.interpret, n, idx=idx, y=y)
            check_oob_message(msg, kfn.__name__, stmt, what, "private array", "p", 4, idx, 4)
        else:
            kfn.interpret(n, idx=idx, y=y)
            if kfn is private_store_at:
                assert y.tolist() == [1.0 if v == 0 else 0.0 for v in idx]
            else:
                assert y.tolist() == [0.0] * n


# ================================================================== 8. write conflicts and races

_CONFLICT = re.compile(r"write conflict: threads (\d+) and (\d+) both store to (\w+)\[(\d+)\]")


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 10), st.data())
def test_write_conflicts_in_one_statement(L, data):
    idxs = data.draw(st.lists(st.integers(0, L - 1), min_size=1, max_size=12))
    idx = np.array(idxs, np.int32)
    n = len(idx)
    y = np.full(L, -1.0, np.float32)
    if len(set(idxs)) < n:
        msg = runtime_error(store_at.interpret, n, idx=idx, y=y)
        assert "kernel store_at" in msg and "y[idx[i]] = f32(i)" in msg
        m = _CONFLICT.search(msg)
        assert m, msg
        a, b, name, addr = int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
        assert name == "y" and a != b and idx[a] == idx[b] == addr, msg
    else:
        store_at.interpret(n, idx=idx, y=y)
        want = np.full(L, -1.0)
        want[idx] = np.arange(n)
        assert y.tolist() == want.tolist()


@kernel(block=4)
def two_stores(y: Buffer[f32], k: i32):
    i = global_id()
    y[i] = 1.0
    if i == 0:
        y[k] = 2.0


@kernel(block=4)
def two_phases(y: Buffer[f32], k: i32):
    i = global_id()
    y[i] = 1.0
    s = block_sum(1.0)
    if i == 0:
        y[k] = s


@pytest.mark.parametrize("kfn", [two_stores, two_phases])
def test_write_conflicts_across_statements_and_phases(kfn):
    n = 7                               # blocks of 4: thread 7 is inactive
    second = 2.0 if kfn is two_stores else 4.0
    # the same thread storing twice is fine: the later store wins
    y = np.zeros(n, np.float32)
    kfn.interpret(n, y=y, k=0)
    assert y.tolist() == [second] + [1.0] * (n - 1)
    # another thread of the same block in the same phase, or of another block: a conflict;
    # a collective (like a barrier) orders the stores of one block (DESIGN §3)
    if kfn is two_phases:
        for k in (1, 3):
            y = np.zeros(n, np.float32)
            kfn.interpret(n, y=y, k=k)
            assert y[k] == 4.0 and y[0] == 1.0
    for k in ((1, 3, 5, 6) if kfn is two_stores else (5, 6)):
        msg = runtime_error(kfn.interpret, n, y=np.zeros(n, np.float32), k=k)
        m = _CONFLICT.search(msg)
        assert m and {int(m.group(1)), int(m.group(2))} == {0, k} and m.group(4) == str(k), msg
        assert f"kernel {kfn.__name__}" in msg and "y[k] = " in msg
    # y[7] is the address of the inactive thread 7, which stores nothing: no conflict
    y = np.zeros(n + 1, np.float32)
    kfn.interpret(n, y=y, k=n)
    assert y.tolist() == [1.0] * n + [second]


@kernel(block=4)
def publish_then_read(x: Buffer[f32], src: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    x[i] = f32(i) * 2.0
    s = block_sum(0.0)               # a barrier for the threads of one block
    y[i] = x[src[i]]


@kernel(block=4)
def publish_and_read(x: Buffer[f32], src: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    x[i] = f32(i) * 2.0
    y[i] = x[src[i]]


_RACE = re.compile(r"load of (\w+)\[(\d+)\] races with the store by thread (\d+)")


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 13), st.data())
def test_read_after_another_threads_store(n, data):
    L = n + 3
    src = np.array(data.draw(st.lists(st.integers(0, L - 1), min_size=n, max_size=n)), np.int32)
    B = 4
    g = np.arange(n)
    stored_by_other = (src < n) & (src != g)
    for kfn, barrier in ((publish_then_read, True), (publish_and_read, False)):
        x = np.full(L, -3.0, np.float32)
        y = np.zeros(n, np.float32)
        # across a barrier only a store by another *block* is a race
        race = stored_by_other & ((src // B != g // B) if barrier else True)
        if race.any():
            msg = runtime_error(kfn.interpret, n, x=x, src=src, y=y)
            m = _RACE.search(msg)
            assert m and f"kernel {kfn.__name__}" in msg and "y[i] = x[src[i]]" in msg, msg
            addr, writer = int(m.group(2)), int(m.group(3))
            t = int(re.search(r"\(thread (\d+),", msg).group(1))
            assert m.group(1) == "x" and addr == src[t] == writer and race[t], msg
        else:
            kfn.interpret(n, x=x, src=src, y=y)
            assert y.tolist() == [2.0 * s if s < n else -3.0 for s in src]


def test_read_after_store_same_block_across_barrier_explicit():
    # rotate within each block of 4: thread t reads what thread (t+1)%4 stored before the barrier
    n = 8
    src = np.array([(i // 4) * 4 + (i + 1) % 4 for i in range(n)], np.int32)
    y = np.zeros(n, np.float32)
    publish_then_read.interpret(n, x=np.zeros(n, np.float32), src=src, y=y)
    assert y.tolist() == [2.0 * s for s in src]
    msg = runtime_error(publish_and_read.interpret, n, x=np.zeros(n, np.float32), src=src,
                        y=np.zeros(n, np.float32))
    assert "races with the store by thread 1" in msg and "thread 0" in msg
    # across blocks even a barrier does not order: thread 0 reads block 1's store
    src2 = src.copy()
    src2[0] = 5
    msg = runtime_error(publish_then_read.interpret, n, x=np.zeros(n, np.float32), src=src2,
                        y=np.zeros(n, np.float32))
    assert "load of x[5] races with the store by thread 5" in msg


@kernel(block=4)
def read_then_publish(x: Buffer[f32], src: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[src[i]]
    x[i] = f32(i) * 2.0


@kernel(block=4)
def read_barrier_publish(x: Buffer[f32], src: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[src[i]]
    s = block_sum(0.0)
    x[i] = f32(i) * 2.0


@kernel(block=4)
def shift_right(x: Buffer[f32]):
    i = global_id()
    if i + 1 < num_threads():
        x[i + 1] = x[i]


_WAR = re.compile(r"store to (\w+)\[(\d+)\] races with the load by thread (\d+)")


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 13), st.data())
def test_store_after_another_threads_load(n, data):
    # Thread i reads x[src[i]], then thread src[i] stores there. Run threads one
    # after another (as a scalar variant may) and the reader sees the old or the
    # new value depending on the order: a race, unless a barrier of the same
    # block orders the load before the store.
    L = n + 3
    src = np.array(data.draw(st.lists(st.integers(0, L - 1), min_size=n, max_size=n)), np.int32)
    B = 4
    g = np.arange(n)
    read_by_other = (src < n) & (src != g)
    for kfn, barrier in ((read_barrier_publish, True), (read_then_publish, False)):
        x = np.full(L, -3.0, np.float32)
        x[:n] = np.arange(n) + 0.5
        x0 = x.copy()
        y = np.zeros(n, np.float32)
        race = read_by_other & ((src // B != g // B) if barrier else True)
        if race.any():
            msg = runtime_error(kfn.interpret, n, x=x, src=src, y=y)
            m = _WAR.search(msg)
            assert m and f"kernel {kfn.__name__}" in msg and "x[i] = f32(i) * 2.0" in msg, msg
            addr, reader = int(m.group(2)), int(m.group(3))
            t = int(re.search(r"\(thread (\d+),", msg).group(1))
            assert m.group(1) == "x" and addr == t and src[reader] == t and race[reader], msg
        else:
            kfn.interpret(n, x=x, src=src, y=y)
            assert y.tolist() == x0[src].tolist()           # every load saw the old value
            assert x[:n].tolist() == (2.0 * g).tolist()


def test_shift_in_place_is_a_race():
    # x[i+1] = x[i]: in lock step every thread reads the old x[i]; run thread 0
    # before thread 1 and thread 1 reads thread 0's store. No single answer.
    x = np.arange(8, dtype=np.float32)
    msg = runtime_error(shift_right.interpret, 8, x=x)
    assert "kernel shift_right" in msg and "x[i + 1] = x[i]" in msg
    assert "store to x[1] races with the load by thread 1" in msg and "(thread 0," in msg


# ================================================================== 9. launch checks

@kernel(block=4)
def axpy(x: Buffer[f32], y: Buffer[f32], idx: Buffer[i32], a: f32, k: i32, m: u32):
    i = global_id()
    y[i] = a * x[i] + f32(k) + f32(m) + f32(idx[i])


def _axpy_args(n=8):
    return dict(x=np.ones(n, np.float32), y=np.zeros(n, np.float32), idx=np.zeros(n, np.int32),
                a=2.0, k=1, m=3)


def launch_error(n, **changes) -> str:
    args = _axpy_args()
    for key, v in changes.items():
        if v is _DROP:
            del args[key]
        else:
            args[key] = v
    with pytest.raises(KernelError) as ei:
        axpy.interpret(n, **args)
    msg = str(ei.value)
    assert "axpy" in msg
    return msg


_DROP = object()


def test_launch_argument_checks():
    assert "dtype float32, got float64" in launch_error(8, x=np.ones(8))
    assert "dtype int32, got int64" in launch_error(8, idx=np.zeros(8, np.int64))
    assert "dtype int32, got uint32" in launch_error(8, idx=np.zeros(8, np.uint32))
    assert "not C-contiguous" in launch_error(8, x=np.ones(16, np.float32)[::2])
    assert "not C-contiguous" in launch_error(8, y=np.zeros((2, 4), np.float32, order="F"))
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    assert "read-only" in launch_error(8, y=ro)
    assert "NumPy array" in launch_error(8, x=[1.0] * 8)
    msg = launch_error(8, y=_DROP)
    assert "missing" in msg and "'y'" in msg
    msg = launch_error(8, z=np.zeros(8, np.float32))
    assert "unknown" in msg and "'z'" in msg
    assert "does not fit in i32" in launch_error(8, k=2 ** 31)
    assert "does not fit in i32" in launch_error(8, k=I32_MIN - 1)
    assert "does not fit in u32" in launch_error(8, m=-1)
    assert "does not fit in u32" in launch_error(8, m=2 ** 32)
    assert "scalar k is i32" in launch_error(8, k=1.5)
    assert "scalar a must be a f32 number" in launch_error(8, a="2")
    assert "scalar a must be a f32 number" in launch_error(8, a=True)
    assert "thread count n=-1" in launch_error(-1)
    assert "thread count n must be an int" in launch_error(8.0)
    with pytest.raises(KernelError, match="missing constant"):
        strided.interpret(1, a=np.zeros(1, np.int32), b=np.zeros(1, np.int32), y=np.zeros(1, np.int32))


def test_scalars_in_range_are_accepted():
    args = _axpy_args()
    args.update(k=I32_MIN, m=U32_MAX, a=np.float32(0.5))
    axpy.interpret(8, **args)
    want = (np.float32(0.5) * np.float32(1.0) + np.float32(I32_MIN)) + np.float32(U32_MAX)
    assert args["y"].tolist() == [want + np.float32(0.0)] * 8


def test_buffers_are_updated_in_place_including_2d():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((3, 4), np.float32)
    idx = np.zeros((2, 6), np.int32)
    y_before = y
    out = axpy.interpret(12, x=x, y=y, idx=idx, a=2.0, k=0, m=0)
    assert y is y_before and y.shape == (3, 4)
    assert y.tolist() == (2.0 * x).tolist()
    assert np.shares_memory(out["y"], y)
    # a C-contiguous view into a bigger array is updated in place too
    big = np.zeros((4, 8), np.float32)
    axpy.interpret(8, x=np.ones(8, np.float32), y=big[1], idx=np.zeros(8, np.int32), a=1.0, k=0, m=0)
    assert big[1].tolist() == [1.0] * 8 and not big[[0, 2, 3]].any()


# ================================================================== 10. private arrays

@kernel(block=8)
def priv(x: Buffer[i32], y: Buffer[i32], z: Buffer[i32], f: Buffer[f32]):
    i = global_id()
    p = private(i32, 8)
    q = private(f32, 3)
    z[i] = p[x[i] % 8]                          # read before any write: zero
    for j in range(0, x[i]):
        p[(j * 3 + i) % 8] = p[(j * 3 + i) % 8] + j + i
    t = block_sum(1)                            # private state survives a phase boundary
    s = 0
    for j in range(8):
        s = s * 5 + p[j]
    y[i] = s + t
    f[i] = q[i % 3]


def priv_model(gid: int, x: int, active_in_block: int):
    p = [0] * 8
    z = p[x % 8]
    for j in range(x):
        p[(j * 3 + gid) % 8] += j + gid
    s = 0
    for j in range(8):
        s = wrap_i32(s * 5 + p[j])
    return wrap_i32(s + active_in_block), z


@FAST
@given(st.lists(st.integers(0, 20), min_size=1, max_size=30))
def test_private_arrays_are_zeroed_and_per_thread(xs):
    n = len(xs)
    y, z = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
    f = np.full(n, -1.0, np.float32)
    priv.interpret(n, x=np.array(xs, np.int32), y=y, z=z, f=f)
    want = [priv_model(g, v, min(8, n - (g // 8) * 8)) for g, v in enumerate(xs)]
    assert y.tolist() == [w[0] for w in want]
    assert z.tolist() == [w[1] for w in want] == [0] * n
    assert f.view(np.uint32).tolist() == [0] * n            # +0.0 exactly


def test_count_flops_counts_active_threads_float_arithmetic_only():
    from cohort import exp, global_id, kernel
    from cohort.refimpl.interpreter import count_flops
    from cohort.refimpl.ir import walk_expr
    from cohort.refimpl.mathlib import template
    from cohort.refimpl.opdefs import FLOP_OPS

    @kernel(block=8)
    def k(x: Buffer[f32], y: Buffer[f32]):
        i = global_id()
        v = x[i]
        if i < 5:
            v = v * 2.0 + 1.0          # 2 ops on 5 threads
        y[i] = exp(v) if v > 0.0 else -v   # exp on the threads that take it; NEG is not counted

    x = np.array([1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6], np.float32)
    y = np.zeros_like(x)
    v = np.where(np.arange(11) < 5, x * 2 + 1, x)
    per_exp = len({id(e) for e in walk_expr(template("exp")) if e.op in FLOP_OPS and e.src[0].dtype.name == "F32"})
    assert per_exp > 10
    assert count_flops(k.ir, 11, {"x": x, "y": y}) == 2 * 5 + per_exp * int((v > 0).sum())

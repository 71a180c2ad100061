"""cohort.triton's check mode finds what a bit-for-bit comparison cannot: races between the
programs of a launch that no atomic orders (racecheck.py: vector clocks over Triton's memory
orders), and outputs that depend on the undefined masked-off lanes of a load without `other=`
(undefined.py). A lock, a last-program counter and plain atomics are not races; the same
kernels with `sem="relaxed"` are."""
import inspect

import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402

import cohort.triton as ct  # noqa: E402


def _check(kernel, grid, *args, **meta):
    with ct.on_cpu(mode="check"):
        kernel[grid](*args, **meta)


@triton.jit
def all_store_first(x, y, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs * 0, tl.load(x + offs))          # every program stores y[0]


@triton.jit
def reads_the_neighbour(x, y, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs) + 1.0)
    tl.store(y + offs, tl.load(x + (offs + BLOCK) % (4 * BLOCK)))   # the next program's elements


@triton.jit
def own_rows(x, y, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    tl.store(y + offs, v)
    tl.store(y + offs, tl.load(y + offs) * 2.0)       # a program's own elements, again: no race
    tl.store(x + offs, v + tl.load(x + 0 * offs))     # x[0]: read by every program, stored by program 0


def test_a_store_by_every_program_to_one_element_is_a_race():
    x, y = torch.arange(32, dtype=torch.float32), torch.zeros(4)
    with pytest.raises(ct.KernelRuntimeError, match=r"all_store_first.*program \(1, 0, 0\): store to argument `y` "
                       r"offset 0 races with the store by program \(0, 0, 0\) at line \d+: no atomic orders"):
        _check(all_store_first, (4,), x, y, BLOCK=8)
    for mode in ("reference", "native"):                  # the other modes do not look
        with ct.on_cpu(mode=mode):
            all_store_first[(4,)](x, torch.zeros(4), BLOCK=8)


def test_a_load_of_another_programs_store_is_a_race():
    x, y = torch.arange(32, dtype=torch.float32), torch.zeros(32)
    with pytest.raises(ct.KernelRuntimeError, match=r"program \(1, 0, 0\): store to argument `x` offset 8 races "
                       r"with the load by program \(0, 0, 0\)"):
        _check(reads_the_neighbour, (4,), x, y, BLOCK=8)


def test_an_element_one_program_stores_and_the_others_load_is_a_race():
    # whichever order the programs run in, program 0's store of x[0] and program 1's load of it
    # are unordered (the reference runs program 0 first: the race is found at the load)
    x, y = torch.arange(32, dtype=torch.float32), torch.zeros(32)
    with pytest.raises(ct.KernelRuntimeError, match=r"program \(1, 0, 0\): load of argument `x` offset 0 races "
                       r"with the store by program \(0, 0, 0\)"):
        _check(own_rows, (4,), x, y, BLOCK=8)


@triton.jit
def locked_sum(x, acc, lock, N, BLOCK: tl.constexpr, SEM: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + pid * N + cols, mask=cols < N, other=0)
    while tl.atomic_cas(lock, 0, 1, sem=SEM) == 1:
        pass
    tl.store(acc + cols, tl.load(acc + cols, mask=cols < N, other=0) + v, mask=cols < N)
    tl.atomic_xchg(lock, 0, sem=SEM)


def test_a_lock_orders_the_programs_and_relaxed_does_not():
    x = torch.arange(5 * 20, dtype=torch.int32).reshape(5, 20)
    acc, lock = torch.zeros(20, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    _check(locked_sum, (5,), x, acc, lock, 20, BLOCK=32, SEM="acq_rel")
    assert torch.equal(acc, x.sum(0, dtype=torch.int32))
    for sem in ("relaxed", "acquire", "release"):       # a lock needs both halves
        with pytest.raises(ct.KernelRuntimeError, match=r"program \(1, 0, 0\): load of argument `acc` offset 0 "
                           r"races with the store by program \(0, 0, 0\)"):
            _check(locked_sum, (5,), x, torch.zeros(20, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), 20,
                   BLOCK=32, SEM=sem)


@triton.jit
def last_program_sums(x, partial, count, out, BLOCK: tl.constexpr, SEM: tl.constexpr):
    # the CUDA threadfence reduction: each program stores its partial sum; the program that
    # takes the last ticket adds them all up
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    tl.store(partial + pid, tl.sum(tl.load(x + pid * BLOCK + tl.arange(0, BLOCK))))
    ticket = tl.atomic_add(count, 1, sem=SEM)
    if ticket == n - 1:
        offs = tl.arange(0, BLOCK)
        tl.store(out, tl.sum(tl.load(partial + offs, mask=offs < n, other=0)))


def test_the_last_program_pattern_is_ordered_by_its_counter():
    x = torch.arange(6 * 16, dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    _check(last_program_sums, (6,), x, torch.zeros(6, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), out,
           BLOCK=16, SEM="acq_rel")
    assert int(out) == int(x.sum())
    with pytest.raises(ct.KernelRuntimeError, match=r"program \(5, 0, 0\): load of argument `partial` offset 0 "
                       r"races with the store by program \(0, 0, 0\)"):
        _check(last_program_sums, (6,), x, torch.zeros(6, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
               torch.zeros(1, dtype=torch.int32), BLOCK=16, SEM="relaxed")


@triton.jit
def histogram(x, bins, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(bins + tl.load(x + offs, mask=offs < N, other=0) % 7, 1, mask=offs < N, sem="relaxed")


@triton.jit
def peek_counter(bins, seen):
    pid = tl.program_id(0)
    tl.atomic_add(bins, 1, sem="relaxed")
    tl.store(seen + pid, tl.load(bins))               # a plain load of what others update atomically


def test_atomics_do_not_race_with_each_other_but_with_plain_accesses():
    x = torch.arange(100, dtype=torch.int32) * 13
    bins = torch.zeros(7, dtype=torch.int32)
    _check(histogram, (4,), x, bins, 100, BLOCK=32)
    assert torch.equal(bins, torch.bincount(x % 7, minlength=7).to(torch.int32))
    with pytest.raises(ct.KernelRuntimeError, match=r"program \(1, 0, 0\): atomic update of argument `bins` "
                       r"offset 0 races with the load by program \(0, 0, 0\)"):
        _check(peek_counter, (3,), torch.zeros(1, dtype=torch.int32), torch.zeros(3, dtype=torch.int32))


@triton.jit
def spin_on_a_taken_lock(lock, y):
    # every program tries a lock nobody releases: the failed compare-and-swaps only read it
    pid = tl.program_id(0)
    got = tl.atomic_cas(lock, 0, 1)
    tl.store(y + pid, got)


def test_a_failed_compare_and_swap_is_a_read():
    y = torch.full((3,), -1, dtype=torch.int32)
    _check(spin_on_a_taken_lock, (3,), torch.zeros(1, dtype=torch.int32), y)
    assert y.tolist() == [0, 1, 1]


def test_sem_must_be_a_memory_order():
    with pytest.raises(ct.TritonError, match=r"sem='seq_cst'"):
        _check(locked_sum, (1,), torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32),
               torch.zeros(1, dtype=torch.int32), 4, BLOCK=4, SEM="seq_cst")


# ---------------------------------------------------------------- undefined lanes


@triton.jit
def masked_sum(x, y, N, BLOCK: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if OTHER:
        v = tl.load(x + offs, mask=offs < N, other=0.0)
    else:
        v = tl.load(x + offs, mask=offs < N)
    tl.store(y, tl.sum(v))


@triton.jit
def masked_copy(x, y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < N) * 2.0, mask=offs < N)   # the tutorials' vector add


def _line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_sum_over_undefined_lanes_is_reported_at_the_load():
    x = torch.arange(10, dtype=torch.float32)
    line = _line_of(masked_sum, "mask=offs < N)\n")
    with pytest.raises(ct.KernelRuntimeError, match=rf"masked_sum` \(.*:{line}\): argument `y` offset 0 depends on the "
                       r"masked-off lanes of this load \(program \(0, 0, 0\) stored it\).*give it `other=`"):
        _check(masked_sum, (1,), x, torch.zeros(1), 10, BLOCK=16, OTHER=False)
    y = torch.zeros(1)
    _check(masked_sum, (1,), x, y, 10, BLOCK=16, OTHER=True)
    assert float(y) == 45.0


def test_undefined_lanes_that_are_never_stored_are_fine():
    x, y = torch.arange(100, dtype=torch.float32), torch.zeros(100)
    _check(masked_copy, (4,), x, y, 100, BLOCK=32)
    assert torch.equal(y, x * 2)


# ---------------------------------------------------------------- NaNs


@triton.jit
def dot_16(x, y, z, out):
    r = tl.arange(0, 16)
    i = r[:, None] * 16 + r[None, :]
    tl.store(out + i, tl.dot(tl.load(x + i), tl.load(y + i), tl.load(z + i)))


def test_check_mode_counts_every_nan_equal_to_every_nan():
    # NaNs of both signs meet in tl.dot's fma chain: which sign survives is the target's (DESIGN §3:
    # every NaN equals every NaN); check mode compares the rest bit for bit
    g = torch.Generator().manual_seed(0)
    vals = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, 1.0, -2.0, 1e30])
    x, y, z = (vals[torch.randint(0, 8, (256,), generator=g)] for _ in range(3))
    out = torch.zeros(256)
    _check(dot_16, (1,), x, y, z, out)
    ref = torch.zeros(256)
    with ct.on_cpu(mode="reference"):
        dot_16[(1,)](x, y, z, ref)
    assert out.isnan().any() and torch.equal(out.isnan(), ref.isnan())
    assert torch.equal(out[~out.isnan()], ref[~ref.isnan()])


def test_a_nan_against_a_number_is_still_a_mismatch():
    import numpy as np

    from cohort.triton import native
    from cohort.triton.interp import Buffer
    from cohort.triton.tir import Dt
    a = Buffer(np.array([np.nan, 1.0], np.float32), 0, Dt.F32)
    b = Buffer(np.array([-np.nan, 2.0], np.float32), 0, Dt.F32)
    assert list(native._nan(a.flat, Dt.F32) & native._nan(b.flat, Dt.F32)) == [True, False]
    bf = np.array([0x7FC0, 0xFFC1, 0x7F80, 0x3F80], np.uint16)         # NaN, NaN, +inf, 1.0
    assert list(native._nan(bf, Dt.BF16)) == [True, True, False, False]


@triton.jit
def scalar_stores(x, out, flag):
    pid = tl.program_id(0)
    tl.store(out + pid, tl.load(x) + pid)               # x: read by every program, written by none
    tl.store(flag, 1)                                   # one element, every program


def test_scalar_accesses_and_unwritten_inputs():
    from cohort.triton import launch, racecheck
    x, out, flag = torch.ones(1), torch.zeros(4), torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ct.KernelRuntimeError, match=r"program \(1, 0, 0\): store to argument `flag` offset 0 races "
                       r"with the store by program \(0, 0, 0\)"):
        _check(scalar_stores, (4,), x, out, flag)
    bound = launch.bind(scalar_stores, (x, out, flag), {})
    params, consts, _, _ = launch.specialise(scalar_stores, bound)
    prog = launch.build(scalar_stores, params, consts)
    assert racecheck.written_arguments(prog) == {"out", "flag"}      # x gets no records


@triton.jit
def masked_max_int(x, y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y, tl.max(tl.load(x + offs, mask=offs < N), axis=0))


def test_an_integer_max_over_undefined_lanes_is_reported():
    # the lanes hold 0 in the reference: all-negative inputs make the max 0, which the probe's
    # other values change
    x = -torch.arange(1, 11, dtype=torch.int32)
    with pytest.raises(ct.KernelRuntimeError, match=r"argument `y` offset 0 depends on the masked-off lanes"):
        _check(masked_max_int, (1,), x, torch.zeros(1, dtype=torch.int32), 10, BLOCK=16)

"""The native lowering's fast paths give the reference's bits where they apply and stand aside
where they do not: exp/exp2 below the bound where the reference is +0 (no underflowing
multiply), the launch fast path (native_launch.py) on every kind of argument."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402

import cohort.triton as ct  # noqa: E402
from cohort.triton.mathx import math_f32  # noqa: E402
from cohort.triton.native_ops import ZERO_BELOW  # noqa: E402


def _bits(t):
    t = t.detach().contiguous()
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16 if t.element_size() == 2 else torch.int8
                  if t.element_size() == 1 else torch.int64).numpy().copy()


def _both(kernel, grid, make, **meta):
    """The kernel's outputs (bits) in reference and native mode, from fresh arguments each."""
    outs = []
    for mode in ("reference", "native"):
        args = make()
        with ct.on_cpu(mode=mode):
            kernel[grid](*args, **meta)
            if mode == "native":
                kernel[grid](*args, **meta)          # the second launch takes the launch fast path
        outs.append([_bits(a) for a in args if isinstance(a, torch.Tensor)])
    return outs


@pytest.mark.parametrize("name", sorted(ZERO_BELOW))
def test_zero_below_is_where_the_reference_is_zero(name):
    bound = np.uint32(ZERO_BELOW[name]).view(np.float32)
    lo = np.float32(bound * np.float32(1.02))          # a window below the bound, every float of it
    x = np.arange(ZERO_BELOW[name], np.float32(lo).view(np.uint32) + 1, dtype=np.uint32).view(np.float32)
    y = math_f32(name, x)
    assert y[0] != 0                                    # the bound itself is not +0 ...
    assert not y[1:].view(np.uint32).any()             # ... every float below it is
    assert not math_f32(name, np.array([-np.inf, -3e38], np.float32)).view(np.uint32).any()


@triton.jit
def exp_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, tl.exp(x))
    tl.store(out_ptr + BLOCK + o, tl.exp2(x * 1.5))
    tl.store(out_ptr + 2 * BLOCK + o, tl.sigmoid(-x))


def test_exp_near_and_below_the_zero_bound_is_the_reference():
    special = []
    for name in ("exp", "exp2"):
        b = ZERO_BELOW[name]
        for d in (-2, -1, 0, 1, 2):                     # the bound and its neighbours on both sides
            special.append(np.uint32(b + d).view(np.float32))
    special = np.array(special + [-np.inf, np.nan, -1e30, -100.0, -87.5, -126.0, 0.0, -0.0, 88.0, 1.0],
                       np.float32)
    sub = np.float32(special / np.float32(1.5))         # exp2's operand is x * 1.5
    x = np.concatenate([special, sub, np.linspace(-160, 5, 64 - 2 * special.size, dtype=np.float32)])
    low = np.full(16, -np.inf, np.float32)               # packets below the bound in every lane ...
    one = np.full(16, -120.0, np.float32)                # ... and in all lanes but one
    one[11] = np.uint32(ZERO_BELOW["exp"]).view(np.float32)
    x = np.concatenate([x, low, one, low, one])
    xt = torch.from_numpy(x)
    ref, nat = _both(exp_kernel, (1,), lambda: (xt.clone(), torch.zeros(3 * 128)), BLOCK=128)
    for a, b in zip(ref, nat):
        assert np.array_equal(a, b)


@triton.jit
def scalar_kernel(out_ptr, f, n, m: tl.int64, flag, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, (o + n).to(tl.float64) * 2 + f + m)
    tl.store(out_ptr + BLOCK + o, (o * 0 + n * 3).to(tl.float64) + flag)   # n * 3 wraps as n's type


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")    # launch.specialise's
@pytest.mark.parametrize("f", [0.1, 1.0000000596046448, -0.0, float("inf"), float("nan"), 1e39, -1e39, 1e-46,
                               7e-46, 3.4028235677973366e38, 5])
def test_launch_fast_path_rounds_float_arguments_as_the_general_path(f):
    ref, nat = _both(scalar_kernel, (1,), lambda: (torch.zeros(32, dtype=torch.float64), f, 3, 7, True), BLOCK=16)
    assert np.array_equal(ref[0], nat[0])


def test_launch_fast_path_respecialises_on_int_classes_and_kinds():
    """One kernel launched again and again: each launch with an argument of another kind or
    int class (1, i32, i64, u64, an annotated int64 beyond i32, a bool, another dtype, another
    constexpr) gives the reference's bits, never the earlier plan's."""
    launches = [(3, 7, True, torch.float64, 16), (1, 7, True, torch.float64, 16), (2 ** 40, 7, False, torch.float64, 16),
                (-2 ** 31, 2 ** 40, True, torch.float64, 16), (2 ** 63 + 5, -3, True, torch.float64, 16),
                (-5, 7, 1, torch.float64, 16), (5, 7, True, torch.float32, 16), (5, 7, True, torch.float64, 8),
                (3, 7, True, torch.float64, 16)]
    for n, m, flag, dt, block in launches:
        outs = []
        for mode in ("reference", "native", "native"):
            out = torch.zeros(32, dtype=dt)
            with ct.on_cpu(mode=mode):
                scalar_kernel[(1,)](out, 0.5, n, m, flag, BLOCK=block)
            outs.append(_bits(out))
        assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2]), (n, m, flag, dt, block)


def test_launch_fast_path_keeps_the_keyword_check():
    x, y = torch.randn(64), torch.zeros(64)
    with ct.on_cpu(mode="native"):
        for _ in range(2):
            offset_copy_kernel[(1,)](x, y, 64, BLOCK=64, num_warps=4)     # a launch option: accepted
        with pytest.raises(ct.LaunchError, match="bogus"):
            offset_copy_kernel[(1,)](x, y, 64, BLOCK=64, bogus=4)         # as many keywords, one unknown


@triton.jit
def offset_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n, other=-1.0), mask=o < n)


@pytest.mark.parametrize("threads", [1, 2])
def test_launch_fast_path_views_grids_and_errors(threads):
    """Tensors that are views (a storage offset, a strided slice), a grid given as a function
    of the meta-parameters and as a 2-tuple, and an out-of-bounds access: the reference's
    bits and its message, launch after launch."""
    base = torch.randn(400, generator=torch.Generator().manual_seed(1))
    grid_fn = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    for x_of, n, grid in ((lambda: base[7:], 300, grid_fn), (lambda: base[::2], 150, (5, 1)),
                          (lambda: base[100:], 300, grid_fn)):
        outs = []
        for mode in ("reference", "native", "native"):
            y = torch.zeros(310)
            with ct.on_cpu(mode=mode, threads=threads):
                offset_copy_kernel[grid](x_of(), y, n, BLOCK=64)
            outs.append(_bits(y))
        assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    msgs = []
    for mode in ("reference", "native", "native"):
        with ct.on_cpu(mode=mode, threads=threads):
            with pytest.raises(ct.KernelRuntimeError) as e:
                offset_copy_kernel[(4,)](base[300:], torch.zeros(300), 250, BLOCK=64)   # x holds 100 elements
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] == msgs[2] and "out of bounds" in msgs[0]


@triton.jit
def carried_pointer_kernel(x_ptr, out_ptr, n, step, ustep, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    p = x_ptr + r * C + c                    # advanced by a constant, a scalar, an unsigned scalar
    q = x_ptr + c * R + r                    # transposed: not consecutive along the packet
    other = x_ptr + (r + c) % 3
    w = x_ptr + r * C + c                    # two bases: stays a tile
    v = x_ptr + r * C + c                    # a non-uniform increment: stays a tile
    acc = tl.zeros((R, C), tl.float32)
    for i in range(n):
        acc += tl.load(p, mask=(r + i) < 2 * R, other=-1.0) * 2.0 + tl.load(q) + tl.load(w) * 3.0 + tl.load(v) * 5.0
        p += C
        p = p + step
        p -= step
        p += ustep
        q += 1
        if i % 2 == 0:
            w = other + 1
        else:
            w = w + 2
        v = v + r
    tl.store(out_ptr + r * C + c, acc)
    tl.store(out_ptr + R * C + r * C + c, tl.load(p, mask=r < 2, other=5.0))   # p after the loop


def test_loop_carried_pointer_tiles_are_the_reference():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(2))
    for n, step, ustep in ((5, 3, 0), (0, 1, 0), (7, -64, 16)):
        ref, nat = _both(carried_pointer_kernel, (1,), lambda: (x.clone(), torch.zeros(2 * 8 * 32), n, step, ustep),
                         R=8, C=32)
        for a, b in zip(ref, nat):
            assert np.array_equal(a, b), (n, step, ustep)


def test_loop_carried_pointer_out_of_bounds_is_the_references_message():
    x = torch.randn(8 * 32 + 40)
    msgs = []
    for mode in ("reference", "native"):
        with ct.on_cpu(mode=mode):
            with pytest.raises(ct.KernelRuntimeError) as e:
                carried_pointer_kernel[(1,)](x, torch.zeros(2 * 8 * 32), 3, 0, 0, R=8, C=32)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "out of bounds" in msgs[0]


@triton.jit
def carried_tiles_kernel(a_ptr, b_ptr, out_ptr, n, N: tl.constexpr, NEVER: tl.constexpr):
    r = tl.arange(0, N)[:, None]
    c = tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + r * N + c)
    b = tl.load(b_ptr + r * N + c)
    acc = tl.zeros((N, N), tl.float32) + 0.5
    acc2 = acc
    total = tl.zeros((N, N), tl.float32)
    acc3 = a + r * 0.25
    for i in range(n):
        old = acc
        if NEVER:
            a = a + 1.0                       # carried, never assigned: the dot reads what the copy reads
        acc = tl.dot(a, b, acc * 0.5)         # into the accumulator's own array
        total += old                          # the carried value, read after acc's next one is made
        acc2 = tl.dot(acc2, b, acc2)          # acc2 as an operand and the accumulator
        s = tl.sum(acc2, axis=1)[:, None]
        acc2 = acc2 - s * 0.001               # a reduction of the variable being assigned
        acc2 = tl.trans(acc2) + 1.0
        acc3 = tl.trans(acc3) * 0.5 + 1.0     # becomes an assignment of acc3 reading acc3's moved elements
    tl.store(out_ptr + r * N + c, acc)
    tl.store(out_ptr + N * N + r * N + c, total)
    tl.store(out_ptr + 2 * N * N + r * N + c, acc2)
    tl.store(out_ptr + 3 * N * N + r * N + c, acc3)


def test_loop_carried_tiles_coalesced_are_the_reference():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(32, 32, generator=g) * 0.1, torch.randn(32, 32, generator=g) * 0.1
    for n in (0, 1, 3):
        ref, nat = _both(carried_tiles_kernel, (1,), lambda: (a.clone(), b.clone(), torch.zeros(4 * 32 * 32), n),
                         N=32, NEVER=False)
        for x, y in zip(ref, nat):
            assert np.array_equal(x, y), n


@triton.jit
def shifted_copy_kernel(x_ptr, y_ptr, n, lshift, sshift, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o + lshift, mask=o < n, other=2.0)
    tl.store(y_ptr + o + sshift, x * 3.0, mask=o < n)


@pytest.mark.parametrize("n,lshift,sshift,what", [
    (1000, 0, 0, None), (1024, 0, 0, None), (1000, 7, 8, None), (1000, -3, 0, "load"), (1024, 8, 0, "load"),
    (1000, 0, -1, "store"), (1024, 0, 9, "store"), (200, -1, 0, "load")])
def test_whole_tile_accesses_check_what_they_skip(n, lshift, sshift, what):
    """A 1-D access whose every packet is consecutive and inside skips the packets' checks; one
    that starts before the storage or ends after it (an active element) is the reference's
    error, in the first or the last program, load or store."""
    x = torch.randn(1024 + 7, generator=torch.Generator().manual_seed(6))
    results = []
    for mode in ("reference", "native", "native"):
        y = torch.zeros(1024 + 8)
        with ct.on_cpu(mode=mode):
            try:
                shifted_copy_kernel[(triton.cdiv(n, 128),)](x, y, n, lshift, sshift, BLOCK=128)
                results.append(_bits(y))
            except ct.KernelRuntimeError as e:
                results.append(str(e))
    assert all(isinstance(r, str) == (what is not None) for r in results), results
    if what is None:
        assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])
    else:
        assert results[0] == results[1] == results[2] and f"{what} out of bounds" in results[0]


@triton.jit
def hoist_kernel(x_ptr, d_ptr, out_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(x_ptr + o)
    d = tl.load(d_ptr + o)
    z = x - tl.max(x, axis=0)                 # the max gets a Let of its own; z is recomputed at its uses
    tl.store(out_ptr + o, tl.exp(z) / tl.sum(tl.exp(z), axis=0))
    q = (o // d) + tl.sum(o % d, axis=0)      # both may fail: the reference's order stays
    tl.store(out_ptr + N + o, q.to(tl.float32))


def test_hoisted_whole_tile_nodes_keep_values_and_errors():
    x = torch.randn(64, generator=torch.Generator().manual_seed(8))
    d = torch.arange(64, dtype=torch.int32) % 5 + 1
    ref, nat = _both(hoist_kernel, (1,), lambda: (x.clone(), d.clone(), torch.zeros(128)), N=64)
    for a, b in zip(ref, nat):
        assert np.array_equal(a, b)
    d[3] = 0                                  # o // d and o % d fail: the division is reported, as the reference
    msgs = []
    for mode in ("reference", "native"):
        with ct.on_cpu(mode=mode):
            with pytest.raises(ct.KernelRuntimeError) as e:
                hoist_kernel[(1,)](x, d, torch.zeros(128), N=64)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "integer division by zero" in msgs[0]


@triton.jit
def dot_of_inlined_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)[:, None]
    c = tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + r * N + c) * 2.0      # cheap and assigned once: recomputed at its uses, no array
    b = tl.load(b_ptr + r * N + c)
    tl.store(out_ptr + r * N + c, tl.dot(a, b))


def test_dot_of_an_inlined_operand_reads_its_value():
    g = torch.Generator().manual_seed(10)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    ref, nat = _both(dot_of_inlined_kernel, (1,), lambda: (a.clone(), b.clone(), torch.zeros(16, 16)), N=16)
    assert np.array_equal(ref[2], nat[2])

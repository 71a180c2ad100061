"""cohort.triton's reference, construct by construct; refused constructs and their messages;
integer, bitwise and Philox kernels bit for bit against TRITON_INTERPRET=1 (in a subprocess)."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402

import cohort.triton as ct  # noqa: E402

IN_SUBPROCESS = os.environ.get("TRITON_INTERPRET") == "1"


# every test runs on the reference and in check mode (native run too, compared bit for bit)
@pytest.fixture(autouse=True, params=["reference", "check"])
def _on_cpu(request):
    with ct.on_cpu(mode=request.param):
        yield request.param


# ---------------------------------------------------------------- integer kernels (also run by TRITON_INTERPRET)

@triton.jit
def int_ops_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m, other=1)
    b = tl.load(b_ptr + offs, mask=m, other=1)
    tl.store(out_ptr + 0 * n + offs, a // b, mask=m)
    tl.store(out_ptr + 1 * n + offs, a % b, mask=m)
    tl.store(out_ptr + 2 * n + offs, (a * 7919 + b) ^ (a >> 3), mask=m)
    tl.store(out_ptr + 3 * n + offs, (a << 5) | (b & 0xFF), mask=m)
    tl.store(out_ptr + 4 * n + offs, tl.maximum(a, b) - tl.minimum(a, b), mask=m)
    tl.store(out_ptr + 5 * n + offs, tl.where(a > b, a, -b) + tl.cdiv(a, 3), mask=m)
    u = a.to(tl.uint32, bitcast=True)
    tl.store(out_ptr + 6 * n + offs, (u >> 4).to(tl.int32, bitcast=True), mask=m)


@triton.jit
def philox_kernel(out_ptr, n, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    r0, r1, r2, r3 = tl.randint4x(seed, offs)
    tl.store(out_ptr + offs, r0.to(tl.int32, bitcast=True), mask=m)
    tl.store(out_ptr + n + offs, r3.to(tl.int32, bitcast=True), mask=m)
    f = tl.rand(seed, offs)
    tl.store(out_ptr + 2 * n + offs, f.to(tl.int32, bitcast=True), mask=m)


@triton.jit
def int_reduce_kernel(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    tl.store(out_ptr + tl.arange(0, R), tl.sum(x, axis=1))
    tl.store(out_ptr + R + tl.arange(0, C), tl.max(x, axis=0))
    tl.store(out_ptr + R + C + tl.arange(0, C), tl.argmax(x, axis=0))
    tl.store(out_ptr + R + 2 * C + tl.arange(0, C), tl.cumsum(x, axis=0).reshape(R * C).reshape(R, C).sum(axis=0))


@triton.jit
def promotion_kernel(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, h_ptr, f_ptr, iout_ptr, fout_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    a, b, c = tl.load(a_ptr + o), tl.load(b_ptr + o), tl.load(c_ptr + o)            # i8, u8, i16
    d, e = tl.load(d_ptr + o), tl.load(e_ptr + o)                                    # u32, i64
    h, f = tl.load(h_ptr + o), tl.load(f_ptr + o)                                    # f16, f32
    ints = (a + b, a * c, c - d, d + e, b - 1, d >> 1, c >> 1, a << 2, (a < b).to(tl.int8),
            e // 3, c % 7, a * 100, -b, ~c, b | a)
    for k in tl.static_range(len(ints)):
        tl.store(iout_ptr + k * BLOCK + o, ints[k].to(tl.int64))
    floats = (h * 3, h + f, h / 3, h * 0.1, a / 3, f + e, e + 1.5, h * h, (h - 1).to(tl.float32) * f, d * 0.5)
    for k in tl.static_range(len(floats)):
        tl.store(fout_ptr + k * BLOCK + o, floats[k].to(tl.float32))


def _promotion_inputs():
    g = torch.Generator().manual_seed(9)
    n = 16
    a = torch.randint(-128, 128, (n,), generator=g).to(torch.int8)
    b = torch.randint(0, 256, (n,), generator=g).to(torch.uint8)
    c = torch.randint(-2 ** 15, 2 ** 15, (n,), generator=g).to(torch.int16)
    d = torch.randint(0, 2 ** 32, (n,), generator=g, dtype=torch.int64).to(torch.uint32)
    e = torch.randint(-2 ** 40, 2 ** 40, (n,), generator=g, dtype=torch.int64)
    h = (torch.randn(n, generator=g) * 10).half()
    f = torch.randn(n, generator=g)
    return a, b, c, d, e, h, f


def _int_inputs():
    g = torch.Generator().manual_seed(5)
    a = torch.randint(-2 ** 31, 2 ** 31 - 1, (300,), generator=g, dtype=torch.int64).to(torch.int32)
    b = torch.randint(-1000, 1000, (300,), generator=g, dtype=torch.int32)
    b[b == 0] = 7
    x = torch.randint(-50, 50, (8, 16), generator=g, dtype=torch.int32)
    return a, b, x


def _run_int_kernels():
    a, b, x = _int_inputs()
    out1 = torch.zeros(7 * 300, dtype=torch.int32)
    int_ops_kernel[(3,)](a, b, out1, 300, BLOCK=128)
    out2 = torch.zeros(3 * 1000, dtype=torch.int32)
    philox_kernel[(4,)](out2, 1000, 0x12345678, BLOCK=256)
    out3 = torch.zeros(8 + 3 * 16, dtype=torch.int32)
    int_reduce_kernel[(1,)](x, out3, R=8, C=16)
    iout, fout = torch.zeros(15 * 16, dtype=torch.int64), torch.zeros(10 * 16)
    promotion_kernel[(1,)](*_promotion_inputs(), iout, fout, BLOCK=16)
    return out1, out2, out3, iout, fout


def test_integer_ops_c_semantics():
    out1, _, out3, _, _ = _run_int_kernels()
    a, b, x = (t.numpy().astype(np.int64) for t in _int_inputs())
    n = 300
    q = np.trunc(a / b).astype(np.int64)            # truncation toward zero (|a| < 2**31: exact in f64)
    assert np.array_equal(out1[:n].numpy(), q)
    assert np.array_equal(out1[n:2 * n].numpy(), a - q * b)
    wrap = lambda v: ((v + 2 ** 31) % 2 ** 32 - 2 ** 31)
    assert np.array_equal(out1[2 * n:3 * n].numpy(), wrap(wrap(a * 7919) + b) ^ (a >> 3))
    assert np.array_equal(out1[6 * n:7 * n].numpy(), (a % 2 ** 32) >> 4)
    assert np.array_equal(out3[:8].numpy(), x.sum(1))
    assert np.array_equal(out3[8:24].numpy(), x.max(0))
    assert np.array_equal(out3[24:40].numpy(), x.argmax(0))


@pytest.mark.skipif(IN_SUBPROCESS, reason="this is the comparison's driver")
def test_bit_for_bit_against_triton_interpreter(tmp_path):
    """Integer, bitwise, Philox and promotion kernels give the same bits as TRITON_INTERPRET=1
    (the promotion kernel mixes i8, u8, i16, u32, i64, f16, f32 and literals: same types, same bits)."""
    dump = tmp_path / "interp.pt"
    code = (f"import importlib.util, torch; spec = importlib.util.spec_from_file_location('k', {__file__!r}); "
            f"m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            f"torch.save(m._run_int_kernels(), {str(dump)!r})")
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    theirs = torch.load(dump)
    ours = _run_int_kernels()
    for k, (t, o) in enumerate(zip(theirs, ours)):
        assert torch.equal(t, o), k


# ---------------------------------------------------------------- floats: casts, NaN rules, math

@triton.jit
def cast_kernel(x_ptr, bf_ptr, h_ptr, i_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(bf_ptr + offs, x.to(tl.bfloat16), mask=m)
    tl.store(h_ptr + offs, x.to(tl.float16), mask=m)
    tl.store(i_ptr + offs, x.to(tl.int32), mask=m)


def test_casts_round_to_nearest_even():
    from cohort.refimpl.ir import DType
    from cohort.refimpl.semantics import narrow
    x = (torch.randn(777) * 1000).float()
    x[:4] = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 70000.0, -2.5])
    bf, h = torch.empty(777, dtype=torch.bfloat16), torch.empty(777, dtype=torch.float16)
    i = torch.empty(777, dtype=torch.int32)
    cast_kernel[(4,)](x, bf, h, i, 777, BLOCK=256)
    assert np.array_equal(bf.view(torch.int16).numpy().view(np.uint16), narrow(x.numpy(), DType.BF16))
    assert torch.equal(bf, x.to(torch.bfloat16))
    assert torch.equal(h, x.to(torch.float16))
    assert torch.equal(i, x.trunc().to(torch.int32))


@triton.jit
def wide_int_cast_kernel(x_ptr, u_ptr, f_ptr, bf_ptr, h_ptr, uf_ptr, d_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(f_ptr + offs, x.to(tl.float32), mask=m)
    tl.store(bf_ptr + offs, x.to(tl.bfloat16), mask=m)
    tl.store(h_ptr + offs, (x >> 48).to(tl.float16), mask=m)
    tl.store(uf_ptr + offs, tl.load(u_ptr + offs, mask=m).to(tl.float32), mask=m)
    tl.store(d_ptr + offs, x.to(tl.float64), mask=m)


def _rounded_once(v: int, mant: int, emin: int) -> int:
    """v rounded to nearest even with `mant` significand bits (exponent >= emin): an integer."""
    if v == 0:
        return 0
    s, a = (-1 if v < 0 else 1), abs(v)
    e = max(a.bit_length() - mant, emin, 0)
    q, r = divmod(a, 1 << e)
    if 2 * r > 1 << e or (2 * r == 1 << e and q & 1):
        q += 1
    return s * (q << e)


def test_64_bit_integers_round_once_to_every_float():
    # 2**60 + 2**36 + 1 rounded to f64 first loses the 1 and then ties to even: one rounding
    # goes up (torch and the hardware's int64 -> f32); near-ties of every kind, both signs
    g = np.random.default_rng(5)
    ties = [2 ** 60 + 2 ** 36 + 1, 2 ** 60 + 2 ** 36, 2 ** 60 + 2 ** 36 - 1, 2 ** 62 + 2 ** 38 + 2 ** 9,
            2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1, 2 ** 24 + 1, -(2 ** 60 + 2 ** 36 + 1), 0, 1, -1]
    k = g.integers(10, 63, 400)
    rand = [int(s) * ((1 << int(e)) + (int(r) << max(int(e) - 30, 0)) + int(t))
            for s, e, r, t in zip(g.choice([-1, 1], 400), k, g.integers(0, 2 ** 30, 400), g.integers(-3, 4, 400))]
    vals = ties + rand
    n = len(vals)
    x = torch.tensor(vals, dtype=torch.int64)
    u = torch.tensor([v % 2 ** 64 for v in vals], dtype=torch.uint64)
    f, uf, d = torch.empty(n), torch.empty(n), torch.empty(n, dtype=torch.float64)
    bf, h = torch.empty(n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.float16)
    wide_int_cast_kernel[(3,)](x, u, f, bf, h, uf, d, n, BLOCK=256)
    assert torch.equal(f, x.to(torch.float32))                 # torch converts in one rounding
    assert [int(v) for v in f.tolist()] == [_rounded_once(v, 24, 0) for v in vals]
    assert [int(v) for v in uf.tolist()] == [_rounded_once(v % 2 ** 64, 24, 0) for v in vals]
    assert [int(v) for v in bf.float().tolist()] == [_rounded_once(v, 8, 0) for v in vals]
    assert torch.equal(h, (x >> 48).to(torch.float16))
    assert torch.equal(d, x.to(torch.float64))


@triton.jit
def nan_kernel(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + o)
    b = tl.load(b_ptr + o)
    tl.store(out_ptr + o, tl.maximum(a, b))
    tl.store(out_ptr + BLOCK + o, tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL))
    tl.store(out_ptr + 2 * BLOCK + o, tl.exp2(a) + tl.log2(tl.abs(b)))
    tl.store(out_ptr + 3 * BLOCK + o, tl.fma(a, b, a))


def test_nan_rule_and_math():
    nan = float("nan")
    a = torch.tensor([nan, 1.0, nan, -0.0, 3.0, 2.0, 0.5, -1.0])
    b = torch.tensor([1.0, nan, nan, 0.0, -3.0, 8.0, 4.0, 0.25])
    out = torch.empty(32)
    nan_kernel[(1,)](a, b, out, BLOCK=8)
    mx, mn = out[:8], out[8:16]
    assert mx[0] == 1.0 and mx[1] == 1.0 and mx[2].isnan() and str(mx[3].item()) == "0.0"
    assert mn[0].isnan() and mn[1].isnan() and mn[4] == -3.0
    assert out[16 + 5].item() == 4.0 + 3.0                    # exp2(2) + log2(8): exact
    an, bn = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    assert out[24 + 6].item() == np.float32(an[6] * bn[6] + an[6])


# ---------------------------------------------------------------- control flow, shapes, grids

@triton.jit
def control_kernel(out_ptr, n, flag, BLOCK: tl.constexpr):
    pid_x = tl.program_id(0)
    pid_y = tl.program_id(1)
    if pid_x == 2:
        return
    acc = 0
    i = 0
    while i < n:
        acc += i
        i += 1
    for k in tl.static_range(3):
        acc += k
    if flag > 0:
        acc = acc * 2
    else:
        acc = acc - 1
    x = tl.arange(0, BLOCK)
    t = tl.reshape(tl.expand_dims(x, 0) + x[:, None] * 0, (BLOCK, BLOCK))
    t = tl.trans(t)
    a, b = tl.split(tl.join(x, x + 1))
    tl.store(out_ptr + pid_y * 3 + pid_x + tl.arange(0, 1), acc + tl.sum(t, axis=0).sum() * 0
             + tl.sum(b - a) - BLOCK)


def test_control_flow_grid_and_shapes():
    out = torch.full((6,), -7, dtype=torch.int32)
    control_kernel[(3, 2)](out, 5, 1, BLOCK=4)
    assert out.tolist() == [26, 26, -7, 26, 26, -7]
    control_kernel[(3, 2)](out, 5, 0, BLOCK=4)
    assert out.tolist() == [12, 12, -7, 12, 12, -7]


@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def scan_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, tl.associative_scan(x, 0, _mul_combine))
    tl.store(out_ptr + BLOCK + o, tl.cumsum(x, 0, reverse=True))
    tl.store(out_ptr + 2 * BLOCK + o, tl.reduce(x, 0, _mul_combine) + o * 0)


def test_scan_reduce_user_combine():
    x = torch.arange(1, 9, dtype=torch.int32) % 3 + 1
    out = torch.empty(24, dtype=torch.int32)
    scan_kernel[(1,)](x, out, BLOCK=8)
    assert torch.equal(out[:8], torch.cumprod(x, 0).int())
    assert torch.equal(out[8:16], torch.flip(torch.cumsum(torch.flip(x, [0]), 0), [0]).int())
    assert (out[16:] == torch.prod(x)).all()


@triton.jit
def float_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK))))


def test_sum_is_the_fixed_tree():
    x = torch.randn(16) * torch.logspace(-6, 6, 16)
    out = torch.empty(1)
    float_sum_kernel[(1,)](x, out, BLOCK=16)
    v = x.numpy().copy()
    s = 8
    while s >= 1:
        v[:s] = v[:s] + v[s:2 * s]
        s //= 2
    assert out.item() == v[0]


# ---------------------------------------------------------------- atomics

@triton.jit
def atomics_kernel(cnt_ptr, mx_ptr, lock_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(cnt_ptr + offs % 4, 1, mask=m)
    tl.atomic_max(mx_ptr + tl.zeros([BLOCK], tl.int32), offs.to(tl.float32), mask=m)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    old = tl.load(out_ptr)
    tl.store(out_ptr, old + 1)
    tl.atomic_xchg(lock_ptr, 0)


def test_atomics_and_lock():
    cnt = torch.zeros(4, dtype=torch.int32)
    mx = torch.full((1,), -1.0)
    lock = torch.zeros(1, dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    atomics_kernel[(5,)](cnt, mx, lock, out, 150, BLOCK=32)
    assert cnt.tolist() == [38, 38, 37, 37]
    assert mx.item() == 149.0
    assert out.item() == 5 and lock.item() == 0


# ---------------------------------------------------------------- errors

@triton.jit
def oob_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.zeros([BLOCK], tl.float32))


def test_out_of_bounds_store_names_line_program_tensor_offset():
    x = torch.zeros(100)
    with pytest.raises(ct.KernelRuntimeError, match=r"oob_kernel.*:\d+\), program \(3, 0, 0\): store out of "
                                                     r"bounds: argument `x_ptr` offset 100"):
        oob_kernel[(4,)](x, 100, BLOCK=32)


@triton.jit
def asm_kernel(x_ptr):
    x = tl.load(x_ptr)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(x_ptr, y)


@triton.jit
def block_ptr_kernel(x_ptr):
    p = tl.make_block_ptr(x_ptr, (4,), (1,), (0,), (4,), (0,))
    tl.store(p, tl.load(p))


@triton.jit
def f32_atomic_add_kernel(x_ptr):
    tl.atomic_add(x_ptr, 1.0)


@triton.jit
def break_kernel(x_ptr):
    for i in range(3):
        break


@triton.jit
def pow_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), x ** 2)


@triton.jit
def libdevice_pow_kernel(x_ptr):
    from_ld = tl.load(x_ptr)
    tl.store(x_ptr, libdevice.pow(from_ld, 2.0))


@triton.jit
def slice_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 2), x[0:2])


@pytest.mark.parametrize("kernel, pattern", [
    (asm_kernel, r"`asm_kernel` \(.*:\d+\): `tl.inline_asm_elementwise` is not supported .*inline assembly"),
    (block_ptr_kernel, r"`tl.make_block_ptr` is not supported .*block pointers are gone"),
    (f32_atomic_add_kernel, r"tl.atomic_add on fp32.*tl.sum"),
    (break_kernel, r"`break` is not supported"),
    (pow_kernel, r"`pow_kernel` \(.*:\d+\): `\*\*` on tiles is not supported"),
    (slice_kernel, r"slicing a tile with bounds is not supported"),
    (libdevice_pow_kernel, r"`tl.extra.libdevice.pow` is not supported .*not in cohort's math library yet"),
])
def test_refused_constructs_name_the_line(kernel, pattern):
    x = torch.zeros(4)
    with pytest.raises(ct.UnsupportedConstruct, match=pattern):
        kernel[(1,)](x)
    assert x.tolist() == [0.0] * 4                       # nothing ran


def test_unknown_mode_names_the_modes():
    with pytest.raises(ValueError, match="mode: expected one of 'reference', 'native', 'check', got 'fast'"):
        ct.activate(mode="fast")
    with pytest.raises(ValueError, match="got 'compiled'"):
        with ct.on_cpu(mode="compiled"):
            pass


def test_cuda_tensor_and_unknown_kwarg_refused():
    x = torch.zeros(4)
    with pytest.raises(ct.LaunchError, match="keyword argument `BLOK`"):
        oob_kernel[(1,)](x, 4, BLOK=4)

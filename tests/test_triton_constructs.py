"""cohort.triton: one small kernel per construct (typing, specialisation, math, libdevice,
random numbers) and the errors a kernel's mistakes give (with the line and program)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402
from triton.language.extra.cuda import libdevice as cuda_libdevice  # noqa: E402

import cohort.triton as ct  # noqa: E402
from cohort.triton.mathx import math_f32  # noqa: E402


# every test runs on the reference and in check mode (native run too, compared bit for bit)
@pytest.fixture(autouse=True, params=["reference", "check"])
def _on_cpu(request):
    with ct.on_cpu(mode=request.param):
        yield request.param


@triton.jit
def math_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    ax = tl.abs(x)
    tl.store(out_ptr + 0 * BLOCK + o, tl.exp(x))
    tl.store(out_ptr + 1 * BLOCK + o, tl.log(ax))
    tl.store(out_ptr + 2 * BLOCK + o, tl.sqrt(ax))
    tl.store(out_ptr + 3 * BLOCK + o, tl.rsqrt(ax))
    tl.store(out_ptr + 4 * BLOCK + o, tl.sin(x))
    tl.store(out_ptr + 5 * BLOCK + o, tl.cos(x))
    tl.store(out_ptr + 6 * BLOCK + o, libdevice.tanh(x))
    tl.store(out_ptr + 7 * BLOCK + o, cuda_libdevice.erf(x))
    tl.store(out_ptr + 8 * BLOCK + o, tl.sigmoid(x))
    tl.store(out_ptr + 9 * BLOCK + o, tl.clamp(x, -0.5, 0.5))
    tl.store(out_ptr + 10 * BLOCK + o, libdevice.rsqrt(ax))


def test_math_is_cohorts_library():
    x = torch.randn(64) * 3
    out = torch.empty(11 * 64)
    math_kernel[(1,)](x, out, BLOCK=64)
    xn = x.numpy()
    an = np.abs(xn)
    ours = out.numpy().reshape(11, 64)
    for row, want in [(0, math_f32("exp", xn)), (1, math_f32("log", an)), (2, np.sqrt(an)),
                      (3, np.float32(1) / np.sqrt(an)), (4, math_f32("sin", xn)), (5, math_f32("cos", xn)),
                      (6, math_f32("tanh", xn)), (7, math_f32("erf", xn)),
                      (8, np.float32(1) / (np.float32(1) + math_f32("exp", -xn))),
                      (9, np.clip(xn, -0.5, 0.5)), (10, np.float32(1) / np.sqrt(an))]:
        assert np.array_equal(ours[row], want), row
    torch.testing.assert_close(out[:64], torch.exp(x))
    torch.testing.assert_close(out[6 * 64:7 * 64], torch.tanh(x))


@triton.jit
def randn_kernel(out_ptr, seed, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.randn(seed, o))
    tl.store(out_ptr + BLOCK + o, tl.randint(seed, o).to(tl.float32))


def test_randn_is_normal_and_deterministic():
    a, b = torch.empty(2048), torch.empty(2048)
    randn_kernel[(1,)](a, 7, BLOCK=1024)
    randn_kernel[(1,)](b, 7, BLOCK=1024)
    assert torch.equal(a, b)
    assert abs(a[:1024].mean().item()) < 0.1 and 0.9 < a[:1024].std().item() < 1.1


@triton.jit
def promote_kernel(i8_ptr, u32_ptr, h_ptr, bf_ptr, out_f_ptr, out_i_ptr, out_h_ptr, out_bf_ptr, s, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    a = tl.load(i8_ptr + o)
    u = tl.load(u32_ptr + o)
    h = tl.load(h_ptr + o)
    bf = tl.load(bf_ptr + o)
    tl.store(out_i_ptr + o, (a + 100).to(tl.int32))              # i8 + weak literal: i8, wraps
    tl.store(out_i_ptr + BLOCK + o, (u + a).to(tl.int32, bitcast=True))   # u32 + i8 -> u32
    tl.store(out_f_ptr + o, a / 2)                                # int / int -> f32
    tl.store(out_f_ptr + BLOCK + o, h + bf)                      # f16 + bf16 -> f16 (semantic's fp16 rule comes first)
    tl.store(out_h_ptr + o, h * h + s)                           # f16 * f16 -> f16; + f32 scalar arg -> f32
    tl.store(out_bf_ptr + o, bf * bf)                            # bf16 arithmetic rounds to bf16


def test_promotion_rules():
    n = 8
    a = torch.tensor([100, -100, 27, 127, -128, 0, 1, -1], dtype=torch.int8)
    u = torch.tensor([0, 1, 2 ** 31, 5, 6, 7, 8, 9], dtype=torch.int64).to(torch.uint32)
    h = torch.randn(n).half()
    bf = torch.randn(n).bfloat16()
    out_f, out_i = torch.empty(2 * n), torch.empty(2 * n, dtype=torch.int32)
    out_h, out_bf = torch.empty(n, dtype=torch.float16), torch.empty(n, dtype=torch.bfloat16)
    promote_kernel[(1,)](a, u, h, bf, out_f, out_i, out_h, out_bf, 0.5, BLOCK=n)
    assert out_i[:n].tolist() == [((v + 100 + 128) % 256) - 128 for v in a.tolist()]
    assert out_i[n:].tolist() == [int(np.uint32((x + y) % 2 ** 32).view(np.int32))
                                  for x, y in zip(u.to(torch.int64).tolist(), a.tolist())]
    assert torch.equal(out_f[:n], a.float() / 2)
    assert torch.equal(out_f[n:], (h + bf.half()).float())
    assert torch.equal(out_h, ((h * h).float() + 0.5).half())
    assert torch.equal(out_bf, bf * bf)


@triton.jit
def spec_kernel(out_ptr, one, big, flag, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.static_assert(one == 1)                    # an int 1 is specialised to a constant
    tl.store(out_ptr + o, (big + o).to(tl.int32))   # i64 argument: i64 arithmetic
    if flag:
        tl.store(out_ptr + BLOCK + o, o * 2)


def test_specialisation_and_3d_grid():
    out = torch.zeros(8, dtype=torch.int32)
    spec_kernel[(1,)](out, 1, 2 ** 40 + 3, True, BLOCK=4)
    assert out.tolist() == [3, 4, 5, 6, 0, 2, 4, 6]


@triton.jit
def grid3_kernel(out_ptr):
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny = tl.num_programs(0), tl.num_programs(1)
    tl.store(out_ptr + (z * ny + y) * nx + x, x * 100 + y * 10 + z)


def test_three_d_grid():
    out = torch.zeros(2 * 3 * 4, dtype=torch.int32)
    grid3_kernel[(2, 3, 4)](out)
    want = [x * 100 + y * 10 + z for z in range(4) for y in range(3) for x in range(2)]
    assert out.tolist() == want


@triton.jit
def div_zero_kernel(x_ptr, d):
    tl.store(x_ptr, tl.load(x_ptr) // d)


@triton.jit
def assert_kernel(x_ptr, n):
    tl.device_assert(n < 3, "n too large")
    tl.store(x_ptr, n)


@triton.jit
def carried_type_kernel(x_ptr, n):
    acc = 0
    for i in range(n):
        acc = acc + 0.5
    tl.store(x_ptr, acc)


@triton.jit
def loop_local_kernel(x_ptr, n):
    for i in range(n):
        t = i * 2
    tl.store(x_ptr, t)


@triton.jit
def static_assert_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 8 == 0, "BLOCK must be a multiple of 8")


@triton.jit
def arange_kernel(x_ptr):
    tl.store(x_ptr + tl.arange(0, 6), 0)


@triton.jit
def unsigned_neg_kernel(x_ptr):
    u = tl.load(x_ptr).to(tl.uint32)
    tl.store(x_ptr, (u + -1).to(tl.int32))


@triton.jit
def mixed_sign_div_kernel(x_ptr):
    u = tl.load(x_ptr).to(tl.uint32)
    tl.store(x_ptr, (u // 3).to(tl.int32))


@pytest.mark.parametrize("run, exc, pattern", [
    (lambda x: mixed_sign_div_kernel[(1,)](x), ct.KernelTypeError, r"uint32 and int32: they differ in signedness"),
    (lambda x: div_zero_kernel[(2,)](x, 0), ct.KernelRuntimeError,
     r"`div_zero_kernel` \(.*:\d+\), program \(0, 0, 0\): integer division by zero"),
    (lambda x: assert_kernel[(1,)](x, 5), ct.KernelRuntimeError, r"device_assert failed: n too large"),
    (lambda x: carried_type_kernel[(1,)](x, 3), ct.KernelTypeError, r"`acc` changes type from int32 to fp32"),
    (lambda x: loop_local_kernel[(1,)](x, 3), ct.KernelTypeError, r"name `t` is not defined"),
    (lambda x: static_assert_kernel[(1,)](x, BLOCK=12), ct.KernelTypeError, r"BLOCK must be a multiple of 8"),
    (lambda x: arange_kernel[(1,)](x), ct.KernelTypeError, r"the length 6 must be a power of two"),
    (lambda x: unsigned_neg_kernel[(1,)](x), ct.KernelTypeError, r"unsigned tile and a negative literal"),
])
def test_kernel_mistakes_name_the_line(run, exc, pattern):
    x = torch.ones(4, dtype=torch.int32)
    with pytest.raises(exc, match=pattern):
        run(x)


@triton.jit
def annotated_kernel(out_ptr, n: tl.int64, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, (n * 3000000000 + o) % 7)     # i64 arithmetic: no wrap at 2**31


def test_annotated_scalar_argument_type():
    out = torch.zeros(4, dtype=torch.int64)
    annotated_kernel[(1,)](out, 1, BLOCK=4)
    assert out.tolist() == [(3000000000 + i) % 7 for i in range(4)]


@triton.jit
def _helper_bad(x):
    return x ** 2


@triton.jit
def calls_helper_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, _helper_bad(x))


def test_error_in_inlined_function_names_both_lines():
    src = open(__file__).read().splitlines()
    call = next(i + 1 for i, ln in enumerate(src) if "tl.store(x_ptr, _helper_bad(x))" in ln)
    inner = next(i + 1 for i, ln in enumerate(src) if "return x ** 2" in ln)
    with pytest.raises(ct.UnsupportedConstruct,
                       match=rf"`calls_helper_kernel` \(.*:{call}\), in `_helper_bad` \(.*:{inner}\): `\*\*`"):
        calls_helper_kernel[(1,)](torch.ones(1))


@triton.jit
def misc_kernel(x_ptr, i8_ptr, out_ptr, iout_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    r = tl.multiple_of(r, 4)
    r = tl.max_contiguous(r, B)
    tl.assume(B > 0)
    tl.debug_barrier()
    x = tl.load(x_ptr + r[:, None] * B + r[None, :], cache_modifier=".cg", eviction_policy="evict_last")
    tl.store(out_ptr + r, tl.min(x, axis=1))
    tl.store(iout_ptr + r, tl.argmin(x, axis=1))
    tl.store(iout_ptr + B + r, tl.xor_sum(x.to(tl.int32, bitcast=True), axis=0))
    tl.store(out_ptr + B + r, tl.full([B], 2.5, tl.float32) + tl.sum(tl.dot(x, x, allow_tf32=True), axis=0) * 0)
    a = tl.load(i8_ptr + r[:, None] * B + r[None, :])
    tl.store(iout_ptr + 2 * B + r[:, None] * B + r[None, :], tl.dot(a, a))
    bf = x.to(tl.bfloat16)
    d = tl.dot(bf, bf, input_precision="ieee")
    tl.store(out_ptr + 2 * B + r[:, None] * B + r[None, :], d)


def test_hints_min_argmin_xor_sum_full_and_dots():
    import numpy as np

    from cohort.refimpl.semantics import fma
    B = 16
    x = torch.randn(B, B)
    x[3, 5] = x[3, 9] = -100.0                          # a tie: the lowest index wins
    a = torch.randint(-128, 127, (B, B), dtype=torch.int8)
    out = torch.empty(2 * B + B * B)
    iout = torch.empty(2 * B + B * B, dtype=torch.int32)
    misc_kernel[(1,)](x, a, out, iout, B=B)
    assert torch.equal(out[:B], x.min(1).values)
    assert iout[3].item() == 5 and torch.equal(iout[:B], x.argmin(1).int())
    xi = x.view(torch.int32).numpy()
    assert np.array_equal(iout[B:2 * B].numpy(), np.bitwise_xor.reduce(xi, axis=0))
    assert (out[B:2 * B] == 2.5).all()
    assert torch.equal(iout[2 * B:].view(B, B), (a.int() @ a.int()))
    xb = x.bfloat16().float().numpy()
    acc = np.float32(0.0)
    for k in range(B):
        acc = fma(xb[2, k], xb[k, 7], acc)
    assert out[2 * B + 2 * B + 7].item() == float(acc)


@triton.jit
def dot_f16_out_kernel(x_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(x_ptr + r[:, None] * B + r[None, :])
    tl.store(x_ptr + r[:, None] * B + r[None, :], tl.dot(x, x, out_dtype=tl.float16))


def test_dot_out_dtype_f16_refused():
    with pytest.raises(ct.UnsupportedConstruct, match=r"tl.dot with out_dtype=fp16.*accumulates in f32"):
        dot_f16_out_kernel[(1,)](torch.zeros(16, 16, dtype=torch.float16), B=16)


@triton.jit
def print_kernel(x_ptr):
    tl.device_print("value", tl.load(x_ptr))


def test_device_print(capsys, _on_cpu):
    print_kernel[(2,)](torch.tensor([3], dtype=torch.int32))
    out = capsys.readouterr().out
    assert "pid (0, 0, 0) value 3" in out and "pid (1, 0, 0) value 3" in out

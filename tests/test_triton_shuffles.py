"""cohort.triton's data-movement primitives: tl.gather, tl.histogram, the standard library's
tl.sort / tl.topk / tl.flip / tl.interleave (inlined from Triton's own source), and tl.dot of
3-D tiles; in the reference and in check mode (native too, bit for bit), against torch, and
bit for bit against TRITON_INTERPRET=1 (in a subprocess)."""
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


@pytest.fixture(params=["reference", "check"])
def mode(request):
    with ct.on_cpu(mode=request.param):
        yield request.param


@triton.jit
def gather_kernel(x_ptr, idx_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr):
    o = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + o)
    i = tl.load(idx_ptr + o)
    tl.store(y_ptr + o, tl.gather(x, i, AXIS))


@triton.jit
def histogram_kernel(x_ptr, y_ptr, n, N: tl.constexpr, BINS: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(x_ptr + o)
    tl.store(y_ptr + tl.arange(0, BINS), tl.histogram(x, BINS, mask=o < n))


@triton.jit
def order_kernel(x_ptr, s_ptr, d_ptr, f_ptr, t_ptr, R: tl.constexpr, C: tl.constexpr, K: tl.constexpr):
    o = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + o)
    tl.store(s_ptr + o, tl.sort(x))
    tl.store(d_ptr + o, tl.sort(x, descending=True))
    tl.store(f_ptr + o, tl.flip(x, 1))
    tl.store(t_ptr + tl.arange(0, R)[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K))


@triton.jit
def interleave_kernel(a_ptr, b_ptr, y_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y_ptr + tl.arange(0, 2 * N), tl.interleave(tl.load(a_ptr + o), tl.load(b_ptr + o)))


@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    bb = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + bb * M * K + tl.arange(0, M)[None, :, None] * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + bb * K * N + tl.arange(0, K)[None, :, None] * N + tl.arange(0, N)[None, None, :])
    o = bb * M * N + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :]
    acc = tl.load(c_ptr + o)
    tl.store(c_ptr + o, tl.dot(a, b, acc))


def _run_all():
    g = torch.Generator().manual_seed(7)
    out = []
    x = torch.randint(-1000, 1000, (8, 16), generator=g, dtype=torch.int32)
    for axis in (0, 1):
        idx = torch.randint(0, 8 if axis == 0 else 16, (8, 16), generator=g, dtype=torch.int32)
        y = torch.empty_like(x)
        gather_kernel[(1,)](x, idx, y, R=8, C=16, AXIS=axis)
        out += [y, idx]
    h = torch.randint(-3, 20, (64,), generator=g, dtype=torch.int32)     # negatives and >= BINS not counted
    hy = torch.empty(16, dtype=torch.int32)
    histogram_kernel[(1,)](h, hy, 50, N=64, BINS=16)
    out += [h, hy]
    v = torch.randint(-100, 100, (4, 32), generator=g, dtype=torch.int32)
    s, d, f = (torch.empty_like(v) for _ in range(3))
    t = torch.empty(4, 4, dtype=torch.int32)
    order_kernel[(1,)](v, s, d, f, t, R=4, C=32, K=4)
    out += [v, s, d, f, t]
    a, b = (torch.randint(-9, 9, (32,), generator=g, dtype=torch.int32) for _ in range(2))
    il = torch.empty(64, dtype=torch.int32)
    interleave_kernel[(1,)](a, b, il, N=32)
    out += [a, b, il]
    p = torch.randint(-5, 5, (2, 16, 32), generator=g, dtype=torch.int8)
    q = torch.randint(-5, 5, (2, 32, 16), generator=g, dtype=torch.int8)
    c0 = torch.randint(-5, 5, (2, 16, 16), generator=g, dtype=torch.int32)
    c = c0.clone()
    bmm_kernel[(1,)](p, q, c, B=2, M=16, K=32, N=16)
    out += [p, q, c0, c]
    return out


def test_the_primitives_are_torchs(mode):
    y0, i0, y1, i1, h, hy, v, s, d, f, t, a, b, il, p, q, c0, c = _run_all()
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-1000, 1000, (8, 16), generator=g, dtype=torch.int32)
    assert torch.equal(y0, torch.gather(x, 0, i0.long())) and torch.equal(y1, torch.gather(x, 1, i1.long()))
    kept = h[:50]
    assert torch.equal(hy, torch.bincount(kept[(kept >= 0) & (kept < 16)], minlength=16).int())
    assert torch.equal(s, v.sort(1).values) and torch.equal(d, v.sort(1, descending=True).values)
    assert torch.equal(f, v.flip(1)) and torch.equal(t, v.topk(4, 1).values)
    assert torch.equal(il, torch.stack([a, b], 1).reshape(-1))
    assert torch.equal(c, c0 + torch.bmm(p.int(), q.int()))


def test_float_sort_and_batched_dot_are_exact(mode):
    # floats: a sort moves values (bits kept, -0.0 and +0.0 included); a 3-D dot is each batch's
    # fma chain over k ascending, the same bits as the 2-D dot of that batch
    x = torch.randn(2, 64)
    x[0, :4] = torch.tensor([0.0, -0.0, float("inf"), -float("inf")])
    s, d, f = (torch.empty_like(x) for _ in range(3))
    t = torch.empty(2, 8)
    order_kernel[(1,)](x, s, d, f, t, R=2, C=64, K=8)
    assert torch.equal(s.abs(), x.sort(1).values.abs()) and torch.equal(t, x.topk(8, 1).values)
    assert torch.equal(f, x.flip(1))
    a, b, c = torch.randn(4, 16, 32), torch.randn(4, 32, 16), torch.randn(4, 16, 16)
    want = c.clone()
    bmm_kernel[(1,)](a, b, c, B=4, M=16, K=32, N=16)
    for i in range(4):
        one = want[i].clone().reshape(1, 16, 16)
        bmm_kernel[(1,)](a[i:i + 1].contiguous(), b[i:i + 1].contiguous(), one, B=1, M=16, K=32, N=16)
        assert torch.equal(c[i], one[0]), i
    assert torch.allclose(c, torch.baddbmm(want, a, b), rtol=1e-5, atol=1e-4)


def test_a_gather_index_outside_the_axis_is_an_error_naming_it(mode):
    x = torch.zeros(8, 16, dtype=torch.int32)
    idx = torch.zeros(8, 16, dtype=torch.int32)
    idx[2, 5] = 16
    idx[3, 0] = -1
    with pytest.raises(ct.KernelRuntimeError, match=r"tl.gather index 16 outside 0..15 of axis 1"):
        gather_kernel[(1,)](x, idx, torch.empty_like(x), R=8, C=16, AXIS=1)


def test_typing_errors_name_the_rule(mode):
    x = torch.zeros(64, dtype=torch.float32)
    with pytest.raises(ct.KernelTypeError, match="32-bit integers"):
        histogram_kernel[(1,)](x, torch.empty(16, dtype=torch.int32), 64, N=64, BINS=16)
    with pytest.raises(ct.KernelTypeError, match="power of two"):
        histogram_kernel[(1,)](x.int(), torch.empty(16, dtype=torch.int32), 64, N=64, BINS=12)


@pytest.mark.skipif(IN_SUBPROCESS, reason="this is the comparison's driver")
def test_bit_for_bit_against_triton_interpreter(tmp_path):
    dump = tmp_path / "interp.pt"
    code = (f"import importlib.util, torch; spec = importlib.util.spec_from_file_location('k', {__file__!r}); "
            f"m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            f"torch.save(m._run_all(), {str(dump)!r})")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TRITON_INTERPRET="1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    theirs = torch.load(dump)
    with ct.on_cpu(mode="check"):
        ours = _run_all()
    for k, (a, b) in enumerate(zip(theirs, ours)):
        assert torch.equal(a, b), k


@triton.jit
def _sum_and_max(a0, a1, b0, b1):
    return a0 + b0, tl.maximum(a1, b1)


@triton.jit
def tuple_scan_kernel(x_ptr, s_ptr, m_ptr, r_ptr, R: tl.constexpr, C: tl.constexpr):
    o = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + o)
    s, m = tl.associative_scan((x, -x), 1, _sum_and_max)
    tl.store(s_ptr + o, s)
    tl.store(m_ptr + o, m)
    r0, r1 = tl.reduce((x, x), 1, _sum_and_max)
    tl.store(r_ptr + tl.arange(0, R), r0 * 1000 + r1)


def test_a_scan_of_a_tuple_with_a_user_combine(mode):
    # two tiles scanned together: the native lowering keeps one phi per tile at its block's head
    x = torch.randint(-50, 50, (4, 32), dtype=torch.int32, generator=torch.Generator().manual_seed(3))
    s, m = torch.empty_like(x), torch.empty_like(x)
    r = torch.empty(4, dtype=torch.int32)
    tuple_scan_kernel[(1,)](x, s, m, r, R=4, C=32)
    assert torch.equal(s, x.cumsum(1).int()) and torch.equal(m, (-x).cummax(1).values)
    assert torch.equal(r, x.sum(1).int() * 1000 + x.max(1).values)


@triton.jit
def softplus_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    # Mamba's softplus: log1p(exp(x)) below 20, x above
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, tl.where(x <= 20.0, libdevice.log1p(tl.exp(x)), x), mask=o < n)
    tl.store(z_ptr + o, libdevice.expm1(x * 0.01), mask=o < n)


def test_log1p_and_expm1_run_natively_with_the_references_bits(mode):
    # check mode holds native to the reference's bits; against torch, the bounds DESIGN §10
    # states (2.5 ulp each; exp's own 1 ulp moves log1p(exp(x)) by less than one more)
    x = torch.randn(1000, generator=torch.Generator().manual_seed(5)) * 30
    y, z = torch.empty_like(x), torch.empty_like(x)
    softplus_kernel[(8,)](x, y, z, 1000, BLOCK=128)
    for got, want, ulps in ((y, torch.where(x <= 20, torch.log1p(torch.exp(x.double())), x.double()), 3.5),
                            (z, torch.expm1((x * 0.01).double()), 2.5)):
        err = (got.double() - want).abs() / torch.from_numpy(np.spacing(want.float().abs().numpy())).double()
        assert err.max() <= ulps, err.max()

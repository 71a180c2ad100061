"""Tutorial and library-style Triton kernels on cohort.triton's reference, against torch.

The kernels are written from the tutorials' and libraries' definitions (here, or shared with
examples/triton_kernels.py), at odd
sizes so every mask edge is exercised. Float results are compared with torch within
a tolerance (different order of operations); integer results exactly.
"""
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402
from conftest import example_module  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402

import cohort.triton as ct  # noqa: E402

_EXAMPLE = example_module("triton_kernels.py")     # the kernels this file shares with the example
layer_norm_fwd = _EXAMPLE.layer_norm_fwd
rmsnorm_kernel = _EXAMPLE.rmsnorm_kernel
softmax_kernel = _EXAMPLE.softmax_kernel
matmul_kernel = _EXAMPLE.matmul_kernel
swiglu_kernel = _EXAMPLE.swiglu_kernel
rope_kernel = _EXAMPLE.rope_kernel


# every test runs on the reference and in check mode (native run too, compared bit for bit)
@pytest.fixture(autouse=True, params=["reference", "check"])
def _on_cpu(request):
    with ct.on_cpu(mode=request.param):
        yield request.param


def test_fused_softmax():
    x = torch.randn(37, 100)
    y = torch.empty_like(x)
    softmax_kernel[(8,)](y, x, x.stride(0), y.stride(0), 37, 100, BLOCK_SIZE=128)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matmul_masked_edges_grouped(dtype):
    M, N, K = 45, 37, 53
    a = torch.randn(M, K).to(dtype)
    b = torch.randn(K, N).to(dtype)
    c = torch.empty(M, N, dtype=dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2)
    ref = (a.float() @ b.float())
    if dtype is torch.float32:
        torch.testing.assert_close(c, ref, rtol=1e-4, atol=1e-4)
        # exact: each element is one fma chain over k ascending from +0 (DESIGN §10)
        import numpy as np

        from cohort.refimpl.semantics import fma
        an, bn = a.numpy(), b.numpy()
        i, j = 7, 36
        acc = np.float32(0.0)
        for k in range(K):
            acc = fma(an[i, k], bn[k, j], acc)
        assert c[i, j].item() == float(acc)
    else:
        torch.testing.assert_close(c.float(), ref.to(dtype).float(), rtol=2e-2, atol=2e-2)


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.rand(seed, offs)
    keep = r > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def test_low_memory_dropout_deterministic_and_rate():
    n = 3001
    x = torch.randn(n)
    o1, o2 = torch.empty(n), torch.empty(n)
    dropout_kernel[(triton.cdiv(n, 512),)](x, o1, n, 0.3, 123, BLOCK=512)
    dropout_kernel[(triton.cdiv(n, 512),)](x, o2, n, 0.3, 123, BLOCK=512)
    assert torch.equal(o1, o2)
    kept = (o1 != 0).float().mean().item()
    assert 0.65 < kept < 0.75
    torch.testing.assert_close(o1[o1 != 0], (x / 0.7)[o1 != 0])


def test_layer_norm_forward():
    M, N = 19, 300
    x = torch.randn(M, N)
    w, b = torch.randn(N), torch.randn(N)
    y = torch.empty_like(x)
    mean, rstd = torch.empty(M), torch.empty(M)
    layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, 1e-5, BLOCK_SIZE=128)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mean, x.mean(1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_column_blocks(dtype):
    M, N = 13, 333
    x = torch.randn(M, N).to(dtype)
    w = torch.randn(N).to(dtype)
    y = torch.empty_like(x)
    rmsnorm_kernel[(M,)](x, w, y, x.stride(0), N, 1e-6, BLOCK=64)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    tol = 1e-5 if dtype is torch.float32 else 1e-2
    torch.testing.assert_close(y.float(), ref.to(dtype).float(), rtol=tol, atol=tol)


@triton.jit
def geglu_tanh_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=m, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=m, other=0)
    s = 0.7978845608028654
    inner = s * (a + 0.044715 * a * a * a)
    g = 0.5 * a * (1 + libdevice.tanh(inner))
    tl.store(c_ptr + row * stride + cols, g.to(b.dtype) * b, mask=m)


@triton.jit
def gelu_erf_kernel(a_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    tl.store(c_ptr + offs, 0.5 * a * (1 + tl.math.erf(a * 0.7071067811865476)), mask=m)


def test_swiglu_geglu():
    M, N = 7, 99
    a, b = torch.randn(M, N), torch.randn(M, N)
    c = torch.empty_like(a)
    swiglu_kernel[(M,)](a, b, c, a.stride(0), N, BLOCK=128)
    torch.testing.assert_close(c, torch.nn.functional.silu(a) * b, rtol=1e-5, atol=1e-6)
    geglu_tanh_kernel[(M,)](a, b, c, a.stride(0), N, BLOCK=128)
    torch.testing.assert_close(c, torch.nn.functional.gelu(a, approximate="tanh") * b, rtol=1e-5, atol=1e-6)
    c1 = torch.empty(M * N)
    gelu_erf_kernel[(triton.cdiv(M * N, 256),)](a, c1, M * N, BLOCK=256)
    torch.testing.assert_close(c1, torch.nn.functional.gelu(a).reshape(-1), rtol=1e-5, atol=1e-6)


def test_rotary_with_strides():
    T, H, D = 11, 5, 32
    q = torch.randn(H, T, D).transpose(0, 1)          # non-contiguous: [T, H, D] with strides
    pos = torch.arange(T).float()[:, None] * (1.0 / 10000 ** (torch.arange(0, D, 2).float() / D))[None, :]
    cos, sin = pos.cos().contiguous(), pos.sin().contiguous()
    q0 = q.clone()
    rope_kernel[(T,)](q, cos, sin, q.stride(0), q.stride(1), cos.stride(0), H, HEAD_DIM=D, BLOCK_H=8)
    x1, x2 = q0[..., :D // 2], q0[..., D // 2:]
    c, s = cos[:, None, :], sin[:, None, :]
    ref = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    torch.testing.assert_close(q, ref, rtol=1e-5, atol=1e-6)


@triton.jit
def cross_entropy_kernel(logits_ptr, labels_ptr, loss_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    logits_ptr += row * stride
    label = tl.load(labels_ptr + row)
    m = -float("inf")
    d = 0.0
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        block_max = tl.max(x)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new))
        m = m_new
    x_label = tl.load(logits_ptr + label).to(tl.float32)
    tl.store(loss_ptr + row, tl.log(d) + m - x_label)


def test_cross_entropy_online_max_sum():
    M, V = 9, 1000
    logits = torch.randn(M, V) * 3
    labels = torch.randint(0, V, (M,))
    loss = torch.empty(M)
    cross_entropy_kernel[(M,)](logits, labels, loss, logits.stride(0), V, BLOCK=256)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, labels, reduction="none"),
                               rtol=1e-5, atol=1e-5)


def _run_float_kernels():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(37, 100, generator=g)
    y = torch.empty_like(x)
    softmax_kernel[(8,)](y, x, x.stride(0), y.stride(0), 37, 100, BLOCK_SIZE=128)
    a, b = torch.randn(45, 53, generator=g), torch.randn(53, 37, generator=g)
    c = torch.empty(45, 37)
    matmul_kernel[(9,)](a, b, c, 45, 37, 53, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2)
    r = torch.empty_like(x)
    w, bias = torch.randn(100, generator=g), torch.randn(100, generator=g)
    mean, rstd = torch.empty(37), torch.empty(37)      # (the interpreter fails on rmsnorm's eps.to(): a float)
    layer_norm_fwd[(37,)](x, r, w, bias, mean, rstd, x.stride(0), 100, 1e-5, BLOCK_SIZE=64)
    return y, c, r, mean, rstd


def test_float_kernels_against_triton_interpreter(tmp_path):
    """The same float kernels under TRITON_INTERPRET=1 agree within float tolerance (the
    interpreter reduces in NumPy's order and uses NumPy's math, so not bit for bit)."""
    import os
    import subprocess
    import sys
    dump = tmp_path / "interp.pt"
    code = (f"import importlib.util, sys, torch; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"spec = importlib.util.spec_from_file_location('k', {__file__!r}); "
            f"m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            f"torch.save(m._run_float_kernels(), {str(dump)!r})")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TRITON_INTERPRET="1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for theirs, ours in zip(torch.load(dump), _run_float_kernels()):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)

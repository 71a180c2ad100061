"""Tutorial-shaped kernels on cohort.triton's reference: layer norm backward with its
atomic_cas/atomic_xchg lock, fused attention forward (causal and not), tensor
descriptors, @triton.autotune (prune_configs_by, reset_to_zero) and @triton.heuristics."""
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402
from conftest import example_module  # noqa: E402

import cohort.triton as ct  # noqa: E402

_EXAMPLE = example_module("triton_kernels.py")     # the kernels this file shares with the example
ln_bwd_dx_fused = _EXAMPLE.layer_norm_bwd_dx_fused
ln_bwd_dwdb = _EXAMPLE.layer_norm_bwd_dwdb
attn_fwd = _EXAMPLE.attn_fwd


# every test runs on the reference and in check mode (native run too, compared bit for bit)
@pytest.fixture(autouse=True, params=["reference", "check"])
def _on_cpu(request):
    with ct.on_cpu(mode=request.param):
        yield request.param


def test_layer_norm_backward_with_lock():
    M, N, G = 23, 100, 4
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    b = torch.randn(N, requires_grad=True)
    dy = torch.randn(M, N)
    y = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
    y.backward(dy)
    mean = x.detach().mean(1)
    rstd = 1 / torch.sqrt(x.detach().var(1, unbiased=False) + 1e-5)
    dx = torch.empty(M, N)
    locks = torch.zeros(2 * G, dtype=torch.int32)
    _dw, _db = torch.zeros(G, N), torch.zeros(G, N)
    ln_bwd_dx_fused[(M,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), N,
                          GROUP_SIZE_M=G, BLOCK_SIZE_N=128)
    dw, db = torch.empty(N), torch.empty(N)
    ln_bwd_dwdb[(triton.cdiv(N, 32),)](_dw, _db, dw, db, G, N, BLOCK_SIZE_M=4, BLOCK_SIZE_N=32)
    torch.testing.assert_close(dx, x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dw, w.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(db, b.grad, rtol=1e-4, atol=1e-4)
    assert locks[:G].tolist() == [0] * G


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_forward(causal, dtype):
    H, T, D = 3, 45, 16
    q, k, v = (torch.randn(H, T, D).to(dtype) for _ in range(3))
    o = torch.empty_like(q)
    scale = D ** -0.5
    attn_fwd[(triton.cdiv(T, 16), H)](q, k, v, o, scale, q.stride(0), q.stride(1), T, HEAD_DIM=D, BLOCK_M=16,
                                      BLOCK_N=16, CAUSAL=causal)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    tol = 1e-4 if dtype is torch.float32 else 2e-2
    torch.testing.assert_close(o.float(), ref, rtol=tol, atol=tol)


@triton.jit
def desc_copy_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    dx = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dy = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    t = dx.load([pid_m * BM, pid_n * BN])
    dy.store([pid_m * BM, pid_n * BN], t * 2 + 1)


def test_tensor_descriptor_load_store_edges():
    M, N = 21, 37
    x = torch.randn(M, N)
    storage = torch.zeros(M * N + 2 * 16 * N)          # room past the tensor: blocks past M must not write it
    y = storage[:M * N].view(M, N)
    desc_copy_kernel[(triton.cdiv(M, 8), triton.cdiv(N, 16))](x, y, M, N, BM=8, BN=16)
    assert torch.equal(y, x * 2 + 1)
    assert torch.equal(storage[M * N:], torch.zeros(2 * 16 * N))


def _prune(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= named_args["n"] * 4]


@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 64}),
                          triton.Config({"BLOCK": 32})],
                 key=["n"], prune_configs_by={"early_config_prune": _prune}, reset_to_zero=["out_ptr"])
@triton.jit
def tuned_count_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + tl.zeros([BLOCK], tl.int32), 1, mask=offs < n)
    tl.atomic_max(out_ptr + 1 + tl.zeros([BLOCK], tl.int32), BLOCK)


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heur_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x_ptr + offs, 1)
    else:
        tl.store(x_ptr + offs, 2, mask=offs < n)


def test_autotune_times_the_pruned_configs_and_resets_to_zero():
    tuned_count_kernel.cache.clear()                    # the choice is cached per key (this test runs per mode)
    out = torch.full((2,), 5, dtype=torch.int32)
    n = 50                                              # prunes BLOCK=512 (> 4 * 50): 64 and 32 are timed
    tuned_count_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](out, n)
    timings = {c.kwargs["BLOCK"]: t for c, t in tuned_count_kernel.configs_timings.items()}
    assert sorted(timings) == [32, 64] and all(0 < t < float("inf") for t in timings.values())
    best = tuned_count_kernel.best_config.kwargs["BLOCK"]
    assert timings[best] == min(timings.values())
    assert out.tolist() == [50, best]                   # reset to zero after the timing, before the run
    out[:] = 7                                          # the cached choice: no timing, no reset
    tuned_count_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](out, n)
    assert out.tolist() == [57, max(7, best)]


def test_autotune_first_takes_the_first_pruned_config(monkeypatch):
    monkeypatch.setenv("COHORT_TRITON_AUTOTUNE", "first")
    tuned_count_kernel.cache.clear()
    out = torch.full((2,), 5, dtype=torch.int32)
    tuned_count_kernel[lambda meta: (triton.cdiv(50, meta["BLOCK"]),)](out, 50)
    assert tuned_count_kernel.best_config.kwargs["BLOCK"] == 64 and out.tolist() == [50, 64]


def test_heuristics():
    x = torch.zeros(100, dtype=torch.int32)
    heur_kernel[(4,)](x, 100, BLOCK=32)
    assert (x == 2).all()
    x = torch.zeros(64, dtype=torch.int32)
    heur_kernel[(2,)](x, 64, BLOCK=32)
    assert (x == 1).all()


@triton.autotune(configs=[triton.Config({"BLOCK": 1 << 20}), triton.Config({"BLOCK": 16})], key=["n"])
@triton.jit
def tuned_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)             # 4 MB tiles: native mode does not build it
    tl.store(y_ptr + offs, v, mask=offs < n)


def test_autotune_never_chooses_a_config_native_mode_does_not_build():
    tuned_copy.cache.clear()
    x, y = torch.arange(40, dtype=torch.float32), torch.zeros(40)
    tuned_copy[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, y, 40)
    assert tuned_copy.best_config.kwargs["BLOCK"] == 16 and torch.equal(x, y)
    assert [t == float("inf") for t in tuned_copy.configs_timings.values()] == [True, False]

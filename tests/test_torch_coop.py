"""cohort.torch's cooperative ops (issue 24): torch's names and edge cases, the
interpreter's bits, one-line errors, torch.compile(fullgraph=True), gradients."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import cohort.torch as ct  # noqa: E402
from cohort.refimpl import ops  # noqa: E402


def test_matmul_is_the_interpreters_bits_and_torchs_product():
    a, b = torch.randn(2, 19, 70), torch.randn(70, 33)
    y = ct.matmul(a, b)
    ref = ops.run_reference(ops.get("matmul"), (38, 70, 33), {"a": a.reshape(38, 70).numpy(), "b": b.numpy()})
    assert np.array_equal(y.reshape(38, 33).numpy().view(np.uint32), ref.view(np.uint32))
    torch.testing.assert_close(y, a @ b, rtol=1e-5, atol=1e-5)
    assert ct.matmul(torch.randn(0, 4), torch.randn(4, 3)).shape == (0, 3)
    assert torch.equal(ct.matmul(torch.randn(3, 0), torch.randn(0, 5)), torch.zeros(3, 5))   # as torch


def test_cumsum_histogram_transpose_as_torch():
    x = torch.randn(3, 4, 100)
    torch.testing.assert_close(ct.cumsum(x), torch.cumsum(x, -1), rtol=1e-5, atol=1e-5)
    assert torch.equal(ct.cumsum(x, dim=2), ct.cumsum(x))
    idx = torch.randint(0, 50, (7, 300), dtype=torch.int32)
    assert torch.equal(ct.histogram(idx, 64), torch.bincount(idx.reshape(-1), minlength=64).int())
    assert torch.equal(ct.histogram(torch.tensor([-1, 5, 64, 3], dtype=torch.int32), 8),
                       torch.tensor([0, 0, 0, 1, 0, 1, 0, 0], dtype=torch.int32))   # outside: not counted
    t = torch.randn(2, 3, 37, 65)
    assert torch.equal(ct.transpose(t), t.transpose(-1, -2).contiguous())
    assert torch.equal(ct.transpose(t.transpose(-1, -2)), t)      # a non-contiguous input


def test_histogram_takes_int64_indices_as_torch_bincount_has_them():
    idx = torch.randint(0, 50, (7, 300))
    assert idx.dtype == torch.int64
    assert torch.equal(ct.histogram(idx, 64), torch.bincount(idx.reshape(-1), minlength=64).int())
    # outside [0, bins) - beyond int32 too - not counted: 2^32 + 3 is not index 3
    far = torch.tensor([3, 2**32 + 3, -2**32 + 1, 2**40, -1, 8, 7], dtype=torch.int64)
    assert torch.equal(ct.histogram(far, 8), torch.tensor([0, 0, 0, 1, 0, 0, 0, 1], dtype=torch.int32))


@pytest.mark.parametrize("call,pattern", [
    (lambda: ct.matmul(torch.randn(2, 3).double(), torch.randn(3, 2)), "matmul: a must be torch.float32"),
    (lambda: ct.matmul(torch.randn(2, 3), torch.randn(4, 2)), r"matmul: a's last dimension \(3\) must equal"),
    (lambda: ct.matmul(torch.randn(2, 3), torch.randn(2, 3, 2)), "matmul: b must be 2-D"),
    (lambda: ct.matmul(torch.randn(3), torch.randn(3, 2)), "matmul: a needs at least 2"),
    (lambda: ct.cumsum(torch.randn(3, 4), dim=0), "cumsum: only the last dimension"),
    (lambda: ct.histogram(torch.zeros(3, dtype=torch.int16), 4),
     "histogram: idx must be torch.int32 or torch.int64, got torch.int16"),
    (lambda: torch.ops.cohort.histogram(torch.zeros(3, dtype=torch.int64), 4), "histogram: idx must be torch.int32"),
    (lambda: ct.histogram(torch.zeros(3, dtype=torch.int64), 0), "histogram: bins must be in"),
    (lambda: ct.histogram(torch.zeros(3, dtype=torch.int32), 0), "histogram: bins must be in"),
    (lambda: ct.histogram(torch.zeros(3, dtype=torch.int32), 2.0), "histogram: bins must be an int"),
    (lambda: ct.transpose(torch.randn(5)), "transpose: x needs at least 2"),
])
def test_bad_arguments_are_one_line_errors(call, pattern):
    with pytest.raises((TypeError, ValueError), match=pattern) as e:
        call()
    assert "\n" not in str(e.value)


def _error(y, x):
    """max over rows of |y - the float64 running sum| / the row's largest |sum|."""
    want = np.add.accumulate(x.double().numpy(), axis=-1)
    return float((np.abs(y.double().numpy() - want).max(-1) / np.abs(want).max(-1)).max())


@pytest.mark.parametrize("shape", [(1, 65537), (7, 1025), (1, 10**6), (4, 768), (2, 4096), (1, 11008), (3, 17)],
                         ids=ops.fmt_shape)
def test_cumsum_is_as_accurate_as_torch_cumsum(shape):
    """cumsum's pair sums give the running sum rounded about once: its error against float64
    is torch.cumsum's (a double accumulator rounded once), here measured equal to the bit of
    the bound, 2^-24 of the row's largest |sum|; the plain float32 chain was 10x worse."""
    for seed in range(2):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
        mine, torchs = _error(ct.cumsum(x), x), _error(torch.cumsum(x, -1), x)
        assert mine <= torchs and mine <= 2.0 ** -24, (seed, mine, torchs)
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(9))       # the gradient: the reversed sum
    x = torch.zeros(*shape, requires_grad=True)
    (ct.cumsum(x) * g).sum().backward()
    assert _error(x.grad.flip(-1), g.flip(-1)) <= max(_error(torch.cumsum(g.flip(-1), -1), g.flip(-1)), 2.0 ** -24)


def test_compiled_graph_has_no_break_and_the_same_bits():
    a, b, x = torch.randn(9, 40), torch.randn(40, 17), torch.randn(6, 45)
    idx = torch.randint(0, 30, (500,), dtype=torch.int32)

    def f(a, b, x, idx):
        return ct.matmul(a, b), ct.cumsum(x), ct.histogram(idx, 32), ct.transpose(x)

    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b, x, idx)
    assert not counters["graph_break"]
    for g, w in zip(got, f(a, b, x, idx)):
        assert torch.equal(g, w)


def test_gradients_match_torch():
    a, b = torch.randn(2, 5, 30, requires_grad=True), torch.randn(30, 7, requires_grad=True)
    w = torch.randn(2, 5, 7)
    (ct.matmul(a, b) * w).sum().backward()
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    ((a2 @ b2) * w).sum().backward()
    torch.testing.assert_close(a.grad, a2.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad, b2.grad, rtol=1e-5, atol=1e-5)
    x = torch.randn(3, 40, requires_grad=True)
    wx = torch.randn(3, 40)
    (ct.cumsum(x) * wx).sum().backward()
    x2 = x.detach().requires_grad_()
    (torch.cumsum(x2, -1) * wx).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-5)
    t = torch.randn(4, 9, 13, requires_grad=True)
    wt = torch.randn(4, 13, 9)
    (ct.transpose(t) * wt).sum().backward()
    assert torch.equal(t.grad, wt.transpose(-1, -2))

"""The short call paths of cohort.torch (issue 26 item 5): argument blocks pooled per
launch shape (only the pointers rewritten, the bounds proof kept), and the AutogradCPU
kernel that runs a dispatcher call on plain tensors without the second trip through
the dispatcher. Each must give the bits the full path gives, and keep every check."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import cohort.torch as ct  # noqa: E402
from cohort import Buffer, f32, global_id, i32, kernel  # noqa: E402
from cohort.backend.context import SLOT_PROOF  # noqa: E402
from cohort.refimpl.interpreter import KernelRuntimeError  # noqa: E402
from cohort.torch import launch  # noqa: E402
from cohort.torch.binding import TORCH_OPS  # noqa: E402


@kernel(block=32)
def scale(x: Buffer[f32], y: Buffer[f32], a: f32):
    i = global_id()
    if i < len(y):
        y[i] = x[i] * a


@kernel(block=32)
def shifted(x: Buffer[f32], y: Buffer[f32], k: i32):
    i = global_id()
    if i < len(y):
        y[i] = x[i + k]          # no guard on i + k: the proof decides, per (n, lengths, k)


@kernel(block=32)
def gather(x: Buffer[f32], idx: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    if i < len(y):
        y[i] = x[idx[i]]         # data-dependent: checked access by access, never proven


def _bits(t):
    return t.numpy().view(np.uint32)


def test_a_shape_seen_before_reuses_its_block_and_gives_the_same_bits():
    run = launch.launcher(scale, ())
    x = torch.randn(40)
    outs = []
    for _ in range(3):
        y = torch.empty(40)
        run(40, (x, y), (1.5,))
        outs.append(y)
    assert all(np.array_equal(_bits(o), _bits(x * 1.5)) for o in outs)
    pools = [k for k in run._ready if k[0] == 40 and k[1] == (1.5,)]
    assert len(pools) == 1 and len(run._ready[pools[0]]) == 1      # one block, reused
    p = run._ready[pools[0]][0][0]
    assert p.args[SLOT_PROOF] != 0                                  # proven once, kept
    y2 = torch.empty(23)                                            # another shape: its own block
    run(23, (x[:23].clone(), y2), (1.5,))
    assert np.array_equal(_bits(y2), _bits(x[:23] * 1.5))


def test_the_sign_of_a_zero_scalar_is_part_of_the_shape():
    run = launch.launcher(scale, ())
    x = torch.ones(8)
    for a in (0.0, -0.0, 0.0, -0.0):
        y = torch.empty(8)
        run(8, (x, y), (a,))
        want = np.full(8, np.float32(a)).view(np.uint32)
        assert np.array_equal(_bits(y), want), a


def test_a_new_scalar_is_proven_again_not_served_an_old_proof():
    run = launch.launcher(shifted, ())
    x, y = torch.arange(40, dtype=torch.float32), torch.empty(40)
    run(40, (x, y), (0,))
    run(40, (x, y), (0,))                      # the block is proven and pooled for k = 0
    assert torch.equal(y, x)
    with pytest.raises(KernelRuntimeError):    # same n and lengths, k = 5: reads x[44]
        run(40, (x, torch.empty(40)), (5,))
    with pytest.raises(KernelRuntimeError):    # and again, from whatever block was pooled
        run(40, (x, torch.empty(40)), (5,))
    y = torch.empty(40)
    run(40, (x, y), (0,))
    assert torch.equal(y, x)


def test_data_dependent_accesses_stay_checked_on_a_pooled_block():
    run = launch.launcher(gather, ())
    x = torch.arange(16, dtype=torch.float32)
    good, bad = torch.arange(16, dtype=torch.int32).flip(0).contiguous(), torch.full((16,), 16, dtype=torch.int32)
    for _ in range(2):
        y = torch.empty(16)
        run(16, (x, good, y))
        assert torch.equal(y, x.flip(0))
        with pytest.raises(KernelRuntimeError):
            run(16, (x, bad, torch.empty(16)))


def _cases():
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g)
    x, w, b = r(3, 96), r(96), r(96)
    q, k, v = r(1, 4, 8, 16), r(1, 2, 8, 16), r(1, 2, 8, 16)
    return [("rmsnorm", (x, w)), ("layernorm", (x, w, b)), ("swiglu", (x, x.flip(0).contiguous())),
            ("gelu", (x,)), ("gelu_tanh", (x,)), ("gelu_residual", (x, b.expand(3, 96).contiguous())),
            ("masked_softmax", (x, x > 0)), ("rope", (q, r(8, 4), r(8, 4), False)),
            ("attention", (q, k, v, True))]


@pytest.mark.parametrize("name,args", _cases(), ids=[c[0] for c in _cases()])
def test_every_path_gives_the_same_bits(name, args):
    impl = TORCH_OPS[name].impl
    want = impl(*args)
    op = getattr(torch.ops.cohort, name)
    got = [getattr(ct, name)(*args), op(*args), op.default(*args)]
    with torch.no_grad():
        got.append(op(*args))
    with torch.inference_mode():
        got.append(op(*args))
    for g in got:
        assert g.dtype == want.dtype and np.array_equal(g.numpy().view(np.uint8), want.numpy().view(np.uint8))


@pytest.mark.parametrize("name", ct.OPS)
def test_each_op_has_the_short_autograd_kernel(name):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"cohort::{name}", "AutogradCPU")


def test_the_short_kernel_gives_way_to_gradients_views_and_fakes():
    x, w = torch.randn(4, 32), torch.randn(32)
    # a gradient to record: custom_op's kernel, with its backward
    xg = x.clone().requires_grad_()
    torch.ops.cohort.rmsnorm(xg, w).sum().backward()
    assert xg.grad is not None and xg.grad.shape == x.shape
    # a negative view (an extra dispatch key): materialised before the kernel reads it, on both paths
    want = ct.rmsnorm(-x, w)
    assert torch.equal(torch.ops.cohort.rmsnorm(torch._neg_view(x), w), want)
    assert torch.equal(ct.rmsnorm(torch._neg_view(x), w), want)
    assert torch.equal(ct.rmsnorm(x, torch._neg_view(w)), ct.rmsnorm(x, -w))
    # FakeTensors: the fake implementation, which checks the arguments
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        assert torch.ops.cohort.rmsnorm(fx, fw).shape == x.shape
        with pytest.raises(ValueError, match="rmsnorm: weight must have shape"):
            torch.ops.cohort.rmsnorm(fx, mode.from_tensor(torch.randn(31)))


def test_bad_input_through_the_dispatcher_is_still_named():
    x = torch.randn(4, 32)
    with pytest.raises(ValueError, match="layernorm: bias must have shape"):
        torch.ops.cohort.layernorm(x, torch.randn(32), torch.randn(33))
    with pytest.raises(TypeError, match="swiglu: up must be"):
        torch.ops.cohort.swiglu(x, x.double())
    with pytest.raises(ValueError, match="rmsnorm: eps must be a finite float32 >= 0"):
        torch.ops.cohort.rmsnorm(x, torch.randn(32), -1.0)


def test_compiled_graphs_call_the_short_kernel_and_match_eager():
    x, w, b = torch.randn(2, 64), torch.randn(64), torch.randn(64)
    f = torch.compile(lambda x, w, b: ct.layernorm(ct.rmsnorm(x, w), w, b), fullgraph=True)
    want = ct.layernorm(ct.rmsnorm(x, w), w, b)
    before = launch.stats()["launches"]
    with torch.no_grad():
        got = f(x, w, b)
    assert torch.equal(got, want) and launch.stats()["launches"] == before + 2


def _clear_pools():
    for found in list(launch._builds.values()):
        found._ready.clear()


@pytest.mark.parametrize("name,args", _cases(), ids=[c[0] for c in _cases()])
def test_a_pooled_block_reads_the_new_tensors(name, args):
    """Same shapes, other data: the warm call (a pooled block, pointers rewritten) gives
    what a cold one (a block filled from scratch) gives, for every input."""
    impl = TORCH_OPS[name].impl
    other = tuple((a.flip(0).contiguous() + 0.25 if a.dtype == torch.float32 else ~a)
                  if isinstance(a, torch.Tensor) else a for a in args)
    impl(*args)
    warm = impl(*other)
    _clear_pools()
    cold = impl(*other)
    assert np.array_equal(warm.numpy().view(np.uint8), cold.numpy().view(np.uint8))
    assert not np.array_equal(warm.numpy().view(np.uint8), impl(*args).numpy().view(np.uint8))


@pytest.mark.parametrize("lead", [(), (1,), (2,)], ids=["[S,R]", "[1,S,R]", "[B,S,R]"])
def test_rope_hf_makes_its_table_once_and_rotates_as_rope(lead):
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 4, 6, 16, generator=g), torch.randn(2, 2, 6, 16, generator=g)
    half = torch.randn(*lead, 6, 6, generator=g)
    cos, sin = torch.cat([half, half], -1), torch.cat([half.neg(), half.neg()], -1) * 0.5   # R = 12 < D: partial
    c, s = cos[..., :6], sin[..., :6]
    if lead:
        c, s = c.unsqueeze(1), s.unsqueeze(1)             # [B, 1, S, R/2]: broadcast over the heads
    for fn in (ct.rope_hf, torch.ops.cohort.rope_hf):
        got_q, got_k = fn(q, k, cos, sin)
        assert torch.equal(got_q, ct.rope(q, c, s, interleaved=False))
        assert torch.equal(got_k, ct.rope(k, c, s, interleaved=False))


def test_auto_grain_settled_on_the_caller_calls_the_entry_directly():
    """With grain=auto, once a shape's choice is the caller's thread (a launch too small to
    share), the pooled block calls the chosen entry itself - and keeps its bits and its
    checks: a launch of the same shape whose data index leaves x still raises."""
    with ct.variant("packet,workers=2,grain=auto"):
        run = launch.launcher(gather, ())
        x = torch.randn(64)
        idx = torch.randint(0, 64, (40,), dtype=torch.int32)
        for _ in range(40):                      # the trials, then the choice
            y = torch.empty(40)
            run(40, (x, idx, y))
            assert np.array_equal(_bits(y), _bits(x[idx.long()]))
        key = next(k for k in run._ready if k[0] == 40)
        p, *_, direct = run._ready[key][-1]
        assert p._auto.chosen is not None and direct == (p._auto.chosen[3] is None)
        bad = idx.clone()
        bad[17] = 64
        with pytest.raises(KernelRuntimeError, match="out of bounds"):
            run(40, (x, bad, torch.empty(40)))
        y = torch.empty(40)
        run(40, (x, idx, y))
        assert np.array_equal(_bits(y), _bits(x[idx.long()]))

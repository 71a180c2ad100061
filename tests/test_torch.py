"""cohort.torch: the operators as torch ops (issue 16). Each op runs its operator's
kernel, so its output is the interpreter's bit for bit; the ops accept any leading
dimensions and non-contiguous inputs, reject bad input with an error naming the
argument, trace under torch.compile(fullgraph=True) with no graph break, pass
torch.library.opcheck, and serve every sequence length with one build."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import cohort.torch as ct  # noqa: E402
from cohort import Buffer, f32, global_id, i32, kernel  # noqa: E402
from cohort.refimpl import ops  # noqa: E402
from cohort.torch import launch  # noqa: E402


def _bits_equal(a: torch.Tensor, b) -> bool:
    b = torch.as_tensor(np.ascontiguousarray(b))
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


# ---------------------------------------------------------------- the interpreter's bits

ROW_CASES = [("rmsnorm", (5, 33)), ("layernorm", (3, 70)), ("masked_softmax", (7, 37)), ("swiglu", (4, 33)),
             ("gelu", (3, 41)), ("gelu_tanh", (3, 41)), ("gelu_residual", (2, 50))]


@pytest.mark.parametrize("name,shape", ROW_CASES, ids=lambda v: v if isinstance(v, str) else ops.fmt_shape(v))
def test_row_ops_are_the_interpreters_bits(name, shape):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 3)
    ref = ops.run_reference(op, shape, inputs)
    args = [_t(inputs[n]) for n in op.inputs]
    y = getattr(ct, name)(*args)
    assert y.dtype == torch.float32 and _bits_equal(y, ref)
    # any leading dimensions: the same rows as [2, R/2, C]... or one more level
    if shape[0] % 2 == 0 or name in ("swiglu", "gelu", "gelu_tanh", "gelu_residual", "rmsnorm"):
        lead = (1, shape[0], shape[1])
        y3 = getattr(ct, name)(*[a.reshape(lead) if a.dim() == 2 else a for a in args])
        assert _bits_equal(y3.reshape(shape), ref)


@pytest.mark.parametrize("name", ["rope_half", "rope_pairs"])
def test_rope_is_the_interpreters_bits(name):
    shape = (6, 5, 24, 16)                           # partial rotary: 8 features pass through
    op = ops.get(name)
    inputs = op.make_inputs(shape, 1)
    ref = ops.run_reference(op, shape, inputs)
    x = _t(inputs["x"]).reshape(2, 3, 5, 24)          # [B, H, S, D]
    y = ct.rope(x, _t(inputs["cos"]), _t(inputs["sin"]), interleaved=(name == "rope_pairs"))
    assert _bits_equal(y.reshape(shape[:3]), ref)
    assert torch.equal(y[..., 16:], x[..., 16:])


@pytest.mark.parametrize("name,shape", [("attention", (2, 4, 2, 7, 19, 8, 4)),
                                        ("attention_causal", (2, 4, 2, 7, 19, 8, 4)),
                                        ("attention_causal", (1, 2, 1, 9, 4, 4, 3))])
def test_attention_is_the_interpreters_bits(name, shape):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 2)
    ref = ops.run_reference(op, shape, inputs)
    y = ct.attention(*[_t(inputs[n]) for n in ("q", "k", "v")], causal=(name == "attention_causal"))
    assert _bits_equal(y, ref)


# ---------------------------------------------------------------- against torch's own functions

def test_ops_agree_with_eager_torch():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(3, 5, 65, generator=g), torch.randn(65, generator=g), torch.randn(65, generator=g)
    close = lambda a, e: torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)
    close(ct.rmsnorm(x, w, 1e-5), F.rms_norm(x, (65,), w, 1e-5))
    close(ct.layernorm(x, w, b), F.layer_norm(x, (65,), w, b, 1e-5))
    m = torch.rand(3, 5, 65, generator=g) > 0.4
    m[0, 0] = False                                  # a fully masked row: zeros
    y = ct.masked_softmax(x, m)
    close(y[1:], torch.softmax(x.masked_fill(~m, float("-inf")), -1)[1:])
    assert torch.equal(y[0, 0], torch.zeros(65))
    close(ct.masked_softmax(x, m[0, 1]), torch.softmax(x.masked_fill(~m[0, 1], float("-inf")), -1))  # broadcast
    close(ct.swiglu(x, w * x), F.silu(x) * (w * x))
    close(ct.gelu(x), F.gelu(x))
    close(ct.gelu_tanh(x), F.gelu(x, approximate="tanh"))
    assert torch.equal(ct.gelu_residual(x, w.expand_as(x)), ct.gelu(x) + w)   # the same operations


def test_attention_matches_sdpa_with_grouped_heads_scale_and_causal_alignment():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 6, 5, 16, generator=g), torch.randn(2, 3, 9, 16, generator=g),
               torch.randn(2, 3, 9, 12, generator=g))
    rep = lambda t: t.repeat_interleave(2, dim=1)
    close = lambda a, e: torch.testing.assert_close(a, e, rtol=2e-5, atol=2e-6)
    close(ct.attention(q, k, v), F.scaled_dot_product_attention(q, rep(k), rep(v)))
    close(ct.attention(q, k, v, scale=0.3), F.scaled_dot_product_attention(q, rep(k), rep(v), scale=0.3))
    # causal aligns bottom-right: query i sees keys j <= i + Skv - Sq (SDPA's is_causal: j <= i)
    bottom_right = torch.ones(5, 9, dtype=torch.bool).tril(diagonal=9 - 5)
    close(ct.attention(q, k, v, causal=True),
          F.scaled_dot_product_attention(q, rep(k), rep(v), attn_mask=bottom_right))
    assert not torch.allclose(ct.attention(q, k, v, causal=True),
                              F.scaled_dot_product_attention(q, rep(k), rep(v), is_causal=True))
    # with Sq > Skv the first rows see no key: zeros, not NaN
    o = ct.attention(torch.randn(1, 3, 6, 16, generator=g), k[:1, :, :4], v[:1, :, :4], causal=True)
    assert torch.equal(o[:, :, :2], torch.zeros(1, 3, 2, 12)) and not o.isnan().any()


def test_decoding_the_last_row_is_bitwise_the_prefills_last_row():
    # a row's result depends only on its query and the keys it sees: decoding with a KV cache
    # gives the bits of the full causal pass
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 4, 13, 16, generator=g), torch.randn(1, 2, 13, 16, generator=g),
               torch.randn(1, 2, 13, 16, generator=g))
    full = ct.attention(q, k, v, causal=True)
    for t in (0, 5, 8, 12):
        step = ct.attention(q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1], causal=True)
        assert torch.equal(step, full[:, :, t:t + 1]), t


def test_rope_broadcasts_cos_over_leading_dimensions():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 7, 16, generator=g)
    cos, sin = torch.randn(7, 8, generator=g), torch.randn(7, 8, generator=g)
    shared = ct.rope(x, cos, sin, interleaved=False)
    assert torch.equal(ct.rope(x, cos[None, None], sin[None, None], interleaved=False), shared)
    # per-batch positions (transformers' [B, 1, S, R/2]): each batch row its own cos/sin
    cb, sb = torch.stack([cos, cos.flip(0)]), torch.stack([sin, sin.flip(0)])
    y = ct.rope(x, cb[:, None], sb[:, None], interleaved=False)
    assert torch.equal(y[0], shared[0])
    assert torch.equal(y[1], ct.rope(x[1:], cos.flip(0), sin.flip(0), interleaved=False)[0])


# ---------------------------------------------------------------- layouts, grads, variants

def test_non_contiguous_inputs_give_the_contiguous_bits():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(65, 12, generator=g).t()          # a transposed view
    w = torch.randn(130, generator=g)[::2]            # a strided view
    assert not x.is_contiguous() and not w.is_contiguous()
    assert torch.equal(ct.rmsnorm(x, w), ct.rmsnorm(x.contiguous(), w.contiguous()))
    q = torch.randn(1, 5, 4, 16, generator=g).transpose(1, 2)     # [B, S, H, D] -> [B, H, S, D] view
    k = torch.randn(1, 7, 2, 16, generator=g).transpose(1, 2)
    v = torch.randn(1, 7, 2, 16, generator=g).transpose(1, 2)
    assert torch.equal(ct.attention(q, k, v), ct.attention(q.contiguous(), k.contiguous(), v.contiguous()))
    assert torch.equal(ct.rope(q, torch.ones(5, 8), torch.zeros(5, 8), interleaved=True), q.contiguous())


def test_outputs_are_new_tensors_and_inputs_are_never_written():
    x = torch.randn(4, 33)
    keep = x.clone()
    y = ct.gelu(x)
    assert y.data_ptr() != x.data_ptr() and torch.equal(x, keep)


def test_gradients_flow_and_a_kernel_op_without_one_is_an_error_not_silence():
    # issue 26: the operators have backward kernels (tests/test_autograd.py checks their values)
    x = torch.randn(3, 33, requires_grad=True)
    w = torch.randn(33)
    y = ct.rmsnorm(x, w)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    with torch.no_grad():
        assert not ct.rmsnorm(x, w).requires_grad
    # a user's kernel_op has no gradient formula: backward raises
    axpy = ct.kernel_op("cohort_test::axpy_nograd", _axpy, inputs=("x", "y"), output="out", scalars=("a",),
                        shape=lambda x, y, a: x.shape, launch=lambda x, y, a: (x.numel(), {}))
    z = axpy(x, torch.randn(3, 33), 2.0)
    with pytest.raises(RuntimeError, match="autograd"):
        z.sum().backward()


@kernel(block=8)
def _triple8(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    if i < len(x):
        y[i] = x[i] * 3.0


def test_the_default_variant_fills_one_register_and_fits_a_small_block():
    from cohort.backend import target
    from cohort.backend.compiler import UnsupportedVariant
    wide = target.host().vector_bits >= 512
    assert ct.DEFAULT_SPEC == ("packet,lanes=16" if wide else "packet")
    assert ct.current_variant().lanes == (16 if wide else 8)
    op = ct.kernel_op("cohort_test_default::triple8", _triple8, inputs=("x",), output="y",
                      shape=lambda x: x.shape, launch=lambda x: (x.numel(), {}))
    x = torch.randn(37)
    assert torch.equal(op(x), x * 3.0)            # block 8 under the default: run as `packet`
    if wide:
        with ct.variant("lanes=16"), pytest.raises(UnsupportedVariant, match="block 8 is smaller than lanes 16"):
            op(x)                                 # a user's own choice is not changed
        ct.variant("lanes=16")
        try:
            with pytest.raises(UnsupportedVariant):
                op(x)
        finally:
            ct.variant(ct.DEFAULT_VARIANT)        # the default again, fitted again
        assert torch.equal(op(x), x * 3.0)


def test_variant_setting_and_scope_give_the_same_bits():
    x, w = torch.randn(9, 70), torch.randn(70)
    ref = ct.rmsnorm(x, w)
    assert ct.current_variant().label == ct.DEFAULT_VARIANT
    with ct.variant("whole") as v:
        assert v.lanes == 1 and ct.current_variant() is v
        assert torch.equal(ct.rmsnorm(x, w), ref)
    assert ct.current_variant().label == ct.DEFAULT_VARIANT
    try:
        ct.variant("lanes=4,private=thread")
        assert ct.current_variant().lanes == 4 and torch.equal(ct.rmsnorm(x, w), ref)
    finally:
        ct.variant(ct.DEFAULT_VARIANT)
    with pytest.raises(ValueError, match="fast_math"):
        ct.variant("packet-fast")
    with pytest.raises(ValueError, match="unknown variant"):
        ct.variant("turbo")


def test_empty_tensors():
    assert ct.rmsnorm(torch.randn(0, 8), torch.randn(8)).shape == (0, 8)
    assert ct.gelu(torch.randn(0)).shape == (0,)
    assert ct.attention(torch.randn(1, 2, 0, 4), torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 5)).shape == (1, 2, 0, 5)
    assert torch.equal(ct.attention(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 0, 4), torch.randn(1, 2, 0, 5)),
                       torch.zeros(1, 2, 3, 5))


# ---------------------------------------------------------------- bad input

BAD = [
    (lambda: ct.rmsnorm(torch.randn(3, 8).double(), torch.randn(8)), TypeError, "rmsnorm: x must be torch.float32"),
    (lambda: ct.rmsnorm(torch.randn(3, 8), torch.randn(8).bfloat16()), TypeError,
     "rmsnorm: weight is torch.bfloat16 and x is torch.float32; they must have one dtype"),
    (lambda: ct.rmsnorm(torch.randn(3, 8, device="meta"), torch.randn(8)), ValueError, "x must be on the CPU"),
    (lambda: ct.rmsnorm(torch.randn(3, 8), torch.randn(9)), ValueError, r"weight must have shape \(8,\)"),
    (lambda: ct.rmsnorm([1.0], torch.randn(1)), TypeError, "x must be a torch.Tensor"),
    (lambda: ct.rmsnorm(torch.randn(3, 8), torch.randn(8), float("nan")), ValueError, "eps must be a finite"),
    (lambda: ct.masked_softmax(torch.randn(3, 8), torch.ones(3, 8)), TypeError, "mask must be torch.bool"),
    (lambda: ct.masked_softmax(torch.randn(3, 8), torch.ones(2, 8, dtype=torch.bool)), ValueError,
     "mask of shape"),
    (lambda: ct.swiglu(torch.randn(3, 8), torch.randn(3, 9)), ValueError, "up has shape"),
    (lambda: ct.attention(torch.randn(1, 4, 5, 8), torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 8)),
     ValueError, "k's feature size 16 differs from q's 8"),
    (lambda: ct.attention(torch.randn(1, 3, 5, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)),
     ValueError, r"q's heads \(3\) must be a multiple"),
    (lambda: ct.attention(torch.randn(2, 4, 5, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)),
     ValueError, "batch sizes differ"),
    (lambda: ct.attention(torch.randn(1, 4, 5, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 7, 8)),
     ValueError, "v has shape"),
    (lambda: ct.attention(torch.randn(4, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)),
     ValueError, "q must be 4-D"),
    (lambda: ct.attention(torch.randn(1, 2, 5, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8), scale=float("inf")),
     ValueError, "scale must be a finite"),
    (lambda: ct.rmsnorm(torch.randn(2, 8), torch.ones(8), -1.0), ValueError, "eps must be a finite float32 >= 0"),
    (lambda: ct.layernorm(torch.randn(2, 8), torch.ones(8), torch.zeros(8), -1e-5), ValueError,
     "eps must be a finite float32 >= 0"),
    (lambda: ct.rope(torch.randn(2, 5, 8), torch.randn(5, 8), torch.randn(5, 8), interleaved=True), ValueError,
     "rotary dimension R = 2 \\* cos.shape\\[-1\\] = 16 is larger than x's last dimension D = 8"),
    (lambda: ct.rope(torch.randn(2, 5, 8), torch.randn(5, 2), torch.randn(5, 3), interleaved=True), ValueError,
     "cos has shape .* sin has"),
    (lambda: ct.rope(torch.randn(2, 5, 8), torch.randn(4, 2), torch.randn(4, 2), interleaved=True), ValueError, "cos has 4 positions"),
    (lambda: ct.rope(torch.randn(2, 5, 8), torch.randn(5, 0), torch.randn(5, 0), interleaved=True), ValueError, "no columns"),
    (lambda: ct.rope(torch.randn(2, 3, 5, 8), torch.randn(4, 1, 5, 2), torch.randn(4, 1, 5, 2), interleaved=True), ValueError,
     "does not broadcast"),
]


@pytest.mark.parametrize("call,exc,msg", BAD, ids=[b[2][:40] for b in BAD])
def test_bad_input_raises_an_error_naming_the_argument(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# ---------------------------------------------------------------- torch.library and torch.compile

def _opcheck_cases():
    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g)
    x, w = r(3, 5, 33), r(33)
    return [("rmsnorm", (x, w, 1e-6)), ("layernorm", (x, w, r(33), 1e-5)),
            ("masked_softmax", (x, torch.rand(3, 5, 33, generator=g) > 0.5)), ("swiglu", (x, r(3, 5, 33))),
            ("gelu", (x,)), ("gelu_tanh", (x,)), ("gelu_residual", (x, r(3, 5, 33))),
            ("rope", (r(2, 4, 6, 16), r(6, 8), r(6, 8), False)),
            ("attention", (r(1, 4, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 4), True, 0.25))]


@pytest.mark.parametrize("name,args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    torch.library.opcheck(getattr(torch.ops.cohort, name).default, args)


class _Block(torch.nn.Module):
    def forward(self, x, w, q, k, v, cos, sin):
        h = ct.rmsnorm(x, w)
        h = ct.swiglu(h, h) + ct.gelu_tanh(h)
        q = ct.rope(q, cos, sin, interleaved=False)
        return h, ct.attention(q, ct.rope(k, cos, sin, interleaved=False), v, causal=True)


def _block_inputs(S=6):
    g = torch.Generator().manual_seed(6)
    r = lambda *s: torch.randn(*s, generator=g)
    return r(2, S, 32), r(32), r(1, 4, S, 16), r(1, 2, S, 16), r(1, 2, S, 16), r(S, 8), r(S, 8)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_compile_fullgraph_has_no_graph_break_and_the_same_bits(backend):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    m = _Block()
    compiled = torch.compile(m, fullgraph=True, backend=backend)
    for S in (6, 9):                                  # a second length: dynamic shapes, no break
        args = _block_inputs(S)
        got, want = compiled(*args), m(*args)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert not counters["graph_break"]


# ---------------------------------------------------------------- one build serves every length

def test_lengths_are_runtime_arguments_one_build_serves_all():
    g = torch.Generator().manual_seed(7)
    run = lambda S, T: (ct.attention(torch.randn(1, 4, S, 16, generator=g), torch.randn(1, 2, T, 16, generator=g),
                                     torch.randn(1, 2, T, 16, generator=g), causal=True),
                        ct.rope(torch.randn(3, 4, S, 16, generator=g), torch.randn(S, 8, generator=g),
                                torch.randn(S, 8, generator=g), interleaved=False))
    for S in (1, 5, 17):     # one launch of each form attention.form_for picks here (G = 2)
        run(S, S)
    builds = ct.stats()["builds"]
    for S, T in ((1, 6), (1, 7), (17, 40), (3, 3), (64, 64), (1, 130), (4, 9), (200, 201)):
        run(S, T)
    assert ct.stats()["builds"] == builds


def test_launches_are_recorded_for_timing():
    x, w = torch.randn(4, 33), torch.randn(33)
    with launch.recording() as launches:
        y = ct.rmsnorm(x, w)
    (launcher, n, tensors, scalars), = launches
    p = launcher.prepare(n, tensors, scalars)
    p.run()
    assert torch.equal(tensors[-1], y) and p.fallback is None


# ---------------------------------------------------------------- any kernel as an op

@kernel
def _shifted(x: Buffer[f32], y: Buffer[f32], k: i32):
    i = global_id()
    y[i] = x[i + k] if i + k < len(x) else 0.0     # a guard on an expression: the proof cannot use it


def test_a_launch_the_proof_cannot_cover_runs_the_checked_build_and_errors_are_raised():
    shifted = ct.kernel_op("cohort_test::shifted", _shifted, inputs=("x",), output="y", scalars=("k",),
                           shape=lambda x, k: x.shape, launch=lambda x, k: (x.numel(), {}))
    x = torch.arange(40, dtype=torch.float32)
    for k in (3, 0, 5):
        want = torch.cat((x[k:], torch.zeros(k)))
        assert torch.equal(shifted(x, k), want)
    too_many = ct.kernel_op("cohort_test::too_many", _shifted, inputs=("x",), output="y", scalars=("k",),
                            shape=lambda x, k: x.shape, launch=lambda x, k: (x.numel() + 1, {}))
    from cohort.refimpl.interpreter import KernelRuntimeError
    with pytest.raises(KernelRuntimeError, match="out of bounds"):
        too_many(x, 0)
    assert torch.equal(shifted(x, 2), torch.cat((x[2:], torch.zeros(2))))


@kernel
def _axpy(x: Buffer[f32], y: Buffer[f32], out: Buffer[f32], a: f32):
    i = global_id()
    out[i] = a * x[i] + y[i]


def test_kernel_op_turns_a_user_kernel_into_a_torch_op():
    axpy = ct.kernel_op("cohort_test::axpy", _axpy, inputs=("x", "y"), output="out", scalars=("a",),
                        shape=lambda x, y, a: x.shape, launch=lambda x, y, a: (x.numel(), {}))
    x, y = torch.randn(3, 7), torch.randn(3, 7)
    want = torch.from_numpy((np.float32(2.5) * x.numpy() + y.numpy()).astype(np.float32))
    assert torch.equal(axpy(x, y, 2.5), want)
    assert torch.equal(torch.ops.cohort_test.axpy(x, y, 2.5), want)
    torch.library.opcheck(torch.ops.cohort_test.axpy.default, (x, y, 2.5))
    from torch._dynamo.utils import counters
    counters.clear()
    assert torch.equal(torch.compile(lambda a, b: axpy(a, b, 2.5), fullgraph=True, backend="aot_eager")(x, y), want)
    with pytest.raises(TypeError, match="y must be torch.float32"):
        axpy(x, y.double(), 2.5)
    with pytest.raises(ValueError, match="must name the kernel's buffers"):
        ct.kernel_op("cohort_test::bad", _axpy, inputs=("x",), output="out", scalars=("a",),
                     shape=lambda x, a: x.shape, launch=lambda x, a: (x.numel(), {}))

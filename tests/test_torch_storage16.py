"""cohort.torch's ops on bf16 and fp16 tensors (issue 26 item 3; cohort/torch/dtypes.py).

Each op's output has its inputs' dtype; its kernel is the f32 one re-typed to 16-bit
buffers: loads widen exactly, arithmetic is f32 (f32 accumulation), the output is
rounded once to nearest even. Two bounds, per row (the last dimension), relative to
the row's largest |float64 value|, u the type's unit roundoff (bf16 2^-8, fp16 2^-11):

- against the float64 oracle on the same (widened) inputs: the f32 operator's bound
  plus the output's rounding, rel_tol + u(1 + rel_tol) (refimpl/ops/storage.py);
- against PyTorch's own bf16/fp16 CPU result: 3u. PyTorch computes these ops in f32
  too but rounds some intermediates to the storage type (silu before the product,
  rope's two products, SDPA's probabilities), so its own error against float64 is up
  to about 2u (measured here: at most 1.7u; ours at most 1.0u, ours against PyTorch's
  at most 2.0u); ours is at most u plus the f32 error.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import cohort.torch as ct
from cohort import Buffer, bf16, f32, global_id, kernel
from cohort.refimpl import ops

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
UNIT = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def row_err(y, ref) -> float:
    """max over rows of max|y - ref| / max|ref| (rows: the last dimension)."""
    y = y.double().reshape(-1, y.shape[-1])
    ref = ref.double().reshape(-1, ref.shape[-1])
    scale = ref.abs().amax(dim=1, keepdim=True).clamp_min(1e-300)
    return float(((y - ref).abs() / scale).max())


def rot_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _cases(dt):
    """(cohort op name in refimpl, cohort call, the same computation in PyTorch) for inputs of dtype dt:
    the PyTorch function is run on dt tensors (PyTorch's bf16/fp16 CPU result) and on float64."""
    g = torch.Generator().manual_seed(7)
    r = lambda *s: torch.randn(*s, generator=g).to(dt)
    x, w, b, u = r(33, 200), r(200), r(200), r(33, 200)
    mask = torch.rand(33, 200, generator=g) < 0.7
    mask[:, 0] = True
    q, k, v = r(2, 4, 37, 64), r(2, 2, 37, 64), r(2, 2, 37, 64)
    cos, sin = r(37, 16), r(37, 16)
    causal = torch.ones(37, 37, dtype=torch.bool).tril()

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                              attn_mask=causal)

    def rope_ref(x, c, s):
        c, s = torch.cat((c, c), -1), torch.cat((s, s), -1)
        R = c.shape[-1]
        return torch.cat((x[..., :R] * c + rot_half(x[..., :R]) * s, x[..., R:]), -1)

    return [
        ("rmsnorm", lambda: ct.rmsnorm(x, w, 1e-6), lambda t: F.rms_norm(t(x), (200,), t(w), 1e-6)),
        ("layernorm", lambda: ct.layernorm(x, w, b, 1e-5), lambda t: F.layer_norm(t(x), (200,), t(w), t(b), 1e-5)),
        ("masked_softmax", lambda: ct.masked_softmax(x, mask),
         lambda t: torch.softmax(t(x).masked_fill(~mask, float("-inf")), -1)),
        ("swiglu", lambda: ct.swiglu(x, u), lambda t: F.silu(t(x)) * t(u)),
        ("gelu", lambda: ct.gelu(x), lambda t: F.gelu(t(x))),
        ("gelu_tanh", lambda: ct.gelu_tanh(x), lambda t: F.gelu(t(x), approximate="tanh")),
        ("gelu_residual", lambda: ct.gelu_residual(x, u), lambda t: F.gelu(t(x)) + t(u)),
        ("rope_half", lambda: ct.rope(q, cos, sin, interleaved=False), lambda t: rope_ref(t(q), t(cos), t(sin))),
        ("attention", lambda: ct.attention(q, k, v, causal=True), lambda t: sdpa(t(q), t(k), t(v))),
        ("matmul", lambda: ct.matmul(x, u.T.contiguous()[:, :40]), lambda t: t(x) @ t(u.T.contiguous()[:, :40])),
        ("cumsum", lambda: ct.cumsum(x), lambda t: torch.cumsum(t(x), -1)),
        ("transpose", lambda: ct.transpose(x), lambda t: t(x).transpose(-1, -2).contiguous()),
    ]


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_ops_against_float64_and_pytorch(name):
    dt = DTYPES[name]
    u = UNIT[dt]
    worst = {}
    for op, ours, theirs in _cases(dt):
        y = ours()
        assert y.dtype == dt, op
        exact = theirs(lambda t: t.double())
        torch_y = theirs(lambda t: t)
        assert torch_y.dtype == dt
        tol = ops.get(op).rel_tol
        e64, et = row_err(y, exact), row_err(y, torch_y)
        worst[op] = (e64 / u, et / u, row_err(torch_y, exact) / u)
        assert e64 <= tol + u * (1 + tol), (op, e64)
        assert et <= 3 * u, (op, et)
    print(name, {k: tuple(round(v, 2) for v in t) for k, t in worst.items()})


def test_matmul_wide_form_in_bf16():
    """cohort.torch picks matmul's wide form for a few rows of a wide b: re-typed like the tiled one."""
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(2, 64, generator=g).bfloat16(), torch.randn(64, 4100, generator=g).bfloat16()
    y = ct.matmul(a, b)
    tiled = ct.matmul(torch.cat([a, a, a]), b)[:2]      # 6 rows: the tiled form, same bits
    assert y.dtype == torch.bfloat16 and torch.equal(y.view(torch.int16), tiled.view(torch.int16))
    assert row_err(y, a.double() @ b.double()) <= ops.get("matmul").rel_tol + 2.0 ** -8 * 1.01


def test_bf16_bits_are_the_interpreters_in_every_variant():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(17, 65, generator=g).to(torch.bfloat16)
    w = torch.randn(65, generator=g).to(torch.bfloat16)
    op = ops.get("rmsnorm:bf16", "private")
    inp = {"x": x.view(torch.int16).numpy().view(np.uint16), "w": w.view(torch.int16).numpy().view(np.uint16)}
    want = ops.run_reference(op, (17, 65), inp)
    for v in ("whole", "packet", "lanes=16", "packet,predicated=off"):
        with ct.variant(v):
            y = ct.rmsnorm(x, w, 1e-6)
        assert np.array_equal(y.view(torch.int16).numpy().view(np.uint16), want), v
    q = torch.randn(1, 2, 20, 16, generator=g).to(torch.float16)
    outs = []
    for v in ("whole", "packet", "lanes=4"):
        with ct.variant(v):
            outs.append(ct.attention(q, q, q, causal=True))
    assert all(torch.equal(o.view(torch.int16), outs[0].view(torch.int16)) for o in outs)


def test_compiled_graph_traces_bf16_with_no_break():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 9, 64, generator=g).to(torch.bfloat16)
    w = torch.randn(64, generator=g).to(torch.bfloat16)

    def block(x, w):
        h = ct.rmsnorm(x, w)
        return ct.gelu_residual(ct.swiglu(h, h), x)

    torch._dynamo.reset()
    explain = torch._dynamo.explain(block)(x, w)
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    out = torch.compile(block, fullgraph=True, backend="aot_eager")(x, w)   # Inductor: the slow test
    assert out.dtype == torch.bfloat16 and torch.equal(out, block(x, w))


@pytest.mark.slow
def test_inductor_compiles_bf16():
    x = torch.randn(4, 9, 64).to(torch.bfloat16)
    w = torch.randn(64).to(torch.bfloat16)
    f = lambda x, w: ct.swiglu(ct.rmsnorm(x, w), x) * 2
    torch._dynamo.reset()
    assert torch.equal(torch.compile(f, fullgraph=True)(x, w), f(x, w))


def test_opcheck_on_bf16():
    from torch.library import opcheck
    x = torch.randn(5, 40).to(torch.bfloat16).requires_grad_()
    w = torch.randn(40).to(torch.bfloat16).requires_grad_()
    opcheck(torch.ops.cohort.rmsnorm.default, (x, w, 1e-6))


@pytest.mark.slow
def test_opcheck_on_bf16_and_fp16():
    from torch.library import opcheck
    g = torch.Generator().manual_seed(3)
    for dt in DTYPES.values():
        x = torch.randn(5, 40, generator=g).to(dt).requires_grad_()
        w = torch.randn(40, generator=g).to(dt).requires_grad_()
        opcheck(torch.ops.cohort.rmsnorm.default, (x, w, 1e-6))
        opcheck(torch.ops.cohort.swiglu.default, (x, x.detach() * 2))
        q = torch.randn(1, 2, 9, 16, generator=g).to(dt).requires_grad_()
        opcheck(torch.ops.cohort.attention.default, (q, q.detach() * 0.5, q.detach(), True))


def test_gradients_come_in_the_inputs_dtype_from_the_f32_backward():
    g = torch.Generator().manual_seed(4)
    for dt in DTYPES.values():
        x = torch.randn(6, 48, generator=g).to(dt).requires_grad_()
        w = torch.randn(48, generator=g).to(dt).requires_grad_()
        dy = torch.randn(6, 48, generator=g).to(dt)
        ct.rmsnorm(x, w).backward(dy)
        x32, w32 = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
        ct.rmsnorm(x32, w32).backward(dy.float())
        assert x.grad.dtype == w.grad.dtype == dt
        assert torch.equal(x.grad, x32.grad.to(dt)) and torch.equal(w.grad, w32.grad.to(dt))
        q = torch.randn(1, 4, 11, 16, generator=g).to(dt).requires_grad_()
        k = torch.randn(1, 2, 11, 16, generator=g).to(dt).requires_grad_()
        ct.attention(q, k, k.detach(), causal=True).sum().backward()
        assert q.grad.dtype == k.grad.dtype == dt
        a = torch.randn(5, 24, generator=g).to(dt).requires_grad_()
        w = torch.randn(24, 8, generator=g).to(dt).requires_grad_()
        ct.cumsum(ct.matmul(a, w)).sum().backward()      # their backward ops are forward ops, in dt
        assert a.grad.dtype == w.grad.dtype == dt


@pytest.mark.parametrize("bad, match", [
    (torch.float64, r"rmsnorm: x must be torch.float32, torch.bfloat16 or torch.float16, got torch.float64 "
                    r"\(convert with .float\(\)\)"),
    (torch.int32, r"rmsnorm: x must be torch.float32, torch.bfloat16 or torch.float16, got torch.int32$"),
])
def test_unsupported_dtypes_are_one_line_errors_naming_the_argument(bad, match):
    with pytest.raises(TypeError, match=match):
        ct.rmsnorm(torch.ones(2, 4, dtype=bad), torch.ones(4))


def test_mixed_dtypes_are_refused():
    with pytest.raises(TypeError, match=r"rmsnorm: weight is torch.float32 and x is torch.bfloat16; they must have "
                                        r"one dtype"):
        ct.rmsnorm(torch.ones(2, 4, dtype=torch.bfloat16), torch.ones(4))
    q = torch.ones(1, 1, 2, 4, dtype=torch.float16)
    with pytest.raises(TypeError, match="attention: k is torch.bfloat16 and q is torch.float16"):
        ct.attention(q, q.bfloat16(), q)
    with pytest.raises(TypeError, match="swiglu: up is torch.float32 and gate is torch.bfloat16"):
        ct.swiglu(q.bfloat16(), q.float())


def test_kernel_op_takes_storage_buffers():
    @kernel
    def scale16(x: Buffer[bf16], y: Buffer[bf16], a: f32):
        i = global_id()
        y[i] = x[i] * a

    op = ct.kernel_op("cohort_test::scale16", scale16, inputs=("x",), output="y", scalars=("a",),
                      shape=lambda x, a: x.shape, launch=lambda x, a: (x.numel(), {}))
    x = torch.randn(3, 50).to(torch.bfloat16)
    y = op(x, 0.3)
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, (x.float() * np.float32(0.3)).to(torch.bfloat16))
    with pytest.raises(TypeError, match="x must be torch.bfloat16, got torch.float32"):
        op(x.float(), 0.3)


@pytest.mark.slow
def test_llama_example_in_bf16_with_a_left_padded_batch():
    """examples/llama.py's model in bfloat16: cohort's logits as close to the float32 model's as eager
    bf16's are, and greedy generation of a left-padded batch identical to eager bf16's."""
    import copy
    import sys
    from pathlib import Path
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import llama as L
    ref = L.build_model().to(torch.bfloat16)
    mine = L.use_cohort(copy.deepcopy(ref))
    ids, mask = L.padded_batch(256, [12, 7])
    with torch.no_grad():
        f32 = L.build_model()(input_ids=ids, attention_mask=mask).logits
        keep = mask.bool()
        err = lambda x: float((x.float() - f32)[keep].abs().max() / f32[keep].abs().max())
        b = mine(input_ids=ids, attention_mask=mask).logits
        assert b.dtype == torch.bfloat16
        assert err(b) <= 2 * err(ref(input_ids=ids, attention_mask=mask).logits)
        gen = dict(attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
        assert torch.equal(mine.generate(input_ids=ids, **gen), ref.generate(input_ids=ids, **gen))


def test_attention_masks_in_the_storage_type():
    """A float mask in q's dtype (SDPA's rule) is widened exactly to the kernel's f32 bias."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 2, 7, 16, generator=g).to(torch.bfloat16).requires_grad_()
    m = (torch.randn(2, 1, 7, 7, generator=g) * 3).to(torch.bfloat16)
    y = ct.attention(q, q.detach(), q.detach(), mask=m)
    assert y.dtype == torch.bfloat16 and torch.equal(y, ct.attention(q, q.detach(), q.detach(), mask=m.float()))
    ct.attention(q, q.detach(), q.detach(), mask=m > 0).sum().backward()
    assert q.grad.dtype == torch.bfloat16
    with pytest.raises(TypeError, match=r"mask must be torch.bool \(True = attend\) or torch.float32 or q's "
                                        r"torch.bfloat16 \(added to the scores\), got torch.float16"):
        ct.attention(q, q, q, mask=m.half())

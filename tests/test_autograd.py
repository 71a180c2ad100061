"""Autograd (issue 26 item 4): the backward kernels are operators like the forward ones
- defined by the interpreter, within their float64 oracle, every variant bit for bit -
and cohort.torch's gradients, registered with register_autograd, agree with PyTorch's
autograd of the eager reference, pass opcheck, trace under torch.compile, and train.

Tolerances. Against the float64 oracle (the interpreter's own error): max |err| <=
ORACLE_TOL * max |oracle| over the output (a gradient can cancel to ~0 in a row - a
one-column rmsnorm row, an attention row that sees one key - so the scale is the
tensor's, not the row's). Against torch: both sides are float32 with one rounding
per operation, summing the same terms in different orders (torch: vectorised and
blocked reductions and matmuls; cohort: the sequential and tree orders its kernels
define), so they differ by rounding only: about n*2^-24 relative to the largest term for
a sum of n terms, n <= 65 here, i.e. <= 4e-6; the bound TORCH_TOL = 4e-6 of the
gradient's max |value| is that, per gradient tensor (measured: <= 7e-7).
"""
import numpy as np
import pytest

from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.refimpl.ops import attention_backward as AB
from cohort.refimpl.ops.base import seeded_normal
from cohort.verify.compare import verify_build

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import cohort.torch as ct  # noqa: E402

ORACLE_TOL = 1e-5
TORCH_TOL = 4e-6

ROW_SIZES = [(17, 65), (3, 63)]
ATT_SIZES = [(2, 4, 2, 7, 19, 8, 4), (1, 6, 3, 33, 17, 8, 4)]
VARIANTS = ["whole", "packet", "packet,lanes=16"]
MORE_VARIANTS = ["lanes=4,private=thread,predicated=off", "lanes=8,full_packet=off", "packet,interleave=1",
                 "packet,checked=on", "whole,grain=1,workers=2"]


def _ids(v):
    return ops.fmt_shape(v) if isinstance(v, tuple) else str(v)


def _sizes(name):
    return ATT_SIZES if name.startswith("attention") else ROW_SIZES


def _global_rel(y, ref):
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    both_inf = np.isinf(y) & np.isinf(ref) & (np.sign(y) == np.sign(ref))
    with np.errstate(invalid="ignore"):
        err = np.where(both_inf, 0.0, np.abs(y - ref))
    err = np.where(np.isnan(err), np.inf, err)
    scale = np.abs(np.where(np.isinf(ref), 0.0, ref)).max(initial=0.0)
    return float(err.max(initial=0.0) / scale) if scale else float(err.max(initial=0.0))


# ---------------------------------------------------------------- the kernels: interpreter and variants

@pytest.mark.parametrize("name,shape", [(n, s) for n in ops.BACKWARD for s in _sizes(n)], ids=_ids)
def test_interpreter_is_within_the_oracle(name, shape):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 0)
    y = ops.run_reference(op, shape, inputs)
    assert y.dtype == np.float32 and not np.isnan(y).any()
    assert _global_rel(y, op.oracle(inputs)) <= ORACLE_TOL


def _run_variant(op, shape, variant, launch=None, inputs=None, claims=True):
    inputs = op.make_inputs(shape, 0) if inputs is None else inputs
    launch = launch or op.launch(shape)
    bufs = ops.allocate(op, shape, inputs)
    from cohort.refimpl.interpreter import interpret
    ref_bufs = {n: a.copy() for n, a in bufs.items()}
    interpret(op.kernel.ir, launch.n, {**ref_bufs, **launch.scalars}, launch.consts)
    ref = ref_bufs[op.output]
    ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
    verdict = verify_build(ck, launch.n, {**bufs, **launch.scalars}, {op.output: ref}, claims=claims,
                           label=f"{op.name} {shape} {variant}")
    assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("name,shape,variant", [(n, s, v) for n in ops.BACKWARD for s in _sizes(n) for v in VARIANTS],
                         ids=_ids)
def test_every_variant_is_the_interpreters_bits(name, shape, variant):
    _run_variant(ops.get(name), shape, variant)


@pytest.mark.slow
@pytest.mark.parametrize("name,shape,variant", [(n, s, v) for n in ops.BACKWARD for s in _sizes(n)
                                                for v in MORE_VARIANTS], ids=_ids)
def test_more_variants_are_the_interpreters_bits(name, shape, variant):
    _run_variant(ops.get(name), shape, variant, claims=variant not in ("whole,grain=1,workers=2",))


def test_tails_one_column_and_rows_that_are_not_whole_blocks():
    for name in ("rmsnorm_bwd_w", "layernorm_bwd_wb", "swiglu_bwd", "gelu_bwd"):
        for shape in ((1, 1), (5, 33), (2, 7)):
            _run_variant(ops.get(name), shape, "packet")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", ["rmsnorm_bwd_w", "layernorm_bwd_wb"])
def test_column_kernels_sum_in_chunks_of_rows(name, variant):
    # 300 rows: two full chunks of 128 and a partial one; within the oracle, every variant's bits
    op = ops.get(name)
    inputs = op.make_inputs((300, 40), 2)
    assert _global_rel(ops.run_reference(op, (300, 40), inputs), op.oracle(inputs)) <= ORACLE_TOL
    _run_variant(op, (300, 40), variant, inputs=inputs, claims=False)


# attention's mask and window paths, each kernel in each variant (the forward's cases)
MASK_SHAPE = (1, 4, 2, 19, 23, 8, 8)


def _mask_case(kind):
    B, H, HKV, SQ, SKV, D, DV = MASK_SHAPE
    rng = np.random.default_rng(7)
    if kind == "window":
        return None, None, True, 5
    shape4 = (B, 1, SQ, SKV) if kind.startswith("bool") else (B, H, SQ, SKV)
    keep = rng.random(shape4) < 0.7
    keep[..., 0, :] = False                           # a fully masked row
    bias = np.where(keep, np.float32(0), np.float32(-np.inf)).astype(np.float32)
    if kind.startswith("float"):
        bias = bias + rng.standard_normal(shape4).astype(np.float32)
    full = (shape4[1] * SQ * SKV, SQ * SKV, SKV)
    strides = tuple(0 if shape4[i] == 1 else full[i] for i in range(3))
    causal = kind.endswith("+window")
    return bias, strides, causal, (4 if causal else None)


def _mask_inputs(kind):
    bias, strides, causal, window = _mask_case(kind)
    B, H, HKV, SQ, SKV, D, DV = MASK_SHAPE
    inp = {n: seeded_normal(3, "attention_bwd", n, sh) for n, sh in AB.shapes(MASK_SHAPE).items()
           if n in ("q", "k", "v", "do")}
    b64 = None if bias is None else bias.astype(np.float64)
    o = AB.forward_reference(inp["q"], inp["k"], inp["v"], causal, None, b64, window)
    lse = AB.reference_lse(inp["q"], inp["k"], causal, None, b64, window)
    dr = (inp["do"].astype(np.float64) * o).sum(-1, keepdims=True)
    inp["o"] = o.astype(np.float32)
    inp["st"] = np.concatenate([lse, dr], -1).astype(np.float32)
    inp["bias"] = np.zeros(1, np.float32) if bias is None else bias
    return inp, strides, causal, window, b64


# bool and float+window by default (a mask of each dtype, the window with a mask); all under -m slow
MASK_KINDS = ["bool", pytest.param("float", marks=pytest.mark.slow), pytest.param("window", marks=pytest.mark.slow),
              "float+window"]


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("kernel", ["attention_bwd_stats", "attention_bwd_dq", "attention_bwd_dkv"])
def test_masks_and_windows_every_variant_and_the_oracle(kernel, kind):
    from dataclasses import replace
    inp, strides, causal, window, b64 = _mask_inputs(kind)
    op = ops.get(kernel)
    op = replace(op, buffer_shapes=lambda s, op=op: {**op.buffer_shapes(s), "bias": inp["bias"].shape}, aux=())
    launch = (AB.launch_keys if kernel.endswith("dkv") else AB.launch_rows)(MASK_SHAPE, causal, None, strides, window)
    names = [n for n in op.buffer_shapes(MASK_SHAPE) if n != op.output]
    given = {n: inp[n] for n in names}
    y = ops.run_reference(replace(op, launch=lambda s: launch), MASK_SHAPE, given)
    assert not np.isnan(y).any()
    if kernel.endswith("stats"):
        want = inp["st"]
        rows_without_keys = np.isinf(want[..., 0])
        assert rows_without_keys.any() == (kind != "window")       # masked rows: L = +inf
        assert np.array_equal(np.isinf(y[..., 0]), rows_without_keys)
    else:
        dq, dk, dv = AB.reference_backward(inp["q"], inp["k"], inp["v"], inp["do"], causal, None, b64, window,
                                           st=inp["st"])
        want = dq if kernel.endswith("dq") else np.concatenate([dk.reshape(-1), dv.reshape(-1)])
    assert _global_rel(y, want) <= ORACLE_TOL
    for v in VARIANTS:
        _run_variant(op, MASK_SHAPE, v, launch=launch, inputs=given)


# ---------------------------------------------------------------- gradients against torch's autograd

def _grads(f, *args, seed=9):
    args = [a.detach().clone().requires_grad_(True) for a in args]
    out = f(*args)
    outs = out if isinstance(out, tuple) else (out,)
    g = torch.Generator().manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=g)).sum() for o in outs)
    loss.backward()
    return [a.grad for a in args]


def _close(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        assert g is not None and g.shape == w.shape, i
        err = float((g - w).abs().max())
        scale = float(w.abs().max())
        assert err <= TORCH_TOL * scale, f"gradient {i}: max abs err {err:.3g} > {TORCH_TOL:g} * {scale:.3g}"


def _rope_reference(x, c, s, interleaved):
    R = 2 * c.shape[-1]
    x0, x1 = (x[..., 0:R:2], x[..., 1:R:2]) if interleaved else (x[..., :R // 2], x[..., R // 2:R])
    y0, y1 = x0 * c - x1 * s, x0 * s + x1 * c
    rot = torch.stack([y0, y1], -1).flatten(-2) if interleaved else torch.cat([y0, y1], -1)
    return torch.cat([rot, x[..., R:]], -1)


def _rep(t, n):
    return t.repeat_interleave(n, dim=1)


R = torch.Generator().manual_seed(0)


def _r(*s):
    return torch.randn(*s, generator=R)


X, W, BIAS, U = _r(3, 5, 65), _r(65), _r(65), _r(3, 5, 65)
KEEP = torch.rand(3, 5, 65, generator=R) > 0.4
KEEP[0, 0] = False                                     # a fully masked row: y = 0, dx = 0
COS, SIN = _r(5, 6), _r(5, 6)                          # partial rotary: 12 of 16 features
Q, K, V = _r(2, 6, 5, 16), _r(2, 3, 9, 16), _r(2, 3, 9, 12)
BOTTOM_RIGHT = torch.ones(5, 9, dtype=torch.bool).tril(diagonal=4)
FMASK = _r(2, 1, 5, 9)
BMASK = torch.rand(2, 1, 5, 9, generator=R) > 0.3


def _window_keep(W):
    return BOTTOM_RIGHT & ~torch.ones(5, 9, dtype=torch.bool).tril(diagonal=4 - W)


def _sdpa(q, k, v, **kw):
    return F.scaled_dot_product_attention(q, _rep(k, 2), _rep(v, 2), **kw)


GRAD_CASES = {
    "rmsnorm": (lambda x, w: ct.rmsnorm(x, w, 1e-5), lambda x, w: F.rms_norm(x, (65,), w, 1e-5), (X, W)),
    "layernorm": (ct.layernorm, lambda x, w, b: F.layer_norm(x, (65,), w, b, 1e-5), (X, W, BIAS)),
    "masked_softmax": (lambda x: ct.masked_softmax(x, KEEP),
                       lambda x: torch.softmax(x.masked_fill(~KEEP, float("-inf")), -1).nan_to_num(0.0), (X,)),
    "masked_softmax broadcast": (lambda x: ct.masked_softmax(x, KEEP[1, 2]),
                                 lambda x: torch.softmax(x.masked_fill(~KEEP[1, 2], float("-inf")), -1), (X,)),
    "swiglu": (ct.swiglu, lambda a, b: F.silu(a) * b, (X, U)),
    "gelu": (ct.gelu, F.gelu, (X * 2,)),
    "gelu_tanh": (ct.gelu_tanh, lambda x: F.gelu(x, approximate="tanh"), (X * 2,)),
    "gelu_residual": (ct.gelu_residual, lambda x, r: F.gelu(x) + r, (X, U)),
    "rope halves": (lambda x: ct.rope(x, COS, SIN, interleaved=False),
                    lambda x: _rope_reference(x, COS, SIN, False), (Q,)),
    "rope pairs": (lambda x: ct.rope(x, COS, SIN, interleaved=True),
                   lambda x: _rope_reference(x, COS, SIN, True), (Q,)),
    "rope_hf": (lambda q, k: ct.rope_hf(q, k, torch.cat([COS[None], COS[None]], -1).expand(2, 5, 12),
                                        torch.cat([SIN[None], SIN[None]], -1).expand(2, 5, 12)),
                lambda q, k: (_rope_reference(q, COS, SIN, False), _rope_reference(k, COS, SIN, False)),
                (_r(2, 4, 5, 16), _r(2, 2, 5, 16))),
    "attention": (ct.attention, _sdpa, (Q, K, V)),
    "attention causal scale": (lambda q, k, v: ct.attention(q, k, v, causal=True, scale=0.3),
                               lambda q, k, v: _sdpa(q, k, v, attn_mask=BOTTOM_RIGHT, scale=0.3), (Q, K, V)),
    "attention float mask": (lambda q, k, v: ct.attention(q, k, v, mask=FMASK),
                             lambda q, k, v: _sdpa(q, k, v, attn_mask=FMASK), (Q, K, V)),
    "attention bool mask": (lambda q, k, v: ct.attention(q, k, v, mask=BMASK),
                            lambda q, k, v: _sdpa(q, k, v, attn_mask=BMASK), (Q, K, V)),
    "attention window": (lambda q, k, v: ct.attention(q, k, v, causal=True, window=3),
                         lambda q, k, v: _sdpa(q, k, v, attn_mask=_window_keep(3)), (Q, K, V)),
    "attention mask + window": (lambda q, k, v: ct.attention(q, k, v, causal=True, window=4, mask=FMASK),
                                lambda q, k, v: _sdpa(q, k, v, attn_mask=FMASK.masked_fill(~_window_keep(4),
                                                                                           float("-inf"))),
                                (Q, K, V)),
    "attention long keys": (lambda q, k, v: ct.attention(q, k, v, causal=True),
                            lambda q, k, v: F.scaled_dot_product_attention(
                                q, k, v, attn_mask=torch.ones(3, 40, dtype=torch.bool).tril(diagonal=37)),
                            (_r(1, 2, 3, 8), _r(1, 2, 40, 8), _r(1, 2, 40, 8))),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_torch_autograd_of_the_eager_reference(name):
    mine, reference, args = GRAD_CASES[name]
    assert not any(bool(torch.isnan(r).any()) for r in _grads(reference, *args))
    _close(_grads(mine, *args), _grads(reference, *args))


@pytest.mark.parametrize("variant", ["whole", pytest.param("packet,lanes=16", marks=pytest.mark.slow),
                                     pytest.param("lanes=4,private=thread", marks=pytest.mark.slow)])
def test_gradients_are_the_same_bits_in_every_variant(variant):
    cases = [GRAD_CASES[n] for n in ("rmsnorm", "layernorm", "swiglu", "attention mask + window", "rope_hf")]
    want = [_grads(mine, *args) for mine, _, args in cases]
    with ct.variant(variant):
        got = [_grads(mine, *args) for mine, _, args in cases]
    for a, b in zip(got, want):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_gradients_are_the_backward_kernels_bits():
    # the op's dx is the interpreter's, launched on the forward's saved tensors
    op = ops.get("rmsnorm_bwd_x")
    inp = op.make_inputs((5, 33), 1)
    x, w, dy = (torch.from_numpy(inp[n]).requires_grad_(n != "dy") for n in ("x", "w", "dy"))
    ct.rmsnorm(x, w).backward(dy)
    rstd = ops.run_reference(ops.get("rmsnorm_rstd"), (5, 33), {"x": inp["x"]})
    want = ops.run_reference(op, (5, 33), {**inp, "r": rstd})
    assert torch.equal(x.grad, torch.from_numpy(want))
    dw = ops.run_reference(ops.get("rmsnorm_bwd_w"), (5, 33), {"x": inp["x"], "dy": inp["dy"], "r": rstd})
    assert torch.equal(w.grad, torch.from_numpy(dw))


def test_rope_backward_is_the_forward_with_negated_sin():
    q = Q.clone().requires_grad_(True)
    dy = torch.randn(Q.shape, generator=torch.Generator().manual_seed(1))
    ct.rope(q, COS, SIN, interleaved=False).backward(dy)
    assert torch.equal(q.grad, ct.rope(dy, COS, -SIN, interleaved=False))


def test_empty_and_fully_masked_inputs_give_zero_gradients():
    x = torch.zeros(0, 8, requires_grad=True)
    w = torch.ones(8, requires_grad=True)
    ct.rmsnorm(x, w).sum().backward()
    assert x.grad.shape == (0, 8) and torch.equal(w.grad, torch.zeros(8))
    q, k, v = (torch.randn(1, 2, 3, 4, requires_grad=True) for _ in range(3))
    ct.attention(q, k, v, mask=torch.zeros(3, 3, dtype=torch.bool)).sum().backward()
    assert all(torch.equal(t.grad, torch.zeros(1, 2, 3, 4)) for t in (q, k, v))


def test_unsupported_gradients_raise_naming_the_argument():
    x = torch.randn(1, 2, 4, 8, requires_grad=True)
    cos, sin = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)
    with pytest.raises(NotImplementedError, match="rope: the gradient with respect to cos"):
        ct.rope(x, cos, sin, interleaved=False).sum().backward()
    ct.rope(x, cos.detach(), sin, interleaved=False).sum().backward()     # detached: fine
    mask = torch.randn(4, 4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="attention: the gradient with respect to mask"):
        ct.attention(x, x, x, mask=mask).sum().backward()


BAD_BACKWARD = [
    (lambda: torch.ops.cohort.rmsnorm_backward(torch.randn(3, 7), torch.randn(3, 8), torch.ones(8), 1e-6),
     ValueError, "rmsnorm_backward: grad_output has shape"),
    (lambda: torch.ops.cohort.gelu_backward(torch.randn(3, 8).double(), torch.randn(3, 8)),
     TypeError, "gelu_backward: grad_output must be torch.float32"),
    (lambda: torch.ops.cohort.layernorm_backward(torch.randn(3, 8), torch.randn(3, 8), torch.ones(8), -1.0),
     ValueError, "eps must be a finite float32 >= 0"),
    (lambda: torch.ops.cohort.attention_backward(torch.randn(1, 2, 3, 5), torch.randn(1, 2, 3, 4),
                                                 torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4),
                                                 torch.randn(1, 2, 3, 5)),
     ValueError, "attention_backward: output has shape"),
]


@pytest.mark.parametrize("call,exc,msg", BAD_BACKWARD, ids=[b[2][:40] for b in BAD_BACKWARD])
def test_backward_ops_reject_bad_input_naming_the_argument(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# ---------------------------------------------------------------- torch.library and torch.compile

def _opcheck_cases():
    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g, requires_grad=True)    # noqa: E731
    x, w = r(3, 5, 33), r(33)
    c = torch.randn(2, 6, 8, generator=g)
    return [("rmsnorm", (x, w, 1e-6)), ("layernorm", (x, w, r(33), 1e-5)),
            ("masked_softmax", (x, torch.rand(3, 5, 33, generator=g) > 0.5)), ("swiglu", (x, r(3, 5, 33))),
            ("gelu", (x,)), ("gelu_tanh", (x,)), ("gelu_residual", (x, r(3, 5, 33))),
            ("rope", (r(2, 4, 6, 16), torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g), False)),
            ("rope_hf", (r(2, 4, 6, 16), r(2, 2, 6, 16), c.repeat(1, 1, 2), c.flip(0).repeat(1, 1, 2))),
            ("attention", (r(1, 4, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 4), True, 0.25)),
            ("attention", (r(1, 4, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 4), False, None, torch.randn(1, 1, 5, 7))),
            ("attention", (r(1, 4, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 4), True, None,
                           torch.rand(5, 7, generator=g) > 0.3, 3)),
            ("rmsnorm_backward", (x.detach(), x.detach(), w.detach(), 1e-6)),
            ("layernorm_backward", (x.detach(), x.detach(), w.detach(), 1e-5)),
            ("swiglu_backward", (x.detach(), x.detach(), x.detach() * 2)),
            ("gelu_tanh_backward", (x.detach(), x.detach())),
            ("attention_backward", (torch.randn(1, 4, 5, 4), torch.randn(1, 4, 5, 8), torch.randn(1, 2, 7, 8),
                                    torch.randn(1, 2, 7, 4), torch.randn(1, 4, 5, 4), True))]


# opcheck runs each op through fake tensors and AOT autograd (seconds each): these by default, every
# case under -m slow
_OPCHECK_DEFAULT = {"rope_hf", "attention_backward"}


@pytest.mark.parametrize("name,args", [(n, a) if n in _OPCHECK_DEFAULT or (n == "attention" and len(a) == 7)
                                       else pytest.param(n, a, marks=pytest.mark.slow)
                                       for n, a in _opcheck_cases()],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck_with_gradients(name, args):
    torch.library.opcheck(getattr(torch.ops.cohort, name).default, args)


class TinyLM(torch.nn.Module):
    """Two llama-like layers from cohort.torch ops (impl="cohort") or their eager PyTorch
    equivalents (impl="eager"), every op with a gradient on the path: layer 0 RMSNorm, rope
    (halves), causal GQA attention, SwiGLU MLP; layer 1 LayerNorm, rope_hf, attention with a
    float bias and a sliding window, GELU MLP; a tanh-GELU head."""

    def __init__(self, impl="cohort", vocab=48, dim=32, heads=4, kv_heads=2, hidden=40, seq=12, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.impl, self.heads, self.kv, self.hd = impl, heads, kv_heads, dim // heads
        self.emb = torch.nn.Embedding(vocab, dim)
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)   # noqa: E731
        self.qkv = torch.nn.ModuleList(lin(dim, (heads + 2 * kv_heads) * self.hd) for _ in range(2))
        self.proj = torch.nn.ModuleList(lin(heads * self.hd, dim) for _ in range(2))
        self.gate, self.up, self.down = lin(dim, hidden), lin(dim, hidden), lin(hidden, dim)
        self.fc1, self.fc2 = lin(dim, hidden), lin(hidden, dim)
        self.n0 = torch.nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.n1w, self.n1b = torch.nn.Parameter(1 + 0.1 * torch.randn(dim)), torch.nn.Parameter(0.1 * torch.randn(dim))
        self.n2 = torch.nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.head = lin(dim, vocab)
        a = torch.arange(seq)[:, None] * (10000.0 ** (-torch.arange(self.hd // 2) / (self.hd // 2)))
        self.register_buffer("cos", a.cos())
        self.register_buffer("sin", a.sin())
        self.register_buffer("alibi", -0.5 * (torch.arange(seq)[:, None] - torch.arange(seq)[None]).abs().float())

    def _attend(self, i, h, layer):
        B, S, _ = h.shape
        q, k, v = self.qkv[i](h).split([self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        q = q.view(B, S, self.heads, self.hd).transpose(1, 2)
        k = k.view(B, S, self.kv, self.hd).transpose(1, 2)
        v = v.view(B, S, self.kv, self.hd).transpose(1, 2)
        c, s = self.cos[:S], self.sin[:S]
        bias = self.alibi[:S, :S]
        if self.impl == "cohort":
            if layer == 0:
                q, k = ct.rope(q, c, s, interleaved=False), ct.rope(k, c, s, interleaved=False)
                o = ct.attention(q, k, v, causal=True)
            else:
                cc, ss = torch.cat([c, c], -1), torch.cat([s, s], -1)
                q, k = ct.rope_hf(q, k, cc, ss)
                o = ct.attention(q, k, v, causal=True, mask=bias, window=5)
        else:
            q, k = _rope_reference(q, c, s, False), _rope_reference(k, c, s, False)
            keep = torch.ones(S, S, dtype=torch.bool).tril()
            if layer == 1:
                keep &= ~torch.ones(S, S, dtype=torch.bool).tril(diagonal=-5)
            m = (bias if layer == 1 else torch.zeros(S, S)).masked_fill(~keep, float("-inf"))
            o = F.scaled_dot_product_attention(q, _rep(k, self.heads // self.kv), _rep(v, self.heads // self.kv),
                                               attn_mask=m)
        return self.proj[i](o.transpose(1, 2).reshape(B, S, -1))

    def forward(self, ids):
        c = self.impl == "cohort"
        x = self.emb(ids)
        h = ct.rmsnorm(x, self.n0) if c else F.rms_norm(x, (x.shape[-1],), self.n0, 1e-6)
        x = x + self._attend(0, h, 0)
        h = ct.rmsnorm(x, self.n0) if c else F.rms_norm(x, (x.shape[-1],), self.n0, 1e-6)
        x = x + self.down(ct.swiglu(self.gate(h), self.up(h)) if c else F.silu(self.gate(h)) * self.up(h))
        h = ct.layernorm(x, self.n1w, self.n1b) if c else F.layer_norm(x, (x.shape[-1],), self.n1w, self.n1b)
        x = x + self._attend(1, h, 1)
        h = ct.rmsnorm(x, self.n2) if c else F.rms_norm(x, (x.shape[-1],), self.n2, 1e-6)
        x = x + self.fc2(ct.gelu(self.fc1(h)) if c else F.gelu(self.fc1(h)))
        return self.head(ct.gelu_tanh(x) if c else F.gelu(x, approximate="tanh"))


def _train(model, steps=4, lr=0.1, forward=None):
    """SGD steps of next-token cross entropy; `forward` (the model, or a compiled one) runs it."""
    ids = torch.randint(0, 48, (3, 12), generator=torch.Generator().manual_seed(11))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    forward = model if forward is None else forward
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = forward(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# Losses of the two models: each step's forward differs by float32 rounding only (~1e-7
# relative), and so do the gradients; four SGD steps compound that into the weights. 1e-5
# relative is ~100x what a step's rounding gives and far below a wrong gradient (a loss
# that moves by 1e-3 or more between steps).
LOSS_RTOL = 1e-5


def test_a_tiny_model_trains_with_the_eager_models_losses():
    eager, mine = TinyLM("eager"), TinyLM("cohort")
    mine.load_state_dict(eager.state_dict())
    want, got = _train(eager), _train(mine)
    assert want[-1] < want[0] - 0.05                    # it learns
    for a, b in zip(got, want):
        assert abs(a - b) <= LOSS_RTOL * abs(b), (got, want)
    for (n, p), q in zip(mine.named_parameters(), eager.parameters()):
        assert float((p - q).detach().abs().max()) <= 1e-5 * float(q.detach().abs().max()), n


def test_a_compiled_training_step_has_no_graph_break_and_the_eager_bits():
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    eager = TinyLM("cohort")
    compiled = TinyLM("cohort")
    compiled.load_state_dict(eager.state_dict())
    want = _train(eager, steps=2)
    got = _train(compiled, steps=2, forward=torch.compile(compiled, fullgraph=True, backend="aot_eager"))
    assert not counters["graph_break"]
    assert got == want                                  # the same ops, the same kernels: the same bits
    for p, q in zip(compiled.parameters(), eager.parameters()):
        assert torch.equal(p, q)


@pytest.mark.slow
def test_an_inductor_compiled_training_step_agrees():
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    eager, compiled = TinyLM("cohort"), TinyLM("cohort")
    compiled.load_state_dict(eager.state_dict())
    want = _train(eager, steps=2)
    got = _train(compiled, steps=2, forward=torch.compile(compiled, fullgraph=True))
    assert not counters["graph_break"]
    assert all(abs(a - b) <= LOSS_RTOL * abs(b) for a, b in zip(got, want))


@pytest.mark.slow
def test_the_llama_example_trains_with_the_eager_models_losses():
    pytest.importorskip("transformers")
    import copy
    import importlib.util
    import sys
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "examples" / "llama.py"
    spec = importlib.util.spec_from_file_location("cohort_example_llama", path)
    example = sys.modules.get(spec.name)
    if example is None:
        example = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = example
        spec.loader.exec_module(example)
    reference = example.build_model(example.config(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=48,
                                                   vocab=64)).train()
    model = example.use_cohort(copy.deepcopy(reference)).train()
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(3))
    losses = []
    for m in (reference, model):
        opt = torch.optim.SGD(m.parameters(), lr=0.2)
        run = []
        for _ in range(3):
            opt.zero_grad()
            loss = m(ids, labels=ids).loss
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    want, got = losses
    assert want[-1] < want[0]
    for a, b in zip(got, want):
        assert abs(a - b) <= LOSS_RTOL * abs(b), (got, want)


def test_printer_round_trip_of_the_backward_kernels(tmp_path):
    # as tests/test_frontend.py does for the forward operators: the printed kernel parses back
    # to the same kernel, with the same bits
    import importlib.util
    import sys

    from cohort.refimpl.interpreter import interpret
    from cohort.refimpl.printer import format_kernel
    for name, op in ops.BACKWARD.items():
        k = op.kernel.ir
        path = tmp_path / f"rt_{name}.py"
        path.write_text("from cohort import *\n\n\n" + format_kernel(k) + "\n")
        spec = importlib.util.spec_from_file_location(f"_cohort_rt_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        try:
            spec.loader.exec_module(mod)
        finally:
            del sys.modules[spec.name]
        k2 = getattr(mod, k.name).ir
        assert format_kernel(k2) == format_kernel(k), name
        shape = (1, 4, 2, 7, 19, 8, 4) if name.startswith("attention") else (3, 40)
        launch = op.launch(shape)
        inputs = op.make_inputs(shape, 1)
        outs = []
        for kk in (k, k2):
            bufs = ops.allocate(op, shape, {n: a.copy() for n, a in inputs.items()})
            interpret(kk, launch.n, {**bufs, **launch.scalars}, launch.consts)
            outs.append(bufs[op.output].view(np.uint32))
        assert np.array_equal(outs[0], outs[1]), name

"""Gradients of cohort's torch ops (issue 26, autograd).

Every forward op of ops.py gets a backward through `torch.library.register_autograd`;
each backward is a custom op of its own (`torch.ops.cohort.<name>_backward`, with a
fake implementation, so torch.compile traces a training step through them) whose
implementation launches cohort kernels (refimpl/ops/backward.py,
refimpl/ops/attention_backward.py): the gradients are the interpreter's bits, in
every exact variant, as the forward outputs are (DESIGN §4).

    rmsnorm    rmsnorm_backward(dy, x, weight, eps) -> (dx, dweight)
    layernorm  layernorm_backward(dy, x, weight, eps) -> (dx, [dweight; dbias] as [2, C])
    masked_softmax  masked_softmax_backward(dy, y, mask) -> dx       (y: the forward's output)
    swiglu     swiglu_backward(dy, gate, up) -> [dgate; dup] as [2, *shape]
    gelu, gelu_tanh   gelu_backward / gelu_tanh_backward(dy, x) -> dx; gelu_residual: (gelu's, dy)
    rope, rope_hf     the forward op with -sin (a rotation's adjoint; exact, see backward.py)
    attention  attention_backward(do, q, k, v, o, causal, scale, mask, window) -> (dq, [dk; dv] flat)

What saves what: the norms save x and weight and recompute their row statistics with
the forward's own operations; masked_softmax saves its output; the elementwise ops
save their inputs; attention saves q, k, v, its output and the mask, and recomputes
the probabilities from q and k (flash attention's backward: no [Sq, Skv] matrix is
stored). bf16/fp16: each backward runs its f32 kernels on the widened (exact) tensors,
and each gradient is rounded once to the forward inputs' dtype (`_in_f32`). Not supported, each an error when its gradient is asked for (never a
silent None): gradients with respect to rope's cos and sin, and to a float
attention mask. Double backward (a gradient of a gradient) is not supported.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor

from ..refimpl.ops import attention as attention_op
from ..refimpl.ops import attention_backward as AB
from ..refimpl.ops import backward as B
from . import checks
from . import ops as fwd
from .launch import build


def _in_f32(impl=None, mask: int = -1):
    """A backward implementation for bf16/fp16 tensors too: the f32 computation on the
    float tensors widened to f32 (exact), each result rounded to their dtype (torch's
    round to nearest even). The kernels stay f32: their buffers never see a 16-bit tensor.
    Tensors of mixed dtypes go to `impl` as they are, whose checks refuse them as the fake
    implementation's do (argument `mask`, attention's, may be float32 with any dtype)."""
    if impl is None:
        return lambda f: _in_f32(f, mask)

    @functools.wraps(impl)
    def run(*args):
        floats = [a.dtype for i, a in enumerate(args) if i != mask and isinstance(a, Tensor)
                  and a.is_floating_point()]
        dt = floats[0] if floats else torch.float32
        if dt not in (torch.bfloat16, torch.float16) or any(d != dt for d in floats):
            return impl(*args)
        out = impl(*(a.float() if isinstance(a, Tensor) and a.dtype == dt else a for a in args))
        return tuple(t.to(dt) for t in out) if isinstance(out, tuple) else out.to(dt)
    return run


def _rows(x: Tensor):
    C = x.shape[-1]
    return (x.numel() // C if C else 0), C


def _grad(op: str, dy, like: Tensor, name: str = "grad_output"):
    checks.tensor(op, name, dy, checks.FLOATS)
    checks.like(op, "the forward's output", like, (name, dy))
    if dy.shape != like.shape:
        raise ValueError(f"{op}: {name} has shape {tuple(dy.shape)}, the forward's output has "
                         f"{tuple(like.shape)}; they must be equal")


# ---------------------------------------------------------------- rmsnorm

def _rmsnorm_backward_check(dy, x, weight, eps):
    fwd._rmsnorm_check(x, weight, eps)
    _grad("rmsnorm_backward", dy, x)


@torch.library.custom_op("cohort::rmsnorm_backward", mutates_args=())
def _rmsnorm_backward(dy: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return rmsnorm_backward_impl(dy, x, weight, eps)


@_in_f32
def rmsnorm_backward_impl(dy, x, weight, eps):
    _rmsnorm_backward_check(dy, x, weight, eps)
    dy, x, weight = dy.contiguous(), x.contiguous(), weight.contiguous()
    R, C = _rows(x)
    dx = torch.empty_like(x)
    dw = torch.zeros(C)
    if R and C:
        r = torch.empty(R)
        k = B.rmsnorm_rstd
        build(k, {"cols": C}, whole_blocks=True)(R * k.block, (x, r), (float(eps),))
        k = B.rmsnorm_bwd_x
        build(k, {"cols": C}, whole_blocks=True)(R * k.block, (x, weight, dy, r, dx))
        build(B.rmsnorm_bwd_w, {})(C, (x, dy, r, dw), (R, C))
    return dx, dw


@_rmsnorm_backward.register_fake
def _(dy, x, weight, eps):
    _rmsnorm_backward_check(dy, x, weight, eps)
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*(t for t in inputs if isinstance(t, Tensor)))
    ctx.args = tuple(None if isinstance(t, Tensor) else t for t in inputs)


def _rmsnorm_grad(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, dw = torch.ops.cohort.rmsnorm_backward(dy, x, weight, ctx.args[2])
    return dx, dw, None


# ---------------------------------------------------------------- layernorm

def _layernorm_backward_check(dy, x, weight, eps):
    checks.tensor("layernorm_backward", "x", x, checks.FLOATS, min_dim=1)
    checks.tensor("layernorm_backward", "weight", weight, checks.FLOATS)
    checks.like("layernorm_backward", "x", x, ("weight", weight))
    checks.last_dim("layernorm_backward", "x", x, "weight", weight)
    checks.number("layernorm_backward", "eps", eps, nonnegative=True)
    _grad("layernorm_backward", dy, x)


@torch.library.custom_op("cohort::layernorm_backward", mutates_args=())
def _layernorm_backward(dy: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return layernorm_backward_impl(dy, x, weight, eps)


@_in_f32
def layernorm_backward_impl(dy, x, weight, eps):
    _layernorm_backward_check(dy, x, weight, eps)
    dy, x, weight = dy.contiguous(), x.contiguous(), weight.contiguous()
    R, C = _rows(x)
    dx = torch.empty_like(x)
    dwb = torch.zeros(2, C)
    if R and C:
        st = torch.empty(R, 2)
        k = B.layernorm_stats
        build(k, {"cols": C}, whole_blocks=True)(R * k.block, (x, st), (float(eps),))
        k = B.layernorm_bwd_x
        build(k, {"cols": C}, whole_blocks=True)(R * k.block, (x, weight, dy, st, dx))
        build(B.layernorm_bwd_wb, {})(C, (x, dy, st, dwb), (R, C))
    return dx, dwb


@_layernorm_backward.register_fake
def _(dy, x, weight, eps):
    _layernorm_backward_check(dy, x, weight, eps)
    return x.new_empty(x.shape), weight.new_empty((2, weight.shape[0]))


def _layernorm_grad(ctx, dy):
    x, weight, _ = ctx.saved_tensors
    dx, dwb = torch.ops.cohort.layernorm_backward(dy, x, weight, ctx.args[3])
    return dx, dwb[0], dwb[1], None


# ---------------------------------------------------------------- masked softmax

def _masked_softmax_backward_check(dy, y, mask):
    fwd._masked_softmax_check(y, mask)
    _grad("masked_softmax_backward", dy, y)


@torch.library.custom_op("cohort::masked_softmax_backward", mutates_args=())
def _masked_softmax_backward(dy: Tensor, y: Tensor, mask: Tensor) -> Tensor:
    return masked_softmax_backward_impl(dy, y, mask)


@_in_f32
def masked_softmax_backward_impl(dy, y, mask):
    _masked_softmax_backward_check(dy, y, mask)
    dy, y, mask = dy.contiguous(), y.contiguous(), mask.expand(y.shape).contiguous()
    dx = torch.empty_like(y)
    R, C = _rows(y)
    if R and C:
        k = B.masked_softmax_bwd
        build(k, {"cols": C}, whole_blocks=True)(R * k.block, (y, dy, mask, dx))
    return dx


@_masked_softmax_backward.register_fake
def _(dy, y, mask):
    _masked_softmax_backward_check(dy, y, mask)
    return y.new_empty(y.shape)


def _masked_softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output, inputs[1])


def _masked_softmax_grad(ctx, dy):
    y, mask = ctx.saved_tensors
    return torch.ops.cohort.masked_softmax_backward(dy, y, mask), None


# ---------------------------------------------------------------- elementwise

def _ew_check(op, dy, *named):
    fwd._elementwise(op, *named)
    _grad(op, dy, named[0][1])


@torch.library.custom_op("cohort::swiglu_backward", mutates_args=())
def _swiglu_backward(dy: Tensor, gate: Tensor, up: Tensor) -> Tensor:
    return swiglu_backward_impl(dy, gate, up)


@_in_f32
def swiglu_backward_impl(dy, gate, up):
    _ew_check("swiglu_backward", dy, ("gate", gate), ("up", up))
    dy, gate, up = dy.contiguous(), gate.contiguous(), up.contiguous()
    g = torch.empty((2,) + tuple(gate.shape))
    n = gate.numel()
    if n:
        build(B.swiglu_bwd, {})(n, (gate, up, dy, g), (n,))
    return g


@_swiglu_backward.register_fake
def _(dy, gate, up):
    _ew_check("swiglu_backward", dy, ("gate", gate), ("up", up))
    return gate.new_empty((2,) + tuple(gate.shape))


def _swiglu_grad(ctx, dy):
    gate, up = ctx.saved_tensors
    g = torch.ops.cohort.swiglu_backward(dy, gate, up)
    return g[0], g[1]


def _gelu_like(name, kern):
    qual = f"cohort::{name}_backward"

    @_in_f32
    def impl(dy: Tensor, x: Tensor) -> Tensor:
        _ew_check(f"{name}_backward", dy, ("x", x))
        dy, x = dy.contiguous(), x.contiguous()
        dx = torch.empty_like(x)
        if x.numel():
            build(kern, {})(x.numel(), (x, dy, dx))
        return dx

    op = torch.library.custom_op(qual, impl, mutates_args=())

    @op.register_fake
    def _(dy, x):
        _ew_check(f"{name}_backward", dy, ("x", x))
        return x.new_empty(x.shape)

    return op, impl


_gelu_backward, gelu_backward_impl = _gelu_like("gelu", B.gelu_bwd)
_gelu_tanh_backward, gelu_tanh_backward_impl = _gelu_like("gelu_tanh", B.gelu_tanh_bwd)


def _gelu_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return torch.ops.cohort.gelu_backward(dy, x)


def _gelu_tanh_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return torch.ops.cohort.gelu_tanh_backward(dy, x)


def _gelu_residual_grad(ctx, dy):
    x, _ = ctx.saved_tensors
    return torch.ops.cohort.gelu_backward(dy, x), dy


# ---------------------------------------------------------------- rope

def _no_table_grad(op, ctx, first):
    for i, name in ((first, "cos"), (first + 1, "sin")):
        if ctx.needs_input_grad[i]:
            raise NotImplementedError(f"{op}: the gradient with respect to {name} is not supported (rotary "
                                      f"tables are normally constants); detach {name} or compute it without "
                                      f"requires_grad")


def _rope_setup(ctx, inputs, output):
    x, cos, sin, interleaved = inputs
    ctx.save_for_backward(cos, sin)
    ctx.interleaved = interleaved


def _rope_grad(ctx, dy):
    _no_table_grad("rope", ctx, 1)
    cos, sin = ctx.saved_tensors
    # a rotation's adjoint is the rotation by the opposite angle: the forward kernel with -sin
    return torch.ops.cohort.rope(dy, cos, torch.neg(sin), ctx.interleaved), None, None, None


def _rope_hf_setup(ctx, inputs, output):
    q, k, cos, sin = inputs
    ctx.save_for_backward(cos, sin)


def _rope_hf_grad(ctx, dq, dk):
    _no_table_grad("rope_hf", ctx, 2)
    cos, sin = ctx.saved_tensors
    R = cos.shape[-1]
    c, s = cos[..., :R // 2], torch.neg(sin[..., :R // 2])
    if cos.dim() == 3:                                # [B, S, R]: per row, broadcast over the heads
        c, s = c.unsqueeze(1), s.unsqueeze(1)
    dq = None if dq is None else torch.ops.cohort.rope(dq, c, s, False)
    dk = None if dk is None else torch.ops.cohort.rope(dk, c, s, False)
    return dq, dk, None, None


# ---------------------------------------------------------------- attention

def _attention_backward_check(do, q, k, v, o, causal, scale, mask, window):
    B_, H, HKV, SQ, SKV, D, DV = checks.attention(q, k, v)
    if scale is not None:
        checks.number("attention_backward", "scale", scale)
    checks.attention_mask(mask, window, causal, (B_, H, SQ, SKV), q.dtype)
    _grad("attention_backward", do, o, "grad_output")
    _grad("attention_backward", o, do, "output")
    checks.like("attention_backward", "q", q, ("output", o))
    if tuple(o.shape) != (B_, H, SQ, DV):
        raise ValueError(f"attention_backward: output has shape {tuple(o.shape)}, expected {(B_, H, SQ, DV)}")
    return B_, H, HKV, SQ, SKV, D, DV


@torch.library.custom_op("cohort::attention_backward", mutates_args=())
def _attention_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, causal: bool = False,
                        scale: Optional[float] = None, mask: Optional[Tensor] = None,
                        window: Optional[int] = None) -> tuple[Tensor, Tensor]:
    return attention_backward_impl(do, q, k, v, o, causal, scale, mask, window)


@_in_f32(mask=7)
def attention_backward_impl(do, q, k, v, o, causal=False, scale=None, mask=None, window=None):
    """(dq, dkv): dkv holds dk (B*Hkv*Skv*D values) then dv, flat."""
    B_, H, HKV, SQ, SKV, D, DV = _attention_backward_check(do, q, k, v, o, causal, scale, mask, window)
    scale = attention_op.default_scale(D) if scale is None else float(scale)
    shape4 = checks.attention_mask(mask, window, causal, (B_, H, SQ, SKV), q.dtype)
    do, q, k, v, o = (t.contiguous() for t in (do, q, k, v, o))
    dq = torch.zeros((B_, H, SQ, D))
    dkv = torch.zeros(B_ * HKV * SKV * (D + DV))
    if B_ * H * SQ and SKV:
        bias, strides = (fwd._NO_BIAS, (0, 0, 0)) if shape4 is None else fwd._bias(mask, shape4, SKV)
        consts = {"D": D, "DV": DV, "CAUSAL": 2 if window is not None else int(bool(causal)),
                  "MASK": int(shape4 is not None)}
        scalars = (scale, H, HKV, SQ, SKV, *strides, window or 0)
        st = torch.empty((B_, H, SQ, 2))
        rows = B_ * H * -(-SQ // attention_op.BLOCK) * attention_op.BLOCK
        build(AB.attention_bwd_stats, consts, whole_blocks=True)(rows, (q, k, bias, o, do, st), scalars)
        build(AB.attention_bwd_dq, consts, whole_blocks=True)(rows, (q, k, v, bias, do, st, dq), scalars)
        keys = B_ * HKV * -(-SKV // attention_op.BLOCK) * attention_op.BLOCK
        build(AB.attention_bwd_dkv, consts, whole_blocks=True)(keys, (q, k, v, bias, do, st, dkv), scalars)
    return dq, dkv


@_attention_backward.register_fake
def _(do, q, k, v, o, causal=False, scale=None, mask=None, window=None):
    B_, H, HKV, SQ, SKV, D, DV = _attention_backward_check(do, q, k, v, o, causal, scale, mask, window)
    return q.new_empty((B_, H, SQ, D)), q.new_empty((B_ * HKV * SKV * (D + DV),))


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale, mask, window = inputs
    ctx.save_for_backward(q, k, v, output, mask)
    ctx.args = (causal, scale, window)


def _attention_grad(ctx, do):
    # the dispatcher drops trailing arguments equal to their defaults (mask=None among them)
    if len(ctx.needs_input_grad) > 5 and ctx.needs_input_grad[5]:
        raise NotImplementedError("attention: the gradient with respect to mask is not supported; pass a mask "
                                  "that does not require grad (mask.detach())")
    q, k, v, o, mask = ctx.saved_tensors
    causal, scale, window = ctx.args
    dq, dkv = torch.ops.cohort.attention_backward(do, q, k, v, o, causal, scale, mask, window)
    nk = k.numel()
    return dq, dkv[:nk].view(k.shape), dkv[nk:].view(v.shape), None, None, None, None


# ---------------------------------------------------------------- registration

def _register():
    reg = torch.library.register_autograd
    reg("cohort::rmsnorm", _rmsnorm_grad, setup_context=_save_inputs)
    reg("cohort::layernorm", _layernorm_grad, setup_context=_save_inputs)
    reg("cohort::masked_softmax", _masked_softmax_grad, setup_context=_masked_softmax_setup)
    reg("cohort::swiglu", _swiglu_grad, setup_context=_save_inputs)
    reg("cohort::gelu", _gelu_grad, setup_context=_save_inputs)
    reg("cohort::gelu_tanh", _gelu_tanh_grad, setup_context=_save_inputs)
    reg("cohort::gelu_residual", _gelu_residual_grad, setup_context=_save_inputs)
    reg("cohort::rope", _rope_grad, setup_context=_rope_setup)
    reg("cohort::rope_hf", _rope_hf_grad, setup_context=_rope_hf_setup)
    reg("cohort::attention", _attention_grad, setup_context=_attention_setup)


_register()

BACKWARD_OPS = ("rmsnorm_backward", "layernorm_backward", "masked_softmax_backward", "swiglu_backward",
                "gelu_backward", "gelu_tanh_backward", "attention_backward")

# as in ops.py: the CPU kernels registered directly, in place of custom_op's wrapper
_cpu = torch.library.Library("cohort", "IMPL")
for _name in BACKWARD_OPS:
    _cpu.impl(_name, globals()[f"{_name}_impl"], "CPU")

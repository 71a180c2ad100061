"""Gradients of cohort's torch ops (issue 26, autograd).

Every forward op of ops.py and attention_ops.py names its backward in its TorchOp
record (binding.py: `torch.library.register_autograd`); the backwards it calls are
custom ops of their own, defined here as TorchOp records too (`torch.ops.cohort.<name>_backward`, with a
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
from .attention_ops import NO_BIAS, mask_bias
from .binding import TORCH_OPS, TorchOp, register
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
    fwd.rmsnorm_check(x, weight, eps)
    _grad("rmsnorm_backward", dy, x)


@_in_f32
def rmsnorm_backward_impl(dy: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
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


def _rmsnorm_backward_fake(dy, x, weight, eps):
    _rmsnorm_backward_check(dy, x, weight, eps)
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


register(TorchOp("rmsnorm_backward", rmsnorm_backward_impl, _rmsnorm_backward_fake, autograd_cpu=False))


# ---------------------------------------------------------------- layernorm

def _layernorm_backward_check(dy, x, weight, eps):
    checks.tensor("layernorm_backward", "x", x, checks.FLOATS, min_dim=1)
    checks.tensor("layernorm_backward", "weight", weight, checks.FLOATS)
    checks.like("layernorm_backward", "x", x, ("weight", weight))
    checks.last_dim("layernorm_backward", "x", x, "weight", weight)
    checks.number("layernorm_backward", "eps", eps, nonnegative=True)
    _grad("layernorm_backward", dy, x)


@_in_f32
def layernorm_backward_impl(dy: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
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


def _layernorm_backward_fake(dy, x, weight, eps):
    _layernorm_backward_check(dy, x, weight, eps)
    return x.new_empty(x.shape), weight.new_empty((2, weight.shape[0]))


register(TorchOp("layernorm_backward", layernorm_backward_impl, _layernorm_backward_fake, autograd_cpu=False))


# ---------------------------------------------------------------- masked softmax

def _masked_softmax_backward_check(dy, y, mask):
    fwd.masked_softmax_check(y, mask)
    _grad("masked_softmax_backward", dy, y)


@_in_f32
def masked_softmax_backward_impl(dy: Tensor, y: Tensor, mask: Tensor) -> Tensor:
    _masked_softmax_backward_check(dy, y, mask)
    dy, y, mask = dy.contiguous(), y.contiguous(), mask.expand(y.shape).contiguous()
    dx = torch.empty_like(y)
    R, C = _rows(y)
    if R and C:
        k = B.masked_softmax_bwd
        build(k, {"cols": C}, whole_blocks=True)(R * k.block, (y, dy, mask, dx))
    return dx


def _masked_softmax_backward_fake(dy, y, mask):
    _masked_softmax_backward_check(dy, y, mask)
    return y.new_empty(y.shape)


register(TorchOp("masked_softmax_backward", masked_softmax_backward_impl, _masked_softmax_backward_fake,
                 autograd_cpu=False))


# ---------------------------------------------------------------- elementwise

def _ew_check(op, dy, *named):
    fwd.elementwise_check(op, *named)
    _grad(op, dy, named[0][1])


@_in_f32
def swiglu_backward_impl(dy: Tensor, gate: Tensor, up: Tensor) -> Tensor:
    _ew_check("swiglu_backward", dy, ("gate", gate), ("up", up))
    dy, gate, up = dy.contiguous(), gate.contiguous(), up.contiguous()
    g = torch.empty((2,) + tuple(gate.shape))
    n = gate.numel()
    if n:
        build(B.swiglu_bwd, {})(n, (gate, up, dy, g), (n,))
    return g


def _swiglu_backward_fake(dy, gate, up):
    _ew_check("swiglu_backward", dy, ("gate", gate), ("up", up))
    return gate.new_empty((2,) + tuple(gate.shape))


register(TorchOp("swiglu_backward", swiglu_backward_impl, _swiglu_backward_fake, autograd_cpu=False))


def _gelu_like(name, kern):
    @_in_f32
    def impl(dy: Tensor, x: Tensor) -> Tensor:
        _ew_check(f"{name}_backward", dy, ("x", x))
        dy, x = dy.contiguous(), x.contiguous()
        dx = torch.empty_like(x)
        if x.numel():
            build(kern, {})(x.numel(), (x, dy, dx))
        return dx

    def fake(dy, x):
        _ew_check(f"{name}_backward", dy, ("x", x))
        return x.new_empty(x.shape)

    register(TorchOp(f"{name}_backward", impl, fake, autograd_cpu=False))
    return impl


gelu_backward_impl = _gelu_like("gelu", B.gelu_bwd)
gelu_tanh_backward_impl = _gelu_like("gelu_tanh", B.gelu_tanh_bwd)


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


@_in_f32(mask=7)
def attention_backward_impl(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, causal: bool = False,
                            scale: Optional[float] = None, mask: Optional[Tensor] = None,
                            window: Optional[int] = None) -> tuple[Tensor, Tensor]:
    """(dq, dkv): dkv holds dk (B*Hkv*Skv*D values) then dv, flat."""
    B_, H, HKV, SQ, SKV, D, DV = _attention_backward_check(do, q, k, v, o, causal, scale, mask, window)
    scale = attention_op.default_scale(D) if scale is None else float(scale)
    shape4 = checks.attention_mask(mask, window, causal, (B_, H, SQ, SKV), q.dtype)
    do, q, k, v, o = (t.contiguous() for t in (do, q, k, v, o))
    dq = torch.zeros((B_, H, SQ, D))
    dkv = torch.zeros(B_ * HKV * SKV * (D + DV))
    if B_ * H * SQ and SKV:
        bias, strides = (NO_BIAS, (0, 0, 0)) if shape4 is None else mask_bias(mask, shape4, SKV)
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


def _attention_backward_fake(do, q, k, v, o, causal=False, scale=None, mask=None, window=None):
    B_, H, HKV, SQ, SKV, D, DV = _attention_backward_check(do, q, k, v, o, causal, scale, mask, window)
    return q.new_empty((B_, H, SQ, D)), q.new_empty((B_ * HKV * SKV * (D + DV),))


register(TorchOp("attention_backward", attention_backward_impl, _attention_backward_fake, autograd_cpu=False))

# the backward ops: reached through torch.ops.cohort only (no cohort.torch function)
BACKWARD_OPS = tuple(name for name, op in TORCH_OPS.items() if name.endswith("_backward") and op.function is None)

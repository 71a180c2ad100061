"""rope, rope_hf and attention as torch ops (the conventions of ops.py, whose helpers they
use): rotary embeddings over x [..., S, D] and attention in scaled_dot_product_attention's
layouts. Each op is a TorchOp and each operator it computes an OpBinding (binding.py)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ..backend import target
from ..refimpl.ops import attention as attention_op
from . import checks
from .binding import NativeCall, OpBinding, TorchOp, bind, register
from .dtypes import kernel_for
from .launch import current_variant, launcher
from .ops import direct, op_kernel, plain_f32

# ---------------------------------------------------------------- rope

def rope_impl(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    if (plain_f32(x) and plain_f32(cos) and plain_f32(sin) and x.dim() >= 2 and cos.dim() == 2 and cos.shape == sin.shape
            and cos.shape[0] == x.shape[-2] and 0 < 2 * cos.shape[1] <= x.shape[-1]):
        S, D = x.shape[-2], x.shape[-1]                 # the common case: cos/sin [S, R/2]
        R, N, cos_rows = 2 * cos.shape[1], (x.numel() // (S * D) if S * D else 0), S
    else:
        N, S, D, R, cos_rows = checks.rope(x, cos, sin)
        if cos_rows == S:       # shared by every leading index: [S, R/2]
            cos, sin = cos.reshape(S, R // 2), sin.reshape(S, R // 2)
        else:                   # per leading index: expanded to x's leading dimensions (a copy)
            lead = tuple(x.shape[:-2])
            cos, sin = cos.expand(lead + (S, R // 2)), sin.expand(lead + (S, R // 2))
    x, cos, sin = x.contiguous(), cos.contiguous(), sin.contiguous()
    y = torch.empty_like(x)
    if N * S:
        k = op_kernel("rope_pairs" if interleaved else "rope_half", x.dtype)
        consts = (("D", D), ("R", R), ("HALF", 0 if interleaved else 1))
        launcher(k, consts, True)(N * k.block, (x, cos, sin, y), (N, S, 0 if cos_rows == S else S))
    return y


def _rope_fake(x, cos, sin, interleaved):
    checks.rope(x, cos, sin)
    return x.new_empty(x.shape)


def rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: Optional[bool] = None) -> Tensor:
    """Rotary embedding of x [..., S, D] by cos, sin [S, R/2] (broadcast over x's leading
    dimensions; leading dimensions of their own broadcast too, at the cost of a copy):
    the first R features rotate, the rest pass through. interleaved=True rotates pairs
    (2k, 2k+1) (GPT-J); False rotates halves (k, k + R/2) (Llama, Mistral, Qwen2, GPT-NeoX,
    Phi, Gemma). It has no default: the wrong one gives a wrong answer and no error.
    transformers' own tables ([B, S, R] or [S, R], halves repeated): `rope_hf`."""
    checks.interleaved("rope", interleaved)
    if direct(x, cos, sin):
        return rope_impl(x, cos, sin, interleaved)
    return torch.ops.cohort.rope(x, cos, sin, interleaved)


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


def _rope_pairs_rows_eager(x, cos, sin):
    x0, x1 = x.unflatten(-1, (-1, 2)).unbind(-1)          # pairs (2k, 2k+1)
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def _rope_half_eager(x, cos, sin):
    h = cos.shape[-1]                                       # x [N, S, D], cos/sin [S, R/2]
    x0, x1 = x[..., :h], x[..., h:2 * h]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos, x[..., 2 * h:]), dim=-1)


def _rope_pairs_eager(x, cos, sin):
    h = cos.shape[-1]
    x0, x1 = x[..., 0:2 * h:2], x[..., 1:2 * h:2]
    rot = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    return torch.cat((rot, x[..., 2 * h:]), dim=-1)


ROPE = register(TorchOp("rope", rope_impl, _rope_fake, rope, _rope_grad, _rope_setup, native=NativeCall("tttb")))
bind(OpBinding("rope", _rope_pairs_rows_eager))   # the row operator (x [R, C], cos/sin [R, C/2]): no op of its own
bind(OpBinding("rope_half", _rope_half_eager, ROPE, {"interleaved": False}, schema_tail=(False,)))
bind(OpBinding("rope_pairs", _rope_pairs_eager, ROPE, {"interleaved": True}, schema_tail=(True,)))


# (native_call.cpp raises the same text: ROPE_HF's NativeCall carries it)
HALVES_DIFFER = ("rope_hf: the two halves of cos (or sin) differ; transformers' rotate-half tables repeat the same "
                 "R/2 frequencies twice. For a table of R/2 columns use rope(x, cos, sin, interleaved=...)")


def rope_hf_impl(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    c, s = checks.rope_hf(q, k, cos, sin)
    if not (torch.equal(cos[..., :c.shape[-1]], cos[..., c.shape[-1]:])
            and torch.equal(sin[..., :c.shape[-1]], sin[..., c.shape[-1]:])):
        raise ValueError(HALVES_DIFFER)
    if c.dim() == 2 or c.shape[0] == 1:   # one table for every row: [S, R/2], made contiguous once for q and k
        S, half = c.shape[-2], c.shape[-1]
        c, s = c.reshape(S, half).contiguous(), s.reshape(S, half).contiguous()
    return rope_impl(q, c, s, False), rope_impl(k, c, s, False)


def _rope_hf_fake(q, k, cos, sin):
    checks.rope_hf(q, k, cos, sin)
    return q.new_empty(q.shape), k.new_empty(k.shape)


def rope_hf(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin) (rotate-half: Llama, Mistral, Qwen2,
    GPT-NeoX, Phi, Gemma) with its tables as they come: q [B, H, S, D], k [B, Hkv, S, D],
    cos/sin [B, S, R] (per-row positions) or [S, R], the two halves of the last dimension
    equal (checked); R < D is partial rotary (the last D - R features pass through).
    Returns (q', k'), each rotated as rope(x, cos[..., :R/2], sin[..., :R/2], interleaved=False)."""
    if direct(q, k, cos, sin):
        return rope_hf_impl(q, k, cos, sin)
    return torch.ops.cohort.rope_hf(q, k, cos, sin)


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


ROPE_HF = register(TorchOp("rope_hf", rope_hf_impl, _rope_hf_fake, rope_hf, _rope_hf_grad, _rope_hf_setup,
                           native=NativeCall("tttt", composite="rope_hf", message=HALVES_DIFFER)))


# ---------------------------------------------------------------- attention

_SCALES: dict = {}    # D -> SDPA's default scale, f32(1/sqrt(D))
_FORMS: dict = {}     # form_for's inputs, condensed -> attention_op.FORMS entry
NO_BIAS = torch.zeros(1)    # the kernel's mask buffer when there is no mask (never read)


def mask_bias(mask: Tensor, shape4: tuple, SKV: int):
    """The mask as the kernel reads it: float32 scores to add (a bool mask as 0 / -inf),
    keys contiguous, and the (batch, head, query) strides, 0 where it broadcasts."""
    m = mask.reshape(shape4)
    if m.dtype is not torch.bool:
        m = m.float()                          # a bf16/f16 mask widened exactly
    else:
        m = torch.zeros(shape4).masked_fill_(~m, float("-inf"))
    if shape4[3] != SKV:                       # broadcast over the keys: spelled out
        m = m.expand(*shape4[:3], SKV)
    m = m.contiguous()
    st = m.stride()
    return m, tuple(0 if shape4[i] == 1 else st[i] for i in range(3))


def attention_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
                   mask: Optional[Tensor] = None, window: Optional[int] = None) -> Tensor:
    if plain_f32(q) and plain_f32(k) and plain_f32(v) and q.dim() == 4 and k.dim() == 4 and v.dim() == 4:
        B, H, SQ, D = q.shape                          # shapes checked by checks.attention on a mismatch
        Bk, HKV, SKV, Dk = k.shape
        Bv, HKVv, SKVv, DV = v.shape
        if not (B == Bk == Bv and D == Dk and HKV == HKVv and SKV == SKVv and HKV and H % HKV == 0 and D and DV):
            checks.attention(q, k, v)
    else:
        B, H, HKV, SQ, SKV, D, DV = checks.attention(q, k, v)
    if scale is None:
        scale = _SCALES.get(D)
        if scale is None:
            scale = _SCALES.setdefault(D, attention_op.default_scale(D))
    else:
        scale = checks.number("attention", "scale", scale)
    shape4 = checks.attention_mask(mask, window, causal, (B, H, SQ, SKV), q.dtype) \
        if mask is not None or window is not None else None
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty((B, H, SQ, DV), dtype=q.dtype)
    if B * H * SQ:
        bias, strides = (NO_BIAS, (0, 0, 0)) if shape4 is None else mask_bias(mask, shape4, SKV)
        # attention_op.launch's geometry and constants: a block per (batch, head, tile of `rows`
        # rows), in the form attention_op.form_for picks for the variant's lanes and the machine
        key = (min(SQ, 17), min(H // HKV, 9) if SQ <= 8 else 0, current_variant().lanes,
               target.current().vector_bits, bool(causal))       # what form_for's choice depends on
        form = _FORMS.get(key)
        if form is None:
            form = _FORMS[key] = attention_op.FORMS[attention_op.form_for(SQ, H // HKV, *key[2:])]
        fkernel, rows, packed = form
        n = (B * HKV * -(-(H // HKV) * SQ // rows) * rows if packed == 1
             else B * H * (SQ if packed else -(-SQ // rows)) * rows)     # attention_op.launch's geometry
        mode = 2 if window is not None else (1 if causal else 0)
        kernel = kernel_for(fkernel, q.dtype, keep=("bias",))
        run = launcher(kernel, (("D", D), ("DV", DV), ("CAUSAL", mode), ("MASK", int(shape4 is not None))), True)
        run(n, (q, k, v, bias, o), (scale, H, HKV, SQ, SKV, *strides, window or 0))
    return o


def _attention_fake(q, k, v, causal=False, scale=None, mask=None, window=None):
    B, H, HKV, SQ, SKV, D, DV = checks.attention(q, k, v)
    if scale is not None:
        checks.number("attention", "scale", scale)
    checks.attention_mask(mask, window, causal, (B, H, SQ, SKV), q.dtype)
    return q.new_empty((B, H, SQ, DV))


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
              mask: Optional[Tensor] = None, window: Optional[int] = None) -> Tensor:
    """softmax(scale * q k^T) v in scaled_dot_product_attention's layouts: q [B,H,Sq,D],
    k [B,Hkv,Skv,D], v [B,Hkv,Skv,Dv] -> [B,H,Sq,Dv]; query head h reads KV head
    h*Hkv//H (H a multiple of Hkv, as enable_gqa). scale defaults to 1/sqrt(D).

    causal=True masks key j for query i when j > i + Skv - Sq: aligned to the END of the
    keys (bottom-right), as KV-cache decoding and FlashAttention need. SDPA's is_causal
    aligns top-left (j > i); the two agree only when Sq == Skv. With Sq > Skv the first
    Sq - Skv rows see no key and are 0.

    mask is SDPA's attn_mask: bool (True = attend) or float32 (added to the scaled scores),
    broadcasting to [B, H, Sq, Skv]. window=W (with causal=True) also hides keys j <= i - W
    (i the row's causal diagonal), Mistral's and Qwen2's sliding window. A row that sees
    no key with a finite score is 0 (SDPA: NaN)."""
    if direct(q, k, v) and (mask is None or direct(mask)):
        return attention_impl(q, k, v, causal, scale, mask, window)
    return torch.ops.cohort.attention(q, k, v, causal, scale, mask, window)


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


def _attention_eager(q, k, v):
    rep = q.shape[1] // k.shape[1]                          # head h reads kv head h*Hkv//H
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                          v.repeat_interleave(rep, dim=1))   # scale 1/sqrt(D)


def _attention_causal_eager(q, k, v):
    rep = q.shape[1] // k.shape[1]
    sq, skv = q.shape[2], k.shape[2]
    keep = torch.ones(sq, skv, dtype=torch.bool).tril(diagonal=skv - sq)   # bottom-right
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                          v.repeat_interleave(rep, dim=1), attn_mask=keep)


ATTENTION = register(TorchOp("attention", attention_impl, _attention_fake, attention, _attention_grad,
                             _attention_setup, native=NativeCall("tttbfni", constants=(NO_BIAS,))))
bind(OpBinding("attention", _attention_eager, ATTENTION, schema_tail=(False, None, None, None)))
bind(OpBinding("attention_causal", _attention_causal_eager, ATTENTION, {"causal": True},
               schema_tail=(True, None, None, None)))

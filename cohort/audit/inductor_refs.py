"""TorchInductor's side of the Inductor column: torch imported lazily, and each operator written
the way an ML engineer writes it in eager torch (the graphs Inductor compiles; DESIGN §6)."""
from __future__ import annotations

import importlib.util
import types
from typing import Callable, Optional

import numpy as np

from ..refimpl import ops

TORCH_MISSING = "torch is not installed; the Inductor column needs the [torch] extra"


class InductorUnavailable(RuntimeError):
    """torch (or a needed part of it) is missing; the message says so in one line."""


# ---------------------------------------------------------------- torch, lazily

_torch_mod = {}


def torch_available() -> bool:
    """True when torch can be imported (checked without importing it)."""
    if "torch" in _torch_mod:
        return _torch_mod["torch"] is not None
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def unavailable_reason() -> Optional[str]:
    """None when the Inductor column can run here, else the one-line reason."""
    try:
        _torch()
    except InductorUnavailable as e:
        return str(e)
    return None


def _torch():
    if "torch" not in _torch_mod:
        try:
            import torch  # noqa: F401
            import torch.nn.functional  # noqa: F401
            _torch_mod["torch"] = torch
        except ImportError:
            _torch_mod["torch"] = None
    torch = _torch_mod["torch"]
    if torch is None:
        raise InductorUnavailable(TORCH_MISSING)
    return torch


# ---------------------------------------------------------------- references
# The operators of DESIGN §4 in eager torch, FP32, the same inputs as ours.
# Written as an ML engineer would: library calls where torch has one.

def _rmsnorm(x, w):
    import torch
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _layernorm(x, w, b):
    import torch.nn.functional as F
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _masked_softmax(x, mask):
    import torch
    # softmax over the unmasked entries; the final masked_fill also turns a
    # fully masked row (softmax of all -inf = NaN) into zeros.
    return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)


def _swiglu(a, b):
    import torch.nn.functional as F
    return F.silu(a) * b


def _gelu_residual(x, r):
    import torch.nn.functional as F
    return F.gelu(x) + r                     # approximate="none": the exact erf form


def _rope(x, cos, sin):
    import torch
    x0, x1 = x.unflatten(-1, (-1, 2)).unbind(-1)          # pairs (2k, 2k+1)
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def _attention(q, k, v):
    import torch.nn.functional as F
    rep = q.shape[1] // k.shape[1]                          # head h reads kv head h*Hkv//H
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                          v.repeat_interleave(rep, dim=1))   # scale 1/sqrt(D)


def _gelu(x):
    import torch.nn.functional as F
    return F.gelu(x)


def _gelu_tanh(x):
    import torch.nn.functional as F
    return F.gelu(x, approximate="tanh")


def _rope_half(x, cos, sin):
    import torch
    h = cos.shape[-1]                                       # x [N, S, D], cos/sin [S, R/2]
    x0, x1 = x[..., :h], x[..., h:2 * h]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos, x[..., 2 * h:]), dim=-1)


def _rope_pairs(x, cos, sin):
    import torch
    h = cos.shape[-1]
    x0, x1 = x[..., 0:2 * h:2], x[..., 1:2 * h:2]
    rot = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    return torch.cat((rot, x[..., 2 * h:]), dim=-1)


def _attention_causal(q, k, v):
    import torch
    import torch.nn.functional as F
    rep = q.shape[1] // k.shape[1]
    sq, skv = q.shape[2], k.shape[2]
    keep = torch.ones(sq, skv, dtype=torch.bool).tril(diagonal=skv - sq)   # bottom-right
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                          v.repeat_interleave(rep, dim=1), attn_mask=keep)


def _matmul(a, b):
    import torch
    return torch.matmul(a, b)                   # oneDNN/MKL's sgemm in eager; ATen's mm under Inductor


def _cumsum(x):
    import torch
    return torch.cumsum(x, dim=-1)


def _histogram(bins):
    def histogram(idx):
        import torch
        # torch.bincount(idx, minlength=bins) for in-range indices; out-of-range ones go to a
        # spare bin that is dropped (the operator does not count them), in static shapes
        valid = (idx >= 0) & (idx < bins)
        slot = torch.where(valid, idx, bins).long()
        ones = torch.ones_like(idx)
        return torch.zeros(bins + 1, dtype=torch.int32).scatter_add(0, slot, ones)[:bins]
    return histogram


def _transpose(x):
    return x.transpose(-1, -2).contiguous()


_REFERENCES = {"matmul": _matmul, "cumsum": _cumsum, "transpose": _transpose,
               "rmsnorm": _rmsnorm, "layernorm": _layernorm, "masked_softmax": _masked_softmax,
               "swiglu": _swiglu, "gelu_residual": _gelu_residual, "rope": _rope,
               "attention": _attention, "gelu": _gelu, "gelu_tanh": _gelu_tanh, "rope_half": _rope_half,
               "rope_pairs": _rope_pairs, "attention_causal": _attention_causal}


# operators whose torch function depends on the launch's shape, not only on its inputs
_SHAPED = {"histogram": lambda shape: _histogram(int(shape[1]))}


def reference(op_name: str, shape=None) -> Callable:
    """The eager-torch function of an operator: `f(*input tensors in operator order) -> tensor`
    (histogram's needs the shape: its bin count)."""
    _torch()
    ops.get(op_name)
    if op_name in _SHAPED:
        if shape is None:
            raise ValueError(f"the torch reference of {op_name} needs the shape")
        return _SHAPED[op_name](shape)
    return _REFERENCES[op_name]


def reference_output(op_name: str, inputs: dict, shape=None) -> np.ndarray:
    """The eager torch output (numpy, the operator's output dtype and logical shape) for `inputs`."""
    torch = _torch()
    op = ops.get(op_name)
    with torch.no_grad():
        y = reference(op_name, shape)(*[torch.from_numpy(np.ascontiguousarray(inputs[n])) for n in op.inputs])
    return y.numpy().copy()


def _fresh(fn: Callable) -> Callable:
    """A copy of `fn` with its own code object, hence its own Dynamo cache:
    one compiled graph per column (no recompile limit across sizes, and the
    E2E figure checks one guard set, not every size compiled before)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


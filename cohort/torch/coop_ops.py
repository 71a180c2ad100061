"""The cooperative operators (issue 24) as torch ops: matmul, cumsum, histogram and
transpose (`torch.ops.cohort.*`, custom ops with fake implementations; DESIGN §4
defines each one's bits).

    matmul(a, b)         a [..., M, K] float32, b [K, N] float32 -> [..., M, N] (and bf16/fp16, dtypes.py)
                         (torch.matmul with a 2-D b: a linear layer's product)
    cumsum(x, dim=-1)    along the last dimension only (another dim raises)
    histogram(idx, bins) idx int32 or int64 (any shape) -> int32 counts [bins]; indices outside
                         [0, bins) are not counted (as torch.histc ignores values
                         outside its range); torch.bincount(idx, minlength=bins) for
                         in-range indices
    transpose(x)         x [..., R, C] -> x.transpose(-1, -2).contiguous()

Gradients: matmul (da = g @ b^T, db = a^T @ g, each by cohort's matmul and
transpose), cumsum (the reverse cumulative sum: flip, cumsum, flip) and transpose
(the transpose of g). histogram has none (integer counts). Each op is a TorchOp
record and each operator an OpBinding with its eager torch code (binding.py), at the
end of its section; these ops have no direct CPU kernel (custom_op's layers run).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..backend import target
from ..refimpl import ops as registry
from ..refimpl.ops import matmul as matmul_op
from . import checks
from .binding import OpBinding, TorchOp, bind, register
from .checks import FLOATS
from .dtypes import kernel_for
from .launch import build, current_variant

_MATMUL_FORMS = {f: registry.get("matmul", f) for f in ("tiled", "tiled32", "tiled64", "wide", "wide4")}   # matmul_op.form_for
_CUMSUM = registry.get("cumsum")
_HIST = registry.get("histogram")
_TRANSPOSE = registry.get("transpose")


# ---------------------------------------------------------------- matmul

def _matmul_check(a, b):
    checks.tensor("matmul", "a", a, FLOATS, min_dim=2)
    checks.tensor("matmul", "b", b, FLOATS)
    checks.like("matmul", "a", a, ("b", b))
    if b.dim() != 2:
        raise ValueError(f"matmul: b must be 2-D [K, N], got shape {tuple(b.shape)} "
                         f"(a batched b is not supported)")
    if a.shape[-1] != b.shape[0]:
        raise ValueError(f"matmul: a's last dimension ({a.shape[-1]}) must equal b's first ({b.shape[0]})")


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    _matmul_check(a, b)
    K, N = b.shape
    M = math.prod(int(d) for d in a.shape[:-1])
    out = torch.empty(*a.shape[:-1], N, dtype=a.dtype)
    if out.numel() == 0:
        return out
    if K == 0:
        return out.zero_()
    a, b = a.contiguous(), b.contiguous()
    op = _MATMUL_FORMS[matmul_op.form_for((M, K, N), current_variant().lanes, target.current().vector_bits)]
    launch = op.launch((M, K, N))
    build(kernel_for(op.kernel, a.dtype), launch.consts)(launch.n, (a, b, out), ())
    return out


def _matmul_fake(a, b):
    _matmul_check(a, b)
    return a.new_empty(*a.shape[:-1], b.shape[1])


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for float32 a [..., M, K] and b [K, N]: each element one fma chain over k
    in ascending order from +0.0 (DESIGN §4)."""
    return torch.ops.cohort.matmul(a, b)


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, g):
    a, b = ctx.saved_tensors
    da = db = None
    if ctx.needs_input_grad[0]:
        da = torch.ops.cohort.matmul(g, torch.ops.cohort.transpose(b))
    if ctx.needs_input_grad[1]:
        K, N = b.shape
        a2, g2 = a.reshape(-1, K), g.reshape(-1, N)
        db = torch.ops.cohort.matmul(torch.ops.cohort.transpose(a2), g2)
    return da, db


def _matmul_eager(a, b):
    return torch.matmul(a, b)                   # oneDNN/MKL's sgemm in eager; ATen's mm under Inductor


MATMUL = register(TorchOp("matmul", _matmul, _matmul_fake, matmul, _matmul_backward, _matmul_setup,
                          cpu_kernel=False, autograd_cpu=False))
bind(OpBinding("matmul", _matmul_eager, MATMUL))


# ---------------------------------------------------------------- cumsum

def _cumsum_check(x, dim):
    checks.tensor("cumsum", "x", x, FLOATS, min_dim=1)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"cumsum: dim must be an int, got {type(dim).__name__}")
    if dim not in (-1, x.dim() - 1):
        raise ValueError(f"cumsum: only the last dimension is supported (dim=-1 or {x.dim() - 1}), got dim={dim}")


def _cumsum(x: Tensor, dim: int = -1) -> Tensor:
    _cumsum_check(x, dim)
    x = x.contiguous()
    y = torch.empty_like(x)
    C = x.shape[-1]
    if x.numel():
        launch = _CUMSUM.launch((x.numel() // C, C))
        build(kernel_for(_CUMSUM.kernel, x.dtype), launch.consts, whole_blocks=True)(launch.n, (x, y), ())
    return y


def _cumsum_fake(x, dim=-1):
    _cumsum_check(x, dim)
    return x.new_empty(x.shape)


def cumsum(x: Tensor, dim: int = -1) -> Tensor:
    """torch.cumsum(x, dim=-1) in cohort's order of additions (DESIGN §4)."""
    _cumsum_check(x, dim)
    return torch.ops.cohort.cumsum(x, dim)


def _cumsum_setup(ctx, inputs, output):
    pass


def _cumsum_backward(ctx, g):
    return torch.ops.cohort.cumsum(g.flip(-1), -1).flip(-1), None


def _cumsum_eager(x):
    return torch.cumsum(x, dim=-1)


CUMSUM = register(TorchOp("cumsum", _cumsum, _cumsum_fake, cumsum, _cumsum_backward, _cumsum_setup,
                          cpu_kernel=False, autograd_cpu=False))
bind(OpBinding("cumsum", _cumsum_eager, CUMSUM, schema_tail=(-1,)))


# ---------------------------------------------------------------- histogram

def _histogram_check(idx, bins, dtype=torch.int32):
    checks.tensor("histogram", "idx", idx, dtype=dtype)
    if isinstance(bins, bool) or not isinstance(bins, int):
        raise TypeError(f"histogram: bins must be an int, got {type(bins).__name__}")
    if not 1 <= bins <= checks.MAX_ELEMENTS:
        raise ValueError(f"histogram: bins must be in [1, {checks.MAX_ELEMENTS}], got {bins}")


def _histogram(idx: Tensor, bins: int) -> Tensor:
    _histogram_check(idx, bins)
    counts = torch.zeros(bins, dtype=torch.int32)
    if idx.numel():
        launch = _HIST.launch((idx.numel(), bins))
        build(_HIST.kernel, launch.consts)(launch.n, (idx.contiguous(), counts), ())
    return counts


def _histogram_fake(idx, bins):
    _histogram_check(idx, bins)
    return idx.new_empty(bins, dtype=torch.int32)


def histogram(idx: Tensor, bins: int) -> Tensor:
    """int32 counts [bins] of the int32 or int64 indices idx; indices outside [0, bins) are
    not counted (torch.bincount(idx, minlength=bins) when every index is in range). int64
    indices (torch.bincount's dtype) are narrowed first, any outside [0, bins) becoming -1,
    so that no index of 2^32 + b is counted in bin b."""
    _histogram_check(idx, bins, (torch.int32, torch.int64))   # before the dispatcher, whose errors span lines
    if idx.dtype == torch.int64:
        idx = torch.where((idx >= 0) & (idx < bins), idx, -1).to(torch.int32)
    return torch.ops.cohort.histogram(idx, bins)


def _histogram_eager(shape):
    bins = int(shape[1])

    def histogram(idx):
        # torch.bincount(idx, minlength=bins) for in-range indices; out-of-range ones go to a
        # spare bin that is dropped (the operator does not count them), in static shapes
        valid = (idx >= 0) & (idx < bins)
        slot = torch.where(valid, idx, bins).long()
        ones = torch.ones_like(idx)
        return torch.zeros(bins + 1, dtype=torch.int32).scatter_add(0, slot, ones)[:bins]
    return histogram


HISTOGRAM = register(TorchOp("histogram", _histogram, _histogram_fake, histogram, cpu_kernel=False,
                             autograd_cpu=False))
bind(OpBinding("histogram", _histogram_eager, HISTOGRAM, extra=lambda shape: (int(shape[1]),), eager_shaped=True))


# ---------------------------------------------------------------- transpose

def _transpose_check(x):
    checks.tensor("transpose", "x", x, FLOATS, min_dim=2)


def _transpose(x: Tensor) -> Tensor:
    _transpose_check(x)
    R, C = x.shape[-2], x.shape[-1]
    y = x.new_empty(*x.shape[:-2], C, R)
    if x.numel():
        launch = _TRANSPOSE.launch((x.numel() // (R * C), R, C))
        build(kernel_for(_TRANSPOSE.kernel, x.dtype), launch.consts, whole_blocks=True)(launch.n,
                                                                                     (x.contiguous(), y), ())
    return y


def _transpose_fake(x):
    _transpose_check(x)
    return x.new_empty(*x.shape[:-2], x.shape[-1], x.shape[-2])


def transpose(x: Tensor) -> Tensor:
    """x.transpose(-1, -2).contiguous() (a copy through shared tiles)."""
    return torch.ops.cohort.transpose(x)


def _transpose_backward(ctx, g):
    return torch.ops.cohort.transpose(g)


def _transpose_eager(x):
    return x.transpose(-1, -2).contiguous()


TRANSPOSE = register(TorchOp("transpose", _transpose, _transpose_fake, transpose, _transpose_backward,
                             cpu_kernel=False, autograd_cpu=False))
bind(OpBinding("transpose", _transpose_eager, TRANSPOSE))

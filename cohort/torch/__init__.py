"""cohort.torch: cohort's operators as PyTorch ops (import registers them).

    import torch, cohort.torch as ct
    y = ct.rmsnorm(x, w)                              # = torch.ops.cohort.rmsnorm(x, w)
    o = ct.attention(q, k, v, causal=True)            # SDPA layouts, grouped KV heads
    model = torch.compile(model, fullgraph=True)      # the ops trace as single nodes

float32 CPU tensors in, new tensors out (DESIGN §4 for each operator's exact
definition). Ops: rmsnorm, layernorm, masked_softmax, swiglu, gelu,
gelu_tanh, gelu_residual, rope, rope_hf, attention (ops.py); matmul, cumsum,
histogram (int32 or int64 indices), transpose (coop_ops.py, issue 24); `kernel_op` makes any
`@cohort.kernel` an op; `variant` chooses the variant they run (default
"packet"); `stats` counts builds and launches. torch is an extra
(`pip install cohort[torch]`). `cohort.torch.hf.install(model)` runs a transformers
model's norms, activations, rope and attention on these ops (hf/; needs transformers:
`pip install cohort[hf]`, which examples/ need too).
"""
try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("cohort.torch needs PyTorch: pip install 'cohort[torch]'") from e

from . import autograd  # noqa: F401  (registers the ops' gradients)
from .coop_ops import cumsum, histogram, matmul, transpose
from .kernel_op import kernel_op
from .launch import DEFAULT_VARIANT, current_variant, stats, variant
from .ops import (
    OPS,
    attention,
    gelu,
    gelu_residual,
    gelu_tanh,
    layernorm,
    masked_softmax,
    rmsnorm,
    rope,
    rope_hf,
    swiglu,
)

__all__ = ["OPS", "DEFAULT_VARIANT", "attention", "cumsum", "current_variant", "gelu", "gelu_residual",
           "gelu_tanh", "histogram", "kernel_op", "layernorm", "masked_softmax", "matmul", "rmsnorm", "rope",
           "rope_hf", "stats", "swiglu", "transpose", "variant"]

"""cohort.torch: cohort's operators as PyTorch ops (import registers them).

    import torch, cohort.torch as ct
    y = ct.rmsnorm(x, w)                              # = torch.ops.cohort.rmsnorm(x, w)
    o = ct.attention(q, k, v, causal=True)            # SDPA layouts, grouped KV heads
    model = torch.compile(model, fullgraph=True)      # the ops trace as single nodes

float32 CPU tensors in, new tensors out (DESIGN §4 for each operator's exact
definition). Ops: rmsnorm, layernorm, masked_softmax, swiglu, gelu,
gelu_tanh, gelu_residual (ops.py), rope, rope_hf, attention (attention_ops.py); matmul,
cumsum, histogram (int32 or int64 indices), transpose (coop_ops.py, issue 24) - each a
TorchOp record (binding.py), exported here from the records; `kernel_op` makes any
`@cohort.kernel` an op; `variant` chooses the variant they run (default
DEFAULT_SPEC: "packet,lanes=16" on 512-bit vector registers, else "packet");
`stats` counts builds and launches. torch is an extra
(`pip install cohort[torch]`). `cohort.torch.hf.install(model)` runs a transformers
model's norms, activations, rope and attention on these ops (hf/; needs transformers:
`pip install cohort[hf]`, which examples/ need too).
"""
try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("cohort.torch needs PyTorch: pip install 'cohort[torch]'") from e

from . import (
    attention_ops,  # noqa: F401  (registers rope, rope_hf, attention)
    autograd,  # noqa: F401  (imports ops, attention_ops; registers the backward ops)
    coop_ops,  # noqa: F401  (registers matmul, cumsum, histogram, transpose)
)
from .binding import TORCH_OPS, public_ops
from .kernel_op import kernel_op
from .launch import DEFAULT_SPEC, DEFAULT_VARIANT, current_variant, stats, variant
from .native_call import startup as _native_call_startup

# the ops with the short AutogradCPU kernel (tests/test_torch_call.py)
OPS = tuple(name for name, op in TORCH_OPS.items() if op.autograd_cpu)

# cohort.torch.<op> for every registered op with a function (binding.TORCH_OPS)
globals().update(public_ops())

_native_call_startup()      # COHORT_TORCH_CALL: the native call path when built (native_call.py)

__all__ = ["OPS", "DEFAULT_SPEC", "DEFAULT_VARIANT", "current_variant", "kernel_op", "stats", "variant", *sorted(public_ops())]

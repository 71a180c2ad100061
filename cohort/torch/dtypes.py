"""bf16 and fp16 tensors in cohort's torch ops (issue 26 item 3).

A bf16 (or fp16) call launches the operator's kernel re-typed to bf16 buffers
(`refimpl.storage.retype`): each element is widened exactly to f32 on load, the
arithmetic is the f32 kernel's (f32 accumulation), and the output is rounded once to
nearest even (DESIGN §3). The bits are the interpreter's, in every exact variant, as
in f32. One dtype per call: the output has the inputs' dtype. Attention's mask bias
stays an f32 buffer (a bf16/f16 float mask is widened to it exactly).
"""
from __future__ import annotations

import torch

from ..refimpl.ir import DType
from ..refimpl.storage import retype

STORAGE = {torch.bfloat16: DType.BF16, torch.float16: DType.F16}
_kernels: dict = {}


def kernel_for(kernel, dtype, keep=()):
    """`kernel` for tensors of `dtype`: itself for float32, else re-typed (built once)."""
    if dtype is torch.float32:
        return kernel
    k = _kernels.get((kernel, dtype))
    if k is None:
        k = _kernels.setdefault((kernel, dtype), retype(kernel, STORAGE[dtype], keep))
    return k

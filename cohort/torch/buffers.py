"""A torch tensor as a kernel's buffer: the checks refimpl/launch_check.py's as_buffer makes
of a framework's array before it reads its memory (refimpl imports no framework: it finds this
module through launch_check.FRAMEWORK_BUFFERS, which cohort/__init__.py fills by name).

A tensor that requires grad is refused for a buffer the kernel writes: the store would bypass
autograd (torch itself refuses in-place writes to a leaf that requires grad); `t.detach()`
shares the memory and is accepted.
"""
from __future__ import annotations

import numpy as np
import torch

from ..refimpl.errors import KernelError
from ..refimpl.ir import DType

_DTYPES = {DType.F32: torch.float32, DType.I32: torch.int32, DType.U32: torch.uint32,
           DType.BF16: torch.bfloat16, DType.F16: torch.float16}


def torch_dtype_name(dtype: DType) -> str:
    t = _DTYPES.get(dtype)
    return str(t) if t is not None else ""


def as_array(kernel, name: str, dtype: DType, value, written: bool = True) -> np.ndarray:
    """The NumPy view of tensor `value`'s memory for buffer `name` (no copy: stores land in the
    tensor), or KernelError naming the buffer."""
    if value.device.type != "cpu":
        raise KernelError(kernel.name, None, f"buffer {name}: tensor is on {value.device}, not the CPU")
    # before .numpy(), which fails on dtypes NumPy lacks (bfloat16) with a message naming no argument
    if str(value.dtype) != torch_dtype_name(dtype):
        raise KernelError(kernel.name, None, f"buffer {name} must have dtype {dtype.np}, "
                                             f"got {value.dtype}")
    if not value.is_contiguous():
        raise KernelError(kernel.name, None, f"buffer {name}: tensor is not contiguous")
    if getattr(value, "is_neg", bool)():   # a lazily negated view: its memory holds the values un-negated
        raise KernelError(kernel.name, None, f"buffer {name}: tensor has its negative bit set; "
                                             f"pass {name}.resolve_neg()")
    if written and value.requires_grad:
        raise KernelError(kernel.name, None, f"buffer {name}: tensor requires grad and the kernel writes "
                                             f"it outside autograd; pass {name}.detach() to allow that")
    value = value.detach()
    # NumPy has no bfloat16: a bf16 buffer is its bits, as uint16 (DType.BF16.np)
    return value.view(torch.int16).numpy().view(np.uint16) if dtype is DType.BF16 else value.numpy()

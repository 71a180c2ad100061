"""Launch argument checks shared by the interpreter and the native launcher.

Everything is checked before anything runs: a wrong dtype, a non-contiguous
array, a missing or unknown argument, a scalar that does not fit its type.
Buffers are never converted: a silent copy would swallow the kernel's stores.
A torch tensor that requires grad is refused for a buffer the kernel writes:
the store would bypass autograd (torch itself refuses in-place writes to a leaf
that requires grad); `t.detach()` shares the memory and is accepted.
"""
from __future__ import annotations

import numpy as np

from .errors import KernelError
from .ir import I32_MAX, I32_MIN, U32_MAX, DType, Kernel, ParamKind, walk_stmts, written_name


def check_n(kernel: Kernel, n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise KernelError(kernel.name, None, f"thread count n must be an int, got {n!r}")
    n = int(n)
    if not 0 <= n <= I32_MAX - kernel.block:
        raise KernelError(kernel.name, None, f"thread count n={n} out of range 0..{I32_MAX - kernel.block}")
    return n


def written_buffers(kernel: Kernel) -> frozenset:
    """The buffers some statement of the kernel stores to."""
    buffers = {p.name for p in kernel.buffers}
    return frozenset(written_name(s) for s in walk_stmts(kernel.body)) & buffers


def torch_dtype_name(dtype: DType) -> str:
    return {DType.F32: "torch.float32", DType.I32: "torch.int32", DType.U32: "torch.uint32",
            DType.BF16: "torch.bfloat16", DType.F16: "torch.float16"}.get(dtype, "")


def _torch_int16():
    import torch
    return torch.int16


def as_buffer(kernel: Kernel, name: str, dtype: DType, value, written: bool = True) -> np.ndarray:
    if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
        mod = type(value).__module__
        if mod.startswith("torch"):
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
            value = value.view(_torch_int16()).numpy().view(np.uint16) \
                if dtype is DType.BF16 else value.numpy()
    if not isinstance(value, np.ndarray):
        raise KernelError(kernel.name, None, f"buffer {name} must be a NumPy array or a CPU tensor, "
                                             f"got {type(value).__name__}")
    if value.dtype != dtype.np:
        bits = " (bf16 elements as their bits)" if dtype is DType.BF16 else ""
        raise KernelError(kernel.name, None, f"buffer {name} must have dtype {dtype.np}{bits}, got {value.dtype}")
    if not value.flags.c_contiguous:
        raise KernelError(kernel.name, None, f"buffer {name} is not C-contiguous")
    if not value.flags.writeable:
        raise KernelError(kernel.name, None, f"buffer {name} is read-only")
    if value.size > I32_MAX:
        raise KernelError(kernel.name, None, f"buffer {name} has {value.size} elements; at most {I32_MAX}")
    return value.reshape(-1)  # a view: stores land in the caller's array


def as_scalar(kernel: Kernel, name: str, dtype: DType, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise KernelError(kernel.name, None, f"scalar {name} must be a {dtype.value} number, got {value!r}")
    if dtype is DType.F32:
        return np.float32(value)  # one rounding to nearest even, as a kernel literal
    if isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise KernelError(kernel.name, None, f"scalar {name} is {dtype.value}, got {value!r}")
    v = int(value)
    lo, hi = (I32_MIN, I32_MAX) if dtype is DType.I32 else (0, U32_MAX)
    if not lo <= v <= hi:
        raise KernelError(kernel.name, None, f"scalar {name}={v} does not fit in {dtype.value}")
    return dtype.np.type(v)


def check_args(kernel: Kernel, n, args: dict):
    """-> (buffers, scalars) for a specialised kernel; raises KernelError."""
    check_n(kernel, n)
    wanted = {p.name: p for p in kernel.params}
    unknown = set(args) - set(wanted)
    if unknown:
        raise KernelError(kernel.name, None, f"unknown argument(s) {sorted(unknown)}; "
                                             f"parameters are {list(wanted)}")
    missing = set(wanted) - set(args)
    if missing:
        raise KernelError(kernel.name, None, f"missing argument(s) {sorted(missing)}")
    buffers, scalars = {}, {}
    written = written_buffers(kernel)
    for p in kernel.params:
        if p.kind is ParamKind.BUFFER:
            buffers[p.name] = as_buffer(kernel, p.name, p.dtype, args[p.name], p.name in written)
        else:
            scalars[p.name] = as_scalar(kernel, p.name, p.dtype, args[p.name])
    # Aliased buffers would hide write conflicts and races from the interpreter
    # (it tracks them per buffer) and let native results depend on the schedule.
    names = list(buffers)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if buffers[a].size and buffers[b].size and np.may_share_memory(buffers[a], buffers[b]):
                raise KernelError(kernel.name, None, f"buffers {a} and {b} overlap in memory; "
                                                     "pass disjoint arrays (a kernel may read and write one buffer)")
    return buffers, scalars

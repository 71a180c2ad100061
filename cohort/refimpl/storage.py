"""bf16/f16 forms of any kernel (issue 26 item 3; DESIGN §3 "Storage types").

A kernel written over f32 buffers gets a storage form by re-typing the buffers:
`retype(kernel, DType.BF16)` makes every f32 buffer parameter (except those in
`keep`) a bf16 buffer. The body is unchanged and means what it meant, over the
widened values: a load from a bf16 buffer is an f32 value (the element widened
exactly), so every operation stays f32, and a store rounds its f32 value once.
No kernel is copied by hand, and the result is validated like any kernel.
"""
from __future__ import annotations

from dataclasses import replace

from .frontend import KernelFunction
from .ir import STORAGE_DTYPES, DType, Kernel, ParamKind
from .spec import validate


def retype(kernel, storage: DType, keep=()):
    """`kernel` (a Kernel or a KernelFunction, returned as the same kind) with its f32 buffers
    other than `keep` re-typed to `storage` (bf16 or f16), named `<name>_<storage>`."""
    if storage not in STORAGE_DTYPES:
        raise ValueError(f"storage type must be bf16 or f16, got {storage!r}")
    k = kernel.ir if isinstance(kernel, KernelFunction) else kernel
    params = tuple(replace(p, dtype=storage) if p.kind is ParamKind.BUFFER and p.dtype is DType.F32
                   and p.name not in keep else p for p in k.params)
    out = validate(Kernel(f"{k.name}_{storage.value}", params, k.body, k.block, k.consts, k.specialised),
                   specialised=k.specialised)
    if not isinstance(kernel, KernelFunction):
        return out
    kf = KernelFunction.__new__(KernelFunction)     # the same Python function, the re-typed IR
    kf.fn, kf.block, kf.ir = kernel.fn, kernel.block, out
    kf.__name__, kf.__doc__ = f"{kernel.__name__}_{storage.value}", kernel.__doc__
    return kf

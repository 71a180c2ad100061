"""Every operator in bf16 and f16 storage: `ops.get("rmsnorm:bf16")` (issue 26 item 3).

The operator's kernels (every form) are re-typed by `refimpl.storage.retype`: its f32
buffers hold bf16 (or f16) elements, its arithmetic stays f32 (DESIGN §3, §4). Its
seeded inputs are the f32 operator's rounded to the storage type; its oracle is the
f32 operator's float64 oracle applied to the widened inputs (exact). The output is
the f32 computation rounded once, so its error bound is the f32 operator's plus the
output rounding: rel_tol + u·(1 + rel_tol), u = 2^-8 (bf16) or 2^-11 (f16), relative
to the row's largest |oracle| (valid while that is a normal number of the type).
"""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..ir import DTYPE_BY_NAME, STORAGE_DTYPES, DType
from ..semantics import narrow, widen
from ..storage import retype
from .base import Operator, ShapeError

UNIT_ROUNDOFF = {DType.BF16: 2.0 ** -8, DType.F16: 2.0 ** -11}


def values(a: np.ndarray) -> np.ndarray:
    """The values an output or input buffer holds, as f32: a bf16 buffer (uint16 bits) or
    an f16 one widened (exactly), anything else as it is."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return widen(a, DType.BF16).reshape(a.shape)
    if a.dtype == np.float16:
        return widen(a, DType.F16).reshape(a.shape)
    return a


def storage_type(name: str) -> DType:
    st = DTYPE_BY_NAME.get(name)
    if st not in STORAGE_DTYPES:
        raise ShapeError(f"storage type must be bf16 or f16, got {name!r}")
    return st


@functools.lru_cache(maxsize=None)
def storage_operator(op: Operator, storage: DType) -> Operator:
    """`op` over `storage` buffers (its aux buffers, attention's f32 mask bias, stay f32)."""
    keep = op.aux
    kf = retype(op.kernel, storage, keep)
    stored = frozenset(p.name for p in kf.ir.buffers if p.dtype is storage)
    if not stored:
        raise ShapeError(f"{op.name} has no f32 buffer, so no {storage.value} form")

    def make_inputs(shape, seed):
        return {n: narrow(a, storage) if n in stored else a for n, a in op.make_inputs(shape, seed).items()}

    def oracle(inp):
        return op.oracle({n: values(a) if n in stored else a for n, a in inp.items()})

    u = UNIT_ROUNDOFF[storage]
    return replace(op, name=f"{op.name}:{storage.value}", kernel=kf, make_inputs=make_inputs, oracle=oracle,
                   rel_tol=op.rel_tol + u * (1 + op.rel_tol),
                   forms=tuple((n, retype(k, storage, keep), launch) for n, k, launch in op.forms),
                   definition=f"{op.definition}; {storage.value} buffers, f32 arithmetic, "
                              f"output rounded to nearest even")

"""triton.language objects as the frontend and the primitives read them: a tl.constexpr's
value, and the tl.dtype of a tile IR type. Below the frontend and every builtins module, which
all use them (tests/test_imports.py keeps the triton frontend free of import cycles)."""
from __future__ import annotations

from .tir import Ptr


def unwrap(v):
    """A tl.constexpr's value (recursively inside tuples)."""
    from triton.language import core as tlc
    while isinstance(v, tlc.constexpr):
        v = v.value
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(unwrap(x) for x in v)
    if isinstance(v, tlc.tuple):
        return tuple(unwrap(x) for x in v.values)
    return v


def tl_dtype(d):
    import triton.language as tl
    if isinstance(d, Ptr):
        return tl.pointer_type(tl_dtype(d.elem))
    return tl.dtype(d.value[0])

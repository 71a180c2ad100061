"""Launch argument checks shared by the interpreter and the native launcher.

Everything is checked before anything runs: a wrong dtype, a non-contiguous
array, a missing or unknown argument, a scalar that does not fit its type.
Buffers are never converted: a silent copy would swallow the kernel's stores.
A framework's array (a torch tensor) is checked and viewed by its framework's
module (FRAMEWORK_BUFFERS; cohort/torch/buffers.py), never copied.
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


# An array of a framework (a torch tensor, ...) is checked and viewed as NumPy by a module of that
# framework's layer, outside refimpl (which imports no framework): the framework's top-level module
# name -> the module path whose as_array(kernel, name, dtype, value, written) returns the view or
# raises KernelError. cohort/__init__.py registers them by name; a module is imported on the first
# buffer of its framework, which is then already imported.
FRAMEWORK_BUFFERS: dict = {}
_adapters: dict = {}


def _framework_array(value):
    """The as_array function for `value`'s framework, or None (not a registered framework's array)."""
    top = type(value).__module__.partition(".")[0]
    path = FRAMEWORK_BUFFERS.get(top)
    if path is None:
        return None
    fn = _adapters.get(path)
    if fn is None:
        import importlib
        fn = _adapters.setdefault(path, importlib.import_module(path).as_array)
    return fn


def as_buffer(kernel: Kernel, name: str, dtype: DType, value, written: bool = True) -> np.ndarray:
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        convert = _framework_array(value)
        if convert is not None:
            value = convert(kernel, name, dtype, value, written)
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

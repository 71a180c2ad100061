"""TorchInductor's side of the Inductor column: torch imported lazily, and each operator written
the way an ML engineer writes it in eager torch (the graphs Inductor compiles; DESIGN §6) - that
code is the operator's OpBinding.eager (cohort/torch/binding.py), looked up here."""
from __future__ import annotations

import importlib.util
import types
from typing import Callable, Optional

import numpy as np

from ..refimpl import ops

TORCH_MISSING = "torch is not installed; the Inductor column needs the [torch] extra"


class InductorUnavailable(RuntimeError):
    """torch (or a needed part of it) is missing; the message says so in one line."""


# ---------------------------------------------------------------- torch, lazily

_torch_mod = {}


def torch_available() -> bool:
    """True when torch can be imported (checked without importing it)."""
    if "torch" in _torch_mod:
        return _torch_mod["torch"] is not None
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def unavailable_reason() -> Optional[str]:
    """None when the Inductor column can run here, else the one-line reason."""
    try:
        import_torch()
    except InductorUnavailable as e:
        return str(e)
    return None


def import_torch():
    if "torch" not in _torch_mod:
        try:
            import torch  # noqa: F401
            import torch.nn.functional  # noqa: F401
            _torch_mod["torch"] = torch
        except ImportError:
            _torch_mod["torch"] = None
    torch = _torch_mod["torch"]
    if torch is None:
        raise InductorUnavailable(TORCH_MISSING)
    return torch


# ---------------------------------------------------------------- references
# Each operator's eager torch code, written as an ML engineer would (library calls where torch
# has one), lives in its OpBinding next to its cohort.torch op (cohort/torch/binding.py).

def reference(op_name: str, shape=None) -> Callable:
    """The eager-torch function of an operator: `f(*input tensors in operator order) -> tensor`
    (histogram's needs the shape: its bin count)."""
    import_torch()
    ops.get(op_name)
    from ..torch.binding import BINDINGS
    if op_name not in BINDINGS:
        raise KeyError(f"operator {op_name} has no eager torch reference (no OpBinding in cohort.torch)")
    return BINDINGS[op_name].reference(shape)


def reference_output(op_name: str, inputs: dict, shape=None) -> np.ndarray:
    """The eager torch output (numpy, the operator's output dtype and logical shape) for `inputs`."""
    torch = import_torch()
    op = ops.get(op_name)
    with torch.no_grad():
        y = reference(op_name, shape)(*[torch.from_numpy(np.ascontiguousarray(inputs[n])) for n in op.inputs])
    return y.numpy().copy()


def fresh_function(fn: Callable) -> Callable:
    """A copy of `fn` with its own code object, hence its own Dynamo cache:
    one compiled graph per column (no recompile limit across sizes, and the
    E2E figure checks one guard set, not every size compiled before)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


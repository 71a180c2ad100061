"""Triton kernels on the CPU: `kernel[grid](*args)` with CPU torch tensors runs on cohort.

    import cohort.triton
    cohort.triton.activate(mode="reference")      # or: with cohort.triton.on_cpu(): ...
    add_kernel[grid](x, y, out, n, BLOCK=256)     # an unchanged @triton.jit kernel

mode="reference" is cohort's exact interpreter of the kernel's tile program
(DESIGN §10). The compiled ("native") and compared ("check") modes are not
available yet; asking for them raises ModeNotAvailable.
"""
from __future__ import annotations

import contextlib

from .errors import KernelRuntimeError, KernelTypeError, LaunchError, TritonError, UnsupportedConstruct

MODES = ("reference",)
_PLANNED = ("native", "check")
_state = {"mode": None, "saved": None}


class ModeNotAvailable(TritonError):
    pass


def _triton():
    try:
        import triton  # noqa: F401
        import triton.runtime.autotuner as autotuner
        import triton.runtime.jit as jit
    except ImportError:
        raise ImportError("cohort.triton needs triton and torch: pip install -e '.[triton]'") from None
    return jit, autotuner


def _check_mode(mode: str) -> str:
    if mode in _PLANNED:
        raise ModeNotAvailable(f"cohort.triton mode {mode!r} is not available yet; use mode='reference'")
    if mode not in MODES:
        raise ValueError(f"mode: expected 'reference', got {mode!r}")
    return mode


def activate(mode: str = "reference") -> None:
    """From now on, `kernel[grid](...)` of every @triton.jit kernel runs on cohort."""
    _check_mode(mode)
    jit, autotuner = _triton()
    from . import launch
    from .autotune import autotuner_run
    if _state["saved"] is None:
        _state["saved"] = (jit.JITFunction.run, autotuner.Autotuner.run)

    def run(self, *args, grid, warmup=False, **kwargs):
        return launch.run_reference(self, grid, args, kwargs, warmup=warmup)

    jit.JITFunction.run = run
    autotuner.Autotuner.run = autotuner_run
    _state["mode"] = mode


def deactivate() -> None:
    """Put triton's own launch back."""
    if _state["saved"] is None:
        return
    jit, autotuner = _triton()
    jit.JITFunction.run, autotuner.Autotuner.run = _state["saved"]
    _state["saved"] = None
    _state["mode"] = None


def active_mode():
    return _state["mode"]


@contextlib.contextmanager
def on_cpu(mode: str = "reference"):
    """Run Triton launches on cohort inside the block (restoring the previous state after)."""
    _check_mode(mode)
    previous = _state["mode"]
    activate(mode)
    try:
        yield
    finally:
        if previous is None:
            deactivate()
        else:
            activate(previous)


__all__ = ["activate", "deactivate", "on_cpu", "active_mode", "MODES", "ModeNotAvailable", "TritonError",
           "UnsupportedConstruct", "KernelTypeError", "KernelRuntimeError", "LaunchError"]

"""Triton kernels on the CPU: `kernel[grid](*args)` with CPU torch tensors runs on cohort.

    import cohort.triton
    cohort.triton.activate(mode="native")         # or: with cohort.triton.on_cpu(mode=...): ...
    add_kernel[grid](x, y, out, n, BLOCK=256)     # an unchanged @triton.jit kernel

Modes (DESIGN §10): "reference" is cohort's exact interpreter of the kernel's tile
program; "native" compiles the program with llvmlite (native.py), bit-identical to the
reference; "check" runs both, the reference on copies, and raises CheckMismatch naming
the first element where they differ. A construct native mode does not lower is an
UnsupportedConstruct naming it and the line, before anything runs.
"""
from __future__ import annotations

import contextlib

from . import state
from .errors import CheckMismatch, KernelRuntimeError, KernelTypeError, LaunchError, TritonError, UnsupportedConstruct

MODES = ("reference", "native", "check")
_state = state.current


class ModeNotAvailable(TritonError):
    """A mode this build of cohort.triton does not have (kept for callers that catch it)."""


def _triton():
    try:
        import triton  # noqa: F401
        import triton.runtime.autotuner as autotuner
        import triton.runtime.jit as jit
    except ImportError:
        raise ImportError("cohort.triton needs triton and torch: pip install -e '.[triton]'") from None
    return jit, autotuner


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(map(repr, MODES))}, got {mode!r}")
    return mode


def activate(mode: str = "reference", threads: int = None) -> None:
    """From now on, `kernel[grid](...)` of every @triton.jit kernel runs on cohort.
    threads: how many threads run a native launch's programs (default 1: the caller)."""
    _check_mode(mode)
    if threads is not None:
        from .native import set_threads
        set_threads(threads)
    jit, autotuner = _triton()
    from . import launch, native_launch
    from .autotune import autotuner_run
    if _state["saved"] is None:
        _state["saved"] = (jit.JITFunction.run, autotuner.Autotuner.run)

    def run(self, *args, grid, warmup=False, **kwargs):
        mode = _state["mode"]
        if mode == "native" and not warmup:
            prog = native_launch.launch(self, grid, args, kwargs)
            if prog is None:
                prog = launch.run_mode(mode, self, grid, args, kwargs)
                native_launch.record(self, args, kwargs, prog)
            return prog
        return launch.run_mode(mode, self, grid, args, kwargs, warmup=warmup)

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
def on_cpu(mode: str = "reference", threads: int = None):
    """Run Triton launches on cohort inside the block (restoring the previous state after)."""
    _check_mode(mode)
    from . import native
    previous, previous_threads = _state["mode"], native.threads()
    activate(mode, threads)
    try:
        yield
    finally:
        native.set_threads(previous_threads)
        if previous is None:
            deactivate()
        else:
            activate(previous)


__all__ = ["activate", "deactivate", "on_cpu", "active_mode", "MODES", "ModeNotAvailable", "TritonError", "CheckMismatch",
           "UnsupportedConstruct", "KernelTypeError", "KernelRuntimeError", "LaunchError"]

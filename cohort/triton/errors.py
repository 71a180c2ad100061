"""The errors cohort.triton raises: one line naming the kernel and its source line."""
from __future__ import annotations


class TritonError(Exception):
    """Base of every error cohort.triton raises about a kernel or a launch."""


class UnsupportedConstruct(TritonError):
    """A construct outside the supported subset, found before anything runs."""


class KernelTypeError(TritonError):
    """A kernel that Triton itself would reject (types, shapes), found before anything runs."""


class KernelRuntimeError(TritonError):
    """A program failed while running: out-of-bounds access, division by zero, assert."""


class CheckMismatch(TritonError):
    """mode="check": the native build and the reference disagree (an output element, or one failed)."""


class LaunchError(TritonError):
    """Bad launch arguments (a non-CPU tensor, a missing argument, a bad grid)."""


def where(kernel: str, filename: str, line: int) -> str:
    return f"kernel `{kernel}` ({filename}:{line})"

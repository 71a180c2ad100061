"""Differential execution of one kernel launch: compile a variant and check it
against the interpreter (`compare.verify_build`, the one comparison path).

`compare(kernel, n, args, consts, variant)` returns the `Verdict`; it never
raises for a mismatch (the caller decides), but it does raise if the
interpreter rejects the launch or a lane claim (then there is no reference).
"""
from __future__ import annotations

from typing import Optional

from .compare import Verdict, verify_build

Comparison = Verdict      # the name this module's callers knew


def compare(kernel, n: int, args: dict, consts: Optional[dict] = None, variant="whole") -> Verdict:
    """The interpreter runs the very kernel object the backend compiled, checking
    the backend's lane claims (packet variants) as it goes; that run is the reference."""
    from ..backend.compiler import compile_kernel
    ck = compile_kernel(getattr(kernel, "ir", kernel), consts, variant, n=n, verify="never")
    verdict = verify_build(ck, n, args)
    if verdict.exception is not None:
        raise verdict.exception
    return verdict

"""Differential execution: one kernel launch in the interpreter and in a native
variant, on identical inputs, native buffers between guard bands.

`compare(kernel, n, args, consts, variant)` returns a `Comparison`; it never
raises for a mismatch (the caller decides), but it does raise if the
interpreter itself rejects the launch (then there is no reference).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..refimpl.interpreter import interpret
from ..refimpl.ir import ParamKind
from .checksum import bitwise_equal, first_difference
from .guard import GuardedSet


@dataclass
class Comparison:
    variant: str
    reference: dict                       # buffer name -> interpreter result
    native: dict                          # buffer name -> native result
    guards: dict                          # buffer name -> bands intact
    mismatches: dict = field(default_factory=dict)   # buffer -> (index, native, reference)
    error: Optional[str] = None           # a native error (e.g. checked-mode report)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mismatches and all(self.guards.values())

    def describe(self) -> str:
        if self.ok:
            return f"{self.variant}: bit-identical, guard bands intact"
        parts = []
        if self.error:
            parts.append(f"native error: {self.error}")
        for name, (i, a, b) in self.mismatches.items():
            parts.append(f"{name}[{i}]: native {a!r} vs reference {b!r}")
        parts += [f"guard band of {n} broken" for n, ok in self.guards.items() if not ok]
        return f"{self.variant}: " + "; ".join(parts)


def _ir(kernel):
    return getattr(kernel, "ir", kernel)


def compare(kernel, n: int, args: dict, consts: Optional[dict] = None, variant="whole") -> Comparison:
    """The interpreter runs the very kernel object the backend compiled, checking
    the backend's lane annotations (packet variants) as it goes."""
    from ..backend.compiler import compile_kernel
    from ..refimpl.annotations import AnnotationChecker
    k = _ir(kernel)
    buffers = {p.name for p in k.params if p.kind is ParamKind.BUFFER}
    ref = {name: np.array(a, copy=True) for name, a in args.items() if name in buffers}
    scalars = {name: v for name, v in args.items() if name not in buffers}
    ck = compile_kernel(k, consts, variant, n=n)
    checker = AnnotationChecker(ck.annotations, ck.annotation_lanes, ck.variant.label) if ck.annotations else None
    interpret(ck.kernel, n, {**ref, **scalars}, None, checker=checker)
    guarded = GuardedSet({name: args[name] for name in ref})
    error = None
    try:
        ck.launch(n, {**guarded.arrays, **scalars})
    except Exception as e:  # noqa: BLE001 - a native error is a finding, reported as such
        error = f"{type(e).__name__}: {e}"
    native = {name: a.reshape(np.shape(args[name])) for name, a in guarded.arrays.items()}
    mismatches = {}
    for name in ref:
        if not bitwise_equal(native[name], ref[name]):
            mismatches[name] = first_difference(native[name], ref[name])
    return Comparison(ck.variant.label, ref, native, guarded.status(), mismatches, error)

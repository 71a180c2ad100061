"""A native launch checked against the interpreter: what `compile_kernel(...).launch` and
`cohort.torch.kernel_op` do by default on the first launch of each new shape.

`verify="first"` (the default): the first launch of each shape - n and every buffer's
length - runs the interpreter on copies of the arguments first, then the native build on
the caller's buffers, and compares every buffer (DESIGN §3's equality,
refimpl/equality.py). A kernel the interpreter rejects (a race, an uninitialised shared
read, a write conflict, barrier divergence, an index out of bounds) raises the
interpreter's KernelRuntimeError before any native code runs: the caller's buffers are
untouched. A build that disagrees raises LaunchMismatch naming the kernel, the variant, the
buffer, the first differing element and both values. A shape that passed is not checked
again (later launches cost what an unchecked launch costs, plus a dictionary lookup).
`verify="always"` checks every launch; `verify="never"` none (timing loops, and cohort's
own paths that compare against the interpreter already: verify/compare.py). A fast-math
build is not exact by contract: its check runs the interpreter (a kernel breaking a rule
is reported) but compares no outputs.

The check costs one interpreter run and one copy of every buffer per new shape: the
interpreter runs a launch of 10^6 threads of an elementwise kernel in tens of
milliseconds to a second or more for kernels with loops and shared memory (measured:
docs/kernels.md). What it does not see: scalar values (a new value of a scalar argument
is the same shape), and races that only some thread schedules would expose natively
(the interpreter's one schedule reports every race the contract defines, so a race is
found whatever the native schedule was).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..refimpl.equality import differing, show
from ..refimpl.interpreter import KernelRuntimeError, interpret
from ..refimpl.ir import Kernel, ParamKind

VERIFY_MODES = ("first", "always", "never")


class LaunchMismatch(KernelRuntimeError):
    """A native build's output differs from the interpreter's (a backend bug: report it)."""


def check_mode(verify) -> str:
    if verify not in VERIFY_MODES:
        raise ValueError(f"verify must be one of {', '.join(map(repr, VERIFY_MODES))}, got {verify!r}")
    return verify


def verified_launch(kernel: Kernel, label: str, n: int, buffers: dict, scalars: dict, run_native: Callable,
                    exact: bool = True):
    """Interpret on copies of `buffers` (name -> NumPy array viewing the caller's memory), then
    `run_native()` (which updates those arrays), then compare; raises on any disagreement.
    `exact` False (a fast-math build, which may reassociate: DESIGN §3): the interpreter's
    run still reports a kernel that breaks a rule, but the outputs are not compared."""
    expected = {name: np.array(a, copy=True) for name, a in buffers.items()}
    interpret(kernel, n, {**expected, **scalars})        # raises the kernel's own error, if any
    run_native()
    if not exact:
        return
    for p in kernel.params:
        if p.kind is not ParamKind.BUFFER:
            continue
        got, want = buffers[p.name], expected[p.name]
        bad = differing(got, want)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            count = int(np.count_nonzero(bad))
            raise LaunchMismatch(
                f"kernel {kernel.name} [native, {label}], launch of n = {n}: buffer {p.name}[{i}] is "
                f"{show(np.ravel(got)[i].item(), got.dtype)}, the interpreter gives "
                f"{show(np.ravel(want)[i].item(), want.dtype)} ({count} element{'s' * (count != 1)} differ); "
                f"a backend bug - please report it with the kernel (verify='never' skips this check)")

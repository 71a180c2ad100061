"""The one comparison path: a compiled build, run between guard bands, against the interpreter.

Every place that checks native code - `cohort run` (opcheck), the fuzzer and
its corpus replays, `audit check`, the differential tests, the timed columns
- goes through `verify_build`:

1. the lane claims (packet builds): the interpreter runs the very kernel
   object the backend lowered, with the claims checked at the width the
   lowering worked in (`LaneClaims.width` = lanes x interleave, never the
   variant's lanes), and its outputs must equal the reference (the
   specialised kernel means what the original means). Without a given
   reference, this run *is* the reference;
2. the native launch, on copies of the inputs placed between guard bands
   (DESIGN §8);
3. the outputs: bit for bit (NaN == NaN, DESIGN §3) unless the caller states
   another agreement (fast-math variants: a ulp bound); buffers the kernel
   never stores to must come back unchanged; guard bands intact.

`verify_build` never raises for a finding: the `Verdict` says what happened.
After timed runs on the same buffers, `Verdict.recheck()` compares again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

import numpy as np

from ..refimpl.equality import show  # noqa: F401 - reports here spell values this way
from ..refimpl.interpreter import KernelRuntimeError, interpret
from ..refimpl.ir import ParamKind
from ..refimpl.launch_check import written_buffers
from .checksum import bitwise_equal, differing, first_difference
from .guard import GuardedSet
from .lane_check import LaneClaimChecker

# in the order a run can end: the first that applies is the verdict
STATUSES = ("ok", "annotation", "reference_error", "specialise_mismatch", "native_error", "mismatch", "guard")


class Difference(NamedTuple):
    index: int          # flat index of the first differing element
    native: object
    reference: object
    count: int          # elements that differ


@dataclass
class Verdict:
    label: str
    status: str = "ok"                    # one of STATUSES
    detail: str = ""                      # one line for a finding ("" when ok)
    reference: dict = field(default_factory=dict)    # buffer -> expected, shaped as given
    native: dict = field(default_factory=dict)       # buffer -> native result, shaped as given
    guards: dict = field(default_factory=dict)       # buffer -> bands intact
    mismatches: dict = field(default_factory=dict)   # buffer -> Difference
    error: Optional[str] = None           # the native launch's exception, as text
    claims_checked: int = 0               # lane claims checked on live lanes
    guarded: Optional[GuardedSet] = field(default=None, repr=False)   # the native run's buffers
    launch_result: object = field(default=None, repr=False)           # what `launch` returned
    exception: Optional[BaseException] = field(default=None, repr=False)   # the interpreter's
    launch_exception: Optional[BaseException] = field(default=None, repr=False)
    equal: Callable = field(default=bitwise_equal, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        if self.ok:
            return f"{self.label}: bit-identical, guard bands intact"
        return f"{self.label}: {self.detail}"

    def recheck(self) -> bool:
        """Outputs and guard bands again (after more launches on the same buffers)."""
        if self.guarded is None:
            return False
        return not mismatches(self.guarded, self.reference, self.equal) and self.guarded.intact()


def mismatches(guarded: GuardedSet, expected: dict, equal: Callable = bitwise_equal) -> dict:
    """buffer -> Difference for each guarded buffer that does not agree with `expected` (buffer -> array)."""
    out = {}
    for name, want in expected.items():
        want = np.asarray(want)
        got = guarded.arrays[name].reshape(want.shape)
        if equal(got, want):
            continue
        diff = first_difference(got, want)
        if diff is None:              # another agreement than bitwise failed: no element differs in bits
            diff = (0, np.ravel(got)[0].item(), np.ravel(want)[0].item())
        out[name] = Difference(*diff, int(np.count_nonzero(differing(got, want))))
    return out


def _default_launch(ck):
    from ..backend.compiler import CompiledKernel
    if isinstance(ck, CompiledKernel):     # this is the comparison: the launch's own check would repeat it
        return lambda n, args: ck.launch(n, args, verify="never")
    return lambda n, args: ck.launch(n, args)


def verify_build(ck, n: int, args: dict, reference: Optional[dict] = None, *, claims: bool = True,
                 equal: Callable = bitwise_equal, launch: Optional[Callable] = None,
                 label: Optional[str] = None) -> Verdict:
    """Check one compiled build (`compile_kernel`'s result) on one launch.

    args: the launch's buffers and scalars (not modified). reference: buffer -> expected
    output for the buffers to compare (None: the interpreter's run of the lowered kernel).
    claims: check the build's lane claims (an interpreter run of the lowered kernel).
    equal(native, expected) -> bool: the agreement (bitwise unless stated).
    launch(n, args): how to launch (default `ck.launch`); its result is kept.
    """
    kernel = ck.kernel
    label = label or ck.variant.label
    buffers = [p.name for p in kernel.params if p.kind is ParamKind.BUFFER]
    inputs = {name: np.array(args[name], copy=True) for name in buffers}
    scalars = {name: v for name, v in args.items() if name not in inputs}
    verdict = Verdict(label, equal=equal)
    lane_claims = ck.annotations if claims else None
    if reference is None or lane_claims:
        checker = LaneClaimChecker(lane_claims, label) if lane_claims else None
        interpreted = {name: a.copy() for name, a in inputs.items()}
        try:
            interpret(kernel, n, {**interpreted, **scalars}, None, checker=checker)
        except KernelRuntimeError as e:
            verdict.status = "annotation" if checker is not None and checker.violation else "reference_error"
            verdict.detail, verdict.exception = str(e), e
            return verdict
        verdict.claims_checked = checker.checked if checker is not None else 0
        if reference is None:
            reference = interpreted
        else:
            for name, want in reference.items():
                got = interpreted[name].reshape(np.shape(want))
                if not bitwise_equal(got, np.asarray(want)):
                    verdict.status = "specialise_mismatch"
                    verdict.detail = (f"the specialised kernel's interpretation differs from the original's at "
                                      f"{name}{list(first_difference(got, want))}")
                    return verdict
    expected = dict(reference)
    written = written_buffers(kernel)
    for name in buffers:              # what the kernel never stores to comes back as it went in
        if name not in expected and name not in written:
            expected[name] = inputs[name]
    verdict.reference = expected
    guarded = GuardedSet(inputs)
    verdict.guarded = guarded
    try:
        verdict.launch_result = (launch or _default_launch(ck))(n, {**guarded.arrays, **scalars})
    except Exception as e:  # noqa: BLE001 - a native error is a finding, reported as such
        verdict.error, verdict.launch_exception = f"{type(e).__name__}: {e}", e
    verdict.native = {name: a.reshape(np.shape(args[name])) for name, a in guarded.arrays.items()}
    verdict.mismatches = mismatches(guarded, expected, equal)
    verdict.guards = guarded.status()
    bands = [name for name, ok in verdict.guards.items() if not ok]
    diffs = [f"{name}[{d.index}]: native {show(d.native, guarded.arrays[name].dtype)} vs reference "
             f"{show(d.reference, guarded.arrays[name].dtype)} ({d.count} element{'s' * (d.count != 1)} differ)"
             for name, d in verdict.mismatches.items()]
    broken = [f"guard band broken around {name}" for name in bands]
    if verdict.error is not None:
        verdict.status, verdict.detail = "native_error", "; ".join([verdict.error] + diffs + broken)
    elif diffs:
        verdict.status, verdict.detail = "mismatch", "; ".join(diffs + broken)
    elif broken:
        verdict.status, verdict.detail = "guard", "guard band broken around " + ", ".join(bands)
    return verdict

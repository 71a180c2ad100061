"""The columns of a comparison, ready to time: each takes samples at its
suite's boundary and, after every round, checks its own output (and guard
bands) against the reference. A column that cannot run says why; it is then
`—` in the table, never a number.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..refimpl import ops
from ..verify.checksum import bitwise_equal, checksum
from ..verify.guard import GuardedSet
from .measure import calibrate_e2e, e2e_loop

POISON = np.float32(-1234.5)   # outputs are reset to this before each round: a skipped write shows


class Unavailable(Exception):
    """The column cannot run here (reason in the message)."""


class VariantColumn:
    kind = "variant"

    def __init__(self, op, shape, inputs, ref: np.ndarray, spec: str, boundary: str, workers: int):
        from ..backend.compiler import UnsupportedVariant, compile_kernel
        from ..backend.runtime import default_workers
        from ..backend.variant import parse_variant
        self.op, self.shape, self.ref = op, shape, ref
        variant = parse_variant(spec)
        if boundary == "runtime_e2e":
            variant = replace(variant, workers=workers or default_workers())
        elif variant.grain != "caller" or variant.workers != 1:
            raise ValueError(f"{spec}: the native-entry boundary times one thread on the caller")
        self.variant = variant
        launch = op.launch(shape)
        try:
            self.ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
        except UnsupportedVariant as e:
            raise Unavailable(str(e)) from None
        self.compile_seconds = self.ck.compile_seconds
        self.facts = self.ck.facts
        self.guarded = GuardedSet(ops.allocate(op, shape, inputs))
        self.args = {**self.guarded.arrays, **launch.scalars}
        self.n = launch.n
        self.out = self.guarded.arrays[op.output]
        self.prepared = self.ck.prepare(self.n, self.args)
        self.boundary = boundary
        if boundary == "native_entry":
            from ..backend import timer
            self.prepared.run()
            if self.prepared.fallback:   # the timed entry is the checked build: say so in the facts
                self.facts = {**self.facts, "fallback": self.prepared.fallback}
            self.iters = timer.calibrate_iters(self.prepared.entry, self.prepared.address)
            self._sample = lambda k: timer.time_entry(self.prepared.entry, self.prepared.address, self.iters, k)
        else:
            call = lambda: self.ck.launch(self.n, self.args)
            if variant.grain == "auto":   # time the steady state, after auto's trial launches
                from ..backend import runtime
                call()
                self.auto_choice = runtime.settle(self.ck._recent[next(reversed(self.ck._recent))],
                                                  variant.workers)
            self.iters = calibrate_e2e(call)
            self._sample = lambda k: e2e_loop(call, self.iters, k)
        self.verdict = "bitwise vs interpreter, guard bands intact"

    def reset(self):
        self.out[...] = POISON

    def sample(self, k: int) -> list:
        return [float(v) for v in self._sample(k)]

    def check(self) -> dict:
        y = self.out.reshape(self.ref.shape)
        guards = self.guarded.status()
        ok = bitwise_equal(y, self.ref) and all(guards.values())
        return {"output_checksum": checksum(y), "guards": guards, "agree": bool(ok)}


class InductorColumn:
    """TorchInductor at the suite's boundary (see inductor.py); not bit-exact, so
    its output is checked against the float64 oracle within a stated bound."""
    kind = "inductor"

    def __init__(self, op, shape, inputs, ref: np.ndarray, boundary: str, workers: int, spec: str = ""):
        try:
            from . import inductor
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise Unavailable(f"the Inductor column needs torch ({e})") from None
        reason = inductor.unavailable_reason()
        if reason:
            raise Unavailable(reason)
        self.op, self.shape = op, shape
        self.oracle = op.oracle(inputs)
        config = {}
        for item in filter(None, spec.split(",")):   # e.g. "simdlen=256": Inductor's vector width in bits
            key, _, value = item.partition("=")
            config[f"cpp.{key.strip()}"] = int(value)
        self.col = inductor.InductorColumn(op.name, shape, inputs, threads=1 if boundary == "native_entry"
                                           else (workers or None), inductor_config=config or None)
        self.compile_seconds = self.col.compile_seconds
        self.facts = {"inductor": True}
        self.boundary = boundary
        self.tol = inductor.REL_TOL_FACTOR * op.rel_tol
        if boundary == "native_entry":
            native = self.col.native()
            if native is None:
                raise Unavailable(self.col.native_reason)
            from ..backend import timer
            self.native = native
            self.iters = timer.calibrate_iters(native.fn_address, native.arg_address)
            self._sample = lambda k: timer.time_entry(native.fn_address, native.arg_address, self.iters, k)
            self._output = self.col.native_output
        else:
            call = self.col.e2e()
            self.iters = calibrate_e2e(call)
            self._sample = lambda k: e2e_loop(call, self.iters, k)
            self._output = self.col.e2e_output
        self.verdict = f"float64 oracle, rel err <= {self.tol:g}"

    def reset(self):
        self.col.reset_output(float(POISON))

    def sample(self, k: int) -> list:
        return [float(v) for v in self._sample(k)]

    def check(self) -> dict:
        y = np.asarray(self._output(), np.float32).reshape(self.oracle.shape)
        rel = ops.oracle_error(y, self.oracle)[1]
        return {"output_checksum": checksum(y), "guards": {}, "rel_err_vs_oracle": rel,
                "agree": bool(rel <= self.tol)}


def make_column(col, op, shape, inputs, ref, boundary: str, workers: int):
    if col.kind == "variant":
        return VariantColumn(op, shape, inputs, ref, col.spec, boundary, workers)
    if col.kind == "inductor":
        return InductorColumn(op, shape, inputs, ref, boundary, workers, col.spec)
    raise ValueError(f"unknown column kind {col.kind!r}")


def describe_unavailable(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__



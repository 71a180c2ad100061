"""The columns of a comparison, ready to time: each takes samples at its
suite's boundary and, after every round, checks its own output (and guard
bands) against the reference. A column that cannot run says why; it is then
`—` in the table, never a number.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from ..refimpl import ops
from ..verify.checksum import checksum
from ..verify.compare import mismatches
from ..verify.guard import GuardedSet
from .measure import calibrate_e2e, e2e_loop
from .unavailable import Unavailable

POISON = np.float32(-1234.5)   # outputs are reset to this before each round: a skipped write shows


class VariantColumn:
    """A variant at the suite's boundary: native_entry (the compiled entry in the
    native timer's loop, one thread), runtime_e2e (the runtime's native launch
    entry in the same loop: tasks, pool, wait) or python_api (CompiledKernel.launch
    from a Python loop)."""
    kind = "variant"

    def __init__(self, op, shape, inputs, ref: np.ndarray, spec: str, boundary: str, workers: int,
                 by_width: bool = False):
        from ..backend import target
        from ..backend.compiler import UnsupportedVariant, compile_kernel
        from ..backend.launch_policy import policy_of
        from ..backend.variant import parse_variant
        variant = parse_variant(spec)
        if by_width:   # the form cohort.torch runs at this column's lanes (Group.by_width)
            op = op.chosen_form(shape, variant.lanes, target.current().vector_bits)
        self.op, self.shape, self.ref = op, shape, ref
        if boundary in ("runtime_e2e", "python_api"):
            variant = replace(variant, workers=workers)
        elif not policy_of(variant).on_caller:
            raise ValueError(f"{spec}: the native-entry boundary times one thread on the caller")
        self.variant = variant
        self.is_auto = policy_of(variant).is_auto
        launch = op.launch(shape)
        try:
            self.ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n,
                                         verify="never")   # timed; the run is checked against ref
        except UnsupportedVariant as e:
            raise Unavailable(str(e)) from None
        self.compile_seconds = self.ck.compile_seconds
        self.guarded = GuardedSet(ops.allocate(op, shape, inputs))
        self.args = {**self.guarded.arrays, **launch.scalars}
        self.n = launch.n
        self.out = self.guarded.arrays[op.output]
        self.boundary = boundary
        self.choice = None
        self._once = None
        if boundary == "native_entry":
            from ..backend import timer
            self.prepared = self.ck.prepare(self.n, self.args)
            self.prepared.run()
            self._once = self.prepared.run
            if self.prepared.fallback:   # the timed entry is the checked build: say so in the facts
                self.facts = {**self.facts, "fallback": self.prepared.fallback}
            self._calibrate = lambda: timer.calibrate_iters(self.prepared.entry, self.prepared.address)
            self._sample = lambda k: timer.time_entry(self.prepared.entry, self.prepared.address, self.iters, k)
        elif boundary == "runtime_e2e":
            from ..backend import runtime
            self.prepared = self.ck.prepare(self.n, self.args)
            self.native = runtime.NativeLaunch(self.prepared, variant)   # an auto-style choice is made here
            self.choice = self.native.choice
            self.native.launch()
            self._once = self.native.launch
            self._calibrate = self.native.calibrate
            self._sample = lambda k: self.native.time(self.iters, k)
        elif boundary == "python_api":
            call = lambda: self.ck.launch(self.n, self.args)
            call()
            self._once = call
            self.prepared = self.ck.last_prepared
            if self.is_auto:
                self.rechoose()
            self._calibrate = lambda: calibrate_e2e(call)
            self._sample = lambda k: e2e_loop(call, self.iters, k)
        else:
            raise ValueError(f"unknown boundary {boundary!r}")
        self.facts = self.prepared.code.facts
        # the code that runs the launch (the whole-block build or the general one); an auto-style
        # column may run the lanes=1 build it chose instead, named by its choice
        self.code_digest = code_digest(self.prepared.code)
        self.iters = self._calibrate()
        self.verdict = "bitwise vs interpreter, guard bands intact"

    def calibrate(self) -> int:
        """Calls per sample for ~200 µs samples of this column alone."""
        return self._calibrate()

    def rechoose(self):
        """An auto-style column measures its choice anew (None for the others); returns it."""
        if not self.is_auto:
            return None
        from ..backend import runtime
        if self.boundary == "runtime_e2e":
            self.choice = self.native.choose_again()
        else:
            self.choice = runtime.choose_again(self.prepared, self.variant.workers, self.variant.grain).label
        return self.choice

    def reset(self):
        self.out[...] = POISON

    def sample(self, k: int) -> list:
        return [float(v) for v in self._sample(k)]

    def check(self) -> dict:
        if self.op.accumulates:
            # the timed calls added into the output again and again (the same work each call):
            # what a launch computes is checked on a zeroed output, by one more launch
            self.out[...] = 0
            self._once()
        y = self.out.reshape(self.ref.shape)
        guards = self.guarded.status()
        ok = not mismatches(self.guarded, {self.op.output: self.ref}) and all(guards.values())
        return {"output_checksum": checksum(y), "guards": guards, "agree": bool(ok)}


class PeerColumn:
    """What the peers (Inductor, eager torch) share: not bit-exact with cohort, so each round's
    output is checked against the float64 oracle within `tol`; `_calibrate`, `_sample` and
    `_output` are set by the subclass for its boundary."""
    is_auto = False
    code_digest = None
    choice = None

    def _start(self, op, shape, inputs, what: str):
        """torch present, the oracle and the bound; returns the inductor module."""
        try:
            from . import inductor
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise Unavailable(f"the {what} column needs torch ({e})") from None
        reason = inductor.unavailable_reason()
        if reason:
            raise Unavailable(reason)
        self.op, self.shape = op, shape
        self.oracle = op.expected(inputs, shape)
        self.tol = inductor.REL_TOL_FACTOR * op.rel_tol
        return inductor

    def calibrate(self) -> int:
        return self._calibrate()

    def rechoose(self):
        return None

    def sample(self, k: int) -> list:
        return [float(v) for v in self._sample(k)]

    def check(self) -> dict:
        y = np.asarray(self._output(), np.float32).reshape(self.oracle.shape)
        rel = ops.oracle_error(y, self.oracle)[1]
        return {"output_checksum": checksum(y), "guards": {}, "rel_err_vs_oracle": rel,
                "agree": bool(rel <= self.tol)}


class InductorColumn(PeerColumn):
    """TorchInductor at the suite's boundary (see inductor.py); not bit-exact, so
    its output is checked against the float64 oracle within a stated bound."""
    kind = "inductor"

    def __init__(self, op, shape, inputs, ref: np.ndarray, boundary: str, workers: int, spec: str = ""):
        inductor = self._start(op, shape, inputs, "Inductor")
        config = {}
        for item in filter(None, spec.split(",")):   # e.g. "simdlen=256": Inductor's vector width in bits
            key, _, value = item.partition("=")
            config[f"cpp.{key.strip()}"] = int(value)
        # runtime_e2e: its generated kernels with their OpenMP regions at `workers` threads, called
        # natively like the native entry (Inductor's own threading in place of cohort's pool)
        self.col = inductor.InductorColumn(op.name, shape, inputs, threads=1 if boundary == "native_entry"
                                           else (workers or None), inductor_config=config or None)
        self.compile_seconds = self.col.compile_seconds
        self.facts = {"inductor": True, "threads": self.col.threads}
        self.boundary = boundary
        if boundary in ("native_entry", "runtime_e2e"):
            native = self.col.native()
            if native is None:
                raise Unavailable(self.col.native_reason)
            from ..backend import timer
            self.native = native
            self._calibrate = lambda: timer.calibrate_iters(native.fn_address, native.arg_address)
            self._sample = lambda k: timer.time_entry(native.fn_address, native.arg_address, self.iters, k)
            self._output = self.col.native_output
        else:
            call = self.col.e2e()
            self._calibrate = lambda: calibrate_e2e(call)
            self._sample = lambda k: e2e_loop(call, self.iters, k)
            self._output = self.col.e2e_output
        self.iters = self._calibrate()
        self.verdict = f"float64 oracle, rel err <= {self.tol:g}"

    def reset(self):
        self.col.reset_output(float(POISON))


class EagerColumn(PeerColumn):
    """Eager PyTorch at the suite's boundary: ATen's kernels from native code at the native
    entry (eager.py), the Python call of the same functions at python_api. Not bit-exact
    with cohort, so checked against the float64 oracle like Inductor."""
    kind = "eager"

    def __init__(self, op, shape, inputs, ref: np.ndarray, boundary: str, workers: int):
        inductor = self._start(op, shape, inputs, "eager")
        from . import eager
        self.boundary = boundary
        self.compile_seconds = 0.0
        if boundary in ("native_entry", "runtime_e2e"):   # runtime_e2e: ATen's own threads
            try:
                self.entry = eager.EagerEntry(op.name, shape, inputs,
                                              threads=1 if boundary == "native_entry" else workers)
            except eager.EagerUnavailable as e:
                raise Unavailable(str(e)) from None
            from ..backend import timer
            e = self.entry
            self._calibrate = lambda: timer.calibrate_iters(e.fn_address, e.arg_address)
            self._sample = lambda k: timer.time_entry(e.fn_address, e.arg_address, self.iters, k)
            self._output = e.output
            self.facts = {"eager": "aten-native", "threads": e.threads, "aten_cpu_capability": e.capability}
        elif boundary in ("python_api", "torch_api"):
            torch = inductor.import_torch()
            torch.set_num_threads(int(workers or 1))
            fn = inductor.reference(op.name, shape)
            tensors = [torch.from_numpy(np.ascontiguousarray(inputs[n]).copy()) for n in op.inputs]
            last = {}

            def call():       # a plain call, as the other columns at this boundary are made
                last["y"] = fn(*tensors)
            call()
            self._calibrate = lambda: calibrate_e2e(call)
            self._sample = lambda k: e2e_loop(call, self.iters, k)
            self._output = lambda: last["y"].numpy()
            self.facts = {"eager": "python", "threads": torch.get_num_threads(),
                          "aten_cpu_capability": torch.backends.cpu.get_cpu_capability()}
        else:
            raise Unavailable(f"eager torch is not timed at the {boundary} boundary")
        self.iters = self._calibrate()
        self.verdict = f"float64 oracle, rel err <= {self.tol:g}"

    def reset(self):
        if self.boundary in ("native_entry", "runtime_e2e"):
            self.entry.poison(float(POISON))


def code_digest(code) -> str:
    """sha256 of a build's LLVM IR with its entry's name replaced (the name carries a hash of the
    variant's knobs, so two knob sets that produce the same code would differ by the name alone)."""
    text = code.llvm_ir.replace(code.symbol, "cohort_entry")
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def make_column(col, op, shape, inputs, ref, boundary: str, workers: int, by_width: bool = False):
    if col.kind == "variant":
        return VariantColumn(op, shape, inputs, ref, col.spec, boundary, workers, by_width)
    if col.kind == "inductor":
        return InductorColumn(op, shape, inputs, ref, boundary, workers, col.spec)
    if col.kind == "eager":
        return EagerColumn(op, shape, inputs, ref, boundary, workers)
    if col.kind == "torch":
        from .torch_column import TorchColumn
        return TorchColumn(op, shape, inputs, ref, boundary, workers, col.spec)
    raise ValueError(f"unknown column kind {col.kind!r}")


def describe_unavailable(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__



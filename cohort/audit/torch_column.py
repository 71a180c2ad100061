"""cohort.torch as a column of the PyTorch-boundary suite (issue 25): one Python call of the op
a PyTorch user writes, on torch tensors, against eager torch and torch.compile called the same
way (columns.py: EagerColumn, InductorColumn at the torch_api boundary).

Each operator's OpBinding (cohort/torch/binding.py) names the cohort.torch call that computes it
from the operator's inputs (same tensors, same order); `dispatch=True` calls `torch.ops.cohort.<op>` (the dispatcher, custom_op's
layers) instead of the `cohort.torch.<op>` wrapper, which calls the implementation directly
when nothing needs the dispatcher (plain tensors, no gradient, not tracing).
"""
from __future__ import annotations

import numpy as np

from ..verify.checksum import checksum
from .unavailable import Unavailable


def call_for(op_name: str, shape, tensors: list, dispatch: bool = False):
    """A no-argument callable running the cohort.torch op of `op_name` on `tensors` (its
    OpBinding, cohort/torch/binding.py, says which op and with which further arguments)."""
    from cohort.torch.binding import BINDINGS
    b = BINDINGS.get(op_name)
    if b is None or b.op is None:
        raise KeyError(f"cohort.torch has no op for operator {op_name}")
    return b.call(shape, tensors, dispatch)


class TorchColumn:
    """A cohort.torch op called from Python on torch tensors in the column's variant (spec:
    a variant spelling, "dispatch" for torch.ops.cohort); exact, so every round's output is
    compared bit for bit with the interpreter's."""
    kind = "torch"
    is_auto = False
    code_digest = None
    choice = None

    def __init__(self, op, shape, inputs, ref: np.ndarray, boundary: str, workers: int, spec: str = ""):
        from .measure import calibrate_e2e, e2e_loop
        if boundary != "torch_api":
            raise Unavailable("the cohort.torch column is timed at the torch_api boundary only")
        try:
            import torch

            import cohort.torch as ct
            from cohort.torch.binding import BINDINGS
        except ImportError as e:
            raise Unavailable(f"the cohort.torch column needs torch ({e})") from None
        if getattr(BINDINGS.get(op.name), "op", None) is None:
            raise Unavailable(f"cohort.torch has no op for {op.name}")
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        dispatch = "dispatch" in parts
        variant = ",".join(p for p in parts if p != "dispatch") or ct.DEFAULT_SPEC
        if workers > 1:
            variant += f",workers={workers},grain=auto"
        self.op, self.shape, self.ref = op, shape, ref
        self.boundary = boundary
        self.compile_seconds = 0.0
        torch.set_num_threads(max(1, int(workers)))
        tensors = [torch.from_numpy(np.ascontiguousarray(inputs[n]).copy()) for n in op.inputs]
        # the variant is chosen around each sample's loop of calls (not per call: a `with` per
        # call would time the context switch too), and never left set for the process
        self._in = lambda: ct.variant(self.variant)
        previous = ct.current_variant()
        self.variant = ct.variant(variant).variant     # (parsed and checked as cohort.torch does)
        ct.variant(previous)
        fn = call_for(op.name, shape, tensors, dispatch)
        last = {}

        def call():
            last["y"] = fn()
        before = ct.stats()
        with self._in():
            call()        # the build, outside the timing
        after = ct.stats()
        self.compile_seconds = float(after.get("build_seconds", 0.0) - before.get("build_seconds", 0.0))
        self._last = last
        self._calibrate = lambda: self._within(calibrate_e2e, call)
        self._sample = lambda k: e2e_loop(call, self.iters, k)
        self.facts = {"cohort_torch": "torch.ops.cohort" if dispatch else "cohort.torch",
                      "variant": self.variant.label, "threads": int(workers),
                      "builds": after["builds"] - before["builds"]}
        self.iters = self._calibrate()
        self.verdict = "bitwise vs interpreter"

    def calibrate(self) -> int:
        return self._calibrate()

    def rechoose(self):
        return None

    def reset(self):
        y = self._last.get("y")
        if y is not None:
            y.fill_(-1234.5 if y.is_floating_point() else -(1 << 31))

    def _within(self, fn, *args):
        with self._in():
            return fn(*args)

    def sample(self, k: int) -> list:
        return [float(v) for v in self._within(self._sample, k)]

    def check(self) -> dict:
        y = self._last["y"].numpy().reshape(self.ref.shape)
        ok = y.dtype == self.ref.dtype and np.array_equal(y.view(np.uint8), self.ref.view(np.uint8))
        return {"output_checksum": checksum(y), "guards": {}, "agree": bool(ok)}


__all__ = ["TorchColumn", "call_for"]

"""One fuzz case, in this process: the interpreter's reference, then each variant
compiled and checked through the one comparison path (compare.verify_build).

The records are plain JSON (they cross process boundaries): a discard
reason if the interpreter rejects the launch, else per variant a status
(FAILURE_STATUSES, "ok" or "unsupported"), the outputs' checksum (YARPGen's
bins), the lane claims by kind, the lowering's counts and the pool's tasks
(coverage).
"""
from __future__ import annotations

import hashlib
import time
from collections import Counter

import numpy as np

from ..refimpl.ir import ParamKind
from .checksum import canonical_bytes
from .compare import verify_build
from .gen import make_args
from .matrix import pool_split

FAILURE_STATUSES = ("mismatch", "annotation", "guard", "native_error", "compile_error", "crash", "timeout",
                    "reference_error", "specialise_mismatch")
REJECTIONS = ("out of bounds", "write conflict", "races", "division by zero", "remainder by zero", "shift amount",
              "uninitialised", "barrier divergence")


def buffer_names(kernel) -> list:
    return [p.name for p in kernel.params if p.kind is ParamKind.BUFFER]


def outputs_checksum(kernel, buffers: dict) -> str:
    h = hashlib.sha256()
    for name in buffer_names(kernel):
        h.update(name.encode() + b"\0")
        h.update(canonical_bytes(np.asarray(buffers[name])))
    return "sha256:" + h.hexdigest()[:32]


def reference(case):
    """(buffers, None) or (None, (reason, message)) when the interpreter rejects the case."""
    from ..refimpl.errors import KernelError
    from ..refimpl.interpreter import KernelRuntimeError, interpret
    args = make_args(case)
    try:
        interpret(case.kernel, case.n, args, case.consts)
    except KernelRuntimeError as e:
        msg = str(e)
        return None, (next((r for r in REJECTIONS if r in msg), "runtime error"), msg)
    except KernelError as e:
        return None, ("invalid kernel", str(e))
    return {name: args[name] for name in buffer_names(case.kernel)}, None


def claim_summary(claims) -> tuple:
    """({site:lanes: count}, {mode: count}) of a build's lane claims."""
    access, effects = Counter(), Counter()
    for claim in claims.values():
        access[claim.summary] += 1
        for m in claim.modes:
            effects[m.value] += 1
    return dict(access), dict(effects)


def run_variant(case, spec: str, ref: dict) -> dict:
    """Compile `spec`, check it against `ref` (verify_build: lane claims at the lowering's
    width, guarded native run, bitwise outputs). Never raises."""
    from ..backend.compiler import UnsupportedVariant, compile_kernel
    from ..backend.variant import parse_variant
    rec = {"variant": spec, "status": "ok"}
    t0 = time.perf_counter()
    try:
        ck = compile_kernel(case.kernel, case.consts, parse_variant(spec), n=case.n)
    except UnsupportedVariant as e:
        return {**rec, "status": "unsupported", "detail": str(e)}
    except Exception as e:  # noqa: BLE001 - a compiler error is a finding
        return {**rec, "status": "compile_error", "detail": f"{type(e).__name__}: {e}"}
    rec["compile_seconds"] = round(time.perf_counter() - t0, 4)
    rec["access"], rec["effects"] = claim_summary(ck.annotations)
    counts = getattr(ck, "lowering_counts", {})
    rec["lowering"] = {k: int(v) for k, v in counts.items()
                       if isinstance(v, (int, np.integer)) and v and k != "interleave"}
    if counts.get("interleave", 1) > 1:
        rec["lowering"]["interleaved_packets"] = 1
    # on the worker pool (ck.launch below takes it, as a user's launch does): how many tasks,
    # and whether the last one is partial (the task a bad split loses)
    nblocks = -(-case.n // ck.kernel.block)
    split = pool_split(ck.variant, nblocks)
    if split is not None:
        rec["pool"] = {"grain": split[0], "tasks": split[1], "workers": ck.variant.workers,
                       "partial_last_task": nblocks % split[0] != 0}
    verdict = verify_build(ck, case.n, make_args(case), ref, label=spec)
    if verdict.claims_checked:
        rec["annotation_checks"] = verdict.claims_checked
    if verdict.status == "ok" or verdict.status in ("mismatch", "guard"):
        rec["checksum"] = outputs_checksum(case.kernel, verdict.native)
    if not verdict.ok:
        rec.update(status=verdict.status, detail=verdict.detail)
    return rec


def execute(case, variants: list, emit=None) -> dict:
    """The reference and every listed variant, in this process.

    Returns {"discard": None | {"reason", "message"}, "reference_checksum",
    "variants": {spec: record}}; `emit(event)` sees progress events.
    """
    emit = emit or (lambda ev: None)
    ref, why = reference(case)
    if ref is None:
        out = {"discard": {"reason": why[0], "message": why[1][:500]}, "variants": {}}
        emit({"event": "ref", **out})
        return out
    out = {"discard": None, "reference_checksum": outputs_checksum(case.kernel, ref), "variants": {}}
    emit({"event": "ref", "discard": None, "reference_checksum": out["reference_checksum"]})
    for spec in variants:
        emit({"event": "begin", "variant": spec})
        rec = run_variant(case, spec, ref)
        out["variants"][spec] = rec
        emit({"event": "result", "record": rec})
    return out

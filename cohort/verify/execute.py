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
import re
import time
from collections import Counter
from typing import Optional

import numpy as np

from .. import knobs
from ..refimpl.ir import ParamKind
from .checksum import canonical_bytes
from .compare import verify_build
from .gen import make_args
from .matrix import pool_split

FAILURE_STATUSES = ("mismatch", "annotation", "guard", "native_error", "compile_error", "crash", "timeout",
                    "reference_error", "specialise_mismatch", "error_mismatch")
# Most programs compile quickly (jit.quick_compiles): a drawn share with no LLVM optimisation at
# all (level 0, about a quarter of a user's build's compile time), a share with the O1 pipeline
# (level 1, about half), both with the fast code generator; the rest as a user's build is (O3),
# so what only the optimisations do (contraction of `contract`-flagged operations, InstCombine's
# folds, the optimising instruction selection) is still exercised. docs/fuzzing.md measures it;
# the shares are knobs (knobs.FUZZ_O3_PERCENT, FUZZ_O0_PERCENT) for measuring.


def program_key(case) -> str:
    """A digest of everything that decides a run of `case` (its printed kernel, launch, buffers,
    scalars and inputs seed): the same in every process."""
    from ..refimpl.printer import format_kernel
    return hashlib.sha256(f"{format_kernel(case.kernel)}\n{case.describe()}".encode()).hexdigest()


def compile_level(case) -> int:
    """The LLVM level `case` compiles at (jit.quick_compiles): a pure function of the case (every
    process, every replay)."""
    from ..backend.jit import FULL
    r = int(program_key(case)[:8], 16) % 100
    return FULL if r < knobs.FUZZ_O3_PERCENT.get() else 0 if r >= 100 - knobs.FUZZ_O0_PERCENT.get() else 1


# The target-dependent lowering switches (lower_ops: each host takes one side by itself: FMA
# instructions or not, microcoded masked stores or not, F16C or not). A campaign draws each per
# program, as it draws the variants, so that every host runs both sides; a switch set in the
# environment stands. They are part of each build's CodegenConfig, whose key is the compile key.
SWITCHES = ((knobs.FMA.name, ("hardware", "software")), (knobs.MASKED_STORE.name, ("intrinsic", "dispatch")),
            (knobs.F16.name, ("hardware", "software")))


def lowering_switches(case) -> dict:
    """{environment variable: value} for `case`: a pure function of the case (every process,
    every replay), but for the switches the environment sets."""
    key = program_key(case)
    return {env: values[int(key[8 + 2 * i:10 + 2 * i], 16) % 2] for i, (env, values) in enumerate(SWITCHES)
            if knobs.KNOBS[env].raw() in (None, "auto")}


def switched(settings: dict):
    """The lowering switches `settings` for the compiles inside, in this thread (knobs.overridden:
    the process environment is not written)."""
    return knobs.overridden(settings)


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


# An out-of-bounds buffer access is an error with the same facts in the interpreter and in
# every build that checks (DESIGN §3, §5.1): kernel, statement, load or store, index, thread and
# block. The interpreter names the buffer and its length too; native code does not.
_OOB = re.compile(r"^kernel (?P<kernel>\S+), (?P<loc>.*): (?P<what>load|store) index (?P<index>-?\d+) out of "
                  r"bounds(?: for buffer \S+ \(length \d+\))? \(thread (?P<thread>-?\d+), block (?P<block>-?\d+)\)")


def error_facts(message: str):
    """(kernel, statement, load|store, index, thread, block) of a buffer's out-of-bounds error,
    or None for any other message."""
    m = _OOB.match(message)
    return None if m is None else tuple(m.group(k) for k in ("kernel", "loc", "what", "index", "thread", "block"))


def error_checksum(facts) -> str:
    return "error:" + hashlib.sha256(repr(facts).encode()).hexdigest()[:24]


_last_reference: list = []      # [(case key, result)]: a worker runs one program's variants in turn


def reference(case):
    """(buffers, None) or (None, (reason, message)) when the interpreter rejects the case (the
    last case's answer is kept: the fuzz workers get a program's variants one at a time)."""
    key = program_key(case)
    if _last_reference and _last_reference[0][0] == key:
        return _last_reference[0][1]
    r = _reference(case)
    _last_reference[:] = [(key, r)]
    return r


def _reference(case):
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
    from ..backend.variant import VariantError, parse_variant
    rec = {"variant": spec, "status": "ok"}
    variant = parse_variant(spec)     # a spec of the matrix: one that does not parse is our bug
    t0 = time.perf_counter()
    try:
        ck = compile_kernel(case.kernel, case.consts, variant, n=case.n, verify="never")   # verify_build compares
    except (UnsupportedVariant, VariantError) as e:
        # VariantError: the variant does not fit this kernel (lanes x interleave past its block),
        # as when a shrink makes the block smaller than a failing variant's packets
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
    if getattr(ck.last_prepared, "fallback", None) and not ck.variant.checked:
        # a legal program whose proof failed: its safe build's body never ran (the coverage
        # report counts these runs; a proof that cannot read the generator's indices hides bodies)
        rec["lowering"]["proof_fallback"] = 1
    if verdict.claims_checked:
        rec["annotation_checks"] = verdict.claims_checked
    if verdict.ok:        # the same build through the runtime's native launch entry (no compile)
        verdict = verify_build(ck, case.n, make_args(case), ref, claims=False, launch=runtime_entry(ck),
                               label=spec + " [runtime entry]")
    if verdict.status == "ok" or verdict.status in ("mismatch", "guard"):
        rec["checksum"] = outputs_checksum(case.kernel, verdict.native)
    if not verdict.ok:
        rec.update(status=verdict.status, detail=verdict.detail)
    return rec


def runtime_entry(ck):
    """launch(n, args) through the runtime's native launch entry (runtime.NativeLaunch: the
    runtime-E2E boundary, DESIGN §6), whose own caller/pool/grain decision is native code: the
    variant's grain and workers as the record's policy."""
    from ..backend.runtime import NativeLaunch

    def launch(n, args):
        NativeLaunch(ck.prepare(n, args), ck.variant).launch()
    return launch


def run_variant_error(case, spec: str, facts) -> dict:
    """An expected-error program (the interpreter reports an out-of-bounds buffer access):
    `spec` must report the same error (`error_facts`), leave every guard band intact and touch
    nothing outside the buffers. An unsafe build checks nothing by contract: not run."""
    from ..backend.compiler import UnsupportedVariant, compile_kernel
    from ..backend.jit import level, quick_compiles
    from ..backend.variant import VariantError, parse_variant
    from ..refimpl.interpreter import KernelRuntimeError
    from .guard import GuardedSet
    rec = {"variant": spec, "status": "ok", "expected_error": True}
    variant = parse_variant(spec)
    if variant.unsafe:
        return {**rec, "status": "unsupported", "detail": "an unsafe build does not check: out of bounds is undefined"}
    t0 = time.perf_counter()
    try:
        # A safe build only proves here: its proof fails for the erring access (nothing runs, and
        # the checked twin, compiled at the program's level when the launch asks for it, reports
        # the error), or the access is data-dependent and its per-access check reports it. So it
        # is compiled without optimisation (the proof always is), saving the LLVM time of a body
        # no launch of the program runs. A checked variant's build is the one that reports.
        with quick_compiles(level() if variant.checked else 0):
            ck = compile_kernel(case.kernel, case.consts, variant, n=case.n, verify="never")   # built for n
    except (UnsupportedVariant, VariantError) as e:
        return {**rec, "status": "unsupported", "detail": str(e)}
    except Exception as e:  # noqa: BLE001 - a compiler error is a finding
        return {**rec, "status": "compile_error", "detail": f"{type(e).__name__}: {e}"}
    rec["compile_seconds"] = round(time.perf_counter() - t0, 4)
    rec["access"], rec["effects"] = claim_summary(ck.annotations)
    nblocks = -(-case.n // ck.kernel.block)
    split = pool_split(ck.variant, nblocks)
    if split is not None:
        rec["pool"] = {"grain": split[0], "tasks": split[1], "workers": ck.variant.workers,
                       "partial_last_task": nblocks % split[0] != 0}
    args = make_args(case)
    buffers = buffer_names(case.kernel)
    scalars = {name: v for name, v in args.items() if name not in buffers}
    for how, launch in (("", ck.launch), (" [runtime entry]", runtime_entry(ck))):
        guarded = GuardedSet({name: args[name] for name in buffers})
        got = None
        try:
            launch(case.n, {**guarded.arrays, **scalars})
            what = "ran to completion"
        except KernelRuntimeError as e:
            got = error_facts(str(e))
            what = str(e)
        except Exception as e:  # noqa: BLE001 - anything else is a finding
            what = f"{type(e).__name__}: {e}"
        broken = [name for name, ok in guarded.status().items() if not ok]
        if got != facts or broken:
            break
    if got == facts and not broken:
        rec["checksum"] = error_checksum(got)
        return rec
    detail = f"expected the interpreter's out-of-bounds error {facts}; native{how}: {what[:300]}"
    if broken:
        detail += "; guard band broken around " + ", ".join(broken)
    rec.update(status="error_mismatch", detail=detail, checksum=error_checksum(got) if got else None)
    return rec


def execute(case, variants: list, emit=None, full: Optional[bool] = None) -> dict:
    """The reference and every listed variant, in this process, compiled at O3 (`full`), at O1
    (`full=False`) or at the case's drawn level (default: `compile_level(case)`).

    Returns {"discard": None | {"reason", "message"}, "reference_checksum",
    "variants": {spec: record}}; `emit(event)` sees progress events.
    """
    from ..backend.jit import FULL, quick_compiles
    if full is not None:
        with quick_compiles(FULL if full else 1):
            return _execute(case, variants, emit)
    settings = lowering_switches(case)       # the fuzzer's draw, as its compile level
    with quick_compiles(compile_level(case)), switched(settings):
        out = _execute(case, variants, emit, settings)
    return out


def _execute(case, variants: list, emit=None, switches: Optional[dict] = None) -> dict:
    emit = emit or (lambda ev: None)
    if switches:                     # a failing record names the switches it was built under
        inner = emit

        def emit(ev):
            rec = ev.get("record")
            if rec is not None and rec.get("status") in FAILURE_STATUSES:
                rec["switches"] = dict(switches)
                rec["detail"] = (rec.get("detail") or "") + " [" + " ".join(
                    f"{k}={v}" for k, v in sorted(switches.items())) + "]"
            inner(ev)
    ref, why = reference(case)
    facts = error_facts(why[1]) if ref is None else None
    if facts is not None:           # an expected-error program: every variant reports the same error
        out = {"discard": None, "reference_checksum": error_checksum(facts), "expected_error": why[1][:500],
               "variants": {}}
        return _run_variants(out, variants, emit, lambda spec: run_variant_error(case, spec, facts))
    if ref is None:
        out = {"discard": {"reason": why[0], "message": why[1][:500]}, "variants": {}}
        emit({"event": "ref", **out})
        return out
    out = {"discard": None, "reference_checksum": outputs_checksum(case.kernel, ref), "variants": {}}
    return _run_variants(out, variants, emit, lambda spec: run_variant(case, spec, ref))


def _run_variants(out: dict, variants: list, emit, run) -> dict:
    """Announce the reference, then run each variant (`run(spec)` -> its record) into `out`."""
    emit({"event": "ref", "discard": None, "reference_checksum": out["reference_checksum"]})
    for spec in variants:
        emit({"event": "begin", "variant": spec})
        rec = run(spec)
        out["variants"][spec] = rec
        emit({"event": "result", "record": rec})
    return out

"""One operator, one shape, one variant, checked: the core of `cohort run`.

The interpreter gives the reference; the float64 oracle bounds the
reference's own error; a native variant runs on guarded copies of the same
inputs and must match the reference bit for bit (DESIGN §3), guard bands
intact. Timing (native-entry boundary) is taken only after that, and the
outputs and bands are checked again after the timed runs.
"""
from __future__ import annotations

import json
import os
import time
from typing import Optional

import numpy as np

from ..refimpl import ops
from .checksum import bitwise_equal, checksum, first_difference, row_ulps
from .compare import verify_build


def launch_path(ck, variant, n: int, choice=None) -> str:
    """The route a launch of `variant` takes (backend/launch_policy.py), in words (what
    `cohort run` checked and timed)."""
    from ..backend.launch_policy import Auto, Caller, policy_of
    nblocks = -(-int(n) // ck.kernel.block)
    route = policy_of(variant).route(nblocks)
    if type(route) is Caller:
        if route.grain is None:
            return f"calling thread ({route.why})"
        return f"runtime: one task of {nblocks} blocks (grain {route.grain}), run on the calling thread"
    if type(route) is Auto:
        label = choice.label if choice is not None else "not launched yet"
        return f"runtime {route.policy} over {route.workers} workers, {nblocks} blocks: chose {label}"
    return (f"runtime worker pool: {route.workers} participants, tasks of {route.grain} blocks "
            f"({route.tasks} tasks of {nblocks} blocks)")


def compile_operator(op, launch, variant):
    """The operator's build for `variant`. A `block` knob re-blocks the kernel; an operator
    whose meaning depends on its block (one block per row, a block reduction) would then
    launch other threads and reduce in another tree than its reference: refused, by name."""
    from ..backend.compiler import UnsupportedVariant, compile_kernel
    block = op.kernel.ir.block
    if variant.block not in (None, block) and ops.block_dependent(op.kernel):
        raise UnsupportedVariant(
            f"{op.name} ({op.form} form) runs blocks of {block} threads (its rows are blocks and "
            f"it reduces over the block); block={variant.block} would change what it computes, "
            f"so operators keep their block (the block knob re-blocks your own kernels)")
    return compile_kernel(op.kernel, launch.consts, variant, n=launch.n, verify="never")   # compared below


def _checked_launches(ck, variant, n: int, args: dict, out_buf, ref, op) -> dict:
    """Launch through `ck.launch`; for grain=auto, every trial launch until auto has
    chosen and one launch on its choice, each from a poisoned output, each checked
    (a trial is a real launch: a wrong candidate must not hide behind a later one)."""
    ck.launch(n, args)
    if not ck.policy.is_auto:
        return {"count": 1, "all_agree": True, "choice": None}
    from ..backend import runtime
    choice = runtime.choose(ck.prepare(n, args), ck.policy.workers, ck.policy.grain)   # shared by (entry, n, workers, policy)
    ok, count = _same(out_buf, ref, op, variant), 1
    while count < 1000:
        done = choice.chosen is not None
        out_buf[...] = np.float32(np.nan)
        ck.launch(n, args)
        count += 1
        ok = ok and _same(out_buf, ref, op, variant)
        if done:
            break
    return {"count": count, "all_agree": bool(ok), "choice": choice}


def _same(out_buf, ref, op, variant) -> bool:
    y = out_buf.reshape(ref.shape)
    return bool(row_ulps(y, ref) <= op.fast_math_ulps if variant.fast_math else bitwise_equal(y, ref))


def reference(op, shape, seed: int):
    """(inputs, interpreter output, seconds)."""
    inputs = op.make_inputs(shape, seed)
    t0 = time.perf_counter()
    y = ops.run_reference(op, shape, inputs)
    return inputs, y, time.perf_counter() - t0


def check_operator(op, shape, seed: int, variant, timing: bool = False, samples: int = 21,
                   dump: Optional[str] = None) -> dict:
    """Run `variant` (a backend Variant, or None for the interpreter) and check it. `dump`: a
    folder to write the build's IR, assembly, kernel, code facts and region plan into, or
    "regions" for the region plan's lines in the result (key "regions")."""
    inputs, ref, ref_seconds = reference(op, shape, seed)
    abs_err, rel_err = ops.oracle_error(ref, op.expected(inputs, shape))
    out = {
        "op": op.name, "shape": ops.fmt_shape(shape), "seed": seed,
        "input_checksums": {n: checksum(a) for n, a in inputs.items()},
        "reference_checksum": checksum(ref), "interpreter_seconds": round(ref_seconds, 6),
        "max_abs_err_vs_oracle": abs_err, "max_rel_err_vs_oracle": rel_err, "oracle_rel_tol": op.rel_tol,
        "reference_within_oracle_bound": rel_err <= op.rel_tol,
    }
    if variant is None:
        out.update(variant="ref", agree=out["reference_within_oracle_bound"], checksum=out["reference_checksum"],
                   agreement=f"interpreter vs float64 oracle, rel_tol {op.rel_tol:g}", output=ref)
        return out

    launch = op.launch(shape)
    ck = compile_operator(op, launch, variant)
    if variant.fast_math:   # never bitwise: within the operator's stated bound (DESIGN §3)
        equal = lambda y, r: row_ulps(y, r) <= op.fast_math_ulps   # noqa: E731
        agreement = f"fast math: within {op.fast_math_ulps:g} ulps of each row's max |reference|"
    else:
        equal, agreement = bitwise_equal, "bitwise vs interpreter (NaN == NaN)"
    # The check launches exactly as the variant's knobs say: CompiledKernel.launch,
    # which goes through the runtime's pool for grain/workers (DESIGN §5, §6).
    verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars}, {op.output: ref},
                           claims=False, equal=equal,
                           launch=lambda n, args: _checked_launches(ck, variant, n, args, args[op.output], ref, op))
    if verdict.launch_exception is not None:
        raise verdict.launch_exception
    launches = verdict.launch_result
    args = {**verdict.guarded.arrays, **launch.scalars}
    y = verdict.native[op.output].reshape(ref.shape).copy()
    bitwise = bitwise_equal(y, ref)
    diff = first_difference(y, ref)
    if variant.fast_math:
        out["row_ulps_vs_interpreter"] = row_ulps(y, ref)
    out.update(
        variant=variant.label, variant_knobs=variant.name, checksum=checksum(y), output=y,
        agree=bool(verdict.ok and launches["all_agree"]), bitwise_equal=bool(bitwise),
        agreement=agreement, guard_bands=verdict.guards,
        launch_path=launch_path(ck, variant, launch.n, launches["choice"]),
        launches_checked=launches["count"], launches_agree=launches["all_agree"],
        compile_seconds=round(ck.compile_seconds, 6), facts=ck.facts,
        compile_cached=bool(getattr(ck.code.linked, "cached", False)),   # LLVM's output read from disk
    )
    if not verdict.ok:
        out["verdict"] = verdict.detail
    if diff is not None:
        out["first_difference"] = {"index": diff[0], "native": diff[1], "reference": diff[2]}
    if timing and out["agree"]:
        if ck.policy.on_caller:
            # the launch path is the compiled entry on the calling thread: time that entry
            from ..backend import timer
            boundary = "native_entry"
            prepared = ck.prepare(launch.n, args)
            iters = timer.calibrate_iters(prepared.entry, prepared.address)
            ns = timer.time_entry(prepared.entry, prepared.address, iters, samples)
            prepared.raise_error()
        else:
            from ..backend import runtime
            boundary = "runtime_e2e"   # the runtime's native launch entry in the native timer's loop
            native = runtime.NativeLaunch(ck.prepare(launch.n, args), variant)
            iters = native.calibrate()
            ns = native.time(iters, samples)
            if native.choice:
                out["auto_choice"] = native.choice
            out["launch_path"] = launch_path(ck, variant, launch.n, launches["choice"])
        still = verdict.recheck()
        out.update(time_us=float(np.median(ns)) / 1e3, boundary=boundary, timing_iters=iters,
                   timing_samples_us=[round(v / 1e3, 4) for v in ns], agree_after_timing=bool(still))
        out["agree"] = bool(out["agree"] and still)
    if dump == "regions":      # printed by the caller, nothing written (cohort run --dump regions)
        out["regions"] = ck.region_plan.describe()
    elif dump:
        os.makedirs(dump, exist_ok=True)
        base = os.path.join(dump, ck.symbol)
        with open(base + ".ll", "w") as f:
            f.write(ck.llvm_ir)
        with open(base + ".s", "w") as f:
            f.write(ck.assembly())
        with open(base + ".kernel.py", "w") as f:
            f.write(str(ck.kernel) + "\n")
        with open(base + ".facts.json", "w") as f:
            json.dump(ck.facts, f, indent=1)
        with open(base + ".regions.txt", "w") as f:     # what runs per packet, what per block, what crosses
            f.write("\n".join(ck.region_plan.describe()) + "\n")
        out["dumped"] = [base + ext for ext in (".ll", ".s", ".kernel.py", ".facts.json", ".regions.txt")]
    return out

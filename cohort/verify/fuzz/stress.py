"""The stress check: atomic updates under pool workers that really run at once.

A campaign's launches are small (at most a few hundred threads): the pool's first worker
finishes before a second one starts, so an atomic update lowered as a plain load, op and
store (a lost-update race) never shows, whatever the outputs are compared with. For every
program with integer atomic updates of a global buffer, the campaign therefore also runs a
*stress program*: the generator's program of a seed taken from the program's key, drawn at
a launch of STRESS_THREADS threads (`generate(..., stress=True)`: the same generator, the
same guarantees - in bounds, race-free but for atomics - at that size, with one or two
pieces of integer atomics on global buffers and no edge access). One build (STRESS_SPEC) is
launched on the calling thread alone and on the pool (grain 1, two workers), on the same
inputs, and every buffer must be identical bit for bit: integer atomics are commutative and
associative (wrapping add, sub, and, or, xor, min, max), so every interleaving leaves the
same memory. It is a differential check between two launches of one build, not against the
interpreter (too slow at this size); the single-thread launch of that build is what every
ordinary program checks against the interpreter. The record is a variant run named STRESS
(status `mismatch` when the two differ), with the launch times: the pool launch must take
long enough for the second worker to start (measured on this VM: see docs/fuzzing.md).
"""
from __future__ import annotations

import time

import numpy as np

from ...refimpl.ir import Atomic, Shared, walk_stmts

STRESS = "stress"                       # the pseudo-variant's name in a program's variant list
STRESS_THREADS = 1 << 19               # docs/fuzzing.md, 'a lighter stress check': 2^19 and 2^20 threads caught the
                                        # same lost-update plants (atomic_plain 7 of 12 stress programs, 6 of
                                        # 12 with both cores busy) at half the CPU time (0.9 s against 2.0 clean)
STRESS_SPEC = "lanes=8,full_packet=on,predicated=on,private=cohort"
POOL_POLICY = ",grain=1,workers=2"
POOL_LAUNCHES = 16                      # the race is timing-dependent: several launches, stop at a difference


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a).reshape(-1)).view(np.uint8)


def needs_stress(case) -> bool:
    """Whether the program updates a global buffer atomically with integers."""
    body = case.kernel.body
    shared = {s.name for s in body if isinstance(s, Shared)}
    return any(isinstance(s, Atomic) and s.target not in shared and s.value.dtype.is_int
               for s in walk_stmts(body))


def stress_case(case):
    """The stress program that stands for `case` (the same in every process)."""
    from ..corpus import case_key
    from ..gen import generate
    seed = int(case_key(case)[:12], 16)
    return generate(seed, max_stmts=6, sizes=(STRESS_THREADS,), blocks=(min(case.block, 32),), stress=True)


def run_stress(case) -> dict:
    """The stress record of `case` (never raises: an error is a finding of kind compile_error)."""
    from ...backend.compiler import compile_kernel
    from ..gen import make_args
    rec = {"variant": STRESS, "status": "ok"}
    sc = stress_case(case)
    try:
        single = compile_kernel(sc.kernel, sc.consts, STRESS_SPEC, n=sc.n, verify="never")
        pool = compile_kernel(sc.kernel, sc.consts, STRESS_SPEC + POOL_POLICY, n=sc.n, verify="never")
    except Exception as e:  # noqa: BLE001 - a compiler error is a finding
        return {**rec, "status": "compile_error", "detail": f"{STRESS}: {type(e).__name__}: {e}"}
    fresh = make_args(sc)
    want = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in fresh.items()}
    t0 = time.perf_counter()
    try:
        single.launch(sc.n, want)
    except Exception as e:  # noqa: BLE001 - nothing to compare with: not a finding
        return {**rec, "skipped": f"{type(e).__name__}: {str(e)[:200]}"}
    times = {"single": round(time.perf_counter() - t0, 4), "pool": []}
    try:
        for _ in range(POOL_LAUNCHES):
            got = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in fresh.items()}
            t0 = time.perf_counter()
            pool.launch(sc.n, got)
            times["pool"].append(round(time.perf_counter() - t0, 4))
            diff = [name for name in want if not np.array_equal(_bits(want[name]), _bits(got[name]))]
            if diff:
                return {**rec, "status": "mismatch", "stress": times,
                        "detail": f"{STRESS}: {STRESS_SPEC}{POOL_POLICY} at n={sc.n} differs from its "
                                  f"single-thread launch in {', '.join(diff)} (integer atomics: every "
                                  f"order must give the same memory)"}
    except Exception as e:  # noqa: BLE001 - a launch error is a finding
        return {**rec, "status": "crash", "detail": f"{STRESS}: {type(e).__name__}: {e}"}
    rec["stress"] = times
    return rec

"""`cohort fuzz --family tiles`: a campaign of random tile programs (verify/gen/tiles.py), each
checked reference against native at its sizes (tiles.check), failures binned, shrunk and kept.

Program i of a campaign started with seed S is `generate(S * 1000003 + i, index=i)`: the same
programs in every process and every run, one piece kind forced in turn (tiles.py's steering).
With jobs = 0 the programs run in this process; with jobs >= 1 each runs in one of `jobs`
worker processes (spawned: a crash in a native build is a `crash` finding for that program and
the pool is started again), the shrink in this process. A failure is binned by the piece kind
that wrote the first differing buffer and what differed (`Mismatch.bin`); the first program of
each bin is shrunk (fewer pieces, then smaller sizes) and, with a corpus directory, kept there
as `tiles-<bin>.json` (the minimal program, its size and input seed, the planted bugs, the
source), which `replay` runs again.
"""
from __future__ import annotations

import collections
import json
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from ..gen import tiles as gen
from ..gen.tile_pieces import KINDS

SEED_STRIDE = 1000003
WORKER_PROGRAMS = 100


def program_seed(campaign_seed: int, i: int) -> int:
    return campaign_seed * SEED_STRIDE + i


def run_program(seed: int, index: int, bugs: tuple = (), strict_nan: bool = False) -> dict:
    """Generate and check one program; a plain dict (crosses process boundaries)."""
    from ...backend import inject
    from ...triton.errors import TritonError
    from .tiles import Mismatch, NanOnly, check
    t0 = time.monotonic()
    prog = gen.generate(seed, index=index)
    out = {"seed": seed, "index": index, "categories": sorted(gen.categories(prog))}
    with inject.inject_bug_TESTING_ONLY(*bugs):
        try:
            r = check(prog, strict_nan)
        except TritonError as e:        # cohort.triton refused a generated kernel: the generator's or its fault
            r = None
            out.update(status="rejected", bin="program:rejected", detail=f"{type(e).__name__}: {e}")
        except Exception as e:          # cohort failed inside (a lowering's assertion, LLVM's verifier, ...)
            r = None
            out.update(status="error", bin="program:internal-error", detail=f"{type(e).__name__}: {e}")
    if isinstance(r, Mismatch):
        out.update(status="mismatch", bin=r.bin, detail=r.detail, what=r.what)
    elif isinstance(r, NanOnly):
        out.update(status="nan_only", detail=f"f32 NaN bits differ in `{r.name}`")
    elif r == "discarded":
        out.update(status="discarded")
    elif "status" not in out:
        out["status"] = "ok"
    out["seconds"] = time.monotonic() - t0
    return out


def _finding(res: dict, t_found: float, programs: int, bugs, shrink: bool, strict_nan: bool, corpus_dir) -> dict:
    """The finding of a failing program: shrunk (in this process) and kept."""
    f = {"bin": res["bin"], "status": res["status"], "seed": res["seed"], "index": res["index"],
         "found_after_seconds": round(t_found, 2), "programs_run": programs, "detail": res["detail"]}
    if res["status"] != "mismatch" or not shrink:
        return f
    from ...backend import inject
    from .tiles import check
    from .tiles import shrink as shrink_case
    prog = gen.generate(res["seed"], index=res["index"])
    with inject.inject_bug_TESTING_ONLY(*bugs):
        m = check(prog, strict_nan)
        if not hasattr(m, "bin"):
            f["shrink"] = "not reproduced in this process"
            return f
        input_seed = m_seed(prog, m)
        small, m = shrink_case(prog, m, strict_nan=strict_nan)
    z = small.sizes[0]
    f.update(minimal_pieces=[p.kind for p in small.pieces], minimal_size=dict(M=z.M, N=z.N, S=z.S, K=z.K, T=z.T),
             detail=m.detail, ref_checksum=m.ref_checksum, native_checksum=m.native_checksum)
    if corpus_dir:
        path = os.path.join(corpus_dir, f"tiles-{res['bin'].replace(':', '-')}.json")
        with open(path, "w") as fh:
            json.dump({"family": "tiles", "bin": res["bin"], "bugs": list(bugs), "strict_nan": strict_nan,
                       "program": small.to_json(), "input_seed": input_seed,
                       "detail": m.detail, "source": small.source()}, fh, indent=1)
        f["case_file"] = path
    return f


def m_seed(prog, m) -> int:
    """The input seed of the size a mismatch was found at (tiles.check's: program seed * 7 + size index)."""
    return prog.seed * 7 + prog.sizes.index(m.size) if m.size in prog.sizes else prog.seed * 7


def replay(path: str) -> dict:
    """Run a kept case again (its bugs planted): {"agree": bool, "detail": ...}."""
    from ...backend import inject
    from .tiles import Mismatch, check_size
    with open(path) as fh:
        case = json.load(fh)
    prog = gen.TileProgram.from_json(case["program"])
    with inject.inject_bug_TESTING_ONLY(*case["bugs"]):
        r = check_size(prog, prog.sizes[0], case["input_seed"], case["strict_nan"])
    return {"agree": not isinstance(r, Mismatch), "detail": r.detail if isinstance(r, Mismatch) else ""}


def format_finding(f: dict) -> str:
    head = (f"tiles {f['status'].upper()} bin={f['bin']} seed={f['seed']} program={f['index']} "
            f"after {f['found_after_seconds']:.1f} s ({f['programs_run']} programs): {f['detail']}")
    if "minimal_pieces" in f:
        z = f["minimal_size"]
        head += (f"; minimal case: {len(f['minimal_pieces'])} piece(s) ({', '.join(f['minimal_pieces'])}), "
                 f"M={z['M']} N={z['N']} S={z['S']} K={z['K']} T={z['T']}")
    if "case_file" in f:
        head += f"; kept in {f['case_file']}"
    return head


def run_tile_campaign(seconds: float, seed: int = 0, *, max_programs: int = None, bugs: tuple = (), jobs: int = 0,
                      shrink: bool = True, corpus_dir: str = None, strict_nan: bool = False,
                      stop_on_failure: bool = False, on_finding=None) -> dict:
    """Programs 0, 1, ... of campaign `seed` until the time box or `max_programs`; the report."""
    from .tiles import require_triton
    require_triton()
    t0 = time.monotonic()
    counts = collections.Counter()
    coverage = collections.Counter()
    findings, seen_bins = [], set()
    state = {"next": 0, "done": 0}

    def more() -> bool:
        return (time.monotonic() - t0 < seconds and (max_programs is None or state["next"] < max_programs)
                and not (stop_on_failure and findings))

    def take(res: dict) -> None:
        state["done"] += 1
        counts[res["status"]] += 1
        coverage.update(res.get("categories", ()))
        if res["status"] in ("mismatch", "rejected", "error", "crash") and res["bin"] not in seen_bins:
            seen_bins.add(res["bin"])
            f = _finding(res, time.monotonic() - t0, state["done"], bugs, shrink, strict_nan, corpus_dir)
            findings.append(f)
            if on_finding:
                on_finding(f)

    if jobs == 0:
        while more():
            i = state["next"]
            state["next"] += 1
            take(run_program(program_seed(seed, i), i, bugs, strict_nan))
    else:
        _pooled(jobs, seed, bugs, strict_nan, state, more, take)
    seconds_run = time.monotonic() - t0
    kinds = {k: coverage.get(f"piece:{k}", 0) for k in KINDS}
    return {"family": "tiles", "seed": seed, "programs": state["done"], "seconds": round(seconds_run, 2),
            "counts": dict(counts), "injected_bugs": list(bugs), "strict_nan": strict_nan,
            "failures": findings, "piece_kinds": kinds, "categories": len(coverage)}


def _pooled(jobs: int, seed: int, bugs, strict_nan: bool, state: dict, more, take) -> None:
    """Programs on `jobs` spawned worker processes, up to two in flight per worker."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")

    def start():
        # a worker keeps every native build cohort.triton made in it (native.compile_program's
        # cache): it is replaced after WORKER_PROGRAMS programs, so a long campaign's memory stays
        # bounded (max_tasks_per_child: Python 3.11 on)
        try:
            return ProcessPoolExecutor(jobs, mp_context=ctx, max_tasks_per_child=WORKER_PROGRAMS)
        except TypeError:
            return ProcessPoolExecutor(jobs, mp_context=ctx)
    pool = start()
    running: dict = {}
    try:
        while True:
            while more() and len(running) < 2 * jobs:
                i = state["next"]
                state["next"] += 1
                running[pool.submit(run_program, program_seed(seed, i), i, bugs, strict_nan)] = i
            if not running:
                return
            done, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                try:
                    take(fut.result())
                except BrokenProcessPool:
                    take({"seed": program_seed(seed, i), "index": i, "status": "crash", "bin": "program:crash",
                          "detail": "a worker process died running this program (or one beside it)"})
                    for other in running:
                        other.cancel()
                    running.clear()
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = start()
                    break
            if not more() and not running:
                return
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def format_report(r: dict) -> str:
    c = r["counts"]
    lines = [f"fuzz tiles seed {r['seed']}: {r['programs']} programs in {r['seconds']:.1f} s, "
             f"{c.get('mismatch', 0)} mismatching, {c.get('rejected', 0)} rejected by the frontend, "
             f"{c.get('error', 0)} failing inside cohort, {c.get('crash', 0)} crashed, {c.get('discarded', 0)} discarded, "
             f"{c.get('nan_only', 0)} differing only in f32 NaN bits (DESIGN §3: equal)"]
    if r["programs"] == 0:
        lines.append("NOTHING TESTED: no program ran to completion within the time box; give more --seconds")
    if r["injected_bugs"]:
        lines.append(f"injected bugs: {', '.join(r['injected_bugs'])}")
    lines.append("piece kinds: " + ", ".join(f"{k} {v}" for k, v in r["piece_kinds"].items()) +
                 f"; {r['categories']} coverage categories")
    lines += [format_finding(f) for f in r["failures"]]
    return "\n".join(lines)

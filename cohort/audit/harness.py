"""Running a suite: every case, every column, rounds in balanced orders, every
raw sample kept, every round's output and guard bands checked (DESIGN §7, §8).

The result is two documents: the replay (environment, suite, every sample
with its case, column, round, order position, boundary and validity) and the
audit (per case and column: seed, input and reference checksums, the output
checksum and guard status after every timed round, the verdict, code facts).
Tables are derived from the replay alone (tables.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..refimpl import ops
from ..verify.checksum import checksum
from .columns import Unavailable, describe_unavailable, make_column
from .environment import environment
from .measure import balanced_orders, complete_rounds, run_rounds
from .suites import ALL_CORES, Suite, operator
from .tables import BY_WIDTH
from .validate import InvalidArtifact, bad_samples


@dataclass
class SuiteRun:
    replay: dict
    audit: dict
    seconds: float = 0.0
    failures: list = field(default_factory=list)


def case_id(group: str, op: str, shape) -> str:
    return f"{group}/{op}/{ops.fmt_shape(shape)}"


def select_cases(suite: Suite, only_ops=None, only_sizes=None):
    for g in suite.groups:
        for op, shape in g.cases:
            if only_ops and op not in only_ops:
                continue
            if only_sizes and ops.fmt_shape(shape) not in only_sizes:
                continue
            yield g, op, tuple(shape)


CALLS_PER_SAMPLE = ("per case: the largest of its columns' calibrated counts (each alone about 200 µs per "
                    "sample), so every column of a case - both sides of every ratio - makes the same calls "
                    "per sample")


def run_suite(suite: Suite, rounds: Optional[int] = None, samples: Optional[int] = None, only_ops=None,
              only_sizes=None, seed: int = 0, command: str = "", progress: Optional[Callable] = None,
              workers: Optional[int] = None) -> SuiteRun:
    from ..backend import objcache
    with objcache.disabled():     # a cell's compile_seconds are LLVM's, never a cache read
        return _run_suite(suite, rounds, samples, only_ops, only_sizes, seed, command, progress, workers)


def _run_suite(suite: Suite, rounds: Optional[int], samples: Optional[int], only_ops, only_sizes, seed: int,
               command: str, progress: Optional[Callable], workers: Optional[int]) -> SuiteRun:
    from ..backend.runtime import default_workers
    from ..backend.variant import MAX_WORKERS
    rounds = rounds or suite.rounds
    samples = samples or suite.samples
    workers = suite.workers if workers is None else int(workers)
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be from 1 to {MAX_WORKERS}, got {workers}")
    if suite.boundary == "native_entry" and workers != 1:
        raise ValueError(f"workers: suite {suite.name} times one thread at the native entry")
    cores = default_workers()
    t_start = time.perf_counter()
    env = environment()
    definition = suite.to_json()
    definition.update(rounds=rounds, samples=samples, workers=workers, cores=cores,
                      oversubscribed=workers > cores, calls_per_sample=CALLS_PER_SAMPLE)
    replay = {"format": "cohort-replay/1", "command": command, "environment": env, "suite": definition,
              "cases": [], "samples": []}
    audit = {"format": "cohort-audit/1", "command": command, "environment": env, "suite": suite.name,
             "workers": workers, "cores": cores, "cases": {}}
    run = SuiteRun(replay, audit)
    cases = list(select_cases(suite, only_ops, only_sizes))
    refs = {}
    if suite.roofline:
        from . import roofline
        replay["machine"] = roofline.measure()
    for group, name, shape in cases:
        cid = case_id(group.title, name, shape)
        try:
            op, form, form_note = operator(name, group.form)
            missing = ""
        except ops.ShapeError as e:
            op, form, form_note, missing = ops.get(name), group.form, "", str(e)
        inputs = op.make_inputs(shape, seed)
        if (name, shape) not in refs:    # groups that repeat a case (widths, thread counts) share it
            refs[(name, shape)] = ops.run_reference(op, shape, inputs)
        ref = refs[(name, shape)]
        gworkers = cores if group.workers == ALL_CORES else (group.workers or workers)
        a_case = {"group": group.title, "op": name, "shape": list(shape), "seed": seed,
                  "form": None if missing else form,   # None: nothing ran in a form the checker could rebuild
                  "input_checksums": {n: checksum(v) for n, v in inputs.items()},
                  "reference_checksum": checksum(ref), "columns": {}}
        r_case = {"id": cid, "group": group.title, "op": name, "shape": list(shape), "seed": seed,
                  **({"workers": gworkers} if group.workers else {}),
                  "boundary": suite.boundary, "form": form, "form_note": form_note, "columns": {},
                  "ratios": [vars(r) for r in group.ratios]}
        if suite.roofline:
            r_case["work"] = roofline.work(op, shape, inputs)
        live = {}
        for col in group.columns:
            entry = {"kind": col.kind, "spec": col.spec}
            try:
                if missing:
                    raise Unavailable(missing)
                c = make_column(col, op, shape, inputs, ref, suite.boundary, gworkers, group.by_width)
            except Unavailable as e:
                entry.update(status="unavailable", reason=describe_unavailable(e))
            else:
                live[col.name] = c
                entry.update(status="ok", compile_seconds=round(c.compile_seconds, 6),
                             verdict=c.verdict, facts=c.facts, code_digest=c.code_digest,
                             variant=getattr(getattr(c, "variant", None), "name", None))
                if group.by_width and op.choose_form is not None and col.kind == "variant":
                    entry["form"] = c.op.form   # the form this column ran in (the case's is the reference's)
            r_case["columns"][col.name] = entry
            a_case["columns"][col.name] = dict(entry, runs=[])
        if live:   # one count of calls per sample for the whole case (see CALLS_PER_SAMPLE)
            iters = max(c.iters for c in live.values())
            for n, c in live.items():
                c.iters = iters
                a_case["columns"][n]["iters"] = iters
                r_case["columns"][n]["iters"] = iters
        for n in r_case["columns"]:
            r_case["columns"][n].pop("verdict", None)
        chosen = {n: e["form"] for n, e in r_case["columns"].items() if "form" in e}
        if chosen:
            r_case["form_note"] = BY_WIDTH + ", ".join(f"{n} {f}" for n, f in chosen.items())
        run_log = a_case["columns"]
        choices = {}

        def before(column: str, rnd: int):
            c = live[column]
            choice = c.rechoose()
            if choice is not None:
                c.reset()   # the choice's trial launches wrote the output: the timed ones must write it again
            choices[(column, rnd)] = choice
            return choice

        def between(column: str, rnd: int) -> bool:
            c = live[column]
            result = c.check()
            run_log[column]["runs"].append(dict(result, round=rnd, choice=choices.get((column, rnd))))
            c.reset()
            if not result["agree"]:
                run.failures.append(f"{cid} {column} round {rnd}: output or guard check failed")
            return result["agree"]

        for c in live.values():
            first = c.check()   # a column that is wrong before timing is invalid throughout
            if not first["agree"]:
                run.failures.append(f"{cid}: column output wrong before timing")
            c.reset()
        case_rounds = complete_rounds(len(live), rounds, suite.design) if live else 0
        if live:
            m = run_rounds({n: c.sample for n, c in live.items()}, case_rounds, samples, suite.boundary,
                           between=between, progress=progress, before=before, kind=suite.design)
            sums = {(n, r["round"]): r["output_checksum"] for n in live for r in run_log[n]["runs"]}
            for s in m.samples:
                rec = {"case": cid, "column": s.column, "round": s.round, "position": s.position,
                       "boundary": suite.boundary, "valid": s.valid, "ns": [round(v, 3) for v in s.ns],
                       "output_checksum": sums.get((s.column, s.round))}
                if s.choice is not None:
                    rec["choice"] = s.choice
                if bad_samples(rec["ns"]):   # a timer reading that is not a time: refuse, write nothing
                    raise InvalidArtifact(f"{cid} {s.column} round {s.round}: {bad_samples(rec['ns'])}")
                replay["samples"].append(rec)
        elif progress is not None:
            for _ in range(complete_rounds(len(group.columns), rounds, suite.design) * len(group.columns)):
                progress()
        r_case["rounds"] = case_rounds
        r_case["orders"] = [list(o) for o in balanced_orders(len(live), rounds, suite.design)] if live else []
        r_case["timed_columns"] = list(live)
        replay["cases"].append(r_case)
        audit["cases"][cid] = a_case
    from ..backend.runtime import pool_host
    definition["pool_host"] = pool_host()     # as the last launches ran (torch's peers load OpenMP)
    from .tables import derive
    for cell in derive(replay):
        for r in cell["ratios"]:
            if r.get("limit") and r["status"] == "ok" and r["ratio"] > r["limit"]:
                run.failures.append(f"{cell['id']}: {r['label']} {r['ratio']:.3f} is above the suite's limit "
                                    f"{r['limit']} (median of {r['rounds']} paired rounds)")
    run.seconds = time.perf_counter() - t_start
    return run


def total_steps(suite: Suite, rounds: Optional[int], only_ops=None, only_sizes=None) -> int:
    rounds = rounds or suite.rounds
    return sum(complete_rounds(len(g.columns), rounds, suite.design) * len(g.columns)
               for g, _, _ in select_cases(suite, only_ops, only_sizes))

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
from .measure import balanced_orders, run_rounds
from .suites import Suite
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


def run_suite(suite: Suite, rounds: Optional[int] = None, samples: Optional[int] = None, only_ops=None,
              only_sizes=None, seed: int = 0, command: str = "", progress: Optional[Callable] = None) -> SuiteRun:
    rounds = rounds or suite.rounds
    samples = samples or suite.samples
    t_start = time.perf_counter()
    env = environment()
    definition = suite.to_json()
    definition.update(rounds=rounds, samples=samples)
    replay = {"format": "cohort-replay/1", "command": command, "environment": env, "suite": definition,
              "cases": [], "samples": []}
    audit = {"format": "cohort-audit/1", "command": command, "environment": env, "suite": suite.name, "cases": {}}
    run = SuiteRun(replay, audit)
    cases = list(select_cases(suite, only_ops, only_sizes))
    if suite.roofline:
        from . import roofline
        replay["machine"] = roofline.measure()
    for group, name, shape in cases:
        op = ops.get(name)
        cid = case_id(group.title, name, shape)
        inputs = op.make_inputs(shape, seed)
        ref = ops.run_reference(op, shape, inputs)
        a_case = {"group": group.title, "op": name, "shape": list(shape), "seed": seed,
                  "input_checksums": {n: checksum(v) for n, v in inputs.items()},
                  "reference_checksum": checksum(ref), "columns": {}}
        r_case = {"id": cid, "group": group.title, "op": name, "shape": list(shape), "seed": seed,
                  "boundary": suite.boundary, "columns": {}, "ratios": [vars(r) for r in group.ratios]}
        if suite.roofline:
            r_case["work"] = roofline.work(op, shape, inputs)
        live = {}
        for col in group.columns:
            entry = {"kind": col.kind, "spec": col.spec}
            try:
                c = make_column(col, op, shape, inputs, ref, suite.boundary, suite.workers)
            except Unavailable as e:
                entry.update(status="unavailable", reason=describe_unavailable(e))
            else:
                live[col.name] = c
                entry.update(status="ok", iters=c.iters, compile_seconds=round(c.compile_seconds, 6),
                             verdict=c.verdict, facts=c.facts,
                             variant=getattr(getattr(c, "variant", None), "name", None))
            r_case["columns"][col.name] = {k: v for k, v in entry.items() if k not in ("verdict",)}
            a_case["columns"][col.name] = dict(entry, runs=[])
        run_log = a_case["columns"]

        def between(column: str, rnd: int) -> bool:
            c = live[column]
            result = c.check()
            run_log[column]["runs"].append(dict(result, round=rnd))
            c.reset()
            if not result["agree"]:
                run.failures.append(f"{cid} {column} round {rnd}: output or guard check failed")
            return result["agree"]

        for c in live.values():
            first = c.check()   # a column that is wrong before timing is invalid throughout
            if not first["agree"]:
                run.failures.append(f"{cid}: column output wrong before timing")
            c.reset()
        if live:
            m = run_rounds({n: c.sample for n, c in live.items()}, rounds, samples, suite.boundary,
                           between=between, progress=progress)
            for s in m.samples:
                ns = [round(v, 3) for v in s.ns]
                if bad_samples(ns):   # a timer reading that is not a time: refuse, write nothing
                    raise InvalidArtifact(f"{cid} {s.column} round {s.round}: {bad_samples(ns)}")
                replay["samples"].append({"case": cid, "column": s.column, "round": s.round,
                                          "position": s.position, "boundary": suite.boundary, "valid": s.valid,
                                          "ns": ns})
        elif progress is not None:
            for _ in range(rounds * len(group.columns)):
                progress()
        r_case["orders"] = [list(o) for o in balanced_orders(len(live), rounds)] if live else []
        r_case["timed_columns"] = list(live)
        replay["cases"].append(r_case)
        audit["cases"][cid] = a_case
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
    return sum(rounds * len(g.columns) for g, _, _ in select_cases(suite, only_ops, only_sizes))

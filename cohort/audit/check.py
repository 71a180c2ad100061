"""`cohort audit check DIR`: re-verify a result directory independently.

In a fresh process: regenerate every case's inputs from its seed and compare
their checksums; recompute the reference with the interpreter (and the work
the roofline bounds are computed from: bytes and counted FP ops); recompile and
rerun every variant column once between guard bands and compare its output
checksum with the reference and with every checksum recorded after the
timed rounds; re-derive the tables from the replay's raw samples and compare
them with tables.md. Every difference is reported.
"""
from __future__ import annotations

import gzip
import json
import os

from ..refimpl import ops
from ..verify.checksum import checksum
from ..verify.guard import GuardedSet
from .tables import load_replay, render_markdown


def audit_path(directory: str) -> str:
    """audit.json, or its gzipped copy audit.json.gz (what docs/ commits); '' if neither."""
    for name in ("audit.json", "audit.json.gz"):
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    return ""


def load_audit(directory: str) -> dict:
    path = audit_path(directory)
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def check_directory(directory: str, rerun: bool = True, progress=None) -> tuple:
    """-> (problems, notes): lists of one-line strings."""
    from ..backend.compiler import UnsupportedVariant, compile_kernel
    problems, notes = [], []
    replay = load_replay(os.path.join(directory, "replay.json.gz"))
    audit = load_audit(directory)
    suite = replay["suite"]
    replay_cases = {c["id"]: c for c in replay["cases"]}
    counts = {}
    for s in replay["samples"]:
        counts[(s["case"], s["column"])] = counts.get((s["case"], s["column"]), 0) + 1
        if len(s["ns"]) != suite["samples"]:
            problems.append(f"{s['case']} {s['column']} round {s['round']}: {len(s['ns'])} samples, "
                            f"suite says {suite['samples']}")
    for cid, case in audit["cases"].items():
        if cid not in replay_cases:
            problems.append(f"{cid}: in audit.json but not in the replay")
            continue
        op = ops.get(case["op"], form=case.get("form"))   # the formulation the case was timed in
        shape = tuple(case["shape"])
        inputs = op.make_inputs(shape, case["seed"])
        for name, a in inputs.items():
            if checksum(a) != case["input_checksums"].get(name):
                problems.append(f"{cid}: input {name} regenerated from seed {case['seed']} has another checksum")
        ref = ops.run_reference(op, shape, inputs)
        if checksum(ref) != case["reference_checksum"]:
            problems.append(f"{cid}: the interpreter's output has another checksum than recorded")
        recorded_work = replay_cases[cid].get("work")
        if recorded_work is not None:
            from .roofline import work
            if work(op, shape, inputs) != recorded_work:
                problems.append(f"{cid}: recounted bytes and FP ops {work(op, shape, inputs)} differ from the "
                                f"replay's {recorded_work}")
        launch = op.launch(shape)
        for col, info in case["columns"].items():
            if progress is not None:
                progress()
            if info["status"] != "ok":
                continue
            timed = replay_cases[cid]["timed_columns"]
            want = replay_cases[cid].get("rounds", suite["rounds"])   # rounded up to complete designs
            if col in timed and counts.get((cid, col), 0) != want:
                problems.append(f"{cid} {col}: {counts.get((cid, col), 0)} rounds in the replay, "
                                f"the case says {want}")
            for run in info["runs"]:
                if not run["agree"]:
                    problems.append(f"{cid} {col} round {run['round']}: recorded as failing its check")
                if info["kind"] == "variant" and run["output_checksum"] != case["reference_checksum"]:
                    problems.append(f"{cid} {col} round {run['round']}: recorded output checksum differs "
                                    f"from the reference")
            if info["kind"] == "variant" and rerun:
                try:
                    ck = compile_kernel(op.kernel, launch.consts, info["variant"] or info["spec"], n=launch.n)
                except UnsupportedVariant as e:
                    problems.append(f"{cid} {col}: cannot recompile: {e}")
                    continue
                guarded = GuardedSet(ops.allocate(op, shape, inputs))
                ck.launch(launch.n, {**guarded.arrays, **launch.scalars})
                y = guarded.arrays[op.output].reshape(ref.shape)
                if checksum(y) != case["reference_checksum"]:
                    problems.append(f"{cid} {col}: rerun output checksum differs from the reference")
                if not guarded.intact():
                    problems.append(f"{cid} {col}: rerun broke a guard band")
            elif info["kind"] == "inductor":
                notes.append(f"{cid} {col}: Inductor outputs were checked against the oracle when timed "
                             f"({info.get('verdict', '')}); not rerun here")
    tables_path = os.path.join(directory, "tables.md")
    if os.path.exists(tables_path):
        with open(tables_path) as f:
            if f.read() != render_markdown(replay):
                problems.append("tables.md differs from the tables re-derived from replay.json.gz")
    else:
        problems.append("tables.md is missing")
    return problems, notes

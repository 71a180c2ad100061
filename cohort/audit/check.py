"""`cohort audit check DIR`: re-verify a result directory independently.

In a fresh process: regenerate every case's inputs from its seed and compare
their checksums; recompute the reference with the interpreter (and the work
the roofline bounds are computed from: bytes and counted FP ops); recompile and
rerun every variant column once between guard bands and compare its output
checksum with the reference and with every checksum recorded after the
timed rounds; re-derive the tables from the replay's raw samples and compare
them with tables.md. Every difference is reported.

Before any of that: the replay and the audit are validated as input (an
operator, shape or variant the command line would refuse is refused here,
before anything is allocated or compiled: validate.InvalidArtifact), and the
digests audit.json recorded are compared with the artifacts, and with the
audit itself, so an edit anywhere is named (artifacts.py). An audit written
before digests existed fails at once: nothing would show its files unedited.
And the commit the run recorded must be one this repository holds, when the
check runs in a git checkout of cohort (_provenance): code nobody can rebuild
is a problem; outside a checkout (or in a shallow clone) it is only noted as
unverified.
"""
from __future__ import annotations

import os

from ..refimpl import ops
from ..verify.checksum import checksum
from ..verify.compare import verify_build
from . import validate
from .artifacts import FILES
from .tables import load_replay, render_markdown, render_notes


def audit_path(directory: str) -> str:
    """audit.json, or its gzipped copy audit.json.gz (what docs/ commits); '' if neither."""
    for name in ("audit.json", "audit.json.gz"):
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    return ""


def load_audit(directory: str) -> dict:
    """The directory's audit, validated (validate.InvalidArtifact: the one-line reason)."""
    return validate.audit(validate.read_json(audit_path(directory), "audit"))


def _digest_problems(directory: str, audit: dict, replay: dict) -> list:
    """Every artifact the audit accounts for is present and unedited, and so is the audit."""
    problems = []
    listed = audit["artifacts"]
    for name in (FILES["replay"], FILES["tables"]):
        if name not in listed:
            problems.append(f"audit.json records no digest of {name}")
    for name, recorded in sorted(listed.items()):
        path = os.path.join(directory, name)
        if name == FILES["replay"]:
            actual = validate.digest(validate.canonical(replay))
        elif os.path.exists(path):
            with open(path, "rb") as f:
                actual = validate.digest(f.read())
        else:
            problems.append(f"{name} is missing (the audit says the run wrote it)")
            continue
        if actual != recorded:
            problems.append(f"{name} was edited: its digest differs from the one audit.json recorded")
    for name in sorted(set(FILES.values()) - set(listed) - {FILES["audit"]}):
        if os.path.exists(os.path.join(directory, name)):
            problems.append(f"{name} is not accounted for by audit.json (no digest recorded)")
    if validate.audit_self_digest(audit) != audit["digest"]:
        problems.append(f"{os.path.basename(audit_path(directory))} was edited: its content differs from "
                        f"its own digest")
    return problems


def _provenance(replay: dict) -> tuple:
    """-> (problems, notes) about the commit the replay's environment records (see environment.py)."""
    from .environment import commit_status, recorded_sha
    env = replay.get("environment") or {}
    sha = recorded_sha(env)
    if not sha:
        why = env.get("git_reason") or f"it records {env.get('git_commit')!r}"
        return [], [f"the replay records no git commit ({why}): the code that produced it cannot be named"]
    status, detail = commit_status(sha)
    if status == "missing":
        return [f"the replay records commit {sha}, which the repository {detail} does not contain "
                f"(git cat-file -e fails): nobody can rebuild the code that produced it"], []
    if status == "unverified":
        return [], [f"the recorded commit {sha} could not be verified: {detail}"]
    return [], []


# fields both documents record for a run, a case and a column: they must agree
_SHARED_RUN = ("command", "environment")
_SHARED_CASE = ("group", "op", "shape", "seed")
_SHARED_COLUMN = ("kind", "spec", "status", "reason", "iters", "compile_seconds", "facts", "variant")


def _cross_problems(audit: dict, replay: dict) -> list:
    problems = []
    for k in _SHARED_RUN:
        if audit.get(k) != replay.get(k):
            problems.append(f"audit.json and the replay record different {k}s")
    if audit.get("suite") != replay["suite"]["name"]:
        problems.append(f"audit.json names suite {audit.get('suite')!r}, the replay {replay['suite']['name']!r}")
    in_replay = {c["id"]: c for c in replay["cases"]}
    for cid in sorted(set(in_replay) - set(audit["cases"])):
        problems.append(f"{cid}: in the replay but not in audit.json")
    for cid, case in audit["cases"].items():
        r_case = in_replay.get(cid)
        if r_case is None:
            continue    # reported with the re-verification
        for k in _SHARED_CASE:
            if case.get(k) != r_case.get(k):
                problems.append(f"{cid}: audit.json and the replay record different {k}")
        if set(case["columns"]) != set(r_case["columns"]):
            problems.append(f"{cid}: audit.json and the replay list different columns")
        for col, info in case["columns"].items():
            r_info = r_case["columns"].get(col, {})
            for k in _SHARED_COLUMN:
                if info.get(k) != r_info.get(k):
                    problems.append(f"{cid} {col}: audit.json and the replay record different {k}")
    for s in replay["samples"]:
        why = validate.bad_samples(s["ns"])
        if why:
            problems.append(f"{s['case']} {s['column']} round {s['round']}: {why}")
    return problems


def check_directory(directory: str, rerun: bool = True, progress=None) -> tuple:
    """-> (problems, notes): lists of one-line strings. Raises validate.InvalidArtifact
    for a replay or audit that is not one (before anything is built from it)."""
    from ..backend.compiler import UnsupportedVariant, compile_kernel
    from ..backend.variant import VariantError
    problems, notes = [], []
    try:
        replay = load_replay(os.path.join(directory, FILES["replay"]))
    except validate.InvalidArtifact as e:
        raise validate.InvalidArtifact(f"{FILES['replay']}: {e}") from None
    try:
        audit = load_audit(directory)
    except validate.InvalidArtifact as e:
        raise validate.InvalidArtifact(f"{os.path.basename(audit_path(directory))}: {e}") from None
    if "digest" not in audit or "artifacts" not in audit:
        name = os.path.basename(audit_path(directory))
        return [f"{name} predates artifact digests (format {audit['format']}): nothing shows the replay and "
                f"tables are unedited; regenerate the directory (the command is in tables.md)"], notes
    problems += _digest_problems(directory, audit, replay)
    problems += _cross_problems(audit, replay)
    more, noted = _provenance(replay)
    problems += more
    notes += noted
    suite = replay["suite"]
    replay_cases = {c["id"]: c for c in replay["cases"]}
    counts = {}
    for s in replay["samples"]:
        counts[(s["case"], s["column"])] = counts.get((s["case"], s["column"]), 0) + 1
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
                if info["kind"] in ("variant", "torch") and run["output_checksum"] != case["reference_checksum"]:
                    problems.append(f"{cid} {col} round {run['round']}: recorded output checksum differs "
                                    f"from the reference")
            if info["kind"] == "variant" and rerun:
                # a by-width column ran in a form of its own (harness.py): rebuilt in that form
                cop = op.with_form(info["form"]) if info.get("form") else op
                claunch = cop.launch(shape) if cop is not op else launch
                try:
                    ck = compile_kernel(cop.kernel, claunch.consts, info["variant"] or info["spec"], n=claunch.n,
                                        verify="never")   # verify_build below compares
                except (UnsupportedVariant, VariantError) as e:
                    problems.append(f"{cid} {col}: cannot recompile: {e}")
                    continue
                verdict = verify_build(ck, claunch.n, {**ops.allocate(cop, shape, inputs), **claunch.scalars},
                                       {op.output: ref}, claims=False)
                y = verdict.native[op.output].reshape(ref.shape)
                if checksum(y) != case["reference_checksum"]:
                    problems.append(f"{cid} {col}: rerun output checksum differs from the reference")
                only_output = verdict.status == "mismatch" and set(verdict.mismatches) == {op.output}
                if not verdict.ok and not only_output:     # (a wrong output is the problem above)
                    problems.append(f"{cid} {col}: rerun: {verdict.detail}")
            elif info["kind"] == "torch":
                notes.append(f"{cid} {col}: cohort.torch outputs matched the interpreter's checksum when timed; "
                             f"not rerun here")
            elif info["kind"] in ("inductor", "eager"):
                notes.append(f"{cid} {col}: {'Inductor' if info['kind'] == 'inductor' else 'Eager torch'} outputs were checked against the oracle when timed "
                             f"({info.get('verdict', '')}); not rerun here")
    tables_path = os.path.join(directory, "tables.md")
    if os.path.exists(tables_path):
        with open(tables_path) as f:
            if f.read() != render_markdown(replay):
                problems.append("tables.md differs from the tables re-derived from replay.json.gz")
    else:
        problems.append("tables.md is missing")
    notes_path = os.path.join(directory, FILES["notes"])
    if os.path.exists(notes_path):
        with open(notes_path) as f:
            if f.read() != render_notes(replay):
                problems.append("notes.md differs from the notes re-derived from replay.json.gz")
    return problems, notes

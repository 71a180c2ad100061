"""Result files are input: replays and audits read from disk are checked here.

Everything a reader will index, iterate, allocate or compile from is checked
first, with the command line's own limits (operator names and shapes through
`Operator.parse_shape`, variant spellings through `parse_variant`, seeds in
0..2^63-1), so a malformed or hostile file is one clear reason - never a
traceback, a huge allocation or a compile of something nobody asked for.
Fields a reader does not use are left alone (newer writers may add some).

Also here: what a timing sample may be, and the digests that account for
every byte of a result directory (see artifacts.py, check.py).
"""
from __future__ import annotations

import hashlib
import json
import math

SEED_LIMIT = 2 ** 63
MAX_ROUNDS = 100_000
MAX_SAMPLES = 1_000_000


class InvalidArtifact(ValueError):
    """A replay or audit that cannot be read as one (the message is the one-line reason)."""


# ---------------------------------------------------------------- samples

def sample_problem(v) -> str:
    """'' for a usable timing sample (a finite number of nanoseconds above zero), else why not."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v!r} is not a number"
    if math.isnan(v):
        return "NaN is not a time"
    if math.isinf(v):
        return f"{v} is not a time"
    if v <= 0:
        return f"{v} ns is not a time (samples are above zero)"
    return ""


def bad_samples(ns) -> str:
    """'' if every sample of a list is usable, else the first problem."""
    for i, v in enumerate(ns):
        why = sample_problem(v)
        if why:
            return f"sample {i}: {why}"
    return ""


# ---------------------------------------------------------------- digests

def canonical(doc) -> bytes:
    """The content of a JSON document, independent of its spelling (key order, spacing,
    compression): what a digest of a replay or an audit is taken over."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def audit_self_digest(audit: dict) -> str:
    """The digest of an audit's own content, its `digest` field left out."""
    return digest(canonical({k: v for k, v in audit.items() if k != "digest"}))


def read_json(path: str, what: str):
    """A JSON document from `path` (gzipped if it ends in .gz); InvalidArtifact if unreadable."""
    import gzip
    import zlib
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz")
              else open(path, encoding="utf-8")) as f:
            return json.load(f)
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as e:   # ValueError: JSON, UTF-8
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        raise InvalidArtifact(f"not readable as {what} JSON: {reason}") from None


# ---------------------------------------------------------------- helpers

def _need(cond: bool, where: str, what: str):
    if not cond:
        raise InvalidArtifact(f"{where}: {what}")


def _dict(doc, where: str) -> dict:
    _need(isinstance(doc, dict), where, f"expected an object, got {type(doc).__name__}")
    return doc


def _list(doc, where: str) -> list:
    _need(isinstance(doc, list), where, f"expected a list, got {type(doc).__name__}")
    return doc


def _key(doc: dict, key: str, where: str):
    _need(key in doc, where, f"missing {key!r}")
    return doc[key]


def _str(doc: dict, key: str, where: str) -> str:
    v = _key(doc, key, where)
    _need(isinstance(v, str), where, f"{key} must be a string, got {v!r:.60}")
    return v


def _int(doc: dict, key: str, where: str, lo: int, hi: int) -> int:
    v = _key(doc, key, where)
    _need(isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi, where,
          f"{key} must be an integer in {lo}..{hi - 1}, got {v!r:.60}")
    return v


def _bool(doc: dict, key: str, where: str) -> bool:
    v = _key(doc, key, where)
    _need(isinstance(v, bool), where, f"{key} must be true or false, got {v!r:.60}")
    return v


def _number(doc: dict, key: str, where: str) -> float:
    v = _key(doc, key, where)
    _need(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, where,
          f"{key} must be a finite number >= 0, got {v!r:.60}")
    return v


def operator_case(doc: dict, where: str):
    """(op, shape) of a record naming an operator and a shape, with the command line's limits."""
    from ..refimpl import ops
    name = _str(doc, "op", where)
    shape = _list(_key(doc, "shape", where), f"{where} shape")
    _need(all(isinstance(d, int) and not isinstance(d, bool) for d in shape) and 0 < len(shape) <= 16,
          where, f"shape must be a list of integers, got {shape!r:.80}")
    try:
        op = ops.get(name)
        op.parse_shape(ops.fmt_shape(shape))
    except (ops.UnknownOperator, ops.ShapeError) as e:
        raise InvalidArtifact(f"{where}: {e}") from None
    form = doc.get("form")
    if form is not None:
        _need(isinstance(form, str), where, f"form must be a string, got {form!r:.40}")
        try:
            op = op.with_form(form)
        except ops.ShapeError as e:   # a form the operator lacks: its columns cannot have run
            ran = [n for n, c in (doc.get("columns") or {}).items() if isinstance(c, dict) and c.get("status") == "ok"]
            _need(not ran, where, f"{e}, yet column {ran[0]!r:.40} ran" if ran else "")
    return op, tuple(shape)


def column_form(op, info: dict, where: str):
    """A column's own form (a by-width group's, harness.py), when it names one: one of `op`'s."""
    if "form" not in info:
        return
    from ..refimpl import ops
    form = info["form"]
    _need(isinstance(form, str), where, f"form must be a string, got {form!r:.40}")
    try:
        op.with_form(form)
    except ops.ShapeError as e:
        raise InvalidArtifact(f"{where}: {e}") from None


def variant_spelling(text, where: str):
    from ..backend.variant import VariantError, parse_variant
    _need(isinstance(text, str), where, f"variant must be a string, got {text!r:.60}")
    try:
        return parse_variant(text)
    except VariantError as e:
        raise InvalidArtifact(f"{where}: variant {text!r:.80}: {e}") from None


# ---------------------------------------------------------------- replays

BOUNDARIES = ("native_entry", "runtime_e2e", "python_api", "torch_api")
ARTIFACT_NAMES = ("replay.json.gz", "tables.md", "notes.md", "ratios.png")    # what an audit may account for
STATUSES = ("ok", "unavailable")


def replay(doc) -> dict:
    """`doc` if it is a replay every reader can use; raises InvalidArtifact otherwise."""
    _dict(doc, "replay")
    fmt = _str(doc, "format", "replay")
    _need(fmt.startswith("cohort-replay/"), "replay", f"format {fmt!r:.60} is not a cohort replay")
    suite = _dict(_key(doc, "suite", "replay"), "replay suite")
    for k in ("name", "title", "boundary"):
        _str(suite, k, "replay suite")
    _need(suite["boundary"] in BOUNDARIES, "replay suite", f"unknown boundary {suite['boundary']!r:.60}")
    rounds = _int(suite, "rounds", "replay suite", 1, MAX_ROUNDS)
    samples = _int(suite, "samples", "replay suite", 1, MAX_SAMPLES)
    groups = {}
    for i, g in enumerate(_list(_key(suite, "groups", "replay suite"), "replay suite groups")):
        where = f"replay suite group {i}"
        _dict(g, where)
        title = _str(g, "title", where)
        names = []
        for c in _list(_key(g, "columns", where), f"{where} columns"):
            names.append(_str(_dict(c, f"{where} column"), "name", f"{where} column"))
        for r in _list(_key(g, "ratios", where), f"{where} ratios"):
            _ratio(r, names, where)
        groups[title] = names
    _need(groups, "replay suite", "no groups")
    roof = suite.get("roofline") or []
    _need(isinstance(roof, list) and all(isinstance(n, str) for n in roof), "replay suite",
          "roofline must be a list of column names")
    cases = {}
    for i, c in enumerate(_list(_key(doc, "cases", "replay"), "replay cases")):
        where = f"replay case {i}"
        _dict(c, where)
        cid = _str(c, "id", where)
        where = f"replay case {cid!r:.80}"
        _need(cid not in cases, where, "appears twice")
        _need(_str(c, "group", where) in groups, where, f"group {c['group']!r:.60} is not in the suite")
        op, _ = operator_case(c, where)
        _int(c, "seed", where, 0, SEED_LIMIT)
        _str(c, "boundary", where)
        cols = _dict(_key(c, "columns", where), f"{where} columns")
        missing = [n for n in groups[c["group"]] if n not in cols]
        _need(not missing, where, f"no column {missing[0]!r:.40} of its group" if missing else "")
        for name, info in cols.items():
            _dict(info, f"{where} column {name!r:.40}")
            _need(_str(info, "status", f"{where} column {name!r:.40}") in STATUSES, where,
                  f"column {name!r:.40}: unknown status {info['status']!r:.40}")
            if info.get("facts") is not None:
                _dict(info["facts"], f"{where} column {name!r:.40} facts")
            column_form(op, info, f"{where} column {name!r:.40}")
        for r in _list(_key(c, "ratios", where), f"{where} ratios"):
            _ratio(r, list(cols), where)
        timed = _list(_key(c, "timed_columns", where), f"{where} timed_columns")
        for name in timed:
            _need(name in cols and cols[name]["status"] == "ok", where,
                  f"timed column {name!r:.40} is not a column that ran")
        if c.get("work") is not None:
            w = _dict(c["work"], f"{where} work")
            for k in ("bytes", "flops"):
                _int(w, k, f"{where} work", 0, 1 << 62)
        # a case times whole balanced designs: its own round count (the suite's is the request)
        case_rounds = _int(c, "rounds", where, 0 if not timed else 1, MAX_ROUNDS) if "rounds" in c else rounds
        cases[cid] = (cols, set(timed), case_rounds)
    seen = {}
    for i, s in enumerate(_list(_key(doc, "samples", "replay"), "replay samples")):
        where = f"replay sample record {i}"
        _dict(s, where)
        cid, col = _str(s, "case", where), _str(s, "column", where)
        _need(cid in cases, where, f"case {cid!r:.80} is not in the replay's cases")
        _need(col in cases[cid][1], where, f"column {col!r:.40} of {cid} is not a timed column")
        rnd = _int(s, "round", where, 0, cases[cid][2])
        _int(s, "position", where, 0, 1 << 20)
        _bool(s, "valid", where)
        ns = _list(_key(s, "ns", where), f"{where} ns")
        _need(len(ns) == samples, where, f"{len(ns)} samples, the suite says {samples}")
        _need(all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ns), where,
              "samples must be numbers")
        key = (cid, col, rnd)
        _need(key not in seen, where, f"{cid} {col} round {rnd} appears twice")
        seen[key] = True
    for cid, (_, timed, case_rounds) in cases.items():
        for col in timed:
            have = sum(1 for r in range(case_rounds) if (cid, col, r) in seen)
            _need(have == case_rounds, f"replay case {cid!r:.80}",
                  f"column {col!r:.40} has {have} of the case's {case_rounds} rounds of samples")
    if doc.get("machine") is not None:
        _machine(doc["machine"])
    return doc


def _ratio(r, names: list, where: str):
    _dict(r, f"{where} ratio")
    for k in ("candidate", "baseline"):
        _str(r, k, f"{where} ratio")
        # a baseline "a|b" is the better (faster) of columns a and b, round by round
        parts = r[k].split("|") if k == "baseline" else [r[k]]
        _need(all(p in names for p in parts), where, f"ratio {k} {r[k]!r:.40} is not a column")
    _str(r, "label", f"{where} ratio")
    if "limit" in r:
        _number(r, "limit", f"{where} ratio")


def _machine(m):
    where = "replay machine"
    _dict(m, where)
    _need("DRAM" in _dict(_key(m, "levels", where), f"{where} levels"), where, "levels must include DRAM")
    _need(_number(m, "gflops", where) > 0, where, "gflops must be above zero")
    for name, lvl in _dict(_key(m, "levels", where), f"{where} levels").items():
        w = f"{where} level {name!r:.20}"
        _dict(lvl, w)
        _need(_number(lvl, "gb_per_s", w) > 0, w, "gb_per_s must be above zero")
        for k in ("read",):
            _number(lvl, k, w)
        size = _key(lvl, "size_bytes", w)
        _need(size is None or (isinstance(size, int) and not isinstance(size, bool) and size >= 0), w,
              f"size_bytes must be an integer or null, got {size!r:.40}")
    for k, v in _dict(_key(m, "flops_gflops", where), f"{where} flops_gflops").items():
        _need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), where,
              f"flops_gflops {k!r:.20} must be a number")


# ---------------------------------------------------------------- audits

def audit(doc) -> dict:
    """`doc` if it is an audit `audit check` can act on; raises InvalidArtifact otherwise.
    Every operator, shape, seed and variant is checked before anything is built from them."""
    _dict(doc, "audit")
    fmt = _str(doc, "format", "audit")
    _need(fmt.startswith("cohort-audit/"), "audit", f"format {fmt!r:.60} is not a cohort audit")
    for cid, case in _dict(_key(doc, "cases", "audit"), "audit cases").items():
        where = f"audit case {cid!r:.80}"
        _dict(case, where)
        op, _ = operator_case(case, where)
        _int(case, "seed", where, 0, SEED_LIMIT)
        _str(case, "reference_checksum", where)
        for name, ck in _dict(_key(case, "input_checksums", where), f"{where} input_checksums").items():
            _need(isinstance(ck, str), where, f"input checksum of {name!r:.40} must be a string")
        for col, info in _dict(_key(case, "columns", where), f"{where} columns").items():
            w = f"{where} column {col!r:.40}"
            _dict(info, w)
            kind = _str(info, "kind", w)
            _need(kind in ("variant", "inductor", "eager", "torch"), w, f"unknown kind {kind!r:.40}")
            _need(_str(info, "status", w) in STATUSES, w, f"unknown status {info['status']!r:.40}")
            if info["status"] != "ok":
                continue
            _int(info, "iters", w, 1, 1 << 40)
            _number(info, "compile_seconds", w)
            _str(info, "verdict", w)
            if kind == "variant":
                spec = info.get("variant") or info.get("spec")
                variant_spelling(spec, w)
                column_form(op, info, w)
            for i, run in enumerate(_list(_key(info, "runs", w), f"{w} runs")):
                rw = f"{w} run {i}"
                _dict(run, rw)
                _int(run, "round", rw, 0, MAX_ROUNDS)
                _bool(run, "agree", rw)
                _str(run, "output_checksum", rw)
                guards = _dict(_key(run, "guards", rw), f"{rw} guards")
                _need(all(isinstance(v, bool) for v in guards.values()), rw, "guards must be true or false")
    if "artifacts" in doc:
        arts = _dict(doc["artifacts"], "audit artifacts")
        for name, d in arts.items():
            _need(name in ARTIFACT_NAMES, "audit artifacts", f"{name!r:.60} is not an artifact of a result "
                  f"directory ({', '.join(ARTIFACT_NAMES)})")
            _need(isinstance(d, str) and d.startswith("sha256:"), "audit artifacts",
                  f"{name!r:.40}: a digest is 'sha256:<hex>', got {d!r:.60}")
    if "digest" in doc:
        _need(isinstance(doc["digest"], str), "audit", "digest must be a string")
    return doc

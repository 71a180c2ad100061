"""Writing a suite run to a directory: replay.json.gz, tables.md, notes.md, ratios.png, audit.json.

Every byte is accounted for: audit.json records a sha256 digest of each other
artifact it was written with (the replay's canonical JSON content, so that
recompressing it changes nothing; the bytes of tables.md, notes.md and ratios.png) and a
digest of its own canonical content, so `cohort audit check` names any file
edited after the run. A digest shows an edit, not who made it: it is not a
signature.

A result directory appears whole or not at all: everything is written into a
temporary folder next to it, and renamed into place only when the audit, the
last artifact, is complete. An interrupted run leaves no directory that passes.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile

from . import validate
from .tables import plot, render_markdown, render_notes

AUDIT_FORMAT = "cohort-audit/2"       # /1: no digests
FILES = {"replay": "replay.json.gz", "audit": "audit.json", "tables": "tables.md", "notes": "notes.md",
         "plot": "ratios.png"}
# what a result directory may hold (audit.json.gz: a gzipped audit, as docs/ commits)
RESULT_FILES = frozenset(FILES.values()) | {"audit.json.gz"}
DIGEST_METHOD = ("sha256; replay.json.gz: of its canonical JSON content (sorted keys, no spaces); other "
                 "files: of their bytes; digest: of this audit's canonical JSON without the digest field")


class OutputError(ValueError):
    """A result directory that cannot be written (the message is the one-line reason)."""


def check_output(directory: str) -> None:
    """Before any work: `directory` is absent or a result directory (it is replaced whole,
    so nothing else may be in it), and its parent can take a new folder."""
    target = os.path.abspath(directory)
    if os.path.lexists(target) and not os.path.isdir(target):
        raise OutputError(f"{directory} exists and is not a directory")
    if os.path.isdir(target):
        try:
            others = sorted(set(os.listdir(target)) - RESULT_FILES)
        except OSError as e:
            raise OutputError(f"{directory}: {e.strerror or e}") from None
        if others:
            raise OutputError(f"{directory} holds files that are not results ({', '.join(others[:3])}"
                              f"{', ...' if len(others) > 3 else ''}); a result directory is replaced whole")
    staging = stage(directory)
    os.rmdir(staging)


def stage(directory: str) -> str:
    """A new empty folder next to `directory` to write a result into."""
    target = os.path.abspath(directory)
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.partial-", dir=parent)
    except OSError as e:
        raise OutputError(f"{directory}: cannot create a folder in {parent}: {e.strerror or e}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)     # as a plain mkdir would make it
    return staging


def write(directory: str, run) -> dict:
    """Write `run` as a result directory (replacing an earlier one); -> the artifacts' paths."""
    check_output(directory)
    staging = stage(directory)
    try:
        paths = _write_all(staging, run)
        _move_into_place(staging, directory)
    except OSError as e:           # a full disk, a quota: name the result directory, not the staging folder
        if e.filename is None or str(e.filename).startswith(staging):
            e.filename = os.path.abspath(directory)
        raise
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
    final = os.path.abspath(directory)
    return {k: (os.path.join(final, os.path.basename(v)) if k in FILES else v) for k, v in paths.items()}


def _write_all(folder: str, run) -> dict:
    replay = validate.replay(json.loads(json.dumps(run.replay)))   # what a reader will get
    for s in replay["samples"]:
        why = validate.bad_samples(s["ns"])
        if why:
            raise validate.InvalidArtifact(f"{s['case']} {s['column']} round {s['round']}: {why}")
    paths = {k: os.path.join(folder, f) for k, f in FILES.items()}
    with gzip.open(paths["replay"], "wt", encoding="utf-8") as f:
        json.dump(replay, f)
    with open(paths["tables"], "w", encoding="utf-8") as f:
        f.write(render_markdown(replay))
    with open(paths["notes"], "w", encoding="utf-8") as f:
        f.write(render_notes(replay))
    made = plot(replay, paths["plot"])
    audit = dict(run.audit, format=AUDIT_FORMAT, digest_method=DIGEST_METHOD)
    if made != paths["plot"]:
        paths["plot_note"] = made
        paths.pop("plot")
        audit["artifacts_skipped"] = {FILES["plot"]: made}
    written = validate.read_json(paths["replay"], "replay")   # the digest is of what was written
    audit["artifacts"] = {FILES["replay"]: validate.digest(validate.canonical(written))}
    for key in ("tables", "notes", "plot"):
        if key in paths:
            with open(paths[key], "rb") as f:
                audit["artifacts"][FILES[key]] = validate.digest(f.read())
    audit["digest"] = validate.audit_self_digest(audit)
    with open(paths["audit"], "w", encoding="utf-8") as f:   # last: an audit means the rest is complete
        json.dump(audit, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    return paths


def _move_into_place(staging: str, directory: str):
    target = os.path.abspath(directory)
    if not os.path.isdir(target):
        os.rename(staging, target)
        return
    old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-", dir=os.path.dirname(target))
    os.rmdir(old)
    os.rename(target, old)       # between these two renames there is no result: never a partial one
    os.rename(staging, target)
    if os.path.islink(old):      # --out was a link to a result: the link is replaced, its target kept
        os.unlink(old)
    else:
        shutil.rmtree(old, ignore_errors=True)


def tables_body(text: str) -> str:
    """tables.md without its two header comments (for printing)."""
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("<!--") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)

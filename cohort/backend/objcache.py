"""LLVM's output kept on disk: the optimised IR and object code of a module, keyed by
everything that decides them (opt-in: COHORT_OBJECT_CACHE=DIR).

LLVM's optimiser and code generator are most of a compile's time (about 70% of a
packet build's). A process that compiles a module an earlier process compiled - the
test suite run again, a tool started again - can take the object LLVM made then
instead of making it again, as ccache and Triton's cache do. The key holds:
the module's IR text, the symbols, the compile level and pipeline tuning, the
target (triple, CPU, features), LLVM's and llvmlite's versions, the injected bugs, and
the source of the code that turns IR into objects (jit.py, target.py and this file),
so a change there - a planted bug included - never meets an object the old code made.
The lowering needs no key of its own: whatever it changes changes the IR text.

A cache is an optimisation and never a failure: an entry that cannot be read, is
short or fails its digest is a miss (and is removed); one that cannot be written (a
full disk, a read-only folder) is not written, silently. Entries are written to a
temporary file and renamed into place, so concurrent processes (pytest-xdist) never
see half an entry. When the folder grows past COHORT_OBJECT_CACHE_MB (default 1024),
the least recently used entries go, down to three quarters of it. Benchmarks time
LLVM's compile (compile_seconds), so `cohort bench` compiles with the cache off
(`disabled()`); a build that came from here says so (`Linked.cached`).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from typing import Optional

from .. import knobs

MAGIC = b"cohort-object-cache 1\n"
ENV, ENV_MB = knobs.OBJECT_CACHE.name, knobs.OBJECT_CACHE_MB.name
_pruned: set = set()                 # folders whose size this process has checked (at its first store there)
_pruned_lock = threading.Lock()
_source_digest: list = []
_off = [0]                           # depth of `disabled()` blocks (any thread)


def folder() -> Optional[str]:
    """The cache folder, or None when the cache is off (unset, empty or 'off', or in `disabled()`)."""
    d = knobs.OBJECT_CACHE.get()
    if _off[0] or d is None or _code_digest() is None:
        return None
    return d


@contextlib.contextmanager
def disabled():
    """Compiles in here neither read nor write the cache: a benchmark's compile_seconds are
    LLVM's own (audit/harness.py)."""
    _off[0] += 1
    try:
        yield
    finally:
        _off[0] -= 1


def _code_digest() -> Optional[str]:
    """The source of the IR-to-object path: a change to it is a new key (None when the source
    cannot be read, e.g. an install without .py files: then there is no cache)."""
    if not _source_digest:
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        try:
            for name in ("jit.py", "target.py", "objcache.py"):
                with open(os.path.join(here, name), "rb") as f:
                    h.update(f.read())
            _source_digest.append(h.hexdigest())
        except OSError:
            _source_digest.append(None)
    return _source_digest[0]


def key(ir_text: str, parts: dict) -> str:
    """The entry name for `ir_text` compiled as `parts` says (JSON-able facts: level, tuning,
    symbols, target, kind)."""
    import llvmlite
    import llvmlite.binding as llvm

    from . import inject
    h = hashlib.sha256()
    h.update(json.dumps({**parts, "code": _code_digest(), "llvm": list(llvm.llvm_version_info),
                         "llvmlite": llvmlite.__version__, "bugs": list(inject.key())},
                        sort_keys=True, default=str).encode())
    h.update(b"\0")
    h.update(ir_text.encode())
    return h.hexdigest()


def load(name: str) -> Optional[tuple]:
    """(text, blob) stored under `name`, or None (no cache, no entry, or a damaged one)."""
    d = folder()
    if d is None:
        return None
    path = os.path.join(d, name[:2], name + ".entry")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        if not data.startswith(MAGIC):
            raise ValueError("magic")
        head_end = data.index(b"\n", len(MAGIC))
        head = json.loads(data[len(MAGIC):head_end])
        body = data[head_end + 1:]
        if len(body) != head["text"] + head["blob"] or hashlib.sha256(body).hexdigest() != head["sha256"]:
            raise ValueError("digest")
        text = body[:head["text"]].decode()
        blob = body[head["text"]:]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        _remove(path)
        return None
    try:
        os.utime(path)             # recently used: pruned last
    except OSError:
        pass
    return text, blob


def store(name: str, text: str, blob: bytes):
    """Keep (text, blob) under `name`; any failure to write leaves the cache as it was."""
    d = folder()
    if d is None:
        return
    sub = os.path.join(d, name[:2])
    tmp = None
    try:
        os.makedirs(sub, exist_ok=True)
        raw = text.encode()
        body = raw + blob
        head = json.dumps({"text": len(raw), "blob": len(blob), "sha256": hashlib.sha256(body).hexdigest()})
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=sub)
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + head.encode() + b"\n" + body)
        os.replace(tmp, os.path.join(sub, name + ".entry"))
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            _remove(tmp)
    with _pruned_lock:
        first = d not in _pruned
        _pruned.add(d)
    if first:
        prune(d)


def limit_bytes() -> int:
    return int(knobs.OBJECT_CACHE_MB.get() * 2**20)


def prune(d: str, limit: Optional[int] = None):
    """Remove the least recently used entries while the folder holds more than `limit` bytes,
    down to three quarters of it."""
    limit = limit_bytes() if limit is None else limit
    entries = []
    try:
        for sub in os.scandir(d):
            if sub.is_dir():
                for e in os.scandir(sub.path):
                    if e.name.endswith(".entry"):
                        st = e.stat()
                        entries.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return
    total = sum(s for _, s, _ in entries)
    if total <= limit:
        return
    for _, size, path in sorted(entries):
        if total <= limit * 3 // 4:
            break
        _remove(path)
        total -= size


def _remove(path: str):
    try:
        os.remove(path)
    except OSError:
        pass

"""The object cache (backend/objcache.py): LLVM's output for a module taken from disk only
when everything that decides it is the same; damaged entries and unwritable folders are
misses, never failures; benchmarks compile with it off."""
import ctypes
import os

import pytest

from cohort.backend import inject, jit, objcache

IR = """define i32 @{sym}(i32 %x) {{
  %y = mul i32 %x, {k}
  %z = add i32 %y, 1
  ret i32 %z
}}
"""


def _call(linked, sym, x):
    return ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(linked.addresses[sym])(x)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "objects"
    monkeypatch.setenv(objcache.ENV, str(d))
    return d


def _entries(d):
    return sorted(p for p in d.rglob("*.entry")) if d.exists() else []


def test_the_same_module_is_taken_from_disk_and_runs_the_same(cache):
    text = IR.format(sym="oc_same", k=7)
    first = jit.compile_module(text, ["oc_same"])
    assert not first.cached and len(_entries(cache)) == 1
    again = jit.compile_module(text, ["oc_same"])      # as a later process would: from disk
    assert again.cached and again.llvm_ir == first.llvm_ir
    assert _call(first, "oc_same", 5) == _call(again, "oc_same", 5) == 36


def test_every_input_of_the_compile_is_in_the_key(cache):
    text = IR.format(sym="oc_key", k=3)
    base = objcache.key(text, {"kind": "jit", "level": 3})
    assert objcache.key(text, {"kind": "jit", "level": 3}) == base
    assert objcache.key(IR.format(sym="oc_key", k=4), {"kind": "jit", "level": 3}) != base
    assert objcache.key(text, {"kind": "jit", "level": 1}) != base
    assert objcache.key(text, {"kind": "jit", "level": 3, "tuning": [("loop_unrolling", False)]}) != base
    with inject.inject_bug_TESTING_ONLY("tree_order"):
        assert objcache.key(text, {"kind": "jit", "level": 3}) != base
    # the code that turns IR into objects: a change to jit.py (a planted bug there) is a new key
    objcache._source_digest[:] = ["another jit.py"]
    try:
        assert objcache.key(text, {"kind": "jit", "level": 3}) != base
    finally:
        objcache._source_digest.clear()
    assert objcache.key(text, {"kind": "jit", "level": 3}) == base


def test_quick_levels_are_kept_apart(cache):
    text = IR.format(sym="oc_level", k=9)
    jit.compile_module(text, ["oc_level"])
    with jit.quick_compiles(0):
        quick = jit.compile_module(text, ["oc_level"])
    assert not quick.cached and len(_entries(cache)) == 2


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "not ours"])
def test_a_damaged_entry_is_a_miss_and_is_written_again(cache, damage):
    text = IR.format(sym=f"oc_bad_{damage.replace(' ', '_')}", k=11)
    sym = text.split("@")[1].split("(")[0]
    jit.compile_module(text, [sym])
    (entry,) = _entries(cache)
    data = entry.read_bytes()
    entry.write_bytes({"truncated": data[:-10], "flipped": data[:-1] + bytes([data[-1] ^ 1]),
                       "empty": b"", "not ours": b"\x7fELF" + data[4:]}[damage])
    again = jit.compile_module(text, [sym])
    assert not again.cached and _call(again, sym, 2) == 23
    assert _entries(cache) == [entry] and entry.read_bytes() == data
    assert jit.compile_module(text, [sym]).cached


def test_an_unwritable_cache_is_no_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(objcache.ENV, str(blocker / "objects"))   # cannot be made: ENOTDIR
    text = IR.format(sym="oc_unwritable", k=13)
    for _ in range(2):
        linked = jit.compile_module(text, ["oc_unwritable"])
        assert not linked.cached and _call(linked, "oc_unwritable", 1) == 14
    assert blocker.read_text() == "not a folder"


def test_a_full_disk_leaves_no_partial_entry(cache, monkeypatch):
    import errno
    jit.compile_module(IR.format(sym="oc_full_a", k=2), ["oc_full_a"])

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", full)          # the entry is written, then cannot be placed
    linked = jit.compile_module(IR.format(sym="oc_full_b", k=5), ["oc_full_b"])
    assert not linked.cached and _call(linked, "oc_full_b", 3) == 16
    assert len(_entries(cache)) == 1 and not any(p.name.startswith(".tmp-") for p in cache.rglob("*"))
    assert jit.compile_module(IR.format(sym="oc_full_a", k=2), ["oc_full_a"]).cached   # still read


def test_off_means_off(tmp_path, monkeypatch):
    for value in ("off", "", "0"):
        monkeypatch.setenv(objcache.ENV, value)
        assert objcache.folder() is None
    monkeypatch.setenv(objcache.ENV, str(tmp_path))
    with objcache.disabled():
        assert objcache.folder() is None
    assert objcache.folder() == str(tmp_path)
    objcache._source_digest[:] = [None]       # an install whose source cannot be read: no cache
    try:
        assert objcache.folder() is None
    finally:
        objcache._source_digest.clear()
    assert objcache.folder() == str(tmp_path)


def test_the_least_recently_used_entries_go_past_the_limit(tmp_path):
    sub = tmp_path / "ab"
    sub.mkdir()
    for i in range(8):
        p = sub / f"ab{i}.entry"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (1000 + i, 1000 + i))
    objcache.prune(str(tmp_path), limit=6000)
    assert sorted(p.name for p in sub.iterdir()) == [f"ab{i}.entry" for i in range(4, 8)]
    objcache.prune(str(tmp_path), limit=6000)          # under the limit: nothing goes
    assert len(list(sub.iterdir())) == 4


def test_benchmarks_compile_with_the_cache_off(cache, monkeypatch):
    from cohort.audit import harness
    seen = []
    monkeypatch.setattr(harness, "_run_suite", lambda *a: seen.append(objcache.folder()))
    harness.run_suite(None)
    assert seen == [None] and objcache.folder() == str(cache)


def test_cross_compiled_objects_are_cached_per_target(cache):
    from cohort.backend import target
    text = IR.format(sym="oc_cross", k=6)
    arm = target.from_triple("aarch64-unknown-linux-gnu")
    obj = jit.emit(text, arm)
    asm = jit.emit(text, arm, "assembly")
    assert len(_entries(cache)) == 2
    assert jit.emit(text, arm) == obj and jit.emit(text, arm, "assembly") == asm
    host_asm = jit.emit(text, target.host(), "assembly")
    assert host_asm != asm and len(_entries(cache)) == 3


def test_cohort_run_says_when_llvms_output_came_from_the_cache(cache):
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "cohort.cli", "run", "rmsnorm", "--shape", "3x63", "--variant", "lanes=4"]
    env = {**os.environ, objcache.ENV: str(cache)}
    first = subprocess.run(cmd, capture_output=True, text=True, env=env)
    again = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    line = [ln for ln in again.stdout.splitlines() if "compiled in" in ln]
    assert line and "from the object cache" in line[0], again.stdout
    assert "from the object cache" not in first.stdout


def test_each_folder_is_pruned_at_its_first_store(tmp_path, monkeypatch):
    # a process that first wrote to another folder still keeps this one within its limit
    pruned = []
    monkeypatch.setattr(objcache, "prune", lambda d, limit=None: pruned.append(d))
    for name in ("one", "two", "one"):
        monkeypatch.setenv(objcache.ENV, str(tmp_path / name))
        objcache.store("ab" + name * 8, "ir", b"obj")
    assert pruned == [str(tmp_path / "one"), str(tmp_path / "two")]

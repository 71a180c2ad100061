"""What a result was measured on: CPU, OS, Python and library versions, git commit."""
from __future__ import annotations

import os
import platform
import subprocess
import sys


def _cpu() -> dict:
    info = {"model": platform.processor() or "unknown", "flags": []}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    info["model"] = value.strip()
                elif key == "flags":
                    flags = value.split()
                    info["flags"] = sorted(f for f in flags if f.startswith(("avx", "fma", "sse", "f16c")))
                    break
    except OSError:
        pass
    info["logical_cpus"] = os.cpu_count()
    return info


def _git(args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)


def _git_state() -> dict:
    """The commit, and whether the tracked files of the source tree were clean (a replay from a
    dirty tree records code that no commit holds)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = _git(["rev-parse", "HEAD"], here)
        dirty = _git(["status", "--porcelain", "--untracked-files=no"], here)
        if out.returncode == 0 and dirty.returncode == 0:
            changed = [line[3:] for line in dirty.stdout.splitlines() if line.strip()]
            return {"git_commit": out.stdout.strip() + ("+dirty" if changed else ""), "git_clean": not changed,
                    "git_dirty_files": changed[:50]}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"git_commit": "unknown", "git_clean": None, "git_dirty_files": []}


def dirty_out_reason(out: str) -> str:
    """Why `cohort bench --out OUT` must not write there ('' if it may): OUT lies in a git checkout
    with uncommitted changes to tracked files, and OUT holds tracked files or is not ignored - results
    committed from there would not match any commit's code."""
    path = os.path.abspath(out)
    probe = path
    while not os.path.isdir(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return ""
        probe = parent
    try:
        top = _git(["rev-parse", "--show-toplevel"], probe)
        if top.returncode != 0:
            return ""
        root = top.stdout.strip()
        dirty = _git(["status", "--porcelain", "--untracked-files=no"], root)
        if dirty.returncode != 0 or not dirty.stdout.strip():
            return ""
        rel = os.path.relpath(path, root)
        tracked = _git(["ls-files", "--", rel], root).stdout.strip()
        ignored = _git(["check-ignore", "-q", rel], root).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return ""
    if tracked or not ignored:
        return (f"--out {out}: inside the git checkout {root}, whose tracked files have uncommitted changes; "
                f"commit them first, or write to an ignored directory (e.g. out/)")
    return ""


def environment() -> dict:
    import llvmlite
    import numpy

    from ..backend import jit
    env = {"cpu": _cpu(), "os": platform.platform(), "python": sys.version.split()[0],
           "numpy": numpy.__version__, "llvmlite": llvmlite.__version__, "host": jit.host(),
           **_git_state()}
    from importlib import metadata
    try:
        env["torch"] = metadata.version("torch")
    except metadata.PackageNotFoundError:
        env["torch"] = None
    return env

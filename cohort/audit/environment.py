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


def _git_commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def environment() -> dict:
    import llvmlite
    import numpy
    from ..backend import jit
    env = {"cpu": _cpu(), "os": platform.platform(), "python": sys.version.split()[0],
           "numpy": numpy.__version__, "llvmlite": llvmlite.__version__, "host": jit.host(),
           "git_commit": _git_commit()}
    from importlib import metadata
    try:
        env["torch"] = metadata.version("torch")
    except metadata.PackageNotFoundError:
        env["torch"] = None
    return env

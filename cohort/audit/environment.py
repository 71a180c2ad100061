"""What a result was measured on: CPU, OS, Python and library versions, git commit."""
from __future__ import annotations

import os
import platform
import subprocess
import sys


def _cpu() -> dict:
    """The CPU's model and its vector/FMA flags (which flags: the host target's definition)."""
    from ..backend import target
    info = {"model": platform.processor() or "unknown", "flags": []}
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if not key and fields:
                    break                       # the first processor's block is enough
                fields.setdefault(key, value.strip())
    except OSError:
        pass
    model = fields.get("model name") or _sysctl("machdep.cpu.brand_string")
    if model:
        info["model"] = model
    elif "CPU implementer" in fields:           # AArch64 Linux names no model: its ids
        info["model"] = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    info["flags"] = target.host().cpuinfo_flags(fields)
    info["logical_cpus"] = os.cpu_count()
    return info


def _sysctl(name: str) -> str:
    if sys.platform != "darwin":
        return ""
    try:
        return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


CODE = __file__     # a file of the code that runs: its checkout is the one a replay records


def _git(args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)


def checkout(code: str = "") -> tuple:
    """-> (root, '') when the file `code` (by default this one: the code that runs) is tracked by a git
    checkout rooted at `root`; (None, why not) otherwise - no git, no checkout, or an installed copy
    that merely lies inside some checkout (a virtualenv in a project)."""
    folder, name = os.path.split(os.path.abspath(code or CODE))
    try:
        top = _git(["rev-parse", "--show-toplevel"], folder)
        if top.returncode != 0:
            return None, f"{folder} is not in a git checkout"
        root = top.stdout.strip()
        if _git(["ls-files", "--error-unmatch", "--", name], folder).returncode != 0:
            return None, f"{os.path.join(folder, name)} is not tracked by the git checkout {root} (an installed copy)"
    except FileNotFoundError:
        return None, "git is not installed"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"git failed: {e}"
    return root, ""


def _git_state(code: str = "") -> dict:
    """The commit (full sha; '+dirty' appended when tracked files differ from it), whether the tracked
    files were clean (untracked files do not count: a replay from a dirty tree records code that no commit
    holds), and - when the code is not a git checkout - git_commit None and git_reason saying why."""
    root, why = checkout(code)
    if root is not None:
        try:
            out = _git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], root)
            dirty = _git(["status", "--porcelain", "--untracked-files=no"], root)
            if out.returncode != 0:
                why = f"the git checkout {root} has no commit yet"
            elif dirty.returncode != 0:
                why = f"git status failed in {root}: {dirty.stderr.strip()}"
            else:
                changed = [line[3:] for line in dirty.stdout.splitlines() if line.strip()]
                return {"git_commit": out.stdout.strip() + ("+dirty" if changed else ""), "git_clean": not changed,
                        "git_dirty_files": changed[:50]}
        except (OSError, subprocess.SubprocessError) as e:
            why = f"git failed: {e}"
    return {"git_commit": None, "git_clean": None, "git_dirty_files": [], "git_reason": why}


def recorded_sha(env: dict) -> str:
    """The commit an environment records, without '+dirty' ('' if none: null, or 'unknown' before
    replays said why)."""
    commit = env.get("git_commit") or ""
    sha = commit[:-len("+dirty")] if commit.endswith("+dirty") else commit
    return sha if len(sha) == 40 and all(c in "0123456789abcdef" for c in sha) else ""


def commit_status(sha: str, code: str = "") -> tuple:
    """Whether the checkout this code runs from holds commit `sha`: -> ('present' | 'missing' |
    'unverified', detail). 'unverified': no checkout of this project here, or a shallow clone (which
    cannot tell a missing commit from one older than its depth)."""
    root, why = checkout(code)
    if root is None:
        return "unverified", why
    try:
        if _git(["cat-file", "-e", f"{sha}^{{commit}}"], root).returncode == 0:
            return "present", root
        shallow = _git(["rev-parse", "--is-shallow-repository"], root).stdout.strip() == "true"
    except (OSError, subprocess.SubprocessError) as e:
        return "unverified", f"git failed: {e}"
    if shallow:
        return "unverified", f"{root} is a shallow clone, which may lack older commits"
    return "missing", root


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([path, root]) == root


def unreachable_head_reason(out: str, code: str = "") -> str:
    """Why `cohort bench --out OUT` must not write there ('' if it may): OUT lies inside the git checkout
    the code runs from, and HEAD's commit is on no branch, remote-tracking branch or tag (a detached HEAD
    after an amend or a rebase). Git may garbage-collect such a commit, and the replay would then name
    code nobody can rebuild."""
    root, _ = checkout(code)
    if root is None or not _inside(out, root):
        return ""
    try:
        head = _git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], root)
        if head.returncode != 0:
            return ""
        # the commits HEAD reaches that no ref reaches: HEAD itself first, or nothing
        alone = _git(["rev-list", "-n1", "HEAD", "--not", "--branches", "--remotes", "--tags"], root)
    except (OSError, subprocess.SubprocessError):
        return ""
    if alone.returncode != 0 or not alone.stdout.strip():
        return ""
    return (f"--out {out}: HEAD is commit {head.stdout.strip()}, which no branch or tag contains (a detached "
            f"HEAD after an amend or rebase?); git may garbage-collect it and the replay would name code nobody "
            f"can rebuild: switch to a branch, or create one here (git switch -c NAME)")


def dirty_out_reason(out: str) -> str:
    """Why `cohort bench --out OUT` must not write there ('' if it may): OUT lies in a git checkout
    with uncommitted changes to tracked files, and OUT holds tracked files or is not ignored - results
    committed from there would not match any commit's code; or OUT lies in the checkout this code runs
    from, whose HEAD no branch contains (unreachable_head_reason)."""
    return _dirty_reason(out) or unreachable_head_reason(out)


def _dirty_reason(out: str) -> str:
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

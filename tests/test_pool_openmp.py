"""Launches of more than one worker in a process with an OpenMP runtime run on its team
(runtime.pool_host, pool_ir record slot 14). Each case is a fresh process: the pool module
and its plants are built once per process, and loading libgomp is for good."""
import ctypes.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gomp_path():
    try:
        import torch  # noqa: F401  (torch bundles its own libgomp)
        here = os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp.so.1")
        if os.path.exists(here):
            return here
    except ImportError:
        pass
    return ctypes.util.find_library("gomp")


GOMP = _gomp_path() if sys.platform.startswith("linux") else None
needs_gomp = pytest.mark.skipif(GOMP is None, reason="no libgomp on this machine")

# Every launch below compares bits with the interpreter: matmul stages b in shared memory, so
# a team member using another's scratch, a lost task or a missing block all show.
_CHILD = """
import ctypes, os, sys
import numpy as np
from cohort.backend import runtime
from cohort.backend.compiler import compile_kernel
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
print("before", runtime.pool_host())
if {load!r}:
    ctypes.CDLL({gomp!r}, mode=os.RTLD_GLOBAL)
    import wave  # noqa: F401  (a new module: the pool looks again when sys.modules grows)
print("after", runtime.pool_host())
bugs = {bugs!r}
with inject_bug_TESTING_ONLY(*bugs):
    for shape in [(1, 1, 1), (37, 53, 270), (200, 130, 70)]:     # 1, 2 and 2 blocks (256 columns, 192 rows each)
        op = ops.get("matmul")
        L = op.launch(shape)
        inputs = op.make_inputs(shape, 1)
        want = ops.run_reference(op, shape, inputs).reshape(-1)
        for spec in ["packet,grain=1,workers=2", "packet,grain=0,workers=2", "whole,grain=legacy,workers=2"]:
            v = parse_variant(spec)
            ck = compile_kernel(op.kernel, L.consts, v, n=L.n)
            for how in ("run", "native"):
                bufs = ops.allocate(op, shape, inputs)
                p = ck.prepare(L.n, {{**bufs, **L.scalars}})
                if how == "run":
                    runtime.run(p, v)
                else:
                    nl = runtime.NativeLaunch(p, v)
                    for _ in range(3):
                        nl.launch()
                same = np.array_equal(bufs[op.output].reshape(-1).view(np.uint32), want.view(np.uint32))
                print("case", shape, spec, how, "same" if same else "DIFFER")
"""


def _child(load: bool, bugs=(), env=None):
    code = _CHILD.format(load=load, gomp=GOMP, bugs=tuple(bugs))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    hosts = [ln.split()[1] for ln in lines if ln.startswith(("before", "after"))]
    cases = [ln for ln in lines if ln.startswith("case")]
    assert len(cases) == 18, out.stdout
    return hosts, cases


@needs_gomp
def test_launches_run_on_the_openmp_team_once_one_is_loaded():
    hosts, cases = _child(load=True, env={"COHORT_POOL": "auto"})
    assert hosts == ["cohort", "openmp"]
    assert all(c.endswith("same") for c in cases), cases


@needs_gomp
def test_team_plant_is_caught():
    """openmp_publish_late: the team claims nothing, so every pooled launch leaves c unwritten.
    (Launches the runtime keeps on the caller - one task - stay right.)"""
    hosts, cases = _child(load=True, bugs=("openmp_publish_late",), env={"COHORT_POOL": "auto"})
    assert hosts == ["cohort", "openmp"]
    assert [c.endswith("DIFFER") for c in cases] == [False] * 6 + [True] * 12, cases


@needs_gomp
def test_cohort_pool_env_keeps_the_pools_own_threads():
    hosts, cases = _child(load=True, bugs=("openmp_publish_late",), env={"COHORT_POOL": "cohort"})
    assert hosts == ["cohort", "cohort"]
    assert all(c.endswith("same") for c in cases), cases


def test_cohort_pool_env_is_checked(monkeypatch):
    from cohort.backend import runtime
    monkeypatch.setenv("COHORT_POOL", "omp")
    with pytest.raises(ValueError, match="COHORT_POOL='omp'"):
        runtime.pool_host()


_FORKED = """
import ctypes, os, time
import numpy as np
from cohort.backend import runtime
from cohort.backend.compiler import compile_kernel
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
ctypes.CDLL({gomp!r}, mode=os.RTLD_GLOBAL)
import wave  # noqa: F401
op = ops.get("matmul"); shape = (96, 130, 70); L = op.launch(shape)
inputs = op.make_inputs(shape, 1); want = ops.run_reference(op, shape, inputs).reshape(-1)
v = parse_variant("packet,grain=1,workers=2")
ck = compile_kernel(op.kernel, L.consts, v, n=L.n)
def once(tag):
    bufs = ops.allocate(op, shape, inputs)
    runtime.run(ck.prepare(L.n, {{**bufs, **L.scalars}}), v)
    same = np.array_equal(bufs["c"].reshape(-1).view(np.uint32), want.view(np.uint32))
    print(tag, runtime.pool_host(), "same" if same else "DIFFER", flush=True)
once("parent")              # the team has run: its threads exist in the parent only
pid = os.fork()
if pid == 0:
    once("child")
    os._exit(0)
for _ in range(600):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child exit", status, flush=True)
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    print("child hung", flush=True)
"""


@needs_gomp
def test_a_forked_child_keeps_to_the_pools_own_threads():
    """GNU libgomp is not fork-safe: a child's parallel region waits for the parent's team
    forever (torch's own ops hang there too). cohort's launches in a forked child run on the
    pool's own threads instead: they finish, with the interpreter's bits."""
    out = subprocess.run([sys.executable, "-c", _FORKED.format(gomp=GOMP)], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHONPATH": ROOT, "COHORT_POOL": "auto"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[:3] == ["parent openmp same", "child cohort same", "child exit 0"], out.stdout

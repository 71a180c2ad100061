"""Shared fixtures: a tiny suite result written once per test module (seconds to run: two
variant columns on one small case, no Inductor, no roofline measurement), and a fresh copy
of it per test, for the tests that edit artifacts."""
import gzip
import json
import os
import shutil
import signal

import pytest

from cohort.audit import artifacts, harness
from cohort.audit.suites import Column, Group, Ratio, Suite

# LLVM's output is kept between runs of the suite (backend/objcache.py: keyed by the module's
# IR, the options, the target and the source of the IR-to-object code, so a changed lowering
# or a planted bug is compiled afresh). COHORT_OBJECT_CACHE=off runs every compile cold.
os.environ.setdefault("COHORT_OBJECT_CACHE", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cohort", "objects"))

# The machines whose width- and feature-dependent lowering every host checks, by cross-compiling
# (built, never run: backend.compiler.cross_compile): a test about register widths, masked stores
# or half conversions runs for each of them, so one that assumed the CI host's width fails on any
# host (tests/test_width_portable.py keeps the suite to that rule).
WIDTH_TARGETS = {
    "avx2": ("x86_64-unknown-linux-gnu", "znver3", "+avx,+avx2,+fma,+f16c"),
    "avx512": ("x86_64-unknown-linux-gnu", "znver4", "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512vl,+avx512dq"),
    "neon": ("aarch64-unknown-linux-gnu", "", ""),
}


@pytest.fixture(params=sorted(WIDTH_TARGETS))
def width_target(request):
    """Each of WIDTH_TARGETS in turn, as a backend Target."""
    from cohort.backend import target
    return target.from_triple(*WIDTH_TARGETS[request.param])


def example_module(filename: str):
    """A script of examples/ loaded by path (examples/ is not a package), for tests that share
    its definitions instead of copying them."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", filename)
    spec = importlib.util.spec_from_file_location(f"cohort_example_{filename[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = Suite("tiny", "Tiny", "native_entry",
             (Group("g", (("rmsnorm", (3, 63)),), (Column("whole", "variant", "whole"),
                                                   Column("packet", "variant", "packet")),
                    (Ratio("packet", "whole", "packet/whole"),)),),
             rounds=3, samples=3)
TINY_CASE = "g/rmsnorm/3x63"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny") / "result"
    artifacts.write(str(d), harness.run_suite(TINY, command="cohort bench tiny"))
    return d


@pytest.fixture
def copy(result, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(result, d)
    return d


def read_replay(d):
    with gzip.open(d / "replay.json.gz", "rt") as f:
        return json.load(f)


def write_replay(d, replay):
    with gzip.open(d / "replay.json.gz", "wt") as f:
        json.dump(replay, f)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    # A pytest-xdist worker whose teardown (releasing a session's compiled kernels) outlasts
    # execnet's 5 s wait is sent a SIGINT by execnet itself, which surfaced as a KeyboardInterrupt
    # traceback from whatever ran next (Hypothesis's gc callback) after the summary line. Every
    # result has been reported by now: the worker ignores SIGINT from here (execnet ends it
    # 10 s later if it is still running). docs/README.md, "Test suite and CI".
    if hasattr(session.config, "workerinput"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def asm_blocks(asm: str) -> list:
    """The instructions of each basic block of an assembly listing (cross_compile's)."""
    import re
    blocks, cur = [], []
    for line in asm.splitlines():
        if re.match(r"^\.?LBB\d+_\d+:", line):
            blocks.append(cur)
            cur = []
        elif line.startswith("\t") and not line.strip().startswith("."):
            cur.append(line.strip())
    return blocks + [cur]

"""Shared fixtures: a tiny suite result written once per test module (seconds to run: two
variant columns on one small case, no Inductor, no roofline measurement), and a fresh copy
of it per test, for the tests that edit artifacts."""
import gzip
import json
import shutil

import pytest

from cohort.audit import artifacts, harness
from cohort.audit.suites import Column, Group, Ratio, Suite

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

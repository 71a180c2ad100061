"""The environment knobs (cohort/knobs.py): one module reads the environment, every COHORT_*
name in the tree is one of its knobs, docs/knobs.md is its table, and a bad value is an error
naming the variable and what it allows."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from cohort import knobs
from cohort.backend import objcache, runtime
from cohort.verify import execute

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_docs_knobs_md_is_the_modules_table():
    assert (ROOT / "docs" / "knobs.md").read_text() == knobs.markdown(), \
        "docs/knobs.md differs from cohort/knobs.py: python -m cohort.knobs > docs/knobs.md"
    assert "(knobs.md)" in (ROOT / "docs" / "README.md").read_text()


def test_the_table_is_what_the_module_prints():
    p = subprocess.run([sys.executable, "-m", "cohort.knobs"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0 and p.stdout == knobs.markdown()


# Reading the environment: os.environ.get / [..] / in / copy, os.getenv, environ.get(...)
_READS = re.compile(r"\bos\.getenv\(|\benviron\.get\(|\benviron\[|\bin os\.environ\b|\benviron\.copy\(|"
                    r"\bdict\(os\.environ|\*\*os\.environ")


def test_only_knobs_py_reads_the_environment():
    offenders = []
    for path in sorted((ROOT / "cohort").rglob("*.py")):
        if path.name == "knobs.py" and path.parent.name == "cohort":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if _READS.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "read the environment through cohort/knobs.py:\n" + "\n".join(offenders)


def test_every_cohort_variable_in_the_tree_is_a_knob():
    names = set()
    for folder in ("cohort", "tests", "scripts", "benchmarks", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".md", ".sh", ".toml", ".yml", ".yaml"):
                try:
                    names.update(re.findall(r"\bCOHORT_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
                except (UnicodeDecodeError, OSError):
                    continue
    unknown = names - set(knobs.KNOBS)
    assert not unknown, f"environment variables not in cohort/knobs.py: {sorted(unknown)}"
    assert {"COHORT_FMA", "COHORT_POOL", "COHORT_OBJECT_CACHE"} <= names   # the scan sees the tree


@pytest.mark.parametrize("knob, bad", [(knobs.FMA, "sometimes"), (knobs.F16, "soft"), (knobs.MASKED_STORE, "yes"),
                                       (knobs.POOL, "omp"), (knobs.OBJECT_CACHE_MB, "lots"),
                                       (knobs.OBJECT_CACHE_MB, "0.5"), (knobs.FUZZ_O3_PERCENT, "101"),
                                       (knobs.FUZZ_O0_PERCENT, "2.5"), (knobs.FUZZ_TEST_SEED_DELAY, "-1")])
def test_a_bad_value_names_the_variable_and_the_allowed_values(knob, bad, monkeypatch):
    monkeypatch.setenv(knob.name, bad)
    with pytest.raises(knobs.KnobError) as e:
        knob.get()
    assert str(e.value) == f"{knob.name}={bad!r}: expected {knob.allowed}"
    assert isinstance(e.value, ValueError)


def test_unset_or_empty_is_the_default(monkeypatch):
    for k in knobs.KNOBS.values():
        monkeypatch.delenv(k.name, raising=False)
        assert k.get() == k.default
        monkeypatch.setenv(k.name, "  ")
        assert k.get() == k.default, k.name


def test_values_are_typed(monkeypatch):
    monkeypatch.setenv(knobs.FUZZ_O3_PERCENT.name, " 30 ")
    assert knobs.FUZZ_O3_PERCENT.get() == 30
    monkeypatch.setenv(knobs.OBJECT_CACHE_MB.name, "2.5")
    assert objcache.limit_bytes() == int(2.5 * 2**20)
    for text, on in (("1", True), ("yes", True), ("0", False), ("off", False), ("False", False)):
        monkeypatch.setenv(knobs.DEBUG.name, text)
        assert knobs.DEBUG.get() is on
    monkeypatch.setenv(knobs.OBJECT_CACHE.name, "~/x")
    assert knobs.OBJECT_CACHE.get() == os.path.expanduser("~/x")


def test_the_pool_knob_is_checked_where_the_runtime_asks(monkeypatch):
    monkeypatch.setenv(runtime.POOL_ENV, "omp")
    with pytest.raises(ValueError, match="COHORT_POOL='omp': expected auto, cohort"):
        runtime.openmp_runtime()


def test_overrides_are_this_contexts_and_leave_the_environment_alone(monkeypatch):
    monkeypatch.setenv(knobs.FMA.name, "hardware")
    with knobs.overridden({knobs.FMA.name: "software", knobs.F16.name: "software"}):
        assert knobs.FMA.get() == "software" and knobs.F16.get() == "software"
        assert os.environ[knobs.FMA.name] == "hardware" and knobs.F16.name not in os.environ
        with knobs.overridden({knobs.FMA.name: "hardware"}):
            assert knobs.FMA.get() == "hardware" and knobs.F16.get() == "software"
        assert knobs.FMA.get() == "software"
    assert knobs.FMA.get() == "hardware" and knobs.F16.get() == "auto"
    with pytest.raises(knobs.KnobError, match="COHORT_F16='half': expected auto, hardware, software"):
        with knobs.overridden({knobs.F16.name: "half"}):
            pass
    unknown = "COHORT_" + "UNKNOWN"         # spelled apart: the scan of the tree below must not see it
    with pytest.raises(knobs.KnobError, match=f"{unknown} is not a cohort knob"):
        with knobs.overridden({unknown: "1"}):
            pass


def test_the_fuzzers_switches_are_knob_overrides(monkeypatch):
    monkeypatch.delenv(knobs.MASKED_STORE.name, raising=False)
    with execute.switched({knobs.MASKED_STORE.name: "dispatch"}):
        assert knobs.MASKED_STORE.get() == "dispatch" and knobs.MASKED_STORE.name not in os.environ
    assert knobs.MASKED_STORE.get() == "auto"
    assert [env for env, _ in execute.SWITCHES] == [knobs.FMA.name, knobs.MASKED_STORE.name, knobs.F16.name]
    for env, values in execute.SWITCHES:
        assert set(values) | {"auto"} == set(knobs.KNOBS[env].choices)


def test_the_cli_debug_flag(monkeypatch, capsys):
    from cohort import cli

    def boom():
        raise RuntimeError("planted")
    monkeypatch.setattr(cli, "_parser", boom)
    monkeypatch.setenv(knobs.DEBUG.name, "0")
    assert cli.main(["ops"]) == 3 and "planted" in capsys.readouterr().err
    monkeypatch.setenv(knobs.DEBUG.name, "1")
    with pytest.raises(RuntimeError, match="planted"):
        cli.main(["ops"])


def test_a_bad_knob_is_bad_input_on_the_command_line(monkeypatch, capsys):
    from cohort import cli
    monkeypatch.setenv(knobs.FMA.name, "sometimes")
    assert cli.main(["run", "rmsnorm", "--shape", "3x63", "--variant", "whole"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: COHORT_FMA='sometimes': expected auto, hardware, software", err

"""Artifacts whose every byte is accounted for (issue 13): audit.json records digests of the
replay's content, tables.md, ratios.png and itself; `cohort audit check` names any artifact
edited after the run; samples that are not times are refused at write and at check; a
result directory appears whole or not at all."""
import gzip
import json
import math
import os

import pytest
from conftest import TINY, read_replay, write_replay
from conftest import TINY_CASE as CASE

from cohort.audit import artifacts, harness, suites
from cohort.audit.check import check_directory
from cohort.audit.environment import commit_status, recorded_sha
from cohort.audit.tables import derive, render_markdown
from cohort.audit.validate import InvalidArtifact, audit_self_digest
from cohort.cli import main


def edit_audit(d, fn):
    audit = json.loads((d / "audit.json").read_text())
    fn(audit)
    (d / "audit.json").write_text(json.dumps(audit, indent=1))


def problems(d):
    return check_directory(str(d), rerun=False)[0]


def record(replay, column="whole", rnd=1):
    return next(s for s in replay["samples"] if s["case"] == CASE and s["column"] == column and s["round"] == rnd)


# ---------------------------------------------------------------- the untouched result

def test_an_untouched_result_passes_and_accounts_for_every_artifact(result, capsys):
    audit = json.loads((result / "audit.json").read_text())
    assert audit["format"] == artifacts.AUDIT_FORMAT
    listed = set(audit["artifacts"])
    assert {"replay.json.gz", "tables.md"} <= listed
    assert listed | {"audit.json"} == set(os.listdir(result))      # nothing unaccounted for
    assert audit["digest"] == audit_self_digest(audit)
    assert check_directory(str(result)) == ([], [])                 # with reruns
    assert main(["audit", "check", str(result)]) == 0
    assert "audit check passed" in capsys.readouterr().out


def test_recompressing_or_gzipping_changes_no_content(copy):
    write_replay(copy, read_replay(copy))          # other gzip header, other JSON spacing
    with open(copy / "audit.json", "rb") as src, gzip.open(copy / "audit.json.gz", "wb") as dst:
        dst.write(src.read())
    (copy / "audit.json").unlink()
    assert problems(copy) == []


# ---------------------------------------------------------------- tampering

def test_a_non_median_sample_times_1_5_is_caught(copy):
    replay = read_replay(copy)
    ns = record(replay)["ns"]
    i = max(range(len(ns)), key=lambda j: ns[j])
    ns[i] *= 1.5                      # the round's p50 does not move: the tables cannot see it
    assert render_markdown(replay) == (copy / "tables.md").read_text()
    write_replay(copy, replay)
    p = problems(copy)
    assert p == ["replay.json.gz was edited: its digest differs from the one audit.json recorded"], p


def test_a_median_edit_with_tables_regenerated_is_caught(copy):
    replay = read_replay(copy)
    rec = record(replay, "packet", 0)
    rec["ns"] = [v * 1.5 for v in rec["ns"]]
    write_replay(copy, replay)
    (copy / "tables.md").write_text(render_markdown(replay))        # consistent with the edited replay
    p = problems(copy)
    assert any(x.startswith("replay.json.gz was edited") for x in p), p
    assert any(x.startswith("tables.md was edited") for x in p), p
    assert not any("re-derived" in x for x in p), p                 # only the digests can tell


@pytest.mark.parametrize("field,value", [("verdict", "bitwise vs interpreter (trust me)"),
                                         ("compile_seconds", 0.000123), ("iters", 7)])
def test_an_edited_audit_field_is_caught(copy, field, value):
    edit_audit(copy, lambda a: a["cases"][CASE]["columns"]["packet"].__setitem__(field, value))
    p = problems(copy)
    assert "audit.json was edited: its content differs from its own digest" in p, p
    if field != "verdict":            # duplicated in the replay: cross-checked as well
        assert f"{CASE} packet: audit.json and the replay record different {field}" in p, p


@pytest.mark.parametrize("field", ["compile_seconds", "iters"])
def test_a_forged_audit_digest_still_disagrees_with_the_replay(copy, field):
    def forge(a):
        col = a["cases"][CASE]["columns"]["whole"]
        col[field] = col[field] * 2
        a["digest"] = audit_self_digest(a)
    edit_audit(copy, forge)
    assert problems(copy) == [f"{CASE} whole: audit.json and the replay record different {field}"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5.0, 0.0])
def test_a_sample_that_is_not_a_time_is_caught_and_never_tabled(copy, bad):
    replay = read_replay(copy)
    record(replay)["ns"][0] = bad
    write_replay(copy, replay)
    p = problems(copy)
    assert any(x.startswith(f"{CASE} whole round 1: sample 0:") and "not a time" in x for x in p), p
    assert any(x.startswith("replay.json.gz was edited") for x in p), p
    row = next(line for line in render_markdown(replay).splitlines() if line.startswith("| rmsnorm"))
    cells = [c.strip() for c in row.split("|")]
    assert "invalid" in cells and not {"nan", "inf", "-inf"} & {c.lower() for c in cells}, row
    cell = derive(replay)[0]
    assert cell["columns"]["whole"]["status"] == "invalid"
    assert cell["ratios"][0]["status"] == "invalid"                  # never "won 2/3" over a NaN


def test_a_missing_or_unlisted_artifact_is_caught(copy):
    audit = json.loads((copy / "audit.json").read_text())
    if "ratios.png" not in audit["artifacts"]:
        pytest.skip("matplotlib is not installed: no plot was written")
    (copy / "ratios.png").unlink()
    assert problems(copy) == ["ratios.png is missing (the audit says the run wrote it)"]
    (copy / "tables.md").unlink()
    p = problems(copy)
    assert "tables.md is missing (the audit says the run wrote it)" in p and "tables.md is missing" in p


def test_a_file_the_audit_does_not_list_is_caught(copy):
    edit_audit(copy, lambda a: (a["artifacts"].pop("tables.md"), a.__setitem__("digest", audit_self_digest(a))))
    p = problems(copy)
    assert "audit.json records no digest of tables.md" in p
    assert "tables.md is not accounted for by audit.json (no digest recorded)" in p


def test_an_audit_without_digests_fails_with_one_reason(copy, capsys):
    def legacy(a):
        for k in ("digest", "artifacts", "digest_method"):
            a.pop(k)
        a["format"] = "cohort-audit/1"
    edit_audit(copy, legacy)
    p = problems(copy)
    assert len(p) == 1 and "predates artifact digests" in p[0]
    assert main(["audit", "check", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "predates artifact digests" in out and "FAILED" in out


# docs/ folders whose replays record a commit this repository does not hold (amended or rebased
# away before the results were committed): `cohort audit check` reports that, as a problem. None
# since docs/private and docs/e2e were regenerated from committed code (issue 28, item 5); a folder named here
# must fail that way.
RECORDED_COMMIT_MISSING: set = set()


def test_the_committed_docs_predate_digests_and_say_so(capsys):
    # docs/*/ were measured before digests existed: the check fails, honestly and at once
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    folders = [os.path.join(docs, d) for d in sorted(os.listdir(docs))      # the audited result folders
               if os.path.exists(os.path.join(docs, d, "audit.json.gz"))]    # (docs/mathlib is prose)
    assert folders
    from cohort.audit import check
    from cohort.audit.tables import load_replay
    for d in folders:
        audit = check.load_audit(d)
        replay = load_replay(os.path.join(d, "replay.json.gz"))        # a valid replay
        if "digest" not in audit:     # fails at once: nothing is recomputed
            assert problems(d) == [f"audit.json.gz predates artifact digests (format {audit['format']}): nothing "
                                   f"shows the replay and tables are unedited; regenerate the directory (the "
                                   f"command is in tables.md)"]
        else:                         # regenerated: every artifact accounted for (the full check is slow)
            assert check._digest_problems(d, audit, replay) + check._cross_problems(audit, replay) == []
            # and tables.md is what this code derives from the replay, byte for byte (an older
            # folder's tables came from an older renderer: its failed check above says so)
            assert render_markdown(replay) == open(os.path.join(d, "tables.md"), encoding="utf-8").read()
        # the recorded commit: missing here for the folders named above, which `audit check` fails on;
        # unverified (a note) outside a full git checkout of cohort
        sha = recorded_sha(replay["environment"])
        status, where = commit_status(sha)
        prov_problems, prov_notes = check._provenance(replay)
        if status == "unverified":
            assert prov_problems == [] and len(prov_notes) == 1 and "could not be verified" in prov_notes[0]
        elif os.path.basename(d) in RECORDED_COMMIT_MISSING:
            assert status == "missing" and prov_notes == []
            assert prov_problems == [f"the replay records commit {sha}, which the repository {where} does not "
                                     f"contain (git cat-file -e fails): nobody can rebuild the code that "
                                     f"produced it"], prov_problems
        else:
            assert (status, prov_problems, prov_notes) == ("present", [], []), d


# ---------------------------------------------------------------- refused at write

def test_the_harness_refuses_a_sample_that_is_not_a_time(monkeypatch):
    from cohort.audit import columns
    monkeypatch.setattr(columns.VariantColumn, "sample", lambda self, k: [float("nan")] * k)
    with pytest.raises(InvalidArtifact, match="NaN is not a time"):
        harness.run_suite(TINY, rounds=1)


def test_write_refuses_a_sample_that_is_not_a_time(result, tmp_path):
    from cohort.audit.harness import SuiteRun
    replay = read_replay(result)
    record(replay)["ns"][1] = 0.0
    audit = json.loads((result / "audit.json").read_text())
    with pytest.raises(InvalidArtifact, match=r"whole round 1: sample 1: 0.0 ns is not a time"):
        artifacts.write(str(tmp_path / "out"), SuiteRun(replay, audit))
    assert not (tmp_path / "out").exists() and os.listdir(tmp_path) == []


# ---------------------------------------------------------------- whole or not at all

@pytest.fixture
def tiny_suite(monkeypatch):
    monkeypatch.setitem(suites.SUITES, "tiny", TINY)


def _leftovers(parent):
    return [f for f in os.listdir(parent) if f.startswith(".")]


def test_bench_writes_the_directory_whole_and_replaces_an_earlier_one(tiny_suite, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["bench", "tiny", "--out", str(out), "--rounds", "2", "--samples", "2"]) == 0
    first = json.loads((out / "audit.json").read_text())["digest"]
    assert main(["bench", "tiny", "--out", str(out), "--rounds", "2", "--samples", "2"]) == 0
    assert json.loads((out / "audit.json").read_text())["digest"] != first
    assert problems(out) == [] and _leftovers(tmp_path) == []
    capsys.readouterr()


@pytest.mark.parametrize("where", ["measuring", "tables", "plot", "audit"])
def test_an_interrupted_bench_leaves_nothing_that_passes(tiny_suite, tmp_path, monkeypatch, capsys, where):
    out = tmp_path / "r"

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    if where == "measuring":
        monkeypatch.setattr(harness, "run_suite", interrupt)
    elif where == "tables":
        monkeypatch.setattr(artifacts, "render_markdown", interrupt)
    elif where == "plot":
        monkeypatch.setattr(artifacts, "plot", interrupt)
    else:
        monkeypatch.setattr(artifacts.validate, "audit_self_digest", interrupt)
    assert main(["bench", "tiny", "--out", str(out), "--rounds", "1", "--samples", "2"]) == 130
    assert not out.exists() and _leftovers(tmp_path) == []
    assert "interrupted" in capsys.readouterr().err


def test_an_interrupted_rerun_keeps_the_earlier_result(tiny_suite, tmp_path, monkeypatch, capsys):
    out = tmp_path / "r"
    assert main(["bench", "tiny", "--out", str(out), "--rounds", "1", "--samples", "2"]) == 0
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    monkeypatch.setattr(artifacts, "plot", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert main(["bench", "tiny", "--out", str(out), "--rounds", "1", "--samples", "2"]) == 130
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before
    assert problems(out) == [] and _leftovers(tmp_path) == []
    capsys.readouterr()


def test_a_bench_that_measured_a_non_time_writes_nothing(tiny_suite, tmp_path, monkeypatch, capsys):
    from cohort.audit import columns
    monkeypatch.setattr(columns.VariantColumn, "sample", lambda self, k: [-1.0] * k)
    out = tmp_path / "r"
    assert main(["bench", "tiny", "--out", str(out), "--rounds", "1", "--samples", "2"]) == 1
    err = capsys.readouterr().err
    assert "is not a time" in err and "nothing written" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and _leftovers(tmp_path) == []


def test_sample_problems():
    from cohort.audit.validate import sample_problem
    assert sample_problem(1e-3) == "" and sample_problem(12) == ""
    for bad in (math.nan, math.inf, -math.inf, 0, -1.0, True, "3", None):
        assert sample_problem(bad), bad

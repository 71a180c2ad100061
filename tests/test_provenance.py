"""Provenance of every replay (issue 28, item 5): the commit the code ran from and whether its tracked
files were clean are recorded (or, outside a git checkout, commit null and why); `cohort bench --out`
inside the checkout refuses a HEAD no branch contains; `cohort audit check` reports a recorded commit
the repository does not hold, and only notes one it cannot verify. Every test works on a throwaway git
repository in tmp_path standing in for the code's checkout (environment.CODE): nothing is timed."""
import json
import subprocess

import pytest

from cohort.audit import artifacts, check, environment, harness
from cohort.audit.check import check_directory
from cohort.cli import main

FAKE = "deadbeef" * 5        # a well-formed sha no repository here holds


def git(repo, *args) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false",
                           *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A checkout with one commit on branch main; its code.py stands for the code that runs."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))    # never the repository around tmp
    r = tmp_path / "repo"
    r.mkdir()
    (r / "code.py").write_text("x = 1\n")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", ".")
    git(r, "commit", "-qm", "first")
    monkeypatch.setattr(environment, "CODE", str(r / "code.py"))
    return r


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """Code in a folder that is no git checkout."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    d = tmp_path / "installed"
    d.mkdir()
    (d / "code.py").write_text("x = 1\n")
    monkeypatch.setattr(environment, "CODE", str(d / "code.py"))
    return d


def detach_on_an_orphaned_commit(r) -> str:
    """HEAD detached on a commit no branch contains (as after `commit --amend` on a detached HEAD)."""
    git(r, "checkout", "-q", "--detach")
    (r / "code.py").write_text("x = 2\n")
    git(r, "commit", "-qam", "second, on no branch")
    return git(r, "rev-parse", "HEAD")


# ---------------------------------------------------------------- what a replay records

def test_a_clean_tree_records_its_full_commit_and_clean(repo):
    (repo / "scratch.txt").write_text("untracked files do not count\n")
    state = environment._git_state()
    assert state == {"git_commit": git(repo, "rev-parse", "HEAD"), "git_clean": True, "git_dirty_files": []}
    assert len(state["git_commit"]) == 40
    assert environment.recorded_sha(state) == state["git_commit"]


def test_a_modified_tracked_file_is_not_clean(repo):
    (repo / "code.py").write_text("x = 3\n")
    state = environment._git_state()
    assert state["git_clean"] is False and state["git_dirty_files"] == ["code.py"]
    assert state["git_commit"] == git(repo, "rev-parse", "HEAD") + "+dirty"
    assert environment.recorded_sha(state) == git(repo, "rev-parse", "HEAD")


def test_outside_a_checkout_the_commit_is_null_and_says_why(elsewhere):
    state = environment._git_state()
    assert state["git_commit"] is None and state["git_clean"] is None
    assert "is not in a git checkout" in state["git_reason"]
    env = environment.environment()                  # what run_suite puts in the replay and the audit
    assert env["git_commit"] is None and env["git_reason"] == state["git_reason"]


def test_an_installed_copy_inside_some_checkout_is_not_that_checkouts_code(repo, monkeypatch):
    (repo / "venv").mkdir()                          # untracked: a virtualenv inside a project
    (repo / "venv" / "code.py").write_text("x = 1\n")
    monkeypatch.setattr(environment, "CODE", str(repo / "venv" / "code.py"))
    state = environment._git_state()
    assert state["git_commit"] is None and "is not tracked by the git checkout" in state["git_reason"]


# ---------------------------------------------------------------- bench refuses an orphaned HEAD

def test_a_head_no_branch_contains_is_refused(repo, tmp_path):
    out = str(repo / "docs" / "quick")
    assert environment.unreachable_head_reason(out) == ""                 # on a branch
    git(repo, "checkout", "-q", "--detach")
    assert environment.unreachable_head_reason(out) == ""                 # detached, but main contains it
    sha = detach_on_an_orphaned_commit(repo)
    why = environment.unreachable_head_reason(out)
    assert sha in why and "no branch or tag contains" in why and "\n" not in why
    assert environment.dirty_out_reason(out) == why                       # what `cohort bench` asks
    assert environment.unreachable_head_reason(str(tmp_path / "elsewhere")) == ""   # not in the checkout
    git(repo, "tag", "kept")                                              # a tag keeps it, too
    assert environment.unreachable_head_reason(out) == ""


def test_bench_refuses_an_orphaned_head_with_one_line_and_times_nothing(repo, monkeypatch, capsys):
    sha = detach_on_an_orphaned_commit(repo)

    def never(*a, **k):
        raise AssertionError("measured despite the refusal")
    monkeypatch.setattr(harness, "run_suite", never)
    assert main(["bench", "quick", "--out", str(repo / "out" / "quick")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --out ") and sha in err[0], err
    assert captured.out == ""


# ---------------------------------------------------------------- audit check

def _result_recording(result, tmp_path, commit) -> str:
    """The tiny result (conftest), rewritten with whole digests as if run at `commit`."""
    from conftest import read_replay
    replay = read_replay(result)
    audit = json.loads((result / "audit.json").read_text())
    for doc in (replay, audit):
        doc["environment"].update(git_commit=commit, git_clean=True, git_dirty_files=[])
        doc["environment"].pop("git_reason", None)
    d = str(tmp_path / "result")
    artifacts.write(d, harness.SuiteRun(replay, audit))
    return d


def test_a_recorded_commit_the_repository_holds_passes(result, repo, tmp_path):
    d = _result_recording(result, tmp_path, git(repo, "rev-parse", "HEAD"))
    assert check_directory(d, rerun=False) == ([], [])


def test_a_recorded_commit_the_repository_lacks_is_a_problem(result, repo, tmp_path, capsys):
    d = _result_recording(result, tmp_path, FAKE + "+dirty")
    problems, notes = check_directory(d, rerun=False)
    assert problems == [f"the replay records commit {FAKE}, which the repository {repo} does not contain "
                        f"(git cat-file -e fails): nobody can rebuild the code that produced it"]
    assert notes == []
    assert main(["audit", "check", d]) == 1
    out = capsys.readouterr().out
    assert f"PROBLEM: the replay records commit {FAKE}" in out and "FAILED: 1 problem" in out


def test_outside_a_checkout_the_commit_is_only_noted(result, elsewhere, tmp_path, capsys):
    d = _result_recording(result, tmp_path, FAKE)
    problems, notes = check_directory(d, rerun=False)
    assert problems == []
    assert len(notes) == 1 and notes[0].startswith(f"the recorded commit {FAKE} could not be verified: ")
    assert main(["audit", "check", d, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["notes"] == notes


def test_a_shallow_clone_only_notes_a_commit_it_may_lack(repo, tmp_path, monkeypatch):
    first = git(repo, "rev-parse", "HEAD")
    (repo / "code.py").write_text("x = 4\n")
    git(repo, "commit", "-qam", "second")
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", "shallow")
    monkeypatch.setattr(environment, "CODE", str(tmp_path / "shallow" / "code.py"))
    status, why = environment.commit_status(first)
    assert status == "unverified" and "shallow clone" in why


def test_a_replay_that_records_no_commit_is_noted(elsewhere):
    assert check._provenance({"environment": {"git_commit": None, "git_reason": "git is not installed"}}) == \
        ([], ["the replay records no git commit (git is not installed): the code that produced it cannot be "
              "named"])
    assert check._provenance({"environment": {"git_commit": "unknown"}})[1] == \
        ["the replay records no git commit (it records 'unknown'): the code that produced it cannot be named"]

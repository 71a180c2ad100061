"""Issue 28: a full disk, a quota, a read-only or forbidden path and exhausted memory are the
user's environment, not a bug in cohort: exit 2, one line naming the resource and the path (or
the size asked for), and nothing partial left behind. And the command line's limits: every
numeric option bounded, empty lists refused, each error naming only its own option."""
import errno
import os
import resource
import shutil
import subprocess
import sys

import pytest
from conftest import TINY

from cohort.audit import artifacts, harness, suites
from cohort.cli import main
from cohort.verify import files


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def error_line(capsys) -> str:
    line = one_line(capsys.readouterr().err)
    assert "bug in cohort" not in line and "internal error" not in line, line
    return line


def leftovers(directory) -> list:
    """Every file or folder under `directory` (recursively), as relative paths."""
    out = []
    for root, dirs, names in os.walk(directory):
        out += [os.path.relpath(os.path.join(root, n), directory) for n in dirs + names]
    return sorted(out)


def failing_after(nbytes: int, code: int = errno.ENOSPC):
    """A `write` for cohort's .npy writer: the first `nbytes` reach the file, then OSError(code)
    as the kernel reports a full disk (no filename: the writer must name the path)."""
    written = [0]

    def write(self, data):
        data = bytes(data)
        if written[0] + len(data) > nbytes:
            room = max(nbytes - written[0], 0)
            self.f.write(data[:room])
            self.f.flush()
            written[0] += room
            raise OSError(code, os.strerror(code))
        written[0] += len(data)
        return self.f.write(data)
    return write


def full_disk(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# ---------------------------------------------------------------- run --save

@pytest.mark.parametrize("code,what", [(errno.ENOSPC, "no space left on the device"),
                                       (errno.EDQUOT, "disk quota exceeded"),
                                       (errno.EROFS, "read-only file system"),
                                       (errno.EACCES, "permission denied"),
                                       (errno.EPERM, "operation not permitted")])
def test_run_save_on_a_full_disk_leaves_nothing(tmp_path, capsys, monkeypatch, code, what):
    monkeypatch.setattr(files._Writer, "write", failing_after(5000, code))     # x.npy cut short
    d = tmp_path / "saved"
    assert main(["run", "rmsnorm", "--shape", "17x65", "--save", str(d)]) == 2
    assert error_line(capsys) == f"error: {what}: {d}"
    assert leftovers(tmp_path) == []          # no x.npy cut short, no staging folder, no empty DIR


def test_run_save_into_a_directory_with_files_keeps_them_and_adds_nothing_partial(tmp_path, capsys, monkeypatch):
    d = tmp_path / "saved"
    d.mkdir()
    (d / "mine.txt").write_text("keep")
    monkeypatch.setattr(files._Writer, "write", failing_after(5000))
    assert main(["run", "rmsnorm", "--shape", "17x65", "--save", str(d)]) == 2
    assert error_line(capsys) == f"error: no space left on the device: {d}"
    assert leftovers(tmp_path) == ["saved", "saved/mine.txt"]
    monkeypatch.undo()
    assert main(["run", "rmsnorm", "--shape", "17x65", "--save", str(d)]) == 0
    assert leftovers(d) == ["meta.json", "mine.txt", "w.npy", "x.npy", "y.npy"]


def test_run_save_that_completes_is_whole(tmp_path, capsys):
    d = tmp_path / "saved"
    assert main(["run", "rmsnorm", "--shape", "17x65", "--save", str(d)]) == 0
    assert leftovers(tmp_path) == ["saved", "saved/meta.json", "saved/w.npy", "saved/x.npy", "saved/y.npy"]
    import numpy as np
    assert np.load(d / "x.npy").shape == (17, 65)


# ---------------------------------------------------------------- bench --out

@pytest.fixture(scope="module")
def tiny_run():
    return harness.run_suite(TINY, command="cohort bench tiny")


def test_bench_out_on_a_full_disk_leaves_nothing(tmp_path, capsys, monkeypatch, tiny_run):
    monkeypatch.setitem(suites.SUITES, "tiny", TINY)
    monkeypatch.setattr(harness, "run_suite", lambda *a, **k: tiny_run)      # nothing is timed
    monkeypatch.setattr(os, "fsync", full_disk)       # the audit, written last, does not reach the disk
    out = tmp_path / "result"
    assert main(["bench", "tiny", "--out", str(out)]) == 2
    assert error_line(capsys) == f"error: no space left on the device: {out}"
    assert leftovers(tmp_path) == []


def test_bench_out_replacing_a_result_keeps_the_old_one_on_a_full_disk(tmp_path, capsys, monkeypatch, tiny_run):
    monkeypatch.setitem(suites.SUITES, "tiny", TINY)
    monkeypatch.setattr(harness, "run_suite", lambda *a, **k: tiny_run)
    out = tmp_path / "result"
    artifacts.write(str(out), tiny_run)
    before = {n: (out / n).read_bytes() for n in leftovers(out)}
    monkeypatch.setattr(os, "fsync", full_disk)
    assert main(["bench", "tiny", "--out", str(out)]) == 2
    assert error_line(capsys) == f"error: no space left on the device: {out}"
    assert {n: (out / n).read_bytes() for n in leftovers(out)} == before
    assert leftovers(tmp_path) == ["result"] + [f"result/{n}" for n in sorted(before)]


# ---------------------------------------------------------------- fuzz --campaign

FUZZ = ["fuzz", "--jobs", "0", "--examples-per-seed", "1", "--max-stmts", "2", "--variant", "whole",
        "--no-shrink", "--seconds", "120"]


def test_fuzz_campaign_on_a_full_disk_leaves_no_temp_file(tmp_path, capsys, monkeypatch):
    import json

    def dump_cut_short(doc, f, **k):   # campaign.json: a first chunk, then the disk is full
        f.write("{\n")
        f.flush()
        full_disk()

    monkeypatch.setattr(json, "dump", dump_cut_short)
    d = tmp_path / "campaign"
    assert main([*FUZZ, "--seeds", "1", "--campaign", str(d), "--corpus", str(tmp_path / "corpus")]) == 2
    assert error_line(capsys) == f"error: no space left on the device: {d / 'campaign.json'}"
    assert not [n for n in leftovers(tmp_path) if ".tmp" in n or n.endswith("campaign.json")], leftovers(tmp_path)


def test_write_json_atomic_removes_its_temp_file(tmp_path, monkeypatch):
    from cohort.verify.fuzz.state import write_json_atomic
    target = tmp_path / "summary.json"
    target.write_text('{"old": 1}\n')

    def over_quota(src, dst):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(os, "replace", over_quota)
    with pytest.raises(OSError) as e:
        write_json_atomic(str(target), {"new": 2})
    assert e.value.filename == str(target)
    assert leftovers(tmp_path) == ["summary.json"] and target.read_text() == '{"old": 1}\n'


def test_a_log_line_that_does_not_fit_is_cut_off_again(tmp_path, monkeypatch):
    """A failed append leaves the log as it was (no torn line for the next start to drop)."""
    from cohort.verify.fuzz.state import CampaignState
    s = CampaignState(str(tmp_path), {"seed": 0})
    s._append({"type": "note", "n": 1})
    before = (tmp_path / "log.jsonl").read_bytes()
    monkeypatch.setattr(os, "fsync", full_disk)      # the line was written; it does not reach the disk
    with pytest.raises(OSError) as e:
        s._append({"type": "note", "n": 2})
    monkeypatch.undo()
    assert e.value.filename == s.log_path
    s.close()
    assert (tmp_path / "log.jsonl").read_bytes() == before


def test_resuming_a_finished_campaign_says_it_is_complete(tmp_path, capsys):
    d = tmp_path / "campaign"
    argv = [*FUZZ, "--seeds", "1", "--campaign", str(d), "--corpus", str(tmp_path / "corpus")]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"campaign {d} is complete: 1 seed of 1 done; nothing to run"
    assert out[1].startswith(f"campaign {d}: 1 seeds done (0 this run)")
    assert not any("NOTHING TESTED" in line for line in out)


# ---------------------------------------------------------------- memory

def test_out_of_memory_is_the_environment(capsys, monkeypatch):
    import numpy as np

    from cohort.refimpl import ops
    op = ops.get("rmsnorm")

    try:
        from numpy._core._exceptions import _ArrayMemoryError
    except ImportError:                  # numpy < 2
        from numpy.core._exceptions import _ArrayMemoryError

    def no_memory(*a, **k):              # as numpy says it: the size it was asked for
        raise _ArrayMemoryError((17, 65), np.dtype(np.float32))

    from dataclasses import replace
    monkeypatch.setitem(ops.OPERATORS, "rmsnorm", replace(op, make_inputs=no_memory))
    assert main(["run", "rmsnorm", "--shape", "17x65"]) == 2
    line = error_line(capsys)
    assert line.startswith("error: out of memory: Unable to allocate 4.32 KiB for an array with shape (17, 65)")


def test_a_bare_memory_error_is_the_environment(capsys, monkeypatch):
    from cohort.verify import opcheck

    def no_memory(*a, **k):
        raise MemoryError

    monkeypatch.setattr(opcheck, "check_operator", no_memory)
    assert main(["run", "rmsnorm", "--shape", "17x65"]) == 2
    assert error_line(capsys).startswith("error: out of memory: an allocation failed")


def test_enomem_is_the_environment(capsys, monkeypatch):
    from cohort.verify import opcheck

    def no_memory(*a, **k):
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(opcheck, "check_operator", no_memory)
    assert main(["run", "rmsnorm", "--shape", "17x65"]) == 2
    assert error_line(capsys) == "error: out of memory"


def test_a_memory_limit_in_a_real_process():
    """`ulimit -v`: a shape under the cap (1024 x 200000, 0.8 GB a buffer) in 1.5 GB of address space."""
    limit = 1500 * 2 ** 20

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    p = subprocess.run([sys.executable, "-m", "cohort.cli", "run", "rmsnorm", "--shape", "1024x200000"],
                       capture_output=True, text=True, timeout=120, preexec_fn=cap)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert one_line(p.stderr).startswith("error: out of memory: Unable to allocate")


def test_an_internal_error_is_still_a_bug(capsys, monkeypatch):
    from cohort.verify import opcheck

    def broken(*a, **k):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))   # not the user's environment

    monkeypatch.setattr(opcheck, "check_operator", broken)
    assert main(["run", "rmsnorm", "--shape", "17x65"]) == 3
    assert "a bug in cohort" in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- a real full file system

@pytest.fixture
def tiny_tmpfs(tmp_path):
    d = tmp_path / "tmpfs"
    d.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {p.stderr.strip()}")
    yield d
    subprocess.run(["umount", str(d)], check=False)


def test_run_save_on_a_real_full_tmpfs(tiny_tmpfs):
    code = subprocess.run([sys.executable, "-m", "cohort.cli", "run", "rmsnorm", "--shape", "64x256",
                           "--save", str(tiny_tmpfs / "x")], capture_output=True, text=True, timeout=120)
    assert code.returncode == 2, code.stderr
    assert one_line(code.stderr) == f"error: no space left on the device: {tiny_tmpfs / 'x'}"
    assert os.listdir(tiny_tmpfs) == []


# ---------------------------------------------------------------- limits and messages (item 4)

@pytest.fixture
def no_work(monkeypatch):
    """Usage errors are found before anything is measured, run or compiled."""
    from cohort.verify import fuzz, opcheck

    def refuse(*a, **k):
        raise AssertionError("work started before the options were checked")

    monkeypatch.setattr(opcheck, "check_operator", refuse)
    monkeypatch.setattr(harness, "run_suite", refuse)
    monkeypatch.setattr(fuzz, "run_campaign", refuse)
    import cohort.verify.fuzz.run as fuzz_run
    monkeypatch.setattr(fuzz_run, "run_campaign", refuse)


@pytest.mark.parametrize("argv,line", [
    (["bench", "quick", "--rounds", "1e23"], "--rounds takes an integer from 1 to 1000, got '1e23'"),
    (["bench", "quick", "--rounds", "1000000000"], "--rounds must be from 1 to 1000, got 1000000000"),
    (["bench", "quick", "--rounds", "0"], "--rounds must be from 1 to 1000, got 0"),
    (["bench", "quick", "--samples", "1000000000"], "--samples must be from 1 to 1000, got 1000000000"),
    (["bench", "quick", "--workers", "257"], "--workers must be from 1 to 256, got 257"),
    (["bench", "quick", "--workers", "-1"], "--workers must be from 1 to 256, got -1"),
    (["bench", "quick", "--sizes", "0x65"], "--sizes: 0x65: every dimension must be positive"),
    (["bench", "quick", "--sizes", "1x2x3x4x5x6x7x8x9"], "--sizes: malformed shape '1x2x3x4x5x6x7x8x9': up to 8 "
                                                   "positive integers joined by x"),
    (["bench", "quick", "--sizes", "99999x99999"], "--sizes: 99999x99999: 9999800001 elements; at most 1073741823"),
    # a shape the suite lacks is refused rather than left out of the tables without a word
    (["bench", "native", "--ops", "transpose", "--sizes", "4x512x512,1x64x64"],
     "--sizes: 4x512x512: not among suite native's shapes for transpose (1x1024x1000, 1x1x1, 1x64x64, "
     "2x129x257, 3x37x70)"),
    (["fuzz", "--seconds", "-1"], "--seconds must be more than 0 and at most 1000000, got -1"),
    (["fuzz", "--seconds", "1e7"], "--seconds must be more than 0 and at most 1000000, got 1e7"),
    (["fuzz", "--seconds", "nan"], "--seconds must be more than 0 and at most 1000000, got nan"),
    (["fuzz", "--seconds", "soon"], "--seconds takes a number of seconds, more than 0 and at most 1000000, "
                                    "got 'soon'"),
    (["fuzz", "--programs", "0"], "--programs must be from 1 to 10000000, got 0"),
    (["fuzz", "--jobs", "65"], "--jobs must be from 0 to 64, got 65"),
    (["fuzz", "--jobs", "-1"], "--jobs must be from 0 to 64, got -1"),
    (["fuzz", "--seeds", "0"], "--seeds must be from 1 to 10000000, got 0"),
    (["fuzz", "--seeds", "100000000"], "--seeds must be from 1 to 10000000, got 100000000"),
    (["fuzz", "--examples-per-seed", "1001"], "--examples-per-seed must be from 1 to 1000, got 1001"),
    (["fuzz", "--seeds-per-task", "0"], "--seeds-per-task must be from 1 to 1000, got 0"),
    (["fuzz", "--max-stmts", "65"], "--max-stmts must be from 1 to 64, got 65"),
    (["fuzz", "--variants-per-program", "0"], "--variants-per-program must be from 1 to 1000, got 0"),
    (["run", "rmsnorm", "--shape", "-1x65"], "--shape: -1x65: rmsnorm: dimension R must be at least 1, got -1"),
    (["run", "rmsnorm", "--shape=-1x65"], "--shape: -1x65: rmsnorm: dimension R must be at least 1, got -1"),
    (["run", "rmsnorm", "--shape", "0x65"], "--shape: 0x65: rmsnorm: dimension R must be at least 1, got 0"),
    (["run", "rmsnorm", "--shape", "1024x1048576"], "--shape: 1024x1048576: rmsnorm 1024x1048576: buffer x would "
                                                    "have 1073741824 elements; at most 1073741823"),
    (["run", "rmsnorm", "--shape", "3x63", "--seed", "-1"], "--seed must be in 0..2^63-1, got -1"),
    # empty lists and empty knobs
    (["run", "rmsnorm", "--shape", "3x63", "--variant", "packet,,"], "--variant 'packet,,': an empty item in "
                                                                     "the list"),
    (["run", "rmsnorm", "--shape", "3x63", "--variant", ""], "--variant: empty"),
    (["fuzz", "--variant", "packet,,"], "--variant 'packet,,': an empty item in the list"),
    (["fuzz", "--variant", ""], "--variant: empty"),
    (["bench", "quick", "--ops", ""], "--ops: empty"),
    (["bench", "quick", "--ops", "rmsnorm,"], "--ops 'rmsnorm,': an empty item in the list"),
    (["bench", "quick", "--sizes", ""], "--sizes: empty"),
    (["bench", "quick", "--out", ""], "--out: empty"),
    (["run", "rmsnorm", "--shape", "3x63", "--save", ""], "--save: empty"),
    (["fuzz", "--campaign", ""], "--campaign: empty"),
    (["fuzz", "--inject", "flip_add,"], "--inject 'flip_add,': an empty item in the list"),
])
def test_bounds_and_empty_values_are_one_line_naming_the_option(capsys, no_work, argv, line):
    assert main(argv) == 2
    assert error_line(capsys) == f"error: {line}"


def test_each_error_names_only_its_own_option(capsys, no_work):
    assert main(["fuzz", "--seconds", "-1"]) == 2
    assert "--jobs" not in error_line(capsys)
    assert main(["fuzz", "--jobs", "x"]) == 2
    line = error_line(capsys)
    assert line.startswith("error: --jobs ") and "--seconds" not in line and "--programs" not in line


def test_help_states_the_bounds(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "rounds, 1 to 1000" in text and "samples per round, 1 to 1000" in text and "1 to 256" in text
    with pytest.raises(SystemExit):
        main(["fuzz", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for bound in ("at most 1000000", "1 to 10000000", "0 to 64", "N from 1 to 10000000", "1 to 64"):
        assert bound in text, bound


def test_a_value_that_is_an_option_is_still_missing(capsys):
    assert main(["run", "rmsnorm", "--shape", "--json"]) == 2     # not taken as the shape "--json"
    assert "--shape: expected one argument" in error_line(capsys)


# ---------------------------------------------------------------- the same file, the same exit code

def test_a_malformed_replay_is_exit_2_in_tables_and_in_audit_check(tmp_path, capsys, tiny_run):
    import gzip
    import json
    d = tmp_path / "result"
    artifacts.write(str(d), tiny_run)
    with gzip.open(d / "replay.json.gz", "rt") as f:
        replay = json.load(f)
    replay["samples"].pop()
    with gzip.open(d / "replay.json.gz", "wt") as f:
        json.dump(replay, f)
    assert main(["tables", str(d / "replay.json.gz")]) == 2
    assert "is not a valid replay" in error_line(capsys)
    assert main(["audit", "check", str(d)]) == 2
    assert error_line(capsys).startswith(f"error: {d} is not a valid audit: replay.json.gz: ")


def test_a_well_formed_result_whose_check_fails_is_exit_1(tmp_path, capsys, tiny_run):
    d = tmp_path / "result"
    artifacts.write(str(d), tiny_run)
    with open(d / "tables.md", "a") as f:
        f.write("edited\n")
    assert main(["audit", "check", str(d)]) == 1
    assert "tables.md" in capsys.readouterr().out


def test_a_malformed_case_file_is_bad_input_wherever_it_reaches_the_cli(tmp_path, capsys, monkeypatch):
    """No command replays a case file itself; a CorpusError reaching main is exit 2 all the same."""
    from cohort.verify import corpus, opcheck
    p = tmp_path / "case.json"
    p.write_text("{")

    def replay(*a, **k):
        corpus.load_case(str(p))

    monkeypatch.setattr(opcheck, "check_operator", replay)
    assert main(["run", "rmsnorm", "--shape", "3x63"]) == 2
    assert error_line(capsys).startswith(f"error: {p}: ")

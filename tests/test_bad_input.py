"""Input from files is input (issue 13): replays, audits and case files are validated with
the command line's limits before anything is allocated or compiled, and output paths are
checked before any work. Every case: its exit code and one line, never a traceback or exit 3."""
import gzip
import json
import os
import subprocess
import sys

import pytest
from conftest import TINY, read_replay, write_replay
from conftest import TINY_CASE as CASE

from cohort.audit import harness, suites
from cohort.cli import main


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def cli(*argv):
    """The real process: exit code and stderr, as a user sees them."""
    p = subprocess.run([sys.executable, "-m", "cohort.cli", *argv], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def nothing_is_built(monkeypatch):
    """Fail loudly if anything is allocated, interpreted or compiled from a bad file."""
    from cohort.backend import compiler
    from cohort.refimpl import ops

    def refuse(*a, **k):
        raise AssertionError("built something from a file that should have been refused")

    from dataclasses import replace
    monkeypatch.setattr(ops, "run_reference", refuse)
    monkeypatch.setattr(compiler, "compile_kernel", refuse)
    for name, op in list(ops.OPERATORS.items()):
        monkeypatch.setitem(ops.OPERATORS, name, replace(op, make_inputs=refuse))


# ---------------------------------------------------------------- output paths, before any work

@pytest.fixture
def no_work(monkeypatch):
    from cohort.verify import opcheck

    def refuse(*a, **k):
        raise AssertionError("work started before the output path was checked")

    monkeypatch.setattr(opcheck, "check_operator", refuse)
    monkeypatch.setattr(harness, "run_suite", refuse)
    monkeypatch.setitem(suites.SUITES, "tiny", TINY)


@pytest.mark.parametrize("flag", ["--dump", "--save"])
def test_run_output_dir_that_is_a_file(tmp_path, capsys, no_work, flag):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["run", "rmsnorm", "--shape", "3x63", "--variant", "packet", flag, str(f)]) == 2
    assert one_line(capsys.readouterr().err) == f"error: {flag} {f}: exists and is not a directory"
    assert main(["run", "rmsnorm", "--shape", "3x63", "--variant", "packet", flag, str(f / "sub")]) == 2
    assert "Not a directory" in one_line(capsys.readouterr().err)


def test_bench_out_that_is_a_file_or_cannot_be_made(tmp_path, capsys, no_work):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["bench", "tiny", "--out", str(f)]) == 2
    assert one_line(capsys.readouterr().err) == f"error: --out {f} exists and is not a directory"
    assert main(["bench", "tiny", "--out", str(f / "sub")]) == 2
    assert "cannot create a folder" in one_line(capsys.readouterr().err)
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep me")
    assert main(["bench", "tiny", "--out", str(d)]) == 2
    assert "holds files that are not results (notes.txt)" in one_line(capsys.readouterr().err)
    assert (d / "notes.txt").read_text() == "keep me"


def test_bench_out_checked_in_a_real_process(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = cli("bench", "quick", "--out", str(f))
    assert code == 2 and one_line(err) == f"error: --out {f} exists and is not a directory"


def test_fuzz_corpus_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["fuzz", "--seconds", "5", "--corpus", str(f)]) == 2
    assert one_line(capsys.readouterr().err) == f"error: --corpus {f}: exists and is not a directory"


# ---------------------------------------------------------------- cohort tables

def _tables_error(path, capsys) -> str:
    assert main(["tables", str(path)]) == 2
    return one_line(capsys.readouterr().err)


def test_tables_on_gzip_json_missing_keys(tmp_path, capsys):
    p = tmp_path / "r.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump({"format": "cohort-replay/1"}, f)
    assert _tables_error(p, capsys) == f"error: {p} is not a valid replay: replay: missing 'suite'"
    with gzip.open(p, "wt") as f:
        json.dump([1, 2], f)
    assert "expected an object, got list" in _tables_error(p, capsys)


def test_tables_with_a_record_removed(result, tmp_path, capsys):
    replay = read_replay(result)
    replay["samples"] = [s for s in replay["samples"]
                         if not (s["column"] == "packet" and s["round"] == 2)]
    p = tmp_path / "r.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(replay, f)
    rounds = read_replay(result)["cases"][0]["rounds"]     # 3 asked, rounded up to a whole design
    assert rounds == 6
    assert _tables_error(p, capsys).endswith(f"replay case '{CASE}': column 'packet' has {rounds - 1} of the "
                                             f"case's {rounds} rounds of samples")


@pytest.mark.parametrize("edit,reason", [
    (lambda r: r["cases"][0].__setitem__("op", "nope"), "unknown operator 'nope'"),
    (lambda r: r["cases"][0].__setitem__("shape", [-3, 63]), "dimension R must be at least 1"),
    (lambda r: r["cases"][0].__setitem__("shape", [100000, 200000]), "at most 1073741823"),
    (lambda r: r["samples"][0].__setitem__("ns", [1.0]), "1 samples, the suite says 3"),
    (lambda r: r["samples"][0].__setitem__("ns", ["fast", 1, 2]), "samples must be numbers"),
    (lambda r: r["samples"][0].__setitem__("round", 7), "round must be an integer in 0..5"),
    (lambda r: r["samples"].append(dict(r["samples"][0])), "appears twice"),
    (lambda r: r["suite"].__setitem__("rounds", "3"), "rounds must be an integer"),
    (lambda r: r["cases"][0]["ratios"][0].__setitem__("baseline", "gone"), "ratio baseline 'gone' is not a column"),
])
def test_tables_on_malformed_replays(result, tmp_path, capsys, edit, reason):
    replay = read_replay(result)
    edit(replay)
    p = tmp_path / "r.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(replay, f)
    line = _tables_error(p, capsys)
    assert line.startswith(f"error: {p} is not a valid replay: ") and reason in line, line


def test_tables_on_truncated_or_foreign_files(result, tmp_path, capsys):
    data = (result / "replay.json.gz").read_bytes()
    p = tmp_path / "r.json.gz"
    p.write_bytes(data[: len(data) // 2])
    assert "not readable as replay JSON" in _tables_error(p, capsys)
    p.write_bytes(b"plain text")
    assert "not readable as replay JSON" in _tables_error(p, capsys)
    assert _tables_error(tmp_path / "absent.json.gz", capsys) == f"error: {tmp_path / 'absent.json.gz'}: no such file"


def test_tables_in_a_real_process(result, tmp_path):
    p = tmp_path / "r.json.gz"
    with gzip.open(p, "wt") as f:
        f.write('{"format": "cohort-replay/1", "suite": {}}')
    code, out, err = cli("tables", str(p))
    assert code == 2 and "is not a valid replay: replay suite: missing 'name'" in one_line(err)


def test_tables_with_a_nan_sample_shows_invalid(result, tmp_path, capsys):
    replay = read_replay(result)
    replay["samples"][0]["ns"][0] = float("nan")
    p = tmp_path / "r.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(replay, f)
    assert main(["tables", str(p)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| rmsnorm"))
    assert "invalid" in row and "nan" not in row.lower()


# ---------------------------------------------------------------- cohort audit check

def _audit_error(d, capsys) -> str:
    """A malformed result directory is bad input: exit 2, as `cohort tables` gives for the same file;
    -> the reason after "error: DIR is not a valid audit: "."""
    assert main(["audit", "check", str(d)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = one_line(captured.err)
    prefix = f"error: {d} is not a valid audit: "
    assert line.startswith(prefix), line
    return line[len(prefix):]


def edit_audit(d, fn):
    audit = json.loads((d / "audit.json").read_text())
    fn(audit)
    (d / "audit.json").write_text(json.dumps(audit))


def test_audit_check_on_a_truncated_or_empty_audit(copy, capsys, nothing_is_built):
    text = (copy / "audit.json").read_text()
    (copy / "audit.json").write_text(text[: len(text) // 2])
    line = _audit_error(copy, capsys)
    assert line.startswith("audit.json: not readable as audit JSON"), line
    (copy / "audit.json").write_text("")
    assert _audit_error(copy, capsys).startswith("audit.json: not readable")


def _column(a):
    return a["cases"][CASE]["columns"]["packet"]


@pytest.mark.parametrize("edit,reason", [
    (lambda a: a["cases"][CASE].__setitem__("op", "nope"), "unknown operator 'nope'"),
    (lambda a: a["cases"][CASE].__setitem__("shape", [-1, 63]), "dimension R must be at least 1, got -1"),
    # 74.5 GiB of inputs were once allocated for this one
    (lambda a: a["cases"][CASE].__setitem__("shape", [100000, 200000]), "at most 1073741823"),
    (lambda a: a["cases"][CASE].__setitem__("shape", "3x63"), "expected a list, got str"),
    (lambda a: a["cases"][CASE].__setitem__("seed", -1), "seed must be an integer in 0.."),
    (lambda a: _column(a).__setitem__("variant", "packet,lanes=3"), "lanes must be 1, 4, 8 or 16"),
    (lambda a: _column(a).__setitem__("variant", "packet,workers=100000"), "workers must be from 1 to 256"),
    (lambda a: _column(a).__setitem__("variant", 42), "variant must be a string"),
    (lambda a: _column(a).__setitem__("runs", {}), "expected a list, got dict"),
    (lambda a: _column(a).__setitem__("kind", "magic"), "unknown kind 'magic'"),
    (lambda a: a.__setitem__("cases", []), "audit cases: expected an object, got list"),
    (lambda a: a.__setitem__("format", "something/1"), "is not a cohort audit"),
])
def test_audit_check_on_malformed_audits(copy, capsys, nothing_is_built, edit, reason):
    edit_audit(copy, edit)
    line = _audit_error(copy, capsys)
    assert line.startswith("audit.json: ") and reason in line, line


def test_audit_check_on_a_replay_with_a_record_removed(copy, capsys, nothing_is_built):
    replay = read_replay(copy)
    replay["samples"].pop()
    write_replay(copy, replay)
    line = _audit_error(copy, capsys)
    assert line.startswith("replay.json.gz: replay case"), line


def test_audit_check_in_a_real_process(copy):
    edit_audit(copy, lambda a: a["cases"][CASE].__setitem__("shape", [100000, 200000]))
    code, out, err = cli("audit", "check", str(copy))
    assert code == 2 and "not a valid audit" in one_line(err) and out == ""


# ---------------------------------------------------------------- fuzz

def test_a_fuzz_campaign_that_ran_nothing_says_so_and_fails(capsys, tmp_path):
    assert main(["fuzz", "--seconds", "0.000001", "--jobs", "0", "--corpus", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert " 0 programs in " in out and "NOTHING TESTED" in out


def test_an_interrupted_fuzz_campaign_exits_130(monkeypatch, capsys, tmp_path):
    from cohort.verify import fuzz

    def interrupt(self, case):
        raise KeyboardInterrupt

    monkeypatch.setattr(fuzz.Campaign, "test", interrupt)
    assert main(["fuzz", "--seconds", "30", "--jobs", "0", "--corpus", str(tmp_path)]) == 130
    captured = capsys.readouterr()
    assert "(interrupted)" in captured.out and "interrupted after 0 programs" in captured.err
    # no --campaign: nothing to resume from, and the message says how to keep a campaign's state
    assert (f"cohort fuzz --seconds 30 --jobs 0 --corpus {tmp_path} --campaign DIR keeps a campaign's state"
            in one_line(captured.err))


@pytest.mark.parametrize("argv,msg", [(["--programs", "0"], "--programs must be from 1 to 10000000, got 0"),
                                      (["--programs", "many"], "--programs takes an integer from 1 to")])
def test_fuzz_programs_usage(capsys, argv, msg):
    assert main(["fuzz", *argv]) == 2
    assert msg in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- corpus files

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def _good_case() -> dict:
    from cohort.verify import corpus
    return json.loads(open(corpus.case_files(CORPUS)[0]).read())


@pytest.mark.parametrize("edit,reason", [
    (lambda d: d.pop("n"), "missing 'n'"),
    (lambda d: d.__setitem__("n", -4), "n must be an integer in 1.."),
    (lambda d: d["buffers"][0].__setitem__("length", 1 << 40), "length must be an integer in 1..16777216"),
    (lambda d: d["buffers"][0].__setitem__("fill", "lava"), "unknown fill 'lava'"),
    (lambda d: d.__setitem__("variants", ["lanes=3"]), "lanes must be 1, 4, 8 or 16"),
    (lambda d: d.__setitem__("variants", "some"), "variants must be"),
    (lambda d: d.__setitem__("expected", "maybe"), "expected must be one of agree, known_failure"),
    (lambda d: d["kernel"].__setitem__("block", 48), "block must be a power of two"),
    (lambda d: d["kernel"].__setitem__("nodes", [{"op": "ADD"}]), "malformed cohort-case/1 document"),
    (lambda d: d.__setitem__("inputs_seed", "x"), "inputs_seed must be an integer"),
])
def test_malformed_case_files_are_one_clear_error(tmp_path, edit, reason):
    from cohort.verify import corpus
    doc = _good_case()
    edit(doc)
    p = tmp_path / "case.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(corpus.CorpusError) as e:
        corpus.load_case(str(p))
    assert str(e.value).startswith(f"{p}: ") and reason in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_truncated_case_file_is_one_clear_error(tmp_path):
    from cohort.verify import corpus
    p = tmp_path / "case.json"
    p.write_text(json.dumps(_good_case())[:100])
    with pytest.raises(corpus.CorpusError, match="case.json: "):
        corpus.load_case(str(p))


def test_audit_check_reads_only_the_artifacts_it_knows(copy, capsys, nothing_is_built):
    # a digest entry naming another file (a device, a file elsewhere) is refused, never read
    edit_audit(copy, lambda a: a["artifacts"].__setitem__("/dev/zero", "sha256:0"))
    assert "'/dev/zero' is not an artifact of a result directory" in _audit_error(copy, capsys)


@pytest.mark.parametrize("shape", ["1x99999999999999999999999", "4294967296x4294967296"])
def test_element_counts_are_counted_without_wrapping(capsys, shape):
    # 2^32 x 2^32 elements is 0 in int64: once accepted, then allocated
    assert main(["run", "rmsnorm", "--shape", shape]) == 2
    assert "elements; at most 1073741823" in one_line(capsys.readouterr().err)


def test_audit_check_on_a_shape_whose_count_wraps(copy, capsys, nothing_is_built):
    edit_audit(copy, lambda a: a["cases"][CASE].__setitem__("shape", [4294967296, 4294967296]))
    assert "elements; at most 1073741823" in _audit_error(copy, capsys)


def test_a_variant_that_does_not_fit_the_kernel_is_bad_input(capsys):
    assert main(["run", "rmsnorm", "--shape", "3x63", "--variant", "packet,interleave=64"]) == 2
    assert "interleave 64 x lanes 8 exceeds the block (32)" in one_line(capsys.readouterr().err)


def test_audit_check_reports_a_variant_that_cannot_be_recompiled(copy, capsys):
    # valid as a spelling, so it passes validation; compiling it is refused: a problem, not a crash
    edit_audit(copy, lambda a: a["cases"][CASE]["columns"]["packet"].__setitem__("variant", "packet,interleave=64"))
    assert main(["audit", "check", str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"{CASE} packet: cannot recompile: interleave 64 x lanes 8 exceeds the block (32)" in out


def test_audit_check_json_on_a_malformed_audit(copy, capsys):
    (copy / "audit.json").write_text("{")
    assert main(["audit", "check", str(copy), "--json"]) == 2
    captured = capsys.readouterr()
    r = json.loads(captured.out.strip().splitlines()[-1])
    assert r["ok"] is False and r["problems"][0].startswith("not a valid audit: audit.json: not readable")


@pytest.mark.parametrize("op,shape,ok", [("rmsnorm", "3x63", False), ("layernorm", "3x63", False),
                                         ("swiglu", "3x63", True), ("gelu", "3x63", True),
                                         # a block per tile of query rows (and rope: per position)
                                         ("attention", "1x4x2x16x32x16x16", False),
                                         ("rope_half", "2x3x16x16", False)])
def test_block_knob_on_operators(capsys, op, shape, ok):
    """Re-blocking an operator whose rows are blocks would change what it computes (its
    launch and its reduction tree): exit 2 naming why. Operators that only read global_id
    re-block freely and still agree bit for bit."""
    rc = main(["run", op, "--shape", shape, "--variant", "packet,block=8" if ok else "packet,block=64"])
    out, err = capsys.readouterr()
    if ok:
        assert rc == 0 and "bit-identical" in out
    else:
        assert rc == 2 and "would change what it computes" in one_line(err)

"""The command line contract (DESIGN §9): outputs, JSON, files, exit codes,
and one clear line - never a traceback - for bad input."""
import json
import subprocess
import sys

import numpy as np
import pytest

from cohort.cli import main
from cohort.refimpl import ops


def run(*argv):
    p = subprocess.run([sys.executable, "-m", "cohort.cli", *argv], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_ops_lists_every_operator(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    names = tuple(ops.OPERATORS)        # every registered operator (a new one needs no line here)
    assert {"rmsnorm", "layernorm", "masked_softmax", "swiglu", "gelu_residual", "rope", "attention", "gelu",
            "gelu_tanh", "rope_half", "rope_pairs", "attention_causal", "matmul", "cumsum", "histogram",
            "transpose"} <= set(names)
    for name in names:
        assert f"{name}:" in out
    assert main(["ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(data["operators"]) == len(names) and "1024x4097" in data["operators"][0]["sizes"]


def test_run_ref_json_fields(capsys):
    assert main(["run", "rmsnorm", "--shape", "17x65", "--json"]) == 0
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    for key in ("op", "shape", "variant", "agree", "max_abs_err_vs_oracle", "checksum"):
        assert key in r
    assert r["op"] == "rmsnorm" and r["shape"] == "17x65" and r["variant"] == "ref" and r["agree"] is True
    assert r["checksum"].startswith("sha256:")


@pytest.mark.parametrize("variant", ["whole", "packet", "lanes=4,private=thread", "packet,full_packet=off"])
def test_run_native_agrees_and_matches_ref_checksum(capsys, variant):
    assert main(["run", "masked_softmax", "--shape", "3x63", "--json"]) == 0
    ref = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert main(["run", "masked_softmax", "--shape", "3x63", "--variant", variant, "--json"]) == 0
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert r["agree"] and r["bitwise_equal"] and all(r["guard_bands"].values())
    assert r["checksum"] == ref["checksum"] == r["reference_checksum"]
    assert r["facts"]["scalar_libm_calls"] == 0


def test_run_time_reports_native_entry(capsys):
    assert main(["run", "rope", "--shape", "3x64", "--variant", "packet", "--time", "--json"]) == 0
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert r["time_us"] > 0 and r["boundary"] == "native_entry" and r["agree_after_timing"]


def test_same_seed_same_checksum_across_processes():
    a = last_json(run("run", "swiglu", "--shape", "5x7", "--seed", "42", "--json")[1])
    b = last_json(run("run", "swiglu", "--shape", "5x7", "--seed", "42", "--json")[1])
    c = last_json(run("run", "swiglu", "--shape", "5x7", "--seed", "43", "--json")[1])
    assert a["checksum"] == b["checksum"] != c["checksum"]
    assert a["input_checksums"] == b["input_checksums"]


def test_save_writes_inputs_outputs_and_meta(tmp_path, capsys):
    d = tmp_path / "out"
    assert main(["run", "attention", "--shape", "1x4x2x3x5x4x6", "--variant", "whole", "--save", str(d)]) == 0
    for name, shape in (("q", (1, 4, 3, 4)), ("k", (1, 2, 5, 4)), ("v", (1, 2, 5, 6)), ("o", (1, 4, 3, 6))):
        a = np.load(d / f"{name}.npy")
        assert a.shape == shape and a.dtype == np.float32
    meta = json.loads((d / "meta.json").read_text())
    assert meta["op"] == "attention" and meta["output"] == "o" and meta["agree"] is True


def test_dump_writes_ir_and_assembly(tmp_path, capsys):
    assert main(["run", "rmsnorm", "--shape", "3x63", "--variant", "packet", "--dump", str(tmp_path)]) == 0
    names = sorted(p.suffix for p in tmp_path.iterdir())
    assert ".ll" in names and ".s" in names and ".json" in names
    ll = next(tmp_path.glob("*.ll")).read_text()
    import re
    # no fast-math flag (`fastcc`, the bounds proof's calling convention, is not one)
    assert re.search(r"<(8|16|32) x float>", ll) and not re.search(r"\bfast\b", ll.split("attributes")[0])
    asm = next(tmp_path.glob("*.s")).read_text()
    facts = json.loads(next(tmp_path.glob("*.json")).read_text())
    from cohort.backend import target
    host = target.host()
    # W8: 8-lane hardware vectors, in the host's registers (one 256-bit register on x86, two NEON ones)
    assert facts["vector_width_bits"] == min(256, host.vector_bits), facts
    if host.isa.name == "x86-64":
        assert "%ymm" in asm and "%zmm" not in asm


@pytest.mark.parametrize("argv,msg", [
    (["run", "nope", "--shape", "3x3"], "unknown operator"),
    (["run", "rmsnorm", "--shape", "3y3"], "malformed shape"),
    (["run", "rmsnorm", "--shape", "3x3x3"], "takes a shape"),
    (["run", "rope", "--shape", "3x63"], "even C"),
    (["run", "attention", "--shape", "1x3x2x4x4x4x4"], "multiple of Hkv"),
    (["run", "rmsnorm", "--shape", "3x3", "--variant", "bogus"], "unknown variant"),
    (["run", "rmsnorm", "--shape", "3x3", "--variant", "lanes=3"], "lanes must be"),
    (["run", "rmsnorm", "--shape", "3x3", "--variant", "packet,colour=red"], "unknown knob"),
    (["run", "rmsnorm", "--shape", "3x3", "--seed", "x"], "--seed"),
    (["run", "rmsnorm", "--shape", "3x3", "--time"], "native variant"),
    (["run", "rmsnorm"], "--shape"),
    (["frobnicate"], "invalid choice"),
    # malformed operator forms: one line naming the forms the operator has (never exit 3)
    (["run", "rmsnorm:f64", "--shape", "3x3"], "unknown storage type 'f64'; rmsnorm's forms are rmsnorm, "
                                                "rmsnorm:bf16, rmsnorm:f16"),
    (["run", "rmsnorm:BF16", "--shape", "3x3"], "must be spelt in lower case; rmsnorm's forms are"),
    (["run", "histogram:bf16", "--shape", "3x3"], "histogram's forms are histogram"),
    (["run", "rmsnorm:bf16:f16", "--shape", "3x3"], "more than one storage suffix"),
    (["run", "rmsnorm:", "--shape", "3x3"], "no storage type"),
    (["run", "nope:bf16", "--shape", "3x3"], "unknown operator 'nope'"),
    (["bench", "quick", "--ops", "cumsum:F16"], "--ops: operator form 'cumsum:F16'"),
    (["run", "rmsnorm", "--shape", "3x3", "--variant", "ref,lanes=8"], "ref is the interpreter and takes no knobs"),
])
def test_bad_input_is_one_line_exit_2(argv, msg):
    code, out, err = run(*argv)
    assert code == 2, (code, out, err)
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_kernel_error_is_exit_2(tmp_path):
    script = tmp_path / "k.py"
    script.write_text(
        "import sys\nfrom cohort.cli import main\nfrom cohort.refimpl import ops\n"
        "from cohort import kernel, Buffer, f32, global_id\n"
        "def bad(y: Buffer[f32]):\n    y[global_id()] = 1\n    return 3\n"
        "try:\n    kernel(bad)\nexcept Exception as e:\n    print(type(e).__name__, e, file=sys.stderr); sys.exit(2)\n")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert p.returncode == 2 and "line 7" in p.stderr and "return" in p.stderr


# ---------------------------------------------------------------- the named variant runs

def _pool_dropping_half(monkeypatch):
    """A pool that silently skips the second half of the blocks: a check that goes
    through the pool must see it; a check on the calling thread would not."""
    from cohort.backend import runtime
    calls = []

    def run(self, prepared, grain, participants, entry=None):
        calls.append((grain, participants))
        prepared.run(0, prepared.nblocks // 2)

    monkeypatch.setattr(runtime.WorkerPool, "run", run)
    return calls


@pytest.mark.parametrize("variant", ["packet,grain=1,workers=2", "whole,grain=0,workers=2",
                                     "packet,grain=legacy,workers=2"])
def test_run_checks_the_pool_path_the_knobs_name(capsys, monkeypatch, variant):
    assert main(["run", "rmsnorm", "--shape", "64x256", "--variant", variant, "--json"]) == 0
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert r["agree"] and r["launch_path"].startswith("runtime worker pool: 2 participants")
    calls = _pool_dropping_half(monkeypatch)
    assert main(["run", "rmsnorm", "--shape", "64x256", "--variant", variant, "--json"]) == 1   # no --time
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert calls and not r["agree"] and not r["bitwise_equal"]


def test_run_checks_every_auto_trial(capsys, monkeypatch):
    # auto may well choose the caller for this size; its pool trials are real launches and are checked
    from cohort.backend import runtime
    monkeypatch.setattr(runtime, "_auto", {})     # no choice made earlier in this process
    calls = _pool_dropping_half(monkeypatch)
    assert main(["run", "rmsnorm", "--shape", "64x256", "--variant", "packet,grain=auto,workers=2",
                 "--json"]) == 1
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert calls and not r["agree"] and not r["launches_agree"] and r["launches_checked"] > 1


def test_run_time_times_the_checked_pool_path(capsys, monkeypatch):
    assert main(["run", "rmsnorm", "--shape", "64x256", "--variant", "packet,grain=1,workers=2", "--time",
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert r["boundary"] == "runtime_e2e" and r["agree_after_timing"] and r["timing_iters"] >= 1
    assert main(["run", "rmsnorm", "--shape", "64x256", "--variant", "packet,grain=1,workers=2", "--time"]) == 0
    assert "runtime's native launch entry" in capsys.readouterr().out


def test_workers_has_a_documented_limit():
    from cohort.backend.variant import MAX_WORKERS, VariantError, parse_variant
    assert parse_variant(f"packet,workers={MAX_WORKERS}").workers == MAX_WORKERS
    with pytest.raises(VariantError, match="workers must be from 1 to 256"):
        parse_variant("packet,workers=100000")
    code, out, err = run("run", "rmsnorm", "--shape", "3x3", "--variant", "whole,workers=100000")
    assert code == 2 and "workers must be from 1 to 256" in err and len(err.strip().splitlines()) == 1


def test_ops_lists_every_form():
    code, out, err = run("ops", "--json")
    assert code == 0, err
    forms = {r["op"]: r["forms"] for r in json.loads(out)["operators"]}
    assert forms["rmsnorm"] == ["rmsnorm", "rmsnorm:bf16", "rmsnorm:f16"]
    assert forms["histogram"] == ["histogram"]
    for op, fs in forms.items():        # every listed form is one `cohort run` accepts
        for f in fs:
            ops.get(f)
    code, out, _ = run("ops")
    assert "    forms: histogram\n" in out and "    forms: rmsnorm, rmsnorm:bf16, rmsnorm:f16\n" in out

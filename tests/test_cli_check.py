"""`cohort check FILE.py::KERNEL` and `cohort time` (cli_check.py): a user's own kernel against
every build; exit 0 on agreement, 1 on a failed check, 2 on bad input (one line)."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from cohort.backend import inject
from cohort.cli import main

SOURCE = textwrap.dedent('''
    from cohort import (Buffer, Const, atomic_add, barrier, block_id, f32, global_id, i32, kernel, shared,
                        thread_id)

    @kernel(block=32)
    def block_reduce(x: Buffer[i32], total: Buffer[i32], sums: Buffer[i32]):
        t = thread_id()
        g = global_id()
        s = shared(i32, 32)
        s[t] = x[g] if g < len(x) else 0
        barrier()
        for k in range(5):
            h = 16 >> k
            if t < h:
                s[t] = s[t] + s[t + h]
            barrier()
        if t == 0:
            sums[block_id()] = s[0]
            atomic_add(total, 0, s[0])

    @kernel(block=8)
    def race(x: Buffer[f32], y: Buffer[f32]):
        s = shared(f32, 8)
        s[thread_id()] = x[global_id()] if global_id() < len(x) else 0.0
        if global_id() < len(y):
            y[global_id()] = s[7 - thread_id()]

    @kernel(block=8)
    def halve(x: Buffer[i32], y: Buffer[i32], bias: i32, K: Const[int]):
        g = global_id()
        y[g] = x[g] // 2 + bias + K

    not_a_kernel = 3
''')


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "mykernels.py"
    p.write_text(SOURCE)
    return str(p)


def test_a_partial_block_reduction_agrees_in_every_build(kfile, capsys):
    code = main(["check", f"{kfile}::block_reduce", "--n", "1003", "--arg", "total=1", "--arg", "sums=32",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"], out
    ran = [b["variant"] for b in out["builds"] if b["status"] == "ok"]
    assert {"whole", "lanes=4", "packet", "lanes=16", "packet,grain=1,workers=2"} <= set(ran)
    assert out["summary"].startswith("ok block_reduce n=1003: 9 builds agree")


def test_a_race_is_a_failed_check_in_the_interpreters_words(kfile, capsys):
    assert main(["check", f"{kfile}::race", "--n", "20"]) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith("FAIL race n=20: the interpreter rejects this launch: kernel race, line")
    assert "load of shared s[7] races with the store by thread 7" in line


def test_a_build_that_disagrees_fails_the_check(kfile, capsys):
    args = ["check", f"{kfile}::halve", "--n", "40", "--arg", "bias=3", "--const", "K=1", "--variant", "whole",
            "--variant", "packet", "--seed", "4"]
    assert main(args) == 0
    capsys.readouterr()
    # i32 inputs are drawn in [0, n): given ones, negative, so that // 2's rounding shows
    with inject.inject_bug_TESTING_ONLY("div_pow2_shift"):
        assert main(args + ["--arg", "x=@" + _negative_npy(kfile)]) == 1
    out = capsys.readouterr().out
    assert "FAIL halve n=40: 2 of 2 builds disagree with the interpreter (whole, packet)" in out
    assert "mismatch: y[" in out and "native" in out and "vs reference" in out


def _negative_npy(kfile):
    path = kfile.replace(".py", "_x.npy")
    np.save(path, np.arange(-20, 20, dtype=np.int32))
    return path


@pytest.mark.parametrize("argv, message", [
    (["::race", "--n", "8"], "expected FILE.py::KERNEL"),
    (["nofile.py::race", "--n", "8"], "nofile.py: no such file"),
    (["{f}::nope", "--n", "8"], "defines no 'nope'; its kernels: block_reduce, halve, race"),
    (["{f}::not_a_kernel", "--n", "8"], "has int, not a @kernel, for 'not_a_kernel'"),
    (["{f}::halve", "--n", "8", "--arg", "bias=1"], "--const K=V is missing"),
    (["{f}::halve", "--n", "8", "--const", "K=1"], "--arg bias=VALUE is missing (a i32 scalar)"),
    (["{f}::halve", "--n", "8", "--const", "K=1", "--arg", "bias=1", "--arg", "x=8:f32"],
     "--arg x: the kernel's x is i32, not f32"),
    (["{f}::halve", "--n", "8", "--const", "K=1", "--arg", "bias=1", "--arg", "q=8"],
     "--arg q: the kernel has no buffer or scalar of that name"),
    (["{f}::halve", "--n", "8", "--const", "K=1", "--arg", "bias=x"], "--arg bias: expected a i32 value"),
    (["{f}::halve", "--n", "-1", "--const", "K=1", "--arg", "bias=1"], "--n must be from 0 to"),
    (["{f}::halve", "--n", "8", "--const", "K=1", "--arg", "bias=1", "--variant", "lanes=3"],
     "lanes must be 1, 4, 8 or 16"),
])
def test_bad_input_is_one_line_and_exit_2(kfile, capsys, argv, message):
    argv = [a.replace("{f}", kfile) for a in argv]
    assert main(["check"] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_a_module_that_fails_to_import_is_bad_input(tmp_path, capsys):
    p = tmp_path / "broken.py"
    p.write_text("import numpy\nraise RuntimeError('boom')\n")
    assert main(["check", f"{p}::k", "--n", "8"]) == 2
    assert "importing it raised RuntimeError: boom" in capsys.readouterr().err
    p.write_text("from cohort import *\n@kernel\ndef k(x: Buffer[f32]):\n    x[global_id()] = undefined_name\n")
    assert main(["check", f"{p}::k", "--n", "8"]) == 2
    assert "kernel k, line 4" in capsys.readouterr().err


def test_time_checks_then_times_the_native_entry(kfile, capsys):
    assert main(["time", f"{kfile}::block_reduce", "--n", "1003", "--arg", "total=1", "--arg", "sums=32",
                 "--samples", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["boundary"] == "native_entry" and out["time_us"] > 0 and len(out["samples_us"]) == 3
    assert main(["time", f"{kfile}::race", "--n", "16"]) == 1
    assert "(not timed)" in capsys.readouterr().out


def test_a_kernel_made_by_exec_gets_a_clear_message():
    from cohort import KernelError
    with pytest.raises(KernelError, match=r"kernel k: @kernel parses the Python source of k\(\), and Python has "
                                          r"none for it \(defined at the interactive prompt or by exec: <string>\)"):
        exec("from cohort import *\n@kernel\ndef k(x: Buffer[f32]):\n    x[global_id()] = 1.0\n", {})


@pytest.mark.parametrize("command", ["check", "time"])
def test_each_variant_text_is_parsed_once(command, kfile, capsys, monkeypatch):
    # the CLI parses --variant once and hands the builds the parsed Variant (issue: one parse)
    from cohort.backend import compiler, variant
    calls = []
    real = variant.parse_variant

    def counting(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(variant, "parse_variant", counting)
    monkeypatch.setattr(compiler, "parse_variant", counting)
    compiler._parse_variant_cached.cache_clear()
    specs = ["packet", "lanes=4,grain=1,workers=2"] if command == "check" else ["lanes=4"]
    args = [command, f"{kfile}::halve", "--n", "40", "--arg", "bias=3", "--const", "K=1"]
    for s in specs:
        args += ["--variant", s]
    assert main(args + (["--samples", "3"] if command == "time" else [])) == 0
    assert sorted(calls) == sorted(specs), calls

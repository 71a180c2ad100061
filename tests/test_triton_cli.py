"""python -m cohort.triton SCRIPT: runs an unchanged script's launches on cohort; one line and an
exit code for every failure."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")

SCRIPT = textwrap.dedent('''
    import sys
    import torch, triton, triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    n = int(sys.argv[1])
    x, y = torch.arange(n, dtype=torch.float32), torch.ones(n)
    out = torch.empty(n)
    grid = (triton.cdiv(n, 64),) if sys.argv[2] == "masked" else (triton.cdiv(n, 64) + 1,)
    add_kernel[grid](x, y, out, n if sys.argv[2] == "masked" else n + 64, BLOCK=64)
    print("sum", out.sum().item())
''')


def _run(tmp_path, *args):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "cohort.triton", *[str(a).replace("SCRIPT", str(path)) for a in args]],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("mode", ["reference", "native", "check"])
def test_runs_script_unchanged(tmp_path, mode):
    r = _run(tmp_path, "--mode", mode, "SCRIPT", 100, "masked")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"sum {float(sum(range(100)) + 100)}"


@pytest.mark.parametrize("mode", ["reference", "native", "check"])
def test_kernel_error_is_one_line_exit_1(tmp_path, mode):
    r = _run(tmp_path, "--mode", mode, "SCRIPT", 100, "unmasked")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "load out of bounds: argument `x_ptr` offset 100" in r.stderr


def test_bad_usage_exit_2(tmp_path):
    r = _run(tmp_path, "--mode", "fast", "SCRIPT", 1, "masked")
    assert r.returncode == 2 and "mode: expected one of 'reference', 'native', 'check', got 'fast'" in r.stderr
    r = _run(tmp_path, tmp_path / "missing.py")
    assert r.returncode == 2 and "not found" in r.stderr

"""examples/triton_kernels.py, an unchanged Triton script, runs under `python -m cohort.triton`
and every kernel in it agrees with torch."""
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "triton_kernels.py"


@pytest.mark.parametrize("mode", ["reference", "native", "check"])
def test_example_script_every_kernel_ok(mode):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "cohort.triton", "--mode", mode, str(EXAMPLE)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    kernels = lines[:-1]
    assert len(kernels) == 12, r.stdout
    assert all(line.endswith("  OK") for line in kernels), r.stdout
    assert lines[-1] == "12 of 12 kernels OK"

"""cohort imports without triton and torch; cohort.triton says in one line how to get them."""
import subprocess
import sys

CODE = """
import sys
sys.modules['triton'] = None      # as if not installed
sys.modules['torch'] = None
import cohort, cohort.refimpl.interpreter, cohort.triton
try:
    cohort.triton.activate()
except ImportError as e:
    print('MSG', e)
"""


def test_core_and_package_import_without_triton_or_torch():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "MSG cohort.triton needs triton and torch: pip install -e '.[triton]'" in r.stdout

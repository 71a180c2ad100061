"""A load never reads past its buffer's end.

With every lane on, a stride-k load reads its span whole (k*W elements from the first
lane's) and keeps every k-th; the span's last k - 1 elements are past the last lane's,
so at a buffer's end the span is read with a mask instead (memory.span_inside). Under a
mask, a contiguous load is a plain load only when every lane is on, else masked. Here
each input ends flush against a page mapped PROT_NONE: one element read past the end
faults. The launch runs in a child process, so a planted overread shows as a crash
(SIGSEGV) there, not here; guard bands (DESIGN §8) catch stray writes only."""
import os
import signal
import subprocess
import sys

import pytest

from cohort import Buffer, f32, global_id, kernel
from cohort.backend.inject import BUGS


@kernel(block=16)
def pairs(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[2 * i] = x[2 * i] * 2.0 - x[2 * i + 1]
    y[2 * i + 1] = x[2 * i + 1] * 3.0 + x[2 * i]


@kernel(block=16)
def quads(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = (x[4 * i + 3] - x[4 * i + 2]) * x[4 * i + 1]


@kernel(block=16)
def shifted(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i + 3] * 2.0 if i + 3 < len(x) else -1.0    # masked off in the last packet's last 3 lanes


_CHILD = r"""
import ctypes, mmap, sys
import numpy as np
sys.path.insert(0, {tests!r})
from cohort.backend.compiler import compile_kernel
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.refimpl.interpreter import interpret
from test_no_overread import pairs, quads, shifted

PAGE = mmap.PAGESIZE
regions = []


def at_page_end(values):
    # a fresh mapping per array: the array's last byte is the last before a PROT_NONE page
    nbytes = values.nbytes
    pages = (nbytes + PAGE - 1) // PAGE + 1
    m = mmap.mmap(-1, pages * PAGE)
    regions.append(m)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(base + (pages - 1) * PAGE), PAGE, 0) == 0
    a = np.frombuffer(m, np.float32, values.size, (pages - 1) * PAGE - nbytes)
    a[:] = values
    return a


def run(k, n, xlen, ylen, variant):
    x = np.arange(1, xlen + 1, dtype=np.float32) * np.float32(0.37)
    want = np.zeros(ylen, np.float32)
    interpret(k.ir, n, {{"x": x.copy(), "y": want}}, {{}})
    ck = compile_kernel(k, {{}}, variant, n=n)
    xs = at_page_end(x)
    y = at_page_end(np.zeros(ylen, np.float32))
    ck.prepare(n, {{"x": xs, "y": y}}).run()
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32)), (k, variant)


CASES = {{"pairs": (pairs, 64, 128, 128), "quads": (quads, 48, 192, 48), "shifted": (shifted, 64, 64, 64)}}
with inject_bug_TESTING_ONLY(*{bugs!r}):
    for lanes in (4, 8, 16):
        variant = f"lanes={{lanes}},full_packet=on,predicated=on,private=cohort"
        for name in {cases!r}:
            run(*CASES[name], variant)
print("read inside every buffer")
"""
KERNELS = ("pairs", "quads", "shifted")


def _child(bugs=(), cases=KERNELS):
    tests = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(tests)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("COHORT_OBJECT_CACHE", None)
    return subprocess.run([sys.executable, "-c", _CHILD.format(tests=tests, bugs=tuple(bugs), cases=tuple(cases))],
                          capture_output=True, text=True, timeout=300, env=env)


def test_strided_loads_stay_inside_their_buffers():
    out = _child()
    assert out.returncode == 0, out.stderr[-3000:]
    assert "read inside every buffer" in out.stdout


@pytest.mark.skipif(not hasattr(signal, "SIGSEGV"), reason="needs POSIX signals")
@pytest.mark.parametrize("bug,case", [("span_overread", "pairs"), ("span_overread", "quads"),
                                      ("masked_load_all_on_any", "shifted")])
def test_planted_overread_faults_at_a_buffers_end(bug, case):
    """The check above can fail: a strided span read whole even at the end, or a masked
    load read whole when some lane is off (shifted's last packet), and the child faults."""
    assert bug in BUGS
    out = _child((bug,), (case,))
    # (macOS reports a touch of a PROT_NONE page as SIGBUS)
    faults = (-signal.SIGSEGV, -getattr(signal, "SIGBUS", signal.SIGSEGV))
    assert out.returncode in faults, (out.returncode, out.stdout, out.stderr[-2000:])

"""Eager PyTorch as a column: ATen's CPU kernels called from native code (DESIGN §6).

A PyTorch user picks the faster of eager torch and torch.compile, so a table that shows
only Inductor can hide a peer that wins. eager_entry.cpp writes each operator as its
OpBinding.eager (cohort/torch/binding.py) does in Python - the same ATen calls, through the
dispatcher, with inference mode on - and is built once per torch version and compiler against torch's own
headers and libraries (cached). Its `cohort_eager_run(state)` has the native entry's shape,
so the native timer calls it in its loop like our entries and Inductor's kernels: no Python
in the timed path. Each call allocates its output, as the eager call does.

Python's eager call (the same functions, inductor_refs.reference, from a Python loop) is the
python_api boundary's eager column.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Optional

import numpy as np

from .. import knobs
from ..refimpl import ops
from .inductor_refs import InductorUnavailable, import_torch

SOURCE = os.path.join(os.path.dirname(__file__), "eager_entry.cpp")
_DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.bool_): 2}
_lock = threading.Lock()
_lib = {}


class EagerUnavailable(RuntimeError):
    """The eager entry cannot be built or cannot run this operator here (one-line reason)."""


def cache_dir() -> str:
    base = knobs.XDG_CACHE_HOME.get() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cohort", "eager")


def _compiler() -> str:
    for name in (knobs.CXX.get(), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise EagerUnavailable("no C++ compiler found (set CXX); the eager column builds against torch's headers")


def _build_command(torch, cxx: str, out: str) -> list:
    from torch.utils import cpp_extension
    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    incs = [f"-I{p}" for p in cpp_extension.include_paths()]
    libdir = cpp_extension.library_paths()[0]
    return [cxx, "-O2", "-std=c++20", "-fPIC", "-shared", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *incs,
            SOURCE, f"-L{libdir}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{libdir}", "-o", out]


def library() -> ctypes.CDLL:
    """The built eager entry, loaded (built on first use; ~15 s)."""
    with _lock:
        if "lib" in _lib:
            return _lib["lib"]
        torch = import_torch()
        cxx = _compiler()
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
        with open(SOURCE, "rb") as f:
            source = f.read()
        key = hashlib.sha256(source + repr((torch.__version__, version, _build_command(torch, cxx, "-"))).encode())
        folder = os.path.join(cache_dir(), key.hexdigest()[:20])
        path = os.path.join(folder, "cohort_eager.so")
        if not os.path.exists(path):
            try:
                os.makedirs(folder, exist_ok=True)
                fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
                os.close(fd)
            except OSError as e:
                raise EagerUnavailable(f"cannot write the eager entry's build into {folder}: {e.strerror}") from None
            done = subprocess.run(_build_command(torch, cxx, tmp), capture_output=True, text=True)
            if done.returncode != 0:
                os.unlink(tmp)
                last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise EagerUnavailable(f"building the eager entry failed: {last[:200]}")
            os.replace(tmp, path)     # atomic: a concurrent build publishes the same bytes
        lib = ctypes.CDLL(path)
        lib.cohort_eager_ops.restype = ctypes.c_char_p
        lib.cohort_eager_new.restype = ctypes.c_void_p
        lib.cohort_eager_new.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_char_p, ctypes.c_int64]
        lib.cohort_eager_run.argtypes = [ctypes.c_void_p]
        lib.cohort_eager_errors.restype = ctypes.c_int64
        lib.cohort_eager_errors.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
        lib.cohort_eager_output.restype = ctypes.c_int64
        lib.cohort_eager_output.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        lib.cohort_eager_fill.restype = ctypes.c_int64
        lib.cohort_eager_fill.argtypes = [ctypes.c_void_p, ctypes.c_double]
        lib.cohort_eager_free.argtypes = [ctypes.c_void_p]
        _lib["lib"] = lib
        _lib["path"] = path
        return lib


def operators() -> list:
    """The operators the eager entry has (by name). A twin is optional: an operator without one
    gets no native eager cell (EagerUnavailable names the file to add it to), and the tables'
    best peer is Inductor alone there; every twin is held to its Python code by a test."""
    return library().cohort_eager_ops().decode().split(",")


class EagerEntry:
    """One operator at one shape in eager ATen, on copies of `inputs` (held here).

    `fn_address`/`arg_address` are what the native timer calls (`cohort_eager_run(state)`);
    `overhead_address` is the same call shape doing nothing. `threads`: ATen's intra-op
    thread count for the process (torch.set_num_threads; None keeps torch's)."""

    kind = "eager-aten"

    def __init__(self, op_name: str, shape, inputs: dict, threads: Optional[int] = 1):
        torch = import_torch()
        lib = library()
        self.op = ops.get(op_name)
        if op_name not in operators():
            raise EagerUnavailable(f"the eager entry has no {op_name} (no C++ twin in audit/eager_entry.cpp)")
        self.op_name, self.shape = op_name, tuple(int(s) for s in shape)
        if threads is not None:
            torch.set_num_threads(int(threads))
        self.threads = torch.get_num_threads()
        self.capability = torch.backends.cpu.get_cpu_capability()   # the vector ISA ATen dispatches to
        self.inputs = [np.ascontiguousarray(inputs[n]).copy() for n in self.op.inputs]
        for n, a in zip(self.op.inputs, self.inputs):
            if a.dtype not in _DTYPE_CODES:
                raise EagerUnavailable(f"the eager entry takes float32, int32 and bool inputs; {n} is {a.dtype}")
        out_name = self.op.output
        self.out_shape = tuple(self.op.buffer_shapes(self.shape)[out_name])
        self.out_dtype = np.dtype(self.op.kernel.ir.param(out_name).dtype.np)
        ptrs = (ctypes.c_void_p * len(self.inputs))(*[a.ctypes.data for a in self.inputs])
        ndims = np.array([a.ndim for a in self.inputs], np.int64)
        dims = np.array([d for a in self.inputs for d in a.shape] or [0], np.int64)
        codes = np.array([_DTYPE_CODES[a.dtype] for a in self.inputs], np.int32)
        shp = np.array(self.shape or (0,), np.int64)
        err = ctypes.create_string_buffer(512)
        state = lib.cohort_eager_new(op_name.encode(), len(self.inputs), ptrs, ndims.ctypes.data,
                                     dims.ctypes.data, codes.ctypes.data, shp.ctypes.data, len(self.shape), err, 512)
        if not state:
            raise EagerUnavailable(f"eager entry for {op_name}: {err.value.decode(errors='replace')}")
        self._lib, self.state = lib, state
        self.fn_address = ctypes.cast(lib.cohort_eager_run, ctypes.c_void_p).value
        self.overhead_address = ctypes.cast(lib.cohort_eager_overhead, ctypes.c_void_p).value
        self.arg_address = state
        self.run()
        if self.errors():
            raise EagerUnavailable(f"eager {op_name} at {ops.fmt_shape(self.shape)}: {self.last_error()}")

    def run(self) -> None:
        self._lib.cohort_eager_run(self.state)

    def errors(self) -> int:
        return int(self._lib.cohort_eager_errors(self.state, None, 0))

    def last_error(self) -> str:
        err = ctypes.create_string_buffer(512)
        self._lib.cohort_eager_errors(self.state, err, 512)
        return err.value.decode(errors="replace").splitlines()[0] if err.value else ""

    def output(self) -> np.ndarray:
        """The last call's output (logical shape, the operator's output dtype)."""
        have = int(self._lib.cohort_eager_output(self.state, None, 0))
        if have == -1:
            raise RuntimeError("the eager entry has not run yet")
        if have < 0:
            raise RuntimeError(f"eager {self.op_name}: reading the output failed: {self.last_error()}")
        out = np.empty(max(have, 1), np.uint8)
        self._lib.cohort_eager_output(self.state, out.ctypes.data, have)
        n = int(np.prod(self.out_shape))
        if self.out_dtype.itemsize * n != have:
            raise RuntimeError(f"eager {self.op_name} returned {have} bytes for an output of {n} "
                               f"{self.out_dtype} elements")
        return out[:have].view(self.out_dtype).reshape(self.out_shape).copy()

    def poison(self, value: float) -> None:
        """Overwrite the last output with `value`, so a later read sees only a new call's writes
        (not when eager returned a view of an input, which it would overwrite: left as it is)."""
        if self._lib.cohort_eager_fill(self.state, float(value)) < 0:
            raise RuntimeError(f"eager {self.op_name}: poisoning the output failed: {self.last_error()}")

    def close(self) -> None:
        if self.state:
            self._lib.cohort_eager_free(self.state)
            self.state = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def entry(op_name: str, shape, seed: int = 0, **kw) -> EagerEntry:
    """An EagerEntry on the operator's seeded inputs."""
    op = ops.get(op_name)
    return EagerEntry(op_name, shape, op.make_inputs(tuple(shape), seed), **kw)


__all__ = ["EagerUnavailable", "EagerEntry", "InductorUnavailable", "library", "operators", "entry", "cache_dir"]

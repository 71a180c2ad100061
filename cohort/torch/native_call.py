"""The native call path: cohort.torch's row and elementwise ops, rope and attention registered
with the dispatcher from C++ (native_call.cpp), so a call on plain float32 CPU tensors with no
gradient to record - eager, or from a torch.compile'd graph - reaches the native entry with no
Python frame (docs/torch/call_path.md).

The library is built against torch's own headers and libraries with the C++ compiler that
builds the eager audit column (knobs.CXX, else c++/g++/clang++), and cached per torch version,
compiler and source under $XDG_CACHE_HOME/cohort/torch_call (a build takes 20-40 s of one
core). Which ops it takes is each TorchOp record's `native` description (binding.NativeCall);
the op list is binding.TORCH_OPS, nowhere else.

When the build happens (COHORT_TORCH_CALL, knobs.py):
    auto    at `import cohort.torch`: a cached build is loaded and registered (milliseconds);
            without one, the build starts in a background process of its own (it finishes even
            if this one exits first) and this process keeps the Python path (a registration
            racing other threads' calls is not safe: the dispatcher reads its tables without a
            lock), so the native path starts with the next process. A build that failed is not
            retried (its reason is in stats()) until COHORT_TORCH_CALL=native or enable().
            No C++ compiler: the Python path.
    native  at import, built in the foreground when not cached (the first import waits).
    python  never: the Python kernels (binding.python_kernels) stay.
A build or load that fails leaves the Python path with the reason in stats() - never an
exception from an op call. `enable()` builds (or waits for the build) and switches this
process over at once; `disable()` switches back. Call them before other threads run ops.

What the C++ kernels do not take - a first launch of a shape, another dtype or layout, a
tensor subclass, FakeTensors, a gradient to record, a recorded error, a sanitize build or a
pool route - they hand to the Python kernels registered on the Python path, unchanged, so
results, errors and exception types are the Python path's (tests/test_torch_native_call.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from typing import Optional

import torch

from .. import knobs
from . import binding, launch

SOURCE = os.path.join(os.path.dirname(__file__), "native_call.cpp")
POOL = launch.POOL         # blocks handed to C++ per launch shape (more calls at once run in Python)

_state = {"call_path": "python", "why": "not started"}
_lock = threading.Lock()
_lib: list = []            # the loaded library, once
_blocks: dict = {}         # handle -> (PreparedLaunch, its (p, mv, err, fn, address) tuple): kept alive for C++
_handles = itertools.count()
_variants: dict = {}       # id -> Variant of every token C++ has keyed a block by (kept alive: ids stay unique)


class NativeCallUnavailable(RuntimeError):
    """The native call path cannot be built or loaded here (one-line reason)."""


def cache_dir() -> str:
    base = knobs.XDG_CACHE_HOME.get() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cohort", "torch_call")


def compiler() -> Optional[str]:
    for name in (knobs.CXX.get(), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _command(cxx: str, out: str) -> list:
    from torch.utils import cpp_extension
    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    incs = [f"-I{p}" for p in (*cpp_extension.include_paths(), sysconfig.get_paths()["include"])]
    libdir = cpp_extension.library_paths()[0]
    return [cxx, "-O2", "-std=c++17", "-fPIC", "-shared", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *incs, SOURCE,
            f"-L{libdir}", "-ltorch_python", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{libdir}", "-o", out]


def library_path() -> str:
    """Where the build for this torch, compiler and source is (or will be) cached."""
    cxx = compiler()
    if cxx is None:
        raise NativeCallUnavailable("no C++ compiler found (set CXX)")
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    with open(SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256(source + repr((torch.__version__, sys.version_info[:2], version,
                                        _command(cxx, "-"))).encode()).hexdigest()[:20]
    return os.path.join(cache_dir(), key, "cohort_torch_call.so")


# The build runs in a process of its own (a few lines of Python around the compiler, importing
# nothing of cohort), so a background build finishes even when the process that started it
# exits first; it publishes the library atomically, or a `.failed` file with the compiler's
# errors, and removes its lock file (one build per library at a time, across processes).
_BUILD_SCRIPT = """
import os, subprocess, sys
tmp, path, lock = sys.argv[1:4]
done = subprocess.run(sys.argv[4:], capture_output=True, text=True)
if done.returncode == 0:
    os.replace(tmp, path)
else:
    if os.path.exists(tmp):
        os.unlink(tmp)
    with open(path + ".failed", "w") as f:
        f.write(done.stderr[-4000:] or "(no output)")
os.unlink(lock)
"""
STALE_LOCK_SECONDS = 600


def _start_build(path: str, retry: bool) -> Optional[subprocess.Popen]:
    """Start building `path` (None: another process is building it, or it failed before and
    retry is off)."""
    folder, lock = os.path.dirname(path), path + ".building"
    if os.path.exists(path + ".failed") and not retry:
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        for _ in range(2):
            try:
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                if time.time() - os.path.getmtime(lock) < STALE_LOCK_SECONDS:
                    return None
                os.unlink(lock)               # left by a build that died
        else:
            return None
        if os.path.exists(path + ".failed"):
            os.unlink(path + ".failed")
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
    except OSError as e:
        raise NativeCallUnavailable(f"cannot write the build into {folder}: {e.strerror}") from None
    return subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, tmp, path, lock, *_command(compiler(), tmp)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _failure(path: str) -> Optional[str]:
    """The one-line reason of a failed build of `path` (None: none failed)."""
    try:
        with open(path + ".failed") as f:
            text = f.read()
    except OSError:
        return None
    errors = [ln for ln in text.splitlines() if "error" in ln] or text.strip().splitlines() or ["(no output)"]
    return f"the build failed: {errors[0].strip()[:200]}"


def build(wait_seconds: float = STALE_LOCK_SECONDS) -> str:
    """The library's path, built first when not cached (20-40 s; waiting for another process's
    build of it when one is under way); raises NativeCallUnavailable."""
    path = library_path()
    if os.path.exists(path):
        return path
    proc = _start_build(path, retry=True)
    if proc is not None:
        proc.wait()
    else:
        deadline = time.time() + wait_seconds
        while os.path.exists(path + ".building") and time.time() < deadline:
            time.sleep(0.2)
    if os.path.exists(path):
        return path
    raise NativeCallUnavailable(_failure(path) or f"the build did not finish within {wait_seconds:.0f} s")


def _load(path: str):
    if _lib:
        return _lib[0]
    lib = ctypes.PyDLL(path)          # PyDLL: every call holds the GIL (the functions touch Python objects)
    lib.cohort_native_init.argtypes = [ctypes.py_object]
    lib.cohort_native_set_default.argtypes = [ctypes.c_size_t]
    lib.cohort_native_pause.argtypes = [ctypes.c_int]
    lib.cohort_native_set_scoped.argtypes = [ctypes.c_int]
    lib.cohort_native_launches.restype = ctypes.c_int64
    lib.cohort_native_register.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int] + [ctypes.py_object] * 4
    lib.cohort_native_register_rope_hf.argtypes = [ctypes.c_char_p, ctypes.py_object, ctypes.py_object,
                                                   ctypes.c_char_p, ctypes.c_char_p]
    lib.cohort_native_wants.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.cohort_native_donate.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    lib.cohort_native_init(launch.variant_contextvar())
    _lib.append(lib)
    return lib


# ---------------------------------------------------------------- called from C++ (with the GIL)

def _miss(op_name: str):
    """The miss handler of op `op_name`: f(pool address, variant token, *args) runs the Python
    implementation and hands the launch's pooled block to C++ for that pool."""
    impl = binding.PY_KERNELS[op_name][0] or binding.TORCH_OPS[op_name].impl
    constants = binding.TORCH_OPS[op_name].native.constants

    def miss(address, token, *args):
        with launch.recording(pause=False) as launches:
            y = impl(*args)
        if len(launches) == 1 and id(launch.current_variant()) == token and _lib[0].cohort_native_wants(address, POOL):
            run, n, tensors, scalars = launches[0]
            got = run.take(n, tensors, scalars)
            if got is not None and not _donate(address, run, tensors, args, y, got, constants):
                run.give_back(n, tensors, scalars, got)
        return y

    miss.__name__ = f"{op_name}_native_miss"
    return miss


def _donate(address, run, tensors, args, y, got, constants) -> bool:
    """Hand block `got` to the C++ pool at `address`; False when it stays Python's."""
    p, mv, err, fn, addr = got
    if fn is None:                         # a pool route or sanitize build: stays in Python
        return False
    sources = [*args, y]
    writes = []
    for slot, t in zip(run.pointer_slots, tensors):
        src = next((i for i, a in enumerate(sources) if a is t), None)
        if src is None:
            if any(t is c for c in constants):     # its pointer stays in the block
                continue
            return False                   # a tensor the implementation made: not a fast-path call
        writes += (slot, src)
    keep_variant(launch.current_variant())
    handle = next(_handles)                # (atomic: two threads may hand blocks over at once)
    _blocks[handle] = (p, got)
    w = (ctypes.c_int32 * len(writes))(*writes)
    sizes = (ctypes.c_int64 * max(y.dim(), 1))(*y.shape)
    _lib[0].cohort_native_donate(address, p.address, p.err.ctypes.data, ctypes.cast(fn, ctypes.c_void_p).value,
                                 handle, w, len(writes) // 2, sizes, y.dim())
    return True


def keep_variant(v):
    """Keep `v` alive: C++ keys blocks by the variant's id."""
    _variants[id(v)] = v


def _from_raw(kernel):
    """`kernel(keyset, *args)` called as f(keyset's raw repr, *args), as C++ hands it over."""
    from_raw = torch._C.DispatchKeySet.from_raw_repr

    def autograd(raw, *args):
        return kernel(from_raw(raw), *args)

    autograd.__name__ = kernel.__name__
    return autograd


def _recover(handle: int) -> int:
    """A block's launch recorded an error: raise it as the Python path does, or rerun it with the
    checked build; returns the entry to call from now on."""
    p = _blocks[handle][0]
    p.raise_error(rerun=p.run)
    return ctypes.cast(p.entry_fn, ctypes.c_void_p).value


# ---------------------------------------------------------------- switching

def _native_ops() -> list:
    return [op for op in binding.TORCH_OPS.values() if op.native is not None and op.cpu_kernel and op.autograd_cpu]


def enable() -> dict:
    """Build (or wait for the background build), load and register the C++ kernels in this process;
    the stats() dictionary after it. Raises NativeCallUnavailable (and the Python path stays)."""
    with _lock:
        if _state["call_path"] == "native":
            return state()
        try:
            lib = _load(build())
        except NativeCallUnavailable as e:
            _state.update(call_path="python", why=str(e))
            raise
        except OSError as e:
            _state.update(call_path="python", why=f"loading the build failed: {e}")
            raise NativeCallUnavailable(_state["why"]) from None
        launch.native_hooks(lib, keep_variant)
        for op in _native_ops():
            binding.drop_python_kernels(op.name)
            impl, autograd = binding.PY_KERNELS[op.name]
            if op.native.composite == "rope_hf":      # its C++ kernel launches through the native rope op
                lib.cohort_native_register_rope_hf(op.name.encode(), impl, _from_raw(autograd), b"rope",
                                                   op.native.message.encode())
                continue
            lib.cohort_native_register(op.name.encode(), op.native.roles.encode(), int(op.native.row), impl,
                                       _from_raw(autograd), _miss(op.name), _recover)
        binding.NATIVE_ON[0] = True
        _state.update(call_path="native", why="")
        return state()


def disable(why: str = "disabled in this process") -> dict:
    """Back to the Python kernels (the C++ ones unregistered, their blocks dropped)."""
    with _lock:
        if _state["call_path"] == "native":
            lib = _lib[0]
            binding.NATIVE_ON[0] = False
            launch.native_hooks(None)
            lib.cohort_native_unregister()
            _blocks.clear()
            for op in _native_ops():
                binding.python_kernels(op.name)
        _state.update(call_path="python", why=why)
        return state()


def startup():
    """At import of cohort.torch: what COHORT_TORCH_CALL says (module notes)."""
    mode = knobs.TORCH_CALL.get()
    if mode == "python":
        _state.update(call_path="python", why="COHORT_TORCH_CALL=python")
        return
    try:
        path = library_path()
        if mode == "native" or os.path.exists(path):
            enable()
            return
        failed = _failure(path)
        if failed:
            _state["why"] = f"{failed} (COHORT_TORCH_CALL=native or native_call.enable() builds again)"
            return
        _start_build(path, retry=False)
        _state["why"] = "building in the background: the native path starts with the next process (or enable())"
    except NativeCallUnavailable as e:
        _state.update(call_path="python", why=str(e))


class measure_contextvar_read:
    """Benchmarks only: inside the block every C++ call reads the variant from the contextvar with
    the GIL (PyGILState_Ensure + PyContextVar_Get), as after any `with variant(...)`; on exit the
    process token again, which is exact only while no `with variant` block is open anywhere
    (benchmarks/bench_torch_call.py --part layers compares the two)."""

    def __enter__(self):
        _lib[0].cohort_native_set_scoped(1)

    def __exit__(self, *exc):
        _lib[0].cohort_native_set_scoped(1 if launch.variant_scoped() else 0)
        return False


def state() -> dict:
    """{'call_path': 'native' | 'python', 'call_path_why': why python ('' when native),
    'native_ops': the ops whose CPU calls the C++ kernels take (() on the Python path),
    'native_launches': launches the C++ kernels made (rope_hf's two rope launches count two)}."""
    n = _lib[0].cohort_native_launches() if _lib else 0
    native = _state["call_path"] == "native"
    return {"call_path": _state["call_path"], "call_path_why": _state["why"],
            "native_ops": tuple(op.name for op in _native_ops()) if native else (), "native_launches": int(n)}


launch.call_path_state[0] = state

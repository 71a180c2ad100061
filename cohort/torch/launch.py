"""Builds and launches for torch tensors: the variant setting, one build per
(kernel, constants, variant), and the launch that writes torch tensors' data
pointers into a build's argument block.

The ops in this package have already checked what `check_args` would check
(dtype, device, layout, sizes) and allocated the output themselves, so a
launch hands each tensor's data pointer and length, and each scalar, to the
build's argument-block writer (backend/launch_plan.py, LaunchPlan.write),
without check_args. Inputs may share memory with each other (they are only
read); the output is a fresh tensor and shares memory with nothing. Argument
blocks are pooled per build and launch shape (n, lengths, scalars): a launch of
a shape seen before writes only the data pointers, at the slots the plan names
(LaunchPlan.pointer_slots), and keeps the block's proof, which never reads a
pointer (Launcher.__call__). How a launch runs (calling
thread, pool, auto) is the build's launch policy (backend/launch_policy.py),
asked through PreparedLaunch.caller_entry and CompiledKernel.run_prepared.
`launcher` is `build` for the ops' calls: the constants as a tuple of
(name, value) pairs, one dictionary look-up.
"""
from __future__ import annotations

import contextvars
import ctypes
import math
import threading
import time
from typing import Optional

import torch

from ..backend.compiler import CompiledKernel, PreparedLaunch, compile_kernel
from ..backend.variant import Variant, VariantError, parse_variant, register_packet
from ..refimpl.ir import DType


def _host_default() -> str:
    """cohort.torch's default variant, as a spelling: packets that fill one of the host's vector
    registers, on the caller's thread. 16 lanes where registers are 512 bits wide (matmul's
    32-column form and attention's rows32k8 and fold32 need them; docs/kernels.md, 'attention's forms',
    and docs/README.md, 'matmul at the FMA limit'), else `packet` (8 lanes: one 256-bit
    register). Every variant gives the same bits; only the builds differ. A kernel whose block
    does not hold whole packets of the default's lanes (a kernel_op of block 8) runs `packet`
    (build); a variant a user chose is never changed."""
    from ..backend import target
    return register_packet(target.host().vector_bits)


DEFAULT_SPEC = _host_default()
DEFAULT_VARIANT = parse_variant(DEFAULT_SPEC).label      # its label, as current_variant().label spells it
_current: contextvars.ContextVar = contextvars.ContextVar("cohort_torch_variant", default=None)
HOST_DEFAULT = parse_variant(DEFAULT_SPEC)      # the default's one object (build asks `is`)
_PACKET = parse_variant("packet")
_default = [HOST_DEFAULT]


class variant:
    """Choose the variant cohort.torch's ops run: `cohort.torch.variant("whole")` sets it for
    the process; `with cohort.torch.variant("lanes=16"): ...` sets it inside the block
    (this thread and context only) and restores the previous choice on exit. Any spelling
    of `cohort run --variant` is accepted except fast_math=on: these ops are exact."""

    def __init__(self, spec):
        if isinstance(spec, str) and spec in (DEFAULT_SPEC, DEFAULT_VARIANT):
            v = HOST_DEFAULT                 # back to the default, with its fitting to the block
        else:
            v = spec if isinstance(spec, Variant) else _parse(spec)
        self.variant = v
        self._token = None
        self._previous = _default[0]
        _set_default(v)                      # a plain call is a setting

    def __enter__(self):
        _set_default(self._previous)         # inside `with`, a scoped choice instead
        _scoped[0] = True
        if _native:
            _native[0].cohort_native_scoped()   # C++ reads the contextvar from now on
        self._token = _current.set(self.variant)
        return self.variant

    def __exit__(self, *exc):
        _current.reset(self._token)
        return False

    def __repr__(self) -> str:
        return f"cohort.torch.variant({self.variant.label!r})"


def _parse(spec) -> Variant:
    if not isinstance(spec, str):
        raise TypeError(f"variant: expected a variant spelling such as 'packet' or 'lanes=16', got {spec!r}")
    try:
        v = parse_variant(spec)
    except VariantError as e:
        raise ValueError(f"variant: {e}") from None
    if v.fast_math:
        raise ValueError("variant: fast_math=on is not exact; cohort.torch runs exact variants only")
    return v


def _set_default(v: Variant):
    _default[0] = v
    if _native:
        _native[1](v)
        _native[0].cohort_native_set_default(id(v))


_native: list = []       # (library, keep(variant)) of the native call path while it is registered (native_call.py)
_scoped = [False]        # a `with variant(...)` block was entered in this process


def native_hooks(lib, keep=None):
    """Tell `lib` (native_call.cpp) of every variant setting and recording from now on (None: stop);
    keep(variant) is called with every variant that becomes the process default."""
    _native[:] = [] if lib is None else [lib, keep]
    if lib is not None:
        keep(_default[0])
        lib.cohort_native_set_default(id(_default[0]))
        if _scoped[0]:
            lib.cohort_native_scoped()


def variant_contextvar() -> contextvars.ContextVar:
    """The contextvar of `with variant(...)` blocks (native_call.cpp reads it)."""
    return _current


def variant_scoped() -> bool:
    """Whether a `with variant(...)` block was entered in this process."""
    return _scoped[0]


def _python_path_state() -> dict:
    return {"call_path": "python", "call_path_why": "cohort.torch.native_call not imported", "native_ops": (),
            "native_launches": 0}


call_path_state = [_python_path_state]   # native_call.state, once native_call is imported: stats() asks it


def current_variant() -> Variant:
    v = _current.get()
    return _default[0] if v is None else v


# ---------------------------------------------------------------- builds

_builds: dict = {}
_lock = threading.Lock()
_stats = {"builds": 0, "build_seconds": 0.0, "launches": 0}


def stats() -> dict:
    """{'builds': builds made by cohort.torch (one per kernel, constants and variant),
    'build_seconds': their total time, 'launches': launches (both call paths),
    'call_path': 'native' or 'python', 'call_path_why': why python ('' when native),
    'native_ops': the ops the C++ kernels take, 'native_launches': launches made from C++
    (native_call.py)}. A build found again is
    not counted: after a model's first call, builds stays constant while the shapes only
    change in runtime arguments (sequence lengths, row counts, batch)."""
    out = dict(_stats)
    out.update(call_path_state[0]())
    out["launches"] += out["native_launches"]
    return out


_recent: dict = {}      # (kernel, id(variant), *const items) -> (variant, launcher): no variant hashing


def build(kernel, consts: dict, v: Optional[Variant] = None, whole_blocks: bool = False) -> "Launcher":
    """The launcher of `kernel` specialised on `consts` in variant `v` (the current one).
    whole_blocks: every launch of this op is a whole number of blocks (row operators, rope,
    attention), so packet variants take the build specialised for that (no masked path)."""
    v = v or current_variant()
    quick = (kernel, id(v), *consts.items())
    hit = _recent.get(quick)
    if hit is not None and hit[0] is v:
        return hit[1]
    key = (kernel, tuple(sorted(consts.items())), v, v is HOST_DEFAULT)   # (an equal variant a user chose is not fitted)
    launcher = _builds.get(key)
    if launcher is None:
        t0 = time.perf_counter()
        block = getattr(kernel, "block", None) or kernel.ir.block
        fitted = _PACKET if v is HOST_DEFAULT and block % v.lanes else v
        ck = compile_kernel(kernel, consts, fitted, n=block if whole_blocks else None, verify="never")
        with _lock:
            launcher = _builds.get(key)
            if launcher is None:
                launcher = _builds[key] = Launcher(ck)
                _stats["builds"] += 1
                _stats["build_seconds"] += time.perf_counter() - t0
    if len(_recent) > 4096:
        _recent.clear()
    _recent[quick] = (v, launcher)
    return launcher


def launcher(kernel, consts: tuple = (), whole_blocks: bool = False) -> "Launcher":
    """build(kernel, dict(consts), whole_blocks=whole_blocks) in the current variant, found
    with one look-up when it was built before (consts: (name, value) pairs, in a fixed order)."""
    v = _current.get() or _default[0]
    hit = _launchers.get((kernel, id(v), consts))
    if hit is not None and hit[0] is v:
        return hit[1]
    found = build(kernel, dict(consts), v, whole_blocks)
    if len(_launchers) > 4096:
        _launchers.clear()
    _launchers[(kernel, id(v), consts)] = (v, found)
    return found


_launchers: dict = {}   # (kernel, id(variant), consts) -> (variant, launcher)
_recording: list = []


class recording:
    """`with recording() as launches:` lists every launch made inside the block as
    (launcher, n, tensors, scalars), the tensors kept alive: `launcher.prepare(n, tensors,
    scalars)` then rebuilds its argument block (benchmarks time the native entry so). While
    one is open every op call runs in Python (the native call path pauses), so each is listed;
    pause=False: the caller runs Python code only (native_call's miss handler)."""

    def __init__(self, pause: bool = True):
        self._paused = None
        self._pause = pause

    def __enter__(self) -> list:
        if self._pause and _native:
            self._paused = _native[0]
            self._paused.cohort_native_pause(1)
        _recording.append([])
        return _recording[-1]

    def __exit__(self, *exc):
        _recording.pop()
        if self._paused is not None:
            self._paused.cohort_native_pause(-1)
        return False


MAX_SHAPES = 256     # launch shapes with pooled argument blocks, per build (then the pools start over)
POOL = 4             # idle blocks kept per shape (more exist only while launches overlap)
_copysign = math.copysign
_numel = torch.Tensor.numel



def _direct_entry(p: PreparedLaunch):
    """The entry to call on this thread with no Python between launches, or None. A sanitize
    build's launches go through run_prepared, which gives each clean global shadows
    (backend/sanitize_record.py): a direct call would keep the last launch's."""
    if p.sanitized is not None and p.sanitized.shadowed:
        return None
    return p.caller_entry()

class Launcher:
    """Launches of one build from torch tensors (see the module notes)."""

    def __init__(self, ck: CompiledKernel):
        self.ck = ck
        self.plan = plan = ck.plan
        self.buffers = plan.buffer_names
        self._f32_pos = tuple(i for i, (_, dt) in enumerate(plan.scalar_slots) if dt is DType.F32)
        self._ready: dict = {}               # launch shape -> idle (PreparedLaunch, slots, err, fn, address)
        self._pointer_slots = self.pointer_slots = plan.pointer_slots   # the plan's data-pointer slots

    def __call__(self, n: int, tensors, scalars=()):
        """Run a launch of n threads; `tensors`: every buffer in parameter order (contiguous
        CPU tensors of the parameters' dtypes); `scalars`: every scalar in parameter order.

        Argument blocks are pooled per launch shape: (n, scalars, each buffer's length; the
        sign of each float scalar, since 0.0 == -0.0 as keys). A pooled block already holds
        n, the block range, the lengths and the scalars, so a launch of that shape writes
        only the data pointers. It keeps the block's bounds proof: the proof reads n, the
        lengths and the scalars, never a pointer (backend/lowering/checks.py), so it holds
        for every block of the same shape. A block that fell back to the checked build keeps
        running the checked build for its shape (the safe build could not prove it)."""
        key = self._key(n, tensors, scalars)
        pool = self._ready.get(key)
        if pool:
            p, mv, err, fn, address = pool.pop()
            for slot, t in zip(self._pointer_slots, tensors):   # only the data pointers (the plan's slots)
                mv[slot] = t.data_ptr()
        else:
            if pool is None:
                if len(self._ready) >= MAX_SHAPES:
                    self._ready.clear()
                pool = self._ready[key] = []
            p = self._block(n, tensors, scalars)
            mv, err = memoryview(p.args), memoryview(p.err)
            address = ctypes.c_void_p(p.address)    # (ctypes takes one faster than an int)
            fn = _direct_entry(p)                   # None: the launch goes through run_prepared
        if _recording:
            _recording[-1].append((self, n, tuple(tensors), tuple(scalars)))
        if fn is not None:
            fn(address)                      # the entry on the calling thread, as PreparedLaunch.run calls it
            if err[0]:                       # an error recorded, or a launch the proof did not cover:
                p.raise_error(rerun=p.run)   # raised, or rerun with the checked build
                fn = p.entry_fn              # (the checked build from now on, for this shape)
        else:
            self.ck.run_prepared(p)
            # grain=auto settled on the caller's thread (a launch too small to share): from now
            # on this shape calls the chosen entry directly, as a caller variant does
            fn = _direct_entry(p)
        _stats["launches"] += 1
        if len(pool) < POOL:
            pool.append((p, mv, err, fn, address))

    def _key(self, n: int, tensors, scalars) -> tuple:
        key = (n, scalars, *map(_numel, tensors))
        for i in self._f32_pos:
            if not scalars[i]:                   # a zero: its sign too
                key += (i, _copysign(1.0, scalars[i]))
        return key

    def take(self, n: int, tensors, scalars=()):
        """An idle pooled block of this launch's shape, taken out of the pool (the native call
        path borrows it: native_call.py), as (PreparedLaunch, args view, error view, entry or None,
        address); None when the shape has none idle."""
        pool = self._ready.get(self._key(n, tensors, scalars))
        return pool.pop() if pool else None

    def give_back(self, n: int, tensors, scalars, block):
        """Put a block `take` returned back into its shape's pool."""
        pool = self._ready.get(self._key(n, tensors, scalars))
        if pool is not None and len(pool) < POOL:
            pool.append(block)

    def prepare(self, n: int, tensors, scalars=()) -> PreparedLaunch:
        """The argument block of a launch, not run and not pooled: the caller's (to time the
        native entry, say). It holds the tensors' addresses: keep them alive while it is used."""
        p = self._block(n, tensors, scalars)
        p.buffers = dict(zip(self.buffers, tensors))
        return p

    def _block(self, n: int, tensors, scalars) -> PreparedLaunch:
        """A new argument block of this launch (holding the tensors' addresses, not the tensors)."""
        p = PreparedLaunch(self.ck, self.ck.code_for(n))
        self.plan.write(p, n, [(t.data_ptr(), t.numel()) for t in tensors], scalars)
        return p

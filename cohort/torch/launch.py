"""Builds and launches for torch tensors: the variant setting, one build per
(kernel, constants, variant), and the launch that writes torch tensors' data
pointers into a build's argument block.

The ops in this package have already checked what `check_args` would check
(dtype, device, layout, sizes) and allocated the output themselves, so a
launch writes the slots directly (entry ABI, backend/context.py): n, the
block range, each buffer's data pointer and length, each scalar's 32 bits,
and slot 6 = 0 (the bounds proof is redone for the new arguments: a launch
the safe build cannot prove runs the checked build, as everywhere). Inputs
may share memory with each other (they are only read); the output is a fresh
tensor and shares memory with nothing. Argument blocks are pooled per build
and launch shape (n, lengths, scalars): a launch of a shape seen before
writes only the data pointers and keeps the block's proof, which never reads
a pointer (Launcher.__call__). `launcher` is `build` for the ops' calls: the
constants as a tuple of (name, value) pairs, one dictionary look-up.
"""
from __future__ import annotations

import contextvars
import ctypes
import math
import struct
import threading
import time
from typing import Optional

import torch

from ..backend.compiler import CompiledKernel, PreparedLaunch, compile_kernel
from ..backend.context import SLOT_BEGIN, SLOT_END, SLOT_N, SLOT_PROOF, abi_slots
from ..backend.variant import Variant, VariantError, parse_variant
from ..refimpl.ir import DType, ParamKind

DEFAULT_VARIANT = "packet"      # 8 lanes, the caller's thread; every variant is exact (no fast_math)
_current: contextvars.ContextVar = contextvars.ContextVar("cohort_torch_variant", default=None)
_default = [parse_variant(DEFAULT_VARIANT)]


class variant:
    """Choose the variant cohort.torch's ops run: `cohort.torch.variant("whole")` sets it for
    the process; `with cohort.torch.variant("lanes=16"): ...` sets it inside the block
    (this thread and context only) and restores the previous choice on exit. Any spelling
    of `cohort run --variant` is accepted except fast_math=on: these ops are exact."""

    def __init__(self, spec):
        v = spec if isinstance(spec, Variant) else _parse(spec)
        self.variant = v
        self._token = None
        self._previous = _default[0]
        _default[0] = v                      # a plain call is a setting

    def __enter__(self):
        _default[0] = self._previous         # inside `with`, a scoped choice instead
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


def current_variant() -> Variant:
    v = _current.get()
    return _default[0] if v is None else v


# ---------------------------------------------------------------- builds

_builds: dict = {}
_lock = threading.Lock()
_stats = {"builds": 0, "build_seconds": 0.0, "launches": 0}


def stats() -> dict:
    """{'builds': builds made by cohort.torch (one per kernel, constants and variant),
    'build_seconds': their total time, 'launches': launches}. A build found again is
    not counted: after a model's first call, builds stays constant while the shapes only
    change in runtime arguments (sequence lengths, row counts, batch)."""
    return dict(_stats)


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
    key = (kernel, tuple(sorted(consts.items())), v)
    launcher = _builds.get(key)
    if launcher is None:
        t0 = time.perf_counter()
        block = getattr(kernel, "block", None) or kernel.ir.block
        ck = compile_kernel(kernel, consts, v, n=block if whole_blocks else None, verify="never")
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
    scalars)` then rebuilds its argument block (benchmarks time the native entry so)."""

    def __enter__(self) -> list:
        _recording.append([])
        return _recording[-1]

    def __exit__(self, *exc):
        _recording.pop()
        return False


MAX_SHAPES = 256     # launch shapes with pooled argument blocks, per build (then the pools start over)
POOL = 4             # idle blocks kept per shape (more exist only while launches overlap)
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_copysign = math.copysign
_numel = torch.Tensor.numel


class Launcher:
    """Launches of one build from torch tensors (see the module notes)."""

    def __init__(self, ck: CompiledKernel):
        self.ck = ck
        k = ck.kernel
        slots = abi_slots(k)
        self.block = k.block
        self.buffers = tuple(p.name for p in k.params if p.kind is ParamKind.BUFFER)
        self.buffer_slots = tuple(slots[name] for name in self.buffers)
        self.scalars = tuple((p.name, slots[p.name][0], p.dtype) for p in k.params if p.kind is ParamKind.SCALAR)
        self.f32 = tuple(dt is DType.F32 for _, _, dt in self.scalars)
        self.pointer_slots = tuple(ps for ps, _ in self.buffer_slots)
        self._f32_pos = tuple(i for i, f in enumerate(self.f32) if f)
        self._ready: dict = {}               # launch shape -> idle (PreparedLaunch, args, err, entry, address, direct)
        self._code = ck.code                 # the build of a launch of whole blocks (or of any size)
        self._any_size = not ck.code.full_blocks
        v = ck.variant
        self._caller = v.grain == "caller" or (v.workers == 1 and v.grain not in ("auto", "joint_legacy"))
        self._bits = {}                      # f32 scalar value -> its bits (eps, scale: a few values)

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
        key = (n, scalars, *map(_numel, tensors))
        for i in self._f32_pos:
            if not scalars[i]:                   # a zero: its sign too
                key += (i, _copysign(1.0, scalars[i]))
        pool = self._ready.get(key)
        if pool:
            p, mv, err, fn, address, direct = pool.pop()
            for slot, t in zip(self.pointer_slots, tensors):
                mv[slot] = t.data_ptr()
        else:
            if pool is None:
                if len(self._ready) >= MAX_SHAPES:
                    self._ready.clear()
                pool = self._ready[key] = []
            code = self._code if self._any_size or n % self.block == 0 else self.ck.code_for(n)
            p = PreparedLaunch(self.ck, code)
            mv, err, fn = memoryview(p.args), memoryview(p.err), code.entry_fn
            address = ctypes.c_void_p(p.address)    # (ctypes takes one faster than an int)
            # a sanitize build's launches go through run_prepared, which gives each clean global
            # shadows (backend/sanitize_record.py): a direct call would keep the last launch's
            direct = self._caller and not (p.sanitized is not None and p.sanitized.shadowed)
            self._fill(p, mv, n, tensors, scalars)
        if _recording:
            _recording[-1].append((self, n, tuple(tensors), tuple(scalars)))
        if direct:
            fn(address)                      # the entry, as PreparedLaunch.run calls it
            if err[0]:                       # an error recorded, or a launch the proof did not cover:
                p.raise_error(rerun=p.run)   # raised, or rerun with the checked build
                fn = p._fn                   # (the checked build from now on, for this shape)
        else:
            self.ck.run_prepared(p)
            fn = p._fn
            # auto grain, settled on the caller's thread (a launch too small to share): from now
            # on this shape calls the chosen entry directly, as a caller variant does
            auto = p.__dict__.get("_auto")
            if auto is not None and auto.chosen is not None and auto.chosen[3] is None and p.fallback is None:
                fn, direct = auto.chosen[2], True
        _stats["launches"] += 1
        if len(pool) < POOL:
            pool.append((p, mv, err, fn, address, direct))

    def prepare(self, n: int, tensors, scalars=()) -> PreparedLaunch:
        """The argument block of a launch, not run and not pooled: the caller's (to time the
        native entry, say). It holds the tensors' addresses: keep them alive while it is used."""
        code = self._code if self._any_size or n % self.block == 0 else self.ck.code_for(n)
        p = PreparedLaunch(self.ck, code)
        self._fill(p, memoryview(p.args), n, tensors, scalars)
        p.buffers = dict(zip(self.buffers, tensors))
        return p

    def _fill(self, p, mv, n, tensors, scalars):
        nblocks = -(-n // self.block)
        mv[SLOT_N] = n
        mv[SLOT_BEGIN] = 0
        mv[SLOT_END] = nblocks
        mv[SLOT_PROOF] = 0
        for (ps, ls), t in zip(self.buffer_slots, tensors):
            mv[ps] = t.data_ptr()
            mv[ls] = t.numel()
        for (name, slot, dt), is_f32, value in zip(self.scalars, self.f32, scalars):
            if is_f32:
                bits = self._bits.get(value) if value else None   # (0.0 == -0.0 as keys)
                if bits is None:
                    bits = _U32.unpack(_F32.pack(value))[0]
                    if value and len(self._bits) < 64:
                        self._bits[value] = bits
                mv[slot] = bits
            else:
                mv[slot] = int(value) & 0xFFFFFFFF
        p.n, p.nblocks = n, nblocks

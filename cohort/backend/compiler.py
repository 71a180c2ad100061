"""Compile cache, compiled kernels and the launch API.

`compile_kernel(kernel, consts, variant, n)` returns a `CompiledKernel` whose
native entry runs any range of blocks of a launch. Compiles are cached on the
kernel's printed IR (after specialisation), its block, and the code-changing
knobs of the variant; the cache is safe to use from several Python threads.

Given the launch size `n`, a packet variant with full_packet on is also
specialised on whether n is a multiple of the block (every packet full: no
masked path to generate, compile or branch around), as Triton specialises
integer arguments on divisibility. Such a build refuses any other launch
(an error, not a run); the compiled kernel launches other sizes with the
general build, compiled when first needed.
"""
from __future__ import annotations

import ctypes
import hashlib
from collections import OrderedDict
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..refimpl.errors import KernelError
from ..refimpl.frontend import KernelFunction
from ..refimpl.interpreter import KernelRuntimeError
from ..refimpl.ir import DType, Kernel, ParamKind, walk_stmts
from ..refimpl.launch_check import check_args
from ..refimpl.printer import format_kernel
from ..refimpl.specialize import specialize
from . import jit
from .context import (ERR_LOAD_OOB, ERR_NONE, ERR_PARTIAL_BLOCK, ERR_PRIVATE_OOB, ERR_SCRATCH, ERR_STORE_OOB,
                      MAX_SCRATCH_BYTES, SCRATCH_ALIGN, SLOT_BEGIN, SLOT_END, SLOT_ERR, SLOT_N, SLOT_SCRATCH, SLOT_SCRATCH_BYTES,
                      abi_slots, private_layout)
from .facts import code_facts
from .variant import Variant, parse_variant

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ERR_KIND = {ERR_LOAD_OOB: "load", ERR_STORE_OOB: "store", ERR_PRIVATE_OOB: "private array access"}


class UnsupportedVariant(NotImplementedError):
    """A variant this build cannot compile yet (reported, never faked)."""


@dataclass
class NativeCode:
    """One compiled entry, cached by the knobs that change code (not grain or workers)."""
    kernel: Kernel                 # specialised IR
    variant: Variant               # the variant it was first compiled for
    symbol: str
    entry: int                     # address of void entry(int64_t *args)
    linked: object = field(repr=False)
    stmt_table: list = field(repr=False)
    compile_seconds: float = 0.0
    _facts: Optional[dict] = field(default=None, repr=False)
    scratch_bytes: int = 0         # private arrays of one block, in caller-provided memory
    annotation_lanes: int = 1      # lanes per vector the lowering worked in (packets x interleave)
    annotations: dict = field(default_factory=dict, repr=False)   # lane claims, for the interpreter
    lowering_counts: dict = field(default_factory=dict, repr=False)
    full_blocks: bool = False      # specialised for launches of whole blocks only

    def accepts(self, n: int) -> bool:
        return not self.full_blocks or n % self.kernel.block == 0

    @property
    def llvm_ir(self) -> str:
        return self.linked.llvm_ir

    @property
    def entry_fn(self):
        """The entry as a ctypes function (made once: making one costs microseconds)."""
        fn = self.__dict__.get("_entry_fn")
        if fn is None:
            fn = self.__dict__["_entry_fn"] = _ENTRY_TYPE(self.entry)
        return fn

    def assembly(self) -> str:
        return self.linked.assembly()

    @property
    def facts(self) -> dict:
        if self._facts is None:
            self._facts = code_facts(self.llvm_ir, self.assembly(), self.symbol, self.variant,
                                     self.lowering_counts)
        return self._facts


class CompiledKernel:
    """Native code bound to a variant: the launch API.

    Attributes of the code (kernel, entry, facts, annotations, llvm_ir, ...)
    read through; `variant` is the one asked for, whose grain and workers
    decide how `launch` runs.
    """

    RECENT = 8

    def __init__(self, code: NativeCode, variant: Variant):
        self.code, self.variant = code, variant
        self._general: Optional[NativeCode] = None    # for launches the specialised code refuses
        self._recent: "OrderedDict" = OrderedDict()   # argument identities -> PreparedLaunch
        self._recent_lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.code, name)

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.code.kernel.name} [{self.variant.label}]>"

    def assembly(self) -> str:
        return self.code.assembly()

    def code_for(self, n: int) -> NativeCode:
        """The build that runs a launch of n threads: this one, or the general build
        when this one is specialised for whole blocks and n is not."""
        if self.code.accepts(n):
            return self.code
        if self._general is None:
            self._general = _compile(self.code.kernel, self.variant, full_blocks=False)
        return self._general

    def prepare(self, n: int, args: dict) -> "PreparedLaunch":
        """Check every argument and build the entry's argument block (no run)."""
        buffers, scalars = check_args(self.code.kernel, n, args)
        p = PreparedLaunch(self, self.code_for(int(n)), int(n), buffers, scalars)
        # the caller's own objects, held so that their ids stay theirs while cached
        p.originals = [(args[name], a.dtype, a.size) for name, a in buffers.items()]
        return p

    def launch(self, n: int, args: dict) -> dict:
        """Run a launch to completion as the variant's grain and workers say
        (the calling thread, or the worker pool); buffers update in place.

        Launching again with the very same array objects and scalar values
        reuses the checked argument block (reading an array's address costs
        microseconds); the arrays' dtype, size and writability are re-checked."""
        key = _identity_key(n, args)
        p = None
        if key is not None:
            with self._recent_lock:
                p = self._recent.get(key)
                if p is not None:
                    self._recent.move_to_end(key)
        if p is None or not p.unchanged():
            p = self.prepare(n, args)
            if key is not None:
                with self._recent_lock:
                    self._recent[key] = p
                    while len(self._recent) > self.RECENT:
                        self._recent.popitem(last=False)
        self.run_prepared(p)
        return p.buffers

    def run_prepared(self, p: "PreparedLaunch"):
        v = self.variant
        if v.grain == "caller" or (v.workers == 1 and v.grain not in ("auto", "joint_legacy")):
            p.run()
            return
        auto = p.__dict__.get("_auto")
        if auto is not None and auto.chosen is not None and auto.chosen[3] is None:
            p.run(fn=auto.chosen[2])   # auto chose the caller: no detour through the runtime
            return
        from . import runtime
        runtime.run(p, v)


def _identity_key(n, args: dict):
    """A key naming the argument objects themselves (None when not cacheable).
    The cached PreparedLaunch keeps the arrays alive, so their ids stay unique."""
    key = [n]
    for k, v in args.items():
        t = type(v)
        if t is np.ndarray:
            key.append((k, id(v)))
        elif t in (float, int) or isinstance(v, (np.floating, np.integer)):
            key.append((k, t, v))
        else:
            return None
    return tuple(key)


class PreparedLaunch:
    """An argument block ready for the native entry; keeps its arrays alive."""

    def __init__(self, ck: CompiledKernel, code: NativeCode, n: int, buffers: dict, scalars: dict):
        self.ck, self.code, self.n, self.buffers, self.scalars = ck, code, n, buffers, scalars
        self.entry = code.entry         # the build that accepts this launch
        slots = abi_slots(ck.kernel)
        self.args = np.zeros(slots["__count__"], np.int64)
        self.err = np.zeros(4, np.int64)
        B = ck.kernel.block
        self.nblocks = -(-n // B)
        self.args[SLOT_N] = n
        self.args[SLOT_BEGIN] = 0
        self.args[SLOT_END] = self.nblocks
        self.args[SLOT_ERR] = self.err.ctypes.data
        self.scratch = scratch_memory(ck.scratch_bytes)
        self.args[SLOT_SCRATCH] = self.scratch.ctypes.data
        self.args[SLOT_SCRATCH_BYTES] = ck.scratch_bytes
        for p in ck.kernel.params:
            if p.kind is ParamKind.BUFFER:
                a = buffers[p.name]
                ps, ls = slots[p.name]
                self.args[ps] = a.ctypes.data
                self.args[ls] = a.size
            elif p.kind is ParamKind.SCALAR:
                bits = np.asarray(scalars[p.name], p.dtype.np).reshape(1).view(np.uint32)[0]
                self.args[slots[p.name][0]] = int(bits)
        self.address = self.args.ctypes.data
        self._fn = code.entry_fn
        self.originals = []

    def unchanged(self) -> bool:
        """The arrays still are what was checked (a dtype or shape can be reassigned)."""
        for orig, dtype, size in self.originals:
            if orig.dtype != dtype or orig.size != size or not orig.flags.writeable:
                return False
        return True

    def run(self, begin: int = 0, end: Optional[int] = None, fn=None):
        self.args[SLOT_BEGIN] = begin
        self.args[SLOT_END] = self.nblocks if end is None else end
        (fn or self._fn)(self.address)
        self.raise_error()

    def raise_error(self):
        if self.err[0] != ERR_NONE:
            kind, sid, index, thread = (int(v) for v in self.err)
            self.err[:] = 0
            if kind == ERR_SCRATCH:
                raise KernelRuntimeError(f"kernel {self.ck.kernel.name}: the entry was given too little "
                                         f"scratch memory for its private arrays")
            if kind == ERR_PARTIAL_BLOCK:
                raise KernelRuntimeError(f"kernel {self.ck.kernel.name}: an entry built for launches of whole "
                                         f"blocks of {self.ck.kernel.block} was called with n = {index}")
            stmt = self.code.stmt_table[sid]
            length = ""
            raise KernelRuntimeError(
                f"kernel {self.ck.kernel.name}, {stmt.loc}: {_ERR_KIND.get(kind, 'access')} index {index} "
                f"out of bounds{length} (thread {thread}, block {thread // self.ck.kernel.block}) "
                f"[native, {self.ck.variant.label}]")


# ---------------------------------------------------------------- the cache

_cache: dict = {}          # key -> NativeCode
_bound: dict = {}          # (key, variant) -> CompiledKernel
_cache_lock = threading.Lock()
_key_locks: dict = {}


def _as_ir(kernel) -> Kernel:
    if isinstance(kernel, KernelFunction):
        return kernel.ir
    if isinstance(kernel, Kernel):
        return kernel
    raise TypeError(f"expected a @kernel function or a Kernel, got {type(kernel).__name__}")


def cache_key(k: Kernel, variant: Variant) -> str:
    text = format_kernel(k)
    # Source locations are not in the printed text, but a compiled kernel reports them
    # (checked builds) and compare() interprets its kernel: the same text at other lines
    # (an edited, reloaded module) must not reuse another kernel's statement table.
    locs = ";".join(str(s.loc) for s in walk_stmts(k.body))
    from . import inject
    return hashlib.sha256(f"{text}\n{locs}\n{variant.compile_key}\n{inject.key()}".encode()).hexdigest()


def compile_kernel(kernel, consts: Optional[dict] = None, variant=None, n: Optional[int] = None) -> CompiledKernel:
    """Specialise, validate, lower, optimise and link (or fetch from the cache).

    `n`, the launch size when known, lets a packet variant specialise for
    launches of whole blocks (see the module notes); any n still launches."""
    if variant is None:
        variant = parse_variant("whole")
    elif isinstance(variant, str):
        variant = parse_variant(variant)
    k = _as_ir(kernel)
    if variant.block is not None and variant.block != k.block:
        if k.specialised:
            raise UnsupportedVariant(f"kernel {k.name} is already specialised for block {k.block}; "
                                     f"cannot re-block it to {variant.block}")
        k = Kernel(k.name, k.params, k.body, variant.block)
    k = specialize(k, consts or {})
    full_blocks = (n is not None and n > 0 and n % k.block == 0 and variant.lanes > 1
                   and variant.full_packet)
    key = cache_key(k, variant) + ("/full_blocks" if full_blocks else "")
    with _cache_lock:
        bound = _bound.get((key, variant))
        if bound is not None:
            return bound
    code = _compile(k, variant, full_blocks, key)
    with _cache_lock:
        return _bound.setdefault((key, variant), CompiledKernel(code, variant))


def _compile(k: Kernel, variant: Variant, full_blocks: bool, key: Optional[str] = None) -> NativeCode:
    """The cached native code of specialised kernel k (compiled once per key)."""
    if key is None:
        key = cache_key(k, variant) + ("/full_blocks" if full_blocks else "")
    with _cache_lock:
        code = _cache.get(key)
        if code is not None:
            return code
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:  # one compile per key, other keys compile meanwhile
        code = _cache.get(key)
        if code is None:
            code = _build(k, variant, key, full_blocks)
            with _cache_lock:
                _cache[key] = code
        return code


def _with_function_attributes(text: str, symbol: str, attrs: dict) -> str:
    """llvmlite cannot spell string attributes; add them to the entry's definition line."""
    import re
    pattern = re.compile(r'^(define void @"?' + re.escape(symbol) + r'"?\(.*?\)[^{\n]*)', re.M)
    extra = " ".join(f'"{k}"="{v}"' for k, v in attrs.items())
    new, count = pattern.subn(lambda m: f"{m.group(1)} {extra}", text, count=1)
    if count != 1:
        raise RuntimeError(f"entry {symbol} not found in the generated module")
    return new


def scratch_memory(nbytes: int) -> np.ndarray:
    """Zeroed, SCRATCH_ALIGN-aligned bytes (at least one, so the pointer is never null)."""
    raw = np.zeros(nbytes + SCRATCH_ALIGN, np.uint8)
    shift = (-raw.ctypes.data) % SCRATCH_ALIGN
    return raw[shift:shift + max(nbytes, 1)]


def _build(k: Kernel, variant: Variant, key: str, full_blocks: bool = False) -> NativeCode:
    t0 = time.perf_counter()
    _, scratch = private_layout(k)
    if scratch > MAX_SCRATCH_BYTES:
        raise KernelError(k.name, None, f"private arrays need {scratch} bytes per block of {k.block} threads; "
                                        f"the native backend allows at most {MAX_SCRATCH_BYTES}")
    symbol = f"cohort_{k.name}_{key[:12]}" + ("_full_blocks" if full_blocks else "")
    if variant.lanes == 1:
        from .lower_whole import WholeLowering
        lowering = WholeLowering(k, symbol, fast_math=variant.fast_math, checked=variant.checked)
    else:
        if k.block < variant.lanes:
            raise UnsupportedVariant(f"variant {variant.label!r}: block {k.block} is smaller than lanes "
                                     f"{variant.lanes} (a block must hold whole packets)")
        from .lower_packet import PacketLowering
        lowering = PacketLowering(k, symbol, variant, checked=variant.checked, full_blocks=full_blocks)
    module = lowering.lower()
    text = str(module)
    attrs = getattr(lowering, "fn_attributes", None)
    if attrs:
        text = _with_function_attributes(text, symbol, attrs)
    linked = jit.compile_module(text, [symbol], getattr(lowering, "tuning", None))
    ck = NativeCode(k, variant, symbol, linked.addresses[symbol], linked, lowering.stmt_table,
                    time.perf_counter() - t0)
    ck.scratch_bytes = scratch
    ck.full_blocks = lowering.full_blocks
    ck.annotations = getattr(lowering, "annotations", {})
    ck.lowering_counts = dict(getattr(lowering, "counts", {}))
    ck.lowering_counts["interleave"] = getattr(lowering, "interleave", 1)
    ck.annotation_lanes = getattr(lowering, "W", 1)   # the lane groups the annotations speak of
    return ck

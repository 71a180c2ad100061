"""Compile cache, compiled kernels and the launch API.

`compile_kernel(kernel, consts, variant, n)` returns a `CompiledKernel` whose
native entry runs any range of blocks of a launch. Compiles are cached on the
kernel's printed IR (after specialisation), its block, and the build's
CodegenConfig (codegen.py: the code-changing knobs of the variant, the
target's lowering choices, the planted bugs, the compile level), resolved once
per build; in front of that, a handle cache keyed on the Kernel object itself,
the constants and the configuration answers a repeated compile_kernel in
microseconds. Both are safe to use from several
Python threads. A launch checks and writes its arguments through a plan made
once per kernel (launch_plan.py, the argument block's one writer) and runs by
the route its variant's launch policy gives (launch_policy.py).

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
import threading
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Optional

import numpy as np

from ..refimpl.errors import KernelError
from ..refimpl.frontend import KernelFunction
from ..refimpl.interpreter import KernelRuntimeError
from ..refimpl.ir import Kernel, walk_stmts
from ..refimpl.launch_check import check_args, check_n
from ..refimpl.printer import format_kernel
from ..refimpl.specialize import specialize
from . import codegen, jit, runtime, sanitize_record, target
from .claims import LaneClaims
from .context import (
    ERR_BARRIER_DIVERGENCE,
    ERR_GLOBAL_RACE,
    ERR_LOAD_OOB,
    ERR_NONE,
    ERR_PARTIAL_BLOCK,
    ERR_PRIVATE_OOB,
    ERR_SCRATCH,
    ERR_SHADOW,
    ERR_SHARED_OOB,
    ERR_SHARED_RACE,
    ERR_STORE_OOB,
    ERR_UNINIT_SHARED,
    ERR_UNPROVEN,
    MAX_SCRATCH_BYTES,
    SCRATCH_ALIGN,
    SLOT_BEGIN,
    SLOT_END,
    SLOT_ERR,
    SLOT_N,
    SLOT_SCRATCH,
    SLOT_SCRATCH_BYTES,
    abi_slots,
    private_layout,
)
from .facts import code_facts
from .launch_plan import LaunchPlan
from .launch_policy import BuildEntry, policy_of
from .lowering import Lowering
from .lowering.sanitize import decode_race, race_message
from .variant import Variant, parse_variant
from .verify_launch import check_mode, verified_launch

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ERR_KIND = {ERR_LOAD_OOB: "load", ERR_STORE_OOB: "store", ERR_PRIVATE_OOB: "private array access",
             ERR_SHARED_OOB: "shared array access"}


class UnsupportedVariant(NotImplementedError):
    """A variant this build cannot compile yet (reported, never faked)."""


@dataclass
class NativeCode:
    """One compiled entry, cached by the knobs that change code (not grain or workers)."""
    kernel: Kernel                 # specialised IR
    config: codegen.CodegenConfig  # what it was built with (its variant: the one it was first compiled for)
    symbol: str
    entry: int                     # address of void entry(int64_t *args)
    linked: object = field(repr=False)
    stmt_table: list = field(repr=False)
    compile_seconds: float = 0.0
    _facts: Optional[dict] = field(default=None, repr=False)
    scratch_bytes: int = 0         # private arrays of one block, in caller-provided memory
    annotations: LaneClaims = field(default_factory=LaneClaims, repr=False)   # lane claims (claims.py)
    lowering_counts: dict = field(default_factory=dict, repr=False)

    @property
    def variant(self) -> Variant:
        return self.config.variant

    @property
    def full_blocks(self) -> bool:
        """Specialised for launches of whole blocks only."""
        return self.config.full_blocks

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
    read through; `variant` is the one asked for; `policy` (launch_policy.py)
    says how its launches run; `plan` (launch_plan.py) writes their argument
    blocks.
    """

    POOL = 4   # idle argument blocks kept per build (more exist only while launches overlap)
    MAX_VERIFIED = 4096   # shapes remembered as checked (then the set starts over)

    def __init__(self, code: NativeCode, variant: Variant, verify: str = "first"):
        self.code, self.variant = code, variant
        self.verify = verify            # verify_launch.py: "first" | "always" | "never"
        self._verified: set = set()     # launch shapes (n, buffer lengths) checked against the interpreter
        self._general: Optional[NativeCode] = None    # for launches the specialised code refuses
        self.plan = LaunchPlan(code.kernel)
        self.policy = policy_of(variant)
        self._shape_slots = np.array([SLOT_N] + [ls for _, ls in self.plan.buffer_slots], np.intp)
        self._free: list = []           # idle PreparedLaunch of self.code
        self._free_general: list = []   # idle PreparedLaunch of self._general
        self.last_prepared: Optional["PreparedLaunch"] = None   # the latest launch's (for auto's settling)

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
            self._general = _compile(self.code.kernel, replace(self.code.config, full_blocks=False))
        return self._general

    def prepare(self, n: int, args: dict) -> "PreparedLaunch":
        """Check every argument and build the entry's argument block (no run).
        The result is the caller's: no launch refills it. A sanitize build's block comes with
        global shadows fitted to these buffers (the native timer runs it with no Python between)."""
        p = self._take(n, args, False)
        if p.sanitized is not None and p.sanitized.shadowed:
            p.fit_shadows()
        return p

    def launch(self, n: int, args: dict, verify: Optional[str] = None) -> dict:
        """Run a launch to completion by the route `policy` gives it (the calling
        thread, the worker pool, or auto's choice); buffers update in place.
        Returns the buffer arguments by name, as given.

        The argument block comes from a small pool of this build's blocks, refilled
        from the arguments' headers (no copy, no conversion); a launch from another
        thread meanwhile takes another block.

        `verify` overrides the build's mode (compile_kernel's `verify`) for this launch."""
        mode = self.verify if verify is None else check_mode(verify)
        p = self._take(n, args, True)
        try:
            if mode == "never":
                self.run_prepared(p)
            else:
                key = p.args[self._shape_slots].tobytes()
                if mode == "always" or key not in self._verified:
                    self._verified_run(p, n, args)
                    if len(self._verified) >= self.MAX_VERIFIED:
                        self._verified.clear()
                    self._verified.add(key)
                else:
                    self.run_prepared(p)
        finally:
            free = self._free if p.origin is self.code else self._free_general
            if len(free) < self.POOL:
                free.append(p)
            self.last_prepared = p
        return p.buffers

    def _verified_run(self, p: "PreparedLaunch", n: int, args: dict):
        """p's launch checked against the interpreter (verify_launch.py): raises the kernel's
        error, or LaunchMismatch, or runs and agrees."""
        buffers, scalars = check_args(self.code.kernel, n, args)   # NumPy views of the caller's memory
        verified_launch(self.code.kernel, self.variant.label, n, buffers, scalars, lambda: self.run_prepared(p),
                        exact=not self.variant.fast_math)

    def _take(self, n, args: dict, pooled: bool) -> "PreparedLaunch":
        """A filled PreparedLaunch: an idle pooled one refilled (pooled), or a new one.
        Anything the quick path does not vouch for goes through check_args, which
        raises the errors (or accepts and normalises an unusual but valid argument)."""
        plan = self.plan
        if type(n) is not int or not 0 <= n <= plan.nmax:
            n = check_n(self.code.kernel, n)
        code = self.code
        if code.accepts(n):
            free = self._free
        else:
            code, free = self.code_for(n), self._free_general
        try:
            p = free.pop() if pooled else PreparedLaunch(self, code)
        except IndexError:
            p = PreparedLaunch(self, code)
        try:
            if plan.fill(p, n, args):
                return p
        except Exception:    # an argument the quick path cannot read: the full check decides
            pass
        # p may hold a half-written block: dropped, never pooled
        buffers, scalars = check_args(self.code.kernel, n, args)
        p = PreparedLaunch(self, code, n, buffers, scalars)
        p.buffers = {name: args[name] for name in buffers}   # as given, like the quick path's
        return p

    def run_prepared(self, p: "PreparedLaunch"):
        """Run p by the route `policy` gives it."""
        if p.sanitized is not None and p.sanitized.shadowed:
            p.fit_shadows()          # a launch starts with clean global shadows (sanitize_record.py)
        fn = p.caller_entry()
        if fn is not None:
            p.run(fn=fn)
        elif p.sanitized is not None:
            self._run_sanitized_elsewhere(p)
        else:
            runtime.run(p, self.policy)

    def _run_sanitized_elsewhere(self, p: "PreparedLaunch"):
        """A sanitize launch on the pool reports what a run block after block reports, not
        whichever block's finding the workers recorded first (sanitize_record.py's notes)."""
        slots = abi_slots(p.code.kernel)
        saved = sanitize_record.snapshot(p.sanitized, p.code.kernel, p.args, slots)
        try:
            runtime.run(p, self.policy)
        except KernelRuntimeError as pooled:
            sanitize_record.restore(saved)
            if p.sanitized.shadowed:
                p.fit_shadows()
            p.run(fn=p.entry_fn)
            raise pooled     # (the run in order found nothing: the pooled finding stands)

    def auto_entries(self, code: NativeCode) -> tuple:
        """The builds auto may choose among for a launch of `code` (launch_policy.BuildEntry):
        `code` itself, and the whole (lanes=1) build of its kernel when this one has lanes
        and the two need the same scratch memory (a launch's block holds one size)."""
        entries = [BuildEntry(code.variant.lanes, code.entry, code.entry_fn)]
        if code.variant.lanes != 1:
            whole = compile_kernel(code.kernel, None, _WHOLE, verify="never").code
            if whole.scratch_bytes == code.scratch_bytes:
                entries.append(BuildEntry(1, whole.entry, whole.entry_fn))
        return tuple(entries)


class PreparedLaunch:
    """An argument block ready for the native entry; keeps its arrays alive.

    One made by `CompiledKernel.launch` goes back to the build's pool afterwards and is
    refilled by a later launch: anything derived from the arguments (n, buffers, lengths)
    belongs in run(), or is reset by LaunchPlan.fill. `buffers` holds the buffer
    arguments as the caller gave them (NumPy arrays, torch tensors). `entry`/`entry_fn`:
    the build this launch runs (its checked twin after a fallback)."""

    fallback: Optional[str] = None     # why this launch runs the checked build instead (None: it does not)
    auto_choice = None                 # runtime.AutoChoice of this launch's size, once grain=auto chose

    def __init__(self, ck: CompiledKernel, code: NativeCode, n: Optional[int] = None,
                 buffers: Optional[dict] = None, scalars: Optional[dict] = None):
        self.ck, self.code = ck, code
        self.origin = code              # the build this block was made for (code may become its checked twin)
        self.entry = code.entry         # the build that accepts this launch
        self.entry_fn = code.entry_fn
        slots = abi_slots(ck.kernel)
        # the argument slots, then the error record (longer in sanitize builds: sanitize_record.py)
        self.sanitized = sanitize_record.layout(code.kernel, code.variant)
        count = slots["__count__"]
        block = np.zeros(count + (self.sanitized.words if self.sanitized else 4), np.int64)
        self.args, self.err, self.record = block[:count], block[count:count + 4], block[count:]
        self.shadows: list = []
        self._mv = memoryview(self.args)
        self.address = self.args.ctypes.data
        self.args[SLOT_ERR] = self.err.ctypes.data
        self.scratch = scratch_memory(ck.scratch_bytes)
        self.args[SLOT_SCRATCH] = self.scratch.ctypes.data
        self.args[SLOT_SCRATCH_BYTES] = ck.scratch_bytes
        self.n, self.nblocks, self.buffers = None, 0, {}
        if buffers is None:
            return
        # arguments check_args has normalised (1-D arrays, NumPy scalars)
        self.buffers = dict(buffers)
        plan = ck.plan
        plan.write(self, n, [(buffers[name].ctypes.data, buffers[name].size) for name in plan.buffer_names],
                   [scalars[name] for name in plan.scalar_names])

    def run(self, begin: int = 0, end: Optional[int] = None, fn=None):
        self.args[SLOT_BEGIN] = begin
        self.args[SLOT_END] = self.nblocks if end is None else end
        (fn or self.entry_fn)(self.address)
        if self.err[0] != ERR_NONE:
            self.raise_error(rerun=lambda: self.run(begin, end))

    def caller_entry(self):
        """The entry function that runs this launch on the calling thread, or None when it goes
        through the runtime (the pool, or grain=auto still measuring or settled on the pool).
        After a fallback, auto's choice on the caller runs the checked build."""
        if self.ck.policy.on_caller:
            return self.entry_fn
        auto = self.auto_choice
        if auto is not None and auto.chosen is not None and auto.chosen.on_caller:
            return auto.chosen.entry.fn if self.fallback is None else self.entry_fn
        return None

    def auto_entries(self) -> tuple:
        """The builds grain=auto may choose among for this launch (CompiledKernel.auto_entries)."""
        return self.ck.auto_entries(self.code)

    def use_checked(self, reason: str):
        """From now on run the checked build of this launch's code (compiled once, cached)."""
        if self.fallback is None:
            origin = self.origin
            checked = origin.__dict__.get("checked_twin")
            if checked is None:   # found once per build: a launch must not print the IR for the key
                v = replace(origin.variant, checked=True, unsafe=False)
                checked = origin.checked_twin = _compile(origin.kernel, origin.config.with_variant(v))
            self.code = checked
            self.entry, self.entry_fn = checked.entry, checked.entry_fn
            self.fallback = reason

    def fit_shadows(self):
        """Fresh global shadows for this launch's buffers (sanitize builds, sanitize_record.py)."""
        sanitize_record.fit_shadows(self.record, self.sanitized, self.args, abi_slots(self.ck.kernel), self.shadows)

    def raise_error(self, rerun=None):
        """Raise the error the entry recorded. A safe build that could not prove the launch's
        indices in bounds ran nothing: switch to the checked build and `rerun` (default: the
        whole launch on this thread), which runs correctly or reports the precise error."""
        if self.err[0] != ERR_NONE:
            kind, sid, index, thread = (int(v) for v in self.err)
            self.err[:] = 0
            if kind == ERR_SHADOW:           # nothing ran: shadows fitted to the buffers, run again
                self.fit_shadows()
                return (rerun or self.run)()
            if kind == ERR_UNPROVEN:
                self.use_checked("index bounds not proven for this launch: ran the checked build")
                return (rerun or self.run)()
            if kind == ERR_SCRATCH:
                raise KernelRuntimeError(f"kernel {self.ck.kernel.name}: the entry was given too little "
                                         f"scratch memory for its private arrays")
            if kind == ERR_PARTIAL_BLOCK:
                raise KernelRuntimeError(f"kernel {self.ck.kernel.name}: an entry built for launches of whole "
                                         f"blocks of {self.ck.kernel.block} was called with n = {index}")
            stmt = self.code.stmt_table[sid]
            B = self.ck.kernel.block
            if kind == ERR_SHARED_RACE:       # the interpreter's words (lowering/sanitize.py)
                slot, other, other_how = decode_race(index)
                raise KernelRuntimeError(
                    f"kernel {self.ck.kernel.name}, {stmt.loc}: "
                    f"{race_message(stmt, slot, thread, thread // B * B + other, other_how)} (thread {thread}, "
                    f"block {thread // B}) [native, {self.ck.variant.label}]")
            if kind in (ERR_GLOBAL_RACE, ERR_BARRIER_DIVERGENCE):   # the interpreter's words
                raise KernelRuntimeError(sanitize_record.message(self, kind, stmt, index, thread))
            if kind == ERR_UNINIT_SHARED:     # the interpreter's words (lowering/sanitize.py)
                raise KernelRuntimeError(
                    f"kernel {self.ck.kernel.name}, {stmt.loc}: read of shared {stmt.arr}[{index}] before any "
                    f"thread of block {thread // B} stored to it (uninitialised) (thread {thread}, block "
                    f"{thread // B}) [native, {self.ck.variant.label}]")
            raise KernelRuntimeError(
                f"kernel {self.ck.kernel.name}, {stmt.loc}: {_ERR_KIND.get(kind, 'access')} index {index} "
                f"out of bounds (thread {thread}, block {thread // self.ck.kernel.block}) "
                f"[native, {self.ck.variant.label}{', checked fallback' if self.fallback else ''}]")


# ---------------------------------------------------------------- the cache

_cache: dict = {}          # key -> NativeCode
_bound: dict = {}          # (key, variant, verify) -> CompiledKernel
_cache_lock = threading.Lock()
_key_locks: dict = {}


def _as_ir(kernel) -> Kernel:
    if isinstance(kernel, KernelFunction):
        return kernel.ir
    if isinstance(kernel, Kernel):
        return kernel
    raise TypeError(f"expected a @kernel function or a Kernel, got {type(kernel).__name__}")


def cache_key(k: Kernel, config: codegen.CodegenConfig) -> str:
    """The compile key: specialised kernel k built as `config` says."""
    text = format_kernel(k)
    # Source locations are not in the printed text, but a compiled kernel reports them
    # (checked builds) and compare() interprets its kernel: the same text at other lines
    # (an edited, reloaded module) must not reuse another kernel's statement table.
    locs = ";".join(str(s.loc) for s in walk_stmts(k.body))
    digest = hashlib.sha256(f"{text}\n{locs}\n{config.key}".encode()).hexdigest()
    return digest + ("/full_blocks" if config.full_blocks else "")


_handles: dict = {}    # cheap key -> CompiledKernel, in front of the printed-IR key
_WHOLE = parse_variant("whole")


@lru_cache(maxsize=256)
def _parse_variant_cached(text: str) -> Variant:
    return parse_variant(text)   # Variants are frozen: one object serves every caller


def as_variant(variant) -> Variant:
    """A Variant, a spelling of one (parsed once per spelling), or None for `whole`."""
    if variant is None:
        return _WHOLE
    if isinstance(variant, str):
        return _parse_variant_cached(variant)
    return variant


def _handle_key(k, consts, config: codegen.CodegenConfig, n, verify: str = "first"):
    """What decides the compile, read without printing anything: the Kernel object
    (frozen; a KernelFunction is read through .ir, so a new .ir or a reloaded module
    is a new key; the key holds the object, so its identity is never reused), the
    constants with their types (1, 1.0 and True are different constants to the
    specialiser), the whole-blocks specialisation and the build's configuration (the
    variant, grain and workers included: they are the handle's). None when something
    is not hashable: the full path then decides."""
    if not isinstance(k, Kernel):
        return None
    try:
        ckey = tuple(sorted((name, type(v), v) for name, v in consts.items())) if consts else ()
        full = whole_blocks_build(k, config.variant, n)
        return (k, ckey, full, verify, config)   # the configuration stays last
    except (TypeError, AttributeError, ValueError):
        return None


def whole_blocks_build(k: Kernel, variant: Variant, n: Optional[int]) -> bool:
    """Whether a launch of n threads takes the build specialised for whole blocks (module
    notes): a packet variant with full_packet on, n a positive multiple of the block (the
    variant's block knob, else the kernel's). A cooperative kernel runs whole blocks at every
    n (DESIGN §2): nothing to specialise on."""
    block = variant.block if variant.block is not None else k.block
    return bool(n is not None and n > 0 and n % block == 0 and variant.lanes > 1 and variant.full_packet
                and not k.cooperative)


def compile_kernel(kernel, consts: Optional[dict] = None, variant=None, n: Optional[int] = None,
                   verify: str = "first") -> CompiledKernel:
    """Specialise, validate, lower, optimise and link (or fetch from the cache).

    `n`, the launch size when known, lets a packet variant specialise for
    launches of whole blocks (see the module notes); any n still launches.
    A kernel compiled before is found by a cheap key first (microseconds), and
    only on a miss by specialising and printing it.

    `verify`: how `launch` checks the native build against the interpreter
    (verify_launch.py): "first" (default) the first launch of each new shape,
    "always" every launch, "never" none. `prepare`/`run_prepared` never check."""
    check_mode(verify)
    variant = as_variant(variant)
    k = kernel.ir if type(kernel) is KernelFunction else kernel
    config = codegen.resolve(variant)      # once per build: everything below asks it
    hkey = _handle_key(k, consts, config, n, verify)
    if hkey is not None:
        try:
            hit = _handles.get(hkey)
        except TypeError:       # an unhashable constant
            hit = hkey = None
        if hit is not None:
            return hit
    ck = _compile_kernel(kernel, consts, config, n, verify)
    if hkey is not None:     # built from hkey's config alone (its planted bugs too): the handle matches its key
        with _cache_lock:
            ck = _handles.setdefault(hkey, ck)
    return ck


def _compile_kernel(kernel, consts: Optional[dict], config: codegen.CodegenConfig, n: Optional[int],
                    verify: str = "first") -> CompiledKernel:
    variant = config.variant
    k = _specialised(kernel, consts, variant)
    if whole_blocks_build(k, variant, n):
        config = replace(config, full_blocks=True)
    key = cache_key(k, config)
    with _cache_lock:
        bound = _bound.get((key, variant, verify))
        if bound is not None:
            return bound
    code = _compile(k, config, key)
    with _cache_lock:
        return _bound.setdefault((key, variant, verify), CompiledKernel(code, variant, verify))


def _specialised(kernel, consts: Optional[dict], variant: Variant) -> Kernel:
    """The kernel as `variant` builds it: re-blocked by its block knob, specialised on `consts`,
    its block holding whole packets (checked here, once, for every build)."""
    k = _as_ir(kernel)
    if variant.block is not None and variant.block != k.block:
        if k.specialised:
            raise UnsupportedVariant(f"kernel {k.name} is already specialised for block {k.block}; "
                                     f"cannot re-block it to {variant.block}")
        k = Kernel(k.name, k.params, k.body, variant.block)
    k = specialize(k, consts or {})
    if k.block < variant.lanes:
        raise UnsupportedVariant(f"variant {variant.label!r}: block {k.block} is smaller than lanes "
                                 f"{variant.lanes} (a block must hold whole packets)")
    return k


def _compile(k: Kernel, config: codegen.CodegenConfig, key: Optional[str] = None) -> NativeCode:
    """The cached native code of specialised kernel k built as `config` says (compiled once per key)."""
    if key is None:
        key = cache_key(k, config)
    with _cache_lock:
        code = _cache.get(key)
        if code is not None:
            return code
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:  # one compile per key, other keys compile meanwhile
        code = _cache.get(key)
        if code is None:
            code = _build(k, config, key)
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


def _build(k: Kernel, config: codegen.CodegenConfig, key: str) -> NativeCode:
    t0 = time.perf_counter()
    full_blocks = config.full_blocks
    _, scratch = private_layout(k, config)
    if scratch > MAX_SCRATCH_BYTES:
        raise KernelError(k.name, None, f"private and shared arrays need {scratch} bytes per block of "
                                        f"{k.block} threads; "
                                        f"the native backend allows at most {MAX_SCRATCH_BYTES}")
    symbol = f"cohort_{k.name}_{key[:12]}" + ("_full_blocks" if full_blocks else "")
    lowering = Lowering(k, symbol, config)
    module = lowering.lower()
    text = _with_function_attributes(str(module), symbol, target.host().entry_attributes(lowering.facts.fn_attributes))
    linked = jit.compile_module(text, [symbol], lowering.facts.tuning, config.level)
    # full_blocks as the lowering honours it (a cooperative kernel's blocks are whole at any n)
    built = config if lowering.full_blocks == config.full_blocks else replace(config, full_blocks=lowering.full_blocks)
    ck = NativeCode(k, built, symbol, linked.addresses[symbol], linked, lowering.stmt_table,
                    time.perf_counter() - t0)
    ck.scratch_bytes = scratch
    # the lane claims, with the width they speak of (packets x interleave)
    ck.annotations = LaneClaims(lowering.lane_claims, lowering.W)
    ck.lowering_counts = dict(lowering.counts)
    ck.lowering_counts["interleave"] = lowering.interleave
    ck.region_plan = lowering.plan
    ck.regions = lowering.plan.outline()
    return ck


def cross_compile(kernel, tgt: "target.Target", variant=None, consts: Optional[dict] = None,
                  kind: str = "object", full_blocks: bool = False):
    """The kernel's entry built for another machine `tgt` (target.from_triple): its object file
    (bytes) or assembly (str), lowered as for the host (the same IR but for the choices that are
    the target's: FMA, masked stores, half conversions, register widths) and optimised for `tgt`;
    `kind="ir"` is the lowering's LLVM IR before optimisation (str). Nothing is linked or run:
    this is how the macOS and AArch64 builds, and builds for a vector width other than the
    host's, are checked from any host. `full_blocks` builds the form for launches of whole
    blocks only, as compile_kernel does when given `n`."""
    if kind not in ("object", "assembly", "ir"):
        raise ValueError(f"kind must be 'object', 'assembly' or 'ir', got {kind!r}")
    variant = as_variant(variant)
    k = _specialised(kernel, consts, variant)
    with target.use(tgt):
        config = codegen.resolve(variant)
        symbol = f"cohort_{k.name}_{cache_key(k, config)[:12]}"
        lowering = Lowering(k, symbol, replace(config, full_blocks=full_blocks))
        module = lowering.lower()
        text = _with_function_attributes(str(module), symbol, tgt.entry_attributes(lowering.facts.fn_attributes))
    if kind == "ir":
        return text
    return jit.emit(text, tgt, kind, lowering.facts.tuning)

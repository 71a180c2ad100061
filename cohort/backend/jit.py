"""llvmlite set-up: host target machine, O3 pipeline, ORC LLJIT linking; objects for other targets.

One LLJIT per process; every compiled module becomes a JIT library with a
unique name and stays alive for the life of the process (freeing code that a
worker thread may still run is a crash, not a saving). All llvmlite calls take
one global lock (NOTES-llvmlite.md); ours makes the order explicit.
"""
from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from dataclasses import dataclass

import llvmlite.binding as llvm

from . import objcache, target

_lock = threading.RLock()
_state = {}
_names = itertools.count()


def _init():
    if not _state:
        t = target.host()
        _state["target"] = t
        _state["lljit"] = llvm.create_lljit_compiler(target_machine())
    return _state


def target_machine() -> "llvm.TargetMachine":
    """A fresh host target machine (opt level 3, host CPU and features)."""
    return target.host().target_machine(opt=3, jit=True)


_quick = threading.local()
FULL = 3      # a user's build: LLVM's O3 pipeline and its optimising code generator


@contextlib.contextmanager
def quick_compiles(level=1):
    """Compiles made by this thread in here are quicker than a user's build (level 3, `FULL`):
    level 1 runs LLVM's O1 pipeline and level 0 none of its optimisations (the O0 pipeline),
    both with the fast code generator (FastISel and the fast register allocator, codegen level
    0). Measured on fuzz programs' modules: level 1 about half of level 3's time, level 0 about
    half of level 1's (no pass at all; the unoptimised code costs code generation a little
    more). The semantics are the same (no fast-math flag either way), but what only the
    optimisations do is not exercised at the lower levels (e.g. fusing `contract`-flagged
    multiplies and adds, InstCombine's folds of min/max). The fuzzer draws a level per program
    (verify/execute.py); the level is part of every compile cache key. True means 1, False 3."""
    level = 1 if level is True else FULL if level is False else int(level)
    if level not in (0, 1, FULL):
        raise ValueError(f"quick_compiles: level must be 0, 1 or {FULL}, got {level!r}")
    old = getattr(_quick, "level", FULL)
    _quick.level = level
    try:
        yield
    finally:
        _quick.level = old


def level() -> int:
    """This thread's compile level (quick_compiles): 0, 1 or 3 (a user's build)."""
    return getattr(_quick, "level", FULL)


def _lljit(s, quick_: bool):
    if not quick_:
        return s["lljit"]
    if "lljit_quick" not in s:
        s["lljit_quick"] = llvm.create_lljit_compiler(target.host().target_machine(opt=0, jit=True))
    return s["lljit_quick"]


def host() -> dict:
    """The host target's description (target.Target.describe) and LLVM's version."""
    with _lock:
        _init()
        return {**target.host().describe(), "llvm": ".".join(map(str, llvm.llvm_version_info))}


@dataclass
class Linked:
    """A linked JIT library: symbol addresses and the optimised IR."""
    addresses: dict
    llvm_ir: str
    seconds: dict
    tracker: object
    cached: bool = False          # LLVM's output came from the object cache (objcache.py)

    def assembly(self) -> str:
        """The host assembly of the optimised IR (generated on demand)."""
        with _lock:
            mod = llvm.parse_assembly(self.llvm_ir)
            return target_machine().emit_assembly(mod)


# InstCombine turns `sext` of a value it proves non-negative into `zext nneg`; for a vector of
# i32 gather indices widened to i64 the X86 back end then keeps 64-bit indices (a gather of half
# the lanes: vgatherqps instead of vgatherdps). `sext` is a refinement of `zext nneg` (both give
# the same value whenever the flag holds), so putting it back is valid on every target.
_ZEXT_NNEG_I32 = re.compile(r"zext nneg (<(\d+) x i32> [^ ,]+ to <\2 x i64>)")


def sign_extended_indices(mod):
    """(module, text) with every vector `zext nneg` i32 -> i64 written back as `sext`: the module
    re-parsed and verified when one was found, else `mod` itself."""
    text = str(mod)
    if "zext nneg <" not in text:
        return mod, text
    text, n = _ZEXT_NNEG_I32.subn(r"sext \1", text)
    if n == 0:
        return mod, str(mod)
    fixed = llvm.parse_assembly(text)
    fixed.verify()
    return fixed, text


def compile_module(ir_text: str, symbols: list, tuning: dict = None, compile_level: int = None) -> Linked:
    """Parse, verify, optimise (O3, no fast-math unless the IR asks) and link `ir_text`.
    `compile_level`: the compile level (quick_compiles), default this thread's; a kernel's build
    passes its CodegenConfig's.

    `tuning` sets pipeline options (loop_unrolling, loop_vectorization,
    slp_vectorization, ...): code that is vectorised by construction gains
    nothing from LLVM's vectorisers and unroller but pays for them in compile time.
    With COHORT_OBJECT_CACHE set, LLVM's output for the same module, options and target is
    taken from disk when an earlier process made it (objcache.py; `Linked.cached`)."""
    with _lock:
        s = _init()
        t0 = time.perf_counter()
        lvl = level() if compile_level is None else compile_level
        fast = lvl != FULL
        tm = target.host().target_machine(opt=0, jit=True) if fast else target_machine()
        entry = None                     # the object cache's name for this compile
        if objcache.folder() is not None:
            host = s["target"]
            entry = objcache.key(ir_text, {"kind": "jit", "symbols": list(symbols), "level": lvl,
                                          "tuning": sorted((tuning or {}).items()),
                                          "target": [host.triple, host.cpu, host.features]})
        hit = objcache.load(entry) if entry is not None else None
        if hit is not None:
            opt_ir, obj = hit
            t1 = t2 = t3 = time.perf_counter()
        else:
            mod = llvm.parse_assembly(ir_text)
            mod.triple = s["target"].triple
            mod.data_layout = str(tm.target_data)
            mod.verify()
            t1 = time.perf_counter()
            pto = llvm.create_pipeline_tuning_options(speed_level=lvl)
            for key, value in (tuning or {}).items():
                setattr(pto, key, value)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)  # a pass manager may run once only
            t2 = time.perf_counter()
            mod, opt_ir = sign_extended_indices(mod)
            t3 = time.perf_counter()
            # code generation from the optimised module itself (linking its IR text would parse it
            # again: about a tenth of a fuzz program's compile time)
            obj = tm.emit_object(mod)
            if entry is not None:
                objcache.store(entry, opt_ir, obj)
        builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process()
        for name in symbols:
            builder.export_symbol(name)
        tracker = builder.link(_lljit(s, fast), f"cohort_{next(_names)}")
        addresses = {name: tracker[name] for name in symbols}
        t4 = time.perf_counter()
        return Linked(addresses, opt_ir, {"parse": t1 - t0, "optimise": t2 - t1,
                                          "codegen_link": t4 - t3, "total": t4 - t0}, tracker,
                      cached=hit is not None)


def emit(ir_text: str, tgt: "target.Target", kind: str = "object", tuning: dict = None):
    """Parse, verify and optimise `ir_text` as compile_module does, for `tgt` (any target, the
    host's included), and return its object file (bytes) or assembly (str) without linking
    or running anything: how code for another machine is built and inspected."""
    if kind not in ("object", "assembly"):
        raise ValueError(f"kind must be 'object' or 'assembly', got {kind!r}")
    if not isinstance(tgt, target.Target):
        raise TypeError(f"expected a Target, got {type(tgt).__name__}")
    name = None
    if objcache.folder() is not None:
        name = objcache.key(ir_text, {"kind": kind, "tuning": sorted((tuning or {}).items()),
                                      "target": [tgt.triple, tgt.cpu, tgt.features]})
        hit = objcache.load(name)
        if hit is not None:
            return hit[1] if kind == "object" else hit[0]
    with _lock:
        tm = tgt.target_machine(opt=3)
        mod = llvm.parse_assembly(ir_text)
        mod.triple = tgt.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        for key, value in (tuning or {}).items():
            setattr(pto, key, value)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        mod, _ = sign_extended_indices(mod)
        out = tm.emit_object(mod) if kind == "object" else tm.emit_assembly(mod)
    if name is not None:
        objcache.store(name, out if kind == "assembly" else "", out if kind == "object" else b"")
    return out

"""Native and check modes: a tile program compiled by llvmlite, run over the grid (DESIGN §10).

`compile_program` lowers a specialised program (native_lower.py) and links it through the
backend's JIT (backend/jit.py: host target, O3, the object cache), once per program and
set of planted bugs. `run` fills the argument block and runs the grid's programs: on the
backend's worker pool when there are several threads and the program has no atomics; a
program with atomics runs its grid in program-id order on the calling thread, as the
reference does, so its results (a lock's order of arrival included) are the reference's.
A failing program stops; the one with the lowest id is reported with the reference's own
message. `run_check` runs the reference on copies of the tensors' storage and native on the
tensors, then compares every storage bit for bit.
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import itertools
import sys
import threading

import numpy as np

from ..backend import jit, launch_policy, runtime
from . import tir, undefined
from .errors import CheckMismatch, KernelRuntimeError, UnsupportedConstruct, where
from .interp import Buffer, Interpreter
from .native_lower import Lowering, abi
from .native_ops import NativeUnsupported, exact_config
from .racecheck import RaceCheck, written_arguments

_compiled: dict = {}
_lock = threading.Lock()
_names = itertools.count()
NO_FAILURE = np.iinfo(np.int64).max     # the error record's first-failing program id until one fails
_settings = {"threads": 1}


def set_threads(n: int) -> None:
    """How many threads run a native launch's programs (1: the calling thread only)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"threads: expected a positive int, got {n!r}")
    _settings["threads"] = n


def threads() -> int:
    return _settings["threads"]


def cross_compile(prog: tir.Program, tgt, kind: str = "object"):
    """The program's native build for another machine (backend target.from_triple): its object
    file or assembly, or kind="ir" its LLVM IR before optimisation; nothing is linked or run."""
    from ..backend import target as btarget
    with btarget.use(tgt):
        text = _lower(prog, "cohort_triton_cross", exact_config())[1]   # the target's choices
        if kind == "ir":
            return text
        return jit.emit(text, tgt, kind)


def _lower(prog, symbol, config):
    try:
        low = Lowering(prog, symbol, config)
        return low, low.build()
    except NativeUnsupported as e:
        msg = str(e)
        line = None
        if msg.startswith("line "):
            line, msg = msg[5:].split(": ", 1)
        raise UnsupportedConstruct(f"{where(prog.name, prog.filename, line or '?')}: native mode does not "
                                   f"lower {msg}; run this kernel with mode='reference'") from None


PRINT_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


class Printer:
    """tl.device_print from a native program: the lowering stores each printed value whole
    into an array and calls this with the print's site, the program id and the arrays; it
    prints them as the reference does (interp.Interpreter.stmt)."""

    _NP = {tir.Dt.I1: np.uint8, tir.Dt.F16: np.float16}

    def __init__(self, sites: list):
        self.sites = sites
        self.fn = PRINT_FN(self)

    def __call__(self, site, x, y, z, ptrs):
        prefix, values = self.sites[site]
        addresses = (ctypes.c_int64 * max(1, len(values))).from_address(ptrs)
        arrays = []
        for (elem, shape), address in zip(values, addresses):
            dt = np.dtype(self._NP.get(elem, elem.np))
            n = int(np.prod(shape, dtype=np.int64))
            a = np.frombuffer((ctypes.c_char * (n * dt.itemsize)).from_address(address), dt).reshape(shape).copy()
            arrays.append(a.astype(bool) if elem is tir.Dt.I1 else a)
        print(f"pid {(int(x), int(y), int(z))} {prefix}", *arrays)


class Compiled:
    def __init__(self, prog, lowering, linked, symbol):
        self.prog, self.sites, self.nslots = prog, lowering.sites, lowering.nslots
        self.sequential = lowering.has_atomics
        self.slots = lowering.slots
        self.linked = linked
        self.address = linked.addresses[symbol]
        self.fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.address)
        self.printer = None
        if lowering.prints:                   # the module's hook holds the printer (kept alive here)
            self.printer = Printer(lowering.prints)
            hook = ctypes.c_void_p.from_address(linked.addresses[f"{symbol}_print"])
            hook.value = ctypes.cast(self.printer.fn, ctypes.c_void_p).value


def compile_program(prog: tir.Program) -> Compiled:
    """The native build of `prog` (cached per program object and planted bugs)."""
    config = exact_config()       # the target's fma/f16 choices and the planted bugs: the key
    key = (id(prog), config)
    with _lock:
        got = _compiled.get(key)
        if got is not None and got.prog is prog:
            return got
        symbol = f"cohort_triton_{next(_names)}"
        low, text = _lower(prog, symbol, config)
        linked = jit.compile_module(text, [symbol] + ([f"{symbol}_print"] if low.prints else []))
        got = _compiled[key] = Compiled(prog, low, linked, symbol)
        return got


def _bits(v: np.ndarray, elem: tir.Dt) -> int:
    v = np.asarray(v).astype(elem.np) if elem is not tir.Dt.I1 else np.asarray(bool(v), np.uint8)
    return int(v.reshape(1).view(np.dtype(f"i{v.itemsize}"))[0])


class _Launch:
    """What backend.runtime.WorkerPool.run reads of a prepared launch."""

    class code:
        scratch_bytes = 0

    def __init__(self, args, entry, nblocks):
        self.args, self.entry, self.nblocks = args, entry, nblocks
        self.origin = self

    def raise_error(self, rerun=None):
        pass


def run(prog: tir.Program, buffers: dict, scalars: dict, grid: tuple, threads: int = None) -> None:
    c = compile_program(prog)
    slots = [0] * max(c.nslots, 7)
    slots[7:10] = grid
    bufs, scal = abi(prog)
    for name, _ in bufs:
        buf = buffers[name]
        k = c.slots[name][0]
        slots[k:k + 3] = (buf.flat.ctypes.data, buf.flat.size, buf.base)
    for name, t in scal:
        slots[c.slots[name][0]] = _bits(scalars[name], t.elem)
    run_slots(c, slots, grid, lambda: buffers, threads)


def run_slots(c: Compiled, slots: list, grid: tuple, buffers, threads: int = None) -> None:
    """Run the grid's programs from a filled argument block (slots from 7 on; see native_lower)."""
    n = grid[0] * grid[1] * grid[2]
    if n == 0:
        return
    err = np.array([0, NO_FAILURE, 0, 0], np.int64)
    slots[3] = err.ctypes.data
    threads = _settings["threads"] if threads is None else threads
    # a program is a block: the backend's launch policy (grain 0, the runtime's pick) decides
    # where the grid runs; a program with atomics runs the grid in order on this thread
    route = launch_policy.policy_for(0, 1 if c.sequential else threads).route(n)
    if isinstance(route, launch_policy.Pool):
        runtime.pool(route.workers).run(_Launch(np.array(slots, np.int64), c.address, n), route.grain,
                                        route.workers)
    else:
        slots[1], slots[2] = 0, n
        args = (ctypes.c_int64 * len(slots))(*slots)
        c.fn(ctypes.addressof(args))
    if err[1] != NO_FAILURE:
        raise failure(c, buffers(), int(err[1]), int(err[2]), int(err[3]), grid)


def failure(c: Compiled, buffers, pid: int, site: int, value: int, grid) -> KernelRuntimeError:
    """The reference's error for program `pid` failing at site `site` (native_lower.Site)."""
    s = c.sites[site - 1]
    p = c.prog
    x, yz = pid % grid[0], pid // grid[0]
    head = f"{where(p.name, p.filename, s.line)}, program {(x, yz % grid[1], yz // grid[1])}: "
    if s.kind == "oob":
        what, base = s.info
        buf = buffers[base]
        msg = (f"{what} out of bounds: argument `{base}` offset {value} (its storage holds elements "
               f"{-buf.base}..{buf.flat.size - buf.base - 1} from the argument's first)")
    elif s.kind in ("div", "mod"):
        msg = f"integer {'division' if s.kind == 'div' else 'remainder'} by zero "
    elif s.kind == "shift":
        msg = f"shift amount {value} outside 0..{s.info.bits - 1} for {s.info!r} "
    elif s.kind == "gather":
        axis, size = s.info
        msg = f"tl.gather index {value} outside 0..{size - 1} of axis {axis}"
    elif s.kind == "assert":
        msg = f"device_assert failed: {s.info}"
    else:
        msg = "range step is 0"
    return KernelRuntimeError(head + msg)


def _copies(buffers: dict) -> dict:
    """The buffers over copies of their storage (arguments sharing a storage share its copy)."""
    copies, out = {}, {}
    for name, buf in buffers.items():
        key = (buf.flat.__array_interface__["data"][0], buf.flat.nbytes)
        if key not in copies:
            copies[key] = buf.flat.copy()
        out[name] = Buffer(copies[key].view(buf.flat.dtype), buf.base, buf.elem)
    return out


_NAN_BITS = {tir.Dt.F16: (0x7C00, 0x03FF), tir.Dt.BF16: (0x7F80, 0x007F), tir.Dt.F32: (0x7F800000, 0x007FFFFF),
             tir.Dt.F64: (0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def _nan(flat: np.ndarray, elem: tir.Dt) -> np.ndarray:
    """Which elements of a float storage are NaN, from their bits (bf16 is stored as uint16).
    Check mode counts every NaN equal to every NaN, as DESIGN §3: their sign and payload are
    not defined (a NaN meeting a NaN of the other sign in `tl.dot` keeps either, by target)."""
    if elem not in _NAN_BITS:
        return np.zeros(flat.shape, bool)
    exp, man = _NAN_BITS[elem]
    u = flat.view(np.dtype(f"u{flat.itemsize}"))
    return ((u & exp) == exp) & ((u & man) != 0)


def run_check(prog: tir.Program, buffers: dict, scalars: dict, grid: tuple) -> None:
    """The reference on copies with the race detector (racecheck.py) and the undefined-lane
    probe (undefined.py), native on the tensors, every storage compared bit for bit, and what
    tl.device_print printed: the reference's lines are printed once, native's must be the same."""
    ref = _copies(buffers)
    first = Interpreter(prog, ref, scalars, grid, race=RaceCheck(ref, grid, written_arguments(prog)))
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            first.run()
    finally:
        sys.stdout.write(printed.getvalue())
    if first.unfilled:
        with contextlib.redirect_stdout(io.StringIO()):       # its runs print what the first did
            undefined.probe(prog, buffers, ref, scalars, grid, list(first.unfilled.values()), _copies)
    native_printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(native_printed):
            run(prog, buffers, scalars, grid)
    except KernelRuntimeError as e:
        raise CheckMismatch(f"check: native failed where the reference ran: {e}") from None
    if native_printed.getvalue() != printed.getvalue():
        want, got = printed.getvalue().splitlines(), native_printed.getvalue().splitlines()
        k = next((i for i, (w, g) in enumerate(zip(want, got)) if w != g), min(len(want), len(got)))
        raise CheckMismatch(
            f"kernel `{prog.name}` ({prog.filename}): check: native and reference print differently at "
            f"line {k + 1} of the output: native {got[k] if k < len(got) else '(nothing)'!r}, reference "
            f"{want[k] if k < len(want) else '(nothing)'!r}")
    for name, _ in abi(prog)[0]:
        got, want = buffers[name].flat, ref[name].flat
        u = np.dtype(f"u{got.itemsize}")
        diff = np.flatnonzero((got.view(u) != want.view(u)) & ~(_nan(got, buffers[name].elem)
                                                                 & _nan(want, buffers[name].elem)))
        if diff.size:
            k = int(diff[0])
            base = buffers[name].base
            raise CheckMismatch(
                f"kernel `{prog.name}` ({prog.filename}): check: native and reference differ in argument "
                f"`{name}` at element {k - base} (storage element {k}): native {got[k].item()!r} (bits "
                f"{int(got.view(u)[k]):#x}), reference {want[k].item()!r} (bits {int(want.view(u)[k]):#x}); "
                f"{diff.size} element(s) differ")


__all__ = ["compile_program", "cross_compile", "run", "run_check", "set_threads", "threads", "CheckMismatch"]

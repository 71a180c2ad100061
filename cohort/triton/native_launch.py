"""The native launch's fast path: a launch whose arguments specialise as an earlier one did
reuses that launch's build and argument plan without binding, specialising or making NumPy
views of the tensors (the general path, launch.run_mode, costs about 100 µs a launch;
this one a few).

The key of a launch holds what decides its specialisation (launch.specialise): per
argument a tensor's dtype and device, an int's class (1, i32, i64, u64 range), float,
bool or None, a constexpr's value, and the names of the keyword arguments. A launch with
a key not seen yet takes the general path, which builds the program and records the plan.
"""
from __future__ import annotations

import inspect
import struct
import threading

import numpy as np

from . import launch as L
from . import native
from .native_lower import abi
from .tir import Dt

_plans: dict = {}
_signatures: dict = {}
_lock = threading.Lock()


def _int_class(v: int):
    if v == 1:
        return 1
    if -2 ** 31 <= v < 2 ** 31:
        return 32
    return 64 if -2 ** 63 <= v < 2 ** 63 else 65


def _tag(v, constexpr: bool):
    if constexpr:
        try:
            hash(v)
            return ("c", type(v), v)
        except TypeError:
            return ("c", type(v), repr(v))
    t = type(v)
    if t is bool:
        return "b"
    if t is int:
        return _int_class(v)
    if t is float:
        return "f"
    if v is None:
        return "N"
    if hasattr(v, "untyped_storage"):
        return (v.dtype, v.device.type)
    return ("?", t)          # the general path decides (and says what is wrong)


class _Signature:
    def __init__(self, jitfn):
        self.names = [p.name for p in jitfn.params]
        self.constexpr = [bool(p.is_constexpr) for p in jitfn.params]
        self.pos = {n: i for i, n in enumerate(self.names)}
        sig = inspect.signature(jitfn.fn)
        self.defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def _signature(jitfn) -> _Signature:
    s = _signatures.get(jitfn)
    if s is None:
        s = _signatures[jitfn] = _Signature(jitfn)
    return s


def _scalar_bits(dt: Dt):
    if dt is Dt.F32:
        return lambda v: struct.unpack("<i", struct.pack("<f", float(np.float32(v))))[0]
    if dt is Dt.F64:
        return lambda v: struct.unpack("<q", struct.pack("<d", float(v)))[0]
    if dt is Dt.I1:
        return lambda v: int(bool(v))
    if dt.is_int:
        bits = dt.bits
        return lambda v: ((int(v) + (1 << 63)) % (1 << 64)) - (1 << 63) if bits == 64 else int(v) & ((1 << bits) - 1)
    return None


class _Plan:
    def __init__(self, compiled, sig, prog):
        self.c = compiled
        bufs, scal = abi(prog)
        self.tensors = [(name, compiled.slots[name][0]) for name, _ in bufs]
        self.scalars = []
        for name, t in scal:
            conv = _scalar_bits(t.elem)
            if conv is None:
                raise ValueError
            self.scalars.append((name, compiled.slots[name][0], conv))
        self.grid_dims = None


def launch(jitfn, grid, args, kwargs):
    """Run one native launch and return its program; None when the general path must take it
    (the first launch of its key)."""
    sig = _signature(jitfn)
    ce = sig.constexpr
    try:
        key = (jitfn, tuple(_tag(v, ce[i]) for i, v in enumerate(args)),
               tuple((k, _tag(v, ce[sig.pos[k]] if k in sig.pos else True)) for k, v in kwargs.items()))
    except (IndexError, TypeError):
        return None
    plan = _plans.get(key)
    if plan is None:
        return None

    def value(name):
        i = sig.pos[name]
        if i < len(args):
            return args[i]
        return kwargs[name] if name in kwargs else sig.defaults[name]
    if callable(grid):
        meta = {n: value(n) for n in sig.names if n in sig.defaults or n in kwargs or sig.pos[n] < len(args)}
        g = L.grid_of(grid, meta, jitfn.fn.__name__)
    else:
        g = L.grid_of(grid, None, jitfn.fn.__name__)
    c = plan.c
    slots = [0] * max(c.nslots, 7)
    slots[7:10] = g
    for name, k in plan.tensors:
        t = value(name)
        st = t.untyped_storage()
        es = t.element_size()
        slots[k], slots[k + 1], slots[k + 2] = st.data_ptr(), st.nbytes() // es, t.storage_offset()
    for name, k, conv in plan.scalars:
        slots[k] = conv(value(name))
    native.run_slots(c, slots, g, lambda: _buffers(jitfn, args, kwargs))
    return c.prog


def _buffers(jitfn, args, kwargs):
    """The launch's buffers as the general path makes them (for an error's message)."""
    bound = L.bind(jitfn, args, kwargs)
    return L.specialise(jitfn, bound)[2]


def record(jitfn, args, kwargs, prog):
    """After the general path ran a native launch: remember its plan under the launch's key."""
    sig = _signature(jitfn)
    ce = sig.constexpr
    try:
        key = (jitfn, tuple(_tag(v, ce[i]) for i, v in enumerate(args)),
               tuple((k, _tag(v, ce[sig.pos[k]] if k in sig.pos else True)) for k, v in kwargs.items()))
        hash(key)
    except (IndexError, TypeError):
        return
    if any(isinstance(t, tuple) and t and t[0] == "?" for t in key[1]):
        return
    try:
        plan = _Plan(native.compile_program(prog), sig, prog)
    except ValueError:
        return
    with _lock:
        _plans[key] = plan


__all__ = ["launch", "record"]

"""The native launch's fast path: a launch whose arguments specialise as an earlier one did
reuses that launch's build without binding, specialising or making NumPy views of the
tensors (the general path, launch.run_mode, costs about 100 µs a launch; this one a few).

After the general path ran a launch, `record` writes one Python function for it (a guard
and a filler): it holds when every argument has the kind that decided the specialisation
(launch.specialise) — a tensor's dtype on the CPU, an int's class (1, i32, i64, u64 range,
or the range of its annotation), float, bool, None, a constexpr's type and value, the
same positional count and keyword names — and then fills the argument block (native_lower's
ABI) straight from the arguments: a tensor's storage address, size and offset, a scalar's
bits. A launch no guard holds for takes the general path, which records one more.
"""
from __future__ import annotations

import array
import inspect
import struct
import threading

import numpy as np

from ..backend.launch_plan import f32_bits
from . import launch as L
from . import native
from .native_lower import SLOT_GRID, abi
from .tir import Dt, int_range

_kernels: dict = {}          # id(jitfn) -> _Kernel
_lock = threading.Lock()
_MAX_PLANS = 32              # per kernel; the oldest goes first
_NONE = native.NO_FAILURE
_F64, _I64 = struct.Struct("<d"), struct.Struct("<q")


def _f32_bits(v) -> int:
    """The bits of float v rounded to f32 as launch.specialise rounds it (NumPy's conversion:
    an overflow is inf, a NaN keeps what NumPy keeps of its payload)."""
    if v == v:
        try:
            return f32_bits(v)
        except OverflowError:
            pass
    with np.errstate(over="ignore"):
        return int(np.array(v, np.float64).astype(np.float32).view(np.uint32))


def _f64_bits(v) -> int:
    return _I64.unpack(_F64.pack(v))[0]


class _Kernel:
    def __init__(self, jitfn):
        self.jitfn = jitfn                   # held: no reuse of the id while recorded
        self.plans: list = []
        sig = inspect.signature(jitfn.fn)
        self.defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def launch(jitfn, grid, args, kwargs):
    """Run one native launch and return its program; None when no recorded plan holds (the
    general path takes it)."""
    k = _kernels.get(id(jitfn))
    if k is None or k.jitfn is not jitfn:
        return None
    for plan in k.plans:
        got = plan(grid, args, kwargs)
        if got is not None:
            return got
    return None


def _run(c, s, g, jitfn, args, kwargs):
    """Run the grid's programs from the filled block s (array 'q': the slots, then the error
    record) on this thread, or on the pool as native.run_slots decides."""
    n = g[0] * g[1] * g[2]
    if n == 0:
        return c.prog
    if c.sequential or native.threads() == 1:
        addr = s.buffer_info()[0]
        s[3] = addr + 8 * c.nslots
        s[2] = n
        c.fn(addr)
        if s[c.nslots + 1] != _NONE:
            e = c.nslots
            raise native.failure(c, _buffers(jitfn, args, kwargs), s[e + 1], s[e + 2], s[e + 3], g)
        return c.prog
    native.run_slots(c, s.tolist()[:c.nslots], g, lambda: _buffers(jitfn, args, kwargs))
    return c.prog


def _buffers(jitfn, args, kwargs):
    """The launch's buffers as the general path makes them (for an error's message)."""
    bound = L.bind(jitfn, args, kwargs)
    return L.specialise(jitfn, bound)[2]


def _grid3(g, name):
    """A grid (already evaluated) as three sizes; launch.grid_of unless a plain tuple of ints."""
    if type(g) is tuple:
        n = len(g)
        if n == 1:
            x = g[0]
            if type(x) is int and x >= 0:
                return (x, 1, 1)
        elif n == 2:
            x, y = g
            if type(x) is int and type(y) is int and x >= 0 and y >= 0:
                return (x, y, 1)
        elif n == 3:
            x, y, z = g
            if type(x) is int and type(y) is int and type(z) is int and x >= 0 and y >= 0 and z >= 0:
                return g
    return L.grid_of(g, None, name)


_CONST_TYPES = (int, float, bool, str, type(None))


def _int_class(v: int, do_not_specialize: bool) -> int:
    """launch.specialise's classes of an unannotated int: 1 (a constant), i32, i64, u64."""
    if v == 1 and not do_not_specialize:
        return 1
    if -2 ** 31 <= v < 2 ** 31:
        return 32 if do_not_specialize else 31         # 31: i32, 1 excluded (it is a constant)
    return 64 if -2 ** 63 <= v < 2 ** 63 else 65


_INT_GUARD = {1: "{x} == 1", 31: "-2147483648 <= {x} <= 2147483647 and {x} != 1",
              32: "-2147483648 <= {x} <= 2147483647",
              64: "-9223372036854775808 <= {x} <= 9223372036854775807 and not -2147483648 <= {x} <= 2147483647",
              65: "9223372036854775808 <= {x} <= 18446744073709551615"}


def record(jitfn, args, kwargs, prog):
    """After the general path ran a native launch: write its plan (see the module's text)."""
    try:
        plan = _plan(jitfn, args, kwargs, prog)
    except _NoPlan:
        return
    with _lock:
        k = _kernels.get(id(jitfn))
        if k is None or k.jitfn is not jitfn:
            k = _kernels[id(jitfn)] = _Kernel(jitfn)
        k.plans.insert(0, plan)
        del k.plans[_MAX_PLANS:]


class _NoPlan(Exception):
    """An argument kind the fast path does not guard: the general path takes every such launch."""


def _plan(jitfn, args, kwargs, prog):
    c = native.compile_program(prog)
    k = _kernels.get(id(jitfn))
    defaults = k.defaults if k is not None and k.jitfn is jitfn else _Kernel(jitfn).defaults
    names = [p.name for p in jitfn.params]
    if len(args) > len(names):
        raise _NoPlan
    ns = {"_grid3": _grid3, "_run": _run, "_c": c, "_jit": jitfn, "_f32": _f32_bits, "_f64": _f64_bits,
          "_tag": _const_key}
    get, guards, meta = [], [], []
    for i, p in enumerate(jitfn.params):
        if i < len(args):
            v, expr = args[i], f"args[{i}]"
        elif p.name in kwargs:
            v, expr = kwargs[p.name], f"kwargs[{p.name!r}]"
        elif p.name in defaults:
            v, expr = defaults[p.name], f"_d{i}"
            ns[f"_d{i}"] = v
        else:
            raise _NoPlan
        get.append(f"a{i} = {expr}")
        meta.append(f"{p.name!r}: a{i}")
        guards.append(_guard(p, i, v, ns))
    slots, tmpl = [], [0] * c.nslots + [0, _NONE, 0, 0]
    bufs, scal = abi(prog)
    pos = {p.name: i for i, p in enumerate(jitfn.params)}
    for name, t in bufs:
        s = c.slots[name][0]
        size = {1: 0, 8: 0, 16: 1, 32: 2, 64: 3}[t.elem.elem.bits]
        slots.append(f"st = a{pos[name]}.untyped_storage()")
        slots.append(f"s[{s}] = st.data_ptr(); s[{s + 1}] = st.nbytes() >> {size}; "
                     f"s[{s + 2}] = a{pos[name]}.storage_offset()")
    for name, t in scal:
        slots.append(f"s[{c.slots[name][0]}] = {_conv(t.elem, f'a{pos[name]}')}")
    ns["_tmpl"] = array.array("q", tmpl)
    ns["_kw"] = frozenset(kwargs)             # the same keywords: a launch option, an unknown name

    fname = jitfn.fn.__name__
    src = ["def plan(grid, args, kwargs):",
           f"    if len(args) != {len(args)} or kwargs.keys() != _kw:",
           "        return None",
           "    try:"]
    src += [f"        {line}" for line in get if "kwargs[" in line or "args[" in line]
    src += ["    except KeyError:", "        return None"]
    src += [f"    {line}" for line in get if not ("kwargs[" in line or "args[" in line)]
    src += [f"    if not ({g}):\n        return None" for g in guards if g]
    src += ["    if callable(grid):",
            f"        g = _grid3(grid({{{', '.join(meta)}}}), {fname!r})",
            "    else:",
            f"        g = _grid3(grid, {fname!r})",
            "    s = _tmpl[:]",
            f"    s[{SLOT_GRID}] = g[0]; s[{SLOT_GRID + 1}] = g[1]; s[{SLOT_GRID + 2}] = g[2]"]
    src += [f"    {line}" for line in slots]
    src += ["    return _run(_c, s, g, _jit, args, kwargs)"]
    exec("\n".join(src), ns)                            # noqa: S102 - generated from the plan above
    return ns["plan"]


def _const_key(v):
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return (type(v), repr(v))


def _guard(p, i, v, ns) -> str:
    """The condition under which argument i specialises as v did (Python source over a{i})."""
    x = f"a{i}"
    if p.is_constexpr:
        if type(v) in _CONST_TYPES and not (type(v) is float and v != v):
            ns[f"_v{i}"] = v
            return f"type({x}) is {type(v).__name__ if v is not None else 'type(None)'} and {x} == _v{i}" \
                if v is not None else f"{x} is None"
        ns[f"_k{i}"] = _const_key(v)
        return f"_tag({x}) == _k{i}"
    if v is None:
        return f"{x} is None"
    if hasattr(v, "untyped_storage"):
        if v.device.type != "cpu":
            raise _NoPlan
        ns[f"_dt{i}"] = v.dtype
        ns[f"_ty{i}"] = type(v)
        return f"type({x}) is _ty{i} and {x}.dtype is _dt{i} and {x}.is_cpu"
    annotated = L.ANNOTATED.get(getattr(p, "annotation_type", ""))
    t = type(v)
    if annotated is not None:
        if annotated.is_int and annotated is not Dt.I1 and t is int:
            lo, hi = int_range(annotated)
            return f"type({x}) is int and {lo} <= {x} <= {hi}"
        raise _NoPlan                    # other annotated scalars: the general path converts them
    if t is bool:
        return f"type({x}) is bool"
    if t is float:
        return f"type({x}) is float"
    if t is int:
        return f"type({x}) is int and " + _INT_GUARD[_int_class(v, p.do_not_specialize)].format(x=x)
    raise _NoPlan


def _conv(d: Dt, x: str) -> str:
    """Python source of the argument block's int64 for scalar x of type d."""
    if d is Dt.F32:
        return f"_f32({x})"
    if d is Dt.F64:
        return f"_f64({x})"
    if d is Dt.I1:
        return f"1 if {x} else 0"
    if d is Dt.U64:
        return f"{x} - 18446744073709551616 if {x} >= 9223372036854775808 else {x}"
    if d.is_int:
        return x
    raise _NoPlan


__all__ = ["launch", "record"]

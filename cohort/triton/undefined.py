"""Check mode's undefined-lane probe: outputs that depend on the masked-off lanes of a load
without `other=` (DESIGN §10, *Check mode*).

Triton leaves those lanes undefined (on a GPU they hold whatever the registers held); the
reference gives them zeros, so a kernel that lets them reach memory agrees with itself
everywhere and is wrong on the device. When the checked run had such lanes (a load with a mask
and no `other`, some lane off), the reference runs again on fresh copies with the lanes holding
another value, then the negation of it; a stored bit that changes is reported, at the first
load whose lanes alone change it, with the argument, offset and the program that stored it.
A value the probe does not try can still hide a dependence (a `max` over lanes that are all
below both fills): a missed report, never a false one.
"""
from __future__ import annotations

import numpy as np

from . import values
from .errors import KernelRuntimeError, where
from .interp import Interpreter
from .native_lower import abi
from .racecheck import RaceCheck, written_arguments
from .tir import Dt


def fill(elem: Dt, sign: int):
    """What the probe puts in the masked-off lanes (sign 1, then -1)."""
    if elem.is_float:
        return values.cast(np.float64(sign * (3.0e4 if elem is Dt.F16 else 1.0e30)), Dt.F64, elem)
    if elem is Dt.I1:
        return np.uint8(1)
    bits = np.uint64(0x5A5A5A5A5A5A5A5A if sign > 0 else 0xA5A5A5A5A5A5A5A5)
    return bits.astype(elem.np)


def _difference(prog, want: dict, got: dict):
    """(argument, storage element) of the first bit that differs, or None."""
    for name, _ in abi(prog)[0]:
        a, b = want[name].flat, got[name].flat
        u = np.dtype(f"u{a.itemsize}")
        diff = np.flatnonzero(a.view(u) != b.view(u))
        if diff.size:
            return name, int(diff[0])
    return None


def _run(prog, buffers, scalars, grid, copies, fill_at):
    """The reference on fresh copies with `fill_at(load, elem)` in the masked-off lanes:
    (buffers, race record), or the error the run raised."""
    alt = copies(buffers)
    race = RaceCheck(alt, grid, written_arguments(prog))     # it names who stored an element
    try:
        Interpreter(prog, alt, scalars, grid, race=race, undefined=fill_at).run()
    except KernelRuntimeError as e:
        return None, e
    return alt, race


def probe(prog, buffers: dict, ref: dict, scalars: dict, grid: tuple, loads: list, copies) -> None:
    """Raise KernelRuntimeError when an output of the reference run `ref` depends on the
    masked-off lanes of `loads` (the module notes); `buffers`: the launch's untouched arguments."""
    sites = sorted(loads, key=lambda st: st.line)
    for sign in (1, -1):
        alt, _ = _run(prog, buffers, scalars, grid, copies, lambda st, elem: fill(elem, sign))
        if alt is not None and _difference(prog, ref, alt) is None:
            continue
        for site in sites:                      # the first load whose lanes alone change the outputs
            alt, race = _run(prog, buffers, scalars, grid, copies,
                             lambda st, elem: fill(elem, sign) if st is site else np.zeros((), elem.np))
            if alt is None:
                raise KernelRuntimeError(f"{where(prog.name, prog.filename, site.line)}: the masked-off lanes of "
                                         f"this load (a mask and no `other=`: undefined in Triton) change what "
                                         f"the kernel does: with other values there, {race}")
            got = _difference(prog, ref, alt)
            if got is not None:
                name, k = got
                st = race.storage(name, True)
                writer = int(st.writes.pid[0, k])
                who = f"program {race._pid(writer)} stored it" if writer >= 0 else "no program stored it"
                raise KernelRuntimeError(
                    f"{where(prog.name, prog.filename, site.line)}: argument `{name}` offset {k - ref[name].base} "
                    f"depends on the masked-off lanes of this load ({who}): a load with a mask and no "
                    f"`other=` leaves them undefined in Triton; give it `other=`")
        raise KernelRuntimeError(f"{where(prog.name, prog.filename, sites[0].line)}: the outputs depend on the "
                                 f"masked-off lanes of the loads without `other=` at lines "
                                 f"{', '.join(str(s.line) for s in sites)}; give them `other=`")

"""The sanitizing build's launch side (`sanitize=on`; the detectors are lowering/sanitize.py
and lowering/sanitize_global.py): the error record's extra words, the global shadow memory
the launcher hands the entry, and the interpreter's words for what the entry found.

A sanitize build's error record (the int64 words at the argument block's SLOT_ERR) is longer
than the usual four (kind, statement, index, thread):

    [4]                 the other access of a global race: its thread | its way << 32
    [VALUES ...]        a block's per-thread values of a divergent barrier's condition or
                        trip count (i32 each, B of them), when the kernel has a barrier
                        under an `if` or `for`
    [shadows ...]       per buffer the kernel writes: its shadow's address, its capacity
                        (elements)

The shadow of a buffer is SHADOW_WORDS int64 words per element (lowering/sanitize_global.py
says what they hold), allocated here, zeroed, for every launch that goes through
CompiledKernel.run_prepared (launch, cohort.torch's ops), for a block CompiledKernel.prepare
hands out, and whenever a launch's buffer is longer than its shadow: the entry's prologue then
records ERR_SHADOW before touching any memory, and the launch is run again with shadows of the
right size (PreparedLaunch.raise_error). A prepared block run again directly (the native
timer) keeps its shadows: a repeat of one launch reports nothing its first run would not have
(the phases count per block), but a kernel whose indices depend on values it wrote itself can
be reported at a repeat. Cost: 56 bytes per element
of every buffer the kernel stores to or updates (docs/kernels.md).

Which finding a launch reports does not depend on the route: pool workers run blocks side by
side, so the first finding recorded there is whichever block got there first. A pooled sanitize
launch therefore keeps a copy of the buffers it writes (`snapshot`); when it records a finding,
CompiledKernel.run_prepared puts them back and runs the launch again on the calling thread, block
after block as the interpreter does, and reports what that run finds
(tests/test_sanitize_global.py, test_a_pooled_launch_reports_the_interpreters_finding).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..refimpl.ir import AtomicOp, Barrier, For, If, Kernel, ParamKind, walk_stmts, written_name

SHADOW_WORDS = 7            # per element: (launch range, phase range) per way, the first update's op
OTHER = 4                   # the error record's word naming a global race's other access
WAYS = ("write", "read", "atomic")
_OPS = list(AtomicOp)


@dataclass(frozen=True)
class RecordLayout:
    """Where a sanitize build's extra words lie in its error record (module notes)."""
    values_at: int              # first word of the per-thread values (0: none)
    block: int
    shadowed: tuple             # the buffers with a shadow, in order
    shadows_at: int

    @property
    def words(self) -> int:
        return self.shadows_at + 2 * len(self.shadowed)

    def shadow_slot(self, j: int) -> int:
        return self.shadows_at + 2 * j


def shadowed_buffers(k: Kernel) -> tuple:
    """The buffers whose accesses the interpreter records (interpreter.Interpreter.stored):
    those the kernel stores to or updates; loads of the others never race."""
    written = {written_name(s) for s in walk_stmts(k.body)}
    return tuple(p.name for p in k.params if p.kind is ParamKind.BUFFER and p.name in written)


def divergent_barriers(k: Kernel) -> bool:
    """Whether a barrier lies under an `if` or `for` (the only place a block can split)."""
    return any(isinstance(s, (If, For)) and any(isinstance(x, Barrier) for x in walk_stmts((s,)))
               for s in walk_stmts(k.body))


def layout(k: Kernel, variant) -> Optional[RecordLayout]:
    """The extra words of a `sanitize=on` build of specialised kernel k (None: other builds)."""
    if not variant.sanitize:
        return None
    values = -(-k.block // 2) if divergent_barriers(k) else 0
    at = OTHER + 1
    return RecordLayout(at if values else 0, k.block, shadowed_buffers(k), at + values)


def fit_shadows(rec: np.ndarray, lay: RecordLayout, args: np.ndarray, slots: dict, keep: list):
    """Fresh zeroed shadows, each at least as long as its buffer in argument block `args`,
    their addresses and capacities written into the record `rec` (the whole error record).
    `keep` holds the arrays alive (the PreparedLaunch's)."""
    keep.clear()
    for j, name in enumerate(lay.shadowed):
        length = int(args[slots[name][1]])
        shadow = np.zeros(max(length, 1) * SHADOW_WORDS, np.int64)
        keep.append(shadow)
        at = lay.shadow_slot(j)
        rec[at] = shadow.ctypes.data
        rec[at + 1] = length


def snapshot(lay: RecordLayout, k: Kernel, args: np.ndarray, slots: dict) -> list:
    """A copy of every buffer the kernel writes, as argument block `args` gives them, for
    `restore` (module notes)."""
    dtypes = {p.name: p.dtype for p in k.params}
    saved = []
    for name in lay.shadowed:
        address, length = int(args[slots[name][0]]), int(args[slots[name][1]])
        nbytes = length * dtypes[name].np.itemsize
        if nbytes:
            saved.append((address, bytes((ctypes.c_char * nbytes).from_address(address))))
    return saved


def restore(saved: list):
    """Put back the buffers `snapshot` copied."""
    for address, data in saved:
        ctypes.memmove(address, data, len(data))


def _noun(how: str) -> str:
    return {"read": "load", "write": "store"}.get(how, f"{how}() update")


def race_words(how: str, other_how: str, where: str, thread: int, other: int) -> str:
    """The interpreter's words for two accesses of one element (interpreter.Interpreter.track)."""
    if how == other_how == "write":
        return f"write conflict: threads {other} and {thread} both store to {where}"
    prep = "of" if how != "write" else "to"
    return f"{_noun(how)} {prep} {where} races with the {_noun(other_how)} by thread {other} in this launch"


def other_way(code: int) -> str:
    """A way of access from its code in the shadow: a store, a load, or an atomic op's name."""
    return WAYS[code] if code < 2 else _OPS[code - 2].value


def global_race_message(kernel: str, site, element: int, thread: int, other_word: int, B: int,
                        label: str) -> str:
    other, code = other_word & 0xFFFFFFFF, other_word >> 32
    words = race_words(site.how, other_way(code), f"{site.arr}[{element}]", thread, other)
    return f"kernel {kernel}, {site.loc}: {words} (thread {thread}, block {thread // B}) [native, {label}]"


def divergence_message(kernel: str, site, block: int, values: np.ndarray, B: int, label: str) -> str:
    """The interpreter's barrier-divergence words (interpreter.Interpreter.run_barrier) from a
    block's per-thread values: for an `if`, 1 where the thread takes the branch holding the
    barrier; for a `for`, its trip count (the threads past the fewest trips reach the barrier
    alone)."""
    from ..refimpl.interpreter import thread_ranges
    v = values[:B].astype(np.int64)
    here = v > v.min()
    away = ~here
    first_away = int(np.flatnonzero(away)[0])
    return (f"kernel {kernel}, {site.loc}: barrier divergence in block {block}: threads "
            f"{thread_ranges(np.flatnonzero(here))} reached this barrier, threads {thread_ranges(np.flatnonzero(away))} "
            f"did not (thread {block * B + first_away}, block {block}) [native, {label}]")


def message(p, kind: int, site, index: int, thread: int) -> str:
    """The interpreter's words for what a sanitize build's entry recorded in PreparedLaunch p's
    error record: a race in global memory, or a barrier the block's threads would not all reach."""
    from .context import ERR_GLOBAL_RACE
    name, B, label = p.ck.kernel.name, p.ck.kernel.block, p.ck.variant.label
    if kind == ERR_GLOBAL_RACE:
        return global_race_message(name, site, index, thread, int(p.record[OTHER]), B, label)
    lay = p.sanitized
    values = p.record[lay.values_at:lay.values_at + -(-B // 2)].view(np.int32)[:B].copy()
    if thread == 1:
        return (f"kernel {name}, {site.loc}: the loop around this barrier starts at different values in "
                f"the threads of block {index} (thread 0: {values[0]}, thread "
                f"{int(np.flatnonzero(values != values[0])[0])}: {values[values != values[0]][0]}) while they run "
                f"it equally often; a native build runs it once per block [native, {label}]")
    return divergence_message(name, site, index, values, B, label)

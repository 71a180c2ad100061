"""Deliberate backend bugs, for proving that the checkers catch real ones
(after Inductor's inject_*_bug_TESTING_ONLY knobs). Never on by default;
active bugs are part of the compile-cache key, so a buggy build is never
served to a clean run or the other way round.

    with inject_bug_TESTING_ONLY("tree_order"):
        ...   # every compile in here carries the bug
"""
from __future__ import annotations

import contextlib
import threading

BUGS = {
    "tree_order": "collectives reduce with s = 1, 2, 4, ... instead of B/2, ..., 1",
    "tail_mask": "the packet launch mask admits one thread past n (gid <= n)",
    "minmax_nan": "min/max select on the unordered compare (NaN handling flips)",
    "fma_contract": "float multiplies and adds carry the `contract` flag (FMA fusion)",
    "stride_as_contiguous": "stride-2 indices are classified contiguous",
    "div_uniform": "integer division by any constant is classified uniform across lanes",
    "full_packet_always": "every packet takes the unmasked full-packet path, the launch's partial one too",
    "private_swap": "cohort-layout private loads with a per-lane index address x + t*size (thread-major)",
    "fptosi_unsat": "f32 -> int uses plain fptosi (poison out of range) instead of the saturating form",
}

_active: set = set()
_lock = threading.Lock()


def active(name: str) -> bool:
    return name in _active


def key() -> tuple:
    return tuple(sorted(_active))


@contextlib.contextmanager
def inject_bug_TESTING_ONLY(*names: str):
    unknown = set(names) - set(BUGS)
    if unknown:
        raise ValueError(f"unknown injected bug(s) {sorted(unknown)}; known: {sorted(BUGS)}")
    with _lock:
        _active.update(names)
    try:
        yield
    finally:
        with _lock:
            _active.difference_update(names)

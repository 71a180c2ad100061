"""Check mode's race detector: accesses of one element by two programs of a launch that no
atomic orders (DESIGN §10, *Check mode*).

Programs of a launch are independent except through atomics (as in Triton). The reference
runs them one after another in program-id order; this records, per element of every storage
the launch touches, who accessed it, and tells from vector clocks (as ThreadSanitizer and
FastTrack do) whether the earlier access happens before the current one:

- a program's clock starts at 1 and steps after each atomic that releases;
- an atomic with `sem` "acq_rel" (Triton's default) or "release" joins the program's clock
  vector into the element's; one with "acq_rel" or "acquire" joins the element's vector
  into the program's (a failed `atomic_cas` acquires only); "relaxed" orders nothing;
- an access by program p at clock c happens before the current program q's access when
  q's vector holds at least c for p.

Two accesses conflict when they come from different programs, at least one stores, and they
are not both atomics. A conflict not ordered by happens-before is a race, reported as the
reference reports an out-of-bounds access (kernel, line, program id, argument, offset) with the
other access's program and line.

Per element the detector keeps at most two unordered writers and two unordered readers (an
access ordered after a kept one replaces it). A third concurrent reader (or atomic writer)
overwrites the second: a later access ordered after the kept two but not after the overwritten
one is not reported. A missed report is possible there; a false one is not.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .errors import TritonError

STORE, LOAD, ATOMIC = 0, 1, 2
_NOUN = {STORE: "store", LOAD: "load", ATOMIC: "atomic update"}
MAX_CLOCK_BYTES = 512 << 20      # the atomics' clock vectors (one per element an atomic released)


class _Slots:
    """Two kept accesses per element: program (-1: none), clock, line, way (26 bytes)."""

    def __init__(self, n: int):
        self.pid = np.full((2, n), -1, np.int32)
        self.clk = np.zeros((2, n), np.int32)
        self.line = np.zeros((2, n), np.int32)
        self.way = np.zeros((2, n), np.int8)

    def clear(self, idx):
        self.pid[:, idx] = -1

    def add(self, idx, q: int, clk: int, line: int, way: int, ordered):
        """Keep access (q, clk) at elements idx; `ordered(pid, clk)`: whether a kept access
        happens before it (those are dropped)."""
        p, c = self.pid[:, idx], self.clk[:, idx]
        stale = (p == -1) | (p == q) | ordered(p, c)
        first = stale[0]
        second = ~first & stale[1]
        full = ~first & ~second
        # the new access goes to slot 0 where that slot is stale, else slot 1 (a full element's
        # second access is overwritten: the module notes)
        self.pid[1, idx] = np.where(first & stale[1], -1, self.pid[1, idx])
        for s, where in ((0, first), (1, second | full)):
            at = idx[where]
            self.pid[s, at], self.clk[s, at], self.line[s, at], self.way[s, at] = q, clk, line, way


class _Storage:
    def __init__(self, n: int):
        self.writes = _Slots(n)
        self.reads = _Slots(n)


def written_arguments(prog) -> Optional[set]:
    """The pointer arguments a program stores to or updates (through any pointer variable), or
    None when a pointer's argument cannot be told (then every argument counts as written)."""
    from .tir import K
    bases: dict = {}

    def base(n):
        while True:
            if n.op is K.PARAM:
                return n.arg
            if n.op is K.VAR:
                return bases.get(n.arg)
            if not n.srcs:
                return None
            n = n.srcs[0]

    written: set = set()

    def walk(stmts) -> bool:
        for st in stmts:
            name = type(st).__name__
            if name == "Let" and st.value.type.is_ptr:
                b = base(st.value)
                if b is None or bases.setdefault(st.var, b) != b:
                    return False
            elif name in ("Store", "Atomic"):
                b = base(st.ptr)
                if b is None:
                    return False
                written.add(b)
            for f in ("body", "then", "orelse", "cond_body"):
                if hasattr(st, f) and not walk(getattr(st, f)):
                    return False
        return True

    return written if walk(prog.body) else None


class RaceCheck:
    """The detector for one launch of `nprograms` programs over `buffers` (name -> interp.Buffer).
    Only storages some argument the program writes lies in are watched (`written`: those
    arguments' names, None for all): two loads never race. Their records are made at the
    first access (26 bytes per element for the writers, as much for the readers)."""

    def __init__(self, buffers: dict, grid: tuple, written: Optional[set] = None):
        self.grid = grid
        self.nprograms = grid[0] * grid[1] * grid[2]
        self.storages = {}
        self.key_of = {}
        self.size_of = {}
        for name, buf in buffers.items():
            self.key_of[name] = (buf.flat.__array_interface__["data"][0], buf.flat.nbytes)
            self.size_of[self.key_of[name]] = buf.flat.size
        self.watched = {self.key_of[n] for n in buffers if written is None or n in written}
        self.vc = np.zeros(self.nprograms, np.int64)     # the running program's vector
        self.released: dict = {}                         # (storage, element) -> clock vector
        self.q, self.synced = 0, False

    # ------------------------------------------------------------ programs and clocks
    def begin(self, pid: tuple):
        """A new program: its vector holds only its own clock."""
        if self.synced:
            self.vc[:] = 0
            self.synced = False
        else:
            self.vc[self.q] = 0
        self.q = pid[0] + self.grid[0] * (pid[1] + self.grid[1] * pid[2])
        self.vc[self.q] = 1

    def storage(self, name: str, written: bool = False) -> Optional[_Storage]:
        """The records of the storage argument `name` lies in (None: not watched). A write
        watches its storage whatever written_arguments said."""
        key = self.key_of[name]
        if key not in self.watched:
            if not written:
                return None
            self.watched.add(key)
        st = self.storages.get(key)
        if st is None:
            st = self.storages[key] = _Storage(self.size_of[key])
        return st

    def _ordered(self, p, c):
        return self.vc[np.where(p < 0, 0, p)] >= c

    def _pid(self, q: int) -> tuple:
        g0, g1 = self.grid[0], self.grid[1]
        return (q % g0, q // g0 % g1, q // (g0 * g1))

    # ------------------------------------------------------------ accesses
    def access(self, interp, name: str, buf, idx: np.ndarray, active: np.ndarray, way: int):
        """A load or store of the elements `idx` (storage indices) where `active`."""
        at = np.asarray(idx).reshape(-1)[np.asarray(active).reshape(-1)]
        if at.size == 0:
            return
        st = self.storage(name, way == STORE)
        if st is None:
            return
        self._conflicts(interp, name, buf, st.writes, at, way, atomics_too=True)
        if way == STORE:
            self._conflicts(interp, name, buf, st.reads, at, way, atomics_too=True)
            uniq = np.unique(at)
            st.writes.clear(uniq)
            st.reads.clear(uniq)
            st.writes.add(uniq, self.q, self.vc[self.q], interp.line, STORE, self._ordered)
        else:
            st.reads.add(np.unique(at), self.q, self.vc[self.q], interp.line, LOAD, self._ordered)

    def atomic(self, interp, name: str, buf, element: int, wrote: bool, acquire: bool, release: bool):
        """One lane of an atomic at storage index `element`: its ordering, its conflicts with
        plain accesses, then its record (`wrote`: False for a compare-and-swap that failed,
        which only reads)."""
        key = (self.key_of[name], element)
        if acquire:
            got = self.released.get(key)
            if got is not None:
                np.maximum(self.vc, got, out=self.vc)
                self.synced = True
        st = self.storage(name, True)
        at = np.array([element], np.int64)
        self._conflicts(interp, name, buf, st.writes, at, ATOMIC, atomics_too=False)
        if wrote:
            self._conflicts(interp, name, buf, st.reads, at, ATOMIC, atomics_too=False)
        (st.writes if wrote else st.reads).add(at, self.q, self.vc[self.q], interp.line, ATOMIC, self._ordered)
        if release:
            got = self.released.get(key)
            if got is None:
                if (len(self.released) + 1) * self.vc.nbytes > MAX_CLOCK_BYTES:
                    raise TritonError(
                        f"check mode: ordering this launch's atomics needs more than {MAX_CLOCK_BYTES >> 20} MB "
                        f"of clock vectors ({self.nprograms} programs); check a launch with fewer programs, "
                        "or run it with mode='reference'")
                got = self.released[key] = np.zeros_like(self.vc)
            np.maximum(got, self.vc, out=got)
            self.vc[self.q] += 1

    def _conflicts(self, interp, name, buf, slots: _Slots, at, way: int, atomics_too: bool):
        p, c, w = slots.pid[:, at], slots.clk[:, at], slots.way[:, at]
        race = (p != -1) & (p != self.q) & ~self._ordered(p, c)
        if not atomics_too:
            race &= w != ATOMIC
        if not race.any():
            return
        s, k = _first(race)
        element = int(at[k])
        other = int(slots.pid[s, element])
        what = {STORE: "store to", LOAD: "load of", ATOMIC: "atomic update of"}[way]
        raise interp.fail(
            f"{what} argument `{name}` offset {element - buf.base} races with the "
            f"{_NOUN[int(slots.way[s, element])]} by program {self._pid(other)} at line "
            f"{int(slots.line[s, element])}: no atomic orders the two programs")


def _first(race: np.ndarray) -> tuple:
    """(slot, lane) of the first racing lane in the access's order (slot 0 before 1)."""
    lanes = np.flatnonzero(race.any(axis=0))
    k = int(lanes[0])
    return (0 if race[0, k] else 1), k

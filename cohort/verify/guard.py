"""Guard bands: every buffer handed to native code sits between two bands of
known bytes; any change to a band fails the run (DESIGN §8)."""
from __future__ import annotations

import hashlib

import numpy as np

BAND_BYTES = 4096      # one page on each side: a stray vector store lands in a band
ALIGN = 64


def _pattern(nbytes: int, salt: int) -> np.ndarray:
    """A fixed, non-zero, non-repeating byte pattern (no valid float run of zeros or NaN fill)."""
    x = (np.arange(nbytes, dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(salt * 0x85EBCA77 + 1))
    return ((x >> np.uint64(13)) & np.uint64(0xFF)).astype(np.uint8) | np.uint8(1)


class GuardedBuffer:
    """A 1-D array of `count` elements placed between two guard bands."""

    def __init__(self, name: str, dtype, count: int, salt: int = 0):
        self.name = name
        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        self.raw = np.empty(nbytes + 2 * BAND_BYTES + ALIGN, np.uint8)
        shift = (-self.raw.ctypes.data) % ALIGN
        self.lo = slice(shift, shift + BAND_BYTES)
        self.body = slice(self.lo.stop, self.lo.stop + nbytes)
        self.hi = slice(self.body.stop, self.body.stop + BAND_BYTES)
        self.band = _pattern(BAND_BYTES, salt)
        self.raw[self.lo] = self.band
        self.raw[self.hi] = self.band[::-1]
        self.array = self.raw[self.body].view(dtype)

    def intact(self) -> bool:
        return bool(np.array_equal(self.raw[self.lo], self.band) and
                    np.array_equal(self.raw[self.hi], self.band[::-1]))

    def band_checksum(self) -> str:
        h = hashlib.sha256(self.raw[self.lo].tobytes() + self.raw[self.hi].tobytes())
        return "sha256:" + h.hexdigest()


class GuardedSet:
    """Guarded copies of a launch's buffers."""

    def __init__(self, arrays: dict):
        self.guards = {}
        for i, (name, a) in enumerate(arrays.items()):
            a = np.ascontiguousarray(a).reshape(-1)
            g = GuardedBuffer(name, a.dtype, a.size, salt=i + 1)
            g.array[...] = a
            self.guards[name] = g

    @property
    def arrays(self) -> dict:
        return {n: g.array for n, g in self.guards.items()}

    def status(self) -> dict:
        return {n: g.intact() for n, g in self.guards.items()}

    def intact(self) -> bool:
        return all(self.status().values())

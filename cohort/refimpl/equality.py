"""When two outputs agree (DESIGN §3): bit for bit, except that every float32 NaN equals
every NaN; +0 and -0 differ; a bool is its truth, not its byte; storage buffers (bf16 as
uint16, f16) by their bits, NaN payloads included. One definition, used by the checksums and
the verification paths (verify/checksum.py, verify/compare.py) and by a launch's check
against the interpreter (backend/verify_launch.py)."""
from __future__ import annotations

import numpy as np

CANONICAL_NAN32 = np.uint32(0x7FC00000)


def canonical_bytes(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a)
    if a.dtype == np.float32:
        bits = a.view(np.uint32).copy()
        bits[np.isnan(a)] = CANONICAL_NAN32
        a = bits
    elif a.dtype == np.bool_:
        a = (a.view(np.uint8) != 0).view(np.uint8)   # a bool is its truth, not its byte
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit, except that NaNs equal NaNs (DESIGN §3)."""
    return a.shape == b.shape and a.dtype == b.dtype and canonical_bytes(a) == canonical_bytes(b)


def differing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Flat mask of the elements that differ as bitwise_equal counts them (NaN == NaN; a bool
    is its truth, not its byte; an f16 element is its bits)."""
    fa, fb = np.ravel(a), np.ravel(b)
    if fa.dtype == np.float32:
        ua, ub = fa.view(np.uint32), fb.view(np.uint32)
        return (ua != ub) & ~(np.isnan(fa) & np.isnan(fb))
    if fa.dtype == np.float16:
        return fa.view(np.uint16) != fb.view(np.uint16)
    if fa.dtype == np.bool_:
        return (fa.view(np.uint8) != 0) != (fb.view(np.uint8) != 0)
    return fa != fb


def first_difference(a: np.ndarray, b: np.ndarray):
    """(flat index, a value, b value) of the first element that differs, or None."""
    fa, fb = np.ravel(a), np.ravel(b)
    idx = np.flatnonzero(differing(fa, fb))
    return None if len(idx) == 0 else (int(idx[0]), fa[idx[0]].item(), fb[idx[0]].item())


def show(value, dtype) -> str:
    """A value as a report shows it (a float with its bits: -0.0, NaN payloads)."""
    if np.dtype(dtype) == np.float32:
        bits = int(np.asarray(value, np.float32).view(np.uint32))
        return f"{value!r} (0x{bits:08x})"
    return repr(value)

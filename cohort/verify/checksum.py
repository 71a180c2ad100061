"""Output checksums that compare across processes and machines.

SHA-256 of the array's bytes (little-endian, C order), with every float NaN
replaced by one canonical quiet NaN first: DESIGN §3 counts NaNs as equal
whatever their payload, and so must the checksum. +0 and -0 stay distinct.
"""
from __future__ import annotations

import hashlib

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


def checksum(a: np.ndarray) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(a)).hexdigest()


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit, except that NaNs equal NaNs (DESIGN §3)."""
    return a.shape == b.shape and a.dtype == b.dtype and canonical_bytes(a) == canonical_bytes(b)


def row_ulps(y: np.ndarray, ref: np.ndarray) -> float:
    """Largest |y - ref| in units of the float32 ulp of its row's largest |ref|
    (rows = last dimension). How fast-math variants are bounded: an error
    measured against the row's scale, as a reassociated sum's error is."""
    y64 = np.asarray(y, np.float64).reshape(-1, ref.shape[-1])
    r = np.asarray(ref, np.float32).reshape(-1, ref.shape[-1])
    scale = np.abs(r).max(axis=1, keepdims=True)
    ulp = np.spacing(np.maximum(scale, np.finfo(np.float32).tiny)).astype(np.float64)
    err = np.abs(y64 - r.astype(np.float64))
    both_nan = np.isnan(y64) & np.isnan(r)
    err = np.where(both_nan, 0.0, np.where(np.isnan(err), np.inf, err))
    return float((err / ulp).max(initial=0.0))


def differing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Flat mask of the elements that differ as bitwise_equal counts them (NaN == NaN; a bool
    is its truth, not its byte)."""
    fa, fb = np.ravel(a), np.ravel(b)
    if fa.dtype == np.float32:
        ua, ub = fa.view(np.uint32), fb.view(np.uint32)
        return (ua != ub) & ~(np.isnan(fa) & np.isnan(fb))
    if fa.dtype == np.bool_:
        return (fa.view(np.uint8) != 0) != (fb.view(np.uint8) != 0)
    return fa != fb


def first_difference(a: np.ndarray, b: np.ndarray):
    """(flat index, a value, b value) of the first element that differs, or None."""
    fa, fb = np.ravel(a), np.ravel(b)
    idx = np.flatnonzero(differing(fa, fb))
    return None if len(idx) == 0 else (int(idx[0]), fa[idx[0]].item(), fb[idx[0]].item())

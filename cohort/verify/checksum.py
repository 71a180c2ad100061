"""Output checksums that compare across processes and machines.

SHA-256 of the array's bytes (little-endian, C order), with every float NaN
replaced by one canonical quiet NaN first: DESIGN §3 counts NaNs as equal
whatever their payload, and so must the checksum. +0 and -0 stay distinct.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..refimpl.equality import (  # noqa: F401 - the one definition, re-exported here
    CANONICAL_NAN32,
    bitwise_equal,
    canonical_bytes,
    differing,
    first_difference,
)


def checksum(a: np.ndarray) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(a)).hexdigest()


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



"""Buffer contents from an inputs seed: a fixed integer hash (splitmix64), not NumPy's
generators, so a seed means the same bytes in every process and every NumPy version.
Floats mix ordinary values with ±0, subnormals, ±inf, NaNs (several payloads), huge
values, rounding ties and raw random bit patterns."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...refimpl.ir import DType
from .case import BufferSpec, Case

F32 = DType.F32


def _splitmix(seed: int, stream: int, count: int, start: int = 0) -> np.ndarray:
    """Values start .. start+count-1 of the pseudo-random uint64 sequence of (seed, stream);
    stable forever."""
    with np.errstate(over="ignore"):
        base = np.uint64((seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03) & 0xFFFFFFFFFFFFFFFF)
        z = base + np.arange(start + 1, start + count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


_F32_SPECIAL_BITS = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                              0x7FA00001, 0x7F800001, 0x00000001, 0x80000001, 0x007FFFFF, 0x00400000,
                              0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x4F000000, 0xCF000000, 0x4F800000,
                              0x3F000000, 0xBF000000, 0x3FC00000, 0x40200000, 0x4B800001, 0x42B17218,
                              0xC2CF0000, 0x5F800000, 0x3F800000, 0xBF800000], np.uint32)
_I32_SPECIAL = np.array([0, 1, -1, 2, -2, 31, 32, 33, 255, -(2 ** 31), 2 ** 31 - 1, 1 << 30, -7, 65536],
                        np.int64)
_F32_NANZERO_BITS = np.array([0x00000000, 0x80000000, 0x7FC00000, 0xFFC00000, 0x7FA00001, 0xFFFFFFFF],
                             np.uint32)
# bool bytes other than 0 and 1: one bit set, the sign bit, all bits (all of them True)
_BOOL_BYTES = np.array([0, 0, 0, 1, 1, 2, 0x80, 0xFF, 0x10, 0x7F, 3, 0x40], np.uint8)


# A program's buffers are filled about ten times per fuzz program (the reference, each variant's
# two launches, the coverage report): kept, read-only, for buffers up to this many elements
# (a tenth of a fuzz worker's CPU went to refilling them); `fill` hands out copies.
CACHED_FILL_ELEMENTS = 1 << 16


def fill(spec: BufferSpec, seed: int, stream: int) -> np.ndarray:
    """The contents of one buffer for an inputs seed (deterministic, NumPy-version independent):
    a new array the caller owns."""
    if spec.length > CACHED_FILL_ELEMENTS:
        return _fill(spec, seed, stream)
    return _fill_kept(spec, seed, stream).copy()


@lru_cache(maxsize=128)
def _fill_kept(spec: BufferSpec, seed: int, stream: int) -> np.ndarray:
    a = _fill(spec, seed, stream)
    a.flags.writeable = False
    return a


# Element i of a buffer is a function of values i and n + i of its sequence alone, so a large
# buffer is made in pieces that stay in the cache: one 4M-element f32 buffer (a stress program's)
# took 2-5 s in one piece, its temporaries hundreds of megabytes
_PIECE = 1 << 15


def _fill(spec: BufferSpec, seed: int, stream: int) -> np.ndarray:
    n = spec.length
    if spec.dtype not in (F32, DType.I32, DType.U32, DType.BOOL, DType.F16, DType.BF16):
        raise ValueError(f"buffer {spec.name}: the generator fills f32, i32, u32, bool, f16 and bf16 buffers, "
                         f"not {spec.dtype}")
    if spec.fill == "perm":
        return np.argsort(_splitmix(seed, stream, n), kind="stable").astype(spec.dtype.np)
    out = np.empty(n, spec.dtype.np)
    for i in range(0, n, _PIECE):
        m = min(_PIECE, n - i)
        out[i:i + m] = _values(spec, _splitmix(seed, stream, m, i), _splitmix(seed, stream, m, n + i))
    return out


_SCALES = np.exp2(np.arange(-20, 20, dtype=np.float64))           # 2^-20 .. 2^19, exact
_HALVES = (np.arange(33, dtype=np.float64) - 16) / 2               # rounding ties


_F16_SPECIAL_BITS = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7D01, 0x0001, 0x8001, 0x03FF,
                              0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x3800, 0x3555, 0x3C01], np.uint16)
_BF16_SPECIAL_BITS = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x0001, 0x8001, 0x007F,
                               0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0x3F00, 0x3F81], np.uint16)


def _storage_values(spec: BufferSpec, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """f16 or bf16 elements: the f32 values of the same fill rounded to the type (semantics.narrow),
    and in three of eight (none for "finite") the type's own edges: ±0, ±inf, NaN payloads (a
    signalling one too), subnormals, the largest finite value, values one ulp from 1."""
    from ...refimpl.semantics import narrow
    f32 = _values(BufferSpec(spec.name, F32, spec.length, spec.fill), a, b)
    bits = np.asarray(narrow(f32, spec.dtype)).view(np.uint16).copy()
    if spec.fill == "finite":           # f32 values past the type's range: its largest finite one
        top = 0x7BFF if spec.dtype is DType.F16 else 0x7F7F
        bits = np.where(bits & 0x7FFF == top + 1, (bits & 0x8000) | top, bits).astype(np.uint16)
    else:
        table = _F16_SPECIAL_BITS if spec.dtype is DType.F16 else _BF16_SPECIAL_BITS
        cat = (b >> np.uint64(40)).astype(np.int64) % 8
        pick = ((b >> np.uint64(44)) & np.uint64(0xFFFF)).astype(np.int64)
        bits = np.where(cat < 3, table[pick % len(table)], bits).astype(np.uint16)
    return bits.view(spec.dtype.np)


def _values(spec: BufferSpec, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of the elements whose sequence values are a (index i) and b (index n + i)."""
    if spec.dtype.is_storage:
        return _storage_values(spec, a, b)
    low = (b & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    cat = (a >> np.uint64(56)).astype(np.int64) % 8
    if spec.fill in ("finite", "positive", "negative"):
        cat = cat % 4                   # ordinary values of varied magnitude, small integers, ties
    elif spec.fill == "special":
        cat = np.where(cat < 3, 5, cat)  # mostly special values and raw bit patterns
    pick = (a & np.uint64(0xFFFF)).astype(np.int64)
    if spec.dtype is DType.BOOL:
        if spec.fill == "bytes":        # any byte: the contract reads nonzero as True
            raw = np.where(cat == 7, low & np.uint32(0xFF), _BOOL_BYTES[pick % len(_BOOL_BYTES)])
            return raw.astype(np.uint8).view(np.bool_)
        return (low & 1).astype(np.bool_)
    if spec.dtype is F32:
        normal = (low.astype(np.float64) / 2 ** 32 - 0.5) * 8.0                        # [-4, 4)
        scale = _SCALES[pick % 40]                                                       # 2^-20..2^19
        halves = _HALVES[pick % 33]                                                      # ties
        out = np.where(cat <= 2, normal,
              np.where(cat == 3, normal * scale,
              np.where(cat == 4, halves, 0.0))).astype(np.float32)
        bits = out.view(np.uint32).copy()
        bits = np.where(cat == 5, _F32_SPECIAL_BITS[pick % len(_F32_SPECIAL_BITS)], bits)
        bits = np.where(cat == 6, low, bits)                                             # raw patterns
        bits = np.where(cat == 7, (low & np.uint32(0x807FFFFF)), bits)                   # subnormals, ±0
        if spec.fill == "nanzero":      # NaN and ±0 in six lanes of eight, the rest as "data"
            bits = np.where(cat < 6, _F32_NANZERO_BITS[pick % len(_F32_NANZERO_BITS)], bits)
        if spec.fill in ("positive", "negative"):     # |v|, a zero made 1.0, then the sign
            bits = np.where(bits & 0x7FFFFFFF == 0, np.uint32(0x3F800000), bits & np.uint32(0x7FFFFFFF))
            bits = bits | np.uint32(0x80000000 if spec.fill == "negative" else 0)
        return bits.astype(np.uint32).view(np.float32)
    small = (pick % 41) - 20
    mid = pick % 1000
    special = _I32_SPECIAL[pick % len(_I32_SPECIAL)]
    vals = np.where(cat <= 3, small, np.where(cat == 4, mid, np.where(cat == 5, special, 0)))
    bits = (vals & 0xFFFFFFFF).astype(np.uint32)
    bits = np.where(cat >= 6, low, bits).astype(np.uint32)
    return bits.view(spec.dtype.np)


def make_args(case: Case) -> dict:
    """Fresh argument arrays (and scalars) for one run of `case`."""
    args = {}
    for i, spec in enumerate(case.buffers):
        args[spec.name] = fill(spec, case.seed, spec.stream or i + 1)
    for p in case.kernel.scalars:
        args[p.name] = case.scalars[p.name]
    return args

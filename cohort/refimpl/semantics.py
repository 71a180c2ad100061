"""Exact elementwise semantics of every non-control operation (DESIGN §3).

`ALU` has one entry per unary, arithmetic, bitwise and comparison operation,
over NumPy arrays (or NumPy scalars) of one dtype; `convert` is CAST, and
`tree_reduce` the collectives' fixed tree. Each operation's registry record (opdefs.py)
applies its entry, for the interpreter and the constant folder alike; the
backend's lowering table (lower_ops.LOWER) mirrors it entry for entry.

Lanes that are masked off may hold any value; operations that can fail
(integer division, shifts) check only the lanes in `mask` and compute a
harmless value elsewhere.
"""
from __future__ import annotations

import numpy as np

from .irtypes import AtomicOp, DType, Op


class LaneError(Exception):
    """An operation failed on some active lane; the interpreter adds context."""

    def __init__(self, message: str, lane: int):
        super().__init__(message)
        self.lane = lane


def first_lane(bad) -> int:
    bad = np.broadcast_to(bad, np.shape(bad) or (1,))
    return int(np.flatnonzero(bad)[0])


def _where(c, a, b):
    return np.where(c, a, b)


# ---------------------------------------------------------------- integers

def _int_div(dt: DType, a, b, mask):
    zero = (b == 0) & mask
    if np.any(zero):
        raise LaneError("integer division by zero", first_lane(zero))
    a64, b64 = np.asarray(a, np.int64), np.asarray(np.where(b == 0, 1, b), np.int64)
    # C truncation: |a| // |b| with the sign of a*b; INT_MIN // -1 wraps to INT_MIN.
    q = (np.abs(a64) // np.abs(b64)) * np.sign(a64) * np.sign(b64)
    return _wrap(q, dt)


def _int_mod(dt: DType, a, b, mask):
    zero = (b == 0) & mask
    if np.any(zero):
        raise LaneError("integer remainder by zero", first_lane(zero))
    a64, b64 = np.asarray(a, np.int64), np.asarray(np.where(b == 0, 1, b), np.int64)
    r = np.fmod(a64, b64)  # sign of the dividend, as in C
    return _wrap(r, dt)


def _wrap(x64, dt: DType):
    return (np.asarray(x64, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(dt.np)


def _shift(op: Op, dt: DType, a, b, mask):
    bad = ((b < 0) | (b >= 32)) & mask if dt is DType.I32 else (b >= 32) & mask
    if np.any(bad):
        raise LaneError("shift amount out of range 0..31", first_lane(bad))
    bu = np.asarray(np.where((b < 0) | (b >= 32), 0, b), np.uint32)
    if op is Op.SHL:
        return np.left_shift(np.asarray(a).view(np.uint32), bu).view(dt.np)
    return np.right_shift(a, bu.astype(dt.np))  # arithmetic for i32, logical for u32


# ---------------------------------------------------------------- conversions

_SAT = {DType.I32: (-2.0 ** 31, 2.0 ** 31 - 1), DType.U32: (0.0, 2.0 ** 32 - 1)}


def convert(a, src: DType, dst: DType):
    """Value conversion, as CAST and as f32()/i32()/u32() in kernels."""
    a = np.asarray(a)
    if src is dst:
        return a
    if dst is DType.BOOL:
        return a != 0                                       # NaN -> True, -0.0 -> False
    if src is DType.BOOL:
        return a.astype(dst.np)
    if dst is DType.F32:
        return a.astype(np.float64).astype(np.float32)      # exact int, then one RNE rounding
    if src is DType.F32:                                    # truncate, saturate, NaN -> 0
        lo, hi = _SAT[dst]
        t = np.trunc(a.astype(np.float64))
        t = np.where(np.isnan(t), 0.0, np.clip(t, lo, hi))
        return t.astype(np.int64).astype(dst.np)
    return a.view(dst.np)                                   # i32 <-> u32: same bits


def convert_scalar(value, src: DType, dst: DType):
    return convert(np.asarray(value, src.np), src, dst).item()


# ---------------------------------------------------------------- storage types (bf16, f16)
# DESIGN §3: a load from a Buffer[bf16] or Buffer[f16] widens its element to f32
# exactly; a store rounds an f32 to the element type, to nearest even. Both are
# defined on bits, with integer operations only (the lowering does the same).

BF16_NAN, F16_NAN = 0x7FC0, 0x7E00     # what every NaN narrows to (the canonical quiet NaNs)


def widen(bits, storage: DType):
    """f32 values of storage elements (bf16: uint16 bits; f16: float16 or its bits).

    bf16: the 16 bits are the f32's top half (exact, NaN payloads included).
    f16: the same value; a NaN keeps its sign and payload (shifted to the top of
    the f32 fraction) and gets the quiet bit, as F16C's vcvtph2ps does."""
    h = np.asarray(bits).view(np.uint16).astype(np.uint32)
    if storage is DType.BF16:
        return (h << 16).view(np.float32)
    sign, em = (h & 0x8000) << 16, h & 0x7FFF
    normal = (em << 13) + np.uint32(0x38000000)                          # rebias 15 -> 127
    special = (em << 13) | np.uint32(0x7F800000) | np.where(em > 0x7C00, np.uint32(0x400000), np.uint32(0))
    tiny = (em.astype(np.float32) * np.float32(2.0 ** -24)).view(np.uint32)   # 0 or subnormal: exact
    out = np.where(em >= 0x7C00, special, np.where(em >= 0x0400, normal, tiny))
    return (sign | out).view(np.float32)


def narrow(x, storage: DType):
    """Storage elements (bf16: uint16 bits; f16: float16) nearest to f32 values x, ties
    to even; subnormal results are kept (never flushed); a finite x beyond the largest
    element plus half its ulp gives +-inf; every NaN gives the canonical quiet NaN
    (bf16 0x7fc0, f16 0x7e00: f32 NaN payloads are not part of the contract)."""
    with np.errstate(all="ignore"):
        return _narrow(np.asarray(x, np.float32).view(np.uint32), storage)


def _narrow(u, storage: DType):
    a = u & np.uint32(0x7FFFFFFF)
    nan = a > 0x7F800000
    if storage is DType.BF16:
        r = (a + np.uint32(0x7FFF) + ((a >> 16) & 1)) >> 16           # RNE on the low 16 bits
        out = np.where(nan, np.uint32(BF16_NAN), ((u >> 16) & 0x8000) | r)
        return out.astype(np.uint16)
    # f16 normal range: rebias 127 -> 15, then RNE on the low 13 bits
    n = a - np.uint32(0x38000000)
    normal = (n + np.uint32(0xFFF) + ((n >> 13) & 1)) >> 13
    # below 2^-14: units of 2^-24, the f32 significand shifted right by 126 - e, RNE
    e = (a >> 23).astype(np.int64)
    m = ((a & np.uint32(0x7FFFFF)) | np.uint32(0x800000)).astype(np.int64)
    s = np.clip(126 - e, 1, 25)
    q, rem, half = m >> s, m & ((1 << s) - 1), 1 << (s - 1)
    tiny = q + ((rem > half) | ((rem == half) & (q & 1 == 1)))
    r = np.where(a >= 0x477FF000, 0x7C00,                               # >= 65520: inf
                 np.where(a >= 0x38800000, normal.astype(np.int64), tiny))
    out = np.where(nan, F16_NAN, ((u >> 16) & 0x8000).astype(np.int64) | r)
    return out.astype(np.uint16).view(np.float16)


# ---------------------------------------------------------------- fused multiply-add

def fma(a, b, c):
    """a*b + c rounded once to float32 (IEEE fusedMultiplyAdd), lane by lane.

    The product of two float32 values is exact in float64 (48 significant bits,
    exponents far inside float64's range). The float64 sum is rounded to odd:
    round to nearest, then, if that was inexact and the last bit is even, step
    one ulp towards the exact sum (TwoSum gives its error exactly). A float64
    rounded to odd keeps 53 >= 2*24 + 2 bits, so rounding it to float32 gives
    the float32 rounding of the exact a*b + c (Boldo & Melquiond), subnormal
    and overflowing results included. NaN and infinities follow IEEE through
    the float64 operations (inf*0 + c is NaN); an exact zero sum gets +0
    unless both p and c are -0, as IEEE says for round to nearest.
    """
    with np.errstate(all="ignore"):
        p = np.multiply(np.asarray(a, np.float64), np.asarray(b, np.float64))
        c = np.asarray(c, np.float64)
        s = p + c
        v = s - p                                 # TwoSum (Knuth): s + err == p + c exactly
        err = (p - (s - v)) + (c - v)
        bits = np.asarray(s).view(np.int64)
        # err is NaN when s is not finite: no step then (NaN compares false)
        step = ((err > 0) | (err < 0)) & ((bits & 1) == 0)
        bits = bits + np.where(step, np.where((err > 0) == (s > 0), 1, -1), 0)
        return bits.view(np.float64).astype(np.float32)[()]


# ---------------------------------------------------------------- the table
# Each entry: fn(dtype_of_operands, *operands, mask) -> result.

ALU = {
    Op.NEG:  lambda dt, a, mask: np.negative(a),
    Op.NOT:  lambda dt, a, mask: np.logical_not(a) if dt is DType.BOOL else np.invert(a),
    Op.ABS:  lambda dt, a, mask: a if dt is DType.U32 else np.abs(a),   # i32: abs(INT_MIN) wraps
    Op.SQRT: lambda dt, a, mask: np.sqrt(a),

    Op.ADD:  lambda dt, a, b, mask: np.add(a, b),
    Op.SUB:  lambda dt, a, b, mask: np.subtract(a, b),
    Op.MUL:  lambda dt, a, b, mask: np.multiply(a, b),
    Op.DIV:  lambda dt, a, b, mask: np.divide(a, b) if dt is DType.F32 else _int_div(dt, a, b, mask),
    Op.MOD:  lambda dt, a, b, mask: _int_mod(dt, a, b, mask),
    Op.MIN:  lambda dt, a, b, mask: _where(a < b, a, b),
    Op.MAX:  lambda dt, a, b, mask: _where(a > b, a, b),
    Op.FMA:  lambda dt, a, b, c, mask: fma(a, b, c),

    Op.AND:  lambda dt, a, b, mask: np.bitwise_and(a, b),
    Op.OR:   lambda dt, a, b, mask: np.bitwise_or(a, b),
    Op.XOR:  lambda dt, a, b, mask: np.bitwise_xor(a, b),
    Op.SHL:  lambda dt, a, b, mask: _shift(Op.SHL, dt, a, b, mask),
    Op.SHR:  lambda dt, a, b, mask: _shift(Op.SHR, dt, a, b, mask),

    Op.LT:   lambda dt, a, b, mask: np.less(a, b),
    Op.LE:   lambda dt, a, b, mask: np.less_equal(a, b),
    Op.GT:   lambda dt, a, b, mask: np.greater(a, b),
    Op.GE:   lambda dt, a, b, mask: np.greater_equal(a, b),
    Op.EQ:   lambda dt, a, b, mask: np.equal(a, b),
    Op.NE:   lambda dt, a, b, mask: np.not_equal(a, b),   # unordered: NaN != x is True
}


def apply(op: Op, dt: DType, srcs, mask=True):
    """Apply an ALU op; the result has the op's result dtype (ints wrap)."""
    with np.errstate(all="ignore"):
        return ALU[op](dt, *srcs, mask=mask)


REDUCE_IDENTITY = {
    ("block_sum", DType.F32): np.float32(-0.0),
    ("block_max", DType.F32): np.float32(-np.inf),
    ("block_min", DType.F32): np.float32(np.inf),
    ("block_sum", DType.I32): np.int32(0),
    ("block_max", DType.I32): np.int32(-(2 ** 31)),
    ("block_min", DType.I32): np.int32(2 ** 31 - 1),
    ("block_sum", DType.U32): np.uint32(0),
    ("block_max", DType.U32): np.uint32(0),
    ("block_min", DType.U32): np.uint32(2 ** 32 - 1),
}
REDUCE_OP = {"block_sum": Op.ADD, "block_max": Op.MAX, "block_min": Op.MIN}


def tree_reduce(values: np.ndarray, reduce_name: str, dt: DType) -> np.ndarray:
    """DESIGN §3: for s = B/2 .. 1: v[t] = v[t] (+) v[t+s] for t < s; result v[0].

    `values` has shape (blocks, B) with inactive threads already set to the
    identity; returns one value per block.
    """
    v = values.copy()
    op = REDUCE_OP[reduce_name]
    s = v.shape[1] // 2
    while s >= 1:
        v[:, :s] = apply(op, dt, (v[:, :s], v[:, s:2 * s]))
        s //= 2
    return v[:, 0]


# ---------------------------------------------------------------- atomics

CANONICAL_NAN_BITS = 0x7FC00000


def f32_order_key(bits):
    """An int32 per f32 bit pattern, ordered as the values are with -0 below +0
    (the sign-magnitude bits turned two's complement); its own inverse."""
    b = np.asarray(bits, np.int32)
    return b ^ ((b >> 31) & np.int32(0x7FFFFFFF))


def atomic_update(op, flat: np.ndarray, addr, values):
    """flat[addr[i]] = flat[addr[i]] op values[i] for every i, each update whole. The
    ops are commutative and associative on their types, so any order of the updates
    gives these bits: i32/u32 add, sub (adding the negation), and, or, xor wrap
    mod 2^32; i32 min/max compare signed, u32 unsigned; f32 min/max give the
    canonical NaN if the element or any value is NaN, else the least/greatest
    value with -0 below +0 (DESIGN §3)."""
    name = op.value
    if flat.dtype == np.float32:
        keys = f32_order_key(flat.view(np.int32)[addr]).astype(np.int64)
        nan = np.isnan(flat[addr])
        vk = f32_order_key(np.asarray(values, np.float32).view(np.int32)).astype(np.int64)
        uniq, inv = np.unique(addr, return_inverse=True)
        best = np.zeros(len(uniq), np.int64)
        best[inv] = keys
        (np.minimum if op is AtomicOp.MIN else np.maximum).at(best, inv, vk)
        anynan = np.zeros(len(uniq), bool)
        anynan[inv] = nan
        np.logical_or.at(anynan, inv, np.isnan(values))
        bits = np.where(anynan, np.int32(CANONICAL_NAN_BITS), f32_order_key(best.astype(np.int32)))
        flat.view(np.int32)[uniq] = bits
        return
    if op in (AtomicOp.MIN, AtomicOp.MAX):
        (np.minimum if op is AtomicOp.MIN else np.maximum).at(flat, addr, np.asarray(values, flat.dtype))
        return
    u = flat.view(np.uint32)
    v = np.asarray(values, flat.dtype).view(np.uint32)
    ufunc = {"atomic_add": np.add, "atomic_sub": np.subtract, "atomic_and": np.bitwise_and,
             "atomic_or": np.bitwise_or, "atomic_xor": np.bitwise_xor}[name]
    ufunc.at(u, addr, v)

"""The wrong lowerings of the tile lowering's planted bugs (backend/inject.py, `triton_*`).

Each is what a plausible mistake at one of the native lowering's risk points would emit; the
lowering calls one of these only under `config.planted(name)`, so a clean build never reaches
this module. `cohort fuzz --family tiles --inject NAME` must find each (docs/fuzzing.md,
tests/test_fuzz_tiles.py).
"""
from __future__ import annotations

from llvmlite import ir


def _like(ty, v):
    return ir.VectorType(ty, v.type.count) if isinstance(v.type, ir.VectorType) else ty


def _k(ty, c):
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    return ir.Constant(ty, [ir.Constant(el, c)] * ty.count) if isinstance(ty, ir.VectorType) else ir.Constant(ty, c)


def floor_div(b, a, safe, neg1):
    """`triton_idiv_floor`: signed a // d rounded down (Python's //), not toward zero (C's)."""
    zero = _k(a.type, 0)
    q, r = b.sdiv(a, safe), b.srem(a, safe)
    down = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
    return b.select(neg1, b.neg(a), b.sub(q, b.zext(down, a.type)))


def bf16_truncate(b, x):
    """`triton_bf16_truncate`: f32 -> bf16 keeping the top 16 bits (round toward zero, NaN kept
    as its truncated payload), not round-to-nearest-even."""
    i32 = _like(ir.IntType(32), x)
    return b.trunc(b.lshr(b.bitcast(x, i32), _k(i32, 16)), _like(ir.IntType(16), x))

"""Lowering tests of the `whole` variant (lanes = 1) against the interpreter.

Every IR construct is exercised by a small kernel written for the purpose and
run through `verify.differential.compare`: the interpreter and the native
entry see the same inputs, native buffers sit between guard bands, and the
outputs must agree bit for bit (NaNs equal whatever their payload, +0 != -0).

Kernels are built either with the frontend (`@kernel`) or, where a test must
follow a table that grows (every op of `semantics.ALU`, every function of
`mathlib.FUNCTIONS`), directly as IR. Kernels are built once and shared by
the parametrisations; the compile cache does the rest.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import math
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohort import (
    Buffer,
    Const,
    KernelError,
    KernelRuntimeError,
    bitcast,
    block_id,
    block_max,
    block_min,
    block_size,
    block_sum,
    f32,
    global_id,
    i32,
    kernel,
    num_threads,
    private,
    sqrt,
    thread_id,
    u32,
)
from cohort import exp as cohort_exp
from cohort import sigmoid as cohort_sigmoid
from cohort.backend import compiler, timer
from cohort.backend import compiler as _compiler
from cohort.refimpl import ir, mathlib, semantics
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.ir import VALUE_DTYPES, DType, Expr, IRTypeError, Kernel, Op, Param, ParamKind, Store
from cohort.refimpl.opdefs import GROUPS
from cohort.verify.checksum import bitwise_equal
from cohort.verify.differential import compare

# this module checks the builds' own behaviour and errors: launches go straight to native
# code (the default verify="first" would report the interpreter's error before the build's)
compile_kernel = functools.partial(_compiler.compile_kernel, verify="never")

F32, I32, U32, BOOL = DType.F32, DType.I32, DType.U32, DType.BOOL
WHOLE = "whole"
CHECKED = "whole,checked=on"
I32_MIN, I32_MAX, U32_MAX = -(2 ** 31), 2 ** 31 - 1, 2 ** 32 - 1
HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ values


def f32_bits(bits) -> np.ndarray:
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


MIN_SUB, MAX_SUB, MIN_NORMAL = 2.0 ** -149, 2.0 ** -126 - 2.0 ** -149, 2.0 ** -126
F32_MAX = float(np.finfo(np.float32).max)
SPECIAL_F32 = np.concatenate([
    np.array([0.0, -0.0, math.inf, -math.inf, math.nan, MIN_SUB, -MIN_SUB, MAX_SUB, -MAX_SUB,
              MIN_NORMAL, -MIN_NORMAL, F32_MAX, -F32_MAX, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 3.0, 7.0,
              0.1, -1e-3, 1e30, -1e30, 1e-40, 16777217.0, 2.0 ** 31, -2.0 ** 31, 2.0 ** 32,
              2147483520.0, 4294967040.0, -0.99999994, 0.99999994, 2.5, -3.5], np.float32),
    f32_bits([0x7FC00001, 0xFFC00000, 0x7F800001, 0x7FBFFFFF])])   # NaN payloads, a signalling NaN
SPECIAL_I32 = np.array([0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 32, 33, 100, -100, I32_MAX, I32_MIN,
                        I32_MIN + 1, I32_MAX - 1, 2 ** 24, 2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1,
                        2 ** 30, 0x55555555, 0x7FFFFFC0, 0x7FFFFF80 + 0x40, -(2 ** 31) + 64],
                       np.int64).astype(np.int32)
SPECIAL_U32 = np.array([0, 1, 2, 3, 7, 31, 32, 33, 100, 2 ** 24 + 1, 2 ** 24 + 3, 2 ** 31 - 1, 2 ** 31,
                        2 ** 31 + 1, 0xAAAAAAAA, 0xFFFFFF80, 0xFFFFFF7F, 0xFFFFFFFE, 0xFFFFFFFF],
                       np.uint64).astype(np.uint32)
SPECIAL = {F32: SPECIAL_F32, I32: SPECIAL_I32, U32: SPECIAL_U32, BOOL: np.array([False, True])}


def pairs(values: np.ndarray):
    a, b = np.meshgrid(values, values, indexing="ij")
    return a.reshape(-1).copy(), b.reshape(-1).copy()


def show(v) -> str:
    if isinstance(v, (float, np.floating)) or getattr(v, "dtype", None) == np.float32:
        x = np.float32(v)
        return f"{float(x)!r} (0x{int(np.array([x]).view(np.uint32)[0]):08x})"
    return repr(v.item() if hasattr(v, "item") else v)


# ------------------------------------------------------------------ checking


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.ravel(a), np.ravel(b)
    if a.dtype == np.float32:
        return (a.view(np.uint32) != b.view(np.uint32)) & ~(np.isnan(a) & np.isnan(b))
    return a != b


def explain(cmp, args: dict, layout: dict | None, limit: int = 12, n: int | None = None) -> str:
    """describe() plus every differing element, named by the layout
    ({buffer: (names, stride)}: element k*stride + lane is names[k] of lane)."""
    lines = [cmp.describe()]
    for name in cmp.mismatches:
        bad = np.flatnonzero(_differ(cmp.native[name], cmp.reference[name]))
        lines.append(f"  {name}: {len(bad)} element(s) differ")
        names, stride = (layout or {}).get(name, (None, n))
        seen, shown = set(), 0
        for idx in bad:
            what, lane = (names[idx // stride], idx % stride) if names else (None, idx)
            if names and what in seen:
                continue           # one example per named row
            seen.add(what)
            shown += 1
            inputs = ", ".join(f"{k}={show(np.ravel(v)[lane])}" for k, v in args.items()
                               if isinstance(v, np.ndarray) and stride and v.size == stride)
            lines.append(f"    [{idx}] {what or ''} lane {lane}: native {show(np.ravel(cmp.native[name])[idx])}"
                         f" vs reference {show(np.ravel(cmp.reference[name])[idx])}  inputs: {inputs}")
            if shown >= limit:
                break
    return "\n".join(lines)


def agree(kern, n, args, consts=None, variant=WHOLE, layout=None):
    """compare() and assert bitwise agreement with intact guard bands."""
    cmp = compare(kern, n, args, consts, variant)
    assert cmp.ok, explain(cmp, args, layout, n=n)
    return cmp


def ir_kernel(name, params, body, block=32) -> Kernel:
    return Kernel(name, tuple(params), tuple(body), block)


def pbuf(name, dt):
    return Param(name, ParamKind.BUFFER, dt)


GID = ir.builtin(Op.GLOBAL_ID)
NT = ir.builtin(Op.NUM_THREADS)


def slot(k: int) -> Expr:
    """k * num_threads() + global_id(): output row k of a launch with one lane per input."""
    return ir.binary(Op.ADD, ir.binary(Op.MUL, ir.const(k, I32), NT), GID)


# ================================================================== 1. every ALU op, cast, bitcast

def _guarded(op: Op, dt: DType, a: Expr, b: Expr) -> Expr:
    """op(a, b), made total where the interpreter would reject the launch."""
    if op in (Op.DIV, Op.MOD) and dt.is_int:
        return ir.select(ir.binary(Op.NE, b, 0), ir.binary(op, a, b), 0)
    if op in (Op.SHL, Op.SHR):
        return ir.binary(op, a, ir.binary(Op.AND, b, 31))
    return ir.binary(op, a, b)


@functools.lru_cache(maxsize=None)
def op_table_kernel(dt: DType, block: int = 32):
    """Every op of semantics.ALU that accepts `dt`, every CAST and BITCAST from `dt`,
    on a[i], b[i]; results of dtype D go to row k of buffer r_D."""
    a = ir.load("a", GID, dt)
    b = ir.load("b", GID, dt)
    rows = {d: [] for d in VALUE_DTYPES}
    body = []

    def emit(label, e):
        body.append(Store(f"r_{e.dtype.value}", slot(len(rows[e.dtype])), e))
        rows[e.dtype].append(label)

    for op in semantics.ALU:
        try:
            if op in GROUPS["unary"]:
                e = ir.unary(op, a)
            elif op in GROUPS["ternary"]:      # fma(a, b, a) below, and a*a + b
                e = ir.fma(a, b, a)
                emit(f"{op.name}(a,a,b)", ir.fma(a, a, b))
            else:
                ir.result_dtype(op, (dt, dt))
                e = _guarded(op, dt, a, b)
                if op in (Op.DIV, Op.MOD, Op.SHL, Op.SHR) or op in GROUPS["compare"]:
                    # the same op with operands swapped, and a literal operand
                    emit(f"{op.name}(b,a)", _guarded(op, dt, b, a))
        except IRTypeError:
            continue
        emit(f"{op.name}(a{',b' if op not in GROUPS['unary'] else ''})", e)
    for dst in VALUE_DTYPES:
        if dst is not dt:
            emit(f"CAST {dt.value}->{dst.value}", ir.cast(a, dst))
            if BOOL not in (dt, dst):
                emit(f"BITCAST {dt.value}->{dst.value}", ir.bitcast(a, dst))
    if dt is BOOL:
        emit("SELECT(a,b,not b)", ir.select(a, b, ir.unary(Op.NOT, b)))
    else:
        emit("SELECT(a<b,b,a)", ir.select(ir.binary(Op.LT, a, b), b, a))
    outs = [d for d in VALUE_DTYPES if rows[d]]
    k = ir_kernel(f"ops_{dt.value}", [pbuf("a", dt), pbuf("b", dt)] + [pbuf(f"r_{d.value}", d) for d in outs],
                  body, block)
    return k, {f"r_{d.value}": rows[d] for d in outs}


def run_op_table(dt: DType, a: np.ndarray, b: np.ndarray, variant=WHOLE):
    k, rows = op_table_kernel(dt)
    n = len(a)
    args = {"a": a.astype(dt.np), "b": b.astype(dt.np)}
    for name, labels in rows.items():
        d = DType(name[2:])
        args[name] = np.zeros(len(labels) * n, d.np)
    layout = {name: (labels, n) for name, labels in rows.items()}
    return agree(k, n, args, variant=variant, layout=layout)


@pytest.mark.parametrize("dt", [F32, I32, U32, BOOL], ids=lambda d: d.value)
def test_every_op_on_special_value_pairs(dt):
    a, b = pairs(SPECIAL[dt])
    run_op_table(dt, a, b)


def test_op_table_covers_every_alu_op():
    covered = set()
    for dt in VALUE_DTYPES:
        _, rows = op_table_kernel(dt)
        for labels in rows.values():
            covered |= {lab.split("(")[0] for lab in labels}
    assert {op.name for op in semantics.ALU} <= covered
    assert any(lab.startswith("CAST f32->u32") for lab in op_table_kernel(F32)[1]["r_u32"])


_f32_bits = st.one_of(st.integers(0, U32_MAX), st.sampled_from([int(x) for x in SPECIAL_F32.view(np.uint32)]))
_i32 = st.one_of(st.integers(I32_MIN, I32_MAX), st.sampled_from([int(x) for x in SPECIAL_I32]),
                 st.integers(-40, 40))
_u32 = st.one_of(st.integers(0, U32_MAX), st.sampled_from([int(x) for x in SPECIAL_U32]), st.integers(0, 40))


@HYP
@given(st.lists(st.tuples(_f32_bits, _f32_bits), min_size=1, max_size=70))
def test_f32_ops_property(ab):
    a, b = (f32_bits([p[j] for p in ab]) for j in (0, 1))
    run_op_table(F32, a, b)


@HYP
@given(st.lists(st.tuples(_i32, _i32), min_size=1, max_size=70))
def test_i32_ops_property(ab):
    run_op_table(I32, np.array([p[0] for p in ab], np.int32), np.array([p[1] for p in ab], np.int32))


@HYP
@given(st.lists(st.tuples(_u32, _u32), min_size=1, max_size=70))
def test_u32_ops_property(ab):
    run_op_table(U32, np.array([p[0] for p in ab], np.uint32), np.array([p[1] for p in ab], np.uint32))


def test_f32_to_int_conversions_saturate_and_nan_is_zero():
    """Spot values with known answers, on top of the interpreter comparison."""
    x = np.array([math.nan, -math.nan, math.inf, -math.inf, 2.0 ** 31, -2.0 ** 31, 2147483520.0, -2147483904.0,
                  4294967040.0, 2.0 ** 32, -1.0, -0.5, 0.99999994, -0.99999994, 1e30, -1e30, -0.0, 7.9],
                 np.float32)
    cmp = run_op_table(F32, x, x)
    _, rows = op_table_kernel(F32)
    n = len(x)
    ri = cmp.native["r_i32"][rows["r_i32"].index("CAST f32->i32") * n:][:n]
    ru = cmp.native["r_u32"][rows["r_u32"].index("CAST f32->u32") * n:][:n]
    assert ri.tolist() == [0, 0, I32_MAX, I32_MIN, I32_MAX, I32_MIN, 2147483520, I32_MIN, I32_MAX, I32_MAX,
                           -1, 0, 0, 0, I32_MAX, I32_MIN, 0, 7]
    assert ru.tolist() == [0, 0, U32_MAX, 0, 2 ** 31, 0, 2147483520, 0, 4294967040, U32_MAX, 0, 0, 0, 0,
                           U32_MAX, 0, 0, 7]


def test_int_to_f32_rounds_to_nearest_even():
    vi = np.array([2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1, I32_MAX, I32_MIN, 0x7FFFFFC0, 0x7FFFFF40], np.int32)
    cmp = run_op_table(I32, vi, vi)
    _, rows = op_table_kernel(I32)
    got = cmp.native["r_f32"][rows["r_f32"].index("CAST i32->f32") * len(vi):][:len(vi)]
    assert got.tolist() == [16777216.0, 16777220.0, -16777216.0, 2.0 ** 31, -2.0 ** 31, 2.0 ** 31, 2147483392.0]  # last: a tie, to even
    vu = np.array([2 ** 24 + 1, 0xFFFFFF80, 0xFFFFFF7F, 0xFFFFFFFF, 2 ** 31 + 128], np.uint32)
    cmp = run_op_table(U32, vu, vu)
    _, rows = op_table_kernel(U32)
    got = cmp.native["r_f32"][rows["r_f32"].index("CAST u32->f32") * len(vu):][:len(vu)]
    assert got.tolist() == [16777216.0, 2.0 ** 32, 4294967040.0, 2.0 ** 32, 2.0 ** 31]


# ---- the same ops with literal operands (LLVM folds and strength-reduces these)

@kernel(block=32)
def int_literals(a: Buffer[i32], out: Buffer[i32]):
    i = global_id()
    x = a[i]
    n = num_threads()
    out[0 * n + i] = x // -1
    out[1 * n + i] = x % -1
    out[2 * n + i] = x // 7
    out[3 * n + i] = x % 7
    out[4 * n + i] = x // -8
    out[5 * n + i] = x % -8
    out[6 * n + i] = x >> 31
    out[7 * n + i] = x << 31
    out[8 * n + i] = x * -1
    out[9 * n + i] = abs(x)
    out[10 * n + i] = -x
    out[11 * n + i] = ~x
    out[12 * n + i] = min(x, -2147483648)
    out[13 * n + i] = max(x, 2147483647)
    out[14 * n + i] = i32(u32(x) >> 1)
    out[15 * n + i] = i32(u32(x) // 3)
    out[16 * n + i] = i32(u32(x) % 3)
    out[17 * n + i] = -2147483648 // x if x != 0 else 99
    out[18 * n + i] = -2147483648 % x if x != 0 else 99
    out[19 * n + i] = i32(f32(x) * 0.5)
    out[20 * n + i] = i32(x > 5) + i32(x <= -5) * 2 + i32(x == 0) * 4 + i32(x != 3) * 8


INT_LITERAL_ROWS = ["x//-1", "x%-1", "x//7", "x%7", "x//-8", "x%-8", "x>>31", "x<<31", "x*-1", "abs", "neg",
                    "~x", "min", "max", "u>>1", "u//3", "u%3", "MIN//x", "MIN%x", "f32 round trip", "bools"]


@kernel(block=32)
def f32_literals(a: Buffer[f32], out: Buffer[f32], flags: Buffer[bool]):
    i = global_id()
    x = a[i]
    n = num_threads()
    out[0 * n + i] = x * 0.0
    out[1 * n + i] = x + 0.0
    out[2 * n + i] = x + -0.0
    out[3 * n + i] = x - x
    out[4 * n + i] = x / 3.0
    out[5 * n + i] = x / 0.0
    out[6 * n + i] = 1.0 / x
    out[7 * n + i] = min(x, 0.0)
    out[8 * n + i] = max(0.0, x)
    out[9 * n + i] = min(-0.0, x)
    out[10 * n + i] = max(x, -0.0)
    out[11 * n + i] = -x
    out[12 * n + i] = abs(x)
    out[13 * n + i] = sqrt(x)
    out[14 * n + i] = x * x - x
    out[15 * n + i] = (x * 3.0 + 1.0) * 0.25
    out[16 * n + i] = bitcast(bitcast(x, i32) & 2147483647, f32)
    out[17 * n + i] = bitcast(bitcast(x, u32) ^ u32(2147483648), f32)
    out[18 * n + i] = f32(i32(x))
    out[19 * n + i] = f32(u32(x))
    out[20 * n + i] = f32(x > 0.0) - f32(x < 0.0)
    out[21 * n + i] = x if x == x else 42.0
    flags[0 * n + i] = x == x
    flags[1 * n + i] = x != x
    flags[2 * n + i] = x < 1.0
    flags[3 * n + i] = x >= 1.0
    flags[4 * n + i] = not (x < 1.0)
    flags[5 * n + i] = 0.0 < x < 2.0


F32_LITERAL_ROWS = ["x*0", "x+0", "x+-0", "x-x", "x/3", "x/0", "1/x", "min(x,0)", "max(0,x)", "min(-0,x)",
                    "max(x,-0)", "-x", "abs", "sqrt", "x*x-x", "(3x+1)/4", "clear sign", "flip sign",
                    "f32(i32)", "f32(u32)", "sign", "nan select"]
F32_FLAG_ROWS = ["x==x", "x!=x", "x<1", "x>=1", "not x<1", "0<x<2"]


def test_int_ops_with_literal_operands():
    a = SPECIAL_I32.copy()
    n = len(a)
    agree(int_literals, n, {"a": a, "out": np.zeros(21 * n, np.int32)},
          layout={"out": (INT_LITERAL_ROWS, n)})


def test_f32_ops_with_literal_operands():
    a = SPECIAL_F32.copy()
    n = len(a)
    agree(f32_literals, n, {"a": a, "out": np.zeros(22 * n, np.float32), "flags": np.zeros(6 * n, bool)},
          layout={"out": (F32_LITERAL_ROWS, n), "flags": (F32_FLAG_ROWS, n)})


@kernel(block=32)
def scalar_params(x: Buffer[f32], xi: Buffer[i32], y: Buffer[f32], yi: Buffer[u32], s: f32, k: i32, u: u32):
    i = global_id()
    y[i] = x[i] * s + f32(k)
    yi[i] = u32(xi[i] + k) ^ u


@pytest.mark.parametrize("s,k,u", [(1.5, -7, 3), (-0.0, I32_MIN, U32_MAX), (math.nan, I32_MAX, 0),
                                   (-math.inf, 0, 2 ** 31), (MIN_SUB, 1, 1)])
def test_scalar_parameters(s, k, u):
    n = len(SPECIAL_F32)
    agree(scalar_params, n, {"x": SPECIAL_F32.copy(), "xi": np.resize(SPECIAL_I32, n), "y": np.zeros(n, np.float32),
                             "yi": np.zeros(n, np.uint32), "s": s, "k": k, "u": u})


# ================================================================== 2. control flow, built-ins

@kernel(block=8)
def branches(x: Buffer[f32], k: Buffer[i32], out: Buffer[f32], tag: Buffer[i32]):
    i = global_id()
    v = x[i]
    r = f32(0.0)
    t = 0
    if k[i] % 3 == 0:
        if v > 0.0:
            r = v * 2.0
            t = 1
        else:
            if v != v:
                r = -1.0
                t = 2
            else:
                r = v - 1.0
    elif k[i] % 3 == 1:
        r = sqrt(abs(v))
        if k[i] > 10:
            t = 3
            tag[i] = 77          # a store on one path only
        else:
            if k[i] < -10:
                t = 4
    else:
        r = v
        for j in range(k[i] % 5):
            if j == 2:
                r = r * 0.5
            else:
                r = r + 1.0
    out[i] = r
    if t != 3:
        tag[i] = t


def test_nested_divergent_if_else():
    rng = np.random.default_rng(1)
    n = 203
    x = rng.choice(SPECIAL_F32, n)
    k = rng.integers(-30, 30, n).astype(np.int32)
    agree(branches, n, {"x": x, "k": k, "out": np.full(n, 9.0, np.float32), "tag": np.full(n, -5, np.int32)})


@kernel(block=8)
def loops(lo: Buffer[i32], hi: Buffer[i32], x: Buffer[f32], out: Buffer[f32], cnt: Buffer[i32], step: Const[int]):
    i = global_id()
    m = len(x)
    acc = f32(0.0)
    c = 0
    for j in range(lo[i], hi[i], step):
        acc = acc * 0.5 + x[(j % m + m) % m]
        c += 1
        for q in range(j, lo[i] + 3):      # an inner loop whose trip count depends on the outer one
            c = c * 3 + q
    for j in range(hi[i], lo[i], -1):      # negative step
        c = c * 5 + j
    for j in range(hi[i], hi[i]):          # zero trips
        c = 12345
    out[i] = acc
    cnt[i] = c


@pytest.mark.parametrize("step", [1, 3, -2])
def test_loops_with_per_thread_trip_counts(step):
    rng = np.random.default_rng(step + 10)
    n = 77
    lo = rng.integers(-12, 12, n).astype(np.int32)
    hi = (lo + rng.integers(-8, 12, n)).astype(np.int32)
    hi[:5] = lo[:5]                                    # zero-trip threads
    x = rng.standard_normal(19).astype(np.float32)
    agree(loops, n, {"lo": lo, "hi": hi, "x": x, "out": np.zeros(n, np.float32), "cnt": np.zeros(n, np.int32)},
          {"step": step})


@kernel(block=4)
def loops_near_limits(start: Buffer[i32], up: Buffer[i32], down: Buffer[i32]):
    i = global_id()
    c = 0
    for j in range(start[i], 2147483647, 3):      # would wrap with a 32-bit counter
        c = c * 7 + (j & 255)
    up[i] = c
    d = 0
    for j in range(-start[i] - 1, -2147483648, -3):
        d = d * 7 + (j & 255)
    down[i] = d


def test_loops_near_int_limits():
    start = np.array([I32_MAX - k for k in range(10)] + [I32_MAX], np.int32)
    n = len(start)
    agree(loops_near_limits, n, {"start": start, "up": np.zeros(n, np.int32), "down": np.zeros(n, np.int32)})


@kernel(block=16)
def lazy(x: Buffer[f32], out: Buffer[f32], flags: Buffer[bool]):
    i = global_id()
    m = len(x)
    v = x[i] if i < m else -1.0
    w = x[i - 1] if i > 0 and i - 1 < m else 0.0
    c = i >= m or x[i] > 0.0
    d = (i < m and x[i] > 0.0) or (i < m and x[i] < 0.0)
    e = not (i < m) or x[m - 1 - i] >= 0.0 if i < m else False
    out[i] = v + w + (x[i] * 2.0 if i < m and i % 2 == 0 else 0.5)
    flags[3 * i] = c
    flags[3 * i + 1] = d
    flags[3 * i + 2] = e


@pytest.mark.parametrize("variant", [WHOLE, CHECKED])
def test_lazy_select_and_short_circuit_never_load_out_of_bounds(variant):
    """Threads past len(x) must not touch x; in the checked build an eager load would raise."""
    rng = np.random.default_rng(3)
    for m, n in [(10, 40), (0, 5), (1, 33), (33, 33)]:
        x = rng.choice(SPECIAL_F32, m).astype(np.float32)
        agree(lazy, n, {"x": x, "out": np.zeros(n, np.float32), "flags": np.zeros(3 * n, bool)}, variant=variant)


@kernel(block=8)
def lazy_private(j: Buffer[i32], out: Buffer[f32]):
    i = global_id()
    p = private(f32, 4)
    p[i % 4] = f32(i)
    jj = j[i]
    v = p[jj] if jj >= 0 and jj < 4 else -1.0     # no buffer load in the branch: only a private one
    out[i] = v


@pytest.mark.parametrize("variant", [WHOLE, CHECKED])
def test_lazy_select_never_indexes_a_private_array_out_of_bounds(variant):
    j = np.array([0, 1, 2, 3, 4, 10, -1, -100, 3, 2, 1], np.int32)
    n = len(j)
    agree(lazy_private, n, {"j": j, "out": np.zeros(n, np.float32)}, variant=variant)


@kernel(block=8)
def bools(m: Buffer[bool], x: Buffer[f32], o: Buffer[bool], c: Buffer[i32]):
    i = global_id()
    b = m[i]
    nb = not b
    o[4 * i] = b
    o[4 * i + 1] = nb and x[i] > 0.0
    o[4 * i + 2] = b != (x[i] < 0.0)
    o[4 * i + 3] = m[(i + 1) % len(m)] ^ b
    c[i] = i32(b) * 10 + i32(b | nb) + i32(b & nb) * 100
    if b:
        c[i] = c[i] + 1000


def test_bool_buffers_load_and_store():
    rng = np.random.default_rng(4)
    n = 45
    agree(bools, n, {"m": rng.random(n) < 0.5, "x": rng.choice(SPECIAL_F32, n).astype(np.float32),
                     "o": np.zeros(4 * n, bool), "c": np.zeros(n, np.int32)})


def test_bool_buffers_with_nonzero_bytes_other_than_one():
    """NumPy counts any nonzero byte of a bool array as True (e.g. arrays made with .view(bool));
    so must the native load (not just the byte's low bit). Compared by value: the interpreter
    may copy such a byte through unchanged where native code stores a canonical 1."""
    m = np.array([0, 1, 2, 3, 254, 255, 4, 0, 128, 1], np.uint8).view(bool)
    n = len(m)
    ref = {"m": m.copy(), "x": np.ones(n, np.float32), "o": np.zeros(4 * n, bool), "c": np.zeros(n, np.int32)}
    interpret(bools.ir, n, ref)
    nat = {"m": m.copy(), "x": np.ones(n, np.float32), "o": np.zeros(4 * n, bool), "c": np.zeros(n, np.int32)}
    compile_kernel(bools).launch(n, nat)
    assert nat["c"].tolist() == ref["c"].tolist()
    assert (nat["o"] != 0).tolist() == (ref["o"] != 0).tolist()


def builtins_kernel(B):
    @kernel(block=B)
    def builtins(out: Buffer[i32], e: Buffer[f32]):
        i = global_id()
        out[7 * i + 0] = thread_id()
        out[7 * i + 1] = block_id()
        out[7 * i + 2] = global_id()
        out[7 * i + 3] = block_size()
        out[7 * i + 4] = num_threads()
        out[7 * i + 5] = len(out)
        out[7 * i + 6] = len(e)
    return builtins


@pytest.mark.parametrize("B,n", [(1, 3), (8, 19), (32, 32), (32, 70), (128, 129), (1024, 1500)])
def test_builtins(B, n):
    cmp = agree(builtins_kernel(B), n, {"out": np.full(7 * n, -1, np.int32), "e": np.zeros(3, np.float32)})
    got = cmp.native["out"].reshape(n, 7)
    gid = np.arange(n)
    assert (got[:, 0] == gid % B).all() and (got[:, 1] == gid // B).all() and (got[:, 2] == gid).all()
    assert (got[:, 3] == B).all() and (got[:, 4] == n).all() and (got[:, 5] == 7 * n).all() and (got[:, 6] == 3).all()


# ================================================================== 3. private arrays, phases

@kernel(block=8)
def privates(x: Buffer[f32], sel: Buffer[i32], of: Buffer[f32], oi: Buffer[i32], ob: Buffer[bool], zeros: Buffer[i32]):
    i = global_id()
    t = thread_id()
    pf = private(f32, 5)
    pi = private(i32, 7)
    pb = private(bool, 3)
    z = 0
    for j in range(5):                 # zero-initialised, in every block
        if pf[j] != 0.0 or bitcast(pf[j], i32) != 0:
            z += 1
    for j in range(7):
        z = z + pi[j] * 10
    for j in range(3):
        if pb[j]:
            z += 1000
    zeros[i] = z
    v = x[i]
    pf[t % 5] = v                      # indexed by a per-thread value
    for j in range(5):                 # ... and by a uniform loop counter
        pf[j] = pf[j] + f32(j) * v
    pi[sel[i]] = i
    pi[(sel[i] + 3) % 7] += 5
    pb[sel[i] % 3] = v > 0.0
    s = block_sum(pf[2])               # privates live across collectives
    pf[4] = pf[4] + s
    mx = block_max(pi[sel[i]])
    for j in range(5):
        of[5 * i + j] = pf[j]
    for j in range(7):
        oi[7 * i + j] = pi[j] + mx
    for j in range(3):
        ob[3 * i + j] = pb[j]


def test_private_arrays():
    rng = np.random.default_rng(5)
    n = 29
    x = rng.standard_normal(n).astype(np.float32)
    x[::4] = -x[::4]
    agree(privates, n, {"x": x, "sel": rng.integers(0, 7, n).astype(np.int32), "of": np.zeros(5 * n, np.float32),
                        "oi": np.zeros(7 * n, np.int32), "ob": np.zeros(3 * n, bool), "zeros": np.full(n, -1, np.int32)})


@kernel(block=16)
def phases(x: Buffer[f32], k: Buffer[i32], y: Buffer[f32], z: Buffer[i32]):
    i = global_id()
    v = x[i]                   # lives across every phase
    c = k[i]                   # modified on some paths in a later phase
    a = block_sum(v)
    if c > 0:
        c = c * 2
        v = v + a
    b = block_max(v)
    w = v - b                  # a variable first defined in a later phase
    if c < -3:
        c = 0
    m = block_min(w)
    for j in range(c % 4):
        w = w * 0.5 + m
    y[i] = w + a
    z[i] = c


def test_variables_living_across_collectives():
    rng = np.random.default_rng(6)
    for n in (1, 15, 16, 50):
        agree(phases, n, {"x": rng.standard_normal(n).astype(np.float32), "k": rng.integers(-9, 9, n).astype(np.int32),
                          "y": np.zeros(n, np.float32), "z": np.zeros(n, np.int32)})


@kernel(block=8)
def exchange(x: Buffer[f32], tmp: Buffer[f32], y: Buffer[f32], z: Buffer[i32]):
    i = global_id()
    t = thread_id()
    s = x[i]
    tmp[i] = s * 2.0
    s = block_sum(s)                   # a collective result reusing its argument's name
    k = block_max(t)                   # the block's last active thread
    j = i - t + (t + 1) % (k + 1)      # a neighbour in the same block: its store precedes the barrier
    y[i] = tmp[j] + s
    z[i] = k


def test_collective_reusing_a_name_and_exchange_through_a_buffer_across_a_barrier():
    rng = np.random.default_rng(7)
    for n in (1, 8, 13, 30):
        agree(exchange, n, {"x": rng.standard_normal(n).astype(np.float32), "tmp": np.zeros(n, np.float32),
                            "y": np.zeros(n, np.float32), "z": np.zeros(n, np.int32)})


@kernel(block=8)
def only_collectives(x: Buffer[f32]):
    a = block_sum(f32(global_id()))
    b = block_min(a)


@kernel(block=8)
def empty(x: Buffer[f32]):
    pass


@pytest.mark.parametrize("kfn", [only_collectives, empty], ids=["only_collectives", "empty"])
def test_kernels_without_effects(kfn):
    for n in (0, 1, 20):
        agree(kfn, n, {"x": np.full(3, 5.0, np.float32)})


# ================================================================== 4. collectives

def collective_kernel(B):
    @kernel(block=B)
    def collectives(xf: Buffer[f32], xi: Buffer[i32], xu: Buffer[u32], of: Buffer[f32], oi: Buffer[i32],
                    ou: Buffer[u32]):
        i = global_id()
        n = num_threads()
        vf = xf[i]
        vi = xi[i]
        vu = xu[i]
        sf = block_sum(vf)
        xf_ = block_max(vf)
        nf = block_min(vf)
        si = block_sum(vi)
        xi_ = block_max(vi)
        ni = block_min(vi)
        su = block_sum(vu)
        xu_ = block_max(vu)
        nu = block_min(vu)
        of[i] = sf
        of[n + i] = xf_
        of[2 * n + i] = nf
        of[3 * n + i] = vf + sf       # a per-thread value used after the collectives
        oi[i] = si
        oi[n + i] = xi_
        oi[2 * n + i] = ni
        ou[i] = su
        ou[n + i] = xu_
        ou[2 * n + i] = nu
    return collectives


COLL_ROWS = {"of": ["block_sum", "block_max", "block_min", "x+sum"], "oi": ["block_sum", "block_max", "block_min"],
             "ou": ["block_sum", "block_max", "block_min"]}


def collective_inputs(n, rng, mode):
    if mode == "special":
        xf = rng.choice(SPECIAL_F32, n).astype(np.float32)
    elif mode == "negzero":
        xf = np.full(n, -0.0, np.float32)
    else:       # wide magnitudes: any other summation order rounds differently
        xf = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    xi = rng.choice(np.concatenate([SPECIAL_I32, rng.integers(I32_MIN, I32_MAX, 40).astype(np.int32)]), n)
    xu = rng.choice(np.concatenate([SPECIAL_U32, rng.integers(0, U32_MAX, 40).astype(np.uint32)]), n)
    return {"xf": xf, "xi": xi.astype(np.int32), "xu": xu.astype(np.uint32), "of": np.zeros(4 * n, np.float32),
            "oi": np.zeros(3 * n, np.int32), "ou": np.zeros(3 * n, np.uint32)}


@pytest.mark.parametrize("B", [1, 2, 8, 32, 64, 128])
def test_collectives_every_block_size_with_inactive_tails(B):
    k = collective_kernel(B)
    rng = np.random.default_rng(B)
    for n in sorted({1, max(B - 1, 1), B, B + 1, 3 * B + B // 2 + 1}):
        for mode in ("special", "wide", "negzero"):
            args = collective_inputs(n, rng, mode)
            agree(k, n, args, layout={name: (rows, n) for name, rows in COLL_ROWS.items()})


@kernel(block=32)
def layernorm_rows(x: Buffer[f32], w: Buffer[f32], y: Buffer[f32], stats: Buffer[f32], cols: Const[int]):
    row = block_id()
    t = thread_id()
    acc = f32(0.0)
    for j in range(t, cols, 32):
        acc += x[row * cols + j]
    total = block_sum(acc)
    mean = total / f32(cols)
    d = f32(0.0)
    for j in range(t, cols, 32):
        e = x[row * cols + j] - mean
        d += e * e
    dd = block_sum(d)
    var = dd / f32(cols)
    r = 1.0 / sqrt(var + 1e-5)
    big = f32(-3.0e38)
    for j in range(t, cols, 32):
        big = max(big, abs(x[row * cols + j]))
    amax = block_max(big)
    for j in range(t, cols, 32):
        y[row * cols + j] = (x[row * cols + j] - mean) * r * w[j] / amax
    if t == 0:
        stats[3 * row] = mean
        stats[3 * row + 1] = var
        stats[3 * row + 2] = amax


@pytest.mark.parametrize("rows,cols", [(3, 65), (2, 7), (1, 32)])
def test_several_collectives_results_used_in_later_phases(rows, cols):
    rng = np.random.default_rng(rows * cols)
    x = (rng.standard_normal(rows * cols) * 3 + 1).astype(np.float32)
    agree(layernorm_rows, rows * 32, {"x": x, "w": rng.standard_normal(cols).astype(np.float32),
                                      "y": np.zeros(rows * cols, np.float32), "stats": np.zeros(3 * rows, np.float32)},
          {"cols": cols})


# ================================================================== 5. the math library

def _neighbours(values, ulps=3):
    v = np.asarray(values, np.float32)
    v = v[np.isfinite(v)]
    bits = v.view(np.int32).astype(np.int64)
    out = [bits + d for d in range(-ulps, ulps + 1)]
    b = np.concatenate(out)
    b = b[(b >= I32_MIN) & (b <= I32_MAX)].astype(np.int32)
    r = b.view(np.float32)
    return np.concatenate([r, -r])


def _template_constants(name):
    consts, compared = set(), set()
    for node in ir.walk_expr(mathlib.template(name)):
        if node.op in GROUPS["compare"]:
            compared |= {s.arg for s in node.src if s.op is Op.CONST and s.dtype is F32}
        if node.op is Op.CONST and node.dtype is F32 and math.isfinite(node.arg):
            consts.add(node.arg)
    return consts, compared


@functools.lru_cache(maxsize=None)
def math_inputs(name: str) -> np.ndarray:
    """Special values, values next to every threshold the function compares against and to
    every range-reduction boundary k/c, (k+1/2)/c of its constants c, and a dense random sample."""
    fn = mathlib.FUNCTIONS[name]
    consts, compared = _template_constants(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    ks = np.arange(-130, 131, dtype=np.float64)
    reduction = [np.concatenate([ks / c, (ks + 0.5) / c]) for c in consts if 1e-3 < abs(c) < 1e3 and c != 1.0]
    special = np.concatenate([SPECIAL_F32, f32_bits([1, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
                                                     0xFFC00000, 0x7FC00000])])
    pieces = [
        special,
        _neighbours(list(compared) + [fn.lo, fn.hi, 0.0, 1.0, 0.5, 2.0, math.sqrt(0.5), math.sqrt(2.0)]),
        _neighbours(np.concatenate(reduction) if reduction else [], ulps=1),
        _neighbours(np.pi / 4 * np.arange(-40, 41), ulps=2),
        _neighbours(2.0 ** np.arange(-149, 128), ulps=1),
        np.float32([1e4, 1e5, 1e6, 1e7, 1e8, 2.0 ** 24, 2.0 ** 31, 1e10, 1e20, 1e38, 88.0, 89.0, 103.0, 104.0]),
        f32_bits(rng.integers(0, 2 ** 32, 40000)),                                       # every exponent
        rng.uniform(fn.lo, fn.hi, 40000).astype(np.float32),                               # the stated range
        (rng.choice([-1.0, 1.0], 20000) * 10.0 ** rng.uniform(-40, 38.5, 20000)).astype(np.float32),
        rng.uniform(-10.0, 10.0, 20000).astype(np.float32),
    ]
    with np.errstate(all="ignore"):
        return np.concatenate([np.asarray(p, np.float32) for p in pieces])


@functools.lru_cache(maxsize=None)
def math_kernel(name: str) -> Kernel:
    x = ir.load("x", GID, F32)
    return ir_kernel(f"math_{name}", [pbuf("x", F32), pbuf("y", F32)], [Store("y", GID, ir.math(name, x))])


@pytest.mark.parametrize("name", sorted(mathlib.FUNCTIONS))
def test_math_function_is_bit_identical(name):
    x = math_inputs(name)
    n = len(x)
    cmp = compare(math_kernel(name), n, {"x": x, "y": np.zeros(n, np.float32)}, None, WHOLE)
    if not cmp.ok:
        bad = np.flatnonzero(_differ(cmp.native["y"], cmp.reference["y"])) if "y" in cmp.mismatches else []
        sample = "; ".join(f"{name}({show(x[j])}): native {show(cmp.native['y'][j])} vs reference "
                           f"{show(cmp.reference['y'][j])}" for j in bad[:8])
        pytest.fail(f"{cmp.describe()}\n{len(bad)} of {n} inputs differ: {sample}")


def test_math_inputs_cover_the_special_values():
    for name in mathlib.FUNCTIONS:
        x = math_inputs(name)
        assert np.isnan(x).any() and np.isinf(x).any() and (x == 0).any()
        assert (x.view(np.uint32) == 0x80000000).any() and ((np.abs(x) < MIN_NORMAL) & (x != 0)).any()


@kernel(block=8)
def math_in_control_flow(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = x[i]
    r = f32(0.0)
    if v > 0.0:
        from_exp = cohort_exp(v * 0.25)
        r = from_exp + cohort_exp(v * 0.25)           # the same call twice in one expression
    else:
        for j in range(i % 3):
            r = r + cohort_sigmoid(v + f32(j))
    s = block_sum(r)
    y[i] = r + cohort_exp(-s * 1e-3) if s == s else r


def test_math_inside_branches_loops_and_collectives():
    rng = np.random.default_rng(8)
    n = 37
    x = np.concatenate([rng.standard_normal(n - 5) * 20, [0.0, -0.0, math.inf, -math.inf, 100.0]]).astype(np.float32)
    agree(math_in_control_flow, n, {"x": x, "y": np.zeros(n, np.float32)})


# ================================================================== 6. launch edge cases

@kernel(block=32)
def copy_scaled(x: Buffer[f32], y: Buffer[f32], s: f32):
    i = global_id()
    if i < len(x) and i < len(y):
        y[i] = x[i] * s
    if len(x) == 1 and i == 0 and len(y) > 0:
        y[0] = x[0] + 1.0 if num_threads() > 0 else y[0]


@pytest.mark.parametrize("n,lx,ly", [(0, 4, 4), (1, 1, 1), (1, 0, 0), (5, 0, 5), (33, 33, 33), (31, 1, 31),
                                     (64, 64, 1), (100, 70, 90)])
def test_launch_sizes_and_tiny_buffers(n, lx, ly):
    rng = np.random.default_rng(n + lx + ly)
    x = rng.standard_normal(lx).astype(np.float32)
    y = np.full(ly, 7.0, np.float32)
    cmp = agree(copy_scaled, n, {"x": x, "y": y, "s": 3.0})
    if n == 0:
        assert (cmp.native["y"] == 7.0).all()


@pytest.mark.parametrize("n", [0, 1, 31, 65])
def test_collectives_at_launch_edges(n):
    args = collective_inputs(n, np.random.default_rng(n), "special")
    agree(collective_kernel(32), n, args)


def test_entry_runs_any_range_of_blocks():
    """The entry's [begin, end) block range (what a worker pool hands out): two halves equal
    one run, an end past the launch is clamped, an empty range does nothing."""
    k = collective_kernel(8)
    n = 45                                    # 6 blocks, the last one partial
    args = collective_inputs(n, np.random.default_rng(15), "wide")
    ref = {name: a.copy() for name, a in args.items()}
    interpret(k.ir, n, ref)
    ck = compile_kernel(k)
    p = ck.prepare(n, args)
    p.run(0, 0)
    p.run(4, 2)
    assert not args["of"].any()
    p.run(0, 2)
    p.run(2, 1000)
    for name in ref:
        assert bitwise_equal(args[name], ref[name]), name


def test_concurrent_launches_of_one_compiled_kernel():
    ck = compile_kernel(layernorm_rows, {"cols": 65})
    rng = np.random.default_rng(16)
    jobs = []
    for j in range(6):
        x = rng.standard_normal(4 * 65).astype(np.float32)
        w = rng.standard_normal(65).astype(np.float32)
        ref = {"x": x, "w": w, "y": np.zeros(4 * 65, np.float32), "stats": np.zeros(12, np.float32)}
        nat = {name: a.copy() for name, a in ref.items()}
        interpret(layernorm_rows.ir, 4 * 32, ref, {"cols": 65})
        jobs.append((ref, nat))
    errors = []

    def work(nat):
        try:
            for _ in range(20):
                ck.launch(4 * 32, nat)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(nat,)) for _, nat in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for ref, nat in jobs:
        for name in ref:
            assert bitwise_equal(nat[name], ref[name]), name


@kernel(block=8)
def u32_index(x: Buffer[f32], y: Buffer[f32], off: u32):
    i = u32(global_id())
    p = private(f32, 3)
    p[i % u32(3)] = x[i]
    y[i] = x[i + off] + p[u32(2) - i % u32(3)]


def test_u32_indices():
    n = 20
    x = np.arange(2 * n, dtype=np.float32)
    agree(u32_index, n, {"x": x, "y": np.zeros(n, np.float32), "off": 7})
    agree(u32_index, n, {"x": x, "y": np.zeros(n, np.float32), "off": 7}, variant=CHECKED)
    msg = _native_error(u32_index, n, {"x": x, "y": np.zeros(n, np.float32), "off": U32_MAX})
    assert "index 4294967295" in msg and "thread 0" in msg, msg     # i + off wraps only at i = 1


# ================================================================== 7. launch API

@kernel(block=32)
def api_kernel(x: Buffer[f32], y: Buffer[f32], a: f32, k: i32, u: u32, cols: Const[int]):
    i = global_id()
    if i < len(y):
        y[i] = x[i] * a + f32(k + cols) + f32(u)


def _api_args(n=10):
    return {"x": np.arange(n, dtype=np.float32), "y": np.full(n, -7.0, np.float32), "a": 2.0, "k": 3, "u": 4}


BAD_LAUNCHES = [
    ("wrong dtype", lambda a: a.update(x=a["x"].astype(np.float64)), "dtype float32"),
    ("wrong int dtype", lambda a: a.update(x=a["x"].astype(np.int32)), "dtype float32"),
    ("non-contiguous", lambda a: a.update(x=np.arange(20, dtype=np.float32)[::2]), "contiguous"),
    ("fortran order", lambda a: a.update(x=np.asfortranarray(np.zeros((2, 5), np.float32))), "contiguous"),
    ("read-only", lambda a: a["x"].setflags(write=False), "read-only"),
    ("a list", lambda a: a.update(x=[1.0] * 10), "NumPy array"),
    ("missing argument", lambda a: a.pop("a"), "missing argument"),
    ("unknown argument", lambda a: a.update(zz=1), "unknown argument"),
    ("const passed at launch", lambda a: a.update(cols=3), "unknown argument"),
    ("i32 too big", lambda a: a.update(k=2 ** 31), "does not fit"),
    ("i32 too small", lambda a: a.update(k=-(2 ** 31) - 1), "does not fit"),
    ("u32 negative", lambda a: a.update(u=-1), "does not fit"),
    ("u32 too big", lambda a: a.update(u=2 ** 32), "does not fit"),
    ("i32 fractional", lambda a: a.update(k=1.5), "i32"),
    ("f32 not a number", lambda a: a.update(a="2.0"), "f32"),
    ("bool scalar", lambda a: a.update(k=True), "i32"),
]


@pytest.mark.parametrize("label,mutate,needle", BAD_LAUNCHES, ids=[b[0] for b in BAD_LAUNCHES])
def test_launch_errors_are_kernel_errors_and_nothing_runs(label, mutate, needle, monkeypatch):
    ck = compile_kernel(api_kernel, {"cols": 2})
    runs = []
    real_run = compiler.PreparedLaunch.run
    monkeypatch.setattr(compiler.PreparedLaunch, "run", lambda self, *a, **k: runs.append(1) or real_run(self, *a, **k))
    args = _api_args()
    y = args["y"]
    mutate(args)
    with pytest.raises(KernelError) as ei:
        ck.launch(10, args)
    msg = str(ei.value)
    assert "api_kernel" in msg and needle in msg, msg
    assert runs == [] and (y == -7.0).all()
    with pytest.raises(KernelError):
        ck.prepare(10, args)


@pytest.mark.parametrize("n", [-1, 1.5, True, "3", 2 ** 31])
def test_bad_thread_count(n):
    ck = compile_kernel(api_kernel, {"cols": 2})
    args = _api_args()
    with pytest.raises(KernelError, match="thread count"):
        ck.launch(n, args)
    assert (args["y"] == -7.0).all()


@pytest.mark.parametrize("consts,needle", [({}, "missing constant"), ({"cols": 1, "zz": 2}, "unknown constant"),
                                           ({"cols": 1.5}, "must be an int"), ({"cols": True}, "must be an int"),
                                           ({"cols": 2 ** 31}, "does not fit"), ({"k": 1}, "constant")])
def test_wrong_constants(consts, needle):
    with pytest.raises(KernelError, match=needle) as ei:
        compile_kernel(api_kernel, consts)
    assert "api_kernel" in str(ei.value)


def test_launch_updates_numpy_arrays_in_place():
    ck = compile_kernel(api_kernel, {"cols": 2})
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((3, 4), np.float32)
    out = ck.launch(12, {"x": x, "y": y, "a": 0.5, "k": -1, "u": 0})
    assert np.array_equal(y, x * np.float32(0.5) + np.float32(1.0))
    assert np.shares_memory(out["y"], y)
    ref = np.zeros(12, np.float32)
    interpret(api_kernel.ir, 12, {"x": x.reshape(-1).copy(), "y": ref, "a": 0.5, "k": -1, "u": 0}, {"cols": 2})
    assert bitwise_equal(y.reshape(-1), ref)


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    ck = compile_kernel(api_kernel, {"cols": 2})
    x = torch.arange(10, dtype=torch.float32)
    y = torch.full((10,), -7.0, dtype=torch.float32)
    ck.launch(10, {"x": x, "y": y, "a": 2.0, "k": 3, "u": 4})
    assert torch.equal(y, x * 2.0 + 9.0)
    z = torch.zeros(10, dtype=torch.float32)
    with pytest.raises(KernelError, match="contiguous"):
        ck.launch(10, {"x": torch.zeros(20)[::2], "y": z, "a": 2.0, "k": 3, "u": 4})
    with pytest.raises(KernelError, match="dtype"):
        ck.launch(10, {"x": x.double(), "y": z, "a": 2.0, "k": 3, "u": 4})
    assert (z == 0).all()


# ================================================================== 8. checked builds

def _line_of(kfn, marker: str) -> int:
    lines, first = inspect.getsourcelines(kfn.fn)
    return first + next(j for j, text in enumerate(lines) if marker in text)


@kernel(block=8)
def oob_load(x: Buffer[f32], y: Buffer[f32], off: i32):
    i = global_id()
    v = x[i + off]  # MARK-LOAD
    y[i] = v


@kernel(block=8)
def oob_store(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[2 * i] = x[i]  # MARK-STORE


@kernel(block=8)
def oob_private(j: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    p = private(f32, 4)
    p[j[i]] = 1.0  # MARK-PRIVATE
    y[i] = p[0]


@kernel(block=8)
def oob_in_collective(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    s = block_sum(x[i + 1])  # MARK-COLL
    y[i] = s


@kernel(block=8)
def oob_in_loop_bounds(x: Buffer[i32], y: Buffer[i32]):
    i = global_id()
    c = 0
    for j in range(x[i + 2]):  # MARK-FOR
        c += 1
    y[i] = c


@kernel(block=8)
def oob_in_condition(x: Buffer[i32], y: Buffer[i32]):
    i = global_id()
    c = 0
    if x[i] > 0:
        if x[3 * i] > 5:  # MARK-IF
            c = 1
    y[i] = c


def _native_error(kfn, n, args, consts=None):
    ck = compile_kernel(kfn, consts, CHECKED)
    with pytest.raises(KernelRuntimeError) as ei:
        ck.launch(n, args)
    return str(ei.value)


CHECKED_CASES = [
    # kernel, n, args, marker, index, thread
    (oob_load, 10, lambda: {"x": np.zeros(9, np.float32), "y": np.zeros(10, np.float32), "off": 0}, "MARK-LOAD", 9, 9),
    (oob_load, 10, lambda: {"x": np.zeros(10, np.float32), "y": np.zeros(10, np.float32), "off": -3}, "MARK-LOAD",
     -3, 0),
    (oob_load, 20, lambda: {"x": np.zeros(20, np.float32), "y": np.zeros(20, np.float32), "off": 1000}, "MARK-LOAD",
     1000, 0),
    (oob_store, 13, lambda: {"x": np.zeros(13, np.float32), "y": np.zeros(13, np.float32)}, "MARK-STORE", 14, 7),
    (oob_private, 12, lambda: {"j": np.array([0, 1, 2, 3] * 2 + [0, 4, 1, 1], np.int32), "y": np.zeros(12, np.float32)},
     "MARK-PRIVATE", 4, 9),
    (oob_private, 12, lambda: {"j": np.array([0] * 11 + [-1], np.int32), "y": np.zeros(12, np.float32)},
     "MARK-PRIVATE", -1, 11),
    (oob_in_collective, 11, lambda: {"x": np.zeros(11, np.float32), "y": np.zeros(11, np.float32)}, "MARK-COLL", 11, 10),
    (oob_in_loop_bounds, 10, lambda: {"x": np.ones(10, np.int32), "y": np.zeros(10, np.int32)}, "MARK-FOR", 10, 8),
    (oob_in_condition, 10, lambda: {"x": np.array([1, 0, 0, 1, 0, 1, 0, 0, 0, 0], np.int32),
                                    "y": np.zeros(10, np.int32)}, "MARK-IF", 15, 5),
]


@pytest.mark.parametrize("kfn,n,make,marker,index,thread", CHECKED_CASES,
                         ids=[f"{c[0].__name__}-{c[4]}" for c in CHECKED_CASES])
def test_checked_build_reports_out_of_bounds(kfn, n, make, marker, index, thread):
    with pytest.raises(KernelRuntimeError):           # the reference rejects the launch too
        interpret(kfn.ir, n, make())
    msg = _native_error(kfn, n, make())
    line = _line_of(kfn, marker)
    assert kfn.__name__ in msg, msg
    assert f"line {line}" in msg, msg
    assert f"index {index}" in msg, msg
    assert f"thread {thread}" in msg, msg
    # the process survives, the error record is reset, and the entry works again
    ck = compile_kernel(kfn, None, CHECKED)
    ok = make()
    if "x" in ok:
        ok["x"] = np.zeros(4 * n, ok["x"].dtype)
    if "y" in ok:
        ok["y"] = np.zeros(4 * n, ok["y"].dtype)
    if "off" in ok:
        ok["off"] = 0
    if "j" in ok:
        ok["j"] = np.zeros(n, np.int32)
    ck.launch(n, ok)
    agree(kfn, n, ok, variant=CHECKED)


@pytest.mark.parametrize("case", ["branches", "loops", "privates", "phases", "collectives", "ops"])
def test_checked_and_unchecked_builds_agree(case):
    rng = np.random.default_rng(11)
    if case == "branches":
        n = 100
        kfn, consts = branches, None
        args = {"x": rng.choice(SPECIAL_F32, n).astype(np.float32), "k": rng.integers(-30, 30, n).astype(np.int32),
                "out": np.zeros(n, np.float32), "tag": np.zeros(n, np.int32)}
    elif case == "loops":
        n, kfn, consts = 50, loops, {"step": 3}
        lo = rng.integers(-12, 12, n).astype(np.int32)
        args = {"lo": lo, "hi": (lo + 7).astype(np.int32), "x": rng.standard_normal(19).astype(np.float32),
                "out": np.zeros(n, np.float32), "cnt": np.zeros(n, np.int32)}
    elif case == "privates":
        n, kfn, consts = 29, privates, None
        args = {"x": rng.standard_normal(n).astype(np.float32), "sel": rng.integers(0, 7, n).astype(np.int32),
                "of": np.zeros(5 * n, np.float32), "oi": np.zeros(7 * n, np.int32), "ob": np.zeros(3 * n, bool),
                "zeros": np.zeros(n, np.int32)}
    elif case == "phases":
        n, kfn, consts = 40, phases, None
        args = {"x": rng.standard_normal(n).astype(np.float32), "k": rng.integers(-9, 9, n).astype(np.int32),
                "y": np.zeros(n, np.float32), "z": np.zeros(n, np.int32)}
    elif case == "collectives":
        n, kfn, consts = 45, collective_kernel(32), None
        args = collective_inputs(n, rng, "wide")
    else:
        k, rows = op_table_kernel(I32)
        a, b = pairs(SPECIAL_I32)
        n, kfn, consts = len(a), k, None
        args = {"a": a, "b": b, **{name: np.zeros(len(r) * n, DType(name[2:]).np) for name, r in rows.items()}}
    plain = agree(kfn, n, args, consts, WHOLE)
    checked = agree(kfn, n, args, consts, CHECKED)
    for name in plain.native:
        assert bitwise_equal(plain.native[name], checked.native[name]), name


# ================================================================== 9. compile cache

def test_compile_cache_returns_the_same_object():
    a = compile_kernel(api_kernel, {"cols": 5}, WHOLE)
    assert compile_kernel(api_kernel, {"cols": 5}, WHOLE) is a
    assert compile_kernel(api_kernel.ir, {"cols": 5}, "whole") is a
    assert compile_kernel(api_kernel, {"cols": 5}, "lanes=1") is a            # the same knobs, spelled otherwise
    # runtime knobs do not change code: the same native code, bound to the variant asked for
    r = compile_kernel(api_kernel, {"cols": 5}, "whole,workers=2,grain=3")
    assert r is not a and r.code is a.code and r.entry == a.entry
    assert (r.variant.workers, r.variant.grain) == (2, 3) and compile_kernel(api_kernel, {"cols": 5}, "whole,workers=2,grain=3") is r
    b = compile_kernel(api_kernel, {"cols": 6}, WHOLE)
    c = compile_kernel(api_kernel, {"cols": 5}, CHECKED)
    assert b is not a and c is not a and c is not b
    assert b.entry != a.entry
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    a.launch(4, {"x": x, "y": y, "a": 1.0, "k": 0, "u": 0})
    assert y.tolist() == [5.0, 6.0, 7.0, 8.0]
    b.launch(4, {"x": x, "y": y, "a": 1.0, "k": 0, "u": 0})
    assert y.tolist() == [6.0, 7.0, 8.0, 9.0]


_fresh = itertools.count(1_000_003)      # constants no other test compiles with


def test_compile_cache_from_eight_threads():
    cols = next(_fresh)       # a key nobody compiled before
    barrier = threading.Barrier(8)
    results, errors = [None] * 8, []

    def work(j):
        try:
            barrier.wait()
            results[j] = compile_kernel(api_kernel, {"cols": cols}, WHOLE)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(j,)) for j in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(r is results[0] for r in results)
    y = np.zeros(3, np.float32)
    results[0].launch(3, {"x": np.ones(3, np.float32), "y": y, "a": 1.0, "k": 0, "u": 0})
    assert y.tolist() == [cols + 1.0] * 3


def test_kernels_differing_only_in_block_are_cached_apart():
    a, b = builtins_kernel(8), builtins_kernel(16)
    assert compile_kernel(a) is not compile_kernel(b)
    assert compile_kernel(a) is compile_kernel(builtins_kernel(8))


def test_variant_block_knob_matches_the_interpreter_at_that_block():
    """`whole,block=8` runs a block=32 kernel in blocks of 8: the reference is the same kernel at block 8."""
    k = collective_kernel(32)
    n = 45
    args = collective_inputs(n, np.random.default_rng(14), "wide")
    ref = {name: a.copy() for name, a in args.items()}
    interpret(Kernel(k.ir.name, k.ir.params, k.ir.body, 8), n, ref)
    nat = {name: a.copy() for name, a in args.items()}
    ck = compile_kernel(k, None, "whole,block=8")
    assert ck.kernel.block == 8
    ck.launch(n, nat)
    for name in ref:
        assert bitwise_equal(nat[name], ref[name]), name


def test_compare_uses_the_variants_block_for_the_reference():
    k = collective_kernel(32)
    n = 45
    args = collective_inputs(n, np.random.default_rng(14), "wide")
    agree(k, n, args, variant="whole,block=8")


@kernel(block=8)
def twin(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i + 1]  # MARK-TWIN-A


_twin_a = twin


@kernel(block=8)
def twin(x: Buffer[f32], y: Buffer[f32]):  # noqa: F811 - the same kernel text, at other lines
    i = global_id()
    y[i] = x[i + 1]  # MARK-TWIN-B


_twin_b = twin


def test_checked_errors_cite_the_launched_kernels_own_lines():
    """Two kernels with the same name and text at different source lines (an edited,
    reloaded module; a notebook cell run twice): each reports its own line."""
    for kfn, marker in ((_twin_a, "MARK-TWIN-A"), (_twin_b, "MARK-TWIN-B")):
        msg = _native_error(kfn, 8, {"x": np.zeros(8, np.float32), "y": np.zeros(8, np.float32)})
        assert f"line {_line_of(kfn, marker)}" in msg and marker in msg, msg


# ================================================================== 10. code facts

@functools.lru_cache(maxsize=None)
def all_math_kernel() -> Kernel:
    x = ir.load("x", GID, F32)
    names = sorted(mathlib.FUNCTIONS)
    body = [Store("y", slot(j), ir.math(name, x)) for j, name in enumerate(names)]
    return ir_kernel("all_math", [pbuf("x", F32), pbuf("y", F32)], body)


@kernel(block=32)
def mul_adds(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    acc = a[i] * b[i] + c[i]
    for j in range(8):
        acc = acc * a[i] + b[i] * c[i] - f32(j) * 0.5
    y[i] = acc * acc + acc


def test_no_scalar_libm_calls_for_every_math_function():
    ck = compile_kernel(all_math_kernel(), None, WHOLE)
    facts = ck.facts
    assert facts["scalar_libm_calls"] == 0, facts
    # the library's own fma operations (named, DESIGN §3), never contraction
    from cohort.backend.codegen import fma_lowering
    assert (facts["fma"] > 0) == (fma_lowering() == "hardware"), facts
    assert "contract" not in ck.llvm_ir and "fmuladd" not in ck.llvm_ir
    assert facts["lanes"] == 1
    n = 300
    x = math_inputs(sorted(mathlib.FUNCTIONS)[0])[:n].copy()
    agree(all_math_kernel(), n, {"x": x, "y": np.zeros(n * len(mathlib.FUNCTIONS), np.float32)},
          layout={"y": (sorted(mathlib.FUNCTIONS), n)})


def test_no_fma_without_fast_math():
    ck = compile_kernel(mul_adds, None, WHOLE)
    assert not ck.variant.fast_math
    assert ck.facts["fma"] == 0, ck.facts
    # the fast-math flag `fast` (the bounds proof's call is `fastcc`, a calling convention)
    assert "fmuladd" not in ck.llvm_ir and "contract" not in ck.llvm_ir
    assert not re.search(r"\bfast\b", ck.llvm_ir.split("attributes")[0])
    rng = np.random.default_rng(12)
    n = 70
    agree(mul_adds, n, {k: rng.standard_normal(n).astype(np.float32) for k in "abc"} | {"y": np.zeros(n, np.float32)})


def test_fact_detectors_are_not_vacuous():
    """fma == 0 and scalar_libm_calls == 0 mean something: the same counters see FMAs in a
    fast-math build and libm calls in code that has them."""
    fast = compile_kernel(mul_adds, None, "whole,fast_math=on")
    assert fast.facts["fma"] > 0, fast.facts
    from cohort.backend.facts import code_facts
    text = "define float @f(float %x) {\n  %y = call float @expf(float %x)\n  ret float %y\n}\n"
    facts = code_facts(text, "\tcallq\texpf@PLT\n", "f", fast.variant)
    assert facts["scalar_libm_calls"] >= 1 and not facts["direct_cfg"], facts


def test_private_arrays_are_zeroed_without_calls_out_of_the_code():
    # zeroing every block's private arrays is a store loop, not libc's memset: the entry
    # reaches every effect without leaving the generated code (the seeds' direct CFG)
    from cohort.refimpl import ops
    op = ops.get("attention")
    launch = op.launch((1, 4, 1, 64, 128, 32, 32))
    for v in ("whole", "packet", "packet,private=thread", "lanes=4,full_packet=off"):
        facts = compile_kernel(op.kernel, launch.consts, v, n=launch.n).facts
        assert facts["direct_cfg"] and facts["external_calls"] == [], (v, facts)


# ================================================================== 11. native timer

def test_timer_on_the_empty_entry():
    t = timer.time_entry(timer.empty_entry_address(), 0, 1000, 3)
    assert t.shape == (3,) and t.dtype == np.float64
    assert t.dtype == np.float64 and (t > 0).all() and np.isfinite(t).all(), t   # ns per call; no speed asserted
    with pytest.raises(ValueError):
        timer.time_entry(timer.empty_entry_address(), 0, 0, 3)


def test_timer_on_a_prepared_launch_leaves_outputs_unchanged():
    k = collective_kernel(32)
    n = 100
    args = collective_inputs(n, np.random.default_rng(13), "wide")
    ref = {name: a.copy() for name, a in args.items() if isinstance(a, np.ndarray)}
    interpret(k.ir, n, ref)
    ck = compile_kernel(k, None, WHOLE)
    p = ck.prepare(n, args)
    p.run()
    for name in ("of", "oi", "ou"):
        assert bitwise_equal(args[name], ref[name]), name
    t = timer.time_entry(ck.entry, p.address, 20, 3)
    assert (t > 0).all() and np.isfinite(t).all()
    p.raise_error()
    for name in ("of", "oi", "ou"):
        assert bitwise_equal(args[name], ref[name]), name
    assert timer.calibrate_iters(ck.entry, p.address, target_ns=1e4) >= 1


# ================================================================== 12. large private arrays

@pytest.mark.parametrize("size,block", [(4096, 128), (16384, 128), (65536, 32)])
def test_large_private_arrays_in_a_subprocess(size, block, tmp_path):
    """A private array of the maximum size must not crash the process (run apart: a crash is a finding)."""
    code = textwrap.dedent(f"""
        import numpy as np
        from cohort import Buffer, f32, global_id, kernel, private
        from cohort.verify.differential import compare

        @kernel(block={block})
        def big_private(x: Buffer[f32], y: Buffer[f32]):
            i = global_id()
            p = private(f32, {size})
            p[i % {size}] = x[i]
            p[{size} - 1] = p[{size} - 1] + x[i]
            y[i] = p[i % {size}] + p[{size} - 1]

        n = {block} + 3
        c = compare(big_private, n, {{"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32)}})
        print("OK" if c.ok else c.describe())
    """)
    script = tmp_path / "big_private.py"         # a file: the frontend reads the kernel's source
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "OK", (r.returncode, r.stdout[-2000:], r.stderr[-2000:])

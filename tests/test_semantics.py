"""Property tests pinning the exact value semantics of DESIGN §3.

Every expectation here comes from an independent model written in this file
(plain Python integers, Python floats, NumPy float32 scalars one operation at
a time); nothing is taken from cohort.refimpl.semantics except in the tests
that check the table itself against the same models. Kernels run through
the reference interpreter (`kernel_fn.interpret`).

Comparisons are bitwise: +0 and -0 differ; NaNs are equal whatever their
payload.
"""
from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cohort import (
    Buffer,
    KernelRuntimeError,
    bitcast,
    block_max,
    block_min,
    block_sum,
    f32,
    global_id,
    i32,
    kernel,
    sqrt,
    u32,
)
from cohort.refimpl import semantics
from cohort.refimpl.ir import DType, Op

I32_MIN, I32_MAX, U32_MAX = -(2 ** 31), 2 ** 31 - 1, 2 ** 32 - 1
BLOCKS = [1, 2, 4, 8, 16, 32, 64]
FAST = settings(max_examples=40, deadline=None)

# ------------------------------------------------------------------ helpers


def f32_of_bits(b: int) -> np.float32:
    return np.array([b], np.uint32).view(np.float32)[0]


def bits_of(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def same_f32(got, want) -> bool:
    """Bitwise equality, except that any NaN equals any NaN."""
    got = np.atleast_1d(np.asarray(got, np.float32))
    want = np.atleast_1d(np.asarray(want, np.float32))
    assert got.shape == want.shape
    return bool(np.all((bits_of(got) == bits_of(want)) | (np.isnan(got) & np.isnan(want))))


def assert_same_f32(got, want, what=""):
    if not same_f32(got, want):
        got = np.atleast_1d(np.asarray(got, np.float32))
        want = np.atleast_1d(np.asarray(want, np.float32))
        bad = np.flatnonzero(~((bits_of(got) == bits_of(want)) | (np.isnan(got) & np.isnan(want))))
        i = int(bad[0])
        raise AssertionError(f"{what}: element {i}: got {got[i]!r} (0x{int(bits_of(got)[i]):08x}), "
                             f"want {want[i]!r} (0x{int(bits_of(want)[i]):08x}); {len(bad)} differ")


def wrap_i32(v: int) -> int:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def wrap_u32(v: int) -> int:
    return v % 2 ** 32


MIN_SUB = 2.0 ** -149           # smallest subnormal
MAX_SUB = 2.0 ** -126 - 2.0 ** -149
MIN_NORMAL = 2.0 ** -126
F32_MAX = float(np.finfo(np.float32).max)

SPECIAL_F32 = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, MIN_SUB, -MIN_SUB, MAX_SUB,
               -MAX_SUB, MIN_NORMAL, -MIN_NORMAL, F32_MAX, -F32_MAX, 1.0, -1.0, 0.5, 3.0,
               16777216.0, 16777217.0 - 1.0, 1e30, -1e30, 1e-30]
SPECIAL_BITS = [int(bits_of(np.float32(v))) for v in SPECIAL_F32] + [
    0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0x00000001, 0x80000001, 0x007FFFFF]


def _to_bits(v: float) -> int:
    return int(bits_of(np.float32(v)))


# Bit patterns of float32 values: specials (±0, subnormals, ±inf, NaNs with
# payloads, huge), any float32, and any 32-bit pattern.
f32_bits = st.one_of(st.sampled_from(SPECIAL_BITS),
                     st.floats(width=32).map(_to_bits),
                     st.integers(0, 2 ** 32 - 1))
# Finite, "ordinary" float32 values (for properties that need finite inputs).
finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def f32_array(n: int):
    return st.lists(f32_bits, min_size=n, max_size=n).map(
        lambda bs: np.array(bs, np.uint32).view(np.float32))


SPECIAL_I32 = [0, 1, -1, 2, -2, I32_MIN, I32_MIN + 1, I32_MAX, I32_MAX - 1, 2 ** 16, -(2 ** 16),
               2 ** 24 + 1, 46341]
i32s = st.one_of(st.sampled_from(SPECIAL_I32), st.integers(I32_MIN, I32_MAX))
SPECIAL_U32 = [0, 1, 2, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, U32_MAX, U32_MAX - 1, 2 ** 16, 65537]
u32s = st.one_of(st.sampled_from(SPECIAL_U32), st.integers(0, U32_MAX))


# ================================================================== 1. collectives

def _reduce_f32(x: Buffer[f32], s: Buffer[f32], hi: Buffer[f32], lo: Buffer[f32]):
    i = global_id()
    v = x[i]
    a = block_sum(v)
    b = block_max(v)
    c = block_min(v)
    s[i] = a
    hi[i] = b
    lo[i] = c


def _reduce_i32(x: Buffer[i32], s: Buffer[i32], hi: Buffer[i32], lo: Buffer[i32]):
    i = global_id()
    v = x[i]
    a = block_sum(v)
    b = block_max(v)
    c = block_min(v)
    s[i] = a
    hi[i] = b
    lo[i] = c


def _reduce_u32(x: Buffer[u32], s: Buffer[u32], hi: Buffer[u32], lo: Buffer[u32]):
    i = global_id()
    v = x[i]
    a = block_sum(v)
    b = block_max(v)
    c = block_min(v)
    s[i] = a
    hi[i] = b
    lo[i] = c


_REDUCE_FN = {"f32": _reduce_f32, "i32": _reduce_i32, "u32": _reduce_u32}


@functools.lru_cache(maxsize=None)
def reducer(dt: str, B: int):
    return kernel(block=B)(_REDUCE_FN[dt])


def _f32_add(a, b):
    with np.errstate(all="ignore"):
        return np.float32(a) + np.float32(b)


def _min(a, b):
    return a if a < b else b


def _max(a, b):
    return a if a > b else b


# (op, identity) per reduction, per dtype; written from DESIGN §3, not from semantics.py
MODEL = {
    "f32": {"sum": (_f32_add, np.float32(-0.0)), "max": (_max, np.float32(-np.inf)),
            "min": (_min, np.float32(np.inf))},
    "i32": {"sum": (lambda a, b: wrap_i32(a + b), 0), "max": (_max, I32_MIN), "min": (_min, I32_MAX)},
    "u32": {"sum": (lambda a, b: wrap_u32(a + b), 0), "max": (_max, 0), "min": (_min, U32_MAX)},
}


def tree_model(values, n: int, B: int, op, identity):
    """One value per block: the fixed tree of DESIGN §3, one operation at a time."""
    out = []
    for blk in range(-(-n // B)):
        v = [values[blk * B + t] if blk * B + t < n else identity for t in range(B)]
        s = B // 2
        while s >= 1:
            for t in range(s):
                v[t] = op(v[t], v[t + s])
            s //= 2
        out.append(v[0])
    return out


def run_reducer(dt: str, B: int, x):
    n = len(x)
    np_dt = {"f32": np.float32, "i32": np.int32, "u32": np.uint32}[dt]
    outs = {k: np.full(n, 7, np_dt) for k in ("s", "hi", "lo")}
    reducer(dt, B).interpret(n, x=x, **outs)
    return outs


def check_reduction(dt: str, B: int, x):
    n = len(x)
    outs = run_reducer(dt, B, x)
    vals = [np.float32(v) for v in x] if dt == "f32" else [int(v) for v in x]
    for key, name in (("s", "sum"), ("hi", "max"), ("lo", "min")):
        op, ident = MODEL[dt][name]
        want_blocks = tree_model(vals, n, B, op, ident)
        want = np.array([want_blocks[i // B] for i in range(n)],
                        {"f32": np.float32, "i32": np.int64, "u32": np.int64}[dt])
        got = outs[key]
        # every thread of a block received the same value...
        for blk in range(len(want_blocks)):
            seg = got[blk * B:min(n, (blk + 1) * B)]
            if dt == "f32":
                assert_same_f32(seg, np.full(len(seg), seg[0], np.float32), f"block_{name} block {blk}")
            else:
                assert np.all(seg == seg[0]), f"block_{name}: block {blk} threads disagree: {seg}"
        # ... and it is the tree's value
        if dt == "f32":
            assert_same_f32(got, want, f"block_{name} B={B} n={n}")
        else:
            assert got.astype(np.int64).tolist() == want.tolist(), f"block_{name} B={B} n={n}"


@st.composite
def block_and_values(draw, elements, np_dt):
    B = draw(st.sampled_from(BLOCKS))
    # n from 1 to 3 blocks; often not a multiple of B (partial last block)
    n = draw(st.one_of(st.integers(1, 3 * B), st.sampled_from([1, B, B + 1, 2 * B - 1])))
    if np_dt is np.float32:
        x = draw(f32_array(n))
    else:
        x = np.array(draw(st.lists(elements, min_size=n, max_size=n)), np_dt)
    return B, x


@settings(max_examples=120, deadline=None)
@given(block_and_values(None, np.float32))
@example((4, np.array([1e8, 1.0, -1e8, 1.0], np.float32)))
@example((4, np.array([-0.0], np.float32)))
@example((2, np.array([np.nan], np.float32)))
@example((8, np.array([np.inf, -np.inf, 1.0], np.float32)))
def test_f32_collectives_follow_the_tree(bx):
    B, x = bx
    check_reduction("f32", B, x)


@settings(max_examples=60, deadline=None)
@given(block_and_values(i32s, np.int32))
@example((4, np.array([I32_MAX, 1, I32_MIN, -1, 5], np.int32)))
def test_i32_collectives_follow_the_tree(bx):
    B, x = bx
    check_reduction("i32", B, x)


@settings(max_examples=60, deadline=None)
@given(block_and_values(u32s, np.uint32))
@example((8, np.array([U32_MAX, 1, 2 ** 31, 2 ** 31, 3], np.uint32)))
def test_u32_collectives_follow_the_tree(bx):
    B, x = bx
    check_reduction("u32", B, x)


def _sequential(values, op, identity):
    acc = identity
    for v in values:
        acc = op(acc, v)
    return acc


def test_tree_order_is_observable_and_is_the_one_used():
    # 1e8 + 1 rounds back to 1e8 in float32: left-to-right summation loses both ones,
    # the tree adds (1e8 + -1e8) + (1 + 1) = 2.
    x = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    op, ident = MODEL["f32"]["sum"]
    seq = _sequential([np.float32(v) for v in x], op, ident)
    tree = tree_model([np.float32(v) for v in x], 4, 4, op, ident)[0]
    assert seq == np.float32(1.0) and tree == np.float32(2.0)
    got = run_reducer("f32", 4, x)["s"]
    assert_same_f32(got, np.full(4, 2.0, np.float32), "block_sum")
    # NumPy's own (pairwise) sum is not the contract either for a block of 32
    rng = np.random.default_rng(1)
    found = 0
    for _ in range(50):
        x = (rng.standard_normal(32) * 10.0 ** rng.integers(-3, 8, 32)).astype(np.float32)
        vals = [np.float32(v) for v in x]
        tree = tree_model(vals, 32, 32, op, ident)[0]
        seq = _sequential(vals, op, ident)
        got = run_reducer("f32", 32, x)["s"]
        assert_same_f32(got, np.full(32, tree, np.float32), "block_sum (random)")
        found += bool(int(bits_of(seq)) != int(bits_of(tree)))
    assert found > 0  # the test above could tell the two orders apart


def test_empty_launch_reduces_nothing():
    out = run_reducer("f32", 32, np.zeros(0, np.float32))
    assert all(len(v) == 0 for v in out.values())


def test_inactive_threads_contribute_the_identity():
    # sum identity is -0.0: a partial block of -0.0 sums to -0.0 (+0.0 would give +0.0)
    assert_same_f32(run_reducer("f32", 4, np.array([-0.0], np.float32))["s"], [-0.0], "sum")
    assert_same_f32(run_reducer("f32", 32, np.array([-0.0] * 33, np.float32))["s"][32:], [-0.0], "sum")
    # max/min identities: -inf/+inf; a NaN in thread 0 meets the identity as `a`,
    # and max(NaN, -inf) = -inf since NaN > -inf is false (DESIGN §3 read literally)
    out = run_reducer("f32", 2, np.array([np.nan], np.float32))
    assert_same_f32(out["hi"], [-np.inf], "max")
    assert_same_f32(out["lo"], [np.inf], "min")
    # ... whereas a NaN in the right operand survives
    out = run_reducer("f32", 2, np.array([1.0, np.nan], np.float32))
    assert np.isnan(out["hi"]).all() and np.isnan(out["lo"]).all()


def test_tree_reduce_table_entry_matches_model():
    """semantics.tree_reduce itself (used by the interpreter) against the model."""
    rng = np.random.default_rng(7)
    for B in BLOCKS:
        bits = rng.choice(np.array(SPECIAL_BITS, np.uint32), size=(3, B))
        v = bits.view(np.float32)
        for name in ("sum", "max", "min"):
            op, ident = MODEL["f32"][name]
            got = semantics.tree_reduce(v, f"block_{name}", DType.F32)
            want = [tree_model([np.float32(a) for a in row], B, B, op, ident)[0] for row in v]
            assert_same_f32(got, np.array(want, np.float32), f"tree_reduce {name} B={B}")


# ================================================================== 2. min / max

@kernel(block=8)
def minmax_f32(a: Buffer[f32], b: Buffer[f32], lo: Buffer[f32], hi: Buffer[f32]):
    i = global_id()
    lo[i] = min(a[i], b[i])
    hi[i] = max(a[i], b[i])


@kernel(block=8)
def minmax_i32(a: Buffer[i32], b: Buffer[i32], lo: Buffer[i32], hi: Buffer[i32]):
    i = global_id()
    lo[i] = min(a[i], b[i])
    hi[i] = max(a[i], b[i])


@kernel(block=8)
def minmax_u32(a: Buffer[u32], b: Buffer[u32], lo: Buffer[u32], hi: Buffer[u32]):
    i = global_id()
    lo[i] = min(a[i], b[i])
    hi[i] = max(a[i], b[i])


def _minmax_f32(a, b):
    n = len(a)
    lo, hi = np.zeros(n, np.float32), np.zeros(n, np.float32)
    minmax_f32.interpret(n, a=a, b=b, lo=lo, hi=hi)
    return lo, hi


MINMAX_CASES = [
    # a, b, min(a, b), max(a, b)       min = a if a < b else b; max = a if a > b else b
    (-0.0, 0.0, 0.0, 0.0),            # -0 < 0 false -> b; -0 > 0 false -> b
    (0.0, -0.0, -0.0, -0.0),
    (math.nan, 1.0, 1.0, 1.0),        # comparisons with NaN are false -> b
    (1.0, math.nan, math.nan, math.nan),
    (math.nan, -math.inf, -math.inf, -math.inf),
    (math.inf, math.nan, math.nan, math.nan),
    (-math.inf, math.inf, -math.inf, math.inf),
    (MIN_SUB, -0.0, -0.0, MIN_SUB),
    (2.0, 1.0, 1.0, 2.0),
]


def test_minmax_explicit_cases():
    a = np.array([c[0] for c in MINMAX_CASES], np.float32)
    b = np.array([c[1] for c in MINMAX_CASES], np.float32)
    lo, hi = _minmax_f32(a, b)
    assert_same_f32(lo, [c[2] for c in MINMAX_CASES], "min")
    assert_same_f32(hi, [c[3] for c in MINMAX_CASES], "max")
    # NaN results: min(1, NaN) is *b*, with b's bits
    nan_b = f32_of_bits(0x7FC12345)
    lo, hi = _minmax_f32(np.array([1.0], np.float32), np.array([nan_b], np.float32))
    assert bits_of(lo)[0] == 0x7FC12345 and bits_of(hi)[0] == 0x7FC12345


@FAST
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(f32_array(n), f32_array(n))))
def test_minmax_f32_property(ab):
    a, b = ab
    lo, hi = _minmax_f32(a, b)
    # the result is exactly one of the operands' bit patterns, chosen by < / >
    want_lo = np.array([x if x < y else y for x, y in zip(a, b)], np.float32)
    want_hi = np.array([x if x > y else y for x, y in zip(a, b)], np.float32)
    assert np.array_equal(bits_of(lo), bits_of(want_lo))
    assert np.array_equal(bits_of(hi), bits_of(want_hi))
    # the semantics table says the same on whole arrays
    assert np.array_equal(bits_of(semantics.apply(Op.MIN, DType.F32, (a, b))), bits_of(want_lo))
    assert np.array_equal(bits_of(semantics.apply(Op.MAX, DType.F32, (a, b))), bits_of(want_hi))


@FAST
@given(st.lists(st.tuples(i32s, i32s), min_size=1, max_size=30),
       st.lists(st.tuples(u32s, u32s), min_size=1, max_size=30))
def test_minmax_int_property(pi, pu):
    for kfn, pairs, dt in ((minmax_i32, pi, np.int32), (minmax_u32, pu, np.uint32)):
        a = np.array([p[0] for p in pairs], dt)
        b = np.array([p[1] for p in pairs], dt)
        lo, hi = np.zeros_like(a), np.zeros_like(a)
        kfn.interpret(len(a), a=a, b=b, lo=lo, hi=hi)
        assert lo.tolist() == [min(x, y) for x, y in pairs]
        assert hi.tolist() == [max(x, y) for x, y in pairs]


# ================================================================== 3. float32 arithmetic

@kernel(block=8)
def farith(a: Buffer[f32], b: Buffer[f32], add: Buffer[f32], sub: Buffer[f32], mul: Buffer[f32],
           div: Buffer[f32], sq: Buffer[f32], neg: Buffer[f32], ab: Buffer[f32]):
    i = global_id()
    x = a[i]
    y = b[i]
    add[i] = x + y
    sub[i] = x - y
    mul[i] = x * y
    div[i] = x / y
    sq[i] = sqrt(x)
    neg[i] = -x
    ab[i] = abs(x)


def _farith(a, b):
    n = len(a)
    outs = {k: np.zeros(n, np.float32) for k in ("add", "sub", "mul", "div", "sq", "neg", "ab")}
    farith.interpret(n, a=a, b=b, **outs)
    return outs


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 24).flatmap(lambda n: st.tuples(f32_array(n), f32_array(n))))
def test_f32_ops_are_correctly_rounded(ab):
    a, b = ab
    out = _farith(a, b)
    with np.errstate(all="ignore"):
        # (1) NumPy float32 scalars, one operation at a time
        f = [np.float32(v) for v in a], [np.float32(v) for v in b]
        np_model = {
            "add": [x + y for x, y in zip(*f)], "sub": [x - y for x, y in zip(*f)],
            "mul": [x * y for x, y in zip(*f)], "div": [x / y for x, y in zip(*f)],
            "sq": [np.sqrt(x) for x in f[0]], "neg": [-x for x in f[0]], "ab": [abs(x) for x in f[0]],
        }
        # (2) exact float64 operation, then one rounding to float32: exact for
        # + - * / sqrt since 53 >= 2*24 + 2 (double rounding is innocuous)
        d = [np.float64(v) for v in a], [np.float64(v) for v in b]
        f64_model = {
            "add": [x + y for x, y in zip(*d)], "sub": [x - y for x, y in zip(*d)],
            "mul": [x * y for x, y in zip(*d)], "div": [x / y for x, y in zip(*d)],
            "sq": [np.sqrt(x) for x in d[0]], "neg": [-x for x in d[0]], "ab": [abs(x) for x in d[0]],
        }
    for k in out:
        assert_same_f32(out[k], np.array(np_model[k], np.float32), f"{k} vs numpy float32")
        with np.errstate(over="ignore"):
            rounded = np.array(f64_model[k], np.float64).astype(np.float32)
        assert_same_f32(out[k], rounded, f"{k} vs float64")
    # neg flips exactly the sign bit and abs clears it, NaN included
    assert np.array_equal(bits_of(out["neg"]), bits_of(a) ^ np.uint32(0x80000000))
    assert np.array_equal(bits_of(out["ab"]), bits_of(a) & np.uint32(0x7FFFFFFF))


@kernel(block=8)
def fcompare(a: Buffer[f32], b: Buffer[f32], lt: Buffer[bool], le: Buffer[bool], gt: Buffer[bool],
             ge: Buffer[bool], eq: Buffer[bool], ne: Buffer[bool]):
    i = global_id()
    lt[i] = a[i] < b[i]
    le[i] = a[i] <= b[i]
    gt[i] = a[i] > b[i]
    ge[i] = a[i] >= b[i]
    eq[i] = a[i] == b[i]
    ne[i] = a[i] != b[i]


@FAST
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(f32_array(n), f32_array(n))))
@example((np.array([np.nan, 0.0, np.nan, 1.0], np.float32), np.array([np.nan, -0.0, 1.0, np.inf], np.float32)))
def test_f32_comparisons_are_ordered_except_ne(ab):
    a, b = ab
    n = len(a)
    outs = {k: np.zeros(n, bool) for k in ("lt", "le", "gt", "ge", "eq", "ne")}
    fcompare.interpret(n, a=a, b=b, **outs)
    pairs = [(float(x), float(y)) for x, y in zip(a, b)]   # Python floats compare as IEEE
    assert outs["lt"].tolist() == [x < y for x, y in pairs]
    assert outs["le"].tolist() == [x <= y for x, y in pairs]
    assert outs["gt"].tolist() == [x > y for x, y in pairs]
    assert outs["ge"].tolist() == [x >= y for x, y in pairs]
    assert outs["eq"].tolist() == [x == y for x, y in pairs]     # -0.0 == 0.0; NaN == NaN is false
    assert outs["ne"].tolist() == [x != y for x, y in pairs]     # unordered: NaN != x is true


def test_subnormals_are_kept_and_rounded_to_nearest_even():
    a = np.array([MIN_NORMAL, MIN_SUB, MIN_SUB, MIN_SUB, 3 * MIN_SUB, MAX_SUB, MIN_SUB, 1e-30],
                 np.float32)
    b = np.array([2.0, 1.0, 2.0, MIN_SUB, 2.0, MIN_SUB, 2.0 ** 100, 1e-10], np.float32)
    out = _farith(a, b)
    assert_same_f32(out["div"][:1], [2.0 ** -127], "min normal / 2 is a subnormal, not 0")
    assert_same_f32(out["div"][1], MIN_SUB, "subnormal / 1")
    # 2^-149 / 2 = 2^-150: a tie between 0 and 2^-149 -> 0 (even)
    assert_same_f32(out["div"][2], 0.0, "tie to even")
    # 3*2^-149 / 2 = 1.5 * 2^-149: a tie between 2^-149 and 2^-148 -> 2^-148 (even)
    assert_same_f32(out["div"][4], 2.0 ** -148, "tie to even")
    assert_same_f32(out["add"][3], 2 * MIN_SUB, "subnormal + subnormal")
    assert_same_f32(out["add"][5], MIN_NORMAL, "max subnormal + min subnormal")
    assert_same_f32(out["sub"][5], MAX_SUB - MIN_SUB, "subnormal - subnormal")
    assert_same_f32(out["mul"][6], 2.0 ** -49, "subnormal input not flushed (no DAZ)")
    assert_same_f32(out["mul"][7], np.float64(a[7]) * np.float64(b[7]), "gradual underflow")
    assert out["mul"][7] != 0 and abs(out["mul"][7]) < MIN_NORMAL
    assert_same_f32(out["sq"][1], np.sqrt(np.float64(MIN_SUB)), "sqrt of a subnormal")


@kernel(block=8)
def mul_add(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], y: Buffer[f32], z: Buffer[f32]):
    i = global_id()
    y[i] = a[i] * b[i] + c[i]
    z[i] = a[i] + b[i] + c[i]


def _mul_add(a, b, c):
    n = len(a)
    y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
    mul_add.interpret(n, a=np.asarray(a, np.float32), b=np.asarray(b, np.float32),
                      c=np.asarray(c, np.float32), y=y, z=z)
    return y, z


def test_no_fma_contraction_explicit():
    a = b = np.float32(1 + 2.0 ** -12)
    # a*b = 1 + 2^-11 + 2^-24 exactly; one rounding gives 1 + 2^-11 (tie to even)
    c = -np.float32(a * b)
    y, _ = _mul_add([a], [b], [c])
    fused = np.float64(a) * np.float64(b) + np.float64(c)   # exact here: 2^-24
    assert fused == 2.0 ** -24
    assert_same_f32(y, [0.0], "a*b+c with two roundings")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(finite_f32, finite_f32), min_size=1, max_size=30))
def test_no_fma_contraction_property(pairs):
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    with np.errstate(all="ignore"):
        prod = a * b                                   # rounded product
        c = -prod
        err = a.astype(np.float64) * b.astype(np.float64) - prod.astype(np.float64)
    y, _ = _mul_add(a, b, c)
    ok = np.isfinite(prod)
    # two roundings: round(a*b) + -round(a*b) = +0 exactly; a fused a*b+c would give
    # the product's rounding error (nonzero whenever the product is inexact)
    assert np.array_equal(bits_of(y[ok]), np.zeros(int(ok.sum()), np.uint32)), (a, b, y, err)
    # where the product overflowed, inf + -inf is NaN in both cases
    assert np.all(np.isnan(y[~ok]))


@FAST
@given(st.lists(st.tuples(finite_f32, finite_f32, finite_f32), min_size=1, max_size=20))
@example([(1e8, -1e8, 1.0)])
def test_program_order_no_reassociation(triples):
    a, b, c = (np.array(col, np.float32) for col in zip(*triples))
    y, z = _mul_add(a, b, c)
    with np.errstate(all="ignore"):
        want_y = [np.float32(np.float32(x) * np.float32(u)) + np.float32(v) for x, u, v in zip(a, b, c)]
        want_z = [np.float32(np.float32(x) + np.float32(u)) + np.float32(v) for x, u, v in zip(a, b, c)]
    assert_same_f32(y, np.array(want_y, np.float32), "a*b+c")
    assert_same_f32(z, np.array(want_z, np.float32), "(a+b)+c")


def test_left_to_right_differs_from_reassociated():
    _, z = _mul_add([1e8], [-1e8], [1.0])
    assert_same_f32(z, [1.0], "(1e8 + -1e8) + 1")     # 1e8 + (-1e8 + 1) would be 0


# ================================================================== 4. integers

@kernel(block=8)
def iarith(a: Buffer[i32], b: Buffer[i32], add: Buffer[i32], sub: Buffer[i32], mul: Buffer[i32],
           neg: Buffer[i32], q: Buffer[i32], r: Buffer[i32], ab: Buffer[i32]):
    i = global_id()
    x = a[i]
    y = b[i]
    add[i] = x + y
    sub[i] = x - y
    mul[i] = x * y
    neg[i] = -x
    q[i] = x // y if y != 0 else 0
    r[i] = x % y if y != 0 else 0
    ab[i] = abs(x)


@kernel(block=8)
def uarith(a: Buffer[u32], b: Buffer[u32], add: Buffer[u32], sub: Buffer[u32], mul: Buffer[u32],
           neg: Buffer[u32], q: Buffer[u32], r: Buffer[u32], ab: Buffer[u32]):
    i = global_id()
    x = a[i]
    y = b[i]
    add[i] = x + y
    sub[i] = x - y
    mul[i] = x * y
    neg[i] = -x
    q[i] = x // y if y != 0 else 0
    r[i] = x % y if y != 0 else 0
    ab[i] = abs(x)


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


def _run_arith(kfn, dt, a, b):
    n = len(a)
    outs = {k: np.zeros(n, dt) for k in ("add", "sub", "mul", "neg", "q", "r", "ab")}
    kfn.interpret(n, a=np.array(a, dt), b=np.array(b, dt), **outs)
    return {k: v.tolist() for k, v in outs.items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(i32s, i32s), min_size=1, max_size=30))
@example([(I32_MIN, -1), (-7, 2), (7, -2), (-7, -2), (I32_MAX, I32_MAX), (I32_MIN, I32_MIN), (5, 0)])
def test_i32_wraparound_and_c_division(pairs):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    out = _run_arith(iarith, np.int32, a, b)
    assert out["add"] == [wrap_i32(x + y) for x, y in pairs]
    assert out["sub"] == [wrap_i32(x - y) for x, y in pairs]
    assert out["mul"] == [wrap_i32(x * y) for x, y in pairs]
    assert out["neg"] == [wrap_i32(-x) for x in a]
    assert out["ab"] == [wrap_i32(abs(x)) for x in a]          # abs(INT_MIN) wraps to INT_MIN
    assert out["q"] == [wrap_i32(c_div(x, y)) if y else 0 for x, y in pairs]
    assert out["r"] == [wrap_i32(c_mod(x, y)) if y else 0 for x, y in pairs]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(u32s, u32s), min_size=1, max_size=30))
@example([(0, 1), (1, U32_MAX), (U32_MAX, U32_MAX), (2 ** 31, 2), (7, 0)])
def test_u32_wraparound_and_division(pairs):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    out = _run_arith(uarith, np.uint32, a, b)
    assert out["add"] == [wrap_u32(x + y) for x, y in pairs]
    assert out["sub"] == [wrap_u32(x - y) for x, y in pairs]
    assert out["mul"] == [wrap_u32(x * y) for x, y in pairs]
    assert out["neg"] == [wrap_u32(-x) for x in a]
    assert out["ab"] == a
    assert out["q"] == [x // y if y else 0 for x, y in pairs]
    assert out["r"] == [x % y if y else 0 for x, y in pairs]


def test_c_division_explicit():
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (I32_MIN, -1), (I32_MIN, 1), (I32_MIN, 2),
             (-1, I32_MIN), (0, -5)]
    out = _run_arith(iarith, np.int32, [p[0] for p in pairs], [p[1] for p in pairs])
    assert out["q"] == [3, -3, -3, 3, I32_MIN, I32_MIN, -(2 ** 30), 0, 0]
    assert out["r"] == [1, -1, 1, -1, 0, 0, 0, -1, 0]


@kernel(block=4)
def divide(a: Buffer[i32], b: Buffer[i32], q: Buffer[i32]):
    i = global_id()
    q[i] = a[i] // b[i]


@kernel(block=4)
def remainder_u(a: Buffer[u32], b: Buffer[u32], q: Buffer[u32]):
    i = global_id()
    q[i] = a[i] % b[i]


@FAST
@given(st.integers(1, 20).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_division_by_zero_is_an_error_naming_kernel_line_thread(nz):
    n, z = nz
    b = np.arange(1, n + 1, dtype=np.int32)
    b[z:] = 0                         # threads z.. divide by zero; z is the first
    with pytest.raises(KernelRuntimeError) as ei:
        divide.interpret(n, a=np.ones(n, np.int32), b=b, q=np.zeros(n, np.int32))
    msg = str(ei.value)
    assert "divide" in msg and "q[i] = a[i] // b[i]" in msg and "division by zero" in msg
    assert re.search(rf"thread {z}\b", msg), msg
    with pytest.raises(KernelRuntimeError, match=r"remainder_u.*q\[i\] = a\[i\] % b\[i\].*by zero"):
        remainder_u.interpret(n, a=np.ones(n, np.uint32), b=b.view(np.uint32), q=np.zeros(n, np.uint32))


@kernel(block=8)
def shifts_i(a: Buffer[i32], s: Buffer[i32], l: Buffer[i32], r: Buffer[i32]):
    i = global_id()
    l[i] = a[i] << s[i]
    r[i] = a[i] >> s[i]


@kernel(block=8)
def shifts_u(a: Buffer[u32], s: Buffer[u32], l: Buffer[u32], r: Buffer[u32]):
    i = global_id()
    l[i] = a[i] << s[i]
    r[i] = a[i] >> s[i]


@FAST
@given(st.lists(st.tuples(i32s, st.integers(0, 31)), min_size=1, max_size=30),
       st.lists(st.tuples(u32s, st.integers(0, 31)), min_size=1, max_size=30))
def test_shifts_in_range(pi, pu):
    a, s = np.array([p[0] for p in pi], np.int32), np.array([p[1] for p in pi], np.int32)
    l, r = np.zeros_like(a), np.zeros_like(a)
    shifts_i.interpret(len(a), a=a, s=s, l=l, r=r)
    assert l.tolist() == [wrap_i32(x << k) for x, k in pi]
    assert r.tolist() == [x >> k for x, k in pi]                 # arithmetic (Python >> floors)
    a, s = np.array([p[0] for p in pu], np.uint32), np.array([p[1] for p in pu], np.uint32)
    l, r = np.zeros_like(a), np.zeros_like(a)
    shifts_u.interpret(len(a), a=a, s=s, l=l, r=r)
    assert l.tolist() == [wrap_u32(x << k) for x, k in pu]
    assert r.tolist() == [x >> k for x, k in pu]                 # logical


def test_shift_explicit():
    a = np.array([-8, -1, 1, I32_MIN], np.int32)
    s = np.array([1, 31, 31, 31], np.int32)
    l, r = np.zeros_like(a), np.zeros_like(a)
    shifts_i.interpret(4, a=a, s=s, l=l, r=r)
    assert r.tolist() == [-4, -1, 0, -1] and l.tolist() == [-16, I32_MIN, I32_MIN, 0]
    a = np.array([0xFFFFFFF0, 2 ** 31], np.uint32)
    s = np.array([4, 31], np.uint32)
    l, r = np.zeros_like(a), np.zeros_like(a)
    shifts_u.interpret(2, a=a, s=s, l=l, r=r)
    assert r.tolist() == [0x0FFFFFFF, 1]


@FAST
@given(st.one_of(st.integers(32, I32_MAX), st.integers(I32_MIN, -1), st.sampled_from([32, -1])),
       st.integers(1, 12), st.data())
def test_shift_out_of_range_is_an_error(amount, n, data):
    bad = data.draw(st.integers(0, n - 1))
    s = np.full(n, 3, np.int32)
    s[bad] = amount
    for kfn, dt in ((shifts_i, np.int32), (shifts_u, np.uint32)):
        if dt is np.uint32 and amount < 0:
            continue                      # a u32 amount cannot be negative
        with pytest.raises(KernelRuntimeError) as ei:
            kfn.interpret(n, a=np.ones(n, dt), s=s.astype(dt), l=np.zeros(n, dt), r=np.zeros(n, dt))
        msg = str(ei.value)
        assert "shift" in msg and kfn.__name__ in msg and f"thread {bad}" in msg, msg


# ------------------------------------------------------------------ conversions

@kernel(block=8)
def conv(x: Buffer[f32], a: Buffer[i32], u: Buffer[u32], fi: Buffer[i32], fu: Buffer[u32],
         i_f: Buffer[f32], u_f: Buffer[f32], iu: Buffer[u32], ui: Buffer[i32],
         bfi: Buffer[i32], bfu: Buffer[u32], bif: Buffer[f32], buf_: Buffer[f32]):
    i = global_id()
    fi[i] = i32(x[i])
    fu[i] = u32(x[i])
    i_f[i] = f32(a[i])
    u_f[i] = f32(u[i])
    iu[i] = u32(a[i])
    ui[i] = i32(u[i])
    bfi[i] = bitcast(x[i], i32)
    bfu[i] = bitcast(x[i], u32)
    bif[i] = bitcast(a[i], f32)
    buf_[i] = bitcast(u[i], f32)


def _conv(x, a, u):
    n = len(x)
    outs = dict(fi=np.zeros(n, np.int32), fu=np.zeros(n, np.uint32), i_f=np.zeros(n, np.float32),
                u_f=np.zeros(n, np.float32), iu=np.zeros(n, np.uint32), ui=np.zeros(n, np.int32),
                bfi=np.zeros(n, np.int32), bfu=np.zeros(n, np.uint32), bif=np.zeros(n, np.float32),
                buf_=np.zeros(n, np.float32))
    conv.interpret(n, x=np.asarray(x, np.float32), a=np.asarray(a, np.int32),
                   u=np.asarray(u, np.uint32), **outs)
    return outs


def rne_to_f32(v: int) -> float:
    """Integer -> nearest float32 (ties to even), by hand: keep 24 significant bits."""
    m = abs(v)
    shift = max(0, m.bit_length() - 24)
    q, rem = divmod(m, 1 << shift)
    half = (1 << shift) >> 1
    if shift and (rem > half or (rem == half and q & 1)):
        q += 1
    r = float(q << shift)
    return -r if v < 0 else r


def f32_to_int(x: float, lo: int, hi: int) -> int:
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(hi, max(lo, math.trunc(x)))


def test_int_to_f32_rounds_to_nearest_even_explicit():
    a = [16777217, 16777219, -16777217, 16777218, I32_MAX, I32_MIN, 33554435, 0, -1]
    u = [16777217, 16777219, U32_MAX, 2 ** 31 + 1, 2 ** 32 - 2 ** 8, 2 ** 32 - 2 ** 7, 1, 0, 3]
    out = _conv(np.zeros(len(a)), a, u)
    assert out["i_f"].tolist() == [16777216.0, 16777220.0, -16777216.0, 16777218.0, 2.0 ** 31,
                                   -(2.0 ** 31), 33554436.0, 0.0, -1.0]
    assert out["u_f"].tolist() == [16777216.0, 16777220.0, 2.0 ** 32, 2.0 ** 31, 2.0 ** 32 - 2 ** 8,
                                   2.0 ** 32, 1.0, 0.0, 3.0]


def test_f32_to_int_truncates_and_saturates_explicit():
    x = [1.9, -1.9, -0.5, -0.0, 2.0 ** 31, -(2.0 ** 31), 3e9, -3e9, 5e9, math.inf, -math.inf,
         math.nan, MIN_SUB, 2.0 ** 32, 4294967040.0]
    out = _conv(x, np.zeros(len(x)), np.zeros(len(x)))
    assert out["fi"].tolist() == [1, -1, 0, 0, I32_MAX, I32_MIN, I32_MAX, I32_MIN, I32_MAX, I32_MAX,
                                  I32_MIN, 0, 0, I32_MAX, I32_MAX]
    assert out["fu"].tolist() == [1, 0, 0, 0, 2 ** 31, 0, 3000000000, 0, U32_MAX, U32_MAX, 0, 0, 0,
                                  U32_MAX, 4294967040]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(
    f32_array(n), st.lists(i32s, min_size=n, max_size=n), st.lists(u32s, min_size=n, max_size=n))))
def test_conversions_property(xau):
    x, a, u = xau
    out = _conv(x, a, u)
    xs = [float(v) for v in x]
    assert out["fi"].tolist() == [f32_to_int(v, I32_MIN, I32_MAX) for v in xs]
    assert out["fu"].tolist() == [f32_to_int(v, 0, U32_MAX) for v in xs]
    assert out["i_f"].tolist() == [rne_to_f32(v) for v in a]
    assert out["u_f"].tolist() == [rne_to_f32(v) for v in u]
    assert out["iu"].tolist() == [wrap_u32(v) for v in a]                # same bits
    assert out["ui"].tolist() == [wrap_i32(v) for v in u]
    xb = bits_of(x)
    assert np.array_equal(out["bfu"], xb)                                  # every bit, NaN payloads too
    assert np.array_equal(out["bfi"], xb.view(np.int32))
    assert np.array_equal(bits_of(out["bif"]), np.array(a, np.int32).view(np.uint32))
    assert np.array_equal(bits_of(out["buf_"]), np.array(u, np.uint32))


def test_convert_table_matches_model():
    """semantics.convert (also used by the constant folder) on the same models."""
    x = np.array(bits_of(np.array(SPECIAL_F32, np.float32)), np.uint32).view(np.float32)
    got = semantics.convert(x, DType.F32, DType.I32)
    assert got.tolist() == [f32_to_int(float(v), I32_MIN, I32_MAX) for v in x]
    got = semantics.convert(x, DType.F32, DType.U32)
    assert got.tolist() == [f32_to_int(float(v), 0, U32_MAX) for v in x]
    ints = np.array(SPECIAL_I32, np.int32)
    assert semantics.convert(ints, DType.I32, DType.F32).tolist() == [rne_to_f32(int(v)) for v in ints]
    # scalar (constant-folding) path gives the same as the array path
    for v in SPECIAL_I32:
        assert semantics.convert_scalar(v, DType.I32, DType.F32) == rne_to_f32(v)

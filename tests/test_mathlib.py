"""The math library: documented error bounds, special values, template structure.

Errors are measured in float32 ulps against a float64 reference: the ulp is the
float32 spacing at the float32 rounding of the reference (the smallest
subnormal for a reference of 0). Each function is run through the reference
interpreter on a dense deterministic sample of its stated range.
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from cohort.refimpl import mathlib
from cohort.refimpl.interpreter import evaluate
from cohort.refimpl.ir import Op, walk_expr

F32_MAX = float(np.finfo(np.float32).max)
TINY = float(np.finfo(np.float32).smallest_subnormal)
NAMES = sorted(mathlib.FUNCTIONS)


def run(name: str, x) -> np.ndarray:
    return evaluate(mathlib.template(name), x=np.asarray(x, np.float32))


def _sigmoid64(x):
    e = np.exp(-np.abs(x))              # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_erf64 = np.frompyfunc(math.erf, 1, 1)
REFERENCE = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "erf": lambda x: _erf64(x).astype(np.float64),
    "sigmoid": _sigmoid64,
}


def ulp_error(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|y - ref| in ulps of float32(ref); 0 where y is exactly float32(ref) (infinities
    included) or both are NaN, inf where only one of them is NaN."""
    with np.errstate(all="ignore"):
        r32 = ref.astype(np.float32)
        mag = np.minimum(np.abs(r32.astype(np.float64)), F32_MAX)     # a rounded-to-inf ref: ulp of max
        _, e = np.frexp(np.maximum(mag, 2.0 ** -126))                # subnormals: ulp of the smallest normal
        ulp = np.ldexp(1.0, e - 24)
        err = np.abs(y.astype(np.float64) - ref) / ulp
        exact = (y == r32) | (np.isnan(y) & np.isnan(ref))
        return np.where(exact, 0.0, np.where(np.isnan(err), np.inf, err))


def measure(name: str, x) -> np.ndarray:
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        return ulp_error(run(name, x), REFERENCE[name](x.astype(np.float64)))


# ---------------------------------------------------------------- samples

# Where each function changes regime: dense uniform sampling here, in value.
CORE = {"exp": (-104.0, 89.0), "log": (0.25, 4.0), "erf": (-4.5, 4.5), "tanh": (-10.0, 10.0),
        "sigmoid": (-110.0, 20.0), "sin": (-20.0, 20.0), "cos": (-20.0, 20.0)}
# Internal boundaries, sampled with their neighbouring floats.
EDGES = {
    "exp": [-104.0, -103.97, -87.34, -0.3466, 0.3466, 88.72283, 88.75, 89.0],
    "log": [2.0 ** -126, 0.70710677, 1.0, 1.41421356, 2.0],
    "erf": [1.0, 2.46, 3.9, 3.92],
    "tanh": [0.75, 9.0, 10.0],
    "sigmoid": [-104.0, -87.3, 0.0, 17.0],
    "sin": [0.78539816, 2.0 ** -12, 252.92255, 12000.0, 7.729179e28, 21999384576.0, 2.0 ** 24, 3e38],
    "cos": [0.78539816, 1.5707964, 252.92255, 12000.0, 7.729179e28, 21999384576.0, 2.0 ** 24, 3e38],
}
N = 150_000


def sample(name: str) -> np.ndarray:
    f = mathlib.FUNCTIONS[name]
    lo, hi = max(f.lo, -F32_MAX), min(f.hi, F32_MAX)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    # uniform in bit pattern (every binade equally, subnormals included), both signs
    b = rng.integers(0, 0x7F800000, 4 * N, dtype=np.uint32).view(np.float32)
    b = np.where(rng.random(4 * N) < 0.5, -b, b)
    b = b[(b >= lo) & (b <= hi)][:N]
    # uniform in value: on the core range and on the stated one
    u1 = rng.uniform(max(lo, CORE[name][0]), min(hi, CORE[name][1]), N)
    u2 = rng.uniform(lo, hi, N // 4) if hi - lo < 1e6 else np.empty(0)
    # the multiples of pi/2 (zeros of sin and cos) up to 12000, rounded to float32
    if name in ("sin", "cos"):
        u2 = np.concatenate([u2, np.arange(1, int(12000 / (np.pi / 2))) * (np.pi / 2)])
    edges = np.array(EDGES[name] + [lo, hi, 1.0, 2.0 ** -20], np.float32)
    edges = np.concatenate([edges, -edges])
    near = edges[:, None].view(np.int32) + np.arange(-64, 65, dtype=np.int32)
    x = np.concatenate([b, u1.astype(np.float32), u2.astype(np.float32), near.ravel().view(np.float32)])
    return x[np.isfinite(x) & (x >= lo) & (x <= hi)]


@pytest.fixture(scope="module")
def errors():
    return {name: float(measure(name, sample(name)).max()) for name in NAMES}


# ---------------------------------------------------------------- accuracy

@pytest.mark.parametrize("name", NAMES)
def test_error_within_documented_bound(name, errors):
    f = mathlib.FUNCTIONS[name]
    assert errors[name] <= f.max_ulp, f"{name}: {errors[name]:.3f} ulp > documented {f.max_ulp}"


@pytest.mark.parametrize("name", NAMES)
def test_bound_is_tight(name, errors):
    """The bound is not absurdly loose, and the recorded measurement is consistent."""
    f = mathlib.FUNCTIONS[name]
    assert f.max_ulp <= 2.0
    assert f.measured <= f.max_ulp
    assert errors[name] <= f.measured + 1e-9, f"{name}: {errors[name]:.3f} > recorded {f.measured}"
    assert f.max_ulp <= errors[name] + 1.0


def test_ulp_error_measure():
    ref = np.array([1.0, 1.0 + 2.0 ** -23, 0.0, TINY, np.inf, np.nan, 3.5e38, 2.0 ** -24])
    y = np.array([1.0, 1.0, TINY, 0.0, np.inf, np.nan, np.inf, 2.0 ** -24 * (1 + 2.0 ** -23)], np.float32)
    assert np.allclose(ulp_error(y, ref), [0, 1, 1, 1, 0, 0, 0, 1])
    assert ulp_error(np.float32([np.nan, 1.0]), np.array([1.0, np.nan])).tolist() == [np.inf, np.inf]


# ---------------------------------------------------------------- special values

def same(y, want) -> bool:
    """Bitwise equality except that any NaN matches any NaN."""
    y, want = np.asarray(y, np.float32), np.asarray(want, np.float32)
    return bool(np.all((y.view(np.int32) == want.view(np.int32)) | (np.isnan(y) & np.isnan(want))))


INF, NAN = np.inf, np.nan
SPECIAL = {
    "exp": [(NAN, NAN), (INF, INF), (-INF, 0.0), (0.0, 1.0), (-0.0, 1.0), (89.0, INF), (1e30, INF),
            (F32_MAX, INF), (-110.0, 0.0), (-1e30, 0.0), (-F32_MAX, 0.0), (88.72283935546875, INF)],
    "log": [(NAN, NAN), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-TINY, NAN), (-INF, NAN), (INF, INF),
            (1.0, 0.0)],
    "erf": [(NAN, NAN), (INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (4.0, 1.0), (-1e30, -1.0),
            (TINY, TINY), (-TINY, -TINY)],
    "tanh": [(NAN, NAN), (INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (10.0, 1.0), (-1e30, -1.0),
             (TINY, TINY), (-TINY, -TINY)],
    "sigmoid": [(NAN, NAN), (-INF, 0.0), (INF, 1.0), (0.0, 0.5), (-0.0, 0.5), (-1e30, 0.0), (1e30, 1.0),
                (-F32_MAX, 0.0), (F32_MAX, 1.0), (20.0, 1.0)],
    "sin": [(NAN, NAN), (INF, NAN), (-INF, NAN), (0.0, 0.0), (-0.0, -0.0), (TINY, TINY), (-TINY, -TINY),
            (1e-30, 1e-30)],
    "cos": [(NAN, NAN), (INF, NAN), (-INF, NAN), (0.0, 1.0), (-0.0, 1.0), (TINY, 1.0), (1e-5, 1.0)],
}


@pytest.mark.parametrize("name", NAMES)
def test_special_values(name):
    xs, want = zip(*SPECIAL[name])
    y = run(name, np.array(xs, np.float32))
    for x, got, w in zip(xs, y, want):
        assert same(got, w), f"{name}({x!r}) = {got!r}, want {w!r}"


def test_negative_nan_input():
    x = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345], np.uint32).view(np.float32)
    for name in NAMES:
        assert np.all(np.isnan(run(name, x))), name


@pytest.mark.parametrize("name", ["erf", "tanh", "sin"])
def test_odd_functions(name):
    """Exactly odd (sign-symmetric) everywhere, subnormals and -0 included."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 0x7F800000, 50_000, dtype=np.uint32).view(np.float32)
    x = x[np.abs(x) <= mathlib.FUNCTIONS[name].hi]
    assert same(run(name, -x), -run(name, x))


def test_cos_even_and_sigmoid_symmetric():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 0x7F800000, 50_000, dtype=np.uint32).view(np.float32)
    assert same(run("cos", -x), run("cos", x))
    x = rng.uniform(-30, 30, 50_000).astype(np.float32)
    s = run("sigmoid", x).astype(np.float64) + run("sigmoid", -x)
    assert np.all(np.abs(s - 1) <= 2.0 ** -22)


def test_subnormal_inputs():
    x = (np.arange(1, 2000, 7, dtype=np.int32) * 4099).view(np.float32)     # subnormals
    assert np.all(x < 2.0 ** -126)
    for name in ("erf", "tanh", "sin"):
        y = run(name, np.concatenate([x, -x]))
        ref = REFERENCE[name](np.concatenate([x, -x]).astype(np.float64))
        assert ulp_error(y, ref).max() <= mathlib.FUNCTIONS[name].max_ulp, name
        assert np.all(np.signbit(y) == np.signbit(np.concatenate([x, -x])))
    assert measure("log", x).max() <= mathlib.FUNCTIONS["log"].max_ulp
    assert same(run("exp", x), 1.0) and same(run("cos", x), 1.0)


def test_exp_subnormal_outputs():
    x = np.linspace(-103.97, -87.34, 20_001, dtype=np.float32)
    y = run("exp", x)
    assert np.all((y > 0) & (y < 2.0 ** -126))
    assert measure("exp", x).max() <= mathlib.FUNCTIONS["exp"].max_ulp


def test_trig_huge_arguments():
    """The reduction is exact at every magnitude: the float32 closest to a multiple of
    pi/2 (16367173 * 2**72, 2**-29.2 away) and random inputs of every binade up to 2**128."""
    rng = np.random.default_rng(3)
    x = rng.integers(0x46000000, 0x7F800000, 200_000, dtype=np.uint32).view(np.float32)  # |x| >= 8192
    worst = np.float32(16367173 * 2.0 ** 72)
    x = np.concatenate([x, -x, [worst, -worst, worst * 2, np.float32(21999384576.0)]]).astype(np.float32)
    for name in ("sin", "cos"):
        err = measure(name, x)
        assert err.max() <= mathlib.FUNCTIONS[name].max_ulp, (name, x[np.argmax(err)], err.max())
    # at the worst case one of sin, cos is the tiny remainder itself (~1.6e-9), to the ulp
    tiny = min(abs(float(run(name, np.float32([worst]))[0])) for name in ("sin", "cos"))
    assert 1e-9 < tiny < 2e-9


def test_two_over_pi_words():
    """The constant words of 2/pi, recomputed from pi (Machin's formula, integers only)."""
    from cohort.refimpl.mathlib_trig import TWO_OVER_PI_WORDS

    def atan_inv(n, bits):
        x = (1 << bits) // n
        s, k, sign = x, 1, -1
        while x:
            x //= n * n
            k += 2
            s += sign * (x // k)
            sign = -sign
        return s
    bits = 400
    pi = (16 * atan_inv(5, bits + 32) - 4 * atan_inv(239, bits + 32)) >> 32     # pi * 2**bits
    two_over_pi = (1 << (2 * bits + 1)) // pi
    words = tuple((two_over_pi >> (bits - 32 * (j + 1))) & 0xFFFFFFFF for j in range(len(TWO_OVER_PI_WORDS)))
    assert words == TWO_OVER_PI_WORDS


# ---------------------------------------------------------------- structure

ALLOWED = {Op.CONST, Op.ARG, Op.NEG, Op.ABS, Op.SQRT, Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX,
           Op.FMA, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR, Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE,
           Op.SELECT, Op.CAST, Op.BITCAST}


@pytest.mark.parametrize("name", NAMES)
def test_template_structure(name):
    """Only ALU ops, selects and conversions on f32/i32/u32/bool: no MATH, memory, variables
    or parameters; the only input is the placeholder ARG 0; no integer division, and shift
    amounts that cannot leave 0..31 (constants, or masked with & c, c <= 31); the recorded
    op count is current."""
    nodes = list(walk_expr(mathlib.template(name)))
    ops = {n.op for n in nodes}
    assert ops <= ALLOWED, ops - ALLOWED
    assert {n.arg for n in nodes if n.op is Op.ARG} == {0}
    for n in nodes:
        assert n.dtype.value in ("f32", "i32", "u32", "bool"), n
        if n.op in (Op.DIV, Op.MOD):
            assert n.dtype.value == "f32", n
        if n.op in (Op.SHL, Op.SHR):   # shift amounts that are never out of range
            amount = n.src[1]
            if amount.op is Op.XOR:    # (d ^ 31) with d in 0..31
                assert amount.src[1].op is Op.CONST and amount.src[1].arg == 31, n
                amount = amount.src[0]
            if amount.op is Op.AND:
                assert amount.src[1].op is Op.CONST and 0 <= amount.src[1].arg < 32, n
            else:
                assert amount.op is Op.CONST and 0 <= amount.arg < 32, n
    assert mathlib.FUNCTIONS[name].ops == sum(n.op not in (Op.CONST, Op.ARG) for n in nodes)


# ---------------------------------------------------------------- slow: provenance, exhaustive

@pytest.mark.slow
def test_fit_regenerates_the_coefficients():
    from cohort.refimpl import mathlib_fit, mathlib_trig
    tables = {"exp": mathlib.EXP_P, "log": mathlib.LOG_R, "erf_small": mathlib._ERF_SMALL,
              "erf_big": mathlib._ERF_BIG, "tanh": mathlib._TANH_P,
              "sin": mathlib_trig._SIN_S, "cos": mathlib_trig._COS_C}
    assert set(tables) == set(mathlib_fit.FITS)
    for fit, table in tables.items():
        coeffs, _ = mathlib_fit.coefficients(fit)
        assert np.float32(coeffs).tolist() == np.float32(table).tolist(), fit


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_exhaustive(name):
    """Reproduces `measured` over all 2**32 inputs through the packet build
    (benchmarks/mathlib_accuracy.py; 5 to 10 minutes per function)."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parents[1] / "benchmarks" / "mathlib_accuracy.py"
    spec = importlib.util.spec_from_file_location("mathlib_accuracy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.measure(name, "packet", 1 << 22, 1, 8, log=lambda s: None)
    assert r["special_mismatches"] == 0
    assert abs(r["max_ulp"] - mathlib.FUNCTIONS[name].measured) < 1e-4, r


def test_template_is_cached_and_shared():
    assert mathlib.template("exp") is mathlib.template("exp")


# ---------------------------------------------------------------- every variant, both fma lowerings

def _all_math_kernel():
    from cohort.refimpl import ir
    from cohort.refimpl.ir import Kernel, Param, ParamKind, Store
    gid, F = ir.builtin(Op.GLOBAL_ID), ir.DType.F32
    n = ir.builtin(Op.NUM_THREADS)
    x = ir.load("x", gid, F)
    body = tuple(Store("y", gid + n * j, ir.math(name, x)) for j, name in enumerate(NAMES))
    return Kernel("all_math", (Param("x", ParamKind.BUFFER, F), Param("y", ParamKind.BUFFER, F)), body, 32)


@pytest.mark.parametrize("mode", ["hardware", "software"])
def test_every_variant_gives_the_interpreters_bits(mode, monkeypatch):
    """interpreter, whole and packet at 4, 8 and 16 lanes agree bit for bit on every function,
    with llvm.fma and with the software fma: outputs do not depend on the host's FMA."""
    from cohort.backend.compiler import compile_kernel
    from cohort.knobs import FMA
    from cohort.refimpl.interpreter import interpret
    monkeypatch.setenv(FMA.name, mode)
    rng = np.random.default_rng(11)
    x = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, np.float32([16367173 * 2.0 ** 72, 252.89821, -0.0, 1e-45, -103.9, 88.72283, 3.92]),
                        rng.uniform(-12, 12, 1000).astype(np.float32)])
    n = len(x)
    k = _all_math_kernel()
    want = interpret(k, n, {"x": x, "y": np.zeros(n * len(NAMES), np.float32)})["y"]
    for variant in ("whole", "packet,lanes=4", "packet", "packet,lanes=16"):
        y = np.zeros(n * len(NAMES), np.float32)
        compile_kernel(k, None, variant).launch(n, {"x": x, "y": y})
        for j, name in enumerate(NAMES):
            part = slice(j * n, (j + 1) * n)
            assert same(y[part], want[part]), (variant, mode, name)

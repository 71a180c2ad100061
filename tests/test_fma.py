"""fma(a, b, c): a*b + c rounded once to float32, proven against exact rational arithmetic.

The reference rounds the exact `Fraction` a*b + c to float32 by hand (nearest, ties
to even, subnormals, overflow to inf) after IEEE's special cases. The cases are the
hard ones: exact ties in the normal and the subnormal range (built so), results at
the overflow threshold, cancellation down to the product's low bits, exact zeros
of either sign, infinities and NaN. Then every backend form (whole, packet at 4, 8
and 16 lanes; llvm.fma and the software sequence) must give the interpreter's bits.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohort import Buffer, f32, fma, global_id, i32, kernel
from cohort.backend.codegen import fma_lowering
from cohort.backend.compiler import compile_kernel
from cohort.knobs import FMA
from cohort.refimpl import ir
from cohort.refimpl.errors import KernelError
from cohort.refimpl.semantics import fma as fma_np

FMA_ENV = FMA.name

INF = math.inf
F32_MAX = float(np.finfo(np.float32).max)


def round_f32(x: Fraction) -> float:
    """The float32 nearest to x (ties to even), subnormals included; inf past the top."""
    if x == 0:
        return 0.0
    m = abs(x)
    e = m.numerator.bit_length() - m.denominator.bit_length()     # 2**e <= m < 2**(e+2)
    if Fraction(2) ** e > m:
        e -= 1
    if Fraction(2) ** (e + 1) <= m:
        e += 1
    q = Fraction(2) ** (max(e, -126) - 23)                           # spacing of float32 there
    n, rem = divmod(m / q, 1)
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = n * q
    out = INF if r >= 2 ** 128 else float(r)
    return -out if x < 0 else out


def fma_exact(a: float, b: float, c: float) -> float:
    """IEEE 754 fusedMultiplyAdd in float32, round to nearest even, from exact arithmetic."""
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    psign = math.copysign(1.0, a) * math.copysign(1.0, b)
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan                                          # inf * 0
        p = math.copysign(INF, psign)
        return math.nan if math.isinf(c) and c != p else p          # inf - inf
    if math.isinf(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # an exact zero sum is +0, except (-0) + (-0): the product is a zero of sign psign
        both_negative_zeros = a * b == 0 and psign < 0 and c == 0 and math.copysign(1.0, c) < 0
        return -0.0 if both_negative_zeros else 0.0
    return round_f32(exact)


def same_bits(y, want) -> np.ndarray:
    y, want = np.asarray(y, np.float32), np.asarray(want, np.float32)
    return (y.view(np.int32) == want.view(np.int32)) | (np.isnan(y) & np.isnan(want))


def f32v(x) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(x))


# ---------------------------------------------------------------- hard cases

def ties(rng, n: int, subnormal: bool) -> list:
    """a*b + c exactly halfway between two float32: an odd integer of 25 bits times 2**s
    (normal results), or an odd integer times 2**-150 below 2**-126 (subnormal results)."""
    out = []
    while len(out) < n:
        ma = int(rng.integers(1 << 12, 1 << 13)) | 1
        mb = int(rng.integers(1 << 11, 1 << 12)) | 1
        p = ma * mb                                                   # odd
        lo, hi = ((1, (1 << 24) - 1) if subnormal else ((1 << 24) + 1, (1 << 25) - 1))
        t = int(rng.integers(lo - p, hi - p + 1)) & ~1                # even, so p + t is odd
        if not lo <= p + t <= hi or abs(t) >= 1 << 25:
            continue
        if subnormal:
            ea = int(rng.integers(-100, -50))
            s = -150
        else:
            s = int(rng.integers(-149, 102))
            ea = int(rng.integers(max(s - 115, -149), min(s + 149, 114) + 1))   # a, b both floats
        eb = s - ea
        a, b, c = ma * 2.0 ** ea, mb * 2.0 ** eb, t * 2.0 ** s
        sign = rng.choice([-1.0, 1.0])
        out.append((sign * a, b, sign * c) if rng.random() < 0.5 else (b, sign * a, sign * c))
    return out


def near_ties(rng, n: int) -> list:
    """A tie (a*b of 25 significant bits, odd) plus a c far below it: float64 rounds the sum
    to the tie itself, and rounding that to float32 (ties to even) is then wrong half the time."""
    out = []
    while len(out) < n:
        ma = int(rng.integers(1 << 12, 1 << 13)) | 1
        mb = int(rng.integers(1 << 11, 1 << 12)) | 1
        if ma * mb < 1 << 24:
            continue
        s = int(rng.integers(-60, 60))
        ea = int(rng.integers(s - 40, s + 40))
        c = float(rng.choice([-1.0, 1.0])) * 2.0 ** (s - int(rng.integers(30, 60)))
        out.append((ma * 2.0 ** ea, mb * 2.0 ** (s - ea), c))
    return out


def cancellations(rng, n: int) -> list:
    """c close to -a*b: the result is the product's low bits, or an exact zero."""
    out = []
    for _ in range(n):
        a = f32v(rng.uniform(1, 2) * 2.0 ** rng.integers(-70, 60))
        b = f32v(rng.uniform(1, 2) * 2.0 ** rng.integers(-70, 60))
        c0 = np.float32(-(a * b))
        c = float(np.nextafter(c0, np.float32(rng.choice([-INF, INF])))) if rng.random() < 0.5 else float(c0)
        out.append((a, b, c))
    # exact zeros of every sign combination, and products that are exact floats
    for a, b, c in [(2.0, 3.0, -6.0), (-2.0, 3.0, 6.0), (0.0, 5.0, -0.0), (-0.0, 5.0, -0.0),
                    (0.0, -5.0, 0.0), (-0.0, -5.0, -0.0), (0.0, 0.0, 0.0), (-0.0, 0.0, -0.0),
                    (1e-30, 1e-30, -0.0), (-1e-30, 1e-30, 0.0), (-1e-30, 1e-30, -0.0)]:
        out.append((f32v(a), f32v(b), f32v(c)))
    return out


def overflows(rng, n: int) -> list:
    """Results around the largest float32 and the threshold of rounding to inf."""
    top = 2.0 ** 128 - 2.0 ** 103                                     # ties from here go to inf
    out = []
    for _ in range(n):
        a = f32v(2.0 ** 64 * rng.uniform(1, 2))
        b = f32v(2.0 ** 63 * rng.uniform(1, 2))
        c = f32v(rng.choice([1.0, -1.0]) * rng.uniform(0, 2) * 2.0 ** rng.integers(100, 128))
        out.append((a, b, c))
    out += [(F32_MAX, 1.0, f32v(2.0 ** 103)), (F32_MAX, 1.0, f32v(2.0 ** 102)),
            (F32_MAX, -1.0, f32v(-(2.0 ** 103))), (f32v(2.0 ** 64), f32v(2.0 ** 64), -F32_MAX),
            (F32_MAX, 2.0, -F32_MAX), (F32_MAX, F32_MAX, -INF), (1.0, 1.0, top / 2 ** 26)]
    return out


def specials() -> list:
    vals = [0.0, -0.0, 1.0, -1.0, INF, -INF, math.nan, 1e-45, -1e-45, F32_MAX, 1.1754942e-38]
    return [(f32v(a), f32v(b), f32v(c)) for a in vals for b in vals for c in vals]


def hard_cases() -> np.ndarray:
    rng = np.random.default_rng(2024)
    cases = (ties(rng, 400, False) + ties(rng, 400, True) + near_ties(rng, 200) + cancellations(rng, 300)
             + overflows(rng, 200) + specials())
    bits = rng.integers(0, 1 << 32, (600, 3), dtype=np.uint64).astype(np.uint32).view(np.float32)
    cases += [tuple(map(float, row)) for row in bits]
    return np.array(cases, np.float32)


CASES = hard_cases()
WANT = np.array([fma_exact(*map(float, row)) for row in CASES], np.float32)


def test_the_hard_cases_are_hard():
    """The constructed ties are ties, subnormal and infinite results occur, and naive
    double rounding (float64 sum, then float32) gets some of them wrong."""
    a, b, c = (CASES[:, j].astype(np.float64) for j in range(3))
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    exact_ties = sum(1 for x, y, z in CASES[:800].astype(np.float64)
                     if (lambda e: e != 0 and (e / Fraction(2) ** -150) % 1 == 0
                         and _is_tie(e))(Fraction(x) * Fraction(y) + Fraction(z)))
    assert exact_ties == 800
    assert np.count_nonzero((WANT != 0) & (np.abs(WANT) < 2.0 ** -126)) >= 400
    assert np.count_nonzero(np.isinf(WANT) & finite) >= 5
    with np.errstate(all="ignore"):
        naive = (a * b + c).astype(np.float32)
    assert np.count_nonzero(~same_bits(naive, WANT)) >= 20


def _is_tie(e: Fraction) -> bool:
    r = round_f32(e)
    other = float(np.nextafter(np.float32(r), np.float32(INF if e > r else -INF)))
    return abs(Fraction(r) - e) == abs(Fraction(other) - e)


def test_interpreter_fma_is_exact_on_hard_cases():
    got = fma_np(CASES[:, 0], CASES[:, 1], CASES[:, 2])
    bad = np.flatnonzero(~same_bits(got, WANT))
    assert bad.size == 0, [(tuple(CASES[i]), got[i], WANT[i]) for i in bad[:5]]


def test_round_f32_agrees_with_numpy():
    """The hand-written rounding is NumPy's float64 -> float32 on values that are floats."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 1 << 63, 3000, dtype=np.uint64).view(np.float64)
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore"):
        want = x.astype(np.float32)
    got = np.array([round_f32(Fraction(float(v))) for v in x], np.float32)
    assert np.all(same_bits(got, want))


f32_any = st.integers(0, (1 << 32) - 1).map(lambda u: float(np.uint32(u).view(np.float32)))
f32_near = st.builds(lambda m, e: f32v(m * 2.0 ** e), st.integers(-(1 << 24), 1 << 24), st.integers(-160, 110))


@st.composite
def triples(draw):
    """Unstructured bit patterns, or operands of few significant bits at exponents that make
    the product and c overlap (cancellation, ties, subnormal and overflowing results)."""
    if draw(st.booleans()):
        return draw(f32_any), draw(f32_any), draw(f32_any)
    a, b = draw(f32_near), draw(f32_near)
    p = a * b
    if draw(st.booleans()) and p != 0 and math.isfinite(p):
        c = f32v(-p * draw(st.sampled_from([1.0, 1.0 + 2.0 ** -23, 1.0 - 2.0 ** -24, 0.5, 2.0])))
    else:
        c = draw(f32_near)
    return a, b, c


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(triples())
def test_interpreter_fma_matches_exact_arithmetic(t):
    a, b, c = (np.float32(v) for v in t)
    got = fma_np(a, b, c)
    assert same_bits(got, fma_exact(float(a), float(b), float(c))), (t, got)


def test_fma_on_scalars_and_broadcast():
    assert isinstance(fma_np(np.float32(2), np.float32(3), np.float32(1)), np.float32)
    y = fma_np(np.float32([1, 2, 3]), np.float32(2), np.float32(0.5))
    assert y.dtype == np.float32 and y.tolist() == [2.5, 4.5, 6.5]


# ---------------------------------------------------------------- backend and frontend

@kernel
def fma_kernel(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = fma(a[i], b[i], c[i])


@pytest.mark.parametrize("mode", ["hardware", "software"])
@pytest.mark.parametrize("variant", ["whole", "packet,lanes=4", "packet", "packet,lanes=16"])
def test_backend_fma_is_the_interpreters(variant, mode, monkeypatch):
    monkeypatch.setenv(FMA_ENV, mode)
    assert fma_lowering() == mode
    n = len(CASES)
    args = {"a": CASES[:, 0].copy(), "b": CASES[:, 1].copy(), "c": CASES[:, 2].copy()}
    ck = compile_kernel(fma_kernel.ir, None, variant)
    y = np.zeros(n, np.float32)
    ck.launch(n, {**args, "y": y})
    assert np.all(same_bits(y, WANT)), np.flatnonzero(~same_bits(y, WANT))[:5]
    assert ck.facts["scalar_libm_calls"] == 0 and ck.facts["direct_cfg"]
    if mode == "software":
        assert "llvm.fma" not in ck.llvm_ir and ck.facts["fma"] == 0
    else:
        assert "llvm.fma" in ck.llvm_ir


def test_fma_lowering_knob(monkeypatch):
    monkeypatch.setenv(FMA_ENV, "sometimes")
    with pytest.raises(ValueError, match="COHORT_FMA"):
        fma_lowering()
    monkeypatch.delenv(FMA_ENV)
    from cohort.backend import jit, target
    assert fma_lowering() == ("hardware" if jit.host()["fma"] else "software")
    assert fma_lowering() == ("hardware" if target.host().native_fma else "software")
    # the target being built for decides, not the host: a baseline x86-64 has no FMA, AArch64 always has
    with target.use(target.from_triple("x86_64-unknown-linux-gnu")):
        assert fma_lowering() == "software"
    with target.use(target.from_triple("aarch64-unknown-linux-gnu")):
        assert fma_lowering() == "hardware"
    monkeypatch.setenv(FMA_ENV, "software")
    with target.use(target.from_triple("aarch64-unknown-linux-gnu")):
        assert fma_lowering() == "software"


def test_frontend_fma_types_and_printing():
    @kernel
    def k(x: Buffer[f32], y: Buffer[f32]):
        i = global_id()
        y[i] = fma(x[i], 2, -0.5) + fma(1.5, x[i], x[i])
    assert "fma(x[i], 2.0, -0.5) + fma(1.5, x[i], x[i])" in str(k.ir)
    out = k.interpret(3, x=np.float32([1, 2, 3]), y=np.zeros(3, np.float32))["y"]
    assert out.tolist() == [4.0, 8.5, 13.0]
    with pytest.raises(KernelError, match="fma\\(\\) needs three f32 operands"):
        @kernel
        def bad(x: Buffer[i32], y: Buffer[f32]):
            y[0] = fma(1.0, x[0], 2.0)
    with pytest.raises(KernelError, match="takes 3 argument"):
        @kernel
        def bad2(x: Buffer[f32], y: Buffer[f32]):
            y[0] = fma(1.0, x[0])
    with pytest.raises(ir.IRTypeError):
        ir.fma(ir.const(1, ir.DType.I32), 1.0, 2.0)


def test_fma_constant_folds_exactly():
    from cohort.refimpl.specialize import fold
    e = ir.fma(ir.const(1 + 2.0 ** -23, ir.DType.F32), ir.const(1 - 2.0 ** -23, ir.DType.F32), ir.const(-1.0, ir.DType.F32))
    folded = fold(e, {}, 32, {})
    assert folded.op is ir.Op.CONST and folded.arg == -(2.0 ** -46)


def test_fma_survives_corpus_serialisation():
    from cohort.refimpl.printer import format_kernel
    from cohort.verify.corpus import kernel_from_json, kernel_to_json
    k = fma_kernel.ir
    back = kernel_from_json(kernel_to_json(k))
    assert format_kernel(back) == format_kernel(k)
    assert any(n.op is ir.Op.FMA for s in back.body for n in ir.walk_expr(s.value))

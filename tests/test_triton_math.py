"""exp2, log2, rsqrt of cohort.triton (cohort/triton/mathx.py): the error bounds DESIGN §10 states,
re-measured on a dense sample against float64; exact cases; special values."""
import numpy as np

from cohort.triton.mathx import math_f32


def _ulps(y, ref):
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(y.astype(np.float64) - ref) / ulp


def test_exp2_within_1_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-150, 128, 200001), rng.uniform(-1, 1, 100000)]).astype(np.float32)
    ref = np.exp2(x.astype(np.float64))
    y = math_f32("exp2", x)
    normal = (ref > 2.0 ** -126) & (ref < 3.4e38)
    assert _ulps(y[normal], ref[normal]).max() <= 1.0
    sub = (ref <= 2.0 ** -126) & (ref > 0)
    assert (np.abs(y[sub].astype(np.float64) - ref[sub]) / 2.0 ** -149).max() <= 1.0
    ints = np.arange(-149, 128).astype(np.float32)
    assert np.array_equal(math_f32("exp2", ints), np.exp2(ints.astype(np.float64)).astype(np.float32))


def test_log2_within_1_6_ulp_and_exact_on_powers_of_two():
    rng = np.random.default_rng(1)
    x = np.concatenate([np.exp(rng.uniform(-103, 88, 200000)), rng.uniform(0.5, 2, 100000),
                        2.0 ** -140 * rng.uniform(1, 2, 10000)]).astype(np.float32)
    assert _ulps(math_f32("log2", x), np.log2(x.astype(np.float64))).max() <= 1.6
    p = (2.0 ** np.arange(-149, 128)).astype(np.float32)
    assert np.array_equal(math_f32("log2", p), np.arange(-149, 128).astype(np.float32))


def test_special_values():
    nan, inf = float("nan"), float("inf")
    e = math_f32("exp2", np.array([nan, inf, -inf, 0.0, -0.0], np.float32))
    assert np.isnan(e[0]) and e[1] == inf and e[2] == 0.0 and e[3] == 1.0 and e[4] == 1.0
    lg = math_f32("log2", np.array([nan, inf, 0.0, -0.0, -1.0, 1.0], np.float32))
    assert np.isnan(lg[0]) and lg[1] == inf and lg[2] == -inf and lg[3] == -inf and np.isnan(lg[4]) and lg[5] == 0
    r = math_f32("rsqrt", np.array([4.0, 0.0, inf, -1.0], np.float32))
    assert r[0] == 0.5 and r[1] == inf and r[2] == 0.0 and np.isnan(r[3])


def test_log1p_and_expm1_within_2_5_ulp_and_their_special_values():
    rng = np.random.default_rng(2)
    x = np.concatenate([np.linspace(-0.999999, 10, 200001), rng.uniform(-1e-3, 1e-3, 100000),
                        np.exp(rng.uniform(-100, 88, 100000)), -np.exp(rng.uniform(-100, -1e-7, 100000))])
    x = x[x > -1].astype(np.float32)
    ref = np.log1p(x.astype(np.float64))
    live = np.abs(ref) > 2.0 ** -126
    assert _ulps(math_f32("log1p", x)[live], ref[live]).max() <= 2.5
    x = np.concatenate([np.linspace(-90, 88, 200001), rng.uniform(-1e-3, 1e-3, 100000)]).astype(np.float32)
    ref = np.expm1(x.astype(np.float64))
    live = (np.abs(ref) > 2.0 ** -126) & (np.abs(ref) < 3.4e38)
    assert _ulps(math_f32("expm1", x)[live], ref[live]).max() <= 2.5
    nan, inf = float("nan"), float("inf")
    sp = np.array([nan, inf, -inf, 0.0, -0.0, -1.0, -2.0, 1e-30, -1e-45], np.float32)
    lp, em = math_f32("log1p", sp), math_f32("expm1", sp)
    assert np.isnan(lp[[0, 2, 6]]).all() and lp[1] == inf and lp[5] == -inf
    assert np.array_equal(lp[[3, 4, 7, 8]].view(np.uint32), sp[[3, 4, 7, 8]].view(np.uint32))   # x where 1 + x is 1
    assert np.isnan(em[0]) and em[1] == inf and em[2] == -1.0
    assert np.array_equal(em[[3, 4, 7, 8]].view(np.uint32), sp[[3, 4, 7, 8]].view(np.uint32))

"""Regenerates the polynomial coefficients used by `mathlib`.

    python -m cohort.refimpl.mathlib_fit          # prints every table (~20 s)

tests/test_mathlib.py (marked slow) checks that the output equals the tables
in mathlib.

Method: weighted minimax fit on a dense Chebyshev grid in float64 by Lawson's
algorithm (iteratively reweighted least squares), then the coefficients are
rounded to float32 one at a time, lowest degree first, refitting the remaining
ones after each rounding so that they absorb its error. The result is the
approximation error only; the tests measure the real error of the float32
evaluation in the IR.

Not imported by the library or the kernels: numpy float64 is used freely here.
"""
from __future__ import annotations

import math

import numpy as np


def _grid(lo: float, hi: float, n: int) -> np.ndarray:
    k = np.arange(n + 1)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * k / n)


def minimax(target, basis, lo, hi, weight=None, n=1500, iters=400):
    """Coefficients c minimising max |weight * (target - sum c_j basis_j)| on [lo, hi]."""
    x = _grid(lo, hi, n)
    y = target(x)
    w = np.ones_like(x) if weight is None else weight(x)
    A = np.stack([b(x) for b in basis], 1) * w[:, None]
    y = y * w
    u = np.full(len(x), 1.0 / len(x))
    for _ in range(iters):
        s = np.sqrt(u)
        c = np.linalg.lstsq(A * s[:, None], y * s, rcond=None)[0]
        e = np.abs(y - A @ c)
        u = u * (e + 1e-300)
        u /= u.sum()
    return c, float(e.max())


def fit_f32(target, basis, lo, hi, weight=None, **kw):
    """Like `minimax`, but the returned coefficients are float32 values."""
    fixed = []
    for j in range(len(basis)):
        def rest(x, fixed=tuple(fixed)):
            return target(x) - sum(c * b(x) for c, b in zip(fixed, basis))
        c, _ = minimax(rest, basis[j:], lo, hi, weight, **kw)
        fixed.append(float(np.float32(c[0])))
    x = _grid(lo, hi, 20000)
    w = np.ones_like(x) if weight is None else weight(x)
    err = np.abs(w * (target(x) - sum(c * b(x) for c, b in zip(fixed, basis))))
    return tuple(fixed), float(err.max())


def _pow(j):
    return lambda x: x ** j


_erf = np.vectorize(math.erf)


def _log_R(s):
    """R(s*s) with log1p(f) = f - s*(f - R), f = 2s/(1-s)."""
    f = 2 * s / (1 - s)
    return f - (f - np.log1p(f)) / s


# Each entry: target, basis, interval, weight. The interval and the form of
# the polynomial are those used by the corresponding function in mathlib.
ERF_SPLIT = 1.0         # erf: x + x*P(x*x) below, 1 + P(|x| - centre) up to ERF_HI
ERF_HI = 3.92
ERF_CENTRE = float(np.float32((ERF_SPLIT + ERF_HI) / 2))   # as the IR holds it
ERF_DEG_SMALL, ERF_DEG_BIG = 7, 14
EXP_R = 0.3466          # |r| <= ln2/2 plus the rounding of x*log2(e)
TRIG_R = 0.7862         # |r| <= pi/4 (the reduction is exact), with a margin
LOG_S = 0.1716          # |s| = |f/(2+f)| for f in [sqrt(1/2)-1, sqrt(2)-1]
TANH_SMALL = 0.75

FITS = {
    # e**r = 1 + r + r**2*Q(r), relative error
    "exp": (lambda r: np.expm1(r) - r, [_pow(j) for j in range(2, 7)], -EXP_R, EXP_R,
            lambda r: np.exp(-r)),
    # log1p(f) = f - s*(f - R(s*s)), s = f/(2+f) (fdlibm's form); error weight 1/2
    "log": (_log_R, [_pow(2 * j) for j in range(1, 4)], 1e-6, LOG_S, None),
    # erf(x) = x + x*Q(x*x) on [0, ERF_SPLIT), relative error
    "erf_small": (lambda x: _erf(x) - x, [lambda x, j=j: x ** (2 * j + 1) for j in range(ERF_DEG_SMALL + 1)],
                  1e-6, ERF_SPLIT, lambda x: 1 / _erf(x)),
    # erf(a) = 1 + P(a - centre) on [ERF_SPLIT, ERF_HI], absolute error
    "erf_big": (lambda a: _erf(a) - 1, [lambda a, j=j: (a - ERF_CENTRE) ** j for j in range(ERF_DEG_BIG + 1)],
                ERF_SPLIT, ERF_HI, None),
    # tanh(x) = x + x*(t*P(t)), t = x*x, on |x| < TANH_SMALL, relative error
    "tanh": (lambda x: np.tanh(x) - x, [lambda x, j=j: x ** (2 * j + 1) for j in range(1, 7)],
             1e-6, TANH_SMALL, lambda x: 1 / np.tanh(x)),
    # sin(r) = r + r*s*S(s), s = r*r, relative error
    "sin": (lambda r: np.sin(r) - r, [lambda r, j=j: r ** (2 * j + 1) for j in range(1, 4)],
            1e-6, TRIG_R, lambda r: 1 / np.sin(r)),
    # cos(r) = (1 - s/2) + s*s*C(s), relative error
    "cos": (lambda r: np.cos(r) - (1 - r * r / 2), [lambda r, j=j: r ** (2 * j) for j in range(2, 5)],
            0.0, TRIG_R, lambda r: 1 / np.cos(r)),
}


def coefficients(name: str):
    target, basis, lo, hi, weight = FITS[name]
    return fit_f32(target, basis, lo, hi, weight)


if __name__ == "__main__":
    for name in FITS:
        coeffs, err = coefficients(name)
        print(f"{name}: approximation error {err:.3g}")
        print("   ", ", ".join(np.format_float_scientific(np.float32(c), unique=True) for c in coeffs))

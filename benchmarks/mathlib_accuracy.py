"""Exhaustive accuracy of the math library: every one of the 2**32 float32 inputs.

    python benchmarks/mathlib_accuracy.py                      # all functions, packet build
    python benchmarks/mathlib_accuracy.py --functions sin,cos --mode interpreter --stride 64
    python benchmarks/mathlib_accuracy.py --json out/mathlib.json

Per function: the largest error in float32 ulps (the spacing at the float32
rounding of the float64 reference; the smallest subnormal for a reference of
0), the input where it occurs, the mean error over all finite inputs, and the
count of special-value mismatches (a NaN where the reference is not, or the
reverse; must be 0). Inputs are taken in chunks of consecutive bit patterns;
`--stride k` takes every k-th pattern instead (a sample, labelled as such).

Modes: `packet` (default) runs the template compiled as a packet kernel;
`interpreter` evaluates it with the NumPy interpreter (the definition; slower:
every fma is a dozen float64 array operations); `both` runs the packet build
on everything and also checks, on every 64th input of each chunk, that the
interpreter gives the same bits. Interpreter and backend agree bit for bit
by construction (tests/test_mathlib.py, tests/test_variants.py), so both
modes measure the same function.

References (float64, far more accurate than the float32 results): NumPy's
exp, log, tanh, sin, cos; sigmoid as e/(1+e) with e = exp(-|x|); erf by
math.erf where |x| < 6 (elsewhere erf is +-1 in float64 too). sin, tanh, erf
are odd and cos is even in float64 as well, so their reference is computed
once per magnitude.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ir, mathlib
from cohort.refimpl.interpreter import evaluate
from cohort.refimpl.ir import Kernel, Param, ParamKind, Store

F32, I32 = ir.DType.F32, ir.DType.I32
F32_MAX = float(np.finfo(np.float32).max)
ODD, EVEN = {"sin", "tanh", "erf"}, {"cos"}
_erf64 = np.frompyfunc(math.erf, 1, 1)


def _erf(a):
    out = np.sign(a)                                 # |x| >= 6: erf(x) = +-1 in float64
    small = np.abs(a) < 6.0
    out[small] = _erf64(a[small]).astype(np.float64)
    return out


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


REFERENCE = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
             "erf": _erf, "sigmoid": _sigmoid}


def ulp_error(y: np.ndarray, ref: np.ndarray):
    """(errors, special mismatches): |y - ref| in ulps of float32(ref); 0 where y is
    float32(ref) exactly (infinities included) or both are NaN."""
    with np.errstate(all="ignore"):
        r32 = ref.astype(np.float32)
        exact = (y == r32) | (np.isnan(y) & np.isnan(r32))
        err = np.zeros(y.shape)
        idx = np.flatnonzero(~exact)
        if idx.size:
            yy, rr = y[idx].astype(np.float64), ref[idx]
            mag = np.minimum(np.abs(rr.astype(np.float32).astype(np.float64)), F32_MAX)
            _, e = np.frexp(np.maximum(mag, 2.0 ** -126))
            err[idx] = np.abs(yy - rr) / np.ldexp(1.0, e - 24)
        bad = np.isnan(err) | (np.isnan(y) != np.isnan(r32))
        err[bad] = 0.0
        return err, int(np.count_nonzero(bad))


def packet_runner(name: str, lanes: int):
    gid = ir.builtin(ir.Op.GLOBAL_ID)
    body = (Store("y", gid, ir.math(name, ir.load("x", gid, F32))),)
    params = (Param("x", ParamKind.BUFFER, F32), Param("y", ParamKind.BUFFER, F32))
    ck = compile_kernel(Kernel(f"acc_{name}", params, body, 64), None, f"packet,lanes={lanes}")

    def run(x):
        y = np.empty_like(x)
        ck.launch(len(x), {"x": x, "y": y})
        return y
    return run


def interpreter_runner(name: str):
    t = mathlib.template(name)
    return lambda x: evaluate(t, x=x).astype(np.float32)


def measure(name: str, mode: str, chunk: int, stride: int, lanes: int, log=print) -> dict:
    run = interpreter_runner(name) if mode == "interpreter" else packet_runner(name, lanes)
    check = interpreter_runner(name) if mode == "both" else None
    ref_fn = REFERENCE[name]
    worst, where, total, count, special, disagree = -1.0, None, 0.0, 0, 0, 0
    t0 = time.perf_counter()
    # positive bit patterns; each chunk is run for +x and -x
    for start in range(0, 1 << 31, chunk * stride):
        stop = min(start + chunk * stride, 1 << 31)
        x = np.arange(start, stop, stride, dtype=np.uint32).view(np.float32)
        with np.errstate(all="ignore"):
            refp = ref_fn(x.astype(np.float64))
        for sign in (1.0, -1.0):
            xs = x if sign > 0 else -x
            if sign > 0 or name not in ODD | EVEN:
                with np.errstate(all="ignore"):
                    ref = refp if sign > 0 else ref_fn(xs.astype(np.float64))
            else:
                ref = -refp if name in ODD else refp
            y = run(xs)
            if check is not None:
                s = slice(None, None, 64)
                yi = check(xs[s])
                same = (yi.view(np.int32) == y[s].view(np.int32)) | (np.isnan(yi) & np.isnan(y[s]))
                disagree += int(np.count_nonzero(~same))
            err, bad = ulp_error(y, ref)
            special += bad
            finite = np.isfinite(xs)
            total += float(err[finite].sum())
            count += int(np.count_nonzero(finite))
            i = int(np.argmax(err))
            if err[i] > worst:
                worst, where = float(err[i]), float(xs[i])
        if (start // (chunk * stride)) % 64 == 63:
            log(f"  {name}: {stop / 2 ** 31:6.1%} max {worst:.4f} ulp at {where!r} ({time.perf_counter() - t0:.0f} s)")
    out = {"function": name, "mode": mode, "inputs": (1 << 32) // stride, "stride": stride, "max_ulp": worst,
           "at": where, "mean_ulp": total / max(count, 1), "special_mismatches": special,
           "seconds": round(time.perf_counter() - t0, 1)}
    if check is not None:
        out["interpreter_disagreements"] = disagree
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--functions", default=",".join(sorted(mathlib.FUNCTIONS)))
    ap.add_argument("--mode", choices=("packet", "interpreter", "both"), default="packet")
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=1 << 22)
    ap.add_argument("--stride", type=int, default=1, help="every k-th bit pattern (1: all 2**32)")
    ap.add_argument("--json", default="", help="write the results here")
    args = ap.parse_args(argv)
    names = [n for n in args.functions.split(",") if n]
    unknown = [n for n in names if n not in mathlib.FUNCTIONS]
    if unknown:
        print(f"unknown function(s) {unknown}; known: {sorted(mathlib.FUNCTIONS)}", file=sys.stderr)
        return 2
    results = []
    print(f"{'function':9s} {'max ulp':>8s} {'at':>16s} {'mean ulp':>9s} {'special':>8s} {'inputs':>11s} {'s':>6s}")
    for name in names:
        r = measure(name, args.mode, args.chunk, args.stride, args.lanes, log=lambda s: print(s, file=sys.stderr))
        results.append(r)
        print(f"{name:9s} {r['max_ulp']:8.4f} {r['at']!r:>16s} {r['mean_ulp']:9.5f} {r['special_mismatches']:8d} "
              f"{r['inputs']:11d} {r['seconds']:6.0f}" + (f"  interpreter disagreements: {r['interpreter_disagreements']}"
                                                        if "interpreter_disagreements" in r else ""), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mode": args.mode, "lanes": args.lanes, "stride": args.stride, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""min/max keep the contract's operand order (`a if a < b else b`) in every variant.

Issue 29: LLVM's InstCombine folded min(min(-0.0, x), -0.0) to min(-0.0, x) as if min
were commutative and idempotent; with NaN or a zero of the other sign on the shared
side that changes the answer. These tests run every depth-two nesting of min and max,
with a literal or a variable on each side, over {NaN, ±0, ±1, ±inf} for both
variables, in every variant of the fuzz matrix, and compare bit for bit with the
interpreter. They fail with the fence removed (the planted bug `minmax_unfenced`).
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from cohort import Buffer, block_id, block_max, block_min, f32, global_id, kernel, thread_id
from cohort.backend.compiler import compile_kernel
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.refimpl.ir import (
    Assign,
    DType,
    Kernel,
    Op,
    Param,
    ParamKind,
    Store,
    binary,
    builtin,
    const,
    load,
    var,
)
from cohort.verify.compare import verify_build
from cohort.verify.matrix import variants_for

F32 = DType.F32
VALUES = np.array([np.nan, -0.0, 0.0, -1.0, 1.0, -np.inf, np.inf], np.float32)
# (x, y): all 49 pairs, then the first 15 again: whole blocks of 16, so the packet builds
# are the whole-block body alone (a partial block's per-lane stores would make the 192-store
# predicated=off builds take half a minute each; tails are covered below and everywhere else)
PAIRS = np.array(list(itertools.product(VALUES, VALUES)), np.float32)
PAIRS = np.concatenate([PAIRS, PAIRS[:15]])
N = len(PAIRS)


def _nestings(c):
    """Every outer(inner(p, q), r) and outer(r, inner(p, q)) with p, q, r among x, y and
    the literal c (p and q not both c), outer and inner each min or max."""
    leaves = {"x": var("vx", F32), "y": var("vy", F32), "c": const(float(c), F32)}
    for o, i in itertools.product((Op.MIN, Op.MAX), repeat=2):
        for p, q in itertools.product("xyc", repeat=2):
            if p == q == "c":
                continue
            inner = binary(i, leaves[p], leaves[q])
            for r in "xyc":
                yield binary(o, inner, leaves[r])
                yield binary(o, leaves[r], inner)


def _nesting_kernel(c) -> Kernel:
    """One store per nesting, each from loads of its own slice of x and y: no value is
    shared between two nestings, so the optimiser sees each as it would alone."""
    g = builtin(Op.GLOBAL_ID)
    body = []
    for k, e in enumerate(_nestings(c)):
        at = binary(Op.ADD, const(k * N, DType.I32), g)
        body += [Assign("vx", load("x", at, F32)), Assign("vy", load("y", at, F32)), Store("out", at, e)]
    count = len(body) // 3
    params = tuple(Param(n, ParamKind.BUFFER, F32) for n in ("x", "y", "out"))
    return Kernel(f"nest_{count}", params, tuple(body), block=16), count


def _args(count):
    return {"x": np.tile(PAIRS[:, 0], count), "y": np.tile(PAIRS[:, 1], count),
            "out": np.zeros(count * N, np.float32)}


def _variants(k):
    return variants_for(SimpleNamespace(kernel=k, n=N, block=k.block))


def _check(k, count, variants):
    bad = []
    for spec in variants:
        ck = compile_kernel(k, {}, spec, n=N)
        verdict = verify_build(ck, N, _args(count), label=spec)
        if not verdict.ok:
            bad.append(verdict.describe())
    return bad


# The fence is emitted the same way at every width, and LLVM folds the same IR whatever
# the variant, so the default suite runs the table scalar and at 16 lanes; the whole matrix
# (22 variants, three of them half a minute a build) is under -m slow.
QUICK = ("whole", "lanes=16,full_packet=off,predicated=on,private=cohort")


@pytest.mark.parametrize("c", [float(v) for v in VALUES], ids=lambda v: repr(v))
def test_every_depth_two_nesting(c):
    k, count = _nesting_kernel(c)
    assert count == 2 * 2 * 8 * 3 * 2
    assert _check(k, count, QUICK) == []


@pytest.mark.slow
@pytest.mark.parametrize("c", [float(v) for v in VALUES], ids=lambda v: repr(v))
def test_every_depth_two_nesting_in_every_variant(c):
    k, count = _nesting_kernel(c)
    variants = _variants(k)
    assert len(variants) >= 20      # lanes 4, 8, 16, interleaves, checks, the pool
    assert _check(k, count, variants) == []


def test_the_nested_fold_is_caught_without_the_fence():
    k, count = _nesting_kernel(-0.0)
    ck = compile_kernel(k, {}, "whole", n=N)
    assert verify_build(ck, N, _args(count)).ok
    with inject_bug_TESTING_ONLY("minmax_unfenced"):
        bad = compile_kernel(k, {}, "whole", n=N)
        assert not verify_build(bad, N, _args(count)).ok


@kernel(block=8)
def _issue29(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = min(min(-0.0, x[g]), -0.0)


def test_the_issue_kernel():
    x = np.array([np.nan, 1, -1, 0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    want = np.array([-0.0, -0.0, -1, -0.0, -0.0, -0.0, -np.inf, -0.0], np.float32)
    y = np.zeros(8, np.float32)
    _issue29.interpret(8, {}, x=x, y=y)
    assert y.tobytes() == want.tobytes()
    for spec in ("whole", "packet", "whole,unsafe=on", "packet,checked=on", "packet,lanes=4", "packet-masked", "packet-branchy"):
        y = np.zeros(8, np.float32)
        compile_kernel(_issue29, {}, spec, n=8).launch(8, {"x": x, "y": y})
        assert y.tobytes() == want.tobytes(), (spec, y)


@kernel(block=16)
def _collective_nest(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    v = x[g]
    lo = block_min(min(min(-0.0, v), -0.0))
    hi = block_max(max(max(v, 0.0), 0.0))
    both = block_min(max(min(v, 0.0), v))
    y[3 * g] = lo
    y[3 * g + 1] = hi
    y[3 * g + 2] = both + f32(thread_id()) * 0.0 + f32(block_id()) * 0.0


def test_nestings_inside_block_collectives():
    # each block sees a different arrangement of NaN and both zeros
    x = np.tile(VALUES, 16)[: 16 * 6].astype(np.float32)
    n = len(x)
    k = _collective_nest.ir
    for spec in _variants(k):
        args = {"x": x.copy(), "y": np.zeros(3 * n, np.float32)}
        verdict = verify_build(compile_kernel(k, {}, spec, n=n), n, args, label=spec)
        assert verdict.ok, verdict.describe()

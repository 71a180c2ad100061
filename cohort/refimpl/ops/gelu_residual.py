"""gelu_residual: y = gelu(x) + r with the exact erf form 0.5*x*(1+erf(x/sqrt(2))),
one thread per element. x/sqrt(2) is computed as x * f32(1/sqrt(2)).

Two forms, the same float32 operations: "stream" computes from the loaded
values; "private" stages the thread's tile (one element of each input: the
launch gives a thread one element) through private arrays - load, compute in
place, store - as a CUB kernel stages items[ITEMS_PER_THREAD]."""
import math

import numpy as np

from ... import Buffer, erf, f32, global_id, kernel, private
from .base import Launch, Operator, seeded_normal

SQRT1_2 = 0.7071067811865476


@kernel(block=32)
def gelu_residual(x: Buffer[f32], r: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = x[i]
    y[i] = 0.5 * v * (1.0 + erf(v * SQRT1_2)) + r[i]


@kernel(block=32)
def gelu_residual_private(x: Buffer[f32], r: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    tx = private(f32, 1)
    tr = private(f32, 1)
    tx[0] = x[i]
    tr[0] = r[i]
    v = tx[0]
    tx[0] = 0.5 * v * (1.0 + erf(v * SQRT1_2)) + tr[0]
    y[i] = tx[0]


_erf64 = np.frompyfunc(math.erf, 1, 1)


def oracle(inp):
    x = inp["x"].astype(np.float64)
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)).astype(np.float64)) + inp["r"].astype(np.float64)


OP = Operator(
    name="gelu_residual", kernel=gelu_residual, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "r": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * s[1], {}, {}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "gelu_residual", "x", (s[0], s[1]), 2.0),
                                 "r": seeded_normal(seed, "gelu_residual", "r", (s[0], s[1]))},
    oracle=oracle,
    seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0,
    definition="y = gelu(x) + r, gelu(x) = 0.5*x*(1+erf(x/sqrt(2)))",
    forms=(("private", gelu_residual_private),),
)

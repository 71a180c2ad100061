"""swiglu: y = a * sigmoid(a) * b, one thread per element.

Two forms, the same float32 operations: "stream" computes from the loaded
values; "private" stages the thread's tile (one element of each input: the
launch gives a thread one element) through private arrays - load, compute in
place, store - as a CUB kernel stages items[ITEMS_PER_THREAD]."""
import numpy as np

from ... import Buffer, f32, global_id, kernel, private, sigmoid
from .base import Launch, Operator, seeded_normal


@kernel(block=32)
def swiglu(a: Buffer[f32], b: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = a[i]
    y[i] = v * sigmoid(v) * b[i]


@kernel(block=32)
def swiglu_private(a: Buffer[f32], b: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    ta = private(f32, 1)
    tb = private(f32, 1)
    ta[0] = a[i]
    tb[0] = b[i]
    v = ta[0]
    ta[0] = v * sigmoid(v) * tb[0]
    y[i] = ta[0]


def oracle(inp):
    a = inp["a"].astype(np.float64)
    return a / (1.0 + np.exp(-a)) * inp["b"].astype(np.float64)


OP = Operator(
    name="swiglu", kernel=swiglu, dims=("R", "C"),
    buffer_shapes=lambda s: {"a": (s[0], s[1]), "b": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * s[1], {}, {}),
    make_inputs=lambda s, seed: {"a": seeded_normal(seed, "swiglu", "a", (s[0], s[1]), 3.0),
                                 "b": seeded_normal(seed, "swiglu", "b", (s[0], s[1]))},
    oracle=oracle,
    seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0,
    definition="y = a * sigmoid(a) * b",
    forms=(("private", swiglu_private),),
)

"""masked_softmax: softmax over a row's unmasked entries; masked entries are 0;
a fully masked row is all 0 (never NaN). One block per row.

Two forms, the same float32 operations in the same order: "stream" reads x
and mask from memory in each of its three passes; "private" holds the
thread's slice of both rows in private arrays (CUB's striped
items[ITEMS_PER_THREAD]: item k of thread t is column t + k*B), loaded once
and read by every pass."""
import numpy as np

from ... import INF, Buffer, Const, block_id, block_max, block_size, block_sum, exp, f32, kernel, private, thread_id
from .base import Launch, Operator, seeded_bits, seeded_normal

FULLY_MASKED_ROW = 5     # the generator masks this row entirely, when it exists
UNMASKED_ROW = 6         # and leaves this one entirely unmasked


@kernel(block=32)
def masked_softmax(x: Buffer[f32], mask: Buffer[bool], y: Buffer[f32], cols: Const[int]):
    base = block_id() * cols
    t = thread_id()
    m = -INF
    for j in range(t, cols, block_size()):
        if mask[base + j]:
            m = max(m, x[base + j])
    mx = block_max(m)
    s = 0.0
    for j in range(t, cols, block_size()):
        if mask[base + j]:
            s += exp(x[base + j] - mx)
    total = block_sum(s)
    for j in range(t, cols, block_size()):
        if mask[base + j]:
            y[base + j] = exp(x[base + j] - mx) / total
        else:
            y[base + j] = 0.0


@kernel(block=32)
def masked_softmax_private(x: Buffer[f32], mask: Buffer[bool], y: Buffer[f32], cols: Const[int]):
    base = block_id() * cols
    t = thread_id()
    # full items in every thread, one guarded partial item (see rmsnorm_private)
    full = cols // block_size()
    tail = t + full * block_size()
    items = private(f32, cols // block_size() + 1)
    keep = private(bool, cols // block_size() + 1)
    m = -INF
    for k in range(full):
        v = x[base + t + k * block_size()]
        kv = mask[base + t + k * block_size()]
        items[k] = v
        keep[k] = kv
        if kv:
            m = max(m, v)
    items[full] = x[base + tail] if tail < cols else 0.0
    keep[full] = mask[base + tail] if tail < cols else False
    if tail < cols:
        if keep[full]:
            m = max(m, items[full])
    mx = block_max(m)
    s = 0.0
    for k in range(full):
        if keep[k]:
            s += exp(items[k] - mx)
    if tail < cols:
        if keep[full]:
            s += exp(items[full] - mx)
    total = block_sum(s)
    for k in range(full):
        j = t + k * block_size()
        if keep[k]:
            y[base + j] = exp(items[k] - mx) / total
        else:
            y[base + j] = 0.0
    if tail < cols:
        if keep[full]:
            y[base + tail] = exp(items[full] - mx) / total
        else:
            y[base + tail] = 0.0


def make_inputs(s, seed):
    mask = seeded_bits(seed, "masked_softmax", "mask", (s[0], s[1]))
    if s[0] > FULLY_MASKED_ROW:
        mask[FULLY_MASKED_ROW] = False
    if s[0] > UNMASKED_ROW:
        mask[UNMASKED_ROW] = True
    return {"x": seeded_normal(seed, "masked_softmax", "x", (s[0], s[1]), 3.0), "mask": mask}


def oracle(inp):
    x = inp["x"].astype(np.float64)
    mask = inp["mask"]
    xm = np.where(mask, x, -np.inf)
    mx = xm.max(axis=1, keepdims=True)
    e = np.where(mask, np.exp(xm - np.where(np.isfinite(mx), mx, 0.0)), 0.0)
    total = e.sum(axis=1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)


OP = Operator(
    name="masked_softmax", kernel=masked_softmax, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "mask": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * masked_softmax.block, {"cols": s[1]}, {}),
    make_inputs=make_inputs, oracle=oracle,
    seed_sizes=None, rel_tol=1e-5,
    tags={"row", "llm"}, llm_sizes=((4096, 512),),
    definition="softmax over the row's unmasked entries; masked entries 0; fully masked row all 0",
    forms=(("private", masked_softmax_private),),
)

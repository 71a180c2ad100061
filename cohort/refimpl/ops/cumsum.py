"""cumsum: y[r, j] = x[r, 0] + ... + x[r, j] along the last dimension, as
torch.cumsum(x, dim=-1); one block of 16 threads per row.

The definition (DESIGN §4) fixes every addition. The row is taken in groups of
16 consecutive elements, thread t holding element g + t of group g. Within a
group, a Hillis-Steele inclusive scan: for d = 1, 2, 4, 8 in turn, every
thread t >= d replaces its value h_t by h_{t-d} + h_t (all reading the values
of the previous step). Then out_t = carry + h_t, and the next group's carry is
out_15; the first carry is -0.0, so y[r, 0] is x[r, 0] bit for bit. Past the
end of the row a group holds copies of the last element: they only reach
positions past the end, which are never stored.

Each step is one exchange through shared memory between two barriers; the
steps alternate between two arrays, so one barrier per step orders both the
step's reads and the next step's writes."""
import numpy as np

from ... import Buffer, Const, barrier, block_id, f32, kernel, shared, thread_id
from .base import Launch, Operator, seeded_normal

B = 16


@kernel(block=B)
def cumsum(x: Buffer[f32], y: Buffer[f32], C: Const[int]):
    t = thread_id()
    base = block_id() * C
    s0 = shared(f32, B)
    s1 = shared(f32, B)
    last = shared(f32, B)
    carry = -0.0
    for g in range(0, C, B):
        j = g + t
        v = x[base + min(j, C - 1)]
        s0[t] = v
        barrier()
        if t >= 1:
            v = s0[t - 1] + v
        s1[t] = v
        barrier()
        if t >= 2:
            v = s1[t - 2] + v
        s0[t] = v
        barrier()
        if t >= 4:
            v = s0[t - 4] + v
        s1[t] = v
        barrier()
        if t >= 8:
            v = s1[t - 8] + v
        out = carry + v
        if j < C:
            y[base + j] = out
        last[t] = out
        barrier()
        carry = last[B - 1]


def oracle(inp):
    return np.cumsum(inp["x"].astype(np.float64), axis=1)


OP = Operator(
    name="cumsum", kernel=cumsum, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * B, {"C": s[1]}, {}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "cumsum", "x", (s[0], s[1]))},
    oracle=oracle,
    seed_sizes=None,
    # the carry is a chain of C/16 additions: relative to the row's largest |y| the error
    # grows like sqrt(C) u - measured 0.3-0.6e-6 at C = 4097, 0.9-1.4e-6 at 65537 and
    # 4.1-8.4e-6 at 2^20 (three seeds each)
    rel_tol=3e-5,
    definition="groups of 16: Hillis-Steele (d = 1, 2, 4, 8), out = carry + h, carry = out_15 from -0.0",
)

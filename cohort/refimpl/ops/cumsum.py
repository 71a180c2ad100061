"""cumsum: y[r, j] = x[r, 0] + ... + x[r, j] along the last dimension, as
torch.cumsum(x, dim=-1); one block of 16 threads per row.

The definition (DESIGN §4) fixes every addition. The row is taken in groups of
16 consecutive elements, thread t holding element g + t of group g. Within a
group, a Hillis-Steele inclusive scan: for d = 1, 2, 4, 8 in turn, every
thread t >= d replaces its value h_t by h_{t-d} + h_t (all reading the values
of the previous step). Then out_t = carry + h_t, and the next group's carry is
out_15; the first carry is -0.0, so y[r, 0] is x[r, 0] bit for bit. Past the
end of the row a group holds zeros: they only reach positions past the end,
which are never stored.

The kernel takes G = 16 groups (256 elements) per round of barriers: the four
steps of all of them alternate between two shared arrays, so one barrier per
step orders both the step's reads and the next step's writes; then each thread
walks the carry through the groups in order (carry + h_15 is the group's last
output, out_15, to the bit), every thread computing the same chain."""
import numpy as np

from ... import Buffer, Const, barrier, block_id, f32, kernel, shared, thread_id
from .base import Launch, Operator, seeded_normal

B = 16
G = 16       # groups per step: a step's barriers serve G groups of B


@kernel(block=B)
def cumsum(x: Buffer[f32], y: Buffer[f32], C: Const[int]):
    t = thread_id()
    base = block_id() * C
    s0 = shared(f32, G * B)
    s1 = shared(f32, G * B)
    carry = -0.0
    for g0 in range(0, C, G * B):
        kn = min(G, (C - g0 + B - 1) // B)          # the step's groups that hold any element
        for k in range(kn):
            jx = g0 + k * B + t
            s0[k * B + t] = x[base + jx] if jx < C else 0.0      # a masked vector load
        barrier()
        # the four Hillis-Steele steps of every group of the step, between two arrays
        for k1 in range(kn):
            v1 = s0[k1 * B + t]
            if t >= 1:
                v1 = s0[k1 * B + t - 1] + v1
            s1[k1 * B + t] = v1
        barrier()
        for k2 in range(kn):
            v2 = s1[k2 * B + t]
            if t >= 2:
                v2 = s1[k2 * B + t - 2] + v2
            s0[k2 * B + t] = v2
        barrier()
        for k4 in range(kn):
            v4 = s0[k4 * B + t]
            if t >= 4:
                v4 = s0[k4 * B + t - 4] + v4
            s1[k4 * B + t] = v4
        barrier()
        for k8 in range(kn):
            v8 = s1[k8 * B + t]
            if t >= 8:
                v8 = s1[k8 * B + t - 8] + v8
            s0[k8 * B + t] = v8
        barrier()
        # the carry through the step's groups in order: every thread computes the same chain
        # (carry + h_15 is the group's last output, out_15, bit for bit)
        for k in range(kn):
            j = g0 + k * B + t
            if j < C:
                y[base + j] = carry + s0[k * B + t]
            carry = carry + s0[k * B + B - 1]
        barrier()


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

"""cumsum: y[r, j] = x[r, 0] + ... + x[r, j] along the last dimension, as
torch.cumsum(x, dim=-1); one block of 16 threads per row.

The definition (DESIGN §4) fixes every operation. Every partial sum is a pair
of float32 (h, l) standing for h + l: h is the float32 sum, l what its
additions lost. The pair sum (TwoSum, Knuth: s + e is ah + bh exactly)

    (ah, al) (+) (bh, bl) = (s, al + (bl + e)),  s = ah + bh, v = s - ah,
                                                 e = (ah - (s - v)) + (bh - v)

A partial's l is thus the float32 sum of its additions' errors; y is the
partial rounded once, y = h + l (y = h where l is 0, so zeros keep their
sign, or not a number, where h is infinite or NaN: float32 addition's
infinities and NaN). The running sum comes out rounded about once, as torch's
CPU cumsum gives it (a double accumulator rounded once), not after a chain of
C/16 float32 roundings.

The order: the row is taken in steps of 256 elements, each 16 groups of 16
consecutive elements, thread t holding element g + t of group g as the pair
(x, -0.0). Within a group, a Hillis-Steele inclusive scan: for d = 1, 2, 4, 8
in turn, every thread t >= d replaces its pair H_t by H_{t-d} (+) H_t (all
reading the pairs of the previous step). Then out_t = carry (+) H_t is
rounded into y, and the next group's carry is out_15. At the end of a step
the carry (h, l) is renormalised to (h + l, l - ((h + l) - h)) (FastTwoSum;
unchanged where l is 0 or not a number, l then becoming 0), so that its l
stays within a few ulps of h's rounding and its own additions lose nothing
that shows. The first carry is (-0.0, -0.0), so y[r, 0] is x[r, 0] bit for
bit. Past the end of the row a group holds zeros: they only reach positions
past the end, which are never stored.

The kernel takes a step's 16 groups per round of barriers: the four steps of
all of them alternate between two pairs of shared arrays (h and l), so one
barrier per step orders both the step's reads and the next step's writes;
then each thread walks the carry through the groups in order, every thread
computing the same chain."""
import numpy as np

from ... import Buffer, Const, barrier, block_id, f32, kernel, shared, thread_id
from .base import Launch, Operator, seeded_normal

B = 16
G = 16       # groups per step: a step's barriers serve G groups of B


@kernel(block=B)
def cumsum(x: Buffer[f32], y: Buffer[f32], C: Const[int]):
    t = thread_id()
    base = block_id() * C
    h0 = shared(f32, G * B)
    l0 = shared(f32, G * B)
    h1 = shared(f32, G * B)
    l1 = shared(f32, G * B)
    ch = -0.0
    cl = -0.0
    for g0 in range(0, C, G * B):
        kn = min(G, (C - g0 + B - 1) // B)          # the step's groups that hold any element
        for k in range(kn):
            jx = g0 + k * B + t
            h0[k * B + t] = x[base + jx] if jx < C else 0.0      # a masked vector load
        barrier()
        # the four Hillis-Steele steps of every group of the step, between two pairs of arrays;
        # the elements' l are all -0.0, and (-0.0 + -0.0) + err is err to the bit: step 1
        # neither stores nor loads them
        for k1 in range(kn):
            p1 = h0[k1 * B + t]
            q1 = -0.0
            if t >= 1:
                a1 = h0[k1 * B + t - 1]
                s1 = a1 + p1
                v1 = s1 - a1
                q1 = (a1 - (s1 - v1)) + (p1 - v1)
                p1 = s1
            h1[k1 * B + t] = p1
            l1[k1 * B + t] = q1
        barrier()
        for k2 in range(kn):
            p2 = h1[k2 * B + t]
            q2 = l1[k2 * B + t]
            if t >= 2:
                a2 = h1[k2 * B + t - 2]
                c2 = l1[k2 * B + t - 2]
                s2 = a2 + p2
                v2 = s2 - a2
                q2 = c2 + (q2 + ((a2 - (s2 - v2)) + (p2 - v2)))
                p2 = s2
            h0[k2 * B + t] = p2
            l0[k2 * B + t] = q2
        barrier()
        for k4 in range(kn):
            p4 = h0[k4 * B + t]
            q4 = l0[k4 * B + t]
            if t >= 4:
                a4 = h0[k4 * B + t - 4]
                c4 = l0[k4 * B + t - 4]
                s4 = a4 + p4
                v4 = s4 - a4
                q4 = c4 + (q4 + ((a4 - (s4 - v4)) + (p4 - v4)))
                p4 = s4
            h1[k4 * B + t] = p4
            l1[k4 * B + t] = q4
        barrier()
        for k8 in range(kn):
            p8 = h1[k8 * B + t]
            q8 = l1[k8 * B + t]
            if t >= 8:
                a8 = h1[k8 * B + t - 8]
                c8 = l1[k8 * B + t - 8]
                s8 = a8 + p8
                v8 = s8 - a8
                q8 = c8 + (q8 + ((a8 - (s8 - v8)) + (p8 - v8)))
                p8 = s8
            h0[k8 * B + t] = p8
            l0[k8 * B + t] = q8
        barrier()
        # the carry through the step's groups in order: every thread computes the same chain
        # (carry (+) H_15 is the group's last output pair, out_15, bit for bit; then it is
        # renormalised once a step, not once a group, off the chain's critical path)
        for k in range(kn):
            j = g0 + k * B + t
            hk = h0[k * B + t]
            if j < C:                                # out_t = carry (+) H_t, rounded: y = s + l
                s = ch + hk
                v = s - ch
                ll = cl + (l0[k * B + t] + ((ch - (s - v)) + (hk - v)))
                y[base + j] = s + ll if abs(ll) > 0.0 else s
            h15 = h0[k * B + B - 1]
            s = ch + h15
            v = s - ch
            cl = cl + (l0[k * B + B - 1] + ((ch - (s - v)) + (h15 - v)))     # one add on cl's chain
            ch = s
        # the carry renormalised (FastTwoSum): |cl| <= ulp(ch) / 2 again
        r = ch + cl if abs(cl) > 0.0 else ch
        cl = cl - (r - ch) if abs(cl) > 0.0 else 0.0
        ch = r
        barrier()


def oracle(inp):
    return np.add.accumulate(inp["x"].astype(np.float64), axis=1)    # float64, in order


OP = Operator(
    name="cumsum", kernel=cumsum, dims=("R", "C"),
    buffer_shapes=lambda s: {"x": (s[0], s[1]), "y": (s[0], s[1])},
    output="y",
    launch=lambda s: Launch(s[0] * B, {"C": s[1]}, {}),
    make_inputs=lambda s, seed: {"x": seeded_normal(seed, "cumsum", "x", (s[0], s[1]))},
    oracle=oracle,
    seed_sizes=None,
    # the pair sums give the running sum rounded about once (as torch's double accumulator
    # does): measured <= 5.6e-8 of the row's largest |y| (half an ulp, 2^-24 = 6.0e-8) at
    # 1 x 65537, 7 x 1025, 1 x 10^6 and the seed sizes, equal to torch.cumsum's
    # (tests/test_coop_ops.py); the bound is one ulp, 2^-23
    rel_tol=1.2e-7,
    tags={"cooperative"},
    definition="float32 pairs (h, l), each + a TwoSum pair sum; groups of 16: Hillis-Steele (d = 1, 2, 4, 8), "
               "out = carry + H, carry = out_15 from (-0.0, -0.0), renormalised every 256; y = h + l",
)

"""rope_half and rope_pairs: rotary position embeddings as models apply them.

x is [N, S, D] (N: every leading dimension, e.g. batch x heads), cos and sin
are [S, R/2], shared by the N rows of each position (broadcast, not copied);
the first R features of each row rotate (R <= D, even), the last D - R pass
through unchanged (partial rotary: GPT-J's rotary_dim, GPT-NeoX's
rotary_pct). Pair k rotates by (cos, sin)[s, k]:

    y0 = x0*cos - x1*sin,   y1 = x0*sin + x1*cos

rope_half (Llama, Mistral, Qwen, GPT-NeoX: rotate_half) pairs feature k with
k + R/2; rope_pairs (GPT-J: rotate_every_two; the `rope` operator's pairs)
pairs 2k with 2k + 1. Both are transformers' q*cos + rotate(q)*sin with the
same float32 operations: (-x1)*s + x0*c = x0*c - x1*s exactly, and + is
commutative, so the results agree with transformers' functions bit for bit.

One block per position s, its threads striped over the pairs of the N rows
at that position (j = n*R/2 + k): no division by a runtime value anywhere,
and N and S are runtime arguments, so one build serves every sequence length
and row count; D, R and the convention are Const (the row's index pattern:
contiguous for halves, stride 2 for pairs; j // (R/2) a division by a
constant). cos and sin may also hold one row per (n, s) (CS = S: transformers'
per-batch position ids)."""
import numpy as np

from ... import Buffer, Const, block_id, block_size, f32, i32, kernel, thread_id
from .base import Launch, Operator, ShapeError, seeded_normal, seeded_uniform


@kernel(block=32)
def rope_rows(x: Buffer[f32], cos: Buffer[f32], sin: Buffer[f32], y: Buffer[f32], N: i32, S: i32, CS: i32,
              D: Const[int], R: Const[int], HALF: Const[int]):
    pos = block_id()                                  # one block per position: its cos/sin row
    t = thread_id()
    # The block's N rows (n, pos), their pairs striped over the threads; cos/sin row
    # n*CS + pos (CS = 0: one row per position, shared; CS = S: one per row).
    # Pair p = j % (R/2) of row n = j // (R/2); x0 at (n*S + pos)*D + p*(2 - HALF) (halves:
    # p; pairs: 2p), x1 at HALF*(R/2 - 1) + 1 past it (p + R/2; 2p + 1). Index expressions
    # are written out, not held in variables: a variable assigned in a loop of per-thread
    # trip count counts as varying across a packet (backend/shapes.py), and R // 2 is a
    # constant only spelt out, so that n stays uniform and p contiguous in a packet.
    for j in range(t, N * (R // 2), block_size()):
        c = cos[(j // (R // 2) * CS + pos) * (R // 2) + j % (R // 2)]
        s = sin[(j // (R // 2) * CS + pos) * (R // 2) + j % (R // 2)]
        x0 = x[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF)]
        x1 = x[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF) + HALF * (R // 2 - 1) + 1]
        y[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF)] = x0 * c - x1 * s
        y[(j // (R // 2) * S + pos) * D + j % (R // 2) * (2 - HALF) + HALF * (R // 2 - 1) + 1] = x0 * s + x1 * c
    for r in range(N):                                # partial rotary: features R.. pass through
        for f in range(R + t, D, block_size()):
            y[(r * S + pos) * D + f] = x[(r * S + pos) * D + f]


def check(s):
    N, S, D, R = s
    if R % 2:
        raise ShapeError(f"rope needs an even rotary dimension R (pairs of features), got R={R}")
    if R > D:
        raise ShapeError(f"rope: rotary dimension R={R} is larger than the head dimension D={D}")


def launch(s, half: bool, shared: bool = True):
    """shared: cos/sin [S, R/2] for every row; else [N, S, R/2], one row each."""
    N, S, D, R = s
    return Launch(S * rope_rows.block, {"D": D, "R": R, "HALF": int(half)},
                  {"N": N, "S": S, "CS": 0 if shared else S})


def make_inputs(name):
    def make(s, seed):
        N, S, D, R = s
        angle = seeded_uniform(seed, name, "angle", (S, R // 2), -3.0, 3.0).astype(np.float64)
        return {"x": seeded_normal(seed, name, "x", (N, S, D)),
                "cos": np.cos(angle).astype(np.float32), "sin": np.sin(angle).astype(np.float32)}
    return make


def reference(x, cos, sin, half: bool):
    """The float64 oracle: x [..., S, D], cos/sin [S, R/2]."""
    x = np.asarray(x, np.float64)
    c, s = np.asarray(cos, np.float64), np.asarray(sin, np.float64)
    R = 2 * c.shape[-1]
    y = x.copy()
    if half:
        x0, x1 = x[..., :R // 2], x[..., R // 2:R]
        y[..., :R // 2], y[..., R // 2:R] = x0 * c - x1 * s, x0 * s + x1 * c
    else:
        x0, x1 = x[..., 0:R:2], x[..., 1:R:2]
        y[..., 0:R:2], y[..., 1:R:2] = x0 * c - x1 * s, x0 * s + x1 * c
    return y


def _operator(name, half, definition):
    return Operator(
        name=name, kernel=rope_rows, dims=("N", "S", "D", "R"),
        buffer_shapes=lambda s: {"x": (s[0], s[1], s[2]), "cos": (s[1], s[3] // 2), "sin": (s[1], s[3] // 2),
                                 "y": (s[0], s[1], s[2])},
        output="y",
        launch=lambda s: launch(s, half),
        make_inputs=make_inputs(name),
        oracle=lambda inp: reference(inp["x"], inp["cos"], inp["sin"], half),
        check=check, seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0, definition=definition)


ROPE_HALF = _operator("rope_half", True,
                      "x [N,S,D], cos/sin [S,R/2]: features k and k+R/2 rotate (Llama, NeoX); "
                      "features R.. pass through")
ROPE_PAIRS = _operator("rope_pairs", False,
                       "x [N,S,D], cos/sin [S,R/2]: features 2k and 2k+1 rotate (GPT-J); "
                       "features R.. pass through")

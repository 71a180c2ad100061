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

One block per leading row n: it walks its positions s in order, its threads
striped over the pairs of each (n, s) row, so x and y are read and written
front to back (a block per position, as before, walked N rows S*D floats
apart, was slower: docs/README.md, 'Measurements behind the code').
N and S are runtime arguments, so one build serves every sequence length and
row count; D, R and the convention are Const (the row's index pattern:
contiguous for halves, stride 2 for pairs). Blocks are the N rows: a launch
runs on as many workers as it has rows (decoding, S = 1, keeps all N). cos
and sin may also hold one row per (n, s) (CS = S: transformers' per-batch
position ids)."""
import numpy as np

from ... import Buffer, Const, block_id, block_size, f32, i32, kernel, thread_id
from .base import Launch, Operator, ShapeError, seeded_normal, seeded_uniform


@kernel(block=32)
def rope_rows(x: Buffer[f32], cos: Buffer[f32], sin: Buffer[f32], y: Buffer[f32], N: i32, S: i32, CS: i32,
              D: Const[int], R: Const[int], HALF: Const[int]):
    n = block_id()                                    # one block per leading row
    t = thread_id()
    # Row (n, pos) of x and y starts at (n*S + pos)*D; its cos/sin row is n*CS + pos (CS = 0:
    # one row per position, shared; CS = S: one per row). Pair p: x0 at p*(2 - HALF) (halves:
    # p; pairs: 2p), x1 HALF*(R/2 - 1) + 1 past it (p + R/2; 2p + 1). R // 2 is spelt out,
    # not held in a variable: then p stays contiguous in a packet (backend/shapes.py).
    for pos in range(S):
        for p in range(t, R // 2, block_size()):
            c = cos[(n * CS + pos) * (R // 2) + p]
            s = sin[(n * CS + pos) * (R // 2) + p]
            x0 = x[(n * S + pos) * D + p * (2 - HALF)]
            x1 = x[(n * S + pos) * D + p * (2 - HALF) + HALF * (R // 2 - 1) + 1]
            y[(n * S + pos) * D + p * (2 - HALF)] = x0 * c - x1 * s
            y[(n * S + pos) * D + p * (2 - HALF) + HALF * (R // 2 - 1) + 1] = x0 * s + x1 * c
        for f in range(R + t, D, block_size()):       # partial rotary: features R.. pass through
            y[(n * S + pos) * D + f] = x[(n * S + pos) * D + f]


def check(s):
    N, S, D, R = s
    if R % 2:
        raise ShapeError(f"rope needs an even rotary dimension R (pairs of features), got R={R}")
    if R > D:
        raise ShapeError(f"rope: rotary dimension R={R} is larger than the head dimension D={D}")


def launch(s, half: bool, shared: bool = True):
    """shared: cos/sin [S, R/2] for every row; else [N, S, R/2], one row each."""
    N, S, D, R = s
    return Launch(N * rope_rows.block, {"D": D, "R": R, "HALF": int(half)},
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


def _operator(name, half, definition, **facts):
    return Operator(
        name=name, kernel=rope_rows, dims=("N", "S", "D", "R"),
        buffer_shapes=lambda s: {"x": (s[0], s[1], s[2]), "cos": (s[1], s[3] // 2), "sin": (s[1], s[3] // 2),
                                 "y": (s[0], s[1], s[2])},
        output="y",
        launch=lambda s: launch(s, half),
        make_inputs=make_inputs(name),
        oracle=lambda inp: reference(inp["x"], inp["cos"], inp["sin"], half),
        check=check, seed_sizes=None, rel_tol=1e-5, fast_math_ulps=4.0, definition=definition, **facts)


ROPE_HALF = _operator("rope_half", True,
                      "x [N,S,D], cos/sin [S,R/2]: features k and k+R/2 rotate (Llama, NeoX); "
                      "features R.. pass through",
                      tags={"llm"}, llm_sizes=((32, 1, 128, 128), (32, 512, 128, 128)))   # 32 heads of 128
ROPE_PAIRS = _operator("rope_pairs", False,
                       "x [N,S,D], cos/sin [S,R/2]: features 2k and 2k+1 rotate (GPT-J); "
                       "features R.. pass through")

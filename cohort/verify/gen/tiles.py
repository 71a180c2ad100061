"""Random tile programs: the fuzzer's family for `cohort.triton` (DESIGN §10, docs/fuzzing.md).

A program is Triton source text, compiled by cohort.triton's own frontend as a user's kernel
is: `generate(seed)` draws its layout (a 1-D grid over M elements, or a 2-D grid of BM x BN
blocks over an M x N matrix with row stride S), its block sizes, the `other` values of its
masked loads, a few pieces (tile_pieces.py: each writes outputs of its own, so a piece can be
deleted while shrinking) and the sizes it is run at: odd, around the blocks, so last blocks
are partial. The same seed gives the same program in every process (random.Random(seed)).

Steering: program i of a campaign holds piece kind KINDS[i % len(KINDS)] (the 2-D-only
kinds force a 2-D layout), so every kind is made every len(KINDS) programs whatever the
other draws; `categories(prog)` is what a program exercises, for the coverage report.
"""
from __future__ import annotations

import random
from dataclasses import astuple, dataclass, replace

from .tile_pieces import KINDS, TWO_D_ONLY, Out, Piece, make_piece

GUARD = 48                  # elements past a tile's last storage index: a masked store must not touch them
IN_TYPES = (("xf", "f32"), ("xi", "i32"), ("xh", "bf16"), ("xg", "f16"), ("xd", "f32"))   # xd: no NaN
F_OTHER = ("0.0", "-1.5", "2.0", "-0.0")
I_OTHER = ("0", "-3", "7", "1")


@dataclass(frozen=True)
class Size:
    M: int
    N: int
    S: int
    K: int
    T: int


@dataclass(frozen=True)
class TileProgram:
    seed: int
    dims: int                   # 1 or 2
    blocks: tuple               # (BM, BN, BK)
    others: tuple               # other= of fa, fb, ia, ha, ga
    shift: int                  # fb and ib read at off + shift
    pieces: tuple
    sizes: tuple

    @property
    def outs(self) -> tuple:
        return tuple(o for p in self.pieces for o in p.outs)

    def grid(self, z: Size) -> tuple:
        bm, bn, _ = self.blocks
        if self.dims == 1:
            return (-(-z.M // bm), 1, 1)
        return (-(-z.M // bm), -(-z.N // bn), 1)

    def source(self) -> str:
        params = ", ".join([n for n, _ in IN_TYPES] + [o.name for o in self.outs] +
                           ["M", "N", "S", "K", "T", "BM: tl.constexpr", "BN: tl.constexpr", "BK: tl.constexpr"])
        body = prelude(self) + [line for p in self.pieces for line in p.lines]
        return ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                f"def tile_program(\n        {params}):\n" + "".join(f"    {line}\n" for line in body))

    def to_json(self) -> dict:
        return {"seed": self.seed, "dims": self.dims, "blocks": list(self.blocks), "others": list(self.others),
                "shift": self.shift, "sizes": [list(astuple(z)) for z in self.sizes],
                "pieces": [{"kind": p.kind, "lines": list(p.lines), "uses": sorted(p.uses),
                            "outs": [list(astuple(o)) for o in p.outs]} for p in self.pieces]}

    @staticmethod
    def from_json(d: dict) -> "TileProgram":
        pieces = tuple(Piece(p["kind"], tuple(p["lines"]), tuple(Out(*o) for o in p["outs"]), frozenset(p["uses"]))
                       for p in d["pieces"])
        return TileProgram(d["seed"], d["dims"], tuple(d["blocks"]), tuple(d["others"]), d["shift"], pieces,
                           tuple(Size(*z) for z in d["sizes"]))

    def without(self, i: int) -> "TileProgram":
        return replace(self, pieces=self.pieces[:i] + self.pieces[i + 1:])


def prelude(p: TileProgram) -> list:
    fo, fbo, io, ho, go = p.others
    lines = ["pid_m = tl.program_id(0)", "pid_n = tl.program_id(1)", "rm = pid_m * BM + tl.arange(0, BM)",
             "mm = rm < M"]
    if p.dims == 1:
        lines += ["m2 = mm", "off = rm"]
    else:
        lines += ["rn = pid_n * BN + tl.arange(0, BN)", "mn = rn < N", "m2 = mm[:, None] & mn[None, :]",
                  "off = rm[:, None] * S + rn[None, :]"]
    return lines + [f"fa = tl.load(xf + off, mask=m2, other={fo})",
                    f"fb = tl.load(xf + off + {p.shift}, mask=m2, other={fbo})",
                    f"ia = tl.load(xi + off, mask=m2, other={io})",
                    f"ib = tl.load(xi + off + {p.shift}, mask=m2)",
                    f"ha = tl.load(xh + off, mask=m2, other={ho})",
                    f"ga = tl.load(xg + off, mask=m2, other={go})"]


def extent(p: TileProgram, out: Out, z: Size) -> int:
    """The element count of an output buffer at size z (tile_pieces' extents)."""
    gm, gn, _ = p.grid(z)
    tile = z.M if p.dims == 1 else (z.M - 1) * z.S + z.N
    e = out.extent
    n = {"tile": tile, "tile2": 2 * tile + 1, "tile3": 3 * tile + 2, "rows": gn * z.M, "cols": gm * z.N,
         "progs": gm * gn, "bins": 16}[e]
    return n + GUARD


def input_extent(p: TileProgram, z: Size) -> int:
    """Every input read is inside this: strided reads to 3 * tile, the dot's K x N and M x K
    operands, loops' pointers T steps of at most max(S, BM) on."""
    rows = max(z.M, z.N, z.K) + z.T + 2
    return 3 * rows * max(z.S, z.N, z.K, p.blocks[0]) + 3 * p.blocks[0] + 64


def _dim(rng: random.Random, block: int) -> int:
    k = rng.choice((0, 1, 1, 2, 3))
    d = rng.choice((-3, -1, 0, 1, 2, 5))
    return max(1, k * block + d)


def _sizes(rng: random.Random, dims: int, blocks: tuple, count: int = 3) -> tuple:
    bm, bn, bk = blocks
    out = []
    for _ in range(count):
        m = _dim(rng, bm)
        n = _dim(rng, bn) if dims == 2 else 1
        s = n + rng.choice((0, 1, 3)) if dims == 2 else 1
        out.append(Size(m, n, s, _dim(rng, bk), rng.choice((0, 1, 2, 3, 4))))
    return tuple(out)


def generate(seed: int, index: int = None, max_pieces: int = 4) -> TileProgram:
    """The program of `seed`; `index` (a campaign's program number) forces one piece kind."""
    rng = random.Random(seed)
    forced = KINDS[index % len(KINDS)] if index is not None else None
    dims = 2 if forced in TWO_D_ONLY else rng.choice((1, 2, 2))
    if dims == 1:
        blocks = (rng.choice((2, 4, 8, 16, 32, 64)), 1, 16)
    else:
        blocks = (rng.choice((1, 2, 4, 8, 16, 32)), rng.choice((2, 4, 8, 16, 32)), rng.choice((8, 16)))
    kinds = [k for k in KINDS if dims == 2 or k not in TWO_D_ONLY]
    want = [forced] if forced else []
    want += [rng.choice(kinds) for _ in range(rng.randint(1, max_pieces) - len(want))]
    rng.shuffle(want)
    pieces = tuple(make_piece(kind, k, rng, dims, blocks) for k, kind in enumerate(want))
    others = (rng.choice(F_OTHER), rng.choice(F_OTHER), rng.choice(I_OTHER), rng.choice(F_OTHER),
              rng.choice(F_OTHER))
    return TileProgram(seed, dims, blocks, others, rng.choice((1, 3, 17)), pieces, _sizes(rng, dims, blocks))


def categories(p: TileProgram) -> set:
    cats = {f"dims:{p.dims}", f"block:{p.blocks[0]}x{p.blocks[1]}"}
    for piece in p.pieces:
        cats |= piece.uses
    return cats


__all__ = ["TileProgram", "Size", "Piece", "Out", "generate", "extent", "input_extent", "categories", "KINDS",
           "GUARD", "IN_TYPES"]

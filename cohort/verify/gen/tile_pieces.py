"""The pieces of a random tile program (tiles.py): each a few lines of Triton source that read
the prelude's tiles and write outputs of their own, so a piece can be deleted while shrinking.

The prelude (tiles.prelude) defines, for the program's layout:
  1-D: pid_m, rm = pid_m*BM + arange(BM), mm = rm < M, m2 = mm, off = rm
  2-D: pid_m, pid_n, rm, rn, mm, mn, m2 = mm[:, None] & mn[None, :], off = rm[:, None]*S + rn[None, :]
and the loaded tiles fa, fb (f32), ia, ib (i32), ha (bf16), ga (f16), masked by m2 with `other`.

A piece's outputs are (name, dtype, extent); the extent names how big the runner makes the
buffer (tiles.extent): a tile's storage plus a guard, a row or column of partial reductions per
program, one element per program, a few atomic bins.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .tile_exprs import Exprs

KINDS = ("elementwise_f32", "strided", "int_divmod", "argreduce", "dot", "reduce", "half_store", "elementwise_i32",
         "scan", "loop", "atomic", "view")
# divisors of int_divmod: literals of both signs and run-time tiles that are never 0
DIVIDE_BY = ("7", "-7", "3", "-2", "16", "-1", "(ib | 1)", "tl.where(ib == 0, 5, ib)", "((ib & 15) - 8 | 1)")
TWO_D_ONLY = ("dot",)


@dataclass(frozen=True)
class Out:
    name: str
    dtype: str                  # f32, i32, bf16, f16
    extent: str                 # tile, tile2, tile3, rows, cols, progs, bins


@dataclass(frozen=True)
class Piece:
    kind: str
    lines: tuple
    outs: tuple
    uses: frozenset             # what it exercises: coverage categories


def _reduced_store(o: str, r: str, axis, dims: int) -> tuple:
    """Where a reduction's result goes: (store line, extent)."""
    if dims == 1 or axis is None:
        return f"tl.store({o} + pid_m * tl.num_programs(1) + pid_n, {r})", "progs"
    if axis == 1:
        return f"tl.store({o} + pid_n * M + rm, {r}, mask=mm)", "rows"
    return f"tl.store({o} + pid_m * N + rn, {r}, mask=mn)", "cols"


def make_piece(kind: str, k: int, rng: random.Random, dims: int, blocks: tuple) -> Piece:
    ex = Exprs(rng)
    o = f"o{k}"
    ty = rng.choice("fi")
    oty = "f32" if ty == "f" else "i32"
    uses = {f"piece:{kind}", f"dims:{dims}"}
    if kind in ("elementwise_f32", "elementwise_i32"):
        ty, oty = ("f", "f32") if kind == "elementwise_f32" else ("i", "i32")
        lines = (f"y{k} = {ex.of(ty, 3)}", f"tl.store({o} + off, y{k}, mask=m2)")
        outs = (Out(o, oty, "tile"),)
    elif kind == "int_divmod":      # C's // and % (toward zero, the dividend's sign) in 8, 32 and 64 bits
        width = rng.choice(("int32", "int32", "int64", "int8"))
        a = ex.of("i", 1) if rng.random() < 0.5 else "ia"
        d = rng.choice(DIVIDE_BY)
        tile_d = not d.lstrip("-").isdigit()
        if width == "int8" and tile_d:
            d = f"(({d}) | 1)"                       # | 1: its low byte is not 0
        lines = [f"n{k} = {a}" if width == "int32" else f"n{k} = ({a}).to(tl.{width})",
                 f"d{k} = {d}" if width == "int32" or not tile_d else f"d{k} = ({d}).to(tl.{width})"]
        for op, out in (("//", o), ("%", f"{o}b")):
            lines.append(f"tl.store({out} + off, (n{k} {op} d{k}).to(tl.int32), mask=m2)")
        outs = (Out(o, "i32", "tile"), Out(f"{o}b", "i32", "tile"))
        uses.add(f"divmod:{width}:{'tile' if tile_d else 'const'}")
        lines = tuple(lines)
    elif kind == "half_store":      # the store casts f32 to the tensor's 16-bit type (nearest even)
        half = rng.choice(("bf16", "f16"))
        value = ex.of('f', 2)
        if rng.random() < 0.3:
            value = f"({value}).to(tl.{'bfloat16' if half == 'bf16' else 'float16'})"
        lines = (f"y{k} = {value}", f"tl.store({o} + off, y{k}, mask=m2)")
        outs = (Out(o, half, "tile"),)
        uses.add(f"store:{half}")
    elif kind == "reduce":
        fn = rng.choice(("sum", "max", "min"))
        axis = rng.choice((0, 1, None)) if dims == 2 else rng.choice((0, None))
        store, extent = _reduced_store(o, f"r{k}", axis, dims)
        lines = (f"r{k} = tl.{fn}({ex.of(ty, 2)}, axis={axis})", store)
        outs = (Out(o, oty, extent),)
        uses.add(f"reduce:{fn}:{ty}:axis{axis}")
    elif kind == "argreduce":       # values with many ties: the lowest index must win
        fn = rng.choice(("argmax", "argmin"))
        axis = rng.choice((0, 1)) if dims == 2 else 0
        value = rng.choice(("(ia & 3)", "(ia % 3).to(tl.float32)", "tl.where(fa > 0, 1.0, 0.0)",
                            "(ib >> 29)", ex.of('f', 1), ex.of('i', 1)))
        store, extent = _reduced_store(o, f"r{k}", axis, dims)
        lines = (f"r{k} = tl.{fn}({value}, axis={axis})", store)
        outs = (Out(o, "i32", extent),)
        uses.add(f"argreduce:{fn}:axis{axis}")
    elif kind == "scan":
        axis = rng.choice((0, 1)) if dims == 2 else 0
        rev = ", reverse=True" if rng.random() < 0.25 else ""
        lines = (f"c{k} = tl.cumsum({ex.of(ty, 2)}, axis={axis}{rev})", f"tl.store({o} + off, c{k}, mask=m2)")
        outs = (Out(o, oty, "tile"),)
        uses.add(f"scan:{ty}:axis{axis}")
    elif kind == "dot":
        return _dot(k, rng, blocks, uses)
    elif kind == "loop":
        return _loop(k, rng, ex, ty, oty, dims, uses)
    elif kind == "atomic":
        op = rng.choice(("add", "max", "min", "and", "or", "xor", "xchg"))
        idx = rng.choice(("off % 13", "(ia & 7)", "rm % 5" if dims == 1 else "rm[:, None] % 5 + rn[None, :] % 3"))
        lines = (f"old{k} = tl.atomic_{op}({o} + ({idx}), {ex.of('i', 1)}, mask=m2)",
                 f"tl.store({o}b + off, old{k}, mask=m2)")
        outs = (Out(o, "i32", "bins"), Out(f"{o}b", "i32", "tile"))
        uses.add(f"atomic:{op}")
    elif kind == "strided":
        c = rng.choice((2, 3))
        d = rng.randrange(0, c)
        src = rng.choice((("xf", "0.5", "f"), ("xi", "3", "i")))
        load = f"s{k} = tl.load({src[0]} + off * {c} + {d}, mask=m2, other={src[1]})"
        ex2 = Exprs(rng, leaves_f=(f"s{k}", "fa") if src[2] == "f" else ("fa",),
                    leaves_i=(f"s{k}", "ia") if src[2] == "i" else ("ia",))
        value = ex2.of(src[2], 1)
        c2 = rng.choice((1, 2, 3))
        store = f"tl.store({o} + off * {c2} + {c2 - 1}, {value}, mask=m2)"
        lines = (load, store)
        outs = (Out(o, "f32" if src[2] == "f" else "i32", "tile" if c2 == 1 else f"tile{c2}"),)
        uses.add(f"strided:load{c}:store{c2}")
        ex.uses |= ex2.uses
    else:
        lines, outs = _view(k, rng, ex, dims, blocks, uses)
    return Piece(kind, lines, outs, frozenset(uses | ex.uses))


def _dot(k: int, rng: random.Random, blocks: tuple, uses: set) -> Piece:
    """acc over K in blocks of BK, every edge masked; f32 or bf16/f16 operands; acc= or +=.

    The operands come from `xd`, the input without NaNs (infinities kept): where a NaN product
    meets a NaN accumulator of the other sign, native tl.dot keeps the accumulator's NaN and the
    reference the product's (a finding of this family, tests/test_fuzz_tiles.py::
    test_found_dot_nan_sign; equal by DESIGN §3, not under --strict-nan); inf*0 still makes
    NaNs in the chain, all the host's one default NaN."""
    o = f"o{k}"
    cast = rng.choice(("", "", ".to(tl.bfloat16)", ".to(tl.float16)"))
    acc = rng.choice(("acc", "plus"))
    update = f"acc{k} = tl.dot(a{k}{cast}, b{k}{cast}, acc{k})" if acc == "acc" else \
        f"acc{k} += tl.dot(a{k}{cast}, b{k}{cast})"
    # an operand recomputed at its uses (a cheap pure value: native_lower's `inline`), which
    # native once read from an array it never wrote (tests/test_fuzz_tiles.py test_found_*)
    scaled = rng.random() < 0.3
    lines = (f"acc{k} = tl.zeros((BM, BN), dtype=tl.float32)",
             "for k0 in range(0, K, BK):",
             "    rk = k0 + tl.arange(0, BK)",
             f"    a{k} = tl.load(xd + rm[:, None] * K + rk[None, :], mask=mm[:, None] & (rk[None, :] < K), "
             "other=0.0)",
             f"    b{k} = tl.load(xd + rk[:, None] * N + rn[None, :] + 7, mask=(rk[:, None] < K) & mn[None, :], "
             "other=0.0)",
             *([f"    a{k} = a{k} * 0.5 + 1.0"] if scaled else []),
             f"    {update}",
             f"tl.store({o} + off, acc{k}, mask=m2)")
    uses |= {f"dot:{cast or 'f32'}:{acc}" + (":computed" if scaled else "")}
    return Piece("dot", lines, (Out(o, "f32", "tile"),), frozenset(uses))


def _loop(k: int, rng: random.Random, ex: Exprs, ty: str, oty: str, dims: int, uses: set) -> Piece:
    """A loop-carried tile and a loop-carried pointer tile, T trips (a scalar argument, 0 to 4)."""
    o = f"o{k}"
    src, other = ("xf", "0.5") if ty == "f" else ("xi", "1")
    step = rng.choice(("S", "1", "BM"))
    zero = "tl.float32" if ty == "f" else "tl.int32"
    inner = Exprs(rng, leaves_f=(f"v{k}", "fa"), leaves_i=(f"v{k}", "ia")) if ty == "f" else \
        Exprs(rng, leaves_f=("fa",), leaves_i=(f"v{k}", "ia"))
    comb = rng.choice(("acc", "max"))
    step_fn = f"tl.maximum(acc{k}, {inner.of(ty, 1)})" if comb == "max" else \
        f"acc{k} * {'0.5' if ty == 'f' else '3'} + {inner.of(ty, 1)}"
    start = rng.choice(("range(T)", "range(1, T + 1)", "range(T - 1, -1, -1)"))
    shape = "(BM, BN)" if dims == 2 else "(BM,)"
    lines = (f"acc{k} = tl.zeros({shape}, dtype={zero}) + {ex.of(ty, 1)}",
             f"p{k} = {src} + off",
             f"for t in {start}:",
             f"    v{k} = tl.load(p{k}, mask=m2, other={other})",
             f"    acc{k} = {step_fn}",
             f"    p{k} += {step}",
             f"tl.store({o} + off, acc{k}, mask=m2)")
    uses |= {f"loop:{ty}:{comb}:{start.split('(')[1].split(')')[0].count(',')}", f"loop:step:{step}"}
    ex.uses |= inner.uses
    return Piece("loop", lines, (Out(o, oty, "tile"),), frozenset(uses))


def _view(k: int, rng: random.Random, ex: Exprs, dims: int, blocks: tuple, uses: set):
    o = f"o{k}"
    bm = blocks[0]
    if dims == 1:
        form = "permute1d" if bm >= 2 else "expand1d"
        if form == "permute1d":
            y = f"tl.reshape(tl.trans(tl.reshape({ex.of('f', 1)}, (2, BM // 2))), (BM,))"
        else:
            y = f"tl.sum(tl.broadcast_to(({ex.of('f', 1)})[:, None], (BM, 2)), axis=1)"
        uses.add(f"view:{form}")
        return (f"y{k} = {y}", f"tl.store({o} + off, y{k}, mask=m2)"), (Out(o, "f32", "tile"),)
    form = rng.choice(("trans", "reshape", "outer", "expand"))
    uses.add(f"view:{form}")
    if form == "trans":
        lines = (f"t{k} = tl.load(xf + rn[:, None] * S + rm[None, :], mask=mn[:, None] & mm[None, :], other=-1.0)",
                 f"y{k} = tl.trans(t{k}) {rng.choice('+*-')} {ex.of('f', 1)}",
                 f"tl.store({o} + off, y{k}, mask=m2)")
    elif form == "reshape":
        lines = (f"y{k} = tl.reshape({ex.of('f', 1)}, (BN, BM))",
                 f"tl.store({o} + tl.reshape(off, (BN, BM)), y{k}, mask=tl.reshape(m2, (BN, BM)))")
    elif form == "outer":
        lines = (f"x{k} = tl.load(xf + rm, mask=mm, other=1.0)",
                 f"z{k} = tl.load(xi + rn, mask=mn, other=2)",
                 f"y{k} = x{k}[:, None] * z{k}[None, :] + {ex.of('f', 1)}",
                 f"tl.store({o} + off, y{k}, mask=m2)")
    else:
        lines = (f"x{k} = tl.load(xf + rn * 2, mask=mn, other=0.0)",
                 f"y{k} = tl.broadcast_to(tl.expand_dims(x{k}, 0), (BM, BN)) - {ex.of('f', 1)}",
                 f"tl.store({o} + off, y{k}, mask=m2)")
    return lines, (Out(o, "f32", "tile"),)

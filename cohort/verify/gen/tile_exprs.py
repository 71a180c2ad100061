"""Random tile expressions as Triton source text, for the tile-program family (tiles.py).

An expression is drawn for one element type, f32 ("f") or i32 ("i"), over the tiles a piece
has loaded (`fa`, `fb`: f32; `ia`, `ib`: i32; `ha`: bf16, `ga`: f16) and literals. What it
exercises: Triton's promotion (an i32 tile with an f32 tile or a float literal is f32, a
weak int literal takes the tile's type, bf16 arithmetic widens and rounds back), comparisons
and `tl.where`, integer `//` and `%` (C semantics, both signs), shifts and bitwise ops on
signed and unsigned tiles, casts (f32 <-> bf16/f16, f32 -> i32 saturating, i32 -> f32), and
the math functions. Every expression is well defined by construction: a divisor is never 0
(`| 1` or a non-zero literal), a shift amount is masked into 0..bits-1.
"""
from __future__ import annotations

import random
import re

F_LITERALS = ("0.5", "-3.0", "1e-3", "2.5", "0.0", "-0.0", "7.0", "1e30", "-1.25")
I_LITERALS = ("3", "-7", "1", "0", "255", "-2", "65535", "-2147483647")
DIVISORS = ("7", "-3", "2", "-1", "16", "5", "-8")
MATH = ("exp", "log", "sqrt", "sin", "cos", "exp2", "log2", "rsqrt", "sigmoid", "erf", "abs")
CMPS = ("<", "<=", "==", "!=", ">", ">=")
_TILE = re.compile(r"\b(fa|fb|ia|ib|ha|ga|off|rm|rn|[svxz]\d+)\b")


def tile(text: str, ty: str) -> str:
    """`text` as a tile: a literal (or an expression of literals alone) is added to a loaded tile,
    so `.to()`, math, reductions and shifts never meet a Python number."""
    return text if _TILE.search(text) else f"({'fa' if ty == 'f' else 'ia'} + {text})"


class Exprs:
    """Draws expressions from `rng`; `uses` collects the operations drawn (coverage)."""

    def __init__(self, rng: random.Random, leaves_f=("fa", "fb"), leaves_i=("ia", "ib"), halves=True):
        self.rng = rng
        self.leaves_f, self.leaves_i, self.halves = leaves_f, leaves_i, halves
        self.uses: set = set()

    def _use(self, what: str, text: str) -> str:
        self.uses.add(what)
        return text

    def f(self, depth: int = 2) -> str:
        r = self.rng
        if depth <= 0 or r.random() < 0.2:
            return self.f_leaf()
        k = r.randrange(12)
        a = tile(self.f(depth - 1), "f")
        if k <= 2:
            op = r.choice("+-*/%")
            b = self.f(depth - 1) if r.random() < 0.7 else r.choice(F_LITERALS)
            return self._use(f"f{op}", f"({a} {op} {b})")
        if k == 3:
            fn = r.choice(MATH)
            return self._use(f"math:{fn}", f"tl.{fn}({a})")
        if k == 4:
            return self._use("f:minmax", f"tl.{r.choice(('maximum', 'minimum'))}({a}, {self.f(depth - 1)})")
        if k == 5:
            return self._use("f:where", f"tl.where({self.cond(depth - 1)}, {a}, {self.f(depth - 1)})")
        if k == 6:
            half = r.choice(("bfloat16", "float16"))
            return self._use(f"cast:f32->{half}", f"{a}.to(tl.{half}).to(tl.float32)")
        if k == 7:      # promotion: an i32 tile with an f32 tile, or with a float literal
            i = tile(self.i(depth - 1), "i")
            return self._use("promote:i32+f32", f"({i} {r.choice('+-*')} {a})" if r.random() < 0.5
                             else f"({i} * {r.choice(F_LITERALS)})")
        if k == 8:
            return self._use("i32->f32", f"{tile(self.i(depth - 1), 'i')}.to(tl.float32)")
        if k == 9:
            return self._use("f:fma", f"tl.fma({a}, {self.f(depth - 1)}, {self.f(depth - 1)})")
        if k == 10 and self.halves:     # arithmetic in bf16/f16: widened, computed in f32, rounded back
            h = r.choice(("ha", "ga"))
            return self._use(f"half:{h}", f"({h} {r.choice('+-*')} {h}).to(tl.float32)")
        return self._use("f:neg", f"(-{a})")

    def f_leaf(self) -> str:
        r = self.rng
        k = r.randrange(8)
        if k < 4:
            return r.choice(self.leaves_f)
        if k == 4:
            return r.choice(F_LITERALS)
        if k == 5 and self.halves:
            return self._use("load:half", f"{r.choice(('ha', 'ga'))}.to(tl.float32)")
        return f"{r.choice(self.leaves_i)}.to(tl.float32)"

    def i(self, depth: int = 2) -> str:
        r = self.rng
        if depth <= 0 or r.random() < 0.2:
            return self.i_leaf()
        k = r.randrange(11)
        a = tile(self.i(depth - 1), "i")
        if k <= 1:
            op = r.choice("+-*")
            return self._use(f"i{op}", f"({a} {op} {self.i(depth - 1) if r.random() < 0.7 else r.choice(I_LITERALS)})")
        if k == 2:      # C division and remainder, both signs; the divisor never 0
            op = r.choice(("//", "%"))
            d = r.choice(DIVISORS) if r.random() < 0.5 else f"({self.i(depth - 1)} | 1)"
            return self._use(f"i{op}", f"({a} {op} {d})")
        if k == 3:
            return self._use("i:bitwise", f"({a} {r.choice('&|^')} {self.i(depth - 1)})")
        if k == 4:
            op = r.choice(("<<", ">>"))
            return self._use(f"i{op}", f"({a} {op} ({self.i(depth - 1)} & 31))")
        if k == 5:      # unsigned: logical shift right, unsigned division
            if r.random() < 0.5:
                return self._use("u32>>", f"({a}.to(tl.uint32) >> {r.randrange(1, 31)}).to(tl.int32)")
            d = f"({tile(self.i_leaf(), 'i')}.to(tl.uint32) | {r.choice(('3', '8', '1'))})"     # u32 // u32: never 0
            return self._use("u32//", f"({a}.to(tl.uint32) {r.choice(('//', '%'))} {d}).to(tl.int32)")
        if k == 6:
            return self._use("i:minmax", f"tl.{r.choice(('maximum', 'minimum'))}({a}, {self.i(depth - 1)})")
        if k == 7:
            return self._use("i:where", f"tl.where({self.cond(depth - 1)}, {a}, {self.i(depth - 1)})")
        if k == 8:
            return self._use("f32->i32", f"{tile(self.f(depth - 1), 'f')}.to(tl.int32)")
        if k == 9:      # through i64 and i8: wrap-around, sign extension
            w = r.choice(("int64", "int8", "int16"))
            return self._use(f"cast:i32->{w}", f"({a}.to(tl.{w}) * {r.choice(('3', '-5', '1'))}).to(tl.int32)")
        return self._use("i:neg", f"(-{a})")

    def i_leaf(self) -> str:
        r = self.rng
        k = r.randrange(6)
        if k < 4:
            return r.choice(self.leaves_i)
        return r.choice(I_LITERALS)

    def cond(self, depth: int = 1) -> str:
        r = self.rng
        if r.random() < 0.5:
            c = f"({tile(self.f(depth), 'f')} {r.choice(CMPS)} {self.f(depth)})"
        else:
            c = f"({tile(self.i(depth), 'i')} {r.choice(CMPS)} {self.i(depth)})"
        if r.random() < 0.2:
            c = f"({c} {r.choice('&|')} ({self.i_leaf()} > 0))"
        self.uses.add("cmp")
        return c

    def of(self, ty: str, depth: int = 2) -> str:
        """An expression of type `ty` that is a tile (never a bare literal)."""
        return tile(self.f(depth) if ty == "f" else self.i(depth), ty)

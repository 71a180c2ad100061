"""Where the generator's choices come from.

The generator makes every choice through a *draw source*: an integer in a range,
an f32 literal, a permutation, and `span` around a piece of generation. Two
sources exist:

- `HypothesisDraws`: choices are Hypothesis draws, so a failing case shrinks to
  a minimal one (every table's first option is its simplest; a span per
  statement and per expression node lets the shrinker delete or replace them
  whole). This is what `cases()` uses.
- `SeededDraws`: choices come from a splitmix64 stream of an integer seed, pure
  Python and stable forever, so `generate(seed)` is one program per seed on any
  machine, with no Hypothesis run around it (campaigns that hand out batches of
  seeds, replays from a seed).
"""
from __future__ import annotations

import struct

from hypothesis import strategies as st

_M64 = 0xFFFFFFFFFFFFFFFF
# f32 literals worth more than their share of random bit patterns (Hypothesis' own
# float strategy weights such values similarly)
_F32_NASTY = (0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45,
              1.1754942e-38, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 0.5, 2.0, 65504.0, 16777216.0,
              16777217.0, 2147483648.0, -2147483904.0, 4294967296.0)


def _f32_from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _round_f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@st.composite
def _spanned(draw, source, fn, args):
    """Run fn(*args) inside its own Hypothesis span (drawing through this span's draw)."""
    outer, source.draw = source.draw, draw
    try:
        return fn(*args)
    finally:
        source.draw = outer


class HypothesisDraws:
    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def f32_any(self) -> float:
        return self.draw(st.floats(width=32, allow_nan=True, allow_infinity=True))

    def f32_between(self, lo: float, hi: float) -> float:
        return self.draw(st.floats(lo, hi, width=32))

    def permutation(self, n: int) -> list:
        return list(self.draw(st.permutations(range(n))))

    def span(self, fn, *args):
        return self.draw(_spanned(self, fn, args))


class SeededDraws:
    """splitmix64 over (seed, counter): the same choices for a seed forever."""

    def __init__(self, seed: int):
        self.state = (int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _M64

    def next64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return z ^ (z >> 31)

    def integer(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        if span <= 1:
            return lo
        if span <= 1 << 64:
            return lo + (self.next64() * span >> 64)          # multiply-shift: no modulo bias to speak of
        return lo + ((self.next64() << 64 | self.next64()) % span)

    def f32_any(self) -> float:
        r = self.next64()
        if r & 3 == 0:
            return _F32_NASTY[(r >> 8) % len(_F32_NASTY)]
        return _f32_from_bits(r >> 32)

    def f32_between(self, lo: float, hi: float) -> float:
        r = self.next64()
        if r & 7 == 0:                      # the ends and zero, as Hypothesis likes to try
            return (lo, hi, 0.0 if lo <= 0.0 <= hi else lo)[(r >> 8) % 3]
        x = _round_f32(lo + (hi - lo) * ((r >> 11) / float(1 << 53)))
        return min(max(x, lo), hi)

    def permutation(self, n: int) -> list:
        out = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.integer(0, i)
            out[i], out[j] = out[j], out[i]
        return out

    def span(self, fn, *args):
        return fn(*args)

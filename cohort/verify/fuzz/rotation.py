"""Which variants of the matrix one fuzz program runs.

A program's cost is its compiles (one LLVM module per variant, 90% of a campaign's
time), so a campaign that runs every variant on every program checks few programs.
Compiler fuzzers (Csmith, YARPGen) run each program under a random subset of
their option space and get the breadth from the number of programs. Here a
program runs `whole` (the scalar build, the cheapest compile and a check of every
operation at width 1) plus `per_program - 1` variants drawn from the rest of its
applicable matrix by a shuffle seeded with the program's key: every applicable
variant has the same chance on every program, the draw is the same in every
process (a cluster worker, a resumed campaign, a replay), and a failure's minimal
case is still rerun on the whole matrix to name every variant that shares it.
"""
from __future__ import annotations

import random
from typing import Optional

WHOLE = "whole"


def draw_variants(applicable: list, key: str, per_program: Optional[int]) -> list:
    """The variants of `applicable` (matrix order kept) one program runs; all when
    `per_program` is None or covers them."""
    if per_program is None or per_program >= len(applicable):
        return list(applicable)
    if per_program < 1:
        raise ValueError(f"variants per program must be at least 1, got {per_program}")
    first = [v for v in applicable if v == WHOLE][:per_program]
    rest = [v for v in applicable if v != WHOLE]
    random.Random(key).shuffle(rest)
    chosen = set(first + rest[:per_program - len(first)])
    return [v for v in applicable if v in chosen]

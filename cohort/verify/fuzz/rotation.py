"""Which variants of the matrix one fuzz program runs.

A program's cost is its compiles (one LLVM module per variant, most of a
campaign's time), so a campaign that runs every variant on every program
checks few programs. Compiler fuzzers (Csmith, YARPGen) run each program
under a subset of their option space and get the breadth from the number of
programs. Here a program runs `whole` (the scalar build: the cheapest compile,
every operation at width 1) plus `per_program - 1` variants chosen from the
rest of its applicable matrix to cover as many knob values as they can
(covering-array style): each pick is the variant whose knob values (lanes,
full_packet, predicated, private, and its family: pinned interleave, checks,
pool) are the largest share not yet covered by the program's earlier picks,
ties broken by a shuffle seeded with the program's key. So a program with
private arrays runs both private layouts, both predication modes and both
tail paths, and the rarer families (interleaves, checks, the pool) run on
many programs rather than on a few. The draw is a function of the program's
key and applicable list only: the same in every process (a cluster worker, a
resumed campaign, a replay). A failure's minimal case is rerun on the whole
matrix to name every variant that shares it (campaign.py). A program whose blocks are
not idempotent (it reads what it writes, or updates atomically) first takes a pool variant
that cuts the whole-block body into several tasks (`prefer`, matrix.rerun_sensitive): only
such programs show a block run twice or skipped at a task's edge.
"""
from __future__ import annotations

import random
from typing import Optional

WHOLE = "whole"
KNOBS = ("full_packet", "predicated", "private")


def knob_values(spec: str) -> frozenset:
    """The (knob, value) pairs a fuzz spec (matrix.short_name form) exercises."""
    kv = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    values = {("lanes", kv.get("lanes", "1"))} | {(k, kv[k]) for k in KNOBS if k in kv}
    if "grain" in kv or "workers" in kv:
        values.add(("family", "pool"))
    elif kv.get("checked") == "on" or kv.get("unsafe") == "on":
        values.add(("family", "checks"))
    elif "interleave" in kv:
        values.add(("family", "interleave"))
    return frozenset(values)


def draw_variants(applicable: list, key: str, per_program: Optional[int], prefer=()) -> list:
    """The variants of `applicable` (matrix order kept) one program runs; all when
    `per_program` is None or covers them. `prefer`: variants of which one is picked first after
    `whole` (the program's hazards call for one of them: matrix.rerun_sensitive)."""
    if per_program is None or per_program >= len(applicable):
        return list(applicable)
    if per_program < 1:
        raise ValueError(f"variants per program must be at least 1, got {per_program}")
    chosen = [v for v in applicable if v == WHOLE][:per_program]
    covered = set().union(*(knob_values(v) for v in chosen))
    rest = [v for v in applicable if v != WHOLE]
    rng = random.Random(key)
    rng.shuffle(rest)
    prefer = [v for v in rest if v in set(prefer)]
    if prefer and len(chosen) < per_program:
        chosen.append(prefer[0])
        rest.remove(prefer[0])
        covered |= knob_values(prefer[0])
    while len(chosen) < per_program:
        pick = max(rest, key=lambda v: len(knob_values(v) - covered) / len(knob_values(v)))
        rest.remove(pick)
        chosen.append(pick)
        covered |= knob_values(pick)
    keep = set(chosen)
    return [v for v in applicable if v in keep]

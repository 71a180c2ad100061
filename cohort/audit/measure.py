"""Rounds, balanced orders, p50s and paired ratios (DESIGN §7).

A comparison has columns. Each round runs every column once, taking S
samples per column. Rounds come in complete designs: all permutations for
2-3 columns (AB, BA; the six orders of 3), a Williams design for 4 or more
(every column once in every position, every ordered pair of columns adjacent
equally often: k rows for even k, 2k for odd k). A number of rounds that does
not complete a design is rounded up. The `reversed` design is the seeds'
runtime-E2E protocol: an order and its reverse (every column's mean position
the same; over 2k rounds the rotations of the order make every position
equal too). A column's round figure is the p50 of its samples; its reported time is the median over
rounds. A paired ratio is the median over rounds of candidate/baseline
within the same round - never a ratio of medians - reported with its
min-max range and the number of rounds the candidate won.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np


def williams(k: int) -> list:
    """A Williams design: k rows (even k) or 2k rows (odd k, the rows and their mirror images)."""
    first, lo, hi = [0], 1, k - 1
    while len(first) < k:
        first.append(lo)
        lo += 1
        if len(first) < k:
            first.append(hi)
            hi -= 1
    rows = [tuple((c + i) % k for c in first) for i in range(k)]
    if k % 2:
        rows += [tuple(reversed(r)) for r in rows]
    return rows


DESIGNS = ("balanced", "reversed")


def design(ncols: int, kind: str = "balanced") -> list:
    """One complete design: the column orders of its rounds."""
    if kind not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {kind!r}")
    if ncols < 1:
        return []
    if kind == "reversed":
        base = tuple(range(ncols))
        return [base, tuple(reversed(base))] if ncols > 1 else [base]
    if ncols <= 3:
        return list(itertools.permutations(range(ncols)))   # 2 columns: AB, BA; 3: six orders
    return williams(ncols)


def complete_rounds(ncols: int, rounds: int, kind: str = "balanced") -> int:
    """`rounds` rounded up to whole designs."""
    size = max(1, len(design(ncols, kind)))
    return max(size, -(-int(rounds) // size) * size)


def balanced_orders(ncols: int, rounds: int, kind: str = "balanced") -> list:
    """The column order of each round, in complete designs (`rounds` rounded up to them)."""
    total = complete_rounds(ncols, rounds, kind)
    if kind == "reversed" and ncols > 1:
        out = []
        for j in range(total // 2):   # pair j: rotation j of the order, then its reverse
            base = tuple((c + j) % ncols for c in range(ncols))
            out += [base, tuple(reversed(base))]
        return out
    cycle = design(ncols, kind)
    return [cycle[r % len(cycle)] for r in range(total)]


@dataclass
class Sample:
    column: str
    round: int
    position: int
    ns: list                 # every raw sample, nanoseconds per call
    valid: bool = True       # the column's output and guard bands checked out after these samples
    choice: Optional[str] = None   # what an auto-style column chose for this round (lanes, grain)


@dataclass
class Measurement:
    columns: list
    boundary: str
    samples: list = field(default_factory=list)     # list[Sample]

    def round_figures(self, column: str) -> np.ndarray:
        """p50 of each round's samples, in round order."""
        per = sorted((s for s in self.samples if s.column == column), key=lambda s: s.round)
        return np.array([float(np.median(s.ns)) for s in per])

    def time_ns(self, column: str) -> float:
        return float(np.median(self.round_figures(column)))

    def paired(self, candidate: str, baseline: str) -> dict:
        c, b = self.round_figures(candidate), self.round_figures(baseline)
        r = c / b
        return {"candidate": candidate, "baseline": baseline, "ratio": float(np.median(r)),
                "min": float(r.min()), "max": float(r.max()), "won": int(np.sum(r < 1.0)),
                "rounds": int(len(r))}


def run_rounds(columns: dict, rounds: int, samples: int, boundary: str,
               between: Optional[Callable] = None, progress: Optional[Callable] = None,
               before: Optional[Callable] = None, kind: str = "balanced") -> Measurement:
    """`columns` maps a name to `sample(n) -> list of ns`; returns every raw sample.
    `rounds` is rounded up to complete designs of `kind`.

    `before(column, round)` runs before each column's samples and returns what
    an auto-style column chose for the round (None for the others);
    `between(column, round)` runs after them (e.g. to re-check outputs) and
    returns whether that round's run of the column was valid.
    """
    names = list(columns)
    m = Measurement(names, boundary)
    for rnd, order in enumerate(balanced_orders(len(names), rounds, kind)):
        for pos, ci in enumerate(order):
            name = names[ci]
            choice = None if before is None else before(name, rnd)
            ns = [float(v) for v in columns[name](samples)]
            valid = True if between is None else bool(between(name, rnd))
            m.samples.append(Sample(name, rnd, pos, ns, valid, choice))
            if progress is not None:
                progress()
    return m


# ---------------------------------------------------------------- the Python API boundary

def e2e_loop(call, iters: int, k: int) -> list:
    """k samples, each the mean ns of `iters` back-to-back calls of `call` (timed from Python:
    the python_api boundary; the runtime-E2E boundary is timed natively, backend/runtime.py)."""
    out = []
    for _ in range(k):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            call()
        out.append((time.perf_counter_ns() - t0) / iters)
    return out


def calibrate_e2e(call, target_ns: float = 2e5) -> int:
    """Calls per sample so that one sample lasts about `target_ns`."""
    call()
    t0 = time.perf_counter_ns()
    call()
    once = max(time.perf_counter_ns() - t0, 1)
    return int(max(1, min(1 << 16, target_ns // once)))

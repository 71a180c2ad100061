"""Rounds, balanced orders, p50s and paired ratios (DESIGN §7).

A comparison has columns. Each round runs every column once, taking S
samples per column, in an order chosen so that over the rounds every column
stands in every position equally often (2 columns: AB, BA; 3: the six
permutations; more: the rotations of a Latin square). A column's round
figure is the p50 of its samples; its reported time is the median over
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


def balanced_orders(ncols: int, rounds: int) -> list:
    """The column order of each round, position-balanced over every full cycle."""
    if ncols <= 3:
        cycle = list(itertools.permutations(range(ncols)))   # 2 columns: AB, BA; 3: six orders
    else:
        cycle = [tuple((i + r) % ncols for i in range(ncols)) for r in range(ncols)]
    return [cycle[r % len(cycle)] for r in range(rounds)]


@dataclass
class Sample:
    column: str
    round: int
    position: int
    ns: list                 # every raw sample, nanoseconds per call
    valid: bool = True       # the column's output and guard bands checked out after these samples


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
               between: Optional[Callable] = None, progress: Optional[Callable] = None) -> Measurement:
    """`columns` maps a name to `sample(n) -> list of ns`; returns every raw sample.

    `between(column, round)` runs after each column's samples (e.g. to re-check
    outputs); it returns whether that round's run of the column was valid.
    """
    names = list(columns)
    m = Measurement(names, boundary)
    for rnd, order in enumerate(balanced_orders(len(names), rounds)):
        for pos, ci in enumerate(order):
            name = names[ci]
            ns = [float(v) for v in columns[name](samples)]
            valid = True if between is None else bool(between(name, rnd))
            m.samples.append(Sample(name, rnd, pos, ns, valid))
            if progress is not None:
                progress()
    return m


# ---------------------------------------------------------------- the runtime E2E boundary

def e2e_loop(call, iters: int, k: int) -> list:
    """k samples, each the mean ns of `iters` back-to-back calls of `call` (timed from Python)."""
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

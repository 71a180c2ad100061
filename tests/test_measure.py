"""Designs of rounds (DESIGN §7): complete, balanced in positions and in adjacent ordered pairs."""
import itertools
from collections import Counter

import pytest

from cohort.audit.measure import balanced_orders, complete_rounds, design, run_rounds


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_every_design_is_balanced_in_positions_and_adjacent_pairs(k):
    rows = design(k)
    assert len(rows) == (2 if k == 2 else 6 if k == 3 else k if k % 2 == 0 else 2 * k)
    assert all(sorted(r) == list(range(k)) for r in rows)
    for pos in range(k):   # every column equally often in every position
        counts = Counter(r[pos] for r in rows)
        assert set(counts) == set(range(k)) and len(set(counts.values())) == 1
    pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(k - 1))
    every = list(itertools.permutations(range(k), 2))
    assert set(pairs) == set(every) and len(set(pairs.values())) == 1   # every ordered pair, equally often
    if k >= 4 and k % 2 == 0:
        assert set(pairs.values()) == {1}    # a Williams design: each ordered pair adjacent once


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_rounds_are_rounded_up_to_complete_designs(k):
    size = len(design(k))
    assert complete_rounds(k, 1) == size
    assert complete_rounds(k, size + 1) == 2 * size
    orders = balanced_orders(k, size + 1)
    assert len(orders) == 2 * size and orders[:size] == orders[size:] == design(k)


def test_the_reversed_design_is_an_order_and_its_reverse():
    assert balanced_orders(2, 2, "reversed") == [(0, 1), (1, 0)]
    assert balanced_orders(3, 2, "reversed") == [(0, 1, 2), (2, 1, 0)]
    assert complete_rounds(3, 3, "reversed") == 4
    six = balanced_orders(3, 6, "reversed")   # rotations: every position equal over 2k rounds
    for pos in range(3):
        assert Counter(r[pos] for r in six) == {0: 2, 1: 2, 2: 2}
    for rows in (six[:2], six):               # every column's mean position the same
        assert len({sum(r.index(c) for r in rows) for c in range(3)}) == 1


def test_run_rounds_records_the_choice_of_each_round():
    m = run_rounds({"a": lambda k: [1.0] * k, "b": lambda k: [2.0] * k}, 1, 2, "runtime_e2e",
                   before=lambda c, r: f"{c}{r}" if c == "b" else None)
    assert len(m.samples) == 2 * 2
    assert {(s.column, s.round, s.choice) for s in m.samples} == {("a", 0, None), ("a", 1, None),
                                                                   ("b", 0, "b0"), ("b", 1, "b1")}

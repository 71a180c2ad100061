"""Issue 28's generator breadth: accesses at the edge of their buffer (one past it: an
expected-error program that every checking build must report as the interpreter does),
launch sizes around block and packet multiples, store groups spelled with constants."""
from __future__ import annotations

from collections import Counter
from functools import lru_cache

from cohort.refimpl.ir import Op, Store, walk_expr, walk_stmts
from cohort.verify.execute import error_facts, execute, reference
from cohort.verify.gen import generate

SEEDS = range(120)


@lru_cache(maxsize=1)
def _programs():
    return [generate(s) for s in SEEDS]


def test_edge_programs_are_generated_and_well_defined():
    kinds = Counter()
    for case in _programs():
        ref, why = reference(case)
        edge = any(b.name in ("xe", "ye") for b in case.buffers)
        if ref is None:
            assert error_facts(why[1]) is not None, why   # only out-of-bounds, never a discard
            assert edge, why                              # and only where the generator meant it
            kinds["error"] += 1
        else:
            kinds["edge" if edge else "plain"] += 1
    assert kinds["error"] >= 10 and kinds["edge"] >= 10, kinds


def test_launch_sizes_around_block_multiples_with_several_blocks():
    near = Counter()
    for case in _programs():
        k, d = divmod(case.n, case.block)
        if case.n > case.block and (d in (0, 1, case.block - 1)):
            near[d == 0] += 1
    assert near[True] >= 5 and near[False] >= 5, near


def test_store_groups_are_spelled_with_constants_of_either_sign():
    spelled = Counter()
    for case in _programs():
        for s in walk_stmts(case.kernel.body):
            if isinstance(s, Store) and s.index.op is Op.SUB and s.index.src[1].op is Op.CONST:
                spelled["sub"] += 1
            if isinstance(s, Store) and any(n.op is Op.ADD and n.src[1].op is Op.CONST and n.src[0].op is Op.ADD
                                            and n.src[0].src[1].op is Op.CONST for n in walk_expr(s.index)):
                spelled["split"] += 1
    assert spelled["sub"] >= 3 and spelled["split"] >= 3, spelled


def test_an_expected_error_program_reports_the_same_error_everywhere():
    case = next(c for c in _programs() if reference(c)[0] is None)
    res = execute(case, ["whole", "lanes=4,full_packet=on,predicated=on,private=cohort",
                         "whole,grain=1,workers=2", "whole,unsafe=on"],
                  full=False)
    assert res["expected_error"] and res["discard"] is None
    st = {v: r["status"] for v, r in res["variants"].items()}
    assert st.pop("whole,unsafe=on") == "unsupported"
    assert set(st.values()) == {"ok"}, res
    assert {r["checksum"] for r in res["variants"].values() if r["status"] == "ok"} == {res["reference_checksum"]}

"""The statement protocol (ir.STMTDEFS): every statement kind is one record, every
pass with a rule per kind has one for each, and the generic passes (walk, map,
JSON, printing, the IR dump) keep every kind intact. A new kind that a pass
misses fails here."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cohort import (
    Buffer,
    Const,
    atomic_add,
    barrier,
    block_id,
    block_sum,
    f32,
    i32,
    kernel,
    private,
    shared,
    thread_id,
)
from cohort.backend.lowering.stmts import STMT_RULES
from cohort.refimpl.interpreter import RUN, interpret
from cohort.refimpl.ir import (
    STMT_BY_TAG,
    STMTDEFS,
    Field,
    map_stmts,
    rewrite_stmts,
    stmt_bodies,
    stmt_def,
    stmt_exprs,
    walk_stmts,
)
from cohort.refimpl.printer import format_kernel
from cohort.refimpl.spec import CHECK
from cohort.verify.corpus import kernel_digest, kernel_from_json, kernel_to_json
from cohort.verify.gen.pysource import ir_text, source_round_trip
from cohort.verify.gen.steer import STATEMENTS


@kernel(block=32)
def EVERY_KIND(x: Buffer[f32], y: Buffer[f32], h: Buffer[i32], C: Const[int], s: f32):
    """One statement of every kind (keep it so: test_the_example_kernel_has_every_kind)."""
    t = thread_id()
    p = private(f32, C)
    tile = shared(f32, 32)
    acc = 0.0
    for j in range(0, C, 1):
        p[j] = x[(t + j) % 32 + block_id() * 32] * s
        acc += p[j]
    tile[t] = acc
    barrier()
    total = block_sum(acc)
    if t % 2 == 0:
        y[block_id() * 32 + t] = total + tile[31 - t]
    else:
        y[block_id() * 32 + t] = acc
    atomic_add(h, t % 4, 1)


@pytest.mark.parametrize("table,name", [(RUN, "interpreter.RUN"), (CHECK, "spec.CHECK"),
                                        (STMT_RULES, "lowering.stmts.STMT_RULES")])
def test_every_pass_table_has_every_kind(table, name):
    missing = set(STMTDEFS) - set(table)
    extra = set(table) - set(STMTDEFS)
    assert not missing, f"{name} has no rule for {sorted(c.__name__ for c in missing)}"
    assert not extra, f"{name} has rules for non-statements {sorted(c.__name__ for c in extra)}"


@pytest.mark.parametrize("cls", list(STMTDEFS), ids=lambda c: c.__name__)
def test_record_matches_the_dataclass(cls):
    d = STMTDEFS[cls]
    names = [f.name for f in dataclasses.fields(cls)]
    assert names[-1] == "loc"
    assert names[:-1] == [f for f, _, _ in d.fields], "the record's fields are the constructor's, in order"
    assert STMT_BY_TAG[d.tag] is d
    for f, kind, enum_cls in d.fields:
        assert (enum_cls is not None) == (kind is Field.ENUM)
    for f in (d.defines, d.writes):
        assert f is None or f in d.names(Field.NAME)
    assert {f for f, _ in d.keywords} <= set(d.names(Field.BODY))


def test_the_example_kernel_has_every_kind():
    k = EVERY_KIND.ir
    kinds = {type(s) for s in walk_stmts(k.body)}
    assert kinds == set(STMTDEFS), f"add {sorted(c.__name__ for c in set(STMTDEFS) - kinds)} to the example"
    assert set(STATEMENTS) == {c.__name__ for c in STMTDEFS}


def test_generic_passes_keep_every_kind():
    k = EVERY_KIND.ir
    # JSON: the same kernel, node sharing and all
    back = kernel_from_json(kernel_to_json(k))
    assert kernel_digest(back) == kernel_digest(k)
    assert ir_text(back) == ir_text(k)
    # the printer's text is valid source for the same IR
    text, k2, diff = source_round_trip(k)
    assert diff is None, diff
    # the identity map and rewrite rebuild every statement of the same kind and fields
    same = map_stmts(k.body, lambda e: e)
    assert [type(s) for s in walk_stmts(same)] == [type(s) for s in walk_stmts(k.body)]
    for a, b in zip(walk_stmts(same), walk_stmts(k.body)):
        assert stmt_exprs(a) == stmt_exprs(b)
        assert (a is not b) == bool(stmt_exprs(b) or stmt_bodies(b)), "a field-less statement is kept"
        assert len(stmt_bodies(a)) == len(stmt_bodies(b))
    assert format_kernel(k) == format_kernel(dataclasses.replace(k, body=rewrite_stmts(k.body, lambda s: None)))


def test_a_kind_without_a_record_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Nope:
        x: int = 0
    with pytest.raises(TypeError, match="not a statement"):
        stmt_def(Nope())


def test_every_kind_runs_and_compiles():
    from cohort.backend.compiler import compile_kernel
    n = 64
    args = dict(x=np.arange(n, dtype=np.float32), y=np.zeros(n, np.float32), h=np.zeros(4, np.int32),
                s=np.float32(0.5))
    want = interpret(EVERY_KIND.ir, n, {k: v.copy() if isinstance(v, np.ndarray) else v
                                        for k, v in args.items()}, {"C": 3})
    for variant in ("whole", "packet"):
        got = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
        compile_kernel(EVERY_KIND, {"C": 3}, variant, n=n).launch(n, got)
        assert got["y"].tobytes() == want["y"].tobytes(), variant
        assert got["h"].tobytes() == want["h"].tobytes(), variant
    assert want["h"].tolist() == [16, 16, 16, 16]

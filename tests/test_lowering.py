"""The lowering's structure: one rule per operation and per statement, one
lowering for every width (whole is width 1), the mask as a context.
Whether the code is right is the business of the differential tests
(test_backend_whole, test_variants, test_safety, the corpus)."""
import re

import pytest
from llvmlite import ir as llir

from cohort import Buffer, f32, global_id, kernel
from cohort.backend import codegen
from cohort.backend.lower_ops import LOWER
from cohort.backend.lowering import Lowering
from cohort.backend.lowering.exprs import EXPR_RULES
from cohort.backend.variant import parse_variant
from cohort.refimpl import semantics
from cohort.refimpl.ir import Op
from cohort.refimpl.specialize import specialize

# Every Op is an expression node (statements are classes of their own); a future
# op that is not, say so here with the reason.
NOT_EXPRESSIONS = frozenset()


def test_every_expression_op_has_one_lowering_rule():
    missing = set(Op) - NOT_EXPRESSIONS - set(EXPR_RULES)
    assert not missing, f"ops without a lowering rule: {sorted(op.name for op in missing)}"
    assert set(EXPR_RULES) <= set(Op)


def test_arithmetic_rules_mirror_the_semantics_table():
    assert set(LOWER) == set(semantics.ALU)
    assert all(op in EXPR_RULES for op in LOWER)


@kernel(block=8)
def axpy(x: Buffer[f32], y: Buffer[f32], a: f32):
    i = global_id()
    if i < len(x):
        v = x[i] * a if i % 2 == 0 else x[i]
        for j in range(i % 3):
            v = v + 1.0
        y[i] = v


def lowered(variant: str) -> tuple:
    L = Lowering(specialize(axpy.ir, {}), "entry", codegen.resolve(parse_variant(variant)))
    return L, str(L.lower())


def test_whole_is_the_width_one_case():
    L, text = lowered("whole")
    assert L.W == 1 and L.interleave == 1 and L.lane_claims == {}
    # every helper is the identity at width 1: no one-lane (or any) vectors in the code
    assert not re.search(r"<\d+ x ", text), "vector types in a width-1 lowering"
    P, ptext = lowered("lanes=4,interleave=1")
    assert P.W == 4 and re.search(r"<4 x float>", ptext)
    kinds = {claim.site.value for claim in P.lane_claims.values()}
    assert {"load", "store", "if"} <= kinds


@pytest.mark.parametrize("variant", ["whole", "lanes=8,interleave=1"])
def test_the_mask_is_a_context_restored_on_the_way_out(variant):
    L, _ = lowered(variant)
    assert L.mask is None and L.cmask is None
    cond = llir.Constant(L.vty(llir.IntType(1)), None)
    with L.masked(cond, merge=False) as m:
        assert L.mask is m and L.cmask is None
        with pytest.raises(RuntimeError), L.masked(cond):
            assert L.cmask is not None
            raise RuntimeError("leave the context early")
        assert L.mask is m and L.cmask is None
    assert L.mask is None and L.cmask is None


@kernel(block=8)
def pairs_offset(x: Buffer[f32], y: Buffer[f32], z: Buffer[f32]):
    # the second index is (2i + 0) + 1, as specialisation leaves rope_pairs' HALF * (R//2 - 1) + 1
    i = global_id()
    y[2 * i] = x[2 * i] * 2.0
    y[2 * i + 0 * 0 + 1] = x[2 * i + 1] * 3.0
    z[i] = x[i]


def test_a_store_pair_up_to_trailing_constants_is_one_interleaved_store():
    """y[b] and y[(b + 0) + 1] are the pair y[b], y[b + 1]: one shuffle and one vector
    store, not two scatters (rope_pairs' stores were scatters until the offset was read
    through trailing constants)."""
    import numpy as np

    from cohort.backend.compiler import compile_kernel
    ck = compile_kernel(pairs_offset, None, "lanes=8,interleave=1", n=64)
    assert ck.facts["scatters"] == 0, ck.facts
    assert ck.lowering_counts["interleaved_stores"] == 1, ck.lowering_counts
    x = np.arange(128, dtype=np.float32)
    y, z = np.zeros(128, np.float32), np.zeros(64, np.float32)
    ck.launch(64, {"x": x, "y": y, "z": z})
    assert np.array_equal(y[0::2], x[0::2] * 2) and np.array_equal(y[1::2], x[1::2] * 3)


def test_the_bounds_proof_is_an_unoptimised_function_of_its_own():
    """The safe build's proof is `i1 proof(args)`, noinline optnone (O3 over it was most of
    attention's compile time), called from the entry's cold path; facts do not count the call
    as a call out of the code."""
    from cohort.backend.compiler import compile_kernel
    ck = compile_kernel(axpy, None, "lanes=8", n=64)
    defs = re.findall(r"^define [^@]*@\"?([\w.]+)\"?\(", ck.llvm_ir, re.M)
    assert any(d.endswith(".proof") for d in defs), defs
    attrs = re.search(r"^define [^@]*@\"?[\w.]+\.proof\"?\([^)]*\)[^{]*#(\d+)", ck.llvm_ir, re.M)
    group = re.search(rf"^attributes #{attrs.group(1)} = {{([^}}]*)}}", ck.llvm_ir, re.M).group(1)
    assert "optnone" in group and "noinline" in group, group
    assert ck.facts["direct_cfg"] and ck.facts["external_calls"] == [], ck.facts
    unsafe = compile_kernel(axpy, None, "lanes=8,unsafe=on", n=64)
    assert ".proof" not in unsafe.llvm_ir


@kernel(block=16)
def _offsets(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g * 2 + 1] = x[g * 3]
    if x[g] > 0.0:                       # a varying branch: some lanes off
        y[g * 2] = x[g + 1]
    w = f32(g * 1000003 + 7)             # not an index: wraps as the interpreter's i32 does
    y[g * 2] = w


def _ir(variant):
    from cohort.backend import target
    from cohort.backend.compiler import cross_compile
    t = target.from_triple("x86_64-unknown-linux-gnu", "haswell", "+avx2,+fma")
    return cross_compile(_offsets, t, variant, {}, kind="ir")


def test_proven_indices_with_every_lane_live_are_marked_wrap_free():
    # exprs.index_value: the bounds proof covers every node of these indices, so their
    # + and * cannot wrap; a masked access's lanes may be threads the guard excluded, a
    # checked build proves nothing, and a value that is not an index keeps i32's wrap
    text = _ir("packet")
    assert re.search(r"mul nsw <\d+ x i32> .*, splat \(i32 2\)", text) and re.search(r"mul nsw <\d+ x i32> .*, splat \(i32 3\)", text)
    assert re.search(r"mul <\d+ x i32> .*, splat \(i32 1000003\)", text), "a value's arithmetic is marked"
    assert not re.search(r"mul nsw <\d+ x i32> .*, splat \(i32 1000003\)", text)
    for v in ("packet,checked=on", "packet,sanitize=on"):
        assert " nsw " not in _ir(v).replace("add nsw i64", ""), v   # (64-bit loop arithmetic aside)


def test_a_masked_access_is_not_marked():
    text = _ir("packet")
    # x[g + 1] under the varying if, where some lane is off (and the partial block): plain
    assert re.search(r"add <\d+ x i32> .*, splat \(i32 1\)", text)

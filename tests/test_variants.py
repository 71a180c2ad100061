"""Every variant of every operator is bit-identical to the interpreter, guard
bands intact (DESIGN §3, §5). The full knob matrix runs on sizes with tails;
the presets run on every seed size. Packet variants' lane annotations are
checked by the interpreter on the small sizes."""
import functools
import itertools

import numpy as np
import pytest

from cohort.backend.compiler import compile_kernel
from cohort.backend.variant import PRESETS, parse_variant
from cohort.refimpl import ops
from cohort.refimpl.annotations import AnnotationChecker
from cohort.refimpl.interpreter import interpret
from cohort.verify.checksum import bitwise_equal, first_difference
from cohort.verify.guard import GuardedSet

MATRIX = sorted({parse_variant("whole").name} | {
    parse_variant(f"lanes={l},full_packet={fp},predicated={pr},private={pv}").name
    for l, fp, pr, pv in itertools.product((4, 8, 16), ("on", "off"), ("on", "off"), ("cohort", "thread"))})
MATRIX_SIZES = {"attention": [(1, 4, 2, 16, 32, 16, 16), (1, 2, 1, 5, 3, 4, 3)],
                "rope": [(17, 66), (3, 64), (1, 2)]}
MATRIX_DEFAULT_SIZES = [(17, 65), (3, 63), (1, 1)]


@functools.lru_cache(maxsize=None)
def reference(name: str, shape: tuple):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 0)
    return inputs, ops.run_reference(op, shape, inputs)


def run_variant(name: str, shape: tuple, variant: str, check_annotations: bool):
    op = ops.get(name)
    inputs, ref = reference(name, shape)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, variant)
    if check_annotations and ck.annotations:
        # the interpreter runs the exact kernel object the backend lowered and checks its lane claims
        bufs = ops.allocate(op, shape, inputs)
        checker = AnnotationChecker(ck.annotations, ck.annotation_lanes, ck.variant.label)
        interpret(ck.kernel, launch.n, {**bufs, **launch.scalars}, None, checker=checker)
        assert bitwise_equal(bufs[op.output].reshape(ref.shape), ref)
    guarded = GuardedSet(ops.allocate(op, shape, inputs))
    ck.launch(launch.n, {**guarded.arrays, **launch.scalars})
    y = guarded.arrays[op.output].reshape(ref.shape)
    assert bitwise_equal(y, ref), f"{name} {shape} {variant}: first difference {first_difference(y, ref)}"
    assert guarded.intact(), f"{name} {shape} {variant}: guard bands {guarded.status()}"


def _ids(v):
    return ops.fmt_shape(v) if isinstance(v, tuple) else str(v)


MATRIX_CASES = [(name, shape, v) for name in ops.OPERATORS
                for shape in MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES) for v in MATRIX]


@pytest.mark.parametrize("name,shape,variant", MATRIX_CASES, ids=_ids)
def test_full_matrix_on_tail_sizes(name, shape, variant):
    run_variant(name, shape, variant, check_annotations=True)


PRESET_CASES = [(name, shape, p) for name, op in ops.OPERATORS.items() for shape in op.seed_sizes
                for p in ("whole", "packet")]


@pytest.mark.parametrize("name,shape,variant", PRESET_CASES, ids=_ids)
def test_presets_on_every_seed_size(name, shape, variant):
    small = np.prod(ops.get(name).buffer_shapes(shape)[ops.get(name).output]) < 200_000
    run_variant(name, shape, variant, check_annotations=small)


@pytest.mark.slow
@pytest.mark.parametrize("name,shape,variant", [
    (name, shape, p) for name, op in ops.OPERATORS.items() for shape in op.seed_sizes
    for p in PRESETS if p not in ("whole", "packet")], ids=_ids)
def test_other_presets_on_every_seed_size(name, shape, variant):
    run_variant(name, shape, variant, check_annotations=False)


def test_every_matrix_variant_is_distinct_code():
    # the knobs really reach the generated code: distinct variants, distinct compiled objects
    op = ops.get("masked_softmax")
    launch = op.launch((3, 63))
    cks = {v: compile_kernel(op.kernel, launch.consts, v) for v in MATRIX}
    assert len({id(c) for c in cks.values()}) == len(MATRIX)
    irs = {c.llvm_ir for c in cks.values()}
    assert len(irs) >= len(MATRIX) - 4   # a few knobs may not matter for this kernel


def test_packet_code_facts():
    op = ops.get("rmsnorm")
    launch = op.launch((17, 65))
    facts = compile_kernel(op.kernel, launch.consts, "packet").facts
    assert facts["lanes"] == 8 and facts["uses_vector_instructions"]
    assert facts["vector_width_bits"] >= 256
    assert facts["scalar_libm_calls"] == 0 and facts["fma"] == 0
    assert facts["masked_loads"] > 0 and facts["gathers"] == 0 and facts["scatters"] == 0
    branchy = compile_kernel(op.kernel, launch.consts, "packet,predicated=off").facts
    assert branchy["masked_loads"] == 0 and branchy["scalarised_lanes"] > 0


FAST_CASES = [(name, shape, "packet-fast") for name, op in ops.OPERATORS.items() for shape in op.seed_sizes] + \
    [(name, shape, v) for name in ops.OPERATORS for shape in MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES)
     for v in ("whole,fast_math=on", "lanes=16,fast_math=on", "lanes=4,fast_math=on,private=thread")]


@pytest.mark.parametrize("name,shape,variant", FAST_CASES, ids=_ids)
def test_fast_math_within_the_stated_bound(name, shape, variant):
    from cohort.verify.checksum import row_ulps
    op = ops.get(name)
    inputs, ref = reference(name, shape)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, variant)
    guarded = GuardedSet(ops.allocate(op, shape, inputs))
    ck.launch(launch.n, {**guarded.arrays, **launch.scalars})
    y = guarded.arrays[op.output].reshape(ref.shape)
    assert row_ulps(y, ref) <= op.fast_math_ulps, f"{name} {shape} {variant}: {row_ulps(y, ref)} row-ulps"
    assert guarded.intact()


def test_fast_math_really_is_fast_math():
    # contraction happens (FMA in the code) and results differ from the exact variant
    op = ops.get("gelu_residual")
    shape = (17, 65)
    inputs, ref = reference("gelu_residual", shape)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, "packet-fast")
    assert ck.facts["fma"] > 0
    bufs = ops.allocate(op, shape, inputs)
    ck.launch(launch.n, {**bufs, **launch.scalars})
    assert not bitwise_equal(bufs["y"].reshape(ref.shape), ref)

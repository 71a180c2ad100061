"""Every variant of every operator is bit-identical to the interpreter, guard
bands intact (DESIGN §3, §5). The full knob matrix runs on sizes with tails
(by default every variant on one of them and every knob value on each; the
whole product under -m slow); the presets run on every seed size. Packet variants' lane annotations are
checked by the interpreter on the small sizes. A launch gets the build
specialised for whole blocks when its size allows; the matrix also runs the
general build there (row operators launch whole blocks only)."""
import functools
import itertools

import numpy as np
import pytest

from cohort.backend import compiler as _compiler
from cohort.backend.variant import PRESETS, parse_variant
from cohort.refimpl import ops
from cohort.verify.checksum import bitwise_equal
from cohort.verify.compare import verify_build

# these tests compare every build with the reference themselves: launches skip verify's check
compile_kernel = functools.partial(_compiler.compile_kernel, verify="never")

MATRIX = sorted({parse_variant("whole").name} | {
    parse_variant(f"lanes={l},full_packet={fp},predicated={pr},private={pv}").name
    for l, fp, pr, pv in itertools.product((4, 8, 16), ("on", "off"), ("on", "off"), ("cohort", "thread"))})
MATRIX_SIZES = {"attention": [(1, 4, 2, 16, 32, 16, 16), (1, 2, 1, 5, 3, 4, 3)],
                # masked_softmax's builds are the slowest (exp per lane at predicated=off): its
                # matrix runs the multi-row tail and the 1x1 row; 17x65 (a row's last column in
                # a packet of its own) runs in the presets (whole, packet: every seed size)
                "masked_softmax": [(3, 63), (1, 1)],
                # causal with Sq > Skv: rows with no key, rows of whole and partial key tiles, a
                # partial query block (Sq < Skv runs the same code with a positive offset: test_ops)
                "attention_causal": [(2, 2, 1, 21, 13, 8, 4)],
                "rope": [(17, 66), (3, 64), (1, 2)],
                # rotary N x S x D x R: full, partial and tiny rotation
                "rope_half": [(3, 5, 64, 64), (2, 7, 20, 12)],
                "rope_pairs": [(3, 5, 64, 64), (2, 7, 20, 12)],
                # cooperative operators: ragged edges in every tiled dimension, one size each
                "matmul": [(13, 131, 21)], "cumsum": [(3, 37)], "histogram": [(600, 7)],
                "transpose": [(2, 37, 70)]}
MATRIX_DEFAULT_SIZES = [(17, 65), (3, 63), (1, 1)]


@functools.lru_cache(maxsize=None)
def reference(name: str, shape: tuple):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 0)
    return inputs, ops.run_reference(op, shape, inputs)


def run_variant(name: str, shape: tuple, variant: str, check_annotations: bool, general_too: bool = False):
    """The build a launch of this size gets (specialised for whole blocks when n is a
    multiple of the block); with general_too, also the unspecialised build."""
    op = ops.get(name)
    inputs, ref = reference(name, shape)
    launch = op.launch(shape)
    builds = [compile_kernel(op.kernel, launch.consts, variant, n=launch.n)]
    if general_too and builds[0].code.full_blocks:
        builds.append(compile_kernel(op.kernel, launch.consts, variant))
        assert not builds[1].code.full_blocks
    for ck in builds:
        label = f"{name} {shape} {variant}{' [full blocks]' if ck.code.full_blocks else ''}"
        # with claims, the interpreter runs the exact kernel object the backend lowered and
        # checks its lane claims
        verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars},
                               {op.output: ref}, claims=check_annotations, label=label)
        assert verdict.ok, verdict.describe()


def _ids(v):
    return ops.fmt_shape(v) if isinstance(v, tuple) else str(v)


# The cooperative operators (issue 24) run the matrix at lanes 4 and 16: lanes 8 runs in their
# presets on every seed size and in tests/test_coop_ops.py (six builds on 13 more sizes).
COOPERATIVE = ("matmul", "cumsum", "histogram", "transpose")
MATRIX_COOP = [v for v in MATRIX if "lanes=8," not in v]
_WHOLE_NAME = parse_variant("whole").name


def _default_matrix(name: str) -> set:
    """(shape, variant) of `name` that run by default: whole on every matrix size, and every packet
    variant on one of them, the sizes taken in turn, so that each size still meets every value of
    every knob (test_default_matrix_meets_every_knob_value_on_every_size: taking them plainly in
    turn would give one size only private=cohort when there are two sizes). The full product, every
    variant on every size, runs under -m slow (CI time, issue 28)."""
    sizes = MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES)
    packets = [v for v in (MATRIX_COOP if name in COOPERATIVE else MATRIX) if parse_variant(v).lanes > 1]
    return {(s, _WHOLE_NAME) for s in sizes} | {(sizes[(i + i // len(sizes)) % len(sizes)], v)
                                                          for i, v in enumerate(packets)}


MATRIX_CASES = [(name, shape, v) if (shape, v) in _default_matrix(name)
                else pytest.param(name, shape, v, marks=pytest.mark.slow)
                for name in ops.OPERATORS
                for shape in MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES)
                for v in (MATRIX_COOP if name in COOPERATIVE else MATRIX)]


def test_default_matrix_meets_every_knob_value_on_every_size():
    knobs = ("lanes", "full_packet", "predicated", "private")
    for name in ops.OPERATORS:
        sizes = MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES)
        variants = MATRIX_COOP if name in COOPERATIVE else MATRIX
        default = _default_matrix(name)
        assert {v for _, v in default} == set(variants), name          # every variant runs by default
        values = {k: {getattr(parse_variant(v), k) for v in variants if v != _WHOLE_NAME} for k in knobs}
        for shape in sizes:
            assert (shape, _WHOLE_NAME) in default, (name, shape)
            here = [parse_variant(v) for s, v in default if s == shape and v != _WHOLE_NAME]
            for k in knobs:
                assert {getattr(v, k) for v in here} == values[k], (name, shape, k)


@pytest.mark.parametrize("name,shape,variant", MATRIX_CASES, ids=_ids)
def test_full_matrix_on_tail_sizes(name, shape, variant):
    run_variant(name, shape, variant, check_annotations=True, general_too=True)


# The largest size of the math-heavy elementwise operators (3-8 s each, most of it the
# reference): under -m slow; their other eight sizes run here (test_ops.SLOW_SEED_CASES).
_SLOW_PRESET = {(name, (1024, 4097)) for name in ("swiglu", "gelu_residual", "gelu", "gelu_tanh", "masked_softmax")} \
    | {("matmul", (256, 512, 256))}
PRESET_CASES = [pytest.param(name, shape, p, marks=pytest.mark.slow) if (name, shape) in _SLOW_PRESET
                else (name, shape, p)
                for name, op in ops.OPERATORS.items() for shape in op.seed_sizes for p in ("whole", "packet")]


@pytest.mark.parametrize("name,shape,variant", PRESET_CASES, ids=_ids)
def test_presets_on_every_seed_size(name, shape, variant):
    small = np.prod(ops.get(name).buffer_shapes(shape)[ops.get(name).output]) < 200_000
    run_variant(name, shape, variant, check_annotations=small)


# fast-math presets promise an ulp bound, not bit-exactness: test_fast_math_within_the_stated_bound
@pytest.mark.slow
@pytest.mark.parametrize("name,shape,variant", [
    (name, shape, p) for name, op in ops.OPERATORS.items() for shape in op.seed_sizes
    for p in PRESETS if p not in ("whole", "packet") and not parse_variant(p).fast_math], ids=_ids)
def test_other_presets_on_every_seed_size(name, shape, variant):
    run_variant(name, shape, variant, check_annotations=False)


def test_every_matrix_variant_is_distinct_code():
    # the knobs really reach the generated code: distinct variants, distinct compiled objects
    # (rmsnorm: a quarter of masked_softmax's compile time, whose exp runs per lane at predicated=off)
    op = ops.get("rmsnorm")
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
    from cohort.backend import target
    host = target.host()
    assert facts["vector_width_bits"] >= min(256, host.vector_bits)   # 256 on x86 (AVX2 or wider), 128 on NEON
    assert facts["vector_registers_per_packet"] == host.registers_per_packet(8)
    assert facts["scalar_libm_calls"] == 0 and facts["fma"] == 0
    assert facts["masked_loads"] > 0 and facts["gathers"] == 0 and facts["scatters"] == 0
    branchy = compile_kernel(op.kernel, launch.consts, "packet,predicated=off").facts
    assert branchy["masked_loads"] == 0 and branchy["scalarised_lanes"] > 0


def test_whole_blocks_specialisation_is_chosen_by_launch_size():
    op = ops.get("rmsnorm")
    launch = op.launch((17, 65))                      # 17 blocks of 32: whole blocks
    spec = lambda v, n: compile_kernel(op.kernel, launch.consts, v, n=n).code.full_blocks
    assert spec("packet", launch.n) and spec("lanes=4", launch.n) and spec("lanes=16,interleave=1", launch.n)
    assert not spec("packet", launch.n - 1) and not spec("packet", None)
    assert not spec("whole", launch.n)                # per-thread loops: nothing to specialise
    assert not spec("packet,full_packet=off", launch.n)   # the knob asks for masked packets throughout
    lean = compile_kernel(op.kernel, launch.consts, "packet", n=launch.n).facts
    general = compile_kernel(op.kernel, launch.consts, "packet").facts
    # no masked path at all: the row's tail is the loop's own prefix mask, the only masked op left
    assert lean["asm_instructions"] < general["asm_instructions"]
    assert lean["masked_loads"] < general["masked_loads"] and lean["masked_stores"] < general["masked_stores"]


def test_whole_blocks_build_launches_other_sizes_with_the_general_build():
    from cohort.backend.context import SLOT_N
    from cohort.refimpl.interpreter import KernelRuntimeError
    op = ops.get("swiglu")
    shape = (4, 64)                                   # 256 elements: whole blocks of 32
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, "packet", n=launch.n)
    assert ck.code.full_blocks
    inputs, ref = reference("swiglu", shape)
    for n in (launch.n - 1, launch.n - 31, 1, launch.n):
        want = ref.reshape(-1).copy()
        want[n:] = 0                                  # threads past n write nothing
        verdict = verify_build(ck, n, {**ops.allocate(op, shape, inputs), **launch.scalars}, {"y": want},
                               claims=False)
        assert verdict.ok, (n, verdict.describe())
    assert ck.prepare(launch.n - 1, {**ops.allocate(op, shape, inputs)}).code is not ck.code
    # the specialised entry itself refuses a launch of a partial block: an error, not a run
    bufs = ops.allocate(op, shape, inputs)
    p = ck.prepare(launch.n, bufs)
    p.args[SLOT_N] = launch.n - 5
    with pytest.raises(KernelRuntimeError, match=r"whole blocks of 32 was called with n = 251"):
        p.run()
    assert not bufs["y"].any()


# the largest sizes' fast-math runs (3-8 s of reference each) under -m slow with their presets;
# the bound is checked on every other seed size and on the matrix sizes here
FAST_CASES = [pytest.param(name, shape, "packet-fast", marks=pytest.mark.slow) if (name, shape) in _SLOW_PRESET
              else (name, shape, "packet-fast") for name, op in ops.OPERATORS.items() for shape in op.seed_sizes] + \
    [(name, shape, v) for name in ops.OPERATORS for shape in MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES)
     for v in ("whole,fast_math=on", "lanes=16,fast_math=on", "lanes=4,fast_math=on,private=thread")]


@pytest.mark.parametrize("name,shape,variant", FAST_CASES, ids=_ids)
def test_fast_math_within_the_stated_bound(name, shape, variant):
    from cohort.verify.checksum import row_ulps
    op = ops.get(name)
    inputs, ref = reference(name, shape)
    launch = op.launch(shape)
    builds = [compile_kernel(op.kernel, launch.consts, variant, n=launch.n)]
    if builds[0].code.full_blocks and shape in MATRIX_SIZES.get(name, MATRIX_DEFAULT_SIZES):
        builds.append(compile_kernel(op.kernel, launch.consts, variant))     # the general build too
    for ck in builds:
        label = f"{name} {shape} {variant}{' [full blocks]' if ck.code.full_blocks else ''}"
        verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars},
                               {op.output: ref}, claims=False, label=label,
                               equal=lambda y, r: row_ulps(y, r) <= op.fast_math_ulps)
        y = verdict.native[op.output].reshape(ref.shape)
        assert verdict.ok, f"{verdict.describe()}: {row_ulps(y, ref)} row-ulps"


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

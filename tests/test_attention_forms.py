"""attention's forms (refimpl/ops/attention.py, FORMS): blocks of 16 rows with the scores in
two passes of four keys ("stream", the definition's own form), of 32 rows ("rows32") and of
32 rows with one pass of eight ("rows32k8"), the packed decode forms, the forms whose value
fold is a matrix product through shared memory ("fold32", attention_fold.py), and a block per
query row with lanes across keys ("keys32", attention_keys.py). DESIGN §4: every form of an operator gives the
same bits. Each form's interpreter run is compared bitwise with the stream form's, and every
variant's build of each form with the stream form's interpreter output, over the edge
shapes: decoding (Sq = 1), Sq not a multiple of either block, fewer keys than a tile, causal
with Sq > Skv, grouped KV heads, a mask with a fully masked row, a sliding window. One build
serves the lengths of a case group (Sq, Skv, H, Hkv are runtime arguments)."""
import functools

import numpy as np
import pytest
from conftest import asm_blocks

from cohort.backend.compiler import compile_kernel
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.ops import attention as A
from cohort.refimpl.ops.base import seeded_normal
from cohort.verify.compare import verify_build

NEW_FORMS = ("rows32", "rows32k8", "packed8", "packed16", "fold32", "keys32")
# the shapes' blocks: 32 rows of one head; packed, 8 or 16 rows of a KV group's heads

# (D, DV, causal, mask kind, window) -> shapes (B, H, Hkv, Sq, Skv, D, Dv) sharing one build
GROUPS = {
    "plain": ((16, 16, False, None, None),
              [(1, 4, 2, 1, 37, 16, 16),       # decode: one row, GQA
               (2, 4, 2, 45, 45, 16, 16),      # one full 32-row block and a partial one
               (1, 2, 1, 40, 5, 16, 16),       # fewer keys than a tile
               (1, 3, 3, 64, 19, 16, 16),      # whole 32-row blocks, a partial key tile
               (1, 8, 2, 3, 37, 16, 16)]),     # packed: 12 rows a KV head, blocks across heads
    "odd D": ((12, 4, False, None, None), [(1, 2, 1, 33, 17, 12, 4)]),
    "causal": ((16, 8, True, None, None),
               [(1, 2, 2, 50, 21, 16, 8),      # Sq > Skv: the first 29 rows see no key
                (2, 4, 1, 45, 45, 16, 8),      # square, GQA 4:1
                (1, 2, 1, 20, 70, 16, 8),      # Sq < Skv, 20 rows (one 32-row block, partial)
                (1, 6, 2, 5, 4, 16, 8),        # packed, Sq > Skv: G = 3, 15 rows a KV head
                (1, 4, 1, 7, 30, 16, 8)]),     # packed: 28 rows, a block holding rows of 3 heads
    "mask": ((8, 8, False, "bool", None), [(2, 4, 2, 35, 23, 8, 8), (1, 4, 1, 3, 23, 8, 8)]),
    "window": ((8, 8, True, None, 5), [(2, 4, 2, 47, 40, 8, 8), (1, 4, 2, 6, 20, 8, 8)]),
    "window + float mask": ((8, 8, True, "float", 9), [(1, 2, 1, 37, 37, 8, 8)]),
}

# the default run: scalar, masked 4-lane, 8 and 16 lanes, the pool; the rest with -m slow
VARIANTS = ("whole", "lanes=4,full_packet=off,predicated=off", "packet", "lanes=16", "lanes=16,grain=1,workers=2")
SLOW_VARIANTS = ("lanes=4", "packet,interleave=1", "packet,interleave=2", "lanes=8,private=thread",
                 "lanes=16,interleave=1", "packet,checked=on", "whole,grain=1,workers=2")


def _args(shape, kind, causal, window, rows, packed, seed=5):
    B, H, HKV, SQ, SKV, D, DV = shape
    bufs = {n: seeded_normal(seed, "attention", n, sh).reshape(-1) for n, sh in A.shapes(shape).items()
            if n not in ("o", "bias")}
    strides = None
    bufs["bias"] = np.zeros(1, np.float32)
    if kind is not None:
        rng = np.random.default_rng(seed)
        keep = rng.random((B, 1, SQ, SKV)) < 0.7
        keep[:, :, 0, :] = False                                     # a fully masked row
        bias = np.where(keep, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)
        if kind == "float":
            bias = bias + rng.standard_normal(bias.shape).astype(np.float32)
        bufs["bias"] = np.ascontiguousarray(bias).reshape(-1)
        strides = (SQ * SKV, 0, SKV)                                 # broadcast over the heads
    L = A.launch(shape, causal, mask_strides=strides, window=window, rows=rows, packed=packed)
    bufs["o"] = np.zeros(B * H * SQ * DV, np.float32)
    return L, {**bufs, **L.scalars}


@functools.lru_cache(maxsize=None)
def _interpreted(form, group, i):
    (_, _, causal, kind, window), shapes = GROUPS[group]
    kern, rows, packed = A.FORMS[form]
    L, args = _args(shapes[i], kind, causal, window, rows, packed)
    interpret(kern.ir, L.n, args, L.consts)
    return args["o"].copy()


def _cases():
    return [(g, i) for g, (_, shapes) in GROUPS.items() for i in range(len(shapes))]


def test_the_forms_are_registered_and_launch_their_own_geometry():
    op = ops.get("attention")
    assert op.form == "stream" and {f[0] for f in op.forms} == set(NEW_FORMS)
    shape = (2, 6, 2, 5, 9, 8, 8)          # G = 3: 15 rows a KV head
    blocks = {"rows32": 2 * 6, "rows32k8": 2 * 6, "packed8": 2 * 2 * 2, "packed16": 2 * 2, "fold32": 2 * 6,
              "keys32": 2 * 6 * 5}
    for f in NEW_FORMS:
        alt = ops.get("attention", form=f)
        kern, rows, _ = A.FORMS[f]
        assert alt.kernel is kern and kern.ir.block == rows
        assert alt.launch(shape).n == blocks[f] * rows
    assert ops.get("attention_causal", form="packed8").launch(shape).consts["CAUSAL"] == 1


@pytest.mark.parametrize("form", NEW_FORMS)
@pytest.mark.parametrize("group,i", _cases())
def test_the_interpreter_gives_every_form_the_stream_forms_bits(form, group, i):
    want, got = _interpreted("stream", group, i), _interpreted(form, group, i)
    assert np.isfinite(want).all()
    assert got.tobytes() == want.tobytes(), f"{form} differs from stream at {GROUPS[group][1][i]}"


def test_the_stream_forms_bits_are_within_the_oracle():
    # the reference the forms are compared with is itself the operator (a guard against
    # comparing two equally wrong outputs): the plain and causal groups against float64
    for group in ("plain", "causal"):
        (_, _, causal, _, _), shapes = GROUPS[group]
        for i, shape in enumerate(shapes):
            B, H, HKV, SQ, SKV, D, DV = shape
            inp = {n: seeded_normal(5, "attention", n, sh) for n, sh in A.shapes(shape).items()
                   if n not in ("o", "bias")}
            want = A.reference(inp["q"], inp["k"], inp["v"], causal)
            y = _interpreted("stream", group, i).reshape(B, H, SQ, DV).astype(np.float64)
            assert np.abs(y - want).max() <= 1e-5 * max(np.abs(want).max(), 1e-30)


def _fits(variant, rows):
    v = parse_variant(variant)
    return v.lanes * (1 if v.interleave == "auto" else v.interleave) <= rows


@pytest.mark.parametrize("form,variant", [
    pytest.param(f, v, marks=[pytest.mark.slow] if v in SLOW_VARIANTS else [])
    for f in NEW_FORMS for v in VARIANTS + SLOW_VARIANTS if _fits(v, A.FORMS[f][1])])
def test_every_variant_of_every_form_gives_the_stream_forms_bits(form, variant):
    kern, rows, packed = A.FORMS[form]
    for group, ((D, DV, causal, kind, window), shapes) in GROUPS.items():
        L0, _ = _args(shapes[0], kind, causal, window, rows, packed)
        ck = compile_kernel(kern, L0.consts, variant, n=rows, verify="never")    # whole blocks: every launch
        for i, shape in enumerate(shapes):
            L, args = _args(shape, kind, causal, window, rows, packed)
            assert L.consts == L0.consts
            verdict = verify_build(ck, L.n, args, reference={"o": _interpreted("stream", group, i)},
                                   label=f"{form} {variant} {shape}")
            assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("form", NEW_FORMS)
def test_the_unspecialised_build_gives_the_same_bits(form):
    # the build for launches that are not a whole number of blocks (no n given)
    kern, rows, packed = A.FORMS[form]
    (_, _, causal, kind, window), shapes = GROUPS["causal"]
    L0, _ = _args(shapes[0], kind, causal, window, rows, packed)
    ck = compile_kernel(kern, L0.consts, "lanes=8" if rows == 8 else "lanes=16", verify="never")
    assert not ck.code.full_blocks
    for i, shape in enumerate(shapes):
        L, args = _args(shape, kind, causal, window, rows, packed)
        verdict = verify_build(ck, L.n, args, reference={"o": _interpreted("stream", "causal", i)})
        assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("SQ,G,lanes,bits,causal,form", [
    (1, 4, 8, 512, False, "packed8"), (2, 4, 8, 256, True, "packed8"), (2, 1, 8, 128, False, "packed8"),
    (1, 1, 8, 128, False, "keys32"), (1, 1, 16, 512, True, "keys32"), (1, 2, 16, 512, False, "packed16"),
    (3, 4, 8, 512, False, "packed16"), (1, 4, 16, 512, True, "packed16"), (16, 1, 16, 512, False, "packed16"),
    (17, 1, 16, 512, True, "rows32k8"), (17, 1, 16, 512, False, "fold32"), (256, 1, 16, 512, False, "fold32"),
    (256, 4, 8, 512, False, "rows32"), (256, 1, 4, 512, True, "rows32"), (256, 1, 16, 256, False, "stream"),
    (256, 1, 8, 256, True, "stream"), (200, 1, 16, 128, False, "stream")])
def test_form_for(SQ, G, lanes, bits, causal, form):
    # one row per KV head: a block per row; packed forms up to 16 rows, 32-row forms only with
    # 32 vector registers, the GEMM-shaped fold at 16 lanes without a causal mask
    assert A.form_for(SQ, G, lanes, bits, causal) == form


@pytest.mark.parametrize("form", ("stream",) + NEW_FORMS)
def test_every_form_proves_its_bounds_at_ragged_lengths(form):
    # a launch whose bounds proof fails runs the checked build: the same bits, several times
    # slower (a row index the proof could not narrow under its guard did that to every
    # launch with padding rows), so the bit-for-bit tests above would not notice
    kern, rows, packed = A.FORMS[form]
    for variant in ("whole", "packet", "lanes=16") if rows >= 16 else ("whole", "packet"):
        for group, ((D, DV, causal, kind, window), shapes) in GROUPS.items():
            L0, _ = _args(shapes[0], kind, causal, window, rows, packed)
            ck = compile_kernel(kern, L0.consts, variant, n=rows, verify="never")
            for shape in shapes:
                L, args = _args(shape, kind, causal, window, rows, packed)
                p = ck.prepare(L.n, args)
                p.run()
                assert p.fallback is None, f"{form} {variant} {shape}: {p.fallback}"



def test_fold32_folds_in_registers():
    # the whole-tile fold of fold32 at 16 lanes on a 512-bit target (the block with the most fma
    # and no max: the scores' block has the softmax's): 16 accumulators (4 rows by 2 column
    # chunks, two packets), each v load feeding 4 rows' fma, each weight broadcast feeding 4
    # (2 chunks x 2 packets), nothing spilled (docs/kernels.md, 'attention's forms')
    from cohort.backend import target
    from cohort.backend.compiler import cross_compile
    t = target.from_triple("x86_64-unknown-linux-gnu", "skylake-avx512",
                           "+avx2,+fma,+avx512f,+avx512vl,+avx512bw,+avx512dq")
    L = A.launch((1, 32, 32, 256, 256, 128, 128), False, rows=32)
    asm = cross_compile(A.FORMS["fold32"][0], t, "lanes=16", L.consts, kind="assembly", full_blocks=True)
    folds = [b for b in asm_blocks(asm) if not any(x.startswith("vmaxps") for x in b)]
    hot = max(folds, key=lambda b: sum(x.startswith("vfmadd") for x in b))
    fmas = [x for x in hot if x.startswith("vfmadd")]
    loads = [x for x in hot if x.startswith("vmovups") and x.index("(") < x.index("%zmm")]
    assert len(fmas) >= 64 and len({x.split(",")[-1] for x in fmas}) == 16
    assert len(fmas) == 4 * len(loads)
    assert len(fmas) == 4 * sum(x.startswith("vbroadcastss") for x in hot)
    assert not [x for x in hot if "rsp" in x and "mm" in x], hot

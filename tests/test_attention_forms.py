"""attention's forms (refimpl/ops/attention.py, FORMS): blocks of 16 rows with the scores in
two passes of four keys ("stream", the definition's own form), of 32 rows ("rows32") and of
32 rows with one pass of eight ("rows32k8"). DESIGN §4: every form of an operator gives the
same bits. Each form's interpreter run is compared bitwise with the stream form's, and every
variant's build of each form with the stream form's interpreter output, over the edge
shapes: decoding (Sq = 1), Sq not a multiple of either block, fewer keys than a tile, causal
with Sq > Skv, grouped KV heads, a mask with a fully masked row, a sliding window. One build
serves the lengths of a case group (Sq, Skv, H, Hkv are runtime arguments)."""
import functools

import numpy as np
import pytest

from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.ops import attention as A
from cohort.refimpl.ops.base import seeded_normal
from cohort.verify.compare import verify_build

NEW_FORMS = ("rows32", "rows32k8")

# (D, DV, causal, mask kind, window) -> shapes (B, H, Hkv, Sq, Skv, D, Dv) sharing one build
GROUPS = {
    "plain": ((16, 16, False, None, None),
              [(1, 4, 2, 1, 37, 16, 16),       # decode: one row, GQA
               (2, 4, 2, 45, 45, 16, 16),      # one full 32-row block and a partial one
               (1, 2, 1, 40, 5, 16, 16),       # fewer keys than a tile
               (1, 3, 3, 64, 19, 16, 16)]),    # whole 32-row blocks, a partial key tile
    "odd D": ((12, 4, False, None, None), [(1, 2, 1, 33, 17, 12, 4)]),
    "causal": ((16, 8, True, None, None),
               [(1, 2, 2, 50, 21, 16, 8),      # Sq > Skv: the first 29 rows see no key
                (2, 4, 1, 45, 45, 16, 8),      # square, GQA 4:1
                (1, 2, 1, 20, 70, 16, 8)]),    # Sq < Skv, 20 rows (one 32-row block, partial)
    "mask": ((8, 8, False, "bool", None), [(2, 4, 2, 35, 23, 8, 8)]),
    "window": ((8, 8, True, None, 5), [(2, 4, 2, 47, 40, 8, 8)]),
    "window + float mask": ((8, 8, True, "float", 9), [(1, 2, 1, 37, 37, 8, 8)]),
}

VARIANTS = ("whole", "lanes=4", "lanes=4,full_packet=off,predicated=off", "packet", "packet,interleave=1",
            "packet,interleave=2", "lanes=8,private=thread", "lanes=16", "lanes=16,interleave=1",
            "packet,checked=on", "whole,grain=1,workers=2", "lanes=16,grain=1,workers=2")


def _args(shape, kind, causal, window, rows, seed=5):
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
    L = A.launch(shape, causal, mask_strides=strides, window=window, rows=rows)
    bufs["o"] = np.zeros(B * H * SQ * DV, np.float32)
    return L, {**bufs, **L.scalars}


@functools.lru_cache(maxsize=None)
def _interpreted(form, group, i):
    (_, _, causal, kind, window), shapes = GROUPS[group]
    kern, rows = A.FORMS[form]
    L, args = _args(shapes[i], kind, causal, window, rows)
    interpret(kern.ir, L.n, args, L.consts)
    return args["o"].copy()


def _cases():
    return [(g, i) for g, (_, shapes) in GROUPS.items() for i in range(len(shapes))]


def test_the_forms_are_registered_and_launch_their_own_geometry():
    op = ops.get("attention")
    assert op.form == "stream" and {f[0] for f in op.forms} == set(NEW_FORMS)
    for f in NEW_FORMS:
        alt = ops.get("attention", form=f)
        assert alt.kernel is A.FORMS[f][0] and alt.kernel.ir.block == 32
        assert alt.launch((1, 2, 1, 33, 9, 8, 8)).n == 2 * 2 * 32          # two blocks of 32 rows per head
    assert ops.get("attention_causal", form="rows32").launch((1, 1, 1, 5, 5, 8, 8)).consts["CAUSAL"] == 1


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


@pytest.mark.parametrize("form", NEW_FORMS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_of_every_form_gives_the_stream_forms_bits(form, variant):
    kern, rows = A.FORMS[form]
    for group, ((D, DV, causal, kind, window), shapes) in GROUPS.items():
        L0, _ = _args(shapes[0], kind, causal, window, rows)
        ck = compile_kernel(kern, L0.consts, variant, n=rows, verify="never")    # whole blocks: every launch
        for i, shape in enumerate(shapes):
            L, args = _args(shape, kind, causal, window, rows)
            assert L.consts == L0.consts
            verdict = verify_build(ck, L.n, args, reference={"o": _interpreted("stream", group, i)},
                                   label=f"{form} {variant} {shape}")
            assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("form", NEW_FORMS)
def test_the_unspecialised_build_gives_the_same_bits(form):
    # the build for launches that are not a whole number of blocks (no n given)
    kern, rows = A.FORMS[form]
    (_, _, causal, kind, window), shapes = GROUPS["causal"]
    L0, _ = _args(shapes[0], kind, causal, window, rows)
    ck = compile_kernel(kern, L0.consts, "lanes=16", verify="never")
    assert not ck.code.full_blocks
    for i, shape in enumerate(shapes):
        L, args = _args(shape, kind, causal, window, rows)
        verdict = verify_build(ck, L.n, args, reference={"o": _interpreted("stream", "causal", i)})
        assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("SQ,lanes,bits,form", [
    (1, 16, 512, "stream"), (16, 16, 512, "stream"), (17, 16, 512, "rows32k8"), (256, 8, 512, "rows32"),
    (256, 4, 512, "rows32"), (256, 16, 256, "stream"), (256, 8, 256, "stream"), (200, 16, 128, "stream")])
def test_form_for_takes_the_32_row_forms_only_with_32_registers_and_more_than_16_rows(SQ, lanes, bits, form):
    assert A.form_for(SQ, lanes, bits) == form

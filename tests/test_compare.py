"""The one comparison path (verify/compare.py): lane claims checked at the width the
lowering works in (lanes x interleave), outputs bit for bit, inputs unchanged, guard
bands intact; and the fuzzer's own check goes through it.

Regression (issue 14): the fuzzer used to check lane claims in groups of the packet's
lanes. With interleave=2 a packet lowering works in 16 lanes at lanes=8, so a claim about
16 lanes checked 8 at a time passed where the code is wrong."""
import ctypes

import numpy as np
import pytest

from cohort import Buffer, global_id, i32, kernel
from cohort.backend.claims import LaneClaims, Lanes, Site
from cohort.backend.compiler import compile_kernel
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.refimpl.ir import DType
from cohort.verify.compare import verify_build
from cohort.verify.execute import execute, reference, run_variant
from cohort.verify.gen import BufferSpec, Case, make_args

WIDE = "lanes=8,full_packet=on,predicated=on,private=cohort,interleave=2"


@kernel(block=16)
def group_of_eight(x: Buffer[i32], y: Buffer[i32]):
    t = global_id()
    v = x[t // 8]          # one value per 8 threads: uniform in a packet of 8, not in 16 lanes
    y[t] = v ^ v           # ... and what reaches the output does not show it


def eight_case() -> Case:
    return Case(group_of_eight.ir, 32, {}, (BufferSpec("x", DType.I32, 32), BufferSpec("y", DType.I32, 32)), {}, 7)


def test_claims_carry_the_lowering_width():
    ck = compile_kernel(group_of_eight, None, WIDE, n=32)
    assert isinstance(ck.annotations, LaneClaims)
    assert ck.variant.lanes == 8 and ck.annotations.width == 16
    loads = [c for c in ck.annotations.values() if c.site is Site.LOAD]
    assert loads and loads[0].lanes is Lanes.GATHER       # t // 8 is not uniform across 16 lanes


def test_div_uniform_at_interleave_two_is_caught_by_the_fuzzers_check():
    case = eight_case()
    with inject_bug_TESTING_ONLY("div_uniform"):
        ref, why = reference(case)
        assert why is None
        rec = run_variant(case, WIDE, ref)
        # the claim the buggy lowering makes: the load's index is uniform across its 16 lanes
        ck = compile_kernel(group_of_eight, None, WIDE, n=32)
        assert [c.lanes for c in ck.annotations.values() if c.site is Site.LOAD] == [Lanes.UNIFORM]
    # the native output is right (v ^ v), so only the lane-claim check can see the bug
    assert rec["status"] == "annotation", rec
    assert "lanes" in rec["detail"] and "is lowered as uniform" in rec["detail"], rec["detail"]
    assert "threads 0..15" in rec["detail"], rec["detail"]      # groups of 16, not of 8
    # the same variant without the bug agrees
    clean = run_variant(case, WIDE, ref)
    assert clean["status"] == "ok" and clean["annotation_checks"] > 0, clean


def test_corpus_replay_inherits_the_check():
    case = eight_case()
    with inject_bug_TESTING_ONLY("div_uniform"):
        res = execute(case, ["whole", WIDE])
    assert res["variants"]["whole"]["status"] == "ok"
    assert res["variants"][WIDE]["status"] == "annotation"


def test_verify_build_reports_each_kind_of_finding():
    ck = compile_kernel(group_of_eight, None, "whole", n=32)
    args = make_args(eight_case())
    v = verify_build(ck, 32, args)
    assert v.ok and v.reference["y"].sum() == 0 and "x" in v.reference     # x: never stored, unchanged
    wrong = {"y": np.ones(32, np.int32)}
    v = verify_build(ck, 32, args, wrong)
    assert v.status == "mismatch" and v.mismatches["y"].count == 32 and "32 elements differ" in v.detail
    assert not v.recheck()
    # a launch that writes past the end of y lands in the guard band
    def stray(n, a):
        ck.launch(n, a)
        past = ctypes.c_uint8.from_address(a["y"].ctypes.data + a["y"].nbytes + 10)   # in the high band
        past.value ^= 1
    v = verify_build(ck, 32, args, launch=stray)
    assert v.status == "guard" and "guard band broken around y" in v.detail
    # an input the kernel never stores to must come back unchanged
    def scribble(n, a):
        ck.launch(n, a)
        a["x"][3] += 1
    v = verify_build(ck, 32, args, launch=scribble)
    assert v.status == "mismatch" and set(v.mismatches) == {"x"}
    # a native error is a finding, with its exception kept
    def boom(n, a):
        raise RuntimeError("no")
    v = verify_build(ck, 32, args, launch=boom)
    assert v.status == "native_error" and isinstance(v.launch_exception, RuntimeError)
    assert np.array_equal(args["y"], make_args(eight_case())["y"])          # the caller's arrays untouched


@pytest.mark.parametrize("variant", ["lanes=4", "lanes=8,interleave=2", "lanes=16"])
def test_interpreter_reference_with_claims(variant):
    ck = compile_kernel(group_of_eight, None, variant, n=32)
    v = verify_build(ck, 32, make_args(eight_case()))
    assert v.ok and v.claims_checked > 0, v.describe()

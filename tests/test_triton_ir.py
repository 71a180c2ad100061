"""The tile IR: the verifier rejects ill-typed nodes; one build per specialisation; the listing."""
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402

import cohort.triton as ct  # noqa: E402
from cohort.triton import launch, tir  # noqa: E402
from cohort.triton.tir import TT, Bin, Dt, K, Node, Ptr  # noqa: E402


def _prog(*stmts, vars=None):
    return tir.Program("k", "f.py", (("p", TT(Ptr(Dt.F32))),), (), tuple(stmts), vars or {})


@pytest.mark.parametrize("node, msg", [
    (Node(K.BINARY, TT(Dt.F32, (4,)), (Node(K.CONST, TT(Dt.F32, (4,)), (), 1.0),
                                       Node(K.CONST, TT(Dt.I32, (4,)), (), 1)), Bin.ADD),
     "operands of the result's type"),
    (Node(K.BROADCAST, TT(Dt.F32, (4, 4)), (Node(K.CONST, TT(Dt.F32, (3, 1)), (), 1.0),)), "dimensions 1 or equal"),
    (Node(K.RESHAPE, TT(Dt.F32, (8,)), (Node(K.CONST, TT(Dt.F32, (4,)), (), 1.0),)), "as many elements"),
    (Node(K.BITCAST, TT(Dt.I16, (4,)), (Node(K.CONST, TT(Dt.F32, (4,)), (), 1.0),)), "the same width"),
    (Node(K.PROGRAM_ID, TT(Dt.I32), (), 3), "axis 0, 1 or 2"),
])
def test_verifier_rejects(node, msg):
    with pytest.raises(tir.VerifyError, match=msg):
        tir.verify(_prog(tir.Let("x", node, 1)))


def test_verifier_rejects_a_variable_changing_type():
    v = Node(K.CONST, TT(Dt.F32), (), 1.0)
    with pytest.raises(tir.VerifyError, match="x is int32, assigned fp32"):
        tir.verify(_prog(tir.Let("x", v, 3), vars={"x": TT(Dt.I32)}))


@triton.jit
def scale_kernel(x_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


def test_one_build_per_specialisation_and_listing():
    with ct.on_cpu():
        x = torch.ones(100)
        before = len(launch._BUILDS)
        for _ in range(3):
            scale_kernel[(2,)](x, 2.0, 100, BLOCK=64)
        scale_kernel[(4,)](x, 2.0, 100, BLOCK=32)
        scale_kernel[(4,)](x.to(torch.float16), 2.0, 100, BLOCK=32)
        assert len(launch._BUILDS) - before == 3
        assert torch.equal(x, torch.full((100,), 16.0))
        prog = launch.build(scale_kernel, [("x_ptr", TT(Ptr(Dt.F32))), ("s", TT(Dt.F32)), ("n", TT(Dt.I32))],
                            [("BLOCK", 64)])
    text = tir.format_program(prog)
    assert "program scale_kernel(x_ptr: *fp32, s: fp32, n: int32) consts BLOCK=64" in text
    assert "arange[0]() : int32[64]" in text and "store(" in text and "mask=" in text

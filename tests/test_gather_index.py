"""Lane indices kept cheap. Gathers keep 32-bit indices: after optimisation a vector `zext nneg`
i32 -> i64 (InstCombine's form of a sign extension it proved non-negative) is written back as
`sext`, which X86 code generation folds into a gather of 32-bit indices (all lanes of one
register) rather than of 64-bit ones (half of them): jit.sign_extended_indices, transpose's
shared-tile read. And per-lane atomics read their lanes' indices from memory (atomics.py)."""
import llvmlite.binding as llvm
import pytest

from cohort.backend import jit, target
from cohort.backend.compiler import compile_kernel, cross_compile
from cohort.refimpl import ops

_MODULE = """
define <8 x i64> @widen(<8 x i32> %v, i32 %s, <8 x i32> %w) {
  %a = zext nneg <8 x i32> %v to <8 x i64>
  %b = zext nneg i32 %s to i64
  %c = zext <8 x i32> %w to <8 x i64>
  %d = insertelement <8 x i64> %a, i64 %b, i32 0
  %e = add <8 x i64> %d, %c
  ret <8 x i64> %e
}
"""


def _parsed(text):
    jit._init()
    mod = llvm.parse_assembly(text)
    mod.verify()
    return mod


def test_only_vector_zext_nneg_of_i32_becomes_sext():
    mod, text = jit.sign_extended_indices(_parsed(_MODULE))
    assert "sext <8 x i32> %v to <8 x i64>" in text
    assert "zext nneg i32 %s to i64" in text          # a scalar: left as it was
    assert "zext <8 x i32> %w to <8 x i64>" in text   # no nneg flag: a different value, kept
    assert "zext nneg <" not in text and str(mod) == text


def test_module_without_one_is_not_reparsed():
    plain = _parsed(_MODULE.replace("zext nneg <8", "sext <8"))
    mod, text = jit.sign_extended_indices(plain)
    assert mod is plain and text == str(plain)


@pytest.mark.parametrize("lanes", [8, 16])
def test_host_transpose_reads_its_tile_with_32_bit_indices(lanes):
    op = ops.get("transpose")
    launch = op.launch((1, 64, 64))
    ck = compile_kernel(op.kernel, launch.consts, f"packet,lanes={lanes}", n=launch.n)
    assert ck.code.full_blocks                          # the form whose tile read was widened
    assert "zext nneg <" not in ck.llvm_ir


@pytest.mark.parametrize("cpu,lanes", [("znver4", 16), ("znver4", 8), ("x86-64-v4", 16)])
def test_transpose_gathers_dwords_for_avx512(cpu, lanes):
    t = target.from_triple("x86_64-unknown-linux-gnu", cpu)
    op = ops.get("transpose")
    launch = op.launch((1, 64, 64))
    asm = cross_compile(op.kernel, t, f"packet,lanes={lanes}", launch.consts, kind="assembly",
                        full_blocks=True)
    assert "gatherdps" in asm and "gatherqps" not in asm


# ---------------------------------------------------------------- per-lane atomics

@pytest.mark.parametrize("lanes", [8, 16])
def test_per_lane_atomics_read_lane_indices_from_one_store(lanes):
    # each atomic's lane loop takes its lanes' indices from one store of the packet, through a
    # pointer LLVM cannot see through (else it folds them back into extracts: on X86 two or three
    # instructions per lane past the first 128 bits, and the mask spilled lane by lane)
    op = ops.get("histogram")
    launch = op.launch((100003, 1000))
    ck = compile_kernel(op.kernel, launch.consts, f"packet,lanes={lanes}", n=launch.n)
    assert 'asm "", "=r,0"' in ck.llvm_ir
    if target.host().isa.name == "x86-64":
        assert "pextrq" not in ck.assembly()

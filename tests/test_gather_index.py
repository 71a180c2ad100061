"""Lane indices kept cheap. Gathers keep 32-bit indices: after optimisation a vector `zext nneg`
i32 -> i64 (InstCombine's form of a sign extension it proved non-negative) is written back as
`sext`, which X86 code generation folds into a gather of 32-bit indices (all lanes of one
register) rather than of 64-bit ones (half of them): jit.sign_extended_indices, a tile's
row walked two slots at a time (the transpose operator's walk, one slot at a time, is
transposed in registers instead: tests/test_transposed_reads.py). And
per-lane atomics read their lanes' indices from memory (atomics.py)."""
import llvmlite.binding as llvm
import pytest

from cohort import Buffer, barrier, block_id, f32, global_id, kernel, shared, thread_id
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


@kernel(block=32)
def tile_rows(x: Buffer[f32], y: Buffer[f32]):
    """Thread t stages column t of a 32 x 32 tile, then sums the even slots of row t: at each
    k a gather of slots 32*t + 2*k (two slots per iteration: no prologue transposes the
    loop's windows), indices InstCombine proves non-negative."""
    t = thread_id()
    tile = shared(f32, 1024)
    for i in range(32):
        tile[i * 32 + t] = x[block_id() * 1024 + i * 32 + t]
    barrier()
    acc = 0.0
    for k in range(16):
        acc = acc + tile[t * 32 + 2 * k]
    y[global_id()] = acc


@pytest.mark.parametrize("lanes", [8, 16])
def test_host_tile_rows_read_keeps_32_bit_indices(lanes):
    ck = compile_kernel(tile_rows, {}, f"packet,lanes={lanes}", n=64)
    # (cooperative: every block is whole at any n, DESIGN §2, so there is no separate whole-block build)
    assert not ck.code.full_blocks and ck.lowering_counts["gathers"] == 1
    assert "zext nneg <" not in ck.llvm_ir


@pytest.mark.parametrize("cpu,lanes", [("znver4", 16), ("znver4", 8), ("x86-64-v4", 16)])
def test_tile_rows_gather_dwords_for_avx512(cpu, lanes):
    t = target.from_triple("x86_64-unknown-linux-gnu", cpu)
    asm = cross_compile(tile_rows, t, f"packet,lanes={lanes}", {}, kind="assembly", full_blocks=True)
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

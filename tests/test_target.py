"""Targets (cohort/backend/target.py): the host's description, explicit targets, objects
cross-compiled for AArch64 Linux and macOS arm64 (built by LLVM, never run here), code facts
read in AArch64 assembly, and no ISA- or OS-specific name anywhere else in the package."""
import os
import re
import struct

import llvmlite.binding as llvm
import numpy as np
import pytest

from cohort import Buffer, f32, fma, global_id, kernel
from cohort.backend import jit, pool_ir, target, timer
from cohort.backend.compiler import compile_kernel, cross_compile
from cohort.backend.facts import code_facts
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops

AARCH64_LINUX = "aarch64-unknown-linux-gnu"
MACOS_ARM64 = "arm64-apple-darwin"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cohort")


@kernel
def fused(a: Buffer[f32], b: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = fma(a[i], b[i], a[i])


def test_host_target_is_llvmlites_host():
    t = target.host()
    assert t is target.host() and t.is_host
    assert t.triple == llvm.get_process_triple() and t.cpu == llvm.get_host_cpu_name()
    d = jit.host()
    assert d["triple"] == t.triple and d["fma"] == t.native_fma and d["vector_bits"] == t.vector_bits
    assert t.vector_bits in (128, 256, 512) and t.registers_per_packet(8) >= 1
    assert target.current() is t


def test_explicit_targets():
    a = target.from_triple(AARCH64_LINUX)
    assert (a.isa.name, a.os.name, a.vector_bits, a.vector_isa, a.native_fma) == ("AArch64", "linux", 128, "NEON", True)
    assert a.futex_syscall == 98 and a.clock_monotonic == 1 and a.wait_wake == "futex"
    assert a.registers_per_packet(8) == 2 and a.width_text(16) == "four 128-bit NEON registers per packet"
    m = target.from_triple(MACOS_ARM64)
    assert m.os.name == "darwin" and m.cpu == "apple-m1" and m.futex_syscall is None and m.clock_monotonic == 6
    x = target.from_triple("x86_64-unknown-linux-gnu")
    assert x.futex_syscall == 202 and not x.native_fma and x.vector_bits == 128     # baseline x86-64: SSE2
    avx512 = target.from_triple("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx2,+fma,+avx512f")
    assert avx512.vector_bits == 512 and avx512.native_fma and avx512.width_text(16) == \
        "one 512-bit AVX-512 register per packet"
    # an 8-lane packet asks for 256-bit vectors (prefer-vector-width): one ymm, not a zmm
    assert avx512.width_text(8) == "one 256-bit AVX-512 register per packet"
    assert avx512.width_text(32) == "two 512-bit AVX-512 registers per packet"
    assert not target.from_triple(AARCH64_LINUX, features="-neon").native_fma


@pytest.mark.parametrize("triple,msg", [
    ("riscv64-unknown-linux-gnu", "instruction set 'riscv64' is not supported"),
    ("aarch64-unknown-windows", "operating system not supported"),
    ("x86_64-pc-windows-msvc", "operating system not supported"),
    ("nonsense", "expected ARCH-VENDOR-OS"),
    (None, "expected ARCH-VENDOR-OS"),
])
def test_unsupported_triples_are_clear_errors(triple, msg):
    with pytest.raises(ValueError, match=re.escape(msg)):
        target.from_triple(triple)


def test_use_takes_a_target():
    with pytest.raises(TypeError, match="expected a Target"):
        with target.use("aarch64"):
            pass
    with pytest.raises(ValueError, match="kind must be"):
        jit.emit("", target.host(), "exe")


def _elf_machine(obj: bytes) -> int:
    assert obj[:4] == b"\x7fELF", obj[:4]
    return struct.unpack_from("<H", obj, 18)[0]


def _macho_cpu(obj: bytes) -> int:
    magic, cputype = struct.unpack_from("<II", obj, 0)
    assert magic == 0xFEEDFACF, hex(magic)
    return cputype


def _check_object(t, obj: bytes):
    arm = t.isa.name == "AArch64"
    if t.os.name == "darwin":
        assert _macho_cpu(obj) == (0x0100000C if arm else 0x01000007)   # CPU_TYPE_ARM64 / X86_64
    else:
        assert _elf_machine(obj) == (183 if arm else 62)                # EM_AARCH64 / EM_X86_64


@pytest.mark.parametrize("triple", [AARCH64_LINUX, MACOS_ARM64, "x86_64-apple-darwin"])
def test_pool_and_timer_build_for(triple):
    t = target.from_triple(triple)
    text = pool_ir.ir(t)
    if t.os.name == "darwin":
        # no futex, and no variadic declaration: Apple arm64 passes variadic arguments on the stack
        assert "@syscall" not in text and "..." not in text and "@__ulock_wait(i32 1," in text
        assert "@clock_gettime(i32 6," in timer.ir(t)
    else:
        assert "@syscall(i64 98," in text and "i64 202" not in text
        assert "@clock_gettime(i32 1," in timer.ir(t)
    assert "define dso_local ptr @cohort_worker" in text
    _check_object(t, jit.emit(text, t))
    _check_object(t, jit.emit(timer.ir(t), t))
    calls = set(t.asm_calls(jit.emit(text, t, "assembly")))
    want = {"pthread_create", "pthread_join", "sched_yield"} | (
        {"__ulock_wait", "__ulock_wake"} if t.os.name == "darwin" else {"syscall"})
    assert want <= calls, calls


@pytest.mark.parametrize("triple", [AARCH64_LINUX, MACOS_ARM64])
@pytest.mark.parametrize("variant", ["whole", "packet", "packet,lanes=16"])
def test_kernels_build_for(triple, variant):
    t = target.from_triple(triple)
    op = ops.get("rmsnorm")
    launch = op.launch((17, 65))
    _check_object(t, cross_compile(op.kernel, t, variant, launch.consts))
    asm = cross_compile(op.kernel, t, variant, launch.consts, kind="assembly")
    v = parse_variant(variant)
    facts = code_facts("", asm, "entry", v, None, t)
    assert facts["vector_width_bits"] == 128 and facts["uses_vector_instructions"], facts
    assert facts["vector_registers_per_packet"] == t.registers_per_packet(v.lanes)
    assert facts["indirect_calls"] == 0 and facts["scalar_libm_calls"] == 0, facts


@pytest.mark.parametrize("triple", [AARCH64_LINUX, MACOS_ARM64])
def test_aarch64_fma_is_native_and_seen(triple):
    t = target.from_triple(triple)
    asm = cross_compile(fused.ir, t, "packet", kind="assembly")
    facts = code_facts("", asm, "entry", parse_variant("packet"), None, t)
    assert facts["fma"] > 0, asm                    # fmla: the hardware FMA, not the software sequence
    # the same kernel for a baseline x86-64 (no FMA) takes the software sequence
    x86 = target.from_triple("x86_64-unknown-linux-gnu")
    xasm = cross_compile(fused.ir, x86, "packet", kind="assembly")
    assert code_facts("", xasm, "entry", parse_variant("packet"), None, x86)["fma"] == 0


def test_aarch64_asm_calls_and_registers():
    isa = target.from_triple(AARCH64_LINUX)
    elf = ("\tadrp\tx8, :got:memset\n\tldr\tx8, [x8, :got_lo12:memset]\n\tblr\tx8\n"
           "\tmovz\tx9, #:abs_g3:expf\n\tmovk\tx9, #:abs_g2_nc:expf\n\tblr\tx9\n"
           "\tmov\tx9, x0\n\tblr\tx9\n\tbl\tlogf\n\tb.ne\t.LBB0_2\n")
    assert isa.asm_calls(elf) == ["memset", "expf", "*x9", "logf"]
    x86 = target.from_triple("x86_64-unknown-linux-gnu")
    att = ("\tmovabsq\t$memset, %rax\n\tcallq\t*%rax\n\tmovq\texpf@GOTPCREL(%rip), %rbx\n\tcallq\t*%rbx\n"
           "\tcallq\t*logf@GOTPCREL(%rip)\n\tcallq\t*8(%rsp)\n\tcallq\tsinf@PLT\n")
    assert x86.asm_calls(att) == ["memset", "expf", "logf", "*8(%rsp)", "sinf@PLT"]
    mac = target.from_triple(MACOS_ARM64)
    macho = "\tadrp\tx8, _memset@GOTPAGE\n\tldr\tx8, [x8, _memset@GOTPAGEOFF]\n\tblr\tx8\n\tbl\t_expf\n"
    assert mac.asm_calls(macho) == ["memset", "expf"]
    facts = code_facts("define void @f() {\n  ret void\n}\n", elf, "f", parse_variant("whole"), None, isa)
    assert facts["indirect_calls"] == 1 and facts["external_calls"] == ["expf", "logf", "memset"]
    assert facts["scalar_libm_calls"] == 2 and not facts["direct_cfg"]
    neon = "\tfmla\tv0.4s, v1.4s, v2.4s\n\tfmadd\ts0, s1, s2, s3\n"
    apple = "\tfmla.4s\tv0, v1, v2\n"
    sve = "\tfmla\tz0.s, p0/m, z1.s, z2.s\n"
    for asm, bits in ((neon, 128), (apple, 128), (sve, 128), ("\tfadd\tv0.2s, v1.2s, v2.2s\n", 64),
                      ("\tfadd\ts0, s1, s2\n", 0)):
        assert isa.isa.asm_vector_bits(asm) == bits, asm
    assert isa.isa.asm_fma_count(neon) == 2 and isa.isa.asm_fma_count(apple) == 1
    assert not isa.isa.asm_uses_vectors("\tb.ne\t.LBB0_1\n\tfadd\ts0, s1, s2\n")


def test_entry_attributes_follow_the_target():
    attrs = {"prefer-vector-width": "256", "min-legal-vector-width": "256", "no-builtin-memset": ""}
    assert target.from_triple("x86_64-linux-gnu").entry_attributes(attrs) == attrs
    assert target.from_triple(AARCH64_LINUX).entry_attributes(attrs) == {"no-builtin-memset": ""}


def test_host_runs_what_it_builds():
    # the host's own kernel, through the pool at two workers: the target's wait/wake sleeps and wakes
    y = np.zeros(4096, np.float32)
    a = np.arange(4096, dtype=np.float32)
    ck = compile_kernel(fused.ir, None, "packet,workers=2,grain=4")
    b = a.copy()
    ck.launch(4096, {"a": a, "b": b, "y": y})
    assert np.array_equal(y, (a.astype(np.float64) * a + a).astype(np.float32))


_FOREIGN = re.compile(r"\bavx\w*|\bsse\d\w*|%[xyz]mm\d*|\bznver\d|\bneon\b|\bfmla\b|\bvfmadd\w*|"
                      r"@syscall\(i64 \d+|__ulock_\w+|\bCLOCK_MONOTONIC\b.*\b[16]\b|\bq\d+\b.*\bv\d+\.4s", re.I)


def test_no_isa_or_os_names_outside_the_target_definitions():
    """Feature names, register names, syscall numbers and wait primitives live in target.py."""
    found = []
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            path = os.path.join(dirpath, f)
            if not f.endswith(".py") or path == os.path.join(ROOT, "backend", "target.py"):
                continue
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                code = line.split("#", 1)[0]
                for m in _FOREIGN.finditer(code):
                    found.append(f"{os.path.relpath(path, ROOT)}:{n}: {m.group(0)}")
    assert not found, found

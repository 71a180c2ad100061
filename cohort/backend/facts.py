"""Code facts of a compiled variant (DESIGN §8), read off its optimised IR and
its assembly, so that a table can say what the code actually does."""
from __future__ import annotations

import re

LIBM = {"exp", "expf", "exp2f", "log", "logf", "log2f", "sin", "sinf", "cos", "cosf", "tan", "tanf",
        "tanh", "tanhf", "erf", "erff", "erfc", "erfcf", "pow", "powf", "sqrt", "sqrtf", "fmaf", "fma",
        "expm1f", "log1pf", "atanf", "atan2f", "sincosf"}

_IR_CALL = re.compile(r"\bcall\b[^@]*@([\w.$\"]+)\(")
_IR_DEFINE = re.compile(r"^define\b[^@]*@([\w.$\"]+)\(", re.M)
_ASM_CALL = re.compile(r"^\s*call[lq]?\s+(\S+)", re.M)
_MOVABS = re.compile(r"movabsq\s+\$([A-Za-z_][\w.]*),\s*(%\w+)")
_PACKED = re.compile(r"^\s*v?\w+p[sd]\b|^\s*vp\w+|^\s*vmaskmov|^\s*vgather|^\s*vscatter|^\s*vbroadcast", re.M)


def code_facts(llvm_ir: str, asm: str, symbol: str, variant, lowering_counts: dict = None) -> dict:
    """Facts from the optimised IR and assembly; `lowering_counts` are what the
    lowering emitted on purpose (per-lane branches, span shuffles)."""
    lowering_counts = lowering_counts or {}
    ir_calls = [c.strip('"') for c in _IR_CALL.findall(llvm_ir)]
    # the module's own functions (the entry's bounds proof) are not calls out of the code
    own = {c.strip('"') for c in _IR_DEFINE.findall(llvm_ir)}
    external_ir = sorted({c for c in ir_calls if not c.startswith("llvm.") and c not in own})
    asm_calls = _ASM_CALL.findall(asm)
    # The JIT's large code model calls libc as `movabsq $memset, %rax; callq *%rax`:
    # a call out of the generated code to a known symbol, not an unknown target.
    loaded = dict((reg, sym) for sym, reg in _MOVABS.findall(asm))
    resolved = [loaded.get(c[1:], c) if c.startswith("*") else c for c in asm_calls]
    indirect = [c for c in resolved if c.startswith("*")]
    external_asm = sorted({c.split("@")[0] for c in resolved if not c.startswith("*")} - own)
    width = 512 if "%zmm" in asm else 256 if "%ymm" in asm else 128 if "%xmm" in asm else 0
    count = lambda pat: len(re.findall(pat, llvm_ir))
    return {
        "lanes": variant.lanes,
        "vector_width_bits": width,
        "uses_vector_instructions": bool(_PACKED.search(asm)),
        "scalar_libm_calls": sum(1 for c in ir_calls + external_asm if c in LIBM),
        "external_calls": sorted(set(external_ir) | set(external_asm)),
        "indirect_calls": len(indirect),
        "direct_cfg": not indirect and not external_ir and not external_asm,
        "masked_loads": count(r"@llvm\.masked\.load"),
        "masked_stores": count(r"@llvm\.masked\.store"),
        "gathers": count(r"@llvm\.masked\.gather"),
        "scatters": count(r"@llvm\.masked\.scatter"),
        "shuffles": count(r"= shufflevector"),
        "scalarised_lanes": lowering_counts.get("scalarised_lanes", 0),
        "interleaved_packets": lowering_counts.get("interleave", 1),
        "barriers": lowering_counts.get("barriers", 0),
        "atomic_updates": lowering_counts.get("atomics", 0),
        "fma": count(r"@llvm\.fma|@llvm\.fmuladd") + len(re.findall(r"^\s*vfmadd", asm, re.M)),
        "asm_instructions": sum(1 for line in asm.splitlines()
                                if line.startswith("\t") and not line.lstrip().startswith(".")),
    }

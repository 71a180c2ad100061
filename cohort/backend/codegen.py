"""One build's codegen configuration: everything besides the kernel that decides its code.

`resolve(variant)` reads, once per build, what used to be read where it was used: the
target being built for (target.current(): the host unless cross-compiling), the three
target-dependent lowering choices with their environment knobs (knobs.FMA, F16,
MASKED_STORE), the planted bugs (inject.py) and this thread's compile level
(jit.quick_compiles). The lowering asks the record; the compiler's cache keys are its `key`.

The choices, each with the reason it depends on the target:
- fma: DESIGN §3's fma(a, b, c) is a*b + c rounded once. llvm.fma means exactly that on
  every target, but without FMA instructions LLVM calls libm's fmaf per lane; there the
  software sequence (lower_ops._fma_software: exact float64 product, sum rounded to odd,
  one rounding to float32) gives the same bits with vector instructions only.
- f16: half <-> float conversions by the target's instructions (F16C's vcvtph2ps /
  vcvtps2ph) where they are exact on every pattern, else the integer operations of
  semantics.widen / narrow (tests/test_storage16.py checks both sides agree).
- masked_store: where the target runs llvm.masked.store as microcode
  (target.Target.slow_masked_store), each vector register's lanes branch first
  (lowering/memory.py masked_store); the same effect on memory either way.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import knobs
from . import inject, jit, target
from .variant import Variant


@dataclass(frozen=True)
class CodegenConfig:
    variant: Variant             # the knobs of variant.compile_key change code; grain and workers do not
    target: "target.Target"      # the machine built for (vector width; the choices below)
    fma: str                     # "hardware" (llvm.fma) | "software"
    f16: str                     # "hardware" (half conversions) | "software" (integer operations)
    masked_store: str            # "intrinsic" (llvm.masked.store) | "dispatch" (per register first)
    bugs: tuple                  # planted bugs, sorted (inject.key())
    level: int                   # LLVM compile level: jit.FULL (a user's build), 1 or 0 (the fuzzer's)
    full_blocks: bool = False    # specialised for launches of whole blocks only

    def __post_init__(self):
        # hashed once: a repeated compile_kernel looks its handle up by this record
        object.__setattr__(self, "_hash", hash((self.variant, self.target, self.fma, self.f16, self.masked_store,
                                                self.bugs, self.level, self.full_blocks)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def key(self) -> str:
        """Everything here that changes code, as text, but for full_blocks: with the kernel's
        printed text it is what compiler.cache_key digests (full_blocks is spelled after the
        digest, so both forms of a kernel share their symbol's prefix). The target is not
        spelled: the in-process cache holds host builds only (a cross build is emitted, never
        cached), and what the target decides is spelled by the choices."""
        quick = "" if self.level == jit.FULL else f"/quick{self.level}"
        return f"{self.variant.compile_key}\n{self.bugs}\n{self.fma}{self.f16}{self.masked_store}{quick}"

    def planted(self, bug: str) -> bool:
        """Whether deliberate bug `bug` (inject.BUGS) is compiled into this build: every
        codegen-time question about plants asks here (or the `bugs` an analysis was given),
        never the process's switches, which another thread may toggle during the build."""
        if bug in self.bugs:
            return True
        if bug not in inject.BUGS:
            raise ValueError(f"unknown planted bug {bug!r}; known: {sorted(inject.BUGS)}")
        return False

    def with_variant(self, variant: Variant) -> "CodegenConfig":
        """The same build choices for another variant (the checked twin, the general build)."""
        return replace(self, variant=variant)


def fma_lowering(tgt=None) -> str:
    """'hardware' where the target built for (default target.current()) has FMA instructions,
    else 'software'; COHORT_FMA=hardware|software forces either."""
    return _choice(knobs.FMA, (tgt or target.current()).native_fma, ("hardware", "software"))


def f16_lowering(tgt=None) -> str:
    """'hardware' where the target converts half exactly (target.Target.native_half), else
    'software'; COHORT_F16=hardware|software forces either."""
    return _choice(knobs.F16, (tgt or target.current()).native_half, ("hardware", "software"))


def masked_store_lowering(tgt=None) -> str:
    """'dispatch' where the target microcodes masked stores, else 'intrinsic';
    COHORT_MASKED_STORE=intrinsic|dispatch forces either."""
    return _choice(knobs.MASKED_STORE, (tgt or target.current()).slow_masked_store, ("dispatch", "intrinsic"))


def _choice(knob: knobs.Knob, native: bool, names: tuple) -> str:
    want = knob.get()
    if want == "auto":
        return names[0] if native else names[1]
    return want


_memo: dict = {}       # (variant, full_blocks, target, knob texts, bugs, level) -> CodegenConfig
_MEMO_MAX = 4096


def resolve(variant: Variant, full_blocks: bool = False) -> CodegenConfig:
    """The configuration of a build of `variant` made now, in this thread. Memoised on what it
    reads (a repeated compile_kernel resolves it in about a microsecond)."""
    tgt = target.current()
    memo = (variant, full_blocks, tgt, knobs.FMA.raw(), knobs.F16.raw(), knobs.MASKED_STORE.raw(),
            inject.key(), jit.level())
    c = _memo.get(memo)
    if c is None:
        c = CodegenConfig(variant, tgt, fma_lowering(tgt), f16_lowering(tgt), masked_store_lowering(tgt),
                          memo[6], memo[7], full_blocks)
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[memo] = c
    return c

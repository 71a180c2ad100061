"""The machine the backend builds for (DESIGN §1): one `Target` instead of host assumptions.

A target is an instruction set (x86-64 or AArch64) on an operating system
(Linux or macOS): its LLVM triple, CPU and features, the width of its vector
registers, whether FMA is an instruction, how the worker pool sleeps and wakes
(a futex system call on Linux, whose number depends on the instruction set;
`__ulock_wait`/`__ulock_wake` on macOS), the clock id of the native timer, how
code facts read its assembly, and which of the lowering's function attributes
it honours. Every name that belongs to one ISA or OS - feature names, syscall
numbers, register names, mnemonics - is written here and nowhere else in the
package.

`host()` describes the process's machine (built once, from llvmlite's host
queries); `from_triple()` describes another one (cross-compilation: objects
are emitted, never run). The lowering reads `current()`: the host, unless a
`use(target)` block says otherwise.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
import threading
from dataclasses import dataclass, field
from functools import cached_property

# ---------------------------------------------------------------- instruction sets


class _Isa:
    """What one instruction set means to the backend. Subclasses hold every ISA-specific name."""
    name = ""
    arches: tuple = ()                 # triple prefixes
    default_cpu = "generic"
    # the lowering's function attributes this ISA's code generator does not read (dropped)
    ignored_attributes: frozenset = frozenset()

    def vector_bits(self, features: frozenset) -> int:
        raise NotImplementedError

    def vector_isa(self, features: frozenset) -> str:
        raise NotImplementedError

    def native_fma(self, features: frozenset) -> bool:
        raise NotImplementedError

    def slow_masked_store(self, cpu: str, features: frozenset) -> bool:
        """Whether a vector store under a lane mask is microcoded (costs many cycles
        whatever the mask): the lowering then branches around it where it can."""
        return False

    def native_half(self, features: frozenset) -> bool:
        """Half <-> float conversion instructions the f16 storage lowering may use (lower_ops)."""
        return False

    def describe(self, features: frozenset) -> dict:
        return {}

    # assembly (code facts)
    def asm_vector_bits(self, asm: str) -> int:
        raise NotImplementedError

    def asm_uses_vectors(self, asm: str) -> bool:
        raise NotImplementedError

    def asm_fma_count(self, asm: str) -> int:
        raise NotImplementedError

    def asm_calls(self, asm: str) -> list:
        """Call targets in order: a symbol, or '*REG' for a call through a register whose
        symbol the code did not load."""
        raise NotImplementedError

    def cpuinfo_flags(self, cpuinfo: dict) -> list:
        return []


class _X86(_Isa):
    name = "x86-64"
    arches = ("x86_64", "amd64")
    default_cpu = "x86-64"
    futex_syscall = 202

    _CALL = re.compile(r"^\s*call[lq]?\s+(\S+)", re.M)
    # the JIT's large code model calls libc as `movabsq $memset, %rax; callq *%rax`; position-
    # independent objects load the address from the GOT (`movq memset@GOTPCREL(%rip), %rbx`)
    # or call through it (`callq *memset@GOTPCREL(%rip)`)
    _MOVABS = re.compile(r"movabsq\s+\$([A-Za-z_][\w.]*),\s*(%\w+)"
                         r"|movq\s+([A-Za-z_][\w.]*)@GOTPCREL\(%rip\),\s*(%\w+)")
    _GOTCALL = re.compile(r"^\*([A-Za-z_][\w.]*)@GOTPCREL\(%rip\)$")
    _PACKED = re.compile(r"^\s*v?\w+p[sd]\b|^\s*vp\w+|^\s*vmaskmov|^\s*vgather|^\s*vscatter|^\s*vbroadcast",
                         re.M)
    _FMA = re.compile(r"^\s*vfmadd", re.M)

    def vector_bits(self, features):
        return 512 if "avx512f" in features else 256 if "avx" in features else 128

    def vector_isa(self, features):
        return ("AVX-512" if "avx512f" in features else "AVX2" if "avx2" in features
                else "AVX" if "avx" in features else "SSE2")

    def native_fma(self, features):
        return "fma" in features

    # AMD's AVX2 cores run vmaskmovps to memory as microcode: 3.7 ns per store on the znver3
    # VM whether 0, 5 or 8 lanes are on, against 0.3 for a plain store (docs/README.md, a C loop
    # of _mm256_maskstore_ps); AVX-512's masked stores and Intel's AVX2 ones are not
    _MICROCODED_MASKED_STORE = ("znver1", "znver2", "znver3", "bdver", "btver")

    def slow_masked_store(self, cpu, features):
        return "avx512f" not in features and cpu.startswith(self._MICROCODED_MASKED_STORE)

    def native_half(self, features):
        # F16C's vcvtph2ps / vcvtps2ph: exact (RNE, subnormals kept, NaN quieted with its
        # payload) under the default MXCSR; measured equal to the integer lowering
        return "f16c" in features

    def describe(self, features):
        return {"avx2": "avx2" in features, "avx512f": "avx512f" in features}

    def asm_vector_bits(self, asm):
        return 512 if "%zmm" in asm else 256 if "%ymm" in asm else 128 if "%xmm" in asm else 0

    def asm_uses_vectors(self, asm):
        return bool(self._PACKED.search(asm))

    def asm_fma_count(self, asm):
        return len(self._FMA.findall(asm))

    def asm_calls(self, asm):
        loaded, out = {}, []           # register -> the symbol last loaded into it, in program text order
        for line in asm.splitlines():
            c = self._CALL.match(line)
            if c:
                c = c.group(1)
                got = self._GOTCALL.match(c)
                out.append(got.group(1) if got else loaded.get(c[1:], c) if c.startswith("*") else c)
                continue
            m = self._MOVABS.search(line)
            if m:
                loaded[m.group(2) or m.group(4)] = m.group(1) or m.group(3)
        return out

    def cpuinfo_flags(self, cpuinfo):
        flags = cpuinfo.get("flags", "").split()
        return sorted(f for f in flags if f.startswith(("avx", "fma", "sse", "f16c")))


class _AArch64(_Isa):
    name = "AArch64"
    arches = ("aarch64", "arm64")
    default_cpu = "generic"
    # vector-width preferences are read by the x86 code generator only
    ignored_attributes = frozenset({"prefer-vector-width", "min-legal-vector-width"})
    futex_syscall = 98

    # NEON registers: v0.4s (128-bit arrangements), v0.2s (64-bit), q0; SVE: z0.s. Apple's
    # assembly syntax puts the arrangement on the mnemonic instead (fadd.4s v0, v1, v2).
    _V128 = re.compile(r"\bv\d+\.(?:16b|8h|4s|2d)\b|\bq\d+\b|^\s*\w+\.(?:16b|8h|4s|2d)\s", re.M)
    _V64 = re.compile(r"\bv\d+\.(?:8b|4h|2s|1d)\b|^\s*\w+\.(?:8b|4h|2s|1d)\s", re.M)
    _SVE = re.compile(r"\bz\d+\.[bhsdq]\b")
    _PACKED = re.compile(r"^\s*\w+\s.*(?:\bv\d+\.\d*[bhsd]\b|\bz\d+\.[bhsdq]\b)|^\s*\w+\.\d*[bhsd]\s", re.M)
    _FMA = re.compile(r"^\s*(?:fmla|fmls|fmad|fmsb|fnmla|fnmls|fmadd|fmsub|fnmadd|fnmsub)\b", re.M)
    _CALL = re.compile(r"^\s*(bl|blr)\s+(\S+)", re.M)
    # a symbol's address in an operand: ELF relocation specifiers (adrp x8, :got:memset;
    # ldr x8, [x8, :got_lo12:memset]; movz x8, #:abs_g3:memset), Mach-O's (_memset@GOTPAGE),
    # or adrp's plain page of a symbol
    _INSN = re.compile(r"^\s*([a-z][\w.]*)\s+(x\d+)\s*,\s*(.*)$")
    _SYMREF = re.compile(r":(?:got|got_lo12|lo12|abs_g[0-3](?:_nc|_s)?):([A-Za-z_.$][\w.$]*)"
                         r"|([A-Za-z_.$][\w.$]*)@(?:GOTPAGE|GOTPAGEOFF|PAGE|PAGEOFF)\b")
    _PLAIN = re.compile(r"^([A-Za-z_.$][\w.$]*)$")

    def vector_bits(self, features):
        # fixed-width vectors are NEON's 128 bits; SVE's scalable registers are used for them
        # only under a vscale_range the backend does not set
        return 128 if self._neon(features) else 0

    def vector_isa(self, features):
        return "NEON" if self._neon(features) else "none"

    @staticmethod
    def _neon(features):
        return "-neon" not in features

    def native_fma(self, features):
        # FP and Advanced SIMD (with fused multiply-add) are part of the AArch64 base
        # architecture; only an explicit -fp-armv8 / -neon takes them away
        return "-fp-armv8" not in features and "-neon" not in features

    def describe(self, features):
        return {"sve": "sve" in features}

    def asm_vector_bits(self, asm):
        if self._SVE.search(asm):
            return 128          # SVE's minimum: the real width is the machine's (vscale)
        return 128 if self._V128.search(asm) else 64 if self._V64.search(asm) else 0

    def asm_uses_vectors(self, asm):
        return bool(self._PACKED.search(asm))

    def asm_fma_count(self, asm):
        return len(self._FMA.findall(asm))

    def asm_calls(self, asm):
        loaded, out = {}, []           # register -> the symbol whose address it holds
        for line in asm.splitlines():
            c = self._CALL.match(line)
            if c:
                kind, operand = c.groups()
                out.append(operand if kind == "bl" else loaded.get(operand, "*" + operand))
                continue
            m = self._INSN.match(line)
            if m:
                mnemonic, reg, rest = m.groups()
                ref = self._SYMREF.search(rest)
                plain = self._PLAIN.match(rest.strip()) if mnemonic == "adrp" else None
                if ref:
                    loaded[reg] = ref.group(1) or ref.group(2)
                elif plain:
                    loaded[reg] = plain.group(1)
                elif mnemonic != "movk":   # movk keeps the rest of the register
                    loaded.pop(reg, None)
        return out

    def cpuinfo_flags(self, cpuinfo):
        return sorted(cpuinfo.get("Features", "").split())


ISAS = (_X86(), _AArch64())

# ---------------------------------------------------------------- operating systems


class _Os:
    name = ""
    clock_monotonic = 1
    symbol_prefix = ""

    def wait_wake_ir(self, isa: _Isa) -> str:
        raise NotImplementedError


class _Linux(_Os):
    name = "linux"
    clock_monotonic = 1                # CLOCK_MONOTONIC
    FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129

    def wait_wake_ir(self, isa):
        nr = isa.futex_syscall
        return f"""declare i64 @syscall(i64, ...)

; futex(2): sleep while *addr == val (FUTEX_WAIT_PRIVATE); wake every sleeper (FUTEX_WAKE_PRIVATE)
define internal void @pool_wait(ptr %addr, i32 %val) {{
  call i64 (i64, ...) @syscall(i64 {nr}, ptr %addr, i32 {self.FUTEX_WAIT_PRIVATE}, i32 %val, ptr null, ptr null, i32 0)
  ret void
}}

define internal void @pool_wake(ptr %addr) {{
  call i64 (i64, ...) @syscall(i64 {nr}, ptr %addr, i32 {self.FUTEX_WAKE_PRIVATE}, i32 2147483647, ptr null, ptr null, i32 0)
  ret void
}}
"""


class _Darwin(_Os):
    name = "darwin"
    clock_monotonic = 6                # CLOCK_MONOTONIC in macOS's <time.h> (Linux's is 1)
    symbol_prefix = "_"                # Mach-O symbols
    UL_COMPARE_AND_WAIT, ULF_WAKE_ALL = 1, 0x100

    def wait_wake_ir(self, isa):
        # libSystem's __ulock_wait/__ulock_wake (what libc++'s atomic wait uses): not variadic,
        # so Apple arm64's varargs convention (arguments on the stack) never applies
        return f"""declare i32 @__ulock_wait(i32, ptr, i64, i32)
declare i32 @__ulock_wake(i32, ptr, i64)

; sleep while the 32-bit *addr == val (UL_COMPARE_AND_WAIT, no timeout); wake every sleeper
define internal void @pool_wait(ptr %addr, i32 %val) {{
  %v = zext i32 %val to i64
  call i32 @__ulock_wait(i32 {self.UL_COMPARE_AND_WAIT}, ptr %addr, i64 %v, i32 0)
  ret void
}}

define internal void @pool_wake(ptr %addr) {{
  call i32 @__ulock_wake(i32 {self.UL_COMPARE_AND_WAIT | self.ULF_WAKE_ALL}, ptr %addr, i64 0)
  ret void
}}
"""


OSES = (_Linux(), _Darwin())

# ---------------------------------------------------------------- the target


@dataclass(frozen=True)
class Target:
    triple: str
    cpu: str
    features: str                      # LLVM's "+a,-b" string ('' = the CPU's defaults)
    isa: _Isa = field(repr=False, compare=False)
    os: _Os = field(repr=False, compare=False)
    is_host: bool = False

    # -- derived facts
    @cached_property
    def feature_set(self) -> frozenset:
        """Enabled features by name, and disabled ones as '-name'."""
        out = set()
        for f in filter(None, (s.strip() for s in self.features.split(","))):
            out.add(f[1:] if f[0] == "+" else f)
        return frozenset(out)

    @cached_property
    def vector_bits(self) -> int:
        """Width of the widest vector register the code generator uses."""
        return self.isa.vector_bits(self.feature_set)

    @cached_property
    def vector_isa(self) -> str:
        return self.isa.vector_isa(self.feature_set)

    @cached_property
    def native_fma(self) -> bool:
        return self.isa.native_fma(self.feature_set)

    @cached_property
    def native_half(self) -> bool:
        return self.isa.native_half(self.feature_set)

    @cached_property
    def slow_masked_store(self) -> bool:
        return self.isa.slow_masked_store(self.cpu, self.feature_set)

    @property
    def wait_wake(self) -> str:
        return "futex" if self.os.name == "linux" else "__ulock_wait/__ulock_wake"

    @property
    def futex_syscall(self):
        return self.isa.futex_syscall if self.os.name == "linux" else None

    @property
    def clock_monotonic(self) -> int:
        return self.os.clock_monotonic

    @property
    def asm_dialect(self) -> str:
        return self.isa.name

    @property
    def name(self) -> str:
        """'x86-64 Linux', 'AArch64 macOS'."""
        return f"{self.isa.name} {'Linux' if self.os.name == 'linux' else 'macOS'}"

    def summary(self) -> str:
        """One line for the head of a benchmark's output: what its numbers ran on."""
        return (f"target: {self.name}, {self.vector_isa} ({self.vector_bits}-bit vector registers), "
                f"CPU {self.cpu}, FMA {'yes' if self.native_fma else 'no'} ({self.triple})")

    def registers_per_packet(self, lanes: int) -> int:
        """Vector registers one packet of `lanes` float32 lanes fills (0: no vector unit)."""
        bits = self.vector_bits
        return -(-32 * lanes // bits) if bits else 0

    def width_text(self, lanes: int) -> str:
        """'one 512-bit AVX-512 register per packet', 'one 256-bit AVX-512 register per packet'
        (8 lanes), 'four 128-bit NEON registers per packet'."""
        n = self.registers_per_packet(lanes)
        if n == 0:
            return "scalar code (no vector unit)"
        words = {1: "one", 2: "two", 3: "three", 4: "four", 8: "eight"}
        # a packet narrower than the widest registers asks for its own width (the lowering's
        # prefer-vector-width): 8 lanes on a 512-bit machine fill one 256-bit register
        bits = min(self.vector_bits, max(128, 32 * lanes))
        return (f"{words.get(n, str(n))} {bits}-bit {self.vector_isa} "
                f"register{'s' if n > 1 else ''} per packet")

    def entry_attributes(self, attrs: dict) -> dict:
        """The lowering's function attributes, less those this target's code generator ignores."""
        return {k: v for k, v in attrs.items() if k not in self.isa.ignored_attributes}

    def wait_wake_ir(self) -> str:
        """LLVM IR defining `@pool_wait(ptr, i32)` (sleep while *ptr == value) and
        `@pool_wake(ptr)` (wake every sleeper) with the OS's primitive."""
        return self.os.wait_wake_ir(self.isa)

    def strip_symbol(self, name: str) -> str:
        p = self.os.symbol_prefix
        return name[len(p):] if p and name.startswith(p) else name

    def asm_calls(self, asm: str) -> list:
        return [c if c.startswith("*") else self.strip_symbol(c) for c in self.isa.asm_calls(asm)]

    def describe(self) -> dict:
        """What a replay records about the machine its code was built for."""
        return {"triple": self.triple, "cpu": self.cpu, "isa": self.isa.name, "os": self.os.name,
                "vector_isa": self.vector_isa, "vector_bits": self.vector_bits, "fma": self.native_fma,
                **self.isa.describe(self.feature_set)}

    def cpuinfo_flags(self, cpuinfo: dict) -> list:
        return self.isa.cpuinfo_flags(cpuinfo)

    def target_machine(self, opt: int = 3, jit: bool = False):
        import llvmlite.binding as llvm
        _init_llvm(self.is_host)
        t = llvm.Target.from_triple(self.triple)
        if jit:
            return t.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                           reloc="default", codemodel="jitdefault", jit=True)
        return t.create_target_machine(cpu=self.cpu, features=self.features, opt=opt, reloc="pic")


def _parse_triple(triple: str):
    if not isinstance(triple, str) or triple.count("-") < 1:
        raise ValueError(f"target triple {triple!r}: expected ARCH-VENDOR-OS, e.g. aarch64-unknown-linux-gnu")
    arch = triple.split("-", 1)[0].lower()
    isa = next((i for i in ISAS if arch in i.arches), None)
    if isa is None:
        raise ValueError(f"target triple {triple!r}: instruction set {arch!r} is not supported "
                         f"(supported: {', '.join(a for i in ISAS for a in i.arches)})")
    rest = triple.lower()
    if "linux" in rest:
        os_ = OSES[0]
    elif "darwin" in rest or "macos" in rest or "apple" in rest:
        os_ = OSES[1]
    else:
        raise ValueError(f"target triple {triple!r}: operating system not supported (Linux or macOS)")
    return isa, os_


def from_triple(triple: str, cpu: str = "", features: str = "") -> Target:
    """An explicitly chosen target (for objects that are emitted, not run). Without a CPU, the
    ISA's baseline (x86-64, generic AArch64; apple-m1 for macOS on arm64)."""
    isa, os_ = _parse_triple(triple)
    if not cpu:
        cpu = "apple-m1" if os_.name == "darwin" and isa.name == "AArch64" else isa.default_cpu
    return Target(triple, cpu, features, isa, os_, is_host=False)


_host: list = []
_host_lock = threading.Lock()
_llvm_ready = set()


def _init_llvm(native_only: bool):
    import llvmlite.binding as llvm
    if "native" not in _llvm_ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        _llvm_ready.add("native")
    if not native_only and "all" not in _llvm_ready:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _llvm_ready.add("all")


def host() -> Target:
    """The process's machine, asked of llvmlite once."""
    if _host:
        return _host[0]
    with _host_lock:
        if not _host:
            import llvmlite.binding as llvm
            _init_llvm(True)
            triple = llvm.get_process_triple()
            isa, os_ = _parse_triple(triple)
            feats = llvm.get_host_cpu_features()
            _host.append(Target(triple, llvm.get_host_cpu_name(), feats.flatten(), isa, os_, is_host=True))
        return _host[0]


_current: contextvars.ContextVar = contextvars.ContextVar("cohort_target", default=None)


def current() -> Target:
    """The target code is being built for: the host unless inside `use(...)`."""
    t = _current.get()
    return host() if t is None else t


@contextlib.contextmanager
def use(target: Target):
    """Build for `target` inside the block (cross-compilation)."""
    if not isinstance(target, Target):
        raise TypeError(f"expected a Target, got {type(target).__name__}")
    token = _current.set(target)
    try:
        yield target
    finally:
        _current.reset(token)

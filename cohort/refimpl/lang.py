"""The names a kernel author writes: `@kernel`, types, built-ins.

Inside a `@kernel` function these names are not called by Python; the
frontend recognises them (by identity, so `import cohort as ck; ck.sqrt(x)`
works too) and emits IR. Called outside a kernel they raise.
"""
from __future__ import annotations

from .ir import AtomicOp, DType, Op, Reduce
from .opdefs import OPDEFS


class Builtin:
    def __init__(self, name: str, kind: str, payload=None):
        self.name, self.kind, self.payload = name, kind, payload

    def __call__(self, *a, **k):
        raise RuntimeError(f"{self.name}() can only be used inside a @kernel function")

    def __repr__(self) -> str:
        return f"cohort.{self.name}"


class ScalarType(Builtin):
    """f32 / i32 / u32: a scalar annotation, and a conversion inside kernels."""

    def __init__(self, dtype: DType):
        super().__init__(dtype.value, "cast", dtype)
        self.dtype = dtype


class BufferType:
    def __init__(self, dtype: DType):
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Buffer[{self.dtype.value}]"


class StorageType:
    """bf16 / f16: a buffer element type only (Buffer[bf16]); loads give f32, stores round."""

    def __init__(self, dtype: DType):
        self.dtype = dtype
        self.name = dtype.value

    def __repr__(self) -> str:
        return f"cohort.{self.name}"


class _BufferFactory:
    def __getitem__(self, t):
        if isinstance(t, (ScalarType, StorageType)):
            return BufferType(t.dtype)
        if t is bool:
            return BufferType(DType.BOOL)
        raise TypeError(f"Buffer[...] takes f32, i32, u32, bool, bf16 or f16, got {t!r}")


class ConstType:
    def __repr__(self) -> str:
        return "Const[int]"


class _ConstFactory:
    def __getitem__(self, t):
        if t is not int:
            raise TypeError("Const[...] only takes int")
        return ConstType()


Buffer = _BufferFactory()
Const = _ConstFactory()
f32, i32, u32 = ScalarType(DType.F32), ScalarType(DType.I32), ScalarType(DType.U32)
bf16, f16 = StorageType(DType.BF16), StorageType(DType.F16)


def _launch_builtin(op: Op) -> Builtin:
    """A built-in of no arguments, named as the registry spells it (and the printer writes it)."""
    return Builtin(OPDEFS[op].spelling.text, "builtin", op)


thread_id = _launch_builtin(Op.THREAD_ID)
block_id = _launch_builtin(Op.BLOCK_ID)
global_id = _launch_builtin(Op.GLOBAL_ID)
block_size = _launch_builtin(Op.BLOCK_SIZE)
num_threads = _launch_builtin(Op.NUM_THREADS)

block_sum = Builtin("block_sum", "collective", Reduce.SUM)
block_max = Builtin("block_max", "collective", Reduce.MAX)
block_min = Builtin("block_min", "collective", Reduce.MIN)

private = Builtin("private", "private")
shared = Builtin("shared", "shared")          # s = shared(f32, N): one array per block
barrier = Builtin("barrier", "barrier")       # every thread of the block waits here
atomic_add = Builtin("atomic_add", "atomic", AtomicOp.ADD)
atomic_sub = Builtin("atomic_sub", "atomic", AtomicOp.SUB)
atomic_min = Builtin("atomic_min", "atomic", AtomicOp.MIN)
atomic_max = Builtin("atomic_max", "atomic", AtomicOp.MAX)
atomic_and = Builtin("atomic_and", "atomic", AtomicOp.AND)
atomic_or = Builtin("atomic_or", "atomic", AtomicOp.OR)
atomic_xor = Builtin("atomic_xor", "atomic", AtomicOp.XOR)
bitcast = Builtin("bitcast", "bitcast")
sqrt = Builtin("sqrt", "sqrt")
fma = Builtin("fma", "fma")          # fma(a, b, c) = a*b + c rounded once (DESIGN §3)
exp = Builtin("exp", "math")
log = Builtin("log", "math")
erf = Builtin("erf", "math")
tanh = Builtin("tanh", "math")
sigmoid = Builtin("sigmoid", "math")
sin = Builtin("sin", "math")
cos = Builtin("cos", "math")

INF = float("inf")
NAN = float("nan")

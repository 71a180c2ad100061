"""The IR's vocabulary: value types, the names of the operations, and source locations.

Nothing here gives an operation a meaning or a type rule (opdefs.py does) or builds a node
(expr.py does), so semantics, opdefs, expr and stmts all stand on this module and on no
other part of the IR; `ir` re-exports it for everyone else.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

import numpy as np


class DType(enum.Enum):
    F32 = "f32"
    I32 = "i32"
    U32 = "u32"
    BOOL = "bool"
    BF16 = "bf16"    # storage only (Buffer[bf16]): loads widen to f32, stores round (DESIGN §3)
    F16 = "f16"      # storage only (Buffer[f16])

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype of a buffer of this type (bf16: its bits, as uint16)."""
        return _NP[self]

    @property
    def is_storage(self) -> bool:
        """A buffer element type only: no value has it (bf16, f16)."""
        return self in (DType.BF16, DType.F16)

    @property
    def compute(self) -> "DType":
        """The type of a value loaded from, or stored to, a buffer of this type."""
        return DType.F32 if self.is_storage else self

    @property
    def is_float(self) -> bool:
        return self is DType.F32

    @property
    def is_int(self) -> bool:
        return self in (DType.I32, DType.U32)

    @property
    def is_number(self) -> bool:
        return self in (DType.F32, DType.I32, DType.U32)

    def __repr__(self) -> str:
        return self.value


f32, i32, u32, boolean = DType.F32, DType.I32, DType.U32, DType.BOOL
_NP = {DType.F32: np.dtype(np.float32), DType.I32: np.dtype(np.int32),
       DType.U32: np.dtype(np.uint32), DType.BOOL: np.dtype(np.bool_),
       DType.BF16: np.dtype(np.uint16), DType.F16: np.dtype(np.float16)}
DTYPE_BY_NAME = {d.value: d for d in DType}
VALUE_DTYPES = (DType.F32, DType.I32, DType.U32, DType.BOOL)     # the types a value can have
STORAGE_DTYPES = (DType.BF16, DType.F16)
I32_MIN, I32_MAX, U32_MAX = -(2 ** 31), 2 ** 31 - 1, 2 ** 32 - 1


class Op(enum.Enum):
    """Every operation, in labelled groups; opdefs.OPDEFS holds one record for each."""
    # leaves
    CONST = enum.auto()        # arg: Python value (float/int/bool)
    PARAM = enum.auto()        # arg: name of a scalar or Const parameter
    VAR = enum.auto()          # arg: name of a thread-local variable
    ARG = enum.auto()          # arg: index; placeholder inside math templates
    # built-ins
    THREAD_ID = enum.auto()
    BLOCK_ID = enum.auto()
    GLOBAL_ID = enum.auto()
    BLOCK_SIZE = enum.auto()
    NUM_THREADS = enum.auto()
    BUFLEN = enum.auto()       # arg: buffer name
    # unary
    NEG = enum.auto()
    NOT = enum.auto()          # logical not on bool, bitwise not on ints
    ABS = enum.auto()
    SQRT = enum.auto()
    # binary arithmetic
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    DIV = enum.auto()          # float: IEEE; int: C truncation
    MOD = enum.auto()          # int only: C remainder (sign of dividend)
    MIN = enum.auto()          # a if a < b else b
    MAX = enum.auto()          # a if a > b else b
    # ternary arithmetic
    FMA = enum.auto()          # f32 only: a*b + c rounded once (IEEE fusedMultiplyAdd)
    # bitwise (ints; AND/OR/XOR also on bool)
    AND = enum.auto()
    OR = enum.auto()
    XOR = enum.auto()
    SHL = enum.auto()
    SHR = enum.auto()          # arithmetic on i32, logical on u32
    # comparisons (float: ordered, except NE which is unordered)
    LT = enum.auto()
    LE = enum.auto()
    GT = enum.auto()
    GE = enum.auto()
    EQ = enum.auto()
    NE = enum.auto()
    # selection and conversion
    SELECT = enum.auto()       # src (c, a, b): a where c else b; a and b evaluated lazily
    CAST = enum.auto()         # value conversion to self.dtype
    BITCAST = enum.auto()      # reinterpret 32 bits as self.dtype
    # memory
    LOAD = enum.auto()         # arg: buffer name; src (index,)
    PLOAD = enum.auto()        # arg: private array name; src (index,)
    SLOAD = enum.auto()        # arg: shared array name; src (index,)
    # math library
    MATH = enum.auto()         # arg: function name; src (x,); defined in mathlib


class Reduce(enum.Enum):
    SUM = "block_sum"
    MAX = "block_max"
    MIN = "block_min"


class AtomicOp(enum.Enum):
    """Read-modify-write statements; each is commutative and associative on its types,
    so the final memory is the same for every order of the updates (DESIGN §3)."""
    ADD = "atomic_add"       # i32/u32, wrapping
    SUB = "atomic_sub"       # i32/u32, wrapping (adds the negation)
    MIN = "atomic_min"       # i32/u32; f32 in the total order below
    MAX = "atomic_max"
    AND = "atomic_and"       # i32/u32
    OR = "atomic_or"
    XOR = "atomic_xor"


class ParamKind(enum.Enum):
    BUFFER = "buffer"
    SCALAR = "scalar"
    CONST = "const"


class IRTypeError(TypeError):
    """A type rule was broken; the frontend adds the source line."""


@dataclass(frozen=True)
class Loc:
    line: Optional[int] = None
    text: str = ""

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "statement"
        return f"{where}: `{self.text}`" if self.text else where


NOLOC = Loc()

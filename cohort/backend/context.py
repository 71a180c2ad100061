"""Shared lowering context: LLVM types, constants, intrinsics, the entry ABI.

The entry ABI (one signature for every kernel, so one timer and one launcher
serve all): `void entry(int64_t *args)`, where `args` holds 64-bit slots

    [0] n (threads)   [1] first block   [2] end block   [3] error record (int64[4]*)
    [4] scratch memory for private and shared arrays   [5] its size in bytes
    [6] the bounds proof of this block: 0, or the tag of the safe build that proved it
    then per buffer parameter: data pointer, length (elements)
    then per scalar parameter: its 32 bits, zero-extended

The error record is written by `checked` builds (kind, statement id, index,
thread; kind 0 means no error) and by any build handed too little scratch,
or (a build specialised for launches of whole blocks) a partial last block.
The default (safe) build writes ERR_UNPROVEN, before touching any memory,
when it cannot prove a launch's affine indices in bounds (bounds.py); its
data-dependent accesses are checked one by one, as in `checked` builds.
A proof holds for one argument block: the build writes its tag into slot 6,
and later calls with the same block skip the proof. Whoever writes n, a
pointer, a length or a scalar into a block sets slot 6 to 0 (launch_plan.LaunchPlan,
the block's one writer; a pooled block refilled with new pointers only keeps it, since
no proof reads a pointer).
Private arrays live in the caller's scratch memory, not on the stack: a
kernel's private arrays may need megabytes per block, and a stack overflow
is a crash, not an error.
"""
from __future__ import annotations

import struct

from llvmlite import ir

from ..refimpl.ir import DType, Kernel, ParamKind, Private, Shared

I64 = ir.IntType(64)
I32T = ir.IntType(32)
I8 = ir.IntType(8)
I1 = ir.IntType(1)
PTR = ir.PointerType()
VOID = ir.VoidType()

SLOT_N, SLOT_BEGIN, SLOT_END, SLOT_ERR, SLOT_SCRATCH, SLOT_SCRATCH_BYTES, SLOT_PROOF = 0, 1, 2, 3, 4, 5, 6
SLOT_FIRST_PARAM = 7
ERR_NONE, ERR_LOAD_OOB, ERR_STORE_OOB, ERR_PRIVATE_OOB, ERR_SCRATCH, ERR_PARTIAL_BLOCK = 0, 1, 2, 3, 4, 5
ERR_UNPROVEN = 6     # safe builds: an index bound failed for this launch; nothing ran, rerun checked
ERR_SHARED_OOB = 7
ERR_UNINIT_SHARED = 8   # sanitize builds: a read of a shared slot no thread of the block wrote
ERR_SHARED_RACE = 9     # sanitize builds: two threads' accesses of a shared slot between barriers
ERR_GLOBAL_RACE = 10    # sanitize builds: two threads' accesses of a buffer element (sanitize_global.py)
ERR_BARRIER_DIVERGENCE = 11   # sanitize builds: a block's threads would not all reach a barrier
ERR_SHADOW = 12         # sanitize builds: a buffer longer than its shadow; nothing ran, rerun fitted
ERR_RECORD_BUSY = -1    # the record's kind while a lane writes it (lowering/checks.py claim_function)
SCRATCH_ALIGN = 64
MAX_SCRATCH_BYTES = 256 << 20


def private_layout(kernel: Kernel, config) -> tuple:
    """({private or shared array name: byte offset in scratch}, total bytes) for one block
    of B threads: a private array has an element per thread, a shared one per block (in a
    build of CodegenConfig `config`: a planted bug changes that)."""
    offsets, total = {}, 0
    for s in kernel.body:
        if isinstance(s, (Private, Shared)):
            offsets[s.name] = total
            per = kernel.block if isinstance(s, Private) or config.planted("shared_per_packet") else 1
            nbytes = array_bytes(s, per)
            total += -(-nbytes // SCRATCH_ALIGN) * SCRATCH_ALIGN
    return offsets, total


def array_bytes(s, copies: int) -> int:
    """Bytes of `copies` copies of private or shared array `s` (a bool is one byte)."""
    return int(s.size.arg) * copies * (1 if s.dtype is DType.BOOL else 4)


def private_bytes(kernel: Kernel) -> int:
    """Bytes of a block's private arrays (an element per thread each)."""
    return sum(array_bytes(s, kernel.block) for s in kernel.body if isinstance(s, Private))


def load_slot(b: ir.IRBuilder, args, slot: int) -> ir.Instruction:
    """The i64 in slot `slot` of the argument block `args` (the entry's only parameter)."""
    return b.load(b.gep(args, [ir.Constant(I64, slot)], source_etype=I64), typ=I64, align=8)


def abi_slots(kernel: Kernel) -> dict:
    """Slot index of every parameter: buffers (ptr, len), then scalars."""
    slots, i = {}, SLOT_FIRST_PARAM
    for p in kernel.params:
        if p.kind is ParamKind.BUFFER:
            slots[p.name] = (i, i + 1)
            i += 2
    for p in kernel.params:
        if p.kind is ParamKind.SCALAR:
            slots[p.name] = (i,)
            i += 1
    slots["__count__"] = i
    return slots


class _FormattedVector(ir.Constant):
    """A vector constant whose text is formatted once (llvmlite re-formats every element of
    an ordinary vector constant at each use, which was half of a packet kernel's lowering time).
    `constant` keeps the element constants: shufflevector checks its mask through them."""

    def __init__(self, typ: ir.VectorType, values: tuple, text: str):
        ir.Constant.__init__(self, typ, list(values))
        self._text = text

    def _to_string(self):
        return f"{self.type} {self._text}"

    def get_reference(self):
        return self._text


_vector_constants: dict = {}


def vector_const(ty: ir.VectorType, values) -> ir.Constant:
    """The constant vector `values` (a scalar: every lane), shared between modules."""
    values = tuple(values) if isinstance(values, (list, tuple)) else (values,) * ty.count
    # floats by their bits: -0.0 == 0.0 and NaN payloads must not share an entry
    key = (str(ty), tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in values))
    c = _vector_constants.get(key)
    if c is None:
        if len(set(values)) == 1:
            text = f"splat ({ir.Constant(ty.element, values[0])})"
        else:
            text = "<" + ", ".join(str(ir.Constant(ty.element, v)) for v in values) + ">"
        c = _vector_constants.setdefault(key, _FormattedVector(ty, values, text))
    return c


def zero_of(ty: ir.Type) -> ir.Constant:
    """The zero of `ty`; a vector's is shared and printed once as `zeroinitializer` (llvmlite's
    null vector constant re-formats each of its elements at every use: a fifth of the time
    printing a packet module, measured on fuzz programs)."""
    if not isinstance(ty, ir.VectorType):
        return ir.Constant(ty, None)
    key = (str(ty), "zero")
    c = _vector_constants.get(key)
    if c is None:
        c = _vector_constants.setdefault(key, _FormattedVector(ty, (None,) * ty.count, "zeroinitializer"))
    return c


def _mangle(dt: DType, lanes: int) -> str:
    base = {DType.F32: "f32", DType.I32: "i32", DType.U32: "i32", DType.BOOL: "i1"}[dt]
    return base if lanes == 1 else f"v{lanes}{base}"


class Ctx:
    """Types and constants of one shape (scalar when lanes == 1, else vectors)."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder, lanes: int, config):
        # config: the build's CodegenConfig (codegen.py), which the op lowerings ask (fma, f16)
        self.module, self.b, self.lanes, self.config = module, builder, lanes, config
        self.fast_math = config.variant.fast_math

    def ty(self, dt: DType) -> ir.Type:
        t = scalar_type(dt)
        return t if self.lanes == 1 else ir.VectorType(t, self.lanes)

    def const(self, dt: DType, v) -> ir.Constant:
        if dt is DType.F32:
            v = float(v)
        elif dt is DType.BOOL:
            v = int(bool(v))
        else:
            v = int(v)
            v = v - (1 << 32) if v >= (1 << 31) else v
        c = ir.Constant(scalar_type(dt), v)
        return c if self.lanes == 1 else vector_const(self.ty(dt), v)

    def intrinsic(self, name: str, dts: list, args: list):
        """Call an overloaded intrinsic; the return type is dts[0], mangled by every dt."""
        full = name + "".join("." + _mangle(dt, self.lanes) for dt in dts)
        fn = self.module.globals.get(full)
        if fn is None:
            arg_types = [a.type for a in args]
            fn = ir.Function(self.module, ir.FunctionType(self.ty(dts[0]), arg_types), full)
        return self.b.call(fn, args)


def scalar_type(dt: DType) -> ir.Type:
    return {DType.F32: ir.FloatType(), DType.I32: I32T, DType.U32: I32T, DType.BOOL: I1}[dt]


def mem_type(dt: DType) -> ir.Type:
    """How a dtype sits in a buffer: bool is one byte (NumPy's bool_), bf16/f16 their 16 bits."""
    if dt.is_storage:
        return ir.IntType(16)
    return I8 if dt is DType.BOOL else scalar_type(dt)

"""The lowering's state, in records with one owner each (core.py's Lowering holds one of each).

- BuildFacts: what the build knows before emitting anything - the specialised kernel, its
  CodegenConfig and the analyses of the kernel (lane shapes, bounds proof, region plan,
  private arrays' layout). Made once per build (`BuildFacts.of`), frozen.
- EntryArgs: the values the entry reads from its argument block (context.py's ABI) and what
  they decide for the whole call (the live threads, whether it runs the whole launch).
  Made once per function by Lowering.lower's prologue, frozen.
- EntryStorage: what the entry allocates once: the variables' slots, the per-thread arrays of
  values kept across regions, the private and shared arrays, the collectives' trees.
  Made by Lowering.lower after the prologue, frozen.
- SanitizeShadows: the sanitize build's written flags, race shadows and phase counters
  (sanitize.py, sanitize_global.py); empty in every other build. Made with EntryStorage.
- EmitState: where the emission is - the masks, the statement being lowered, the block and
  packet whose code is being emitted, the innermost loop. The one mutable record; it changes
  only by assignment to its fields (the masks only through Lanes.masked).
The dicts held in the frozen records are filled when the record is made and only read after.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from llvmlite import ir

from ...refimpl.ir import Kernel, defined_var, walk_stmts
from ..bounds import Bounds
from ..codegen import CodegenConfig
from ..context import private_layout
from ..private_init import written_before_read
from ..region_plan import RegionPlan, plan_regions
from ..shapes import ShapeAnalysis, choose_interleave


def var_types(kernel: Kernel) -> dict:
    return dict(filter(None, (defined_var(s) for s in walk_stmts(kernel.body))))


@dataclass(frozen=True)
class BuildFacts:
    kernel: Kernel               # specialised
    config: CodegenConfig        # every choice not the kernel's (codegen.py)
    B: int                       # threads of a block
    interleave: int              # packets side by side (1 for `whole`)
    W: int                       # lanes the lowering works in: lanes x interleave
    full_blocks: bool            # only launches of whole blocks are accepted
    private_order: str           # "cohort" (element-major across the block) or "thread"
    shapes: Optional[ShapeAnalysis]   # lane shapes (None at width 1: every value uniform)
    bounds: Optional[Bounds]     # the safe build's proof (None: checked or unsafe builds)
    types: dict                  # variable -> DType
    plan: RegionPlan             # barrier regions and the values that cross them (region_plan.py)
    constant_of: Any             # i32 expression -> its value when fixed at compile time, else None
    no_zeroing: frozenset        # private arrays every thread writes whole before reading (private_init.py)
    private_offsets: dict        # private or shared array -> byte offset in scratch
    scratch_bytes: int           # scratch one block needs
    fn_attributes: dict          # the entry's LLVM function attributes
    tuning: dict                 # the pass pipeline's switches (jit.py)

    @classmethod
    def of(cls, kernel: Kernel, config: CodegenConfig) -> "BuildFacts":
        variant = config.variant
        lanes = variant.lanes
        if lanes > 1 and (kernel.block < lanes or kernel.block % lanes):
            raise ValueError(f"block {kernel.block} is smaller than lanes {lanes}")
        # the default build is safe: affine indices proven per launch in the prologue,
        # the others checked per access; `unsafe` builds check nothing
        bounds = None if variant.checked or variant.unsafe else Bounds(kernel, config.bugs)
        interleave = 1 if lanes == 1 else choose_interleave(kernel, lanes, variant.interleave, config.bugs)
        W = lanes * interleave
        constant_of = (bounds or Bounds(kernel, config.bugs)).constant    # i32 values known at compile time
        offsets, scratch_bytes = private_layout(kernel, config)
        fn_attributes, tuning = llvm_settings(W, lanes)
        return cls(
            kernel=kernel, config=config, B=kernel.block, interleave=interleave, W=W,
            # a cooperative kernel runs whole blocks at any n
            full_blocks=config.full_blocks and variant.full_packet and not kernel.cooperative,
            # one thread at a time (width 1) has its arrays side by side, thread-major,
            # whatever the knob says
            private_order=variant.private if W > 1 else "thread",
            shapes=ShapeAnalysis(kernel, W, config.bugs) if W > 1 else None,
            bounds=bounds, types=var_types(kernel), plan=plan_regions(kernel, config.bugs),
            constant_of=constant_of, no_zeroing=frozenset(written_before_read(kernel, constant_of)),
            private_offsets=offsets, scratch_bytes=scratch_bytes, fn_attributes=fn_attributes, tuning=tuning)


def llvm_settings(W: int, lanes: int):
    """(function attributes, pass-pipeline tuning). Packets are vectorised by
    construction: LLVM's vectorisers and unroller would only cost compile time, and
    vectors stay in registers of `lanes` (lanes=16 asks for 512 bits). At width 1,
    whatever LLVM vectorises on its own stays in 256-bit registers (the W8 machine)."""
    if W == 1:
        return ({"prefer-vector-width": "256", "no-builtin-memset": ""},
                {"loop_unrolling": False, "slp_vectorization": False})
    bits = str(32 * lanes)
    return ({"prefer-vector-width": bits, "min-legal-vector-width": bits, "no-builtin-memset": ""},
            {"loop_unrolling": False, "loop_vectorization": False, "slp_vectorization": False})


@dataclass(frozen=True)
class EntryArgs:
    n64: ir.Value                # n, the launch's threads (i64)
    n32: ir.Value
    live64: ir.Value             # the threads that exist: n, or every thread of a cooperative launch's blocks
    live32: ir.Value
    err_ptr: ir.Value            # the error record (int64[4]*)
    bufs: dict                   # buffer -> data pointer
    lens: dict                   # buffer -> length (i64)
    scalars: dict                # scalar parameter -> its value (f32 or i32)
    scalar_bits: dict            # scalar parameter -> its 32 bits (i32)
    whole_launch: ir.Value       # this call runs every block of the launch (i1): no other thread of it exists


@dataclass(frozen=True)
class EntryStorage:
    block_slots: dict            # block-level loop variable -> its one i32 slot
    slots: dict                  # variable -> its slot (a value of the lowering's width)
    arrays: dict                 # variable kept per thread across regions -> its per-thread array
    privates: dict               # private array -> (pointer, size, dtype)
    shared_arrays: dict          # shared array -> (pointer, size, dtype)
    trees: dict                  # id(collective) -> its reduction tree's scratch


@dataclass(frozen=True)
class SanitizeShadows:
    written_flags: dict = field(default_factory=dict)   # shared array -> (flags, 8-byte words)
    shadows: dict = field(default_factory=dict)         # shared array -> its race shadows
    phase_ptr: Any = None                                # the block's phase (shared races)
    gshadow: dict = field(default_factory=dict)         # buffer -> its shadow (global races)
    gphase_ptr: Any = None                               # the block's phase (global races)
    record: Any = None                                   # sanitize_record.layout of the build, or None


@dataclass
class EmitState:
    mask: Any = None             # lanes whose effects happen (None: all; lanes.py)
    cmask: Any = None            # lanes whose control flow is live (None: all)
    cur: Any = None              # the statement being lowered (error records)
    whole_block: bool = False    # the block being emitted has no partial packet
    tail_path: bool = False      # the packet being emitted runs under the launch mask
    bid: Any = None              # the block being emitted (i32)
    t0: Any = None               # the packet's first thread in its block (i32)
    tid: Any = None              # the packet's thread ids (W lanes)
    gid: Any = None              # the packet's global ids (W lanes)
    loop_k: Any = None           # the innermost kernel loop's iteration number (i64)
    no_wrap: bool = False        # evaluating a proven index with every lane live (exprs.index_value)
    transposed: dict = field(default_factory=dict)   # id(shared load) -> its scratch, in the loop that owns it
    unroll_full: Any = None      # the module's llvm.loop.unroll.full node, made at its first use

"""One lowering for every width: `whole` is width 1, packets are width W.

A block is a cohort of B/W packets, each W threads side by side as the lanes
of SIMD vectors (after ISPC's foreach), or at width 1 one thread. W is the
width the lowering works in: `interleave` packets of `lanes` side by side,
split by LLVM into hardware vectors of `lanes`.

Per block and phase (collectives.py), packets p = 0.. run one after another.
With `full_packet` on, the launch's whole blocks take the full path (mask
statically all-on: plain vector loads and stores) and its one partial block,
if any, the masked path, emitted by the same code under the launch mask;
with it off every block runs masked. A build specialised for launches of whole blocks
(`full_blocks`, chosen when the launch size is known to be a multiple of the
block, as Triton specialises on divisibility) has no masked path at all and
refuses any other launch. At width 1 no packet is ever partial.

Statements (stmts.py), expressions (exprs.py, one rule per Op), loops
(loops.py), memory access classes (memory.py), collectives (collectives.py)
and safety checks (checks.py) are written once, each module one part of the
`Lowering` class; lanes.py holds the few helpers that differ at width 1 (where
they are the identity) and the mask. They share the state records of state.py,
which this module makes: the build's facts at construction, the entry's
arguments and storage in `lower`'s prologue, and the one mutable record,
`now`, where the emission is.
"""
from __future__ import annotations

from collections import Counter

from llvmlite import ir

from ...refimpl.ir import DType, Expr, Kernel, ParamKind, Private, Shared
from ..claims import LaneClaim
from ..context import (
    ERR_PARTIAL_BLOCK,
    ERR_SCRATCH,
    I8,
    I32T,
    I64,
    PTR,
    SLOT_BEGIN,
    SLOT_END,
    SLOT_ERR,
    SLOT_N,
    SLOT_SCRATCH,
    SLOT_SCRATCH_BYTES,
    VOID,
    Ctx,
    abi_slots,
    array_bytes,
    load_slot,
    mem_type,
    private_bytes,
)
from ..region_plan import names_in
from ..shapes import UNIFORM, Shape
from .atomics import AtomicLowering
from .checks import Checks
from .collectives import CollectiveLowering, assigned_in
from .exprs import ExprLowering
from .lanes import Lanes
from .loops import LoopLowering
from .memory import MemoryLowering
from .regions import RegionLowering
from .sanitize import Sanitizer
from .state import BuildFacts, EmitState, EntryArgs, EntryStorage, SanitizeShadows
from .stmts import StmtLowering
from .transposed import TransposedReads

# Private arrays of at most this many bytes a block live on the entry's stack, not in the
# caller's scratch (which stays allocated: the entry ABI does not change). Small arrays are
# the ones worth it: a CUB-style items[] of a few items per thread, indexed by constants once
# its loops are unrolled, is promoted to registers - rmsnorm's private form at 17x65 ran
# 0.62 -> 0.34 us, faster than its stream form (docs/private). 16 KiB is far inside any
# thread's stack (glibc's default is 8 MiB, the pool's threads included).
PRIVATE_STACK_BYTES = 16 << 10


class Lowering(ExprLowering, StmtLowering, LoopLowering, MemoryLowering, CollectiveLowering, RegionLowering,
               AtomicLowering, TransposedReads, Checks, Sanitizer, Lanes):
    """Lower a specialised kernel to one LLVM function `void symbol(int64_t *args)`
    (the entry ABI of context.py) running any range of a launch's blocks.

    Its state is in the records of state.py: `facts` (the build's, frozen), `entry` and
    `storage` (the function's, made once by `lower`), `shadow` (the sanitize build's) and
    `now` (where the emission is). What else it holds is the emission's machinery (module,
    function, builder, contexts) and its products (counts, lane claims, the statement table)."""

    def __init__(self, kernel: Kernel, symbol: str, config):
        # config: the build's CodegenConfig (codegen.py); every choice not the kernel's is asked of it
        self.facts = BuildFacts.of(kernel, config)
        self.module = ir.Module(name=kernel.name)
        self.fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), symbol)
        self.fn.attributes.add("nounwind")
        self.entry_bb = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry_bb)
        self.cx = Ctx(self.module, self.b, self.W, config)   # values of the lowering's width
        self.sx = Ctx(self.module, self.b, 1, config)        # scalars
        # products, read by the compiler
        self.counts = Counter()
        self.annotations: dict = {}   # id(node or stmt) -> LaneClaim
        self.stmt_ids: dict = {}      # id(stmt) -> index into self.stmt_table
        self.stmt_table: list = []
        self.spec_cache: dict = {}    # memo of the expression lowering (exprs.py)
        # made by lower(); `now` changes while emitting
        self.entry: EntryArgs = None
        self.storage: EntryStorage = None
        self.shadow = SanitizeShadows()
        self.now = EmitState(whole_block=self.facts.full_blocks)

    # The build's facts under the names the lowering is written in; what the configuration
    # decides is read from it, never copied into a second attribute that could drift (codegen.py).
    @property
    def config(self):
        return self.facts.config

    @property
    def k(self) -> Kernel:
        return self.facts.kernel

    @property
    def B(self) -> int:
        return self.facts.B

    @property
    def W(self) -> int:
        """Lanes the lowering works in: packets x interleave, 1 for `whole`."""
        return self.facts.W

    @property
    def variant(self):
        return self.config.variant

    @property
    def checked(self) -> bool:
        """Every access bounds-checked in the native code (variant checked=on)."""
        return self.config.variant.checked

    @property
    def packet(self) -> int:
        """Lanes of one packet (variant lanes); W = packet * interleave."""
        return self.config.variant.lanes

    def planted(self, bug: str) -> bool:
        """Whether deliberate bug `bug` (inject.BUGS) is in this build: asked of its
        configuration, whose key is the compile key, never of the process's switches."""
        return self.config.planted(bug)

    # what the compiler reads of the build
    @property
    def plan(self):
        return self.facts.plan

    @property
    def interleave(self) -> int:
        return self.facts.interleave

    @property
    def full_blocks(self) -> bool:
        return self.facts.full_blocks

    # ------------------------------------------------------------ lane facts
    def shape(self, e: Expr) -> Shape:
        """How e varies across the lanes (shapes.py); at width 1 every value is uniform."""
        return UNIFORM if self.facts.shapes is None else self.facts.shapes.shape(e)

    def shape_of_var(self, name: str):
        return UNIFORM if self.facts.shapes is None else self.facts.shapes.vars.get(name)

    def annotate(self, key, kind: str, name: str, access, mode: str):
        """Record the lane claim this lowering of `key` rests on (claims.py)."""
        self.annotations[id(key)] = LaneClaim.of(kind, name, access, mode, self.annotations.get(id(key)))

    @property
    def lane_claims(self) -> dict:
        """The annotations the interpreter checks; at width 1 there are no lanes to claim about."""
        return self.annotations if self.W > 1 else {}

    # ------------------------------------------------------------ entry
    def alloca(self, ty, name=""):
        with self.b.goto_block(self.entry_bb):
            self.b.position_at_start(self.entry_bb)
            a = self.b.alloca(ty, name=name)
        a.type = PTR  # opaque, like every pointer in LLVM 22; GEPs name their element type
        return a

    def lower(self) -> ir.Module:
        b, k = self.b, self.k
        slot = lambda i: load_slot(b, self.fn.args[0], i)
        begin, end, nblocks = self.prologue(slot)
        self.allocate(slot)
        if self.W == 1 or self.full_blocks or not self.variant.full_packet or k.cooperative:
            # a cooperative kernel's blocks are all whole (DESIGN §2): one body, no partial path
            # (masked throughout when full_packet is off, its launch mask then all on)
            self.now.whole_block = self.full_blocks or (k.cooperative and self.variant.full_packet)
            self.counted_loop(begin, end, self.block_body, "block")
        else:
            # the launch's whole blocks take the whole-block body (no launch mask, no per-packet
            # test), its one partial block the masked body: swiglu 17x65 (one partial block in
            # 35) ran 20% slower than 17x64 when every block tested every packet
            nfull = b.trunc(b.udiv(self.entry.live64, self.i64(self.B)), I32T)
            if self.planted("full_packet_always"):
                nfull = nblocks
            mid = nfull if self.planted("whole_block_past_task") else b.select(b.icmp_signed("<", end, nfull), end, nfull)
            mid = b.select(b.icmp_signed("<", mid, begin), begin, mid)
            self.now.whole_block = True
            self.counted_loop(begin, mid, self.block_body, "block")
            self.now.whole_block = False
            self.counted_loop(mid, end, self.block_body, "block.partial")
        b.ret_void()
        return self.module

    def prologue(self, slot) -> tuple:
        """Read the argument block (self.entry), refuse a launch this build cannot run, and in
        a safe build prove the launch's affine indices; (begin, end, nblocks) of this call."""
        b, k = self.b, self.k
        n64 = slot(SLOT_N)
        n32 = b.trunc(n64, I32T)
        # the threads that exist: n, or for a cooperative kernel every thread of the ceil(n / B)
        # blocks it starts (DESIGN §2's launch rule); num_threads() stays n either way
        if k.cooperative:
            live64 = b.mul(b.udiv(b.add(n64, self.i64(self.B - 1)), self.i64(self.B)), self.i64(self.B))
        else:
            live64 = n64
        live32 = b.trunc(live64, I32T)
        begin = b.trunc(slot(SLOT_BEGIN), I32T)
        end = b.trunc(slot(SLOT_END), I32T)
        err_ptr = b.inttoptr(slot(SLOT_ERR), PTR)
        slots = abi_slots(k)
        bufs, lens = {}, {}
        for p in k.params:
            if p.kind is ParamKind.BUFFER:
                ps, ls = slots[p.name]
                bufs[p.name] = b.inttoptr(slot(ps), PTR)
                lens[p.name] = slot(ls)
        scalars, scalar_bits = {}, {}
        for p in k.scalars:
            bits = scalar_bits[p.name] = b.trunc(slot(slots[p.name][0]), I32T)
            scalars[p.name] = b.bitcast(bits, ir.FloatType()) if p.dtype is DType.F32 else bits
        if self.full_blocks:
            # specialised for launches of whole blocks: anything else is refused, never run
            partial = b.icmp_unsigned("!=", b.urem(n64, self.i64(self.B)), self.i64(0))
            with b.if_then(partial, likely=False):
                b.store(self.i64(ERR_PARTIAL_BLOCK), err_ptr, align=8)
                b.store(n64, b.gep(err_ptr, [self.i64(2)], source_etype=I64), align=8)
                b.ret_void()
        if self.facts.bounds is not None:
            self.bounds_prologue()
        # never run blocks past the launch, whatever the caller asked
        nblocks = b.trunc(b.udiv(b.add(n64, self.i64(self.B - 1)), self.i64(self.B)), I32T)
        end = b.select(b.icmp_signed("<", end, nblocks), end, nblocks)
        # this call runs every block of the launch: no other thread of it exists (atomics.py)
        whole_launch = b.and_(b.icmp_signed("<=", begin, self.i32(0)), b.icmp_signed(">=", end, nblocks))
        self.entry = EntryArgs(n64=n64, n32=n32, live64=live64, live32=live32, err_ptr=err_ptr, bufs=bufs,
                               lens=lens, scalars=scalars, scalar_bits=scalar_bits, whole_launch=whole_launch)
        return begin, end, nblocks

    def allocate(self, slot):
        """What the entry allocates once (self.storage) and the sanitize build's shadows
        (self.shadow): slots, the arrays of the region plan's values kept per thread
        (region_plan.py), private and shared arrays, collectives' trees."""
        b, k, facts = self.b, self.k, self.facts
        plan = facts.plan
        self.counts["barriers"] = plan.barriers
        block_slots = {n: self.block_scalar(n) for n in plan.block_loops}
        slots = {n: self.alloca(self.cx.ty(t), n) for n, t in facts.types.items()}
        # per-thread storage: one element per thread, packets read W at a time
        arrays = {n: self.alloca(ir.ArrayType(mem_type(facts.types[n]), self.B), f"{n}.all")
                  for n in sorted(plan.cross)}
        privates = {}
        if facts.private_offsets:
            scratch = b.inttoptr(slot(SLOT_SCRATCH), PTR)
            # too little scratch (a misused entry) is an error, never a write past it
            short = b.icmp_unsigned("<", slot(SLOT_SCRATCH_BYTES), self.i64(facts.scratch_bytes))
            with b.if_then(short, likely=False):
                b.store(self.i64(ERR_SCRATCH), self.entry.err_ptr, align=8)
                b.ret_void()
        shared_arrays = {}
        on_stack = private_bytes(k) <= PRIVATE_STACK_BYTES
        for s in k.body:
            if isinstance(s, (Private, Shared)):
                if on_stack and isinstance(s, Private):
                    # the entry's own: LLVM knows nothing else points there, so after unrolling
                    # (loops.UNROLL_TRIPS) it keeps the items in registers; 64-byte aligned as
                    # in scratch (an array of 64-byte vectors)
                    ptr = self.alloca(ir.ArrayType(ir.VectorType(I32T, 16), -(-array_bytes(s, self.B) // 64)),
                                      s.name)
                else:
                    ptr = b.gep(scratch, [self.i64(facts.private_offsets[s.name])], source_etype=I8)
                into = privates if isinstance(s, Private) else shared_arrays
                into[s.name] = (ptr, int(s.size.arg), s.dtype)
        self.shadow = self.sanitize_arrays(shared_arrays)
        trees = {id(c): self.alloca(ir.ArrayType(mem_type(c.value.dtype), self.B), "tree") for c in plan.collectives}
        self.storage = EntryStorage(block_slots=block_slots, slots=slots, arrays=arrays, privates=privates,
                                    shared_arrays=shared_arrays, trees=trees)

    # ------------------------------------------------------------ blocks, packets
    def block_body(self, bid):
        b, W = self.b, self.W
        self.now.bid = bid
        base = b.mul(bid, self.i32(self.B))
        if self.now.whole_block:       # every packet of this block is full: one path, no tail
            npk = self.i32(self.B // W)
        else:
            left = b.sub(self.entry.live32, base)
            active = b.select(b.icmp_signed("<", left, self.i32(self.B)), left, self.i32(self.B))
            npk = b.udiv(active if self.planted("partial_packets_floor") else b.add(active, self.i32(W - 1)), self.i32(W))
        self.zero_privates()
        self.clear_written()
        self.emit_regions(self.plan.regions, base, npk)

    def packet_phase(self, q, base, stmts, coll):
        """Packet q of the block: the full path, the masked path, or a choice of the two."""
        b, W = self.b, self.W
        self.now.t0 = b.mul(q, self.i32(W))
        self.now.tid = self.consecutive(self.now.t0)
        g0 = b.add(base, self.now.t0)
        self.now.gid = self.consecutive(g0)
        if W == 1 or self.now.whole_block:     # no packet is partial
            self.packet_body(stmts, coll, None)
            return
        # the launch's partial block (or every block, full_packet off): masked throughout
        launch_mask = b.icmp_signed("<=" if self.planted("tail_mask") else "<",
                                    self.now.tid if self.planted("launch_mask_tid") else self.now.gid,
                                    self.splat(self.entry.live32, DType.I32))
        self.packet_body(stmts, coll, launch_mask)

    def packet_body(self, stmts, coll, launch_mask):
        """One phase of one packet, under the launch mask (None: every lane is a live thread)."""
        b = self.b
        # a partial packet runs its loops masked throughout (loops.py): less code
        self.now.tail_path = launch_mask is not None
        with self.masked(launch_mask, merge=False):
            self.load_live_in(names_in(stmts, coll))
            self.stmts(stmts)
            for n in sorted(assigned_in(stmts) & self.plan.cross):
                self.store_cross(n, b.load(self.storage.slots[n], typ=self.cx.ty(self.facts.types[n])))
            if coll is not None:
                self.contribute(coll)

    def zero_privates(self):
        """Every block's private arrays start at zero: 32-byte vector stores in a loop, and
        bytes for the rest (arrays start 64-byte aligned in scratch). Not llvm.memset,
        which becomes a call into libc at these sizes; the function attribute
        no-builtin-memset keeps LLVM from turning the loop back into one, so the entry
        calls nothing outside the generated code (code facts: direct CFG)."""
        b = self.b
        zero = self.zero(ir.VectorType(I32T, 8))
        for name, (ptr, size, dt) in self.storage.privates.items():
            if name in self.facts.no_zeroing:
                continue
            nbytes = size * (self.W if self.planted("private_zero_packet") else self.B) * (1 if dt is DType.BOOL else 4)
            self.counted_loop(self.i32(0), self.i32(nbytes // 32), lambda c, ptr=ptr: b.store(
                zero, b.gep(ptr, [b.mul(b.zext(c, I64), self.i64(32))], source_etype=I8), align=32), "zero")
            for k in range(nbytes // 32 * 32, nbytes):
                b.store(ir.Constant(I8, 0), b.gep(ptr, [self.i64(k)], source_etype=I8), align=1)

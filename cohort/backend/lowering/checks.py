"""Memory safety in the generated code (DESIGN §5.1).

The default (safe) build proves every boundable buffer index of a launch in
bounds in the entry's prologue, before touching any buffer (bounds.py), and
checks the other accesses one by one; `checked` builds check every access,
private arrays included; `unsafe` builds check nothing. A failed check
records the error (kind, statement, index, thread: the first active lane that
failed) and leaves the entry.
"""
from __future__ import annotations

import hashlib

from llvmlite import ir

from ...refimpl.ir import ParamKind
from ...refimpl.printer import format_kernel
from ..bounds_emit import prologue
from ..context import (
    ERR_BARRIER_DIVERGENCE,
    ERR_NONE,
    ERR_PARTIAL_BLOCK,
    ERR_RECORD_BUSY,
    ERR_SCRATCH,
    ERR_SHADOW,
    ERR_UNPROVEN,
    I1,
    I32T,
    I64,
    PTR,
    SLOT_ERR,
    SLOT_N,
    SLOT_PROOF,
    abi_slots,
    load_slot,
)


class Checks:
    def stmt_id(self, s) -> int:
        if id(s) not in self.stmt_ids:
            self.stmt_ids[id(s)] = len(self.stmt_table)
            self.stmt_table.append(s)
        return self.stmt_ids[id(s)]

    def needs_check(self, key) -> bool:
        """Whether the buffer access `key` (a Store or a LOAD node) is checked where it happens."""
        if self.checked:
            return True
        return self.facts.bounds is not None and id(key) not in self.facts.bounds.proven

    def bounds_prologue(self):
        """Safe builds: prove every affine index of the launch in bounds, or leave at once
        with ERR_UNPROVEN, having touched no buffer (bounds.py)."""
        b = self.b
        proven = sum(1 for key, _, _ in self.facts.bounds.accesses if id(key) in self.facts.bounds.proven)
        self.counts["bounds_proven"] = proven
        self.counts["bounds_unprovable"] = len(self.facts.bounds.accesses) - proven
        if not proven:
            return
        # once per argument block: a block proven for this kernel carries the kernel's tag (pool
        # tasks of one launch share a copy of the block, so each job proves once). The tag names
        # the kernel, not the build: every safe build of a kernel proves the same accesses
        # (Bounds reads the kernel alone), and builds that differ only in layout stay identical.
        text = format_kernel(self.k)
        tag = self.i64(int(hashlib.sha256(text.encode()).hexdigest()[:15], 16) | 1)
        memo = b.gep(self.fn.args[0], [self.i64(SLOT_PROOF)], source_etype=I64)
        seen = b.load_atomic(memo, "monotonic", 8, typ=I64)
        with b.if_then(b.icmp_unsigned("!=", seen, tag), likely=False):
            args = self.fn.args[0]
            ok = b.call(self.proof_function(), [args])
            with b.if_then(b.not_(ok), likely=False):
                err = b.inttoptr(load_slot(b, args, SLOT_ERR), PTR)
                b.cmpxchg(err, self.i64(0), self.i64(ERR_UNPROVEN), "monotonic", "monotonic")
                b.ret_void()
            b.atomic_rmw("xchg", memo, tag, "monotonic")

    def proof_function(self) -> ir.Function:
        """The proof as a function of its own (i1 proof(args)), called from the cold path and
        not optimised: its hundreds of compares and selects were most of the O3 pipeline's time
        over a kernel with many accesses (attention: 125 of 240 ms). It reads the lengths and
        scalars from the argument block itself."""
        fn = ir.Function(self.module, ir.FunctionType(I1, [PTR]), self.fn.name + ".proof")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("optnone")    # runs once per launch: ~0.1 us unoptimised (measured,
                                        # attention), while O3 over it cost 110 ms of compile
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args, slots = fn.args[0], abi_slots(self.k)
        slot = lambda i: load_slot(b, args, i)
        lens = {p.name: slot(slots[p.name][1]) for p in self.k.params if p.kind is ParamKind.BUFFER}
        scalars = {p.name: b.trunc(slot(slots[p.name][0]), I32T) for p in self.k.scalars}
        b.ret(prologue(self.facts.bounds, b, slot(SLOT_N), self.B, lens, scalars))
        return fn

    def check_lanes(self, idx64, length, kind: int, stmt, key=None, always: bool = False):
        """Report the first active lane whose index is out of bounds. `key`: the buffer
        access (checked unless proven, bounds.py); None: a private array (checked builds);
        `always`: a shared array (checked builds and safe ones)."""
        if not (always or (self.checked if key is None else self.needs_check(key))):
            return
        if key is not None:
            self.counts["bounds_checks"] += 1
        b = self.b
        bad = b.icmp_unsigned(">=", idx64, self.splat64(length))
        if self.mask is not None:
            bad = b.and_(bad, self.mask)
        err_bb = self.fn.append_basic_block("oob")
        ok_bb = self.fn.append_basic_block("inbounds")
        b.cbranch(self.any(bad), err_bb, ok_bb)
        b.position_at_end(err_bb)
        lane = self.first_lane(bad)
        index = self.lane(idx64, lane)
        self.record_error(kind, stmt, index, b.sext(self.lane(self.now.gid, lane), I64))
        b.ret_void()
        b.position_at_end(ok_bb)

    def record_error(self, kind: int, stmt, index64, thread64):
        """Record an error of thread `thread64` unless a lower thread's is recorded (claim_error)."""
        b = self.b
        with b.if_then(self.claim_error(thread64)):
            for slot, v in enumerate((self.i64(self.stmt_id(stmt)), index64, thread64), start=1):
                b.store(v, b.gep(self.entry.err_ptr, [self.i64(slot)], source_etype=I64), align=8)
            self.release_error(kind)

    def claim_error(self, key64):
        """i1: whether this lane now holds the launch's error record, to write its words and then
        release_error. Of the errors of a launch the lowest thread's is kept: pool workers run
        blocks side by side and every task runs (stopping at its first failing block), so the
        report is the one a run block after block gives (tests/test_runtime.py)."""
        return self.b.call(self.claim_function(), [self.entry.err_ptr, key64])

    def release_error(self, kind: int):
        # an exchange as the release store (llvmlite's store_atomic wants a typed pointer)
        self.b.atomic_rmw("xchg", self.entry.err_ptr, self.i64(kind), "release")

    def claim_function(self) -> ir.Function:
        """i1 claim(ptr record, i64 thread): the record's kind word is a lock while a lane writes
        (ERR_RECORD_BUSY); a record made by a lower thread, or by the prologue for the whole
        launch (nothing ran), is kept. The thread of a recorded error is its word 3, or for
        barrier divergence (word 3 a flag) its block's first thread."""
        fn = self.module.globals.get("cohort.claim_error")
        if fn is not None:
            return fn
        fn = ir.Function(self.module, ir.FunctionType(I1, [PTR, I64]), "cohort.claim_error")
        fn.linkage = "internal"
        err, key = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        blocks = {n: fn.append_basic_block(n) for n in ("spin", "seen", "compare", "try", "held", "recheck",
                                                        "restore", "win", "lose")}
        b.branch(blocks["spin"])

        def recorded_key(bb_builder, kind):
            word = lambda i: bb_builder.load(bb_builder.gep(err, [self.i64(i)], source_etype=I64), typ=I64)
            block_first = bb_builder.mul(word(2), self.i64(self.B))
            return bb_builder.select(bb_builder.icmp_signed("==", kind, self.i64(ERR_BARRIER_DIVERGENCE)),
                                     block_first, word(3))

        b.position_at_end(blocks["spin"])
        kind = b.load_atomic(err, "acquire", 8, typ=I64)
        b.cbranch(b.icmp_signed("==", kind, self.i64(ERR_RECORD_BUSY)), blocks["spin"], blocks["seen"])
        b.position_at_end(blocks["seen"])
        empty = b.icmp_signed("==", kind, self.i64(ERR_NONE))
        b.cbranch(empty, blocks["try"], blocks["compare"])
        b.position_at_end(blocks["compare"])
        launch_wide = b.or_(b.or_(b.icmp_signed("==", kind, self.i64(ERR_UNPROVEN)),
                                  b.icmp_signed("==", kind, self.i64(ERR_SHADOW))),
                            b.or_(b.icmp_signed("==", kind, self.i64(ERR_SCRATCH)),
                                  b.icmp_signed("==", kind, self.i64(ERR_PARTIAL_BLOCK))))
        lower = b.and_(b.not_(launch_wide), b.icmp_signed("<", key, recorded_key(b, kind)))
        b.cbranch(lower, blocks["try"], blocks["lose"])
        b.position_at_end(blocks["try"])
        pair = b.cmpxchg(err, kind, self.i64(ERR_RECORD_BUSY), "acq_rel", "acquire")
        b.cbranch(b.extract_value(pair, 1), blocks["held"], blocks["spin"])
        b.position_at_end(blocks["held"])
        b.cbranch(empty, blocks["win"], blocks["recheck"])
        b.position_at_end(blocks["recheck"])      # another lane may have written and released between
        b.cbranch(b.icmp_signed("<", key, recorded_key(b, kind)), blocks["win"], blocks["restore"])
        b.position_at_end(blocks["restore"])
        b.atomic_rmw("xchg", err, kind, "release")
        b.branch(blocks["lose"])
        b.position_at_end(blocks["win"])
        b.ret(ir.Constant(I1, 1))
        b.position_at_end(blocks["lose"])
        b.ret(ir.Constant(I1, 0))
        return fn


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

from ...refimpl.printer import format_kernel
from ..bounds_emit import prologue
from ..context import ERR_UNPROVEN, I1, I32T, I64, PTR, SLOT_ERR, SLOT_N, SLOT_PROOF, abi_slots, load_slot


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
        return self.bounds is not None and id(key) not in self.bounds.proven

    def bounds_prologue(self):
        """Safe builds: prove every affine index of the launch in bounds, or leave at once
        with ERR_UNPROVEN, having touched no buffer (bounds.py)."""
        b = self.b
        proven = sum(1 for key, _, _ in self.bounds.accesses if id(key) in self.bounds.proven)
        self.counts["bounds_proven"] = proven
        self.counts["bounds_unprovable"] = len(self.bounds.accesses) - proven
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
        lens = {name: slot(slots[name][1]) for name in self.lens}
        scalars = {p.name: b.trunc(slot(slots[p.name][0]), I32T) for p in self.k.scalars}
        b.ret(prologue(self.bounds, b, slot(SLOT_N), self.B, lens, scalars))
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
        self.record_error(kind, stmt, index, b.sext(self.lane(self.gid, lane), I64))
        b.ret_void()
        b.position_at_end(ok_bb)

    def record_error(self, kind: int, stmt, index64, thread64):
        """The first error of a launch wins: tasks on other threads may fail at once."""
        b = self.b
        claim = b.cmpxchg(self.err_ptr, self.i64(0), self.i64(kind), "monotonic", "monotonic")
        with b.if_then(b.extract_value(claim, 1)):
            for slot, v in enumerate((self.i64(self.stmt_id(stmt)), index64, thread64), start=1):
                b.store(v, b.gep(self.err_ptr, [self.i64(slot)], source_etype=I64), align=8)


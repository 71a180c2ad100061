"""The sanitizing build (`sanitize=on`): native code that detects what the interpreter detects
in shared memory, as compute-sanitizer's initcheck does on a GPU.

Uninitialised shared reads: each shared array has a written flag per slot (a byte, on the
entry's stack: the worker that runs a block owns its shared arrays, DESIGN §5), cleared at
the start of every block. A store or an atomic update sets the flags of its active lanes;
a load, or an atomic update, of a slot whose flag is clear records the error - the
statement, the slot, the first such thread - and leaves the entry. The launch then raises
the interpreter's message (compiler.PreparedLaunch.raise_error):

    kernel K, line L: `...`: read of shared s[8] before any thread of block 0 stored to it
    (uninitialised) (thread 0, block 0) [native, VARIANT]

Loads that would read a loop's shared windows through in-register transposes
(transposed.py) are read one by one in this build, so that each is checked.
Tests: tests/test_sanitize.py (a planted missing store must be reported).
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...refimpl.ir import Loc
from ..context import ERR_UNINIT_SHARED, I8, I64


@dataclass(frozen=True)
class SharedSite:
    """What an uninitialised-read report names: the statement's location and the array."""
    loc: Loc
    arr: str


class Sanitizer:
    def sanitize_arrays(self):
        """The written flags of every shared array (sanitize builds), whole 8-byte words."""
        self.written_flags = {}
        if not self.variant.sanitize:
            return
        for name, (_, size, _) in self.shared_arrays.items():
            words = -(-size // 8)
            self.written_flags[name] = (self.alloca(ir.ArrayType(I64, words), f"{name}.written"), words)

    def clear_written(self):
        """A new block: none of its shared slots is written yet."""
        b = self.b
        for ptr, words in self.written_flags.values():
            self.counted_loop(self.i64(0), self.i64(words), lambda w, ptr=ptr: b.store(
                self.i64(0), b.gep(ptr, [w], source_etype=I64), align=8), "written.clear")

    def mark_written(self, name: str, idx64):
        """The active lanes' slots of `name` are written."""
        if name not in self.written_flags:
            return
        b, flags = self.b, self.written_flags[name][0]
        one = ir.Constant(I8, 1)
        if self.W == 1:
            at = b.gep(flags, [idx64], source_etype=I8)
            if self.mask is None:
                b.store(one, at)
            else:
                with b.if_then(self.mask):
                    b.store(one, at)
            return
        ptrs = self.lane_pointers(flags, idx64, I8)
        self.intrinsic(f"llvm.masked.scatter.v{self.W}i8.v{self.W}p0", ir.VoidType(),
                       [ir.Constant(self.vty(I8), [1] * self.W), ptrs, self.i32(1),
                        self.mask if self.mask is not None else self.all_true()])

    def check_written(self, name: str, idx64, key, stmt):
        """Record an uninitialised read by the first active lane whose slot is not written."""
        if name not in self.written_flags:
            return
        b, flags = self.b, self.written_flags[name][0]
        self.counts["initchecks"] += 1
        if self.W == 1:
            fresh = b.icmp_unsigned("==", b.load(b.gep(flags, [idx64], source_etype=I8), typ=I8), ir.Constant(I8, 0))
        else:
            got = self.intrinsic(f"llvm.masked.gather.v{self.W}i8.v{self.W}p0", self.vty(I8),
                                 [self.lane_pointers(flags, idx64, I8), self.i32(1),
                                  self.mask if self.mask is not None else self.all_true(),
                                  ir.Constant(self.vty(I8), [1] * self.W)])     # masked-off lanes: written
            fresh = b.icmp_unsigned("==", got, self.zero(self.vty(I8)))
        if self.mask is not None:
            fresh = b.and_(fresh, self.mask)
        bad_bb = self.fn.append_basic_block("uninit")
        ok_bb = self.fn.append_basic_block("init")
        b.cbranch(self.any(fresh), bad_bb, ok_bb)
        b.position_at_end(bad_bb)
        lane = self.first_lane(fresh)
        site = ("uninitialised", id(key))     # its own entry: the statement's may name no array
        if site not in self.stmt_ids:
            self.stmt_ids[site] = len(self.stmt_table)
            self.stmt_table.append(SharedSite(stmt.loc, name))
        claim = b.cmpxchg(self.err_ptr, self.i64(0), self.i64(ERR_UNINIT_SHARED), "monotonic", "monotonic")
        with b.if_then(b.extract_value(claim, 1)):
            for slot, v in enumerate((self.i64(self.stmt_ids[site]), self.lane(idx64, lane),
                                      b.sext(self.lane(self.gid, lane), I64)), start=1):
                b.store(v, b.gep(self.err_ptr, [self.i64(slot)], source_etype=I64), align=8)
        b.ret_void()
        b.position_at_end(ok_bb)

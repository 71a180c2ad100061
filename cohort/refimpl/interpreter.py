"""The reference interpreter: the definition of what a kernel means.

A launch runs vectorised over all its threads at once: every value is a NumPy
array with one entry per thread (or a NumPy scalar when uniform), every
statement runs under an explicit boolean mask of the threads executing it.
There is no Python loop over threads. Threads run in lock step, which is one
of the schedules the contract allows (DESIGN §3 orders each thread's own
operations, nothing across threads); anything whose result would
depend on the schedule (two threads storing to one address, a thread loading
an address another thread stores to, unless a collective of their block orders
the two) is an error rather than an answer.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import mathlib
from .ir import (
    Assign,
    Atomic,
    Barrier,
    Collective,
    DType,
    Expr,
    For,
    If,
    Kernel,
    Private,
    PStore,
    Shared,
    SStore,
    Store,
    walk_stmts,
    written_name,
)
from .opdefs import EVALUATE
from .semantics import REDUCE_IDENTITY, atomic_update, first_lane, narrow, tree_reduce, widen
from .specialize import specialize


class KernelRuntimeError(Exception):
    """A launch broke a rule of DESIGN §3 (out of bounds, write conflict, ...)."""


class _Accessors:
    """Who accessed each element in one way (read, write or atomic update) in this launch:
    the lowest and highest thread over the launch (`lo`, `hi`), and within the phase of
    their block that the last access was in (`plo`, `phi`, phase `ph`). A block's
    threads are numbered consecutively, so lo and hi in one block mean all are."""

    NONE = np.iinfo(np.int64).max

    def __init__(self, size: int):
        self.lo, self.plo = np.full(size, self.NONE, np.int64), np.full(size, self.NONE, np.int64)
        self.hi, self.phi = np.full(size, -1, np.int64), np.full(size, -1, np.int64)
        self.ph = np.full(size, -1, np.int64)

    def note(self, addr, lanes, phases):
        stale = self.ph[addr] != phases
        self.plo[addr[stale]] = self.NONE
        self.phi[addr[stale]] = -1
        self.ph[addr] = phases
        for lo, hi in ((self.lo, self.hi), (self.plo, self.phi)):
            np.minimum.at(lo, addr, lanes)
            np.maximum.at(hi, addr, lanes)

    def others(self, addr, lanes, phases, B: int):
        """(mask, other thread): the lanes whose element another thread accessed this way
        in another block, or in the same block and phase."""
        lo, hi, plo, phi = self.lo[addr], self.hi[addr], self.plo[addr], self.phi[addr]
        blk = lanes // B
        other_block = (hi >= 0) & ((lo // B != blk) | (hi // B != blk))
        same_phase = (phi >= 0) & (self.ph[addr] == phases) & ((plo != lanes) | (phi != lanes))
        other = np.where(other_block, np.where(lo // B != blk, lo, hi), np.where(plo != lanes, plo, phi))
        return other_block | same_phase, other


class _Memory:
    """The accesses to one buffer or one block-major shared array in this launch, by way:
    "read", "write", or an atomic operation's name ("atomic_add", ...). Two accesses to
    one element by different threads race unless both are reads, both are atomic
    updates by the same operation (which commute), or the threads are in one block and
    a barrier (or a collective) of that block separates them (DESIGN §3)."""

    NOUN = {"read": "load", "write": "store"}

    @staticmethod
    def conflict(a: str, b: str) -> bool:
        return not (a == b == "read" or (a == b and a.startswith("atomic_")))

    def __init__(self, size: int, B: int):
        self.size, self.B = size, B
        self.by: dict = {}

    def written(self, addr):
        """Whether each element has been stored to or updated (by anyone) so far."""
        out = np.zeros(len(addr), bool)
        for how, a in self.by.items():
            if how != "read":
                out |= a.hi[addr] >= 0
        return out

    def access(self, how: str, addr, lanes, phases):
        """Record an access; returns (lane index, other thread, its way) of the first race, or None."""
        for other_how, a in self.by.items():
            if not self.conflict(how, other_how):
                continue
            bad, other = a.others(addr, lanes, phases, self.B)
            if np.any(bad):
                i = first_lane(bad)
                return i, int(other[i]), other_how
        a = self.by.get(how)
        if a is None:
            a = self.by[how] = _Accessors(self.size)
        a.note(addr, lanes, phases)
        return None


class Interpreter:
    """One launch. Expressions are evaluated through the registry's entries
    (opdefs.EVALUATE), statements by `run_block`."""

    flops = None                # set to 0 to count float32 arithmetic ops of active threads

    def __init__(self, kernel: Kernel, n: int, buffers: dict, scalars: dict, checker=None):
        self.k = kernel
        self.B = kernel.block
        self.n = n
        self.nblocks = -(-n // self.B)
        N = self.nblocks * self.B
        self.gid = np.arange(N, dtype=np.int32)
        self.tid = self.gid % self.B
        self.bid = self.gid // self.B
        # a cooperative kernel runs whole blocks: every thread of a started block exists (its
        # guard against n is the kernel's own); elsewhere threads past n are inactive (DESIGN §2)
        self.active = np.ones(N, bool) if kernel.cooperative else self.gid < n
        self.buffers = buffers
        self.scalars = {p.name: np.asarray(scalars[p.name], p.dtype.np)[()] for p in kernel.scalars}
        self.env: dict = {}
        self.privates: dict = {}
        self.shared: dict = {}      # shared array -> its values, [blocks x size]
        self.smemory: dict = {}     # shared array -> _Memory over its block-major elements
        self.memory: dict = {}
        # buffers whose loads must be recorded: a store by another thread after
        # the load would be a race (write after read)
        self.stored = {written_name(s) for s in walk_stmts(kernel.body)} & {p.name for p in kernel.buffers}
        self.phase = np.zeros(self.nblocks, np.int64)   # barriers and collectives each block passed
        self.stmt = None
        self.checker = checker  # optional: verifies the backend's access annotations
        # bf16/f16 buffers: loads widen to f32, stores round (semantics.widen / narrow)
        self.storage = {p.name: p.dtype for p in kernel.buffers if p.dtype.is_storage}

    # ------------------------------------------------------------ errors
    def fail(self, message: str, lane: Optional[int] = None):
        where = f" (thread {lane}, block {lane // self.B})" if lane is not None else ""
        loc = f", {self.stmt.loc}" if self.stmt is not None else ""
        raise KernelRuntimeError(f"kernel {self.k.name}{loc}: {message}{where}")

    # ------------------------------------------------------------ expressions
    def full(self, v, dtype: DType):
        v = np.asarray(v, dtype.np)
        return np.broadcast_to(v, self.gid.shape).copy() if v.ndim == 0 else v

    def ev(self, e: Expr, mask, memo: dict):
        """The value of `e` on every lane (memoised per node): its registry entry computes it."""
        r = memo.get(id(e))
        if r is None:
            r = memo[id(e)] = EVALUATE[e.op](self, e, mask, memo)
        return r

    def math(self, e: Expr, x, mask):
        """A math function's node: its template (mathlib), with the operand's value `x` in
        place of the template's placeholder."""
        return self.ev(mathlib.template(e.arg), mask, {("arg", 0): x})

    # ------------------------------------------------------------ memory
    def check_index(self, idx, length: int, mask, what: str, name: str, kind: str):
        idx = np.asarray(idx)
        bad = ((idx < 0) | (idx >= length)) & mask
        if np.any(bad):
            lane = first_lane(bad)
            value = idx if idx.ndim == 0 else idx[lane]
            self.fail(f"{what} index {int(value)} out of bounds for {kind} {name} (length {length})", lane)
        return np.where(mask, idx, 0).astype(np.int64)

    def load(self, e: Expr, idx, mask):
        buf = self.buffers[e.arg]
        if self.checker is not None:
            self.checker.check(e, idx, mask, self)
        safe = self.check_index(idx, len(buf), mask, "load", e.arg, "buffer")
        if e.arg in self.stored:
            lanes = np.flatnonzero(mask)
            self.track(self.memory, e.arg, len(buf), "read", safe[lanes], lanes, e.arg)
        if len(buf) == 0:
            return np.zeros(self.gid.shape, e.dtype.np)
        if buf.dtype == np.bool_:   # any nonzero byte is True, whatever bytes the caller put there
            return buf.view(np.uint8)[safe] != 0
        if e.arg in self.storage:
            return widen(buf[safe], self.storage[e.arg])
        return buf[safe]

    def track(self, table: dict, name: str, size: int, how: str, addr, lanes, shown: str, shared=None):
        """Record an access to `name` (a buffer, or a shared array's block-major elements);
        a race is an error naming both threads (DESIGN §3)."""
        mem = table.get(name)
        if mem is None:
            mem = table[name] = _Memory(size, self.B)
        race = mem.access(how, addr, lanes, self.phase[lanes // self.B])
        if race is None:
            return
        i, other, other_how = race
        where = f"{shown}[{int(addr[i]) - (0 if shared is None else int(lanes[i] // self.B) * shared)}]"
        if shared is not None:
            where = f"shared {where}"
        if how == other_how == "write":
            self.fail(f"write conflict: threads {other} and {int(lanes[i])} both store to {where}", int(lanes[i]))
        prep = "of" if how != "write" else "to"
        noun = lambda h: _Memory.NOUN.get(h, f"{h}() update")
        self.fail(f"{noun(how)} {prep} {where} races with the {noun(other_how)} by thread "
                  f"{other} in this launch", int(lanes[i]))

    def pload(self, e: Expr, idx, mask):
        arr = self.privates[e.arg]
        if self.checker is not None:
            self.checker.check(e, idx, mask, self)
        safe = self.check_index(idx, arr.shape[1], mask, "load", e.arg, "private array")
        return arr[np.arange(len(arr)), safe]

    def store(self, s: Store, mask, memo):
        buf = self.buffers[s.buf]
        idx = self.ev(s.index, mask, memo)
        val = self.ev(s.value, mask, memo)
        if self.checker is not None:
            self.checker.check(s, idx, mask, self)
        safe = self.check_index(idx, len(buf), mask, "store", s.buf, "buffer")
        lanes = np.flatnonzero(mask)
        if len(lanes) == 0:
            return
        addr = safe[lanes]
        self.one_store_each(addr, lanes, s.buf)
        self.track(self.memory, s.buf, len(buf), "write", addr, lanes, s.buf)
        if s.buf in self.storage:
            buf[addr] = narrow(np.broadcast_to(val, self.gid.shape)[lanes], self.storage[s.buf])
            return
        buf[addr] = np.broadcast_to(np.asarray(val, buf.dtype), self.gid.shape)[lanes]

    def one_store_each(self, addr, lanes, where: str, size: int = 0):
        """Two active threads storing to one address in one statement: a write conflict."""
        order = np.argsort(addr, kind="stable")
        sa = addr[order]
        dup = np.flatnonzero(sa[1:] == sa[:-1])
        if len(dup):
            a, b = lanes[order[dup[0]]], lanes[order[dup[0] + 1]]
            slot = int(sa[dup[0]]) - (int(a // self.B) * size if size else 0)
            self.fail(f"write conflict: threads {a} and {b} both store to {where}[{slot}]", b)

    # ------------------------------------------------------------ shared arrays
    def shared_slots(self, name: str, idx, mask, what: str):
        """(values, memory, lanes, block-major addresses) of an access to shared `name`."""
        vals = self.shared[name]
        size = vals.shape[1]
        safe = self.check_index(idx, size, mask, what, name, "shared array")
        lanes = np.flatnonzero(mask)
        return vals, size, lanes, (lanes // self.B) * size + safe[lanes], safe

    def uninitialised(self, name: str, size: int, addr, lanes):
        mem = self.smemory.get(name)
        fresh = ~mem.written(addr) if mem is not None else np.ones(len(addr), bool)
        if np.any(fresh):
            i = first_lane(fresh)
            b = int(lanes[i] // self.B)
            self.fail(f"read of shared {name}[{int(addr[i]) - b * size}] before any thread of block {b} "
                      "stored to it (uninitialised)", int(lanes[i]))

    def sload(self, e: Expr, idx, mask):
        if self.checker is not None:
            self.checker.check(e, idx, mask, self)
        vals, size, lanes, addr, safe = self.shared_slots(e.arg, idx, mask, "load")
        self.uninitialised(e.arg, size, addr, lanes)
        self.track(self.smemory, e.arg, vals.size, "read", addr, lanes, e.arg, shared=size)
        return vals.reshape(-1)[(self.bid.astype(np.int64) * size + safe)]

    def run_shared(self, s: Shared, mask, memo):
        # the contents are never read before a store (an error above), so zeros are as good as any
        self.shared[s.name] = np.zeros((self.nblocks, int(s.size.arg)), s.dtype.np)

    def run_sstore(self, s: SStore, mask, memo):
        idx = self.ev(s.index, mask, memo)
        val = self.full(self.ev(s.value, mask, memo), s.value.dtype)
        if self.checker is not None:
            self.checker.check(s, idx, mask, self)
        vals, size, lanes, addr, _ = self.shared_slots(s.arr, idx, mask, "store")
        if len(lanes) == 0:
            return
        self.one_store_each(addr, lanes, f"shared {s.arr}", size)
        self.track(self.smemory, s.arr, vals.size, "write", addr, lanes, s.arr, shared=size)
        vals.reshape(-1)[addr] = val[lanes]

    # ------------------------------------------------------------ barriers, atomics
    def run_barrier(self, s: Barrier, mask, memo):
        arrived = mask.reshape(self.nblocks, self.B)
        live = self.active.reshape(self.nblocks, self.B)
        blocks = arrived.any(axis=1)
        split = blocks & (arrived != live).any(axis=1)
        if np.any(split):
            b = int(np.flatnonzero(split)[0])
            here = np.flatnonzero(arrived[b])
            away = np.flatnonzero(live[b] & ~arrived[b])
            self.fail(f"barrier divergence in block {b}: threads {thread_ranges(here)} reached this barrier, "
                      f"threads {thread_ranges(away)} did not", b * self.B + int(away[0]))
        self.phase[blocks] += 1

    def run_atomic(self, s: Atomic, mask, memo):
        idx = self.ev(s.index, mask, memo)
        val = self.full(self.ev(s.value, mask, memo), s.value.dtype)
        if self.checker is not None:
            self.checker.check(s, idx, mask, self)
        if s.target in self.shared:
            vals, size, lanes, addr, _ = self.shared_slots(s.target, idx, mask, "atomic update")
            self.uninitialised(s.target, size, addr, lanes)
            self.track(self.smemory, s.target, vals.size, s.op.value, addr, lanes, s.target, shared=size)
            flat = vals.reshape(-1)
        else:
            flat = self.buffers[s.target]
            safe = self.check_index(idx, len(flat), mask, "atomic update", s.target, "buffer")
            lanes = np.flatnonzero(mask)
            addr = safe[lanes]
            self.track(self.memory, s.target, len(flat), s.op.value, addr, lanes, s.target)
        if len(lanes):
            atomic_update(s.op, flat, addr, val[lanes])

    # ------------------------------------------------------------ statements
    def assign(self, name: str, value, dtype: DType, mask):
        value = self.full(value, dtype)
        old = self.env.get(name)
        self.env[name] = value if old is None or mask.all() else np.where(mask, value, old)

    def run_block(self, body, mask):
        for s in body:
            self.stmt = s
            rule = RUN.get(type(s))
            if rule is None:
                raise TypeError(f"unknown statement {s!r}")
            rule(self, s, mask, {})

    def run_assign(self, s: Assign, mask, memo):
        self.assign(s.name, self.ev(s.value, mask, memo), s.value.dtype, mask)

    def run_pstore(self, s: PStore, mask, memo):
        arr = self.privates[s.arr]
        raw = self.ev(s.index, mask, memo)
        if self.checker is not None:
            self.checker.check(s, raw, mask, self)
        idx = self.check_index(raw, arr.shape[1], mask, "store", s.arr, "private array")
        val = self.full(self.ev(s.value, mask, memo), s.value.dtype)
        lanes = np.flatnonzero(mask)
        arr[lanes, idx[lanes]] = val[lanes]

    def run_if(self, s: If, mask, memo):
        c = self.full(self.ev(s.cond, mask, memo), DType.BOOL)
        if self.checker is not None:
            self.checker.check(s, c, mask, self)
        m_then, m_else = mask & c, mask & ~c
        if m_then.any():
            self.run_block(s.then, m_then)
        if m_else.any():
            self.run_block(s.orelse, m_else)

    def run_private(self, s: Private, mask, memo):
        self.privates[s.name] = np.zeros((len(self.gid), int(s.size.arg)), s.dtype.np)

    def run_for(self, s: For, mask, memo):
        # Python range semantics: start/stop evaluated once, the variable takes
        # start + k*step while it has not passed stop (computed without wrap).
        start = self.full(self.ev(s.start, mask, memo), DType.I32).astype(np.int64)
        stop = self.full(self.ev(s.stop, mask, memo), DType.I32).astype(np.int64)
        step = int(s.step.arg)
        if self.checker is not None:
            self.checker.check(s, start, mask, self)
            self.checker.check(s.stop, stop, mask, self)
        i = start
        while True:
            active = mask & ((i < stop) if step > 0 else (i > stop))
            if not active.any():
                break
            self.assign(s.var, i.astype(np.int32), DType.I32, active)
            self.run_block(s.body, active)
            self.stmt = s
            i = i + step

    def collective(self, s: Collective, mask, memo):
        dt = s.value.dtype
        v = self.full(self.ev(s.value, self.active, memo), dt)
        ident = REDUCE_IDENTITY[(s.op.value, dt)]
        v = np.where(self.active, v, ident).reshape(self.nblocks, self.B)
        self.phase += 1
        self.env[s.name] = np.repeat(tree_reduce(v, s.op.value, dt), self.B)

    def run(self):
        with np.errstate(all="ignore"):
            self.run_block(self.k.body, self.active.copy())


# One rule per statement kind (ir.STMTDEFS), called as rule(interpreter, stmt, mask, memo).
RUN = {
    Assign: Interpreter.run_assign,
    Store: Interpreter.store,
    PStore: Interpreter.run_pstore,
    If: Interpreter.run_if,
    For: Interpreter.run_for,
    Private: Interpreter.run_private,
    Collective: Interpreter.collective,
    Shared: Interpreter.run_shared,
    SStore: Interpreter.run_sstore,
    Barrier: Interpreter.run_barrier,
    Atomic: Interpreter.run_atomic,
}


def thread_ranges(ids) -> str:
    """0-3, 7, 9-15"""
    out, ids = [], [int(i) for i in ids]
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(out)


def interpret(kernel: Kernel, n: int, args: dict, consts: Optional[dict] = None, checker=None) -> dict:
    """Run `kernel` over `n` threads. Buffers in `args` are updated in place.

    `args` maps every buffer and scalar parameter to a 1-D NumPy array of the
    parameter's dtype or a Python/NumPy scalar; `consts` gives the Const
    parameters (unless `kernel` is already specialised). Returns the buffers.
    """
    from .launch_check import check_args
    k = specialize(kernel, consts or {})
    buffers, scalars = check_args(k, n, args)
    Interpreter(k, n, buffers, scalars, checker).run()
    return buffers


def count_flops(kernel: Kernel, n: int, args: dict, consts: Optional[dict] = None) -> int:
    """Run `kernel` like `interpret` and return the float32 arithmetic operations its
    active threads executed (opdefs.FLOP_OPS; collectives' trees not included)."""
    from .launch_check import check_args
    k = specialize(kernel, consts or {})
    buffers, scalars = check_args(k, n, args)
    it = Interpreter(k, n, buffers, scalars)
    it.flops = 0
    it.run()
    return it.flops


def evaluate(e: Expr, **vars_) -> np.ndarray:
    """Evaluate an expression over arrays of values (for tests and the math library).

    Keyword arguments bind VAR names; `x=` also binds the math placeholder ARG 0.
    """
    arrays = {k: np.asarray(v) for k, v in vars_.items()}
    shape = np.broadcast_shapes(*(a.shape for a in arrays.values())) if arrays else (1,)
    n = int(np.prod(shape)) or 1

    class _K:  # a kernel-less launch context
        name, block, scalars = "expr", 1, ()
    it = Interpreter.__new__(Interpreter)
    it.k, it.B, it.n, it.nblocks = _K, 1, n, n
    it.gid = np.arange(n, dtype=np.int32)
    it.tid, it.bid, it.active = it.gid * 0, it.gid, np.ones(n, bool)
    it.buffers, it.scalars, it.privates, it.memory, it.stmt, it.checker = {}, {}, {}, {}, None, None
    it.shared, it.smemory, it.phase = {}, {}, np.zeros(n, np.int64)
    it.stored, it.storage = set(), {}
    it.env = {k: np.broadcast_to(a, shape).reshape(-1) for k, a in arrays.items()}
    memo = {("arg", 0): it.env["x"]} if "x" in it.env else {}
    with np.errstate(all="ignore"):
        r = it.ev(e, it.active, memo)
    return np.broadcast_to(np.asarray(r), (n,)).reshape(shape)

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

from .ir import Assign, Collective, DType, Expr, For, If, Kernel, Private, PStore, Store, walk_stmts, written_name
from .opdefs import EVALUATE
from .semantics import REDUCE_IDENTITY, first_lane, tree_reduce
from .specialize import specialize


class KernelRuntimeError(Exception):
    """A launch broke a rule of DESIGN §3 (out of bounds, write conflict, ...)."""


class _Memory:
    """Who stored where in this launch: (thread id, phase) per element, -1 if nobody.

    For buffers the kernel also stores to, who read each element: the lowest and
    highest reader over the launch (`rlo`, `rhi`) and within the current phase
    (`plo`, `phi`); allocated on the first such load.
    """

    NONE = np.iinfo(np.int64).max

    def __init__(self, size: int):
        self.writer = np.full(size, -1, np.int64)
        self.phase = np.zeros(size, np.int32)
        self.rlo = self.rhi = self.plo = self.phi = None

    def note_reads(self, addr, lanes):
        if self.rlo is None:
            size = len(self.writer)
            self.rlo, self.plo = np.full(size, self.NONE, np.int64), np.full(size, self.NONE, np.int64)
            self.rhi, self.phi = np.full(size, -1, np.int64), np.full(size, -1, np.int64)
        for lo, hi in ((self.rlo, self.rhi), (self.plo, self.phi)):
            np.minimum.at(lo, addr, lanes)
            np.maximum.at(hi, addr, lanes)

    def new_phase(self):
        if self.plo is not None:
            self.plo.fill(self.NONE)
            self.phi.fill(-1)


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
        self.active = self.gid < n
        self.buffers = buffers
        self.scalars = {p.name: np.asarray(scalars[p.name], p.dtype.np)[()] for p in kernel.scalars}
        self.env: dict = {}
        self.privates: dict = {}
        self.memory: dict = {}
        # buffers whose loads must be recorded: a store by another thread after
        # the load would be a race (write after read)
        self.stored = {written_name(s) for s in walk_stmts(kernel.body)} & {p.name for p in kernel.buffers}
        self.phase = 0
        self.stmt = None
        self.checker = checker  # optional: verifies the backend's access annotations

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
        mem = self.memory.get(e.arg)
        if mem is not None:
            # Reading another thread's store is deterministic only within one
            # block and across a collective (a barrier); anything else is a race.
            w = mem.writer[safe]
            foreign = mask & (w >= 0) & (w != self.gid)
            same_block_earlier = (w // self.B == self.bid) & (mem.phase[safe] < self.phase)
            race = foreign & ~same_block_earlier
            if np.any(race):
                lane = first_lane(race)
                self.fail(f"load of {e.arg}[{int(safe[lane])}] races with the store by thread "
                          f"{int(w[lane])} in this launch", lane)
        if e.arg in self.stored:
            if mem is None:
                mem = self.memory[e.arg] = _Memory(len(buf))
            lanes = np.flatnonzero(mask)
            mem.note_reads(safe[lanes], lanes)
        if len(buf) == 0:
            return np.zeros(self.gid.shape, e.dtype.np)
        if buf.dtype == np.bool_:   # any nonzero byte is True, whatever bytes the caller put there
            return buf.view(np.uint8)[safe] != 0
        return buf[safe]

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
        mem = self.memory.get(s.buf)
        if mem is None:
            mem = self.memory[s.buf] = _Memory(len(buf))
        # A write conflict: two different active threads store to one address.
        order = np.argsort(addr, kind="stable")
        sa = addr[order]
        dup = np.flatnonzero(sa[1:] == sa[:-1])
        if len(dup):
            a, b = lanes[order[dup[0]]], lanes[order[dup[0] + 1]]
            self.fail(f"write conflict: threads {a} and {b} both store to {s.buf}[{int(sa[dup[0]])}]", b)
        prev = mem.writer[addr]
        clash = (prev >= 0) & (prev != lanes)
        if np.any(clash):
            i = first_lane(clash)
            self.fail(f"write conflict: threads {int(prev[i])} and {lanes[i]} both store to "
                      f"{s.buf}[{int(addr[i])}]", int(lanes[i]))
        if mem.rlo is not None:
            # Storing where another thread read in this launch: the reader sees the
            # old or the new value depending on the schedule, unless it is in the
            # same block and read before a collective (a barrier) that precedes this.
            lo, hi, plo, phi = mem.rlo[addr], mem.rhi[addr], mem.plo[addr], mem.phi[addr]
            blk = lanes // self.B
            other_block = (hi >= 0) & ((lo // self.B != blk) | (hi // self.B != blk))
            same_phase = (phi >= 0) & ((plo != lanes) | (phi != lanes))
            race = other_block | same_phase
            if np.any(race):
                i = first_lane(race)
                if other_block[i]:
                    reader = lo[i] if lo[i] // self.B != blk[i] else hi[i]
                else:
                    reader = plo[i] if plo[i] != lanes[i] else phi[i]
                self.fail(f"store to {s.buf}[{int(addr[i])}] races with the load by thread "
                          f"{int(reader)} in this launch", int(lanes[i]))
        mem.writer[addr] = lanes
        mem.phase[addr] = self.phase
        buf[addr] = np.broadcast_to(np.asarray(val, buf.dtype), self.gid.shape)[lanes]

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
        for mem in self.memory.values():
            mem.new_phase()
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
}


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
    it.buffers, it.scalars, it.privates, it.memory, it.phase, it.stmt, it.checker = {}, {}, {}, {}, 0, None, None
    it.stored = set()
    it.env = {k: np.broadcast_to(a, shape).reshape(-1) for k, a in arrays.items()}
    memo = {("arg", 0): it.env["x"]} if "x" in it.env else {}
    with np.errstate(all="ignore"):
        r = it.ev(e, it.active, memo)
    return np.broadcast_to(np.asarray(r), (n,)).reshape(shape)

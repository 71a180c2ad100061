"""Statement lowering: one walker for every width, dispatching on the
statement's type as the interpreter's `run_block` does.

An `if` whose condition is uniform across the lanes (always, at width 1) is
one branch; any other runs each non-empty side under its lanes' mask, skipped
when no lane takes it. Loops are in loops.py, collectives in collectives.py.
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import (
    Assign,
    Atomic,
    Barrier,
    Collective,
    DType,
    Expr,
    For,
    If,
    Op,
    Private,
    PStore,
    Shared,
    SStore,
    Store,
    walk_expr,
)
from ...refimpl.printer import format_expr
from ..context import ERR_STORE_OOB, I8, I32T, mem_type, vector_const, zero_of
from ..lower_ops import narrow
from ..shapes import Access
from .exprs import index_value


def _store(L, s: Store):
    memo = {}
    L.buffer_store(s, index_value(L, s.index, s, memo), L.ev(s.value, memo))


def _sstore(L, s: SStore):
    memo = {}
    L.shared_store(s, index_value(L, s.index, s, memo), L.ev(s.value, memo))


def _pstore(L, s: PStore):
    memo = {}
    L.private_store(s, L.ev(s.index, memo), L.ev(s.value, memo))


STMT_RULES = {
    Assign:  lambda L, s: L.assign(s.name, L.ev(s.value, {})),
    Store:   _store,
    PStore:  _pstore,
    If:      lambda L, s: L.if_(s),
    For:     lambda L, s: L.loop(s),
    Private: lambda L, s: None,     # allocated at entry, zeroed at each block start
    Collective: lambda L, s: L.between_phases(s),
    Barrier: lambda L, s: L.between_phases(s),
    Shared: lambda L, s: None,      # in the block's scratch, not initialised
    SStore: _sstore,
    Atomic: lambda L, s: L.atomic(s),
}


class StmtLowering:
    def stmts(self, body):
        body = tuple(body)
        i = 0
        while i < len(body):
            s = body[i]
            self.now.cur = s
            group = self.interleaved_group(body, i) if isinstance(s, Store) else None
            if group:
                self.interleaved_store(group)
                i += len(group)
                continue
            i += 1
            rule = STMT_RULES.get(type(s))
            if rule is None:
                raise TypeError(f"cannot lower {type(s).__name__} here")
            rule(self, s)

    def between_phases(self, s):
        """Collectives and barriers cut the body into regions (regions.py); one found
        inside a region is a lowering bug, never code."""
        raise TypeError(f"{type(s).__name__} inside a phase: phases are cut at every top-level one")

    def assign(self, name: str, v):
        """Lanes whose control flow is off keep their old value (cmask, lanes.py)."""
        if self.cmask is not None:
            old = self.b.load(self.storage.slots[name], typ=v.type)
            v = self.b.select(self.cmask, v, old)
        self.b.store(v, self.storage.slots[name])

    def if_(self, s: If):
        b = self.b
        c = self.ev(s.cond, {})
        if self.shape(s.cond).uniform:
            self.annotate(s, "if", "", Access("uniform"), "branch")
            with b.if_else(self.lane0(c)) as (then, otherwise):
                with then:
                    self.stmts(s.then)
                with otherwise:
                    self.stmts(s.orelse)
            return
        self.annotate(s, "if", "", None, "masked")
        if self.store_either_side(s, c):
            return
        for body, cond in ((s.then, c), (s.orelse, b.not_(c))):
            if body:
                self.varying_branch(body, cond)

    def store_either_side(self, s: If, c) -> bool:
        """`if c: buf[i] = a` / `else: buf[i] = b` with a varying c is one store of
        `a if c else b` (each arm evaluated under its own lanes' mask, as a lazy select):
        every lane the packet runs stores once, so a full packet stores with no mask at
        all (masked_softmax's last pass: two microcoded masked stores per packet on this
        project's VM became one plain store, 218 -> 129 us at 129x768). Only where nothing
        can tell the difference: the same index, side by side across the lanes (so no two
        lanes share an element), with nothing in the index or the values that reads buf
        (the then side's store would be seen) or could report an error (every buffer
        access proven in bounds, no shared read, no private read in a checked build) -
        so the order of the two stores and of the values' evaluation cannot matter."""
        if self.W == 1 or len(s.then) != 1 or len(s.orelse) != 1:
            return False
        s1, s2 = s.then[0], s.orelse[0]
        if not (isinstance(s1, Store) and isinstance(s2, Store) and s1.buf == s2.buf):
            return False
        same = format_expr(s1.index) == format_expr(s2.index) or self.planted("store_either_side_index")
        if not same or self.needs_check(s1) or self.needs_check(s2):
            return False
        acc = self.access_class(s1.index, store=True)
        if acc.kind != "contiguous":
            return False
        for e in (s1.index, s1.value, s2.value):
            for n in walk_expr(e):
                if n.op is Op.SLOAD or (n.op is Op.PLOAD and self.checked):
                    return False
                if n.op is Op.LOAD and (n.arg == s1.buf or self.needs_check(n)):
                    return False
        b = self.b
        memo = {}
        idx = self.ev(s1.index, memo)
        with self.masked(c, merge=False):
            a = self.ev(s1.value, dict(memo))
        with self.masked(b.not_(c), merge=False):
            v = self.ev(s2.value, dict(memo))
        self.now.cur = s1
        self.counts["either_side_stores"] += 1
        self.buffer_store(s1, idx, b.select(c, a, v))
        # each side's store runs on some of the lanes only: never claimed unmasked-only
        self.annotate(s1, "store", s1.buf, acc, "masked")
        self.annotate(s2, "store", s2.buf, acc, "masked")
        return True

    def varying_branch(self, body, cond):
        """The statements of a branch that lanes take or not. In a packet running unmasked
        (full_packet on, not the launch's partial packet), ISPC's all-on body beside the
        masked one: when every lane takes the branch, it runs unmasked - plain vector loads
        and stores, loops split as in any unmasked code - else masked, skipped when no lane
        does. Masked stores are not cheap everywhere: without mask registers (256-bit
        vectors) AMD's cores microcode them, and transpose's `if cc < C` copy loop ran at
        1.1 ns per element through them. Only from unmasked code, so a nest of such ifs
        grows the code linearly."""
        if self.W == 1 or self.mask is not None or not self.variant.full_packet or self.now.tail_path:
            with self.masked_if_any(cond):
                self.stmts(body)
            return
        every = self.any(cond) if self.planted("if_all_on_any") else self.every(cond)
        with self.b.if_else(every) as (all_on, some_off):
            with all_on:
                self.stmts(body)
            with some_off:
                with self.masked_if_any(cond):
                    self.stmts(body)

    # ------------------------------------------------------------ interleaved stores
    def interleaved_group(self, body, i):
        """k adjacent stores to buf[k*t + c], buf[k*t + c + 1], ... (k = 2..4, rope's
        y[2i], y[2i+1]): one interleaving shuffle and one vector store instead of
        k scatters. The later stores must not read the buffer, so storing them
        together changes nothing. (At width 1 every index is uniform: no group.)"""
        s = body[i]
        k = self.shape(s.index).stride
        if k not in (2, 3, 4) or i + k > len(body) or (self.mask is not None and not self.variant.predicated):
            return None
        group = [s]
        for j in range(1, k):
            t = body[i + j]
            want = range(1, k) if self.planted("group_offset_unordered") else (j,)
            if not (isinstance(t, Store) and t.buf == s.buf and _offset(t.index, s.index, self.config.bugs) in want):
                return None
            # planted group_readback: the first store's expressions looked at, not the later one's
            reads = (s.index, s.value) if self.planted("group_readback") else (t.index, t.value)
            if any(n.op is Op.LOAD and n.arg == s.buf for e in reads for n in walk_expr(e)):
                return None
            group.append(t)
        return group

    def interleaved_store(self, group):
        b, W = self.b, self.W
        k = len(group)
        first = group[0]
        dt = self.k.param(first.buf).dtype
        elem = mem_type(dt)
        vals, idx0 = [], None
        for s in group:
            self.now.cur = s
            memo = {}
            idx = self.index64(self.ev(s.index, memo), s.index.dtype)
            self.check_lanes(idx, self.entry.lens[s.buf], ERR_STORE_OOB, s, key=s)
            self.check_global(s.buf, idx, "write", s, s)              # sanitize builds (sanitize_global.py)
            v = self.ev(s.value, memo)
            if dt.is_storage:                      # bf16/f16: rounded as buffer_store rounds
                v = narrow(self.cx, v, dt)
            vals.append(b.zext(v, self.vty(I8)) if dt is DType.BOOL else v)
            self.annotate(s, "store", s.buf, Access("strided", k), "unmasked" if self.mask is None else "masked")
            idx0 = idx0 if idx0 is not None else self.lane0(idx)
        base, c0 = _strip_const(first.index)
        if c0:
            self.counts["interleaved_offset_stores"] += 1     # a first slot at k*t + c (gen/steer.py PATHS)
        if self.planted("group_base_unshifted"):      # planted: the first slot's constant left out
            if c0:
                idx0 = self.lane0(self.index64(self.ev(base, {}), base.dtype))
        wide = _concat(b, vals)
        order = [(j % k) * W + j // k for j in range(k * W)]
        inter = b.shuffle_vector(wide, self.zero(wide.type), vector_const(ir.VectorType(I32T, k * W), order))
        self.counts["shuffles"] += 1
        self.counts["interleaved_stores"] += 1
        ptr = b.gep(self.entry.bufs[first.buf], [idx0], source_etype=elem)
        if self.mask is None:
            b.store(inter, ptr, align=1)
            return
        self.masked_store(inter, ptr, self.spread_mask(k), elem)


def _split_const(e: Expr, bugs: tuple):
    """(the index without its trailing `+ c` terms, as printed, and the sum of those c): rope_pairs'
    second index is `(base + 0) + 1` after specialisation, the first `base` (`bugs`: the build's plants)."""
    c = 0
    while (e.op is Op.ADD or e.op is Op.SUB and "group_sub_sign" in bugs) and e.src[1].op is Op.CONST:
        c += e.src[1].arg
        e = e.src[0]
    return format_expr(e), c


def _strip_const(e: Expr):
    """(e without its trailing `+ c` terms, the sum of those c) as expressions (a plant's)."""
    c = 0
    while e.op is Op.ADD and e.src[1].op is Op.CONST:
        c += e.src[1].arg
        e = e.src[0]
    return e, c


def _offset(e: Expr, base: Expr, bugs: tuple):
    """c when e is base + c (both up to trailing constant terms), else None. Exact: each
    store's own index is bounds-checked (or proven) before the group stores."""
    (et, ec), (bt, bc) = _split_const(e, bugs), _split_const(base, bugs)
    return ec - bc if et == bt else None
def _concat(b, vals):
    """One vector holding every value of `vals` (equal types) end to end."""
    while len(vals) > 1:
        nxt = []
        for a, c in zip(vals[0::2], vals[1::2]):
            n = a.type.count
            nxt.append(b.shuffle_vector(a, c, vector_const(ir.VectorType(I32T, 2 * n), list(range(2 * n)))))
        if len(vals) % 2:
            last = vals[-1]
            n = last.type.count
            pad = b.shuffle_vector(last, zero_of(last.type),
                                   vector_const(ir.VectorType(I32T, 2 * n), list(range(n)) + [n] * n))
            nxt.append(pad)
        vals = nxt
    return vals[0]


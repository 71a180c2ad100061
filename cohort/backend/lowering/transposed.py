"""Transposed shared reads: a loop that walks a shared array along its own
variable while the lanes stride across it, as the second half of a tiled
transpose does:

    for k in range(T):
        ... tile[t * TS + k] ...

Lane l reads tile[a_l + i] at iteration i. Read as one gather per iteration,
each element costs a gather's slot; yet over W iterations the packet reads a
W x W block whose row l is W consecutive elements (lane l's window). So before
the loop, each packet loads its lanes' windows (W contiguous loads per W
iterations), transposes every W x W block in registers (log2 W rounds of
two-source shuffles, each swapping one bit of the row number with the same bit
of the column number) and keeps the result in a scratch of its own; iteration
i then reads its W values side by side with one vector load.

Only where that is the same value the gather would read: a uniform loop of at
most a constant number of trips (2..MAX_TRIPS: a constant count, or a constant
start and a stop of at most a constant, as `range(min(TS, C - c0))`); an i32 index whose only loop-varying part
is the loop variable with coefficient x step = 1 (so iteration i reads a_l + i,
as i32 arithmetic wraps alike), built from constants, parameters, built-ins and
variables the loop does not assign, with no loads; and an array the loop body
neither stores to nor updates, with no barrier in it. A window that leaves the
array is read with a mask of its elements inside it: the prologue reads
nothing outside the array whatever the lanes' indices. The loop's own access
keeps its check (or its proof), so an index outside the array is reported at
the iteration that makes it, as before.
"""
from __future__ import annotations

from llvmlite import ir

from ...refimpl.ir import (
    Barrier,
    Collective,
    DType,
    Expr,
    For,
    Op,
    defined_name,
    stmt_bodies,
    stmt_exprs,
    walk_expr,
    walk_stmts,
    written_name,
)
from ...refimpl.opdefs import OPDEFS
from ..context import I1, I32T, I64, mem_type, vector_const

# iterations a prologue covers: its scratch is ceil(T / W) * W * W elements (8 KiB at W 32)
MAX_TRIPS = 64
# the entry's stack the prologues of one kernel may take in all (each load has its own scratch):
# far inside any thread's stack, the pool's included (core.PRIVATE_STACK_BYTES's reasoning)
MAX_SCRATCH_BYTES = 32 << 10
# leaves whose value the launch fixes (literals, parameters, built-ins): unchanged by any loop
_LEAVES = frozenset(op for op, d in OPDEFS.items() if d.scope is not None)
_INVARIANT_OPS = {Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.SHL, Op.SHR, Op.AND, Op.OR, Op.XOR, Op.MIN, Op.MAX, Op.ABS}


def _direct_sloads(body):
    """The shared loads the statements of `body` evaluate themselves, or in `if` branches,
    not in nested loops (they are those loops' own)."""
    for s in body:
        for e in stmt_exprs(s):
            yield from (n for n in walk_expr(e) if n.op is Op.SLOAD)
        if not isinstance(s, For):
            for inner in stmt_bodies(s):
                yield from _direct_sloads(inner)


def _coefficient(e: Expr, var: str, assigned: set):
    """c where e = c * var + (a part the loop does not change), modulo 2^32; None if e is not
    of that form or may do anything but integer arithmetic (a load, a division)."""
    if e.op is Op.VAR:
        if e.arg == var:
            return 1
        return None if e.arg in assigned else 0
    if e.op in _LEAVES:
        return 0
    if e.op not in _INVARIANT_OPS or not e.dtype.is_int:
        return None
    cs = [_coefficient(s, var, assigned) for s in e.src]
    if None in cs:
        return None
    if not any(cs):
        return 0
    if e.op is Op.ADD:
        return cs[0] + cs[1]
    if e.op is Op.SUB:
        return cs[0] - cs[1]
    if e.op is Op.NEG:
        return -cs[0]
    if e.op is Op.MUL:          # by a literal only: its value is the coefficient's factor
        lit = e.src[1] if cs[0] else e.src[0]
        return (cs[0] or cs[1]) * lit.arg if lit.op is Op.CONST and not (cs[0] and cs[1]) else None
    if e.op is Op.SHL and not cs[1] and e.src[1].op is Op.CONST and 0 <= e.src[1].arg < 31:
        return cs[0] << e.src[1].arg
    return None


def transposable(s: For, varies) -> list:
    """The shared loads of loop `s` that iteration i reads at a_l + i in lane l: an i32
    index that varies across the lanes other than side by side (`varies(index)`), whose
    only loop-varying part is s's variable with coefficient x step = 1, of an array the
    body neither stores to nor updates, in a body without barriers; loads of nested
    loops are those loops' own (the fuzzer's steering counts these too)."""
    inner = list(walk_stmts(s.body))
    if any(isinstance(x, (Barrier, Collective)) for x in inner):
        return []
    assigned = {defined_name(x) for x in inner} - {None}
    if s.var in assigned:
        return []
    written = {written_name(x) for x in inner}
    step = int(s.step.arg)
    nested = {id(n) for x in inner if isinstance(x, For) for n in _direct_sloads(x.body)}
    out, seen = [], set(nested)
    for e in _direct_sloads(s.body):
        idx = e.src[0]
        if (id(e) in seen or e.arg in written or idx.dtype is not DType.I32
                or (_coefficient(idx, s.var, assigned) or 0) * step != 1 or not varies(idx)):
            continue
        seen.add(id(e))
        out.append(e)
    return out


class TransposedReads:
    def transposed_reads(self, s: For, start_v, trips: int) -> dict:
        """{id(shared load): its scratch} for the loads of loop `s` read through a transposing
        prologue, the prologue emitted here (just before the loop). `trips`: the loop's trip
        count, or a constant it never exceeds (the prologue reads that many windows; those
        past the loop's end are never used)."""
        if self.W == 1 or self.W > 32 or not 2 <= trips <= MAX_TRIPS:
            return {}
        varies = lambda idx: self.access_class(idx, store=False).kind not in ("uniform", "contiguous")
        out = {}
        for e in transposable(s, varies):
            nbytes = -(-trips // self.W) * self.W * self.W * (1 if e.dtype is DType.BOOL else 4)
            if self.counts["transposed_bytes"] + nbytes > MAX_SCRATCH_BYTES:
                continue                  # read with gathers, as any other such load
            self.counts["transposed_bytes"] += nbytes
            out[id(e)] = self.transpose_windows(e, s.var, start_v, trips)
            self.counts["transposed_reads"] += 1
        return out

    def transpose_windows(self, e: Expr, var: str, start_v, trips: int):
        """The prologue of one load: scratch[i*W + l] = array[a_l + i] for i < ceil(T/W)*W, in
        blocks of P x P, P the hardware packet's lanes (W is P x interleave): P rows of P
        fit the registers, W rows of W would not."""
        b, W, P = self.b, self.W, self.packet
        ptr, size, dt = self.storage.shared_arrays[e.arg]
        elem = mem_type(dt)
        # the lanes' indices at the first iteration: the index with the variable at its start
        at_start = {id(n): start_v for n in walk_expr(e.src[0]) if n.op is Op.VAR and n.arg == var}
        first = self.index64(self.ev(e.src[0], at_start), DType.I32)
        chunks = -(-trips // W)
        scratch = self.alloca(ir.ArrayType(elem, chunks * W * W), "transposed")
        for c in range(chunks):
            starts = b.add(first, self.vconst64(c * W))
            # one test per W iterations: every lane's window inside the array (unsigned: a
            # negative start is outside too)
            inside = ir.Constant(I1, 0)
            if size >= W:
                bits = b.bitcast(b.icmp_unsigned("<=", starts, self.vconst64(size - W)), ir.IntType(W))
                inside = b.icmp_unsigned("==", bits, ir.Constant(ir.IntType(W), -1))
            lane_starts = [b.extract_element(starts, self.i32(l)) for l in range(W)]
            for g in range(0, W, P):            # lanes g .. g+P-1
                for q in range(0, W, P):        # their iterations c*W + q ..
                    rows = self.load_windows(ptr, size, elem, [b.add(f, self.i64(q)) for f in lane_starts[g:g + P]],
                                             inside)
                    for i, row in enumerate(self.transpose_rows(rows)):
                        at = self.i64((c * W + q + i) * W + g)
                        b.store(row, b.gep(scratch, [at], source_etype=elem), align=1)
        return scratch

    def load_windows(self, ptr, size: int, elem, starts: list, inside) -> list:
        """P elements from each of `starts`: plain loads where `inside` says every window lies
        inside the array (the common case), else loads masked to the elements inside it
        (the others read as 0 and are never used)."""
        b, P = self.b, len(starts)
        vec = ir.VectorType(elem, P)
        iota64 = vector_const(ir.VectorType(I64, P), list(range(P)))
        with b.if_else(inside) as (plain, masked):
            with plain:
                fast = [b.load(b.gep(ptr, [f], source_etype=elem), typ=vec, align=1) for f in starts]
                fast_end = b.block
            with masked:
                slow = []
                for f in starts:
                    spread = b.shuffle_vector(b.insert_element(self.zero(ir.VectorType(I64, P)), f, self.i32(0)),
                                              self.zero(ir.VectorType(I64, P)), vector_const(ir.VectorType(I32T, P), 0))
                    keep = b.icmp_unsigned("<", b.add(spread, iota64), vector_const(ir.VectorType(I64, P), size))
                    self.counts["masked_loads"] += 1
                    slow.append(self.intrinsic(f"llvm.masked.load.{self.vsuffix(elem, P)}.p0", vec,
                                               [b.gep(ptr, [f], source_etype=elem), self.i32(1), keep,
                                                self.zero(vec)]))
                slow_end = b.block
        rows = []
        for x, y in zip(fast, slow):
            phi = b.phi(vec)
            phi.add_incoming(x, fast_end)
            phi.add_incoming(y, slow_end)
            rows.append(phi)
        return rows

    def transpose_rows(self, rows: list) -> list:
        """rows[l][i] -> out[i][l] for P vectors of P: at each h = P/2 .. 1, rows r and r + h
        (r without bit h) trade the elements whose column has bit h set for the other's
        elements without it, which swaps bit h of every row number with bit h of its column."""
        b, P = self.b, len(rows)
        rows = list(rows)
        h = P // 2
        while h:
            lo = vector_const(ir.VectorType(I32T, P), [j if not j & h else P + j - h for j in range(P)])
            hi = vector_const(ir.VectorType(I32T, P), [j + h if not j & h else P + j for j in range(P)])
            for r in range(P):
                if not r & h and not (h == 1 and self.planted("transposed_last_stage")):
                    a, c = rows[r], rows[r + h]
                    rows[r], rows[r + h] = b.shuffle_vector(a, c, lo), b.shuffle_vector(a, c, hi)
                    self.counts["shuffles"] += 2
            h //= 2
        return rows

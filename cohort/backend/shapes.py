"""Vector shapes: how a value varies across the lanes of a packet (after RV's
vectorShape). A shape is uniform (same in every lane), affine with an integer
stride (lane l holds base + stride*l) or varying. `align` is a known divisor
of the lane-0 value (for integer shapes), which lets `g // SQ` stay uniform
when SQ is a multiple of the packet width.

The analysis feeds memory-access classification and uniform branches; each
claim it makes about a memory access or an `if` condition is exported as a
lane claim (claims.py) that the interpreter checks at run time against the
actual lane values (`verify/lane_check.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Optional

from ..refimpl.ir import (
    Assign,
    Atomic,
    Collective,
    DType,
    Expr,
    For,
    If,
    Kernel,
    Op,
    PStore,
    Store,
    defined_name,
    stmt_bodies,
    stmt_exprs,
    walk_expr,
    walk_stmts,
)
from ..refimpl.opdefs import OPDEFS

BIG_ALIGN = 1 << 30


@dataclass(frozen=True)
class Shape:
    stride: Optional[int]      # None: varying; 0: uniform; k: lane l holds base + k*l
    align: int = 1             # lane 0's value is a multiple of this (ints only)

    @property
    def uniform(self) -> bool:
        return self.stride == 0

    @property
    def varying(self) -> bool:
        return self.stride is None

    def __str__(self) -> str:
        if self.stride is None:
            return "varying"
        return "uniform" if self.stride == 0 else f"affine({self.stride})"


UNIFORM = Shape(0, 1)
VARYING = Shape(None, 1)


def join(a: Optional[Shape], b: Optional[Shape]) -> Optional[Shape]:
    if a is None:
        return b
    if b is None:
        return a
    if a.stride is None or b.stride is None or a.stride != b.stride:
        return VARYING
    return Shape(a.stride, gcd(a.align, b.align))


class ShapeAnalysis:
    """Shapes of every expression node and variable of a specialised kernel; `bugs`: the
    build's planted bugs (inject.py, codegen.CodegenConfig.bugs), none for a clean analysis."""

    def __init__(self, kernel: Kernel, lanes: int, bugs: tuple = ()):
        self.k, self.W = kernel, lanes
        self.bugs = frozenset(bugs)
        self.vars: dict = {}
        self.defs: dict = {}           # variable -> its definitions (Expr, or For for a loop variable)
        for s in walk_stmts(kernel.body):
            name = defined_name(s)
            if name is not None:   # any definition but these two is opaque
                self.defs.setdefault(name, []).append(
                    s.value if isinstance(s, Assign) else s if isinstance(s, For) else None)
        self._signs: dict = {}
        self.nodes: dict = {}
        for _ in range(64):
            before = dict(self.vars)
            self.nodes = {}
            self._body(kernel.body, uniform_control=True)
            if self.vars == before:
                break
        else:  # pragma: no cover - shapes only move up a finite lattice
            raise RuntimeError("shape analysis did not converge")

    def shape(self, e: Expr) -> Shape:
        s = self.nodes.get(id(e))
        if s is None:
            for node in walk_expr(e):
                if id(node) not in self.nodes:
                    self.nodes[id(node)] = self._node(node)
            s = self.nodes[id(e)]
        return s

    def _assign(self, name: str, shape: Shape, uniform_control: bool):
        self.vars[name] = join(self.vars.get(name), shape if uniform_control else VARYING)

    def _body(self, body, uniform_control: bool):
        for s in body:
            if isinstance(s, Assign):
                self._assign(s.name, self.shape(s.value), uniform_control)
            elif isinstance(s, Collective):
                self.shape(s.value)
                self._assign(s.name, UNIFORM, True)
            elif isinstance(s, If):
                c = self.shape(s.cond)
                inner = uniform_control and c.uniform
                self._body(s.then, inner)
                self._body(s.orelse, inner)
            elif isinstance(s, For):
                start, stop = self.shape(s.start), self.shape(s.stop)
                # the loop variable is start + k*step in every lane, k shared
                if "loop_stride_unit" in self.bugs and start.stride:    # planted: stride taken as 1
                    start = Shape(1, start.align)
                # ... and a multiple of what divides start and step alike (not of start's
                # divisor alone: range(0, C) takes 1, 2, ...)
                step = abs(s.step.arg) if s.step.op is Op.CONST else 1
                if "loop_align_start" in self.bugs:      # planted: the start's divisor kept
                    step = 0
                var = Shape(start.stride, gcd(start.align, step)) if start.stride is not None else VARYING
                self._assign(s.var, var, True)
                self._body(s.body, uniform_control and start.uniform and stop.uniform)
            else:   # any other kind: its expressions shaped, what it defines varying
                for e in stmt_exprs(s):
                    self.shape(e)
                if defined_name(s) is not None:
                    self._assign(defined_name(s), VARYING, uniform_control)
                for b in stmt_bodies(s):
                    self._body(b, uniform_control)

    def _node(self, e: Expr) -> Shape:
        op, W = e.op, self.W
        src = [self.nodes[id(s)] for s in e.src]
        if op is Op.CONST:
            v = e.arg if e.dtype.is_int else 0
            return Shape(0, abs(v) if v else BIG_ALIGN)
        if OPDEFS[op].scope in ("launch", "block"):
            return UNIFORM              # a packet lies inside one block of one launch
        if op is Op.BLOCK_SIZE:
            return Shape(0, self.k.block)
        if op in (Op.THREAD_ID, Op.GLOBAL_ID):
            return Shape(1, W)          # packet p of a block holds threads p*W .. p*W+W-1
        if op is Op.VAR:
            return self.vars.get(e.arg) or UNIFORM
        if op is Op.PLOAD:
            return VARYING              # private arrays hold per-thread values
        if e.dtype.is_int and op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD, Op.SHL, Op.NEG, Op.CAST):
            return self._affine(e, src)
        return UNIFORM if all(s.uniform for s in src) else VARYING

    def _affine(self, e: Expr, src) -> Shape:
        op, W = e.op, self.W
        if op is Op.CAST:
            return src[0] if e.src[0].dtype.is_int else (UNIFORM if src[0].uniform else VARYING)
        if op is Op.NEG:
            a = src[0]
            return VARYING if a.varying else Shape(-a.stride, a.align)
        a, b = src
        if a.varying or b.varying:
            return VARYING
        const_b = e.src[1].arg if e.src[1].op is Op.CONST else None
        const_a = e.src[0].arg if e.src[0].op is Op.CONST else None
        if op is Op.ADD:
            return Shape(a.stride + b.stride, gcd(a.align, b.align))
        if op is Op.SUB:
            return Shape(a.stride - b.stride, gcd(a.align, b.align))
        if op is Op.MUL:
            if a.uniform and b.uniform:
                return Shape(0, a.align * b.align)
            if const_b is not None:
                return Shape(a.stride * const_b, a.align * abs(const_b) or BIG_ALIGN)
            if const_a is not None:
                return Shape(b.stride * const_a, b.align * abs(const_a) or BIG_ALIGN)
            return VARYING
        if op is Op.SHL:
            if const_b is not None and 0 <= const_b < 31:
                return Shape(a.stride << const_b, a.align << const_b)
            return UNIFORM if a.uniform and b.uniform else VARYING
        if op in (Op.DIV, Op.MOD):
            if a.uniform and b.uniform or op is Op.DIV and const_b and "div_uniform" in self.bugs:
                return UNIFORM
            # base + l for l < W never crosses a multiple of c when both base and
            # c are multiples of W and base >= 0 (C division truncates: for base < 0
            # the lanes of (base + l) // c differ, and % is not affine)
            if (const_b and a.stride == 1 and const_b > 0 and const_b % W == 0 and a.align % W == 0
                    and (e.dtype is DType.U32 or self.nonneg(e.src[0]))):
                return UNIFORM if op is Op.DIV else Shape(1, gcd(a.align, const_b))
            return VARYING
        return VARYING


    _NONNEG_LEAVES = (Op.THREAD_ID, Op.BLOCK_ID, Op.GLOBAL_ID, Op.BLOCK_SIZE, Op.NUM_THREADS, Op.BUFLEN)

    def nonneg(self, e: Expr) -> bool:
        """e >= 0 in every thread, provably from its parts (launch built-ins, literals,
        + * min max // % >> of such, variables every definition of which is such), as long
        as nothing wraps around."""
        op = e.op
        if op in self._NONNEG_LEAVES:
            return True
        if op is Op.CONST:
            return e.dtype.is_int and e.arg >= 0
        if op in (Op.ADD, Op.MUL, Op.MIN, Op.MAX):
            return all(self.nonneg(x) for x in e.src)
        if op in (Op.DIV, Op.MOD, Op.SHR):
            return self.nonneg(e.src[0]) and e.src[1].op is Op.CONST and e.src[1].arg > 0
        if op is Op.VAR:
            r = self._signs.get(e.arg)
            if r is None:
                self._signs[e.arg] = False           # a cycle proves nothing
                r = self._signs[e.arg] = bool(self.defs.get(e.arg)) and all(
                    self._def_nonneg(d) for d in self.defs[e.arg])
            return r
        return False

    def _def_nonneg(self, d) -> bool:
        if d is None:
            return False
        if isinstance(d, For):         # start, start + step, ... while not past stop
            step = d.step.arg if d.step.op is Op.CONST else None
            if step is None or not self.nonneg(d.start):
                return False
            return step > 0 or (d.stop.op is Op.CONST and d.stop.arg >= -1)
        return self.nonneg(d)


@dataclass(frozen=True)
class Access:
    """How a memory access is lowered, by the shape of its index."""
    kind: str                 # uniform | contiguous | strided | gather | scatter
    stride: int = 0

    def __str__(self) -> str:
        return f"strided({self.stride})" if self.kind == "strided" else self.kind


def classify(shape: Shape, store: bool, bugs=()) -> Access:
    """How an access at an index of `shape` is lowered; `bugs`: the build's planted bugs."""
    if shape.uniform and not store:
        return Access("uniform")
    if shape.stride == 1 or shape.stride == 2 and "stride_as_contiguous" in bugs:
        return Access("contiguous", 1)
    if not store and shape.stride in (2, 3, 4):
        return Access("strided", shape.stride)
    return Access("scatter" if store else "gather", shape.stride or 0)


_RANK = {"uniform": 0, "contiguous": 1, "strided": 2, "gather": 3, "scatter": 3}


def access_profile(kernel: Kernel, width: int, bugs: tuple = ()) -> dict:
    """How every access and `if` of a kernel would be lowered at a vector width (in a build
    with planted bugs `bugs`)."""
    sa = ShapeAnalysis(kernel, width, bugs)
    prof = {}
    for s in walk_stmts(kernel.body):
        if isinstance(s, Store):
            prof[id(s)] = _RANK[classify(sa.shape(s.index), True, sa.bugs).kind]
        elif isinstance(s, PStore):
            prof[id(s)] = 0 if sa.shape(s.index).uniform else 3
        elif isinstance(s, If):
            prof[id(s)] = 0 if sa.shape(s.cond).uniform else 3
        for e in stmt_exprs(s):
            for node in walk_expr(e):
                if node.op is Op.LOAD:
                    prof[id(node)] = _RANK[classify(sa.shape(node.src[0]), False, sa.bugs).kind]
                elif node.op is Op.PLOAD:
                    prof[id(node)] = 0 if sa.shape(node.src[0]).uniform else 3
    return prof


def choose_interleave(kernel: Kernel, lanes: int, requested, bugs: tuple = ()) -> int:
    """How many packets of a cohort to run side by side (the `interleave` knob of
    DESIGN §5: DESIGN §3 orders only each thread's own operations, so a cohort's
    packets may run in any order). `auto`: the most that lowers every access and
    `if` as well as one packet does (g // 16 is uniform over 8 lanes, not 32), in a build
    with planted bugs `bugs`."""
    most = kernel.block // lanes
    if requested != "auto":
        if requested > most:
            from .variant import VariantError  # the variant does not fit this kernel: bad input
            raise VariantError(f"interleave {requested} x lanes {lanes} exceeds the block ({kernel.block})")
        return int(requested)
    if any(isinstance(s, Atomic) for s in walk_stmts(kernel.body)):
        # an atomic update is one scalar step per lane: side-by-side packets gain nothing
        # there and multiply its code (a block of 256 at 32 packets: 256 lanes of it)
        return 1
    base = access_profile(kernel, lanes, bugs)
    i = most
    while i > 1:
        wide = access_profile(kernel, lanes * i, bugs)
        if all(wide[k] <= v for k, v in base.items()):
            return i
        i //= 2
    return 1

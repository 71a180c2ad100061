"""Random kernels and inputs as Hypothesis strategies (the fuzzer's generator).

`cases()` draws a complete launch: a kernel built directly as IR, its launch
size and block, Const bindings, buffer specifications, scalar values and an
inputs seed. Every choice goes through Hypothesis, so a failing case shrinks
to a minimal kernel (fewer statements, shallower expressions, simpler
literals: every choice's first option is its simplest).

Generated kernels are valid (they pass `spec.validate`) and well defined for
the interpreter *by construction*:

- Indices are in bounds. Every load index is either a form whose range is
  known from the ranges of its parts (global/thread/block id, loop variables,
  constants: `g + c`, `2*g + c`, `g // 3 + c`, `L-1-g`, ...), or is forced into
  range (`(e & 0x7fffffff) % L`, `u32(e) % u32(L)`, `min(max(e, 0), L-1)`).
  Private indices likewise.
- Stores never conflict. Output buffer Y has K slots; thread g owns address
  `pi_j(g) + j*M` of slot j (or `pi(g)*K + j`, interleaved), where pi is a
  bijection of [0, M) chosen per slot: identity, reversal, `(a*g + c) % M`
  with gcd(a, M) = 1, `g ^ m` (M a power of two), a permutation loaded from
  a buffer, block-transposed `t*nblocks + b`, or an odd multiplier of t within
  its block. M >= the padded launch, so
  even inactive threads' addresses are in bounds.
- No races: a thread reads an output only at its own addresses, except that
  after a collective (a barrier) it may read slot j of a neighbour in its
  own block if no thread stores slot j in that phase.
- No integer division by zero (divisors `b | 1`, `(b & 7) + 1` or nonzero
  literals), no shift out of range (amounts `b & 31` or literals 0..31).
- Bit casts from f32 canonicalise NaN first (`bitcast(x if x == x else NAN)`):
  DESIGN §3 counts all NaNs equal, so a NaN's payload is unspecified and a
  kernel must not observe it.

Loops have small trip counts (uniform: literals, Const parameters, scalars;
per thread: `range(t, LIM, B)`, counts from the thread id or loaded data).

A wrong value only counts if it reaches an output, so the generator works at
being observed: stores prefer output slots not stored to yet (a later store
to the same slot would hide the earlier one), assignments inside branches
and loops prefer variables that outlive them, the kernel ends by storing a
hash of every live variable (`ys`), private arrays are usually filled with
values distinct per thread and element, and "probe" statements store shapes
that are easy to get wrong straight to an output: a multiply feeding an add
(FMA contraction), min/max with NaN, ±0 or ±inf, a float to int conversion
out of range, a private element read at a per-thread index; adjacent stores
to every slot of an interleaved output (`y[K*g]`, `y[K*g+1]`, ...) give the
packet backend's fused interleaved store something to fuse.

Inputs (`make_args`) come from the inputs seed through a fixed integer hash
(splitmix64), not from NumPy's generators, so a seed means the same bytes in
every process and every NumPy version. Floats mix ordinary values with ±0,
subnormals, ±inf, NaNs (several payloads), huge values, rounding ties and
raw random bit patterns.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import gcd
from typing import Optional

import numpy as np
from hypothesis import strategies as st

from ..refimpl import mathlib
from ..refimpl.ir import (Assign, Collective, DType, Expr, For, If, Kernel, Op, Param, ParamKind,
                          Private, PStore, Reduce, Store, binary, bitcast, builtin, cast, const, fma, load,
                          math, param, pload, select, unary, var)

F32, I32, U32, BOOL = DType.F32, DType.I32, DType.U32, DType.BOOL

LAUNCH_SIZES = (33, 31, 1, 257, 17, 100, 64, 8)   # weighted towards the odd sizes with tails
BLOCKS = (32, 8, 16)
MATH_FUNCTIONS = tuple(sorted(mathlib.FUNCTIONS))

SPECIAL_F32 = (0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.0, float("nan"), float("inf"), float("-inf"),
               1e-45, -1e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 3.4028235e38, -3.4028235e38,
               1e30, -1e30, 2147483648.0, -2147483904.0, 4294967296.0, 16777217.0, 88.72, -103.9,
               3.1415927, 1e-7, 65504.0, 0.1)
SPECIAL_I32 = (0, 1, -1, 2, 3, 7, 31, 32, -7, 255, 65535, 1 << 30, -(2 ** 31), 2 ** 31 - 1, -2, 100)
SPECIAL_U32 = (0, 1, 2, 3, 7, 31, 32, 255, 2 ** 31, 2 ** 32 - 1, 0x7FFFFFFF, 0x80000001, 100)
DIVISORS = {I32: (1, 2, 3, -1, 7, -3, 8, 16, 32, 5), U32: (1, 2, 3, 7, 8, 16, 32, 5, 2 ** 31)}
MASK31 = 0x7FFFFFFF


# ---------------------------------------------------------------- cases

@dataclass(frozen=True)
class BufferSpec:
    name: str
    dtype: DType
    length: int
    fill: str = "data"        # "data": a mix of ordinary and special values; "finite": ordinary
                              # values of varied magnitude only; "special": mostly NaN, ±inf, ±0,
                              # subnormals, huge values; "perm": a permutation of 0..length-1
    stream: int = 0           # which stream of the inputs seed fills it (0: its position + 1)


@dataclass
class Case:
    """One generated launch: everything needed to run it (and nothing else)."""
    kernel: Kernel
    n: int
    consts: dict
    buffers: tuple
    scalars: dict             # scalar parameter name -> NumPy scalar of its dtype
    seed: int                 # inputs seed (buffer contents)

    @property
    def block(self) -> int:
        return self.kernel.block

    def describe(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in sorted(self.consts.items())) or "none"
        scal = ", ".join(f"{k}={_show_scalar(v)}" for k, v in self.scalars.items()) or "none"
        bufs = ", ".join(f"{b.name}[{b.length}]{'' if b.fill == 'data' else f'({b.fill})'}" for b in self.buffers)
        return (f"n={self.n} block={self.block} consts: {consts}; scalars: {scal}; buffers: {bufs}; "
                f"inputs seed {self.seed}")


def _show_scalar(v) -> str:
    if isinstance(v, np.floating):
        return f"{float(v)!r}"
    return str(int(v))


# ---------------------------------------------------------------- inputs

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix(seed: int, stream: int, count: int) -> np.ndarray:
    """`count` pseudo-random uint64 values for (seed, stream); stable forever."""
    with np.errstate(over="ignore"):
        base = np.uint64((seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03) & 0xFFFFFFFFFFFFFFFF)
        z = base + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


_F32_SPECIAL_BITS = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                              0x7FA00001, 0x7F800001, 0x00000001, 0x80000001, 0x007FFFFF, 0x00400000,
                              0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x4F000000, 0xCF000000, 0x4F800000,
                              0x3F000000, 0xBF000000, 0x3FC00000, 0x40200000, 0x4B800001, 0x42B17218,
                              0xC2CF0000, 0x5F800000, 0x3F800000, 0xBF800000], np.uint32)
_I32_SPECIAL = np.array([0, 1, -1, 2, -2, 31, 32, 33, 255, -(2 ** 31), 2 ** 31 - 1, 1 << 30, -7, 65536],
                        np.int64)


def fill(spec: BufferSpec, seed: int, stream: int) -> np.ndarray:
    """The contents of one buffer for an inputs seed (deterministic, NumPy-version independent)."""
    n = spec.length
    r = _splitmix(seed, stream, 2 * n + 1)
    a, b = r[:n], r[n:2 * n]
    if spec.fill == "perm":
        return np.argsort(a, kind="stable").astype(spec.dtype.np)
    low = (b & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    cat = (a >> np.uint64(56)).astype(np.int64) % 8
    if spec.fill == "finite":
        cat = cat % 4                   # ordinary values of varied magnitude, small integers, ties
    elif spec.fill == "special":
        cat = np.where(cat < 3, 5, cat)  # mostly special values and raw bit patterns
    pick = (a & np.uint64(0xFFFF)).astype(np.int64)
    if spec.dtype is DType.BOOL:
        return (low & 1).astype(np.bool_)
    if spec.dtype is F32:
        normal = (low.astype(np.float64) / 2 ** 32 - 0.5) * 8.0                        # [-4, 4)
        scale = np.exp2(((pick % 40) - 20).astype(np.float64))                           # 2^-20..2^19
        halves = ((pick % 33) - 16).astype(np.float64) / 2                               # ties
        out = np.where(cat <= 2, normal,
              np.where(cat == 3, normal * scale,
              np.where(cat == 4, halves, 0.0))).astype(np.float32)
        bits = out.view(np.uint32).copy()
        bits = np.where(cat == 5, _F32_SPECIAL_BITS[pick % len(_F32_SPECIAL_BITS)], bits)
        bits = np.where(cat == 6, low, bits)                                             # raw patterns
        bits = np.where(cat == 7, (low & np.uint32(0x807FFFFF)), bits)                   # subnormals, ±0
        return bits.astype(np.uint32).view(np.float32)
    small = (pick % 41) - 20
    mid = pick % 1000
    special = _I32_SPECIAL[pick % len(_I32_SPECIAL)]
    vals = np.where(cat <= 3, small, np.where(cat == 4, mid, np.where(cat == 5, special, 0)))
    bits = (vals & 0xFFFFFFFF).astype(np.uint32)
    bits = np.where(cat >= 6, low, bits).astype(np.uint32)
    return bits.view(spec.dtype.np)


def make_args(case: Case) -> dict:
    """Fresh argument arrays (and scalars) for one run of `case`."""
    args = {}
    for i, spec in enumerate(case.buffers):
        args[spec.name] = fill(spec, case.seed, spec.stream or i + 1)
    for p in case.kernel.scalars:
        args[p.name] = case.scalars[p.name]
    return args


# ---------------------------------------------------------------- the generator

@dataclass
class _Range:
    """An i32 expression with a known value range over active (and padded) threads."""
    expr: Expr
    lo: int
    hi: int


@dataclass
class _Loop:
    name: str
    lo: int
    hi: int
    uniform: bool
    unit: bool                # the loop variable is affine with stride 1 across lanes (start = t)


@dataclass(eq=False)
class _Output:
    name: str
    dtype: DType
    slots: int
    region: int               # M: every bijection is of [0, M)
    interleaved: bool         # address pi(g)*K + j, else pi_j(g) + j*M
    forms: list               # per slot (one entry if interleaved): (kind, parameters)


@dataclass
class _Private:
    name: str
    dtype: DType
    size: int


@st.composite
def _spanned(draw, gen, fn, args):
    """Run gen.fn(*args) inside its own Hypothesis span (drawing through this span's draw)."""
    outer, gen.draw = gen.draw, draw
    try:
        return fn(*args)
    finally:
        gen.draw = outer


class _Gen:
    """Builds one kernel from Hypothesis draws; tracks what is defined where."""

    def __init__(self, draw, n: int, block: int):
        self.draw = draw
        self.n, self.B = n, block
        self.nblocks = -(-n // block)
        self.npad = self.nblocks * block
        self.inputs: list = []         # BufferSpec of read-only buffers
        self.perm: Optional[BufferSpec] = None
        self.outputs: list = []
        self.scalars: dict = {}        # name -> dtype
        self.consts: dict = {}         # name -> value
        self.privates: list = []
        self.vtypes: dict = {}         # variable -> dtype, for the whole kernel
        self.defined: set = set()
        self.loops: list = []
        self.loopvars: set = set()
        self.counter = 0
        self.stmt_budget = 0
        self.math_budget = 3
        self.exchange: set = set()     # (output, slot) readable from neighbours in this phase
        self.phase = 0
        self.node_budget = 120         # operator nodes per kernel, weighted (compile time stays bounded)
        self.weight = 1                # copies the packet lowering makes of code here (per-thread loops)
        self.nest = 0                  # loads inside index expressions, currently
        self.nesting = 0               # enclosing ifs and loops, currently
        self.slot_uses = Counter()     # (output, slot) -> stores generated so far
        self.outer_defined: set = set()   # defined where the outermost enclosing statement starts

    # ------------------------------------------------------------ choices
    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def pick(self, options):
        options = list(options)
        return options[self.int(0, len(options) - 1)]

    def weighted(self, table):
        """table: [(weight, value), ...]; shrinks towards the first entry."""
        table = [(w, v) for w, v in table if w > 0]
        total = sum(w for w, _ in table)
        r = self.int(0, total - 1)
        for w, v in table:
            if r < w:
                return v
            r -= w
        raise AssertionError

    def maybe(self, percent: int) -> bool:
        """True with about `percent`% probability; shrinks to False."""
        return self.int(0, 99) >= 100 - percent

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ------------------------------------------------------------ builtins
    def g(self):
        return builtin(Op.GLOBAL_ID)

    def t(self):
        return builtin(Op.THREAD_ID)

    def b(self):
        return builtin(Op.BLOCK_ID)

    def ci(self, v: int) -> Expr:
        return const(v, I32)

    # ------------------------------------------------------------ literals
    def literal(self, dt: DType) -> Expr:
        if dt is F32:
            how = self.weighted([(2, "small"), (3, "special"), (2, "any")])
            if how == "small":
                return const(self.int(-8, 8) / 2, F32)
            if how == "special":
                return const(self.pick(SPECIAL_F32), F32)
            return const(self.draw(st.floats(width=32, allow_nan=True, allow_infinity=True)), F32)
        if dt is BOOL:
            return const(self.pick((False, True)), BOOL)
        how = self.weighted([(3, "small"), (2, "special"), (1, "any")])
        if how == "small":
            return const(self.int(0, 40) if dt is U32 else self.int(-20, 20), dt)
        if how == "special":
            return const(self.pick(SPECIAL_I32 if dt is I32 else SPECIAL_U32), dt)
        return const(self.int(-(2 ** 31), 2 ** 31 - 1) if dt is I32 else self.int(0, 2 ** 32 - 1), dt)

    # ------------------------------------------------------------ leaves
    def defined_vars(self, dt: DType) -> list:
        return sorted(v for v in self.defined if self.vtypes.get(v) is dt)

    def leaf(self, dt: DType) -> Expr:
        table = [(2, "literal")]
        vs = self.defined_vars(dt)
        table.append((7 if vs else 0, "var"))
        sc = [n for n, d in self.scalars.items() if d is dt]
        table.append((2 if sc else 0, "scalar"))
        if dt is I32:
            table.append((3, "builtin"))
            table.append((2 if self.consts else 0, "constparam"))
        deep = self.nest >= 2            # an index inside an index inside an index: no more loads
        ins = [b for b in self.inputs if b.dtype is dt]
        table.append((5 if ins and not deep else 0, "load"))
        pv = [p for p in self.privates if p.dtype is dt]
        table.append((3 if pv and not deep else 0, "pload"))
        outs = [o for o in self.outputs if o.dtype is dt]
        table.append((1 if outs and not deep else 0, "own"))
        ex = [(o, j) for o, j in sorted(self.exchange, key=lambda x: (x[0].name, x[1])) if o.dtype is dt]
        table.append((3 if ex and not deep else 0, "exchange"))
        kind = self.weighted(table)
        if kind == "literal":
            return self.literal(dt)
        if kind == "var":
            return var(self.pick(vs), dt)
        if kind == "scalar":
            return param(self.pick(sc), dt)
        if kind == "builtin":
            op = self.pick([Op.GLOBAL_ID, Op.THREAD_ID, Op.BLOCK_ID, Op.BLOCK_SIZE, Op.NUM_THREADS, Op.BUFLEN])
            if op is Op.BUFLEN:
                return builtin(op, self.pick([b.name for b in self.inputs + [self._out_spec(o) for o in self.outputs]]))
            return builtin(op)
        if kind == "constparam":
            return param(self.pick(sorted(self.consts)), I32)
        if kind == "load":
            buf = self.pick(ins)
            return load(buf.name, self.in_index(buf), dt)
        if kind == "pload":
            p = self.pick(pv)
            return pload(p.name, self.private_index(p), dt)
        if kind == "own":
            o = self.pick(outs)
            j = self.int(0, o.slots - 1)
            return load(o.name, self.out_address(o, j, self.g(), self.t(), self.b()), dt)
        o, j = self.pick(ex)
        return load(o.name, self.neighbour_address(o, j), dt)

    # ------------------------------------------------------------ expressions
    def expr(self, dt: DType, depth: int) -> Expr:
        # one Hypothesis span per expression node: the shrinker can then replace a node by a
        # sub-expression (pass_to_descendant) or drop it whole
        return self.draw(_spanned(self, self._expr, (dt, depth)))

    def _expr(self, dt: DType, depth: int) -> Expr:
        if depth <= 0 or self.node_budget <= 0:
            return self.leaf(dt)
        self.node_budget -= self.weight
        if dt is F32:
            return self.fexpr(depth)
        if dt is BOOL:
            return self.bexpr(depth)
        return self.iexpr(dt, depth)

    def number_type(self) -> DType:
        return self.weighted([(3, F32), (2, I32), (1, U32)])

    def ordinary(self, d: int) -> Expr:
        """An f32 value that is usually finite with a full mantissa (where rounding shows)."""
        fin = [b for b in self.inputs if b.dtype is F32 and b.fill == "finite" and self.nest < 2]
        how = self.weighted([(4 if fin else 0, "load"), (1, "literal"), (1, "expr")])
        if how == "load":
            buf = self.pick(fin)
            return load(buf.name, self.in_index(buf), F32)
        if how == "literal":
            return const(self.draw(st.floats(-1000.0, 1000.0, width=32)), F32)
        return self.expr(F32, d - 1)

    def special(self, d: int) -> Expr:
        """An f32 value that is often NaN, ±inf or ±0."""
        sp = [b for b in self.inputs if b.dtype is F32 and b.fill == "special" and self.nest < 2]
        how = self.weighted([(3 if sp else 0, "load"), (2, "literal"), (1, "sqrt")])
        if how == "load":
            buf = self.pick(sp)
            return load(buf.name, self.in_index(buf), F32)
        if how == "literal":
            return const(self.pick([float("nan"), float("inf"), float("-inf"), -0.0, 0.0]), F32)
        return unary(Op.SQRT, self.expr(F32, d - 1))        # NaN for negative inputs

    def fexpr(self, d: int) -> Expr:
        kind = self.weighted([(4, "leaf"), (6, "binary"), (4, "fma"), (2, "minmax"), (2, "unary"),
                              (2 if self.math_budget > 0 and self.node_budget > 25 * self.weight else 0, "math"),
                              (2, "select"), (1, "cast"),
                              (1, "bitcast")])
        sub = lambda: self.expr(F32, d - 1)
        if kind == "leaf":
            return self.leaf(F32)
        if kind == "binary":
            op = self.pick([Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX])
            return binary(op, sub(), sub())
        if kind == "fma":   # a multiply feeding an add: where FMA contraction would change bits
            a, b, c = self.ordinary(d), self.ordinary(d), self.ordinary(d)
            shape = self.pick(["a*b+c", "c+a*b", "a*b-c", "c-a*b", "fma"])
            ab = binary(Op.MUL, a, b)
            return {"a*b+c": lambda: ab + c, "c+a*b": lambda: c + ab, "a*b-c": lambda: ab - c,
                    "c-a*b": lambda: c - ab, "fma": lambda: fma(a, b, c)}[shape]()
        if kind == "minmax":  # with NaN, ±0 and ±inf operands: where the operand order matters
            a, b = self.special(d), sub()
            if self.maybe(50):
                a, b = b, a
            return binary(self.pick([Op.MIN, Op.MAX]), a, b)
        if kind == "unary":
            return unary(self.pick([Op.NEG, Op.ABS, Op.SQRT]), sub())
        if kind == "math":              # a math function inlines a few dozen operations
            self.math_budget -= 1
            self.node_budget -= 25 * self.weight
            return math(self.pick(MATH_FUNCTIONS), sub())
        if kind == "select":
            return select(self.expr(BOOL, d - 1), sub(), sub())
        if kind == "cast":
            return cast(self.expr(self.pick([I32, U32, BOOL]), d - 1), F32)
        return bitcast(self.expr(self.pick([I32, U32]), d - 1), F32)

    def safe_divisor(self, dt: DType, d: int) -> Expr:
        how = self.weighted([(3, "literal"), (2, "or1"), (1, "mask")])
        if how == "literal":
            return const(self.pick(DIVISORS[dt]), dt)
        e = self.expr(dt, d - 1)
        if how == "or1":
            return binary(Op.OR, e, const(1, dt))                     # odd, hence nonzero
        return binary(Op.AND, e, const(7, dt)) + const(1, dt)        # 1..8

    def shift_amount(self, dt: DType, d: int) -> Expr:
        if self.maybe(50):
            return binary(Op.AND, self.expr(dt, d - 1), const(31, dt))
        return const(self.int(0, 31), dt)

    def iexpr(self, dt: DType, d: int) -> Expr:
        kind = self.weighted([(4, "leaf"), (5, "arith"), (2, "divmod"), (1, "minmax"), (2, "bitwise"),
                              (2, "shift"), (1, "unary"), (1, "select"), (2, "castf"), (1, "casti"),
                              (1, "bitcastf")])
        sub = lambda: self.expr(dt, d - 1)
        if kind == "leaf":
            return self.leaf(dt)
        if kind == "arith":
            return binary(self.pick([Op.ADD, Op.SUB, Op.MUL]), sub(), sub())
        if kind == "divmod":
            return binary(self.pick([Op.DIV, Op.MOD]), sub(), self.safe_divisor(dt, d))
        if kind == "minmax":
            return binary(self.pick([Op.MIN, Op.MAX]), sub(), sub())
        if kind == "bitwise":
            return binary(self.pick([Op.AND, Op.OR, Op.XOR]), sub(), sub())
        if kind == "shift":
            return binary(self.pick([Op.SHL, Op.SHR]), sub(), self.shift_amount(dt, d))
        if kind == "unary":
            return unary(self.pick([Op.NEG, Op.NOT, Op.ABS]), sub())
        if kind == "select":
            return select(self.expr(BOOL, d - 1), sub(), sub())
        if kind == "castf":   # f32 -> int: truncation, saturation, NaN -> 0
            return cast(self.expr(F32, d - 1), dt)
        if kind == "casti":
            return cast(self.expr(self.pick([U32 if dt is I32 else I32, BOOL]), d - 1), dt)
        return self.canonical_bitcast(self.expr(F32, d - 1), dt)

    def canonical_bitcast(self, x: Expr, dt: DType) -> Expr:
        """bitcast(x if x == x else NAN): a NaN's payload is unspecified (DESIGN §3)."""
        if x.op is Op.CONST:
            return bitcast(x if x.arg == x.arg else const(float("nan"), F32), dt)
        return bitcast(select(binary(Op.EQ, x, x), x, const(float("nan"), F32)), dt)

    def bexpr(self, d: int) -> Expr:
        kind = self.weighted([(2, "leaf"), (6, "compare"), (2, "logic"), (1, "not"), (1, "select"),
                              (1, "cast")])
        if kind == "leaf":
            return self.leaf(BOOL)
        if kind == "compare":
            dt = self.number_type()
            op = self.pick([Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE])
            return binary(op, self.expr(dt, d - 1), self.expr(dt, d - 1))
        if kind == "logic":
            op = self.pick([Op.AND, Op.OR, Op.XOR, Op.EQ, Op.NE])
            return binary(op, self.expr(BOOL, d - 1), self.expr(BOOL, d - 1))
        if kind == "not":
            return unary(Op.NOT, self.expr(BOOL, d - 1))
        if kind == "select":
            return select(self.expr(BOOL, d - 1), self.expr(BOOL, d - 1), self.expr(BOOL, d - 1))
        return cast(self.expr(self.number_type(), d - 1), BOOL)

    # ------------------------------------------------------------ index forms
    def bases(self) -> list:
        """i32 expressions with known ranges: (range, per-lane stride 1?)."""
        out = [(_Range(self.g(), 0, self.npad - 1), True), (_Range(self.t(), 0, self.B - 1), True),
               (_Range(self.b(), 0, self.nblocks - 1), False)]
        for lp in self.loops:
            if lp.lo >= 0:
                out.append((_Range(var(lp.name, I32), lp.lo, lp.hi), lp.unit))
        return out

    def uniform_int(self) -> Expr:
        """An i32 value that is the same in every thread of a block (maybe negative)."""
        opts = [(2, "literal"), (2, "block")]
        sc = [n for n, d in self.scalars.items() if d is I32]
        opts.append((2 if sc else 0, "scalar"))
        ul = [lp for lp in self.loops if lp.uniform]
        opts.append((2 if ul else 0, "loop"))
        coll = [v for v in self.defined_vars(I32) if v.startswith("r")]
        opts.append((1 if coll else 0, "collective"))
        opts.append((1 if self.consts else 0, "constparam"))
        kind = self.weighted(opts)
        if kind == "literal":
            return self.literal(I32)
        if kind == "block":
            return self.b()
        if kind == "scalar":
            return param(self.pick(sc), I32)
        if kind == "loop":
            return var(self.pick(ul).name, I32)
        if kind == "collective":
            return var(self.pick(coll), I32)
        return param(self.pick(sorted(self.consts)), I32)

    def length_expr(self, name: str, L: int) -> Expr:
        return builtin(Op.BUFLEN, name) if self.maybe(40) else self.ci(L)

    def forced(self, e: Expr, name: str, L: int) -> Expr:
        """(e & 0x7fffffff) % L: in [0, L) whatever e is."""
        return binary(Op.MOD, binary(Op.AND, e, self.ci(MASK31)), self.length_expr(name, L))

    def in_index(self, buf: BufferSpec) -> Expr:
        self.nest += 1
        try:
            return self._in_index(buf)
        finally:
            self.nest -= 1

    def _in_index(self, buf: BufferSpec) -> Expr:
        L = buf.length
        form = self.weighted([(3, "uniform"), (4, "contiguous"), (3, "strided"), (3, "divided"),
                              (1, "reversed"), (3, "gather"), (1, "gather_u32"), (1, "clamp"),
                              (1 if self.perm is not None else 0, "perm")])
        idx = self.index_form(form, buf.name, L)
        if idx is None:
            idx = self.forced(self.g() * self.int(1, 9) + self.ci(self.int(0, 5)), buf.name, L)
        if idx.dtype is I32 and self.maybe(8):
            idx = cast(idx, U32)                                     # a u32 index, same value
        return idx

    def index_form(self, form: str, name: str, L: int) -> Optional[Expr]:
        if form == "uniform":
            how = self.weighted([(2, "literal"), (3, "forced")])
            if how == "literal":
                return self.ci(self.int(0, L - 1))
            return self.forced(self.uniform_int(), name, L)
        if form in ("contiguous", "strided", "divided", "reversed"):
            cands = self.bases()
            if form == "contiguous":
                cands = [c for c in cands if c[1]] or cands
            r, _ = self.pick(cands)
            if form == "contiguous":
                k, e, lo, hi = 1, r.expr, r.lo, r.hi
            elif form == "strided":
                k = self.pick([2, 3, 2, 4])
                e = binary(Op.SHL, r.expr, self.ci(1)) if k == 2 and self.maybe(30) else r.expr * k
                lo, hi = r.lo * k, r.hi * k
            elif form == "divided":
                k = self.pick([3, 2, 4, 5, 8, 16, 32])
                e, lo, hi = binary(Op.DIV, r.expr, self.ci(k)), r.lo // k, r.hi // k
            else:
                if r.hi > L - 1:
                    return None
                c = self.int(0, L - 1 - r.hi)
                return self.ci(L - 1 - c) - r.expr
            if hi > L - 1 or lo < 0:
                return None
            c = self.int(0, L - 1 - hi)
            return e + self.ci(c) if c or self.maybe(50) else e
        if form == "gather":
            how = self.weighted([(2, "affine"), (3, "any")])
            if how == "affine":
                e = self.g() * self.int(2, 41) + self.ci(self.int(0, 9))
            else:
                e = self.expr(I32, 2)
            return self.forced(e, name, L)
        if form == "gather_u32":
            return binary(Op.MOD, self.expr(U32, 2), const(L, U32))
        if form == "clamp":
            e = self.expr(I32, 2)
            return binary(Op.MIN, binary(Op.MAX, e, self.ci(0)), self.ci(L - 1))
        if form == "perm":
            p = load(self.perm.name, self.g() if self.perm.length >= self.npad else
                     self.forced(self.g(), self.perm.name, self.perm.length), I32)
            return p if L >= self.perm.length else binary(Op.MOD, p, self.ci(L))
        raise AssertionError(form)

    def private_index(self, p: _Private) -> Expr:
        self.nest += 1
        try:
            return self._private_index(p)
        finally:
            self.nest -= 1

    def _private_index(self, p: _Private) -> Expr:
        kind = self.weighted([(3, "uniform"), (3, "thread")])
        size = p.size
        if kind == "uniform":
            ul = [lp for lp in self.loops if lp.uniform and 0 <= lp.lo and lp.hi < size]
            how = self.weighted([(2, "literal"), (3 if ul else 0, "loop"), (2, "forced")])
            if how == "literal":
                return self.ci(self.int(0, size - 1))
            if how == "loop":
                return var(self.pick(ul).name, I32)
            return binary(Op.MOD, binary(Op.AND, self.uniform_int(), self.ci(MASK31)), self.ci(size))
        how = self.weighted([(2, "tid"), (2, "affine"), (1, "divided"), (2, "any")])
        if how == "tid":
            return binary(Op.MOD, self.t(), self.ci(size))
        if how == "divided":
            return binary(Op.MOD, binary(Op.DIV, self.g(), self.ci(self.pick([3, 2, 5]))), self.ci(size))
        if how == "affine":
            return binary(Op.MOD, self.g() * self.int(1, 7) + self.ci(self.int(0, 5)), self.ci(size))
        return binary(Op.MOD, binary(Op.AND, self.expr(I32, 2), self.ci(MASK31)), self.ci(size))

    # ------------------------------------------------------------ outputs
    def _out_spec(self, o: _Output) -> BufferSpec:
        return BufferSpec(o.name, o.dtype, o.slots * o.region)

    def make_output(self, name: str, dt: DType) -> _Output:
        K = self.weighted([(3, 1), (3, 2), (2, 3), (1, 4)])
        interleaved = K > 1 and self.maybe(40)
        nforms = 1 if interleaved else K
        kinds = [self.weighted([(3, "id"), (2, "affine"), (1, "rev"), (1, "xor"),
                                (1 if self.perm is not None else 0, "perm"), (1, "transpose"),
                                (1, "inblock")]) for _ in range(nforms)]
        if "xor" in kinds:
            M = 1
            while M < self.npad:
                M *= 2
        else:
            M = self.npad + self.int(0, 3)
        forms = []
        for kind in kinds:
            if kind == "affine":
                a = self.int(1, 2 * M + 1)
                while gcd(a, M) != 1:
                    a += 1
                forms.append((kind, (a, self.int(0, M - 1))))
            elif kind == "xor":
                forms.append((kind, (self.int(0, M - 1),)))
            elif kind == "inblock":
                forms.append((kind, (2 * self.int(0, self.B) + 1, self.int(0, self.B - 1))))
            else:
                forms.append((kind, ()))
        return _Output(name, dt, K, M, interleaved, forms)

    def bijection(self, form, M: int, g: Expr, t: Expr, b: Expr) -> Expr:
        kind, ps = form
        if kind == "id":
            return g
        if kind == "rev":
            return self.ci(M - 1) - g
        if kind == "affine":
            a, c = ps
            return binary(Op.MOD, g * a + self.ci(c), self.ci(M))
        if kind == "xor":
            return binary(Op.XOR, g, self.ci(ps[0]))
        if kind == "perm":
            return load(self.perm.name, g, I32)
        if kind == "transpose":
            return t * self.nblocks + b
        if kind == "inblock":
            a, c = ps
            return b * self.B + binary(Op.AND, t * a + self.ci(c), self.ci(self.B - 1))
        raise AssertionError(kind)

    def out_address(self, o: _Output, j: int, g: Expr, t: Expr, b: Expr) -> Expr:
        if o.interleaved:
            a = self.bijection(o.forms[0], o.region, g, t, b) * o.slots
            return a + self.ci(j) if j else a
        a = self.bijection(o.forms[j], o.region, g, t, b)
        return a + self.ci(j * o.region) if j else a

    def neighbour_address(self, o: _Output, j: int) -> Expr:
        """Slot j of thread (t + d) mod B of this block: written in an earlier phase."""
        d = self.int(1, self.B - 1) if self.B > 1 else 0
        bs = builtin(Op.BLOCK_SIZE) if self.maybe(50) else self.ci(self.B)
        t2 = binary(Op.MOD, self.t() + self.ci(d), bs)
        g2 = self.g() - self.t() + t2
        return self.out_address(o, j, g2, t2, self.b())

    # ------------------------------------------------------------ statements
    def pick_slot(self, slots: list):
        """An output slot, preferring the least stored to so far: a later store to the same
        slot would hide this one's value."""
        least = min(self.slot_uses[(o.name, j)] for o, j in slots)
        if self.maybe(85):
            slots = [(o, j) for o, j in slots if self.slot_uses[(o.name, j)] == least]
        o, j = self.pick(slots)
        self.slot_uses[(o.name, j)] += 1
        return o, j

    def store_value(self, value: Expr, dt: DType) -> Expr:
        """Convert `value` for a buffer of dtype dt, keeping every bit observable."""
        if value.dtype is dt:
            return value
        if value.dtype is F32 and dt.is_int:
            return self.canonical_bitcast(value, dt)
        if value.dtype.is_int and dt is F32:
            return bitcast(value, F32)
        return cast(value, dt)

    def store(self, depth: int) -> Optional[Store]:
        slots = [(o, j) for o in self.outputs for j in range(o.slots) if (o, j) not in self.exchange]
        if not slots:
            return None
        o, j = self.pick_slot(slots)
        addr = self.out_address(o, j, self.g(), self.t(), self.b())
        if self.maybe(8):
            addr = cast(addr, U32)
        how = self.weighted([(4, "expr"), (2, "var"), (1, "rmw")])
        if how == "var" and self.defined_vars(o.dtype):
            value = var(self.pick(self.defined_vars(o.dtype)), o.dtype)
        elif how == "rmw" and o.dtype.is_number:   # read-modify-write of the thread's own element
            value = binary(Op.ADD, load(o.name, addr, o.dtype), self.expr(o.dtype, depth))
        else:
            value = self.expr(o.dtype, depth)
        return Store(o.name, addr, value)

    def assign(self, depth: int) -> Assign:
        dt = self.weighted([(5, F32), (3, I32), (2, U32), (1, BOOL)])
        existing = sorted(v for v, d in self.vtypes.items() if d is dt and v not in self.loopvars
                          and not v.startswith("r"))
        # inside a branch or loop, prefer a variable defined outside it: its new value then
        # survives the statement and reaches the outputs (a fresh name would die with the body)
        outer = [v for v in existing if v in self.outer_defined]
        if self.nesting and outer and self.maybe(70):
            name = self.pick(outer)
        elif existing and self.maybe(50):
            name = self.pick(existing)
        else:
            name = self.fresh({F32: "f", I32: "i", U32: "u", BOOL: "c"}[dt])
        if name in self.defined and dt.is_number and self.maybe(40):
            op = self.pick([Op.ADD, Op.MUL, Op.MAX, Op.SUB, Op.MIN])
            value = binary(op, var(name, dt), self.expr(dt, depth))      # an accumulator
        else:
            value = self.expr(dt, depth)
        self.vtypes[name] = dt
        self.defined.add(name)
        return Assign(name, value)

    def pstore(self, depth: int) -> PStore:
        p = self.pick(self.privates)
        idx = self.private_index(p)
        if p.dtype.is_number and self.maybe(30):
            value = binary(Op.ADD, pload(p.name, idx, p.dtype), self.expr(p.dtype, depth))
        else:
            value = self.expr(p.dtype, depth)
        return PStore(p.name, idx, value)

    def condition(self) -> Expr:
        kind = self.weighted([(3, "any"), (2, "lanes"), (1, "data"), (2, "uniform")])
        if kind == "any":
            return self.expr(BOOL, 2)
        if kind == "lanes":    # diverges inside a packet
            how = self.pick(["tlt", "gmask", "gmod", "gdiv"])
            if how == "tlt":
                return binary(Op.LT, self.t(), self.ci(self.int(0, self.B)))
            if how == "gdiv":    # g // k: neither uniform nor affine across a packet (k not a multiple of W)
                q = binary(Op.DIV, self.g(), self.ci(self.pick([3, 2, 5, 6, 12])))
                return binary(Op.EQ, binary(Op.AND, q, self.ci(1)), self.ci(0))
            if how == "gmask":
                return binary(Op.EQ, binary(Op.AND, self.g(), self.ci(self.int(1, 7))), self.ci(0))
            return binary(Op.EQ, binary(Op.MOD, self.g(), self.ci(self.int(2, 5))), self.ci(self.int(0, 1)))
        if kind == "data":
            dt = self.number_type()
            return binary(self.pick([Op.GT, Op.LT, Op.NE]), self.expr(dt, 1), self.literal(dt))
        how = self.weighted([(2, "int"), (1, "float")])
        if how == "int":
            return binary(self.pick([Op.LT, Op.EQ, Op.GE, Op.NE]), self.uniform_int(), self.literal(I32))
        sf = [n for n, d in self.scalars.items() if d is F32]
        fv = [v for v in self.defined_vars(F32) if v.startswith("r")]
        if sf or fv:
            x = param(self.pick(sf), F32) if sf and (not fv or self.maybe(50)) else var(self.pick(fv), F32)
            return binary(self.pick([Op.GT, Op.LE, Op.EQ]), x, self.literal(F32))
        return binary(Op.EQ, binary(Op.MOD, self.b(), self.ci(2)), self.ci(0))

    def nested(self, fn):
        if not self.nesting:
            self.outer_defined = set(self.defined)
        self.nesting += 1
        try:
            return fn()
        finally:
            self.nesting -= 1

    def if_stmt(self, depth: int) -> If:
        cond = self.condition()
        before = set(self.defined)
        then = self.nested(lambda: self.stmts(depth + 1))
        after_then = self.defined
        self.defined = set(before)
        orelse = self.nested(lambda: self.stmts(depth + 1)) if self.maybe(60) else ()
        after_else = self.defined
        self.defined = before | (after_then & after_else)
        return If(cond, then, orelse)

    def for_stmt(self, depth: int) -> For:
        name = self.fresh("j")
        kinds = [(3, "u_literal"), (1 if self.consts else 0, "u_const"),
                 (1 if any(d is I32 for d in self.scalars.values()) else 0, "u_scalar"),
                 (3, "v_block"), (2, "v_count"), (1, "v_data"), (1, "v_start")]
        kind = self.weighted(kinds)
        one = self.ci(1)
        uniform, unit = kind.startswith("u"), False
        if kind == "u_literal":
            step = self.pick([1, 2, -1, 3, -2])
            start = self.int(-2, 4)
            trips = self.int(0, 4)
            stop = start + trips * step
            step_e = self.ci(step)
            if step > 0 and self.consts and self.maybe(20):     # a compile-time step from a Const
                c = self.pick(sorted(self.consts))
                step_e = param(c, I32) + self.ci(step)
                step = self.consts[c] + step
            start_e, stop_e = self.ci(start), self.ci(stop)
            last = start + max(trips - 1, 0) * step
            lo, hi = min(start, last), max(start, last)
            if step > 0:
                hi = max(start, stop - 1)
            else:
                lo = min(start, stop + 1)
        elif kind == "u_const":
            c = self.pick(sorted(self.consts))
            start_e, stop_e, step_e = self.ci(0), param(c, I32), one
            lo, hi = 0, max(self.consts[c] - 1, 0)
        elif kind == "u_scalar":
            s = self.pick(sorted(n for n, d in self.scalars.items() if d is I32))
            start_e, stop_e, step_e = self.ci(0), binary(Op.AND, param(s, I32), self.ci(3)), one
            lo, hi = 0, 2
        elif kind == "v_block":         # for j in range(t, LIM, B): lanes consecutive
            lim = self.int(0, 3 * self.B)
            bs = builtin(Op.BLOCK_SIZE) if self.maybe(50) else self.ci(self.B)
            start_e, stop_e, step_e = self.t(), self.ci(lim), bs
            lo, hi, unit = 0, max(lim - 1, 0), True
        elif kind == "v_count":
            how = self.pick(["g", "t", "gdiv"])
            k = self.int(2, 5)
            src = {"g": self.g, "t": self.t}.get(how, lambda: binary(Op.DIV, self.g(), self.ci(self.pick([3, 2, 6]))))()
            start_e, stop_e, step_e = self.ci(0), binary(Op.MOD, src, self.ci(k)), one
            lo, hi = 0, k - 2
        elif kind == "v_data":
            dt = self.pick([I32, U32])
            e = self.expr(dt, 1)
            stop_e = cast(binary(Op.AND, e, const(3, dt)), I32)
            start_e, step_e = self.ci(0), one
            lo, hi = 0, 2
        else:                           # per-thread start, uniform stop, maybe counting down
            k = self.int(2, 4)
            start_e = binary(Op.MOD, self.t(), self.ci(k))
            if self.maybe(50):
                stop_e, step_e = self.ci(-1), self.ci(-1)
                lo, hi = 0, k - 1
            else:
                stop = self.int(0, 6)
                stop_e, step_e = self.ci(stop), self.ci(self.pick([1, 2]))
                lo, hi = 0, max(stop - 1, 0)
        self.loops.append(_Loop(name, lo, hi, uniform, unit))
        self.loopvars.add(name)
        self.vtypes[name] = I32
        before = set(self.defined)
        self.defined.add(name)
        saved = self.weight
        if not uniform:                  # packets split per-thread loops into full and tail parts
            self.weight *= 2
        body = self.nested(lambda: self.stmts(depth + 1))
        self.weight = saved
        self.defined = before            # nothing assigned in a loop is defined after it
        self.loops.pop()
        return For(name, start_e, stop_e, step_e, body)

    def probe(self, depth: int) -> Optional[Store]:
        """Store an expression whose rounding, NaN handling or range is easy to get wrong
        (a multiply feeding an add; min/max with NaN, ±0 or ±inf; a float to int conversion
        out of range) at the thread's own slot."""
        kind = self.pick(["fma", "minmax", "convert"] + (["private"] if self.privates else []))
        want = {"convert": (I32, U32), "private": (F32, I32, U32, BOOL)}.get(kind, (F32,))
        slots = [(o, j) for o in self.outputs for j in range(o.slots)
                 if (o, j) not in self.exchange and o.dtype in want]
        if not slots:
            return None
        o, j = self.pick_slot(slots)
        d = max(depth, 1)
        if kind == "fma":
            a, b, c = self.ordinary(d), self.ordinary(d), self.ordinary(d)
            value = binary(self.pick([Op.ADD, Op.SUB]), binary(Op.MUL, a, b), c)
        elif kind == "minmax":
            a, b = self.special(d), self.ordinary(d)
            if self.maybe(50):
                a, b = b, a
            value = binary(self.pick([Op.MIN, Op.MAX]), a, b)
        elif kind == "convert":
            x = self.special(d) if self.maybe(50) else self.ordinary(d) * const(self.pick([1e10, -3e9, 1.0]), F32)
            value = cast(x, o.dtype)
        else:                 # a private element read back: which thread's, which element's?
            p = self.pick(self.privates)
            value = self.store_value(pload(p.name, self.private_index(p), p.dtype), o.dtype)
        return Store(o.name, self.out_address(o, j, self.g(), self.t(), self.b()), value)

    def stmt(self, depth: int):
        return self.draw(_spanned(self, self._stmt, (depth,)))   # a span per statement (deletable whole)

    def group_store(self, depth: int) -> Optional[tuple]:
        """y[K*p(g)], y[K*p(g) + 1], ..., y[K*p(g) + K-1] in a row: every slot of an
        interleaved output (the packet backend may fuse them into one shuffled vector store)."""
        outs = [o for o in self.outputs if o.interleaved and all((o, j) not in self.exchange
                                                                  for j in range(o.slots))]
        if not outs:
            return None
        o = self.pick(outs)
        g, t, b = self.g(), self.t(), self.b()
        return tuple(Store(o.name, self.out_address(o, j, g, t, b), self.expr(o.dtype, depth))
                     for j in range(o.slots))

    def _stmt(self, depth: int):
        table = [(5, "assign"), (3, "store"), (2, "probe"), (1, "group"), (2 if self.privates else 0, "pstore"),
                 (2 if depth < 3 else 0, "if"), ((2, 1, 0)[len(self.loops)] if depth < 3 else 0, "for")]
        kind = self.weighted(table)
        self.stmt_budget -= self.weight
        edepth = self.int(1, 3)
        if kind in ("store", "probe", "group"):
            s = {"store": self.store, "probe": self.probe, "group": self.group_store}[kind](edepth)
            if s is not None:
                return s
            kind = "assign"
        if kind == "assign":
            return self.assign(edepth)
        if kind == "pstore":
            return self.pstore(edepth)
        if kind == "if":
            return self.if_stmt(depth)
        return self.for_stmt(depth)

    def stmts(self, depth: int) -> tuple:
        count = self.int(1, 4 if depth == 0 else 3)
        out = []
        for _ in range(count):
            if self.stmt_budget <= 0:
                break
            s = self.stmt(depth)
            out.extend(s if isinstance(s, tuple) else (s,))
        return tuple(out)

    def collective(self) -> Collective:
        dt = self.weighted([(3, F32), (1, I32), (1, U32)])
        op = self.weighted([(2, Reduce.SUM), (1, Reduce.MAX), (1, Reduce.MIN)])
        name = self.fresh("r")
        if dt is F32 and self.maybe(50):
            value = self.ordinary(2)          # finite values of mixed magnitude: the order shows
        else:
            value = self.expr(dt, self.int(0, 2))
        self.vtypes[name] = dt
        self.defined.add(name)
        return Collective(name, op, value)

    def sink(self, out: _Output) -> Optional[Store]:
        """One store of a hash of every variable still defined: a wrong value anywhere shows."""
        h = None
        for v in sorted(self.defined - self.loopvars):
            if not self.maybe(85):
                continue
            dt = self.vtypes[v]
            x = var(v, dt)
            term = self.canonical_bitcast(x, U32) if dt is F32 else cast(x, U32)
            h = term if h is None else binary(Op.XOR, h * const(16777619, U32), term)
        if h is None:
            return None
        return Store(out.name, self.out_address(out, 0, self.g(), self.t(), self.b()), h)

    def epilogue(self) -> list:
        """Stores that make values computed so far observable."""
        out = []
        top = sorted(v for v in self.defined if v not in self.loopvars)
        # collective results first: a wrong reduction shows in every thread's copy
        top = [v for v in top if v.startswith("r")] + [v for v in top if not v.startswith("r")]
        for _ in range(self.int(1, 4)):
            if not top:
                break
            v = top.pop(self.int(0, len(top) - 1))
            slots = [(o, j) for o in self.outputs for j in range(o.slots) if (o, j) not in self.exchange]
            if not slots:
                break
            o, j = self.pick_slot(slots)
            value = self.store_value(var(v, self.vtypes[v]), o.dtype)
            out.append(Store(o.name, self.out_address(o, j, self.g(), self.t(), self.b()), value))
        return out


def _kernel(draw, n: int, block: int, max_stmts: int):
    gen = _Gen(draw, n, block)
    gen.stmt_budget = max_stmts
    big = 4 * gen.npad + 16
    # read-only inputs
    def profile():
        return gen.weighted([(3, "data"), (3, "finite"), (2, "special")])
    specs = [BufferSpec("x0", F32, big if gen.maybe(80) else gen.int(1, 40), profile())]
    if gen.maybe(60):   # an f32 input of ordinary values: where rounding differences show
        specs.append(BufferSpec("x1", F32, big if gen.maybe(80) else gen.int(1, 40), "finite"))
    for name, dt, pct in (("xi", I32, 60), ("xu", U32, 35), ("xb", BOOL, 25)):
        if gen.maybe(pct):
            specs.append(BufferSpec(name, dt, big if gen.maybe(70) else gen.int(1, 40), profile()))
    gen.inputs = specs
    if gen.maybe(35):
        gen.perm = BufferSpec("perm", I32, gen.npad, "perm")
    # outputs: always one f32 and one integer output, sometimes a bool one
    gen.outputs = [gen.make_output("y0", F32), gen.make_output("y1", gen.pick([I32, U32]))]
    if gen.maybe(20):
        gen.outputs.append(gen.make_output("y2", BOOL))
    if gen.maybe(25):
        gen.outputs.append(gen.make_output("y3", F32))
    # scalars and constants
    for name, dt, pct in (("sf", F32, 50), ("si", I32, 50), ("su", U32, 25)):
        if gen.maybe(pct):
            gen.scalars[name] = dt
    if gen.maybe(40):
        gen.consts["C0"] = gen.int(0, 5)
    # private arrays, declared at the top
    body = []
    inits = []
    for k in range(gen.weighted([(2, 0), (3, 1), (2, 2)])):
        dt = gen.weighted([(3, F32), (2, I32), (1, U32), (1, BOOL)])
        size = gen.int(1, 9)
        name = f"p{k}"
        size_e = const(size, I32)
        if gen.consts and gen.maybe(30):
            c = sorted(gen.consts)[0]
            size_e = param(c, I32) + const(size, I32)
            size += gen.consts[c]
        gen.privates.append(_Private(name, dt, size))
        body.append(Private(name, dt, size_e))
        if gen.maybe(70):         # fill it with per-thread values: for j in range(size): p[j] = f(j, g)
            inits.append((gen.privates[-1], size_e))
    for p, size_e in inits:
        j = gen.fresh("j")
        gen.loops.append(_Loop(j, 0, p.size - 1, True, False))
        gen.loopvars.add(j)
        gen.vtypes[j] = I32
        gen.defined.add(j)
        value = gen.expr(p.dtype, 1)
        if gen.maybe(80):        # distinct in every thread and element: layouts cannot be confused
            mix = var(j, I32) * 7 + gen.g()
            if p.dtype is BOOL:
                value = binary(Op.XOR, value, binary(Op.EQ, binary(Op.AND, mix, gen.ci(1)), gen.ci(0)))
            else:
                value = binary(Op.ADD, value, cast(mix, p.dtype))
        gen.defined.discard(j)
        gen.loops.pop()
        body.append(For(j, const(0, I32), size_e, const(1, I32), (PStore(p.name, var(j, I32), value),)))
    # phases separated by collectives
    ncoll = gen.weighted([(2, 0), (4, 1), (2, 2), (1, 3)])
    for phase in range(ncoll + 1):
        gen.phase = phase
        gen.exchange = set()
        if phase > 0:
            for o in gen.outputs:
                for j in range(o.slots):
                    if gen.maybe(35):
                        gen.exchange.add((o, j))
        body.extend(gen.stmts(0))
        if phase < ncoll:
            body.append(gen.collective())
    body.extend(gen.epilogue())
    if gen.maybe(90):
        sink = gen.make_output("ys", U32)
        sink.slots, sink.interleaved, sink.forms = 1, False, sink.forms[:1]
        st_ = gen.sink(sink)
        if st_ is not None:
            gen.outputs.append(sink)
            body.append(st_)
    out_specs = [gen._out_spec(o) for o in gen.outputs]
    buffers = specs + ([gen.perm] if gen.perm is not None else []) + out_specs
    params = [Param(b.name, ParamKind.BUFFER, b.dtype) for b in buffers]
    params += [Param(n_, ParamKind.SCALAR, dt) for n_, dt in gen.scalars.items()]
    params += [Param(n_, ParamKind.CONST, I32) for n_ in gen.consts]
    order = draw(st.permutations(range(len(params))))
    params = [params[i] for i in order]
    kernel = Kernel("fz", tuple(params), tuple(body), block)
    return kernel, buffers, dict(gen.scalars), dict(gen.consts)


def _weighted_index(draw, weights) -> int:
    r = draw(st.integers(0, sum(weights) - 1))
    for i, w in enumerate(weights):
        if r < w:
            return i
        r -= w
    return len(weights) - 1


def scalar_values(dt: DType):
    if dt is F32:
        return st.one_of(st.sampled_from(SPECIAL_F32), st.floats(width=32)).map(np.float32)
    if dt is I32:
        return st.one_of(st.sampled_from(SPECIAL_I32), st.integers(-(2 ** 31), 2 ** 31 - 1)).map(np.int32)
    return st.one_of(st.sampled_from(SPECIAL_U32), st.integers(0, 2 ** 32 - 1)).map(np.uint32)


@st.composite
def cases(draw, max_stmts: int = 16, sizes=LAUNCH_SIZES, blocks=BLOCKS):
    """A random, valid, well-defined launch (see the module docstring)."""
    n = sizes[_weighted_index(draw, [3, 3, 1, 2, 1, 1, 1, 1][:len(sizes)] + [1] * (len(sizes) - 8))]
    block = draw(st.sampled_from(blocks))
    kernel, buffers, scalar_types, consts = _kernel(draw, n, block, max_stmts)
    scalars = {name: draw(scalar_values(dt)) for name, dt in scalar_types.items()}
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return Case(kernel, n, consts, tuple(buffers), scalars, seed)


def kernels(**kw):
    """Just the kernels (for serializer and printer tests)."""
    return cases(**kw).map(lambda c: c.kernel)

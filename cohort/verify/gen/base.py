"""The generator's core: choices (steered), literals, leaves and expressions.

`Core` holds what is defined where while one kernel is built; the index forms
(`index.Indices`), statements (`stmts.Statements`) and coverage plants
(`plant.Plants`) are mixins over it, put together in `build.KernelBuilder`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional

from ...refimpl import mathlib
from ...refimpl.ir import (
    DType,
    Expr,
    Op,
    binary,
    bitcast,
    builtin,
    cast,
    const,
    fma,
    load,
    math,
    param,
    pload,
    select,
    unary,
    var,
)
from .case import EDGY_FILLS, BufferSpec

F32, I32, U32, BOOL = DType.F32, DType.I32, DType.U32, DType.BOOL

MATH_FUNCTIONS = tuple(sorted(mathlib.FUNCTIONS))
SPECIAL_F32 = (0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.0, float("nan"), float("inf"), float("-inf"),
               1e-45, -1e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 3.4028235e38, -3.4028235e38,
               1e30, -1e30, 2147483648.0, -2147483904.0, 4294967296.0, 16777217.0, 88.72, -103.9,
               3.1415927, 1e-7, 65504.0, 0.1)
SPECIAL_I32 = (0, 1, -1, 2, 3, 7, 31, 32, -7, 255, 65535, 1 << 30, -(2 ** 31), 2 ** 31 - 1, -2, 100)
SPECIAL_U32 = (0, 1, 2, 3, 7, 31, 32, 255, 2 ** 31, 2 ** 32 - 1, 0x7FFFFFFF, 0x80000001, 100)
DIVISORS = {I32: (1, 2, 3, -1, 7, -3, 8, 16, 32, 5), U32: (1, 2, 3, 7, 8, 16, 32, 5, 2 ** 31)}
MASK31 = 0x7FFFFFFF
# operation families for swarm focus (draw_focus)
FAMILIES = {
    "arith": ("op:ADD", "op:SUB", "op:MUL"),
    "divmod": ("op:DIV", "op:MOD"),
    "minmax": ("op:MIN", "op:MAX"),
    "bitwise": ("op:AND", "op:OR", "op:XOR", "op:NOT"),
    "shift": ("op:SHL", "op:SHR"),
    "compare": ("op:LT", "op:LE", "op:GT", "op:GE", "op:EQ", "op:NE"),
    "unary": ("op:NEG", "op:ABS", "op:SQRT"),
    "convert": ("op:CAST", "op:BITCAST"),
    "select": ("op:SELECT",),
    "math": tuple(f"math:{f}" for f in MATH_FUNCTIONS),
    "builtin": ("op:GLOBAL_ID", "op:THREAD_ID", "op:BLOCK_ID", "op:BLOCK_SIZE", "op:NUM_THREADS", "op:BUFLEN"),
    "memory": ("op:LOAD", "op:PLOAD", "structure:read:own-slot", "structure:store:read-modify-write"),
    "collective": ("statement:Collective", "structure:collective:block_sum", "structure:collective:block_max",
                   "structure:collective:block_min"),
}
FOCUS_BOOST = 4
# names a kernel must not take: the frontend's `from cohort import *` binds them
RESERVED = frozenset({"f32", "i32", "u32", "exp", "log", "erf", "tanh", "sigmoid", "sin", "cos", "sqrt",
                      "private", "bitcast", "kernel", "interpret", "INF", "NAN", "Buffer", "Const",
                      "shared", "barrier", "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_and",
                      "atomic_or", "atomic_xor"})


@dataclass
class RangedExpr:
    """An i32 expression with a known value range over active (and padded) threads."""
    expr: Expr
    lo: int
    hi: int


@dataclass
class LoopRecord:
    name: str
    lo: int
    hi: int
    uniform: bool
    unit: bool                # the loop variable is affine with stride 1 across lanes
    start: Optional[int] = None   # a literal start, else None
    step: Optional[int] = None    # a literal step, else None


@dataclass(eq=False)
class OutputLayout:
    name: str
    dtype: DType
    slots: int
    region: int               # M: every bijection is of [0, M)
    interleaved: bool         # address pi(g)*K + j, else pi_j(g) + j*M
    forms: list               # per slot (one entry if interleaved): (kind, parameters)
    fill: str = "data"
    offset: int = 0           # interleaved: the slots start this many elements into the buffer


@dataclass
class PrivateArray:
    name: str
    dtype: DType
    size: int


class Core:
    """Builds one kernel from a draw source; tracks what is defined where."""

    def __init__(self, source, n: int, block: int, steer=None):
        self.src = source
        self.steer = steer
        self.focus: dict = {}          # category -> multiplier: this program's swarm focus
        self.n, self.B = n, block
        self.threads = n       # threads that exist (boundary.py); whole blocks once the kernel is cooperative
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
        self.if_depth = 0              # enclosing ifs, currently
        self.slot_uses = Counter()     # (output, slot) -> stores generated so far
        self.outer_defined: set = set()   # defined where the outermost enclosing statement starts
        self.stored_at: list = []      # (output, slot) stored in this straight-line run (read-backs)
        self.shapes: set = set()       # rare shapes made (steer.SHAPES, without the `shape:` prefix)

    # ------------------------------------------------------------ choices
    def int(self, lo: int, hi: int) -> int:
        return self.src.integer(lo, hi)

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

    def boost(self, *categories) -> int:
        """The weight multiplier for choices that exercise these coverage categories: the
        program's focus (swarm) times the steering's (1 for neither)."""
        if not categories or (self.steer is None and not self.focus):
            return 1
        steer = self.steer.boost if self.steer is not None else (lambda c: 1)
        return max(steer(c) * self.focus.get(c, 1) for c in categories)

    def draw_focus(self):
        """Swarm testing (Groce et al., ISSTA 2012): each program emphasises a few operation
        families (FOCUS_BOOST times their usual weight), so that across a campaign every
        family gets programs dense in it, where a uniform mix would dilute each."""
        count = self.weighted([(1, 0), (3, 1), (3, 2), (1, 3)])
        names = sorted(FAMILIES)
        for _ in range(count):
            for c in FAMILIES[names[self.int(0, len(names) - 1)]]:
                self.focus[c] = FOCUS_BOOST

    def focused(self, family: str) -> bool:
        return any(c in self.focus for c in FAMILIES[family])

    def aims(self, *shapes) -> list:
        """Of these rare shapes (steer.SHAPES), the ones the steering says the campaign has not
        made yet: the generator then makes one on purpose (an absolute choice, not a weight: at
        a campaign's start every category is missing and weights alone would change nothing)."""
        if self.steer is None:
            return []
        missing = set(self.steer.missing)
        return [s for s in shapes if f"shape:{s}" in missing]

    def aim(self, *shapes):
        """One of the missing shapes among `shapes` (steer.SHAPE_WEIGHTS: the rarest by chance
        likelier), or None."""
        from .steer import FORM_TIMES, SHAPE_FORMS, SHAPE_WEIGHTS, UNMADE_BOOST
        missing = self.aims(*shapes)
        # never made before made once (a shape counts as covered after two programs): every shape
        # first within 30 steered programs (tests/test_gen_shapes.py)
        missing = [s for s in missing if self.steer.boost(f"shape:{s}") >= UNMADE_BOOST] or missing
        missing = sorted(missing, key=lambda s: -SHAPE_WEIGHTS.get(s, 1))   # (Hypothesis: the first)

        def weight(s):
            # a shape of several forms needs FORM_TIMES programs a form, the others about two:
            # aimed at in proportion to the programs it still needs (six spellings drawn at a
            # one-past shape's share were made about once in 40 programs: docs/fuzzing.md)
            forms = SHAPE_FORMS.get(s, ())
            left = FORM_TIMES * len(forms) - self.steer.times_made(f"shape:{s}") if forms else 2
            return SHAPE_WEIGHTS.get(s, 1) * max(1, left) // 2
        return self.weighted([(max(1, weight(s)), s) for s in missing]) if missing else None

    def sw(self, weight: int, *categories) -> int:
        """A table weight, steered."""
        return weight * self.boost(*categories) if weight > 0 else 0

    def pick_op(self, ops):
        """One of `ops`, uniformly unsteered; steered towards ops a campaign has not seen."""
        return self.weighted([(self.boost(f"op:{op.name}"), op) for op in ops])

    def fresh(self, prefix: str) -> str:
        while True:
            self.counter += 1
            name = f"{prefix}{self.counter}"
            if name not in RESERVED:
                return name

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
            return const(self.src.f32_any(), F32)
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
        builtins = (Op.GLOBAL_ID, Op.THREAD_ID, Op.BLOCK_ID, Op.BLOCK_SIZE, Op.NUM_THREADS, Op.BUFLEN)
        if dt is I32:
            table.append((self.sw(3, *(f"op:{o.name}" for o in builtins)), "builtin"))
            table.append((2 if self.consts else 0, "constparam"))
        deep = self.nest >= 2            # an index inside an index inside an index: no more loads
        ins = [b for b in self.inputs if b.dtype.compute is dt]     # f16/bf16 inputs load as f32
        table.append((self.sw(5, "op:LOAD") if ins and not deep else 0, "load"))
        pv = [p for p in self.privates if p.dtype is dt]
        table.append((self.sw(3, "op:PLOAD") if pv and not deep else 0, "pload"))
        outs = [o for o in self.outputs if o.dtype is dt]
        table.append((self.sw(1, "structure:read:own-slot") if outs and not deep else 0, "own"))
        ex = [(o, j) for o, j in sorted(self.exchange, key=lambda x: (x[0].name, x[1])) if o.dtype is dt]
        table.append((self.sw(3, "structure:read:neighbour") if ex and not deep else 0, "exchange"))
        kind = self.weighted(table)
        if kind == "literal":
            return self.literal(dt)
        if kind == "var":
            return var(self.pick(vs), dt)
        if kind == "scalar":
            return param(self.pick(sc), dt)
        if kind == "builtin":
            op = self.pick_op(builtins)
            if op is Op.BUFLEN:
                names = [b.name for b in self.inputs] + [o.name for o in self.outputs]
                return builtin(op, self.pick(names))
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
        # one span per expression node: the shrinker can then replace a node by a
        # sub-expression (pass_to_descendant) or drop it whole
        return self.src.span(self._expr, dt, depth)

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
            return const(self.src.f32_between(-1000.0, 1000.0), F32)
        return self.expr(F32, d - 1)

    def special(self, d: int) -> Expr:
        """An f32 value that is often NaN, ±inf or ±0."""
        sp = [b for b in self.inputs if b.dtype is F32 and b.fill in EDGY_FILLS and self.nest < 2]
        how = self.weighted([(3 if sp else 0, "load"), (2, "literal"), (1, "sqrt")])
        if how == "load":
            buf = self.pick(sp)
            return load(buf.name, self.in_index(buf), F32)
        if how == "literal":
            return const(self.pick([float("nan"), float("inf"), float("-inf"), -0.0, 0.0]), F32)
        return unary(Op.SQRT, self.expr(F32, d - 1))        # NaN for negative inputs

    def lane_special(self, d: int) -> Expr:
        """Like `special`, but differing from lane to lane and opaque to the optimiser: a
        load at g·k + c from a NaN/zero-rich f32 input, or else an integer input's bits as
        f32 (negative small integers are NaNs, 0 is +0, INT_MIN is -0). Values LLVM can
        classify (sqrt(v), v·0.0) let it fold correctly, and a uniform index shows every
        lane the same element."""
        fs = [b for b in self.inputs if b.dtype is F32 and b.fill in EDGY_FILLS and self.nest < 2]
        ints = [b for b in self.inputs if b.dtype in (I32, U32) and self.nest < 2]
        if not (fs or ints) or self.maybe(15):
            return self.special(d)
        buf = self.pick(fs or ints)
        at = self.forced(self.g() * self.ci(self.int(1, 3)) + self.ci(self.int(0, 9)), buf.name, buf.length)
        v = load(buf.name, at, buf.dtype)
        return v if buf.dtype is F32 else bitcast(v, F32)

    def math_allowed(self) -> bool:
        return self.math_budget > 0 and self.node_budget > 25 * self.weight

    def fexpr(self, d: int) -> Expr:
        sw, mathcats = self.sw, [f"math:{f}" for f in MATH_FUNCTIONS]
        kind = self.weighted([(4, "leaf"), (sw(6, "op:ADD", "op:SUB", "op:MUL", "op:DIV", "op:MIN", "op:MAX"),
                                           "binary"),
                              (sw(4, "op:FMA"), "fma"), (sw(2, "op:MIN", "op:MAX"), "minmax"),
                              (sw(3, "op:MIN", "op:MAX"), "minmax_nest"),
                              (sw(2, "op:NEG", "op:ABS", "op:SQRT"), "unary"),
                              (sw(2, *mathcats) if self.math_allowed() else 0, "math"),
                              (sw(2, "op:SELECT"), "select"), (sw(1, "op:CAST"), "cast"),
                              (sw(1, "op:BITCAST"), "bitcast")])
        sub = lambda: self.expr(F32, d - 1)
        if kind == "leaf":
            return self.leaf(F32)
        if kind == "binary":
            op = self.pick_op([Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX])
            return binary(op, sub(), sub())
        if kind == "fma":   # a multiply feeding an add: where FMA contraction would change bits
            a, b, c = self.ordinary(d), self.ordinary(d), self.ordinary(d)
            # and the named, fused op (always, while the steering misses it)
            shape = "fma" if self.boost("op:FMA") > 1 else self.pick(["a*b+c", "c+a*b", "a*b-c", "c-a*b", "fma"])
            ab = binary(Op.MUL, a, b)
            return {"a*b+c": lambda: ab + c, "c+a*b": lambda: c + ab, "a*b-c": lambda: ab - c,
                    "c-a*b": lambda: c - ab, "fma": lambda: fma(a, b, c)}[shape]()
        if kind == "minmax":  # with NaN, ±0 and ±inf operands: where the operand order matters
            a, b = self.special(d), sub()
            if self.maybe(50):
                a, b = b, a
            return binary(self.pick_op([Op.MIN, Op.MAX]), a, b)
        if kind == "minmax_nest":
            return self.minmax_nest(d, sub)
        if kind == "unary":
            return unary(self.pick_op([Op.NEG, Op.ABS, Op.SQRT]), sub())
        if kind == "math":              # a math function inlines a few dozen operations
            return self.math_call(sub)
        if kind == "select":
            return select(self.expr(BOOL, d - 1), sub(), sub())
        if kind == "cast":
            return cast(self.expr(self.pick([I32, U32, BOOL]), d - 1), F32)
        return bitcast(self.expr(self.pick([I32, U32]), d - 1), F32)

    def minmax_nest(self, d: int, sub) -> Expr:
        """min/max of a min/max that shares an operand with it (the same literal, load or
        variable: one value to LLVM), which an optimiser may fold as if min were commutative
        and idempotent. The contract's `a if a < b else b` differs from such a fold when the
        shared operand comes first inside and second outside, as in min(min(s, b), s), and
        s or b is NaN or a zero: that arrangement two times in three, the same op outside mostly.
        A NaN literal is no use as s (LLVM folds a compare with it away first), so a literal
        s is a zero or another edge value and b then often a NaN or zero from the inputs."""
        if self.maybe(60):
            s = const(self.pick([-0.0, 0.0, -0.0, 0.0, 1.0, -1.0, float("inf"), float("-inf")]), F32)
            b = self.lane_special(d) if self.maybe(85) else sub()
        else:
            s, b = self.lane_special(d), sub()
        op = self.pick_op([Op.MIN, Op.MAX])
        outer = op if self.maybe(80) else (Op.MAX if op is Op.MIN else Op.MIN)
        if self.maybe(65):
            return binary(outer, binary(op, s, b), s)
        inner = binary(op, *((s, b) if self.maybe(50) else (b, s)))
        return binary(outer, *((inner, s) if self.maybe(50) else (s, inner)))

    def math_call(self, operand) -> Expr:
        self.math_budget -= 1
        self.node_budget -= 25 * self.weight
        fn = self.weighted([(self.boost(f"math:{f}"), f) for f in MATH_FUNCTIONS])
        return math(fn, operand())

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
        sw = self.sw
        kind = self.weighted([(4, "leaf"), (sw(5, "op:ADD", "op:SUB", "op:MUL"), "arith"),
                              (sw(2, "op:DIV", "op:MOD"), "divmod"), (sw(1, "op:MIN", "op:MAX"), "minmax"),
                              (sw(2, "op:AND", "op:OR", "op:XOR"), "bitwise"), (sw(2, "op:SHL", "op:SHR"), "shift"),
                              (sw(1, "op:NEG", "op:NOT", "op:ABS"), "unary"), (sw(1, "op:SELECT"), "select"),
                              (sw(2, "op:CAST"), "castf"), (sw(1, "op:CAST"), "casti"),
                              (sw(1, "op:BITCAST"), "bitcastf")])
        sub = lambda: self.expr(dt, d - 1)
        if kind == "leaf":
            return self.leaf(dt)
        if kind == "arith":
            return binary(self.pick_op([Op.ADD, Op.SUB, Op.MUL]), sub(), sub())
        if kind == "divmod":
            return binary(self.pick_op([Op.DIV, Op.MOD]), sub(), self.safe_divisor(dt, d))
        if kind == "minmax":
            return binary(self.pick_op([Op.MIN, Op.MAX]), sub(), sub())
        if kind == "bitwise":
            return binary(self.pick_op([Op.AND, Op.OR, Op.XOR]), sub(), sub())
        if kind == "shift":
            return binary(self.pick_op([Op.SHL, Op.SHR]), sub(), self.shift_amount(dt, d))
        if kind == "unary":
            return unary(self.pick_op([Op.NEG, Op.NOT, Op.ABS]), sub())
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
        sw = self.sw
        kind = self.weighted([(2, "leaf"), (sw(6, "op:LT", "op:LE", "op:GT", "op:GE", "op:EQ", "op:NE"), "compare"),
                              (sw(2, "op:AND", "op:OR", "op:XOR"), "logic"), (sw(1, "op:NOT"), "not"),
                              (sw(1, "op:SELECT"), "select"), (sw(1, "op:CAST"), "cast")])
        if kind == "leaf":
            return self.leaf(BOOL)
        if kind == "compare":
            dt = self.number_type()
            op = self.pick_op([Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE])
            nan_side = dt is F32 and self.maybe(70 if self.focused("compare") else 35)
            a, b = self.expr(dt, d - 1), (self.special(d) if nan_side else self.expr(dt, d - 1))
            return binary(op, a, b) if self.maybe(50) else binary(op, b, a)   # NaN on either side
        if kind == "logic":
            op = self.pick_op([Op.AND, Op.OR, Op.XOR, Op.EQ, Op.NE])
            return binary(op, self.expr(BOOL, d - 1), self.expr(BOOL, d - 1))
        if kind == "not":
            return unary(Op.NOT, self.expr(BOOL, d - 1))
        if kind == "select":
            return select(self.expr(BOOL, d - 1), self.expr(BOOL, d - 1), self.expr(BOOL, d - 1))
        return cast(self.expr(self.number_type(), d - 1), BOOL)

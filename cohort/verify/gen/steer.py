"""Coverage categories and the steering built from them.

A *category* is one line of the fuzzer's coverage report, spelled as its gaps
are: `op:SHL`, `math:sin`, `statement:For`, `structure:for:nested`,
`access:load:gather`, `effect:masked`, `input:nan`. `categories(case)` lists the
static ones a program exercises (what `fuzz.Coverage.program` counts: ops, math
functions, statements, structure classes, special input values);
`variant_categories(record)` the access and effect modes one compiled variant
reported.

`Steering` is a frozen table of weight multipliers over categories, built from
a coverage report (`Steering.from_report(Coverage().report())`) or from a
counter of categories (`Steering.from_counts`): a category a campaign has never
seen gets MISSING_BOOST and is listed in `missing` (the generator then also
*plants* it, see plant.py), a rare one a smaller boost. The generator reads the
table through `boost(category)`; a Steering is immutable, so a program is a
pure function of (draws, steering):

    generate(seed, steer)  ==  generate(seed, steer)      # in any process

Campaign state (which programs finished first, which variants ran) decides the
steering, so it cannot be derived from a seed; each Case records the Steering
it was generated under (`case.steering`, `to_json`/`from_json` for a campaign
log), and `generate(seed, Steering.from_json(doc))` rebuilds the program.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Optional

import numpy as np

from ...refimpl import mathlib
from ...refimpl.ir import (
    STMTDEFS,
    Atomic,
    Barrier,
    Collective,
    For,
    If,
    Op,
    PStore,
    Shared,
    Store,
    stmt_exprs,
    walk_expr,
    walk_stmts,
)
from ...refimpl.ir import DType as _DType

# The classes a campaign should reach (fuzz.Coverage reports the ones it has not as gaps)
EXPECTED_ACCESS = ("load:uniform", "load:contiguous", "load:strided", "load:gather", "store:contiguous",
                   "store:scatter", "pload:contiguous", "pload:gather", "pstore:contiguous", "pstore:scatter",
                   "if:uniform", "if:divergent")
EXPECTED_EFFECTS = ("unmasked", "masked", "per-lane", "cohort", "thread", "branch")
EXPECTED_STRUCTURE = ("if:else", "if:nested", "for:uniform", "for:per-thread", "for:nested",
                      "private:uniform-index", "private:per-thread-index", "collective:block_sum",
                      "collective:block_max", "collective:block_min", "collective:f32", "collective:i32",
                      "collective:u32", "read:own-slot", "read:neighbour", "store:read-modify-write",
                      "barrier:top", "barrier:loop", "barrier:if", "atomic:global", "atomic:shared", "atomic:f32",
                      "shared:walk")
# Rare shapes the generator aims at on purpose (case.shapes, recorded by the generator): one-past
# programs of each bounds-proof rule (boundary.py; `guard-le`: a `<=` guard narrows the index,
# `loop-thread`: a loop up to a per-thread stop whose last thread takes the longest trip) and
# store groups built to look like another group under one slip (stmts.py; `unordered`: slot 0
# then the other slots out of order or one twice, `sign-slip`: a slot spelled with `- c` that
# reads as the next slot if the sign of c slips)
# `rmw:multi-task`: a program whose blocks are not idempotent (not_idempotent) on a launch of at
# least 3 whole blocks, where a pool task's edge can run a block twice or skip it
# `wrap:loop`: a load at (t + j) % k, j a uniform loop's variable from 0 by 1 (index.py): its
# lanes wrap inside a packet on most trips, which only a loop variable's right alignment sees
# `guard:loaded`: a loaded index behind guards (index.py guard_probe): proven when they bound it
# on both sides (bounds.py)
# `store:either-side`: an if/else storing to one buffer element on both sides (stmts.py
# either_side_probe), one store of a select in packet builds (lowering/stmts.py)
# `group:offset`: a store group whose slots start c elements into the buffer, its constants
# negative, zero or positive by slot (index.py offset_address): the group's base is its first
# slot's address, constant included
# `loop:const-var`: a uniform loop whose bounds are constants reached through top-level variables;
# `loop:prefix`: range(a*t + c, stop, step) whose stop the packet's lanes pass at different
# iterations, a, c and the step of either sign (index.py const_loop_probe, prefix_probe)
# `private:store-masked`: a private store with lanes off inside a packet, at a uniform or a per-thread
# index, read back (index.py private_probe; both layouts are variants)
# `past:guard-spelled`: a one-past guard spelled `not (i > K)`, `not (K < i)`, `K <= i`, ... (boundary.py)
# `storage:half`: f16 or bf16 stores (contiguous, masked, a pair) and a read-back (storage.py)
# `atomic:f32-edge`, `atomic:shared-edge`: f32 atomic min/max fed NaN and both zeros in chosen lanes,
# on a global buffer, or on shared bins under a condition that turns lanes off (coop.py
# coop_atomic_edges)
SHAPES = ("past:affine", "past:block", "past:guard", "past:guard-le", "past:guard-spelled", "past:loop",
          "past:loop-thread",
          "past:signed", "group:unordered", "group:sign-slip", "rmw:multi-task", "wrap:loop", "guard:loaded",
          "store:either-side", "atomic:f32-edge", "atomic:shared-edge", "group:offset", "loop:const-var",
          "loop:prefix", "private:store-masked", "storage:half")
# how much likelier a missing shape is aimed at than another missing one: about the inverse of
# its chance among one-past programs (boundary.py: the affine and block forms are 2 of 9 forms
# each, the guards 2 of 9 with `<=` in 2 of their 9 comparisons, the loops and the remainder 1
# of 9 each), so the rarest by chance come first
SHAPE_WEIGHTS = {"past:guard-le": 8, "past:guard-spelled": 8, "past:loop-thread": 4, "past:loop": 2, "past:signed": 2}
STATEMENTS = tuple(cls.__name__ for cls in STMTDEFS)
INPUTS = ("nan", "inf", "-0", "subnormal", "huge")


F32_ = _DType.F32


def not_idempotent(kernel) -> bool:
    """A store of a value read from its own address, or an atomic add, sub or xor of a global
    buffer: running a block twice changes the outputs."""
    from ...refimpl.ir import AtomicOp
    from ...refimpl.printer import format_expr
    shared = {s.name for s in kernel.body if isinstance(s, Shared)}
    twice = (AtomicOp.ADD, AtomicOp.SUB, AtomicOp.XOR)
    return any(isinstance(s, Atomic) and s.target not in shared and s.op in twice
               or isinstance(s, Store) and any(n.op is Op.LOAD and n.arg == s.buf
                                               and format_expr(n.src[0]) == format_expr(s.index)
                                               for n in walk_expr(s.value))
               for s in walk_stmts(kernel.body))


def all_categories() -> tuple:
    """Every category a campaign is expected to reach (the universe of its gaps)."""
    out = [f"op:{op.name}" for op in sorted(Op, key=lambda o: o.name) if op is not Op.ARG]
    out += [f"math:{f}" for f in sorted(mathlib.FUNCTIONS)]
    out += [f"statement:{s}" for s in STATEMENTS]
    out += [f"structure:{s}" for s in EXPECTED_STRUCTURE]
    out += [f"access:{a}" for a in EXPECTED_ACCESS]
    out += [f"effect:{e}" for e in EXPECTED_EFFECTS]
    out += [f"input:{i}" for i in INPUTS]
    out += [f"shape:{s}" for s in SHAPES]
    return tuple(out)


# ---------------------------------------------------------------- what a program exercises

def _reads_own(load_node) -> bool:
    """A load of an output at the thread's own slot (no neighbour arithmetic in the index)."""
    return not any(x.op is Op.MOD and x.src[0].op is Op.ADD and x.src[0].src[0].op is Op.THREAD_ID
                   for x in walk_expr(load_node.src[0]))


def structure_of(kernel, consts: dict) -> set:
    """The structure classes of a kernel (after specialisation, shapes at 8 lanes)."""
    from ...backend import inject
    from ...backend.lowering.transposed import transposable
    from ...backend.shapes import ShapeAnalysis, classify
    from ...refimpl.specialize import specialize
    sk = specialize(kernel, consts)
    # shaped as a build made now would shape it (a campaign's planted bugs included), as
    # the lowering's analysis does for that build
    bugs = inject.key()
    shapes = ShapeAnalysis(sk, 8, bugs)
    facts = set()
    stored = {s.buf for s in walk_stmts(sk.body) if isinstance(s, Store)}
    shared = {s.name for s in sk.body if isinstance(s, Shared)}

    def visit(body, if_depth, loop_depth):
        for s in body:
            if isinstance(s, If):
                if s.orelse:
                    facts.add("if:else")
                if if_depth:
                    facts.add("if:nested")
                visit(s.then, if_depth + 1, loop_depth)
                visit(s.orelse, if_depth + 1, loop_depth)
            elif isinstance(s, For):
                u = shapes.shape(s.start).uniform and shapes.shape(s.stop).uniform
                facts.add("for:uniform" if u else "for:per-thread")
                if u and transposable(s, lambda i: classify(shapes.shape(i), False, bugs).kind not in ("uniform", "contiguous")):
                    facts.add("shared:walk")       # read through a transposing prologue (lowering/transposed.py)
                if loop_depth:
                    facts.add("for:nested")
                visit(s.body, if_depth, loop_depth + 1)
            elif isinstance(s, Collective):
                facts.add(f"collective:{s.op.value}")
                facts.add(f"collective:{s.value.dtype.value}")
            elif isinstance(s, Barrier):
                facts.add("barrier:loop" if loop_depth else "barrier:if" if if_depth else "barrier:top")
            elif isinstance(s, Atomic):
                facts.add("atomic:shared" if s.target in shared else "atomic:global")
                if s.value.dtype is F32_:
                    facts.add("atomic:f32")
            elif isinstance(s, PStore):
                facts.add("private:" + ("uniform-index" if shapes.shape(s.index).uniform else "per-thread-index"))
            elif isinstance(s, Store):
                if any(n.op is Op.LOAD and n.arg == s.buf for n in walk_expr(s.value)):
                    facts.add("store:read-modify-write")
            for e in stmt_exprs(s):
                for node in walk_expr(e):
                    if node.op is Op.PLOAD:
                        facts.add("private:" + ("uniform-index" if shapes.shape(node.src[0]).uniform
                                                else "per-thread-index"))
                    if node.op is Op.LOAD and node.arg in stored:
                        facts.add("read:own-slot" if _reads_own(node) else "read:neighbour")
    visit(sk.body, 0, 0)
    return facts


def input_categories(case) -> set:
    from .inputs import make_args
    args = make_args(case)
    found = set()
    for b in case.buffers:
        a = args[b.name]
        if a.dtype == np.float32 and a.size:
            found |= {name for name, hit in (("nan", np.isnan(a).any()), ("inf", np.isinf(a).any()),
                                             ("-0", (a.view(np.uint32) == 0x80000000).any()),
                                             ("subnormal", ((a != 0) & (np.abs(a) < 1.17549435e-38)).any()),
                                             ("huge", (np.abs(a[np.isfinite(a)]) > 1e30).any())) if hit}
    return found


def categories(case) -> set:
    """The static coverage categories one program exercises (a program counts once per
    category, as fuzz.Coverage.program counts it)."""
    out = set()
    seen = set()
    for s in walk_stmts(case.kernel.body):
        out.add(f"statement:{type(s).__name__}")
        for e in stmt_exprs(s):
            for node in walk_expr(e, seen):
                out.add(f"op:{node.op.name}")
                if node.op is Op.MATH:
                    out.add(f"math:{node.arg}")
    out |= {f"structure:{f}" for f in structure_of(case.kernel, case.consts)}
    out |= {f"input:{i}" for i in input_categories(case)}
    out |= {f"shape:{s}" for s in getattr(case, "shapes", ())}
    return out


def variant_categories(record: dict) -> Counter:
    """Access and effect modes one variant run reported (fuzz.run_variant's record)."""
    c = Counter()
    for k, v in record.get("access", {}).items():
        c[f"access:{k}"] += v
    for k, v in record.get("effects", {}).items():
        c[f"effect:{k}"] += v
    return c


# ---------------------------------------------------------------- steering

MISSING_BOOST = 8          # never seen: and planted
SHAPE_TIMES = 2            # a rare shape (SHAPES) counts as missing until made this many times (one
                           # program of a shape may miss a bug of it: 3 of 5 sign-slip groups caught one)
# Shapes made of several forms that each take a path of their own (six guard spellings, the proof
# reading each one differently; NaN or both zeros into an atomic min or max): missing until made
# about once per form. One program of `past:guard-spelled` has one spelling, and two programs
# left the spelling bounds_not_flip needs unmade on two of three campaign seeds (docs/fuzzing.md).
SHAPE_TIMES_BY = {"past:guard-spelled": 6, "atomic:f32-edge": 4, "atomic:shared-edge": 4}
# The forms of a shape the generator records one by one (`shape:<shape>:<form>`, counted like any
# shape but outside the universe): the shape stays missing until each form was made FORM_TIMES
# times, and the generator makes the least-made forms first (boundary.py). Drawn
# from a window of three spellings, `not (K < i)` was left unmade by every program of the shape
# on one campaign seed in three, and the plant that misreads it went uncaught (docs/fuzzing.md).
SHAPE_FORMS = {"past:guard-spelled": ("not_gt", "not_lt_flip", "not_le_flip", "lt_flip", "le_flip", "not_lt")}
FORM_TIMES = 2             # each form, as SHAPE_TIMES for a shape (one program of a form may miss its bug);
                           # a shape of forms ends its aim at FORM_TIMES programs a form, not SHAPE_CAP
# The lowering path each probe shape exists for (a key of the compiled kernel's lowering_counts,
# counted by fuzz.Coverage in variant runs that took it): the shape stays missing until PATH_TIMES
# variant runs have taken its path, not just until programs made it, because a program of the
# shape can reach no variant that takes the path (a store group fuses in packet builds only, the
# per-register masked-store dispatch is a drawn lowering switch, a prefix loop needs a
# full-packet build). SHAPE_CAP programs of a shape end its aim whatever the count, so a path
# the drawn variants rarely take cannot hold every program. Several paths: each of them (the
# either-side probe's unfused pair is two masked stores whose masks leave a register's first
# lane off and others on, what the per-register dispatch branches on, drawn per program).
PATHS = {"store:either-side": ("either_side_stores", "masked_store_dispatch"),
         "group:offset": "interleaved_offset_stores",
         "loop:prefix": "prefix_loops", "loop:const-var": "constant_trips_var",
         "private:store-masked": "private_masked_side_by_side", "atomic:f32-edge": "f32_atomic_minmax",
         "atomic:shared-edge": "shared_atomic_masked"}
PATH_TIMES = 4
SHAPE_CAP = 8
UNMADE_BOOST = 16          # a rare shape never made: aimed at before the ones made once (base.Core.aim)
RARE_BOOSTS = ((1 / 16, 4), (1 / 4, 2))    # seen, but in under 1/16 (1/4) of the group's median count


@dataclass(frozen=True)
class Steering:
    """Weight multipliers over coverage categories (absent: 1), and the never-seen ones."""
    boosts: tuple = ()         # ((category, multiplier), ...), sorted
    missing: tuple = ()        # categories with no count at all, sorted
    made: tuple = ()           # ((shape category, programs), ...) of the missing shapes made at least once
                               # (and of their forms, SHAPE_FORMS)
    _table: dict = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "_table", dict(self.boosts))

    def boost(self, category: str) -> int:
        return self._table.get(category, 1)

    def times_made(self, category: str) -> int:
        """How many programs made this missing shape so far (a shape of several forms makes the
        next ones first: boundary.py's guard spellings)."""
        return dict(self.made).get(category, 0)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], universe=None) -> "Steering":
        """From a counter over categories (programs or variant runs per category)."""
        universe = tuple(universe) if universe is not None else all_categories()
        groups: dict = {}
        for c in universe:
            groups.setdefault(_group(c), []).append(c)
        boosts, missing, made = {}, [], []
        for members in groups.values():
            seen = sorted(counts.get(c, 0) for c in members if counts.get(c, 0) > 0)
            median = seen[len(seen) // 2] if seen else 0
            for c in members:
                n = counts.get(c, 0)
                if n <= 0 or c.startswith("shape:") and not shape_covered(c[6:], n, counts):
                    boosts[c] = UNMADE_BOOST if c.startswith("shape:") and n <= 0 else MISSING_BOOST
                    missing.append(c)
                    if n > 0:
                        made.append((c, int(n)))
                    made += [(f"{c}:{f}", int(counts[f"{c}:{f}"])) for f in SHAPE_FORMS.get(c[6:], ())
                             if counts.get(f"{c}:{f}", 0) > 0]
                    continue
                for fraction, mult in RARE_BOOSTS:
                    if n < fraction * median:
                        boosts[c] = mult
                        break
        return cls(tuple(sorted(boosts.items())), tuple(sorted(missing)), tuple(sorted(made)))

    @classmethod
    def from_report(cls, report: dict) -> "Steering":
        """From fuzz.Coverage.report()."""
        counts = {}
        for key, prefix in (("ops", "op"), ("math", "math"), ("statements", "statement"),
                            ("structure", "structure"), ("access_modes", "access"), ("effect_modes", "effect"),
                            ("inputs", "input"), ("shapes", "shape"), ("lowering", "lowering")):
            for name, n in report.get(key, {}).items():
                counts[f"{prefix}:{name}"] = n
        return cls.from_counts(counts)

    def to_json(self) -> dict:
        doc = {"boosts": dict(self.boosts), "missing": list(self.missing)}
        if self.made:
            doc["made"] = dict(self.made)
        return doc

    @classmethod
    def from_json(cls, doc: Optional[dict]) -> Optional["Steering"]:
        if doc is None:
            return None
        return cls(tuple(sorted((str(k), int(v)) for k, v in doc["boosts"].items())),
                   tuple(sorted(str(c) for c in doc["missing"])),
                   tuple(sorted((str(k), int(v)) for k, v in doc.get("made", {}).items())))

    def key(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        return f"steering: {len(self.missing)} missing, {len(self.boosts) - len(self.missing)} rare"


def shape_covered(shape: str, made: int, counts: Mapping[str, int]) -> bool:
    """Whether a rare shape made in `made` programs counts as covered: made SHAPE_TIMES times (more
    for a shape of several forms, SHAPE_TIMES_BY) and its lowering path (PATHS) taken in PATH_TIMES
    variant runs, or made SHAPE_CAP times."""
    forms = SHAPE_FORMS.get(shape, ())
    if made >= (FORM_TIMES * len(forms) if forms else SHAPE_CAP):
        return True
    paths = PATHS.get(shape, ())
    paths = (paths,) if isinstance(paths, str) else paths
    return made >= SHAPE_TIMES_BY.get(shape, SHAPE_TIMES) and all(
        counts.get(f"lowering:{p}", 0) >= PATH_TIMES for p in paths) and all(
        counts.get(f"shape:{shape}:{f}", 0) >= FORM_TIMES for f in forms)


def _group(category: str) -> str:
    head, _, rest = category.partition(":")
    if head in ("structure", "access"):
        return f"{head}:{rest.split(':')[0]}"
    return head

"""What a campaign has exercised: operations, math functions, statements,
structures, lane-claim kinds and effect modes, launches, special inputs; and
the gaps (what a campaign never reached)."""
from __future__ import annotations

from collections import Counter

import numpy as np

from ...refimpl.ir import For, If, Op, PStore, Store, Collective, stmt_exprs, walk_expr, walk_stmts
from ..gen import make_args


EXPECTED_ACCESS = ("load:uniform", "load:contiguous", "load:strided", "load:gather", "store:contiguous",
                   "store:scatter", "pload:contiguous", "pload:gather", "pstore:contiguous", "pstore:scatter",
                   "if:uniform", "if:divergent")
EXPECTED_EFFECTS = ("unmasked", "masked", "per-lane", "cohort", "thread", "branch")
EXPECTED_STRUCTURE = ("if:else", "if:nested", "for:uniform", "for:per-thread", "for:nested",
                      "private:uniform-index", "private:per-thread-index", "collective:block_sum",
                      "collective:block_max", "collective:block_min", "collective:f32", "collective:i32",
                      "collective:u32", "read:own-slot", "read:neighbour", "store:read-modify-write")


class Coverage:
    def __init__(self):
        self.ops, self.math, self.stmts, self.structure = Counter(), Counter(), Counter(), Counter()
        self.access, self.effects, self.launch, self.inputs = Counter(), Counter(), Counter(), Counter()
        self.lowering = Counter()

    def program(self, case):
        """Static facts of one program that ran (counted once per program)."""
        from ...backend.shapes import ShapeAnalysis
        from ...refimpl.specialize import specialize
        k = case.kernel
        seen = set()
        for s in walk_stmts(k.body):
            self.stmts[type(s).__name__] += 1
            for e in stmt_exprs(s):
                for node in walk_expr(e, seen):
                    self.ops[node.op.name] += 1
                    if node.op is Op.MATH:
                        self.math[node.arg] += 1
        self.launch[f"n={case.n}"] += 1
        self.launch[f"block={case.block}"] += 1
        sk = specialize(k, case.consts)
        shapes = ShapeAnalysis(sk, 8)
        facts = set()
        stored = {s.buf for s in walk_stmts(sk.body) if isinstance(s, Store)}

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
                    if loop_depth:
                        facts.add("for:nested")
                    visit(s.body, if_depth, loop_depth + 1)
                elif isinstance(s, Collective):
                    facts.add(f"collective:{s.op.value}")
                    facts.add(f"collective:{s.value.dtype.value}")
                elif isinstance(s, PStore):
                    facts.add("private:" + ("uniform-index" if shapes.shape(s.index).uniform else
                                            "per-thread-index"))
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
        for f in facts:
            self.structure[f] += 1
        args = make_args(case)
        found = set()
        for b in case.buffers:
            a = args[b.name]
            if a.dtype == np.float32 and a.size:
                found |= {name for name, hit in (("nan", np.isnan(a).any()), ("inf", np.isinf(a).any()),
                                                 ("-0", (a.view(np.uint32) == 0x80000000).any()),
                                                 ("subnormal", ((a != 0) & (np.abs(a) < 1.17549435e-38)).any()),
                                                 ("huge", (np.abs(a[np.isfinite(a)]) > 1e30).any())) if hit}
        for f in found:
            self.inputs[f] += 1

    def variant(self, rec: dict):
        for k, v in rec.get("access", {}).items():
            self.access[k] += v
        for k, v in rec.get("effects", {}).items():
            self.effects[k] += v
        for k in rec.get("lowering", {}):
            self.lowering[k] += 1          # variant runs whose code has at least one

    # ------------------------------------------------------------ as data (campaign state, workers)
    FIELDS = ("ops", "math", "stmts", "structure", "access", "effects", "launch", "inputs", "lowering")

    def counts(self) -> dict:
        """Every counter as plain JSON data ({field: {key: count}})."""
        return {f: dict(getattr(self, f)) for f in self.FIELDS if getattr(self, f)}

    def add(self, counts: dict) -> "Coverage":
        """Add counts (another Coverage's `counts()`, e.g. from a worker or a saved campaign)."""
        for f, c in counts.items():
            if f in self.FIELDS:
                getattr(self, f).update(c)
        return self

    def report(self) -> dict:
        all_ops = sorted(op.name for op in Op if op is not Op.ARG)
        from ...refimpl.mathlib import FUNCTIONS
        gaps = [f"op:{o}" for o in all_ops if not self.ops[o]]
        gaps += [f"math:{f}" for f in sorted(FUNCTIONS) if not self.math[f]]
        gaps += [f"statement:{s}" for s in ("Assign", "Store", "PStore", "Private", "If", "For", "Collective")
                 if not self.stmts[s]]
        gaps += [f"structure:{s}" for s in EXPECTED_STRUCTURE if not self.structure[s]]
        gaps += [f"access:{a}" for a in EXPECTED_ACCESS if not self.access[a]]
        gaps += [f"effect:{e}" for e in EXPECTED_EFFECTS if not self.effects[e]]
        gaps += [f"input:{i}" for i in ("nan", "inf", "-0", "subnormal", "huge") if not self.inputs[i]]
        srt = lambda c: dict(sorted(c.items()))
        return {"ops": {o: self.ops[o] for o in all_ops}, "math": srt(self.math), "statements": srt(self.stmts),
                "structure": srt(self.structure), "access_modes": srt(self.access),
                "effect_modes": srt(self.effects), "lowering": srt(self.lowering), "launch": srt(self.launch),
                "inputs": srt(self.inputs),
                "gaps": gaps}


def _reads_own(load_node) -> bool:
    """A load of an output at the thread's own slot (no neighbour arithmetic in the index)."""
    return not any(x.op is Op.MOD and x.src[0].op is Op.ADD and x.src[0].src[0].op is Op.THREAD_ID
                   for x in walk_expr(load_node.src[0]))



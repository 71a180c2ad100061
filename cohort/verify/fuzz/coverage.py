"""What a campaign has exercised: operations, math functions, statements,
structures, lane-claim kinds and effect modes, launches, special inputs; and
the gaps (what a campaign never reached)."""
from __future__ import annotations

from collections import Counter

from ...refimpl.ir import Op, stmt_exprs, walk_expr, walk_stmts
from ..gen.steer import (
    EXPECTED_ACCESS,
    EXPECTED_EFFECTS,
    EXPECTED_STRUCTURE,
    SHAPES,
    STATEMENTS,
    input_categories,
    structure_of,
)

# the categories a campaign should reach are the generator's (gen/steer.py): one list, so the
# gaps reported here and the steering that closes them cannot drift apart


class Coverage:
    def __init__(self):
        self.ops, self.math, self.stmts, self.structure = Counter(), Counter(), Counter(), Counter()
        self.access, self.effects, self.launch, self.inputs = Counter(), Counter(), Counter(), Counter()
        self.lowering, self.shapes = Counter(), Counter()

    def program(self, case):
        """Static facts of one program that ran (counted once per program)."""
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
        # the generator's own category extraction, so steering and this report agree
        for f in structure_of(k, case.consts):
            self.structure[f] += 1
        for f in input_categories(case):
            self.inputs[f] += 1
        for f in getattr(case, "shapes", ()):
            self.shapes[f] += 1

    def variant(self, rec: dict):
        for k, v in rec.get("access", {}).items():
            self.access[k] += v
        for k, v in rec.get("effects", {}).items():
            self.effects[k] += v
        lowering = rec.get("lowering", {})
        for k in lowering:
            # variant runs whose code has at least one; a run whose safe build fell back to its
            # checked twin ran none of its body's paths (the steering's PATHS must not count them)
            if "proof_fallback" not in lowering or k == "proof_fallback":
                self.lowering[k] += 1
        pool = rec.get("pool")
        if pool:                           # variant runs launched on the worker pool
            self.launch[f"pool:workers={pool['workers']}"] += 1
            if pool.get("partial_last_task"):
                self.launch["pool:partial_last_task"] += 1

    # ------------------------------------------------------------ as data (campaign state, workers)
    FIELDS = ("ops", "math", "stmts", "structure", "access", "effects", "launch", "inputs", "lowering", "shapes")

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
        gaps += [f"statement:{s}" for s in STATEMENTS if not self.stmts[s]]
        gaps += [f"structure:{s}" for s in EXPECTED_STRUCTURE if not self.structure[s]]
        gaps += [f"access:{a}" for a in EXPECTED_ACCESS if not self.access[a]]
        gaps += [f"effect:{e}" for e in EXPECTED_EFFECTS if not self.effects[e]]
        gaps += [f"input:{i}" for i in ("nan", "inf", "-0", "subnormal", "huge") if not self.inputs[i]]
        gaps += [f"shape:{s}" for s in SHAPES if not self.shapes[s]]
        srt = lambda c: dict(sorted(c.items()))
        return {"ops": {o: self.ops[o] for o in all_ops}, "math": srt(self.math), "statements": srt(self.stmts),
                "structure": srt(self.structure), "access_modes": srt(self.access),
                "effect_modes": srt(self.effects), "lowering": srt(self.lowering), "launch": srt(self.launch),
                "inputs": srt(self.inputs), "shapes": srt(self.shapes),
                "gaps": gaps}

"""How often generated programs reach the shapes issue 17 found missing, before and after.

Counts, over N programs (default 1,500) of each generator, the frequencies the
issue lists: per-thread loops with an affine start of stride other than 1 and
with steps below -1; output elements read back by the thread that just stored
them (after a store group, and at all); NaN, +0, -0 and ±inf among a
collective's active inputs, per collective kind, the lane positions (t mod 16)
where they sat, and block sums that are exactly -0.0; blocks of 64 and more;
bool buffers holding bytes other than 0 and 1; `%`, `//` and `>>` in index
expressions with a negative left operand in some thread; programs that went
through Python source and the frontend.

"before" is the generator as committed on a git revision (default 1a90b00, the
last commit before the generator became the `cohort.verify.gen` package:
`cohort/verify/generate.py` there), drawn the way campaigns drew it (Hypothesis
runs of 9, fixed seeds); "after" is this tree's `cases()` drawn the same way,
and `generate(seed)` for seeds 0..N-1. The dynamic counts run the interpreter
(an instrumented subclass) on every program.

    PYTHONPATH=. python benchmarks/gen_breadth.py [--programs 1500] [--before REV] [--json out.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cohort.refimpl.interpreter import Interpreter  # noqa: E402
from cohort.refimpl.ir import Collective, DType, For, Op, PStore, Store, stmt_exprs, walk_expr, walk_stmts  # noqa: E402
from cohort.refimpl.launch_check import check_args  # noqa: E402
from cohort.refimpl.printer import format_expr  # noqa: E402
from cohort.refimpl.specialize import specialize  # noqa: E402

BEFORE = "1a90b00"      # cohort/verify/generate.py before the split into cohort.verify.gen


# ---------------------------------------------------------------- drawing programs

def load_before(rev: str):
    """The generator module as committed at `rev` (imported inside cohort.verify)."""
    text = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:cohort/verify/generate.py"], check=True,
                          capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("cohort.verify._generate_before", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "cohort.verify"
    sys.modules[spec.name] = mod          # dataclasses look their module up
    exec(compile(text, f"<{rev}:cohort/verify/generate.py>", "exec"), mod.__dict__)
    return mod


def hypothesis_programs(strategy, count: int) -> list:
    from hypothesis import HealthCheck, given, seed, settings
    out, s = [], 0
    while len(out) < count:
        @settings(max_examples=9, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @seed(s)
        @given(strategy)
        def grab(case):
            out.append(case)
        grab()
        s += 1
    return out[:count]


# ---------------------------------------------------------------- static measures

def static_facts(case) -> set:
    from cohort.backend.shapes import ShapeAnalysis
    facts = set()
    k = specialize(case.kernel, case.consts)
    shapes = ShapeAnalysis(k, 8)
    for s in walk_stmts(k.body):
        if isinstance(s, For):
            start, stop = shapes.shape(s.start), shapes.shape(s.stop)
            if not (start.uniform and stop.uniform):
                facts.add("loop:per-thread")
                if start.stride not in (None, 0, 1):
                    facts.add("loop:affine-start-stride-not-1")
                if int(s.step.arg) < -1:
                    facts.add("loop:per-thread-step-below-minus-1")
                if abs(int(s.step.arg)) > 1:
                    facts.add("loop:per-thread-step-not-unit")
    if case.block >= 64:
        facts.add("block>=64")
    facts |= _read_backs(k.body)
    if getattr(case, "source", None):
        facts.add("frontend:source-path")
        if getattr(case, "source_check", None):
            facts.add("frontend:round-trip-mismatch")
    return facts


def _read_backs(body) -> set:
    """Loads of an output element the same thread stored earlier (same index text),
    in program order; 'after a group' when that store was one of >= 2 adjacent stores
    to the buffer."""
    found = set()
    stored = {}                          # (buf, index text) -> stored by a group?

    def visit(stmts):
        prev_buf, run = None, []
        for s in stmts:
            for e in stmt_exprs(s):
                for n in walk_expr(e):
                    if n.op is Op.LOAD:
                        hit = stored.get((n.arg, format_expr(n.src[0])))
                        if hit is not None:
                            found.add("readback:any")
                            if hit:
                                found.add("readback:after-store-group")
            if isinstance(s, Store):
                run = run + [s] if s.buf == prev_buf else [s]
                prev_buf = s.buf
                stored[(s.buf, format_expr(s.index))] = len(run) >= 2
                if len(run) >= 2:
                    for t in run:
                        stored[(t.buf, format_expr(t.index))] = True
            else:
                prev_buf, run = None, []
            for sub in (getattr(s, "then", ()), getattr(s, "orelse", ()), getattr(s, "body", ())):
                if sub and not isinstance(sub, str):
                    visit(sub)
    visit(body)
    return found


# ---------------------------------------------------------------- dynamic measures

class Probe(Interpreter):
    """The interpreter, noting collective inputs and the operands of index arithmetic."""

    def setup(self):
        self.notes = Counter()
        self.lanes = {}                  # (op, what) -> set of lane positions (t mod 16)
        self.index_nodes = set()
        for s in walk_stmts(self.k.body):
            roots = [s.index] if isinstance(s, (Store, PStore)) else []
            for e in stmt_exprs(s):
                roots += [n.src[0] for n in walk_expr(e) if n.op in (Op.LOAD, Op.PLOAD)]
            for r in roots:
                self.index_nodes |= {id(n) for n in walk_expr(r) if n.op in (Op.DIV, Op.MOD, Op.SHR)}

    def _ev(self, e, mask, memo):
        r = super()._ev(e, mask, memo)
        if id(e) in self.index_nodes and e.dtype is DType.I32:
            a = np.broadcast_to(np.asarray(self.ev(e.src[0], mask, memo)), self.gid.shape)
            if np.any(a[mask] < 0):
                self.notes[f"index:{e.op.name}:negative-operand"] += 1
        return r

    def collective(self, s: Collective, memo):
        dt = s.value.dtype
        v = self.full(self.ev(s.value, self.active, memo), dt)
        act = self.active
        kind = f"{s.op.value}:{dt.value}"
        if dt is DType.F32:
            bits = v.view(np.uint32)
            for what, hit in (("nan", np.isnan(v)), ("-0", bits == 0x80000000), ("+0", bits == 0),
                              ("inf", np.isinf(v))):
                hit = hit & act
                if hit.any():
                    self.notes[f"collective:{s.op.value}:{what}"] += 1
                    self.lanes.setdefault((s.op.value, what), set()).update((self.tid[hit] % 16).tolist())
        super().collective(s, memo)
        if dt is DType.F32 and s.op.value == "block_sum":
            res = self.env[s.name].reshape(self.nblocks, self.B)[:, 0]
            if np.any(res.view(np.uint32) == 0x80000000):
                self.notes["collective:block_sum:result-exactly-minus-0"] += 1
        self.notes[f"collective:{kind}"] += 1


def dynamic_facts(case, make_args) -> tuple:
    args = make_args(case)
    facts = set()
    for b in case.buffers:
        if b.dtype is DType.BOOL:
            raw = args[b.name].view(np.uint8)
            if np.any(raw > 1):
                facts.add("bool:bytes-other-than-0-1")
    k = specialize(case.kernel, case.consts)
    buffers, scalars = check_args(k, case.n, args)
    it = Probe(k, case.n, buffers, scalars)
    it.setup()
    try:
        it.run()
    except Exception as e:  # noqa: BLE001 - counted: a generator must not make these
        facts.add(f"interpreter-error:{type(e).__name__}")
    facts |= {k_ for k_ in it.notes}
    return facts, it.lanes


# ---------------------------------------------------------------- the table

ROWS = [
    ("loop:affine-start-stride-not-1", "per-thread loop, affine start of stride != 1"),
    ("loop:per-thread-step-below-minus-1", "per-thread loop with step < -1"),
    ("loop:per-thread-step-not-unit", "per-thread loop with |step| > 1"),
    ("readback:after-store-group", "store group read back by the storing thread"),
    ("readback:any", "any output element read back after its store"),
    ("collective:block_sum:nan", "block_sum input NaN in some lane"),
    ("collective:block_sum:-0", "block_sum input -0.0 in some lane"),
    ("collective:block_sum:+0", "block_sum input +0.0 in some lane"),
    ("collective:block_sum:result-exactly-minus-0", "block_sum result exactly -0.0"),
    ("collective:block_max:nan", "block_max input NaN in some lane"),
    ("collective:block_max:-0", "block_max input -0.0 in some lane"),
    ("collective:block_max:+0", "block_max input +0.0 in some lane"),
    ("collective:block_min:nan", "block_min input NaN in some lane"),
    ("collective:block_min:-0", "block_min input -0.0 in some lane"),
    ("collective:block_min:+0", "block_min input +0.0 in some lane"),
    ("block>=64", "block of 64 or more"),
    ("bool:bytes-other-than-0-1", "bool buffer holding bytes other than 0, 1"),
    ("index:MOD:negative-operand", "% in an index, negative dividend"),
    ("index:DIV:negative-operand", "// in an index, negative dividend"),
    ("index:SHR:negative-operand", ">> in an index, negative operand"),
    ("frontend:source-path", "program through Python source + frontend"),
    ("frontend:round-trip-mismatch", "frontend IR differs from generated IR"),
]


def measure(programs: list, make_args) -> dict:
    per = Counter()
    lanes = {}
    t0 = time.perf_counter()
    for case in programs:
        facts = static_facts(case)
        dyn, ln = dynamic_facts(case, make_args)
        for f in facts | dyn:
            per[f] += 1
        for key, pos in ln.items():
            lanes.setdefault(key, set()).update(pos)
    return {"programs": len(programs), "counts": dict(per), "seconds": round(time.perf_counter() - t0, 1),
            "lane_positions": {f"{op}:{what}": len(pos) for (op, what), pos in sorted(lanes.items())}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=1500)
    p.add_argument("--before", default=BEFORE, help="git revision of the generator to compare with")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    from cohort.verify import gen
    columns = {}
    before = load_before(a.before)
    progs = hypothesis_programs(before.cases(), a.programs)
    columns[f"before ({a.before}, cases)"] = measure(progs, before.make_args)
    progs = hypothesis_programs(gen.cases(), a.programs)
    columns["after (cases)"] = measure(progs, gen.make_args)
    progs = [gen.generate(s) for s in range(a.programs)]
    columns["after (generate)"] = measure(progs, gen.make_args)
    names = list(columns)
    print(f"{'programs with ... (percent of ' + str(a.programs) + ')':52}" + "".join(f"{n:>24}" for n in names))
    for key, label in ROWS:
        print(f"{label:52}" + "".join(f"{100 * columns[n]['counts'].get(key, 0) / a.programs:>23.1f}%"
                                      for n in names))
    errors = {n: {k: v for k, v in c["counts"].items() if k.startswith("interpreter-error")}
              for n, c in columns.items()}
    print("lane positions (t mod 16) that held NaN / -0 / +0 in some collective's input:")
    for op in ("block_sum", "block_max", "block_min"):
        for what in ("nan", "-0", "+0"):
            print(f"  {op + ' ' + what:50}" + "".join(f"{columns[n]['lane_positions'].get(f'{op}:{what}', 0):>21}/16"
                                                     for n in names))
    print("interpreter errors:", errors)
    print("seconds:", {n: c["seconds"] for n, c in columns.items()})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(columns, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Differential fuzzing campaigns: random kernels, every variant, against the interpreter.

A campaign draws cases from `generate.cases()` (Hypothesis, fixed seed) until
its time box ends. For each case:

1. the interpreter runs it (the reference). If the interpreter rejects the
   launch (out of bounds, conflict, race, ...) the case is *discarded* and
   counted - the generator is built so that this stays rare;
2. every variant of the knob matrix (DESIGN §5: lanes 1, 4, 8, 16 x
   full_packet x predicated x private; variants whose lanes exceed the block
   are skipped, and for a kernel without private arrays the `private` knob is
   not varied, since it cannot change the generated code) is compiled and
   checked: for packet variants the interpreter re-runs the compiled,
   specialised kernel with the backend's lane annotations checked; the native
   code runs on guarded copies of the inputs; outputs must be bit-identical
   (NaNs equal whatever their payload), guard bands intact, no native error;
3. outputs are binned by checksum (as YARPGen does): the reference's bin and
   the bins of the variants that disagree with it.

Any disagreement, annotation violation, guard-band hit, native error,
compiler error, crash or hang is a failure. Hypothesis then shrinks the case
against the failing variant that is cheapest to recompile (same failure
kind), and an IR-level reducer finishes the job (delete statements, replace
an `if` by a branch, a value by an operand, drop unused parameters), all
within a time budget; the minimal case is printed with its inputs seed and
variant, and written to the corpus as a replayable JSON case (`corpus.py`).

The time box covers generation: a case still running when it ends is
dropped (and counted), and shrinking a failure found in time may add up to
`shrink_seconds`. Ctrl-C ends a campaign early with a report.

fast_math variants are not in the matrix. Their contract is "within a stated
ulp bound per operator" (DESIGN §3), and no such bound exists for arbitrary
random programs: with reassociation and no-NaN/no-inf assumptions one
cancellation or one NaN input changes the result without limit (fast-math
flags even make a NaN operand poison, which may then reach an index). The
operator-level ulp checks belong to the operator tests, not to this fuzzer.

Compiles run in worker subprocesses (`python -m cohort.verify.fuzz --worker`):
an LLVM fatal error kills a worker, not the campaign (the variant is reported
as a crash and the worker restarted), a hang is killed after a timeout, and
workers are recycled after a number of compiles because every JIT compile
leaks memory (NOTES-llvmlite.md). With `jobs >= 2` the variants of a case are
split over several workers.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..refimpl.ir import (Assign, Collective, For, If, Kernel, Op, ParamKind, Private, PStore, Store,
                          stmt_exprs, walk_expr, walk_stmts)
from . import corpus as _corpus
from .gen import Case, make_args

KNOB_MATRIX = tuple(["whole"] + [f"lanes={l},full_packet={fp},predicated={pr},private={pv}"
                                 for l in (4, 8, 16) for fp in ("on", "off") for pr in ("on", "off")
                                 for pv in ("cohort", "thread")])
# The matrix runs interleave=auto (the default: as many packets side by side as lower as
# well as one). Two more variants pin the interleave knob at its ends: one packet at a time,
# and the whole cohort side by side ("max" = block // lanes for the case at hand).
INTERLEAVE_VARIANTS = ("lanes=8,full_packet=on,predicated=on,private=cohort,interleave=1",
                       "lanes=4,full_packet=off,predicated=on,private=cohort,interleave=max")
DEFAULT_VARIANTS = KNOB_MATRIX + INTERLEAVE_VARIANTS
FAILURE_STATUSES = ("mismatch", "annotation", "guard", "native_error", "compile_error", "crash", "timeout",
                    "reference_error", "specialise_mismatch")
FAST_MATH_NOTE = ("fast_math variants excluded: their contract is a per-operator ulp bound, and no bound "
                  "holds for arbitrary random programs (reassociation, no-NaN/no-inf assumptions)")
WORKER_TAG = "@@"


def short_name(variant) -> str:
    """lanes=..,full_packet=..,predicated=..,private=..[,interleave=..] (or `whole`): parseable, compact."""
    if variant.lanes == 1:
        return "whole"
    name = (f"lanes={variant.lanes},full_packet={'on' if variant.full_packet else 'off'},"
            f"predicated={'on' if variant.predicated else 'off'},private={variant.private}")
    interleave = getattr(variant, "interleave", "auto")
    return name if interleave == "auto" else f"{name},interleave={interleave}"


def variants_for(case: Case, matrix=DEFAULT_VARIANTS) -> list:
    """The matrix for this case: lanes <= block, private knob only if there are private arrays,
    interleave=max resolved to block // lanes (and dropped where it is 1: a duplicate)."""
    from ..backend.variant import parse_variant
    has_private = any(isinstance(s, Private) for s in case.kernel.body)
    out = []
    for spec in matrix:
        if "interleave=" in spec:
            lanes = parse_variant(spec.replace("interleave=max", "interleave=auto")).lanes
            if case.block // lanes < 2:       # one packet per cohort: the same code as auto
                continue
            spec = spec.replace("interleave=max", f"interleave={case.block // lanes}")
        v = parse_variant(spec)
        if v.lanes > case.block:
            continue
        if not has_private and v.lanes > 1 and v.private != "cohort":
            continue
        name = short_name(v)
        if name not in out:
            out.append(name)
    return out


# ---------------------------------------------------------------- one case, in this process

def _buffer_names(kernel) -> list:
    return [p.name for p in kernel.params if p.kind is ParamKind.BUFFER]


def outputs_checksum(kernel, buffers: dict) -> str:
    import hashlib
    from .checksum import canonical_bytes
    h = hashlib.sha256()
    for name in _buffer_names(kernel):
        h.update(name.encode() + b"\0")
        h.update(canonical_bytes(np.asarray(buffers[name])))
    return "sha256:" + h.hexdigest()[:32]


def reference(case: Case):
    """(buffers, None) or (None, (reason, message)) when the interpreter rejects the case."""
    from ..refimpl.errors import KernelError
    from ..refimpl.interpreter import KernelRuntimeError, interpret
    args = make_args(case)
    try:
        interpret(case.kernel, case.n, args, case.consts)
    except KernelRuntimeError as e:
        msg = str(e)
        reason = next((r for r in ("out of bounds", "write conflict", "races", "division by zero",
                                   "remainder by zero", "shift amount") if r in msg), "runtime error")
        return None, (reason, msg)
    except KernelError as e:
        return None, ("invalid kernel", str(e))
    return {name: args[name] for name in _buffer_names(case.kernel)}, None


def _annotation_summary(annotations: dict):
    access, effects = Counter(), Counter()
    for kind, name, acc, modes in annotations.values():
        if kind == "if":
            access["if:" + ("uniform" if acc is not None else "divergent")] += 1
        else:
            access[f"{kind}:{acc.kind if acc is not None else 'none'}"] += 1
        for m in modes:
            effects[m] += 1
    return dict(access), dict(effects)


def run_variant(case: Case, spec: str, ref: dict) -> dict:
    """Compile, check annotations, run natively on guarded buffers, compare. Never raises."""
    from ..backend.compiler import UnsupportedVariant, compile_kernel
    from ..backend.variant import parse_variant
    from ..refimpl.annotations import AnnotationChecker
    from ..refimpl.interpreter import KernelRuntimeError, interpret
    from .checksum import bitwise_equal, first_difference
    from .guard import GuardedSet

    rec = {"variant": spec, "status": "ok"}
    v = parse_variant(spec)
    t0 = time.perf_counter()
    try:
        ck = compile_kernel(case.kernel, case.consts, v, n=case.n)
    except UnsupportedVariant as e:
        return {**rec, "status": "unsupported", "detail": str(e)}
    except Exception as e:  # noqa: BLE001 - a compiler error is a finding
        return {**rec, "status": "compile_error", "detail": f"{type(e).__name__}: {e}"}
    rec["compile_seconds"] = round(time.perf_counter() - t0, 4)
    rec["access"], rec["effects"] = _annotation_summary(ck.annotations)
    rec["lowering"] = {k: int(v) for k, v in getattr(ck, "lowering_counts", {}).items()
                       if isinstance(v, (int, np.integer)) and v and k != "interleave"}
    if getattr(ck, "lowering_counts", {}).get("interleave", 1) > 1:
        rec["lowering"]["interleaved_packets"] = 1
    names = _buffer_names(case.kernel)

    # the interpreter on the very kernel object the backend lowered, checking its lane claims
    if ck.annotations:
        class Checker(AnnotationChecker):
            violated = None

            def _fail(self, *a):
                Checker.violated = True
                super()._fail(*a)

        checker = Checker(ck.annotations, ck.variant.lanes, spec)
        args = make_args(case)
        try:
            interpret(ck.kernel, case.n, args, None, checker=checker)
        except KernelRuntimeError as e:
            kind = "annotation" if Checker.violated else "reference_error"
            return {**rec, "status": kind, "detail": str(e)}
        rec["annotation_checks"] = checker.checked
        for name in names:
            if not bitwise_equal(args[name], ref[name]):
                return {**rec, "status": "specialise_mismatch",
                        "detail": f"the specialised kernel's interpretation differs from the original's at "
                                  f"{name}{list(first_difference(args[name], ref[name]))}"}

    args = make_args(case)
    guarded = GuardedSet({name: args[name] for name in names})
    scalars = {p.name: args[p.name] for p in case.kernel.scalars}
    try:
        ck.launch(case.n, {**guarded.arrays, **scalars})
    except Exception as e:  # noqa: BLE001
        return {**rec, "status": "native_error", "detail": f"{type(e).__name__}: {e}"}
    out = guarded.arrays
    rec["checksum"] = outputs_checksum(case.kernel, out)
    diffs = []
    for name in names:
        if not bitwise_equal(out[name], ref[name]):
            i, a, b = first_difference(out[name], ref[name])
            count = int(np.count_nonzero(_differs(out[name], ref[name])))
            diffs.append(f"{name}[{i}]: native {_show(a, out[name].dtype)} vs reference "
                         f"{_show(b, ref[name].dtype)} ({count} element{'s' * (count != 1)} differ)")
    bands = [n for n, ok in guarded.status().items() if not ok]
    if diffs:
        rec.update(status="mismatch", detail="; ".join(diffs + [f"guard band broken around {n}" for n in bands]))
    elif bands:
        rec.update(status="guard", detail="guard band broken around " + ", ".join(bands))
    return rec


def _differs(a, b):
    if a.dtype == np.float32:
        return (a.view(np.uint32) != b.view(np.uint32)) & ~(np.isnan(a) & np.isnan(b))
    return a != b


def _show(v, dtype) -> str:
    if dtype == np.float32:
        bits = int(np.asarray(v, np.float32).view(np.uint32))
        return f"{v!r} (0x{bits:08x})"
    return repr(v)


def execute(case: Case, variants: list, emit=None) -> dict:
    """The reference and every listed variant, in this process.

    Returns {"discard": None | {"reason", "message"}, "reference_checksum",
    "variants": {spec: record}}; `emit(event)` sees progress events.
    """
    emit = emit or (lambda ev: None)
    ref, why = reference(case)
    if ref is None:
        out = {"discard": {"reason": why[0], "message": why[1][:500]}, "variants": {}}
        emit({"event": "ref", **out})
        return out
    out = {"discard": None, "reference_checksum": outputs_checksum(case.kernel, ref), "variants": {}}
    emit({"event": "ref", "discard": None, "reference_checksum": out["reference_checksum"]})
    for spec in variants:
        emit({"event": "begin", "variant": spec})
        rec = run_variant(case, spec, ref)
        out["variants"][spec] = rec
        emit({"event": "result", "record": rec})
    return out


# ---------------------------------------------------------------- worker processes

def worker_main(bugs: tuple = ()):
    """Serve requests (one JSON line each) on stdin; answer with tagged JSON lines."""
    import signal
    from ..backend import inject
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the campaign's to handle, not ours
    real_stdout = sys.stdout
    sys.stdout = sys.stderr            # anything else printed goes to the log, not the protocol

    def emit(ev):
        real_stdout.write(WORKER_TAG + json.dumps(ev) + "\n")
        real_stdout.flush()

    crash_on = os.environ.get("COHORT_FUZZ_TEST_CRASH")   # tests: abort when compiling this variant
    with inject.inject_bug_TESTING_ONLY(*bugs):
        emit({"event": "ready", "pid": os.getpid()})
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            case = _corpus.case_from_json(req["case"])

            def hook(ev):
                emit(ev)
                if crash_on and ev.get("event") == "begin" and ev["variant"] == crash_on:
                    os.abort()
            execute(case, req["variants"], hook)
            emit({"event": "done"})


class _Worker:
    def __init__(self, bugs: tuple):
        self.log = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, "-m", "cohort.verify.fuzz", "--worker"]
        if bugs:
            cmd += ["--inject", ",".join(bugs)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        self.compiles = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(WORKER_TAG):
                self.lines.put(json.loads(line[len(WORKER_TAG):]))
        self.lines.put(None)

    def next(self, timeout: float):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return "timeout"

    def send(self, req: dict):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def death(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        what = "still running" if rc is None else (f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}")
        self.log.seek(0)
        tail = self.log.read()[-600:].strip().replace("\n", " | ")
        return f"worker {what}" + (f"; stderr: {tail}" if tail else "")

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.log.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


class WorkerPool:
    """`jobs` worker processes; a case's variants are split over them."""

    def __init__(self, jobs: int = 1, bugs: tuple = (), recycle_compiles: int = 250,
                 timeout: float = 120.0):
        self.jobs, self.bugs = max(1, jobs), tuple(bugs)
        self.recycle, self.timeout = recycle_compiles, timeout
        self.workers: list = [None] * self.jobs
        self.restarts = 0
        self.crashes = 0
        self.closed = False
        self.executor = ThreadPoolExecutor(self.jobs) if self.jobs > 1 else None

    def _worker(self, i: int) -> _Worker:
        w = self.workers[i]
        if w is None:
            w = self.workers[i] = _Worker(self.bugs)
            ev = w.next(self.timeout)
            if not isinstance(ev, dict) or ev.get("event") != "ready":
                msg = w.death()
                w.kill()
                self.workers[i] = None
                raise RuntimeError(f"fuzz worker failed to start: {msg}")
        return w

    def _retire(self, i: int, kill: bool = False):
        w = self.workers[i]
        if w is not None:
            w.kill() if kill else w.close()
            self.workers[i] = None
            self.restarts += 1

    def _run_part(self, i: int, doc: dict, variants: list, deadline: Optional[float] = None,
                  stop: Optional[threading.Event] = None) -> dict:
        out = {"discard": None, "variants": {}}
        todo = list(variants)
        first = True
        while todo or first:
            first = False
            if self.closed or (stop is not None and stop.is_set()):
                return out
            w = self._worker(i)
            w.send({"case": doc, "variants": todo})
            current = "reference"
            last = time.monotonic()
            while True:
                if stop is not None and stop.is_set():
                    self._retire(i, kill=True)        # a failure was found: no more variants wanted
                    return out
                now = time.monotonic()
                wait = max(self.timeout - (now - last), 0.0)
                if deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                if stop is not None:
                    wait = min(wait, 0.2)              # poll the stop flag
                ev = w.next(wait)
                now = time.monotonic()
                if self.closed:                       # the campaign is over (Ctrl-C)
                    return out
                if ev == "timeout" and deadline is not None and now >= deadline:
                    self._retire(i, kill=True)        # the time box ended mid-case: drop the case
                    out["incomplete"] = True
                    return out
                if ev == "timeout" and now - last < self.timeout:
                    continue
                if isinstance(ev, dict):
                    last = now
                if ev == "timeout" or ev is None:
                    status = "timeout" if ev == "timeout" else "crash"
                    if ev == "timeout":
                        w.kill()
                    detail = w.death() if ev is None else f"no answer within {self.timeout:.0f} s"
                    self.crashes += 1
                    self._retire(i, kill=True)
                    if current == "reference":
                        out["discard"] = {"reason": f"interpreter {status}", "message": detail}
                        return out
                    if current in out["variants"]:     # between two variants: blame the next one
                        rest = todo[todo.index(current) + 1:]
                        if not rest:
                            todo = []
                            break
                        current = rest[0]
                    out["variants"][current] = {"variant": current, "status": status,
                                                "detail": f"{current}: {detail}"}
                    todo = todo[todo.index(current) + 1:]
                    if stop is not None:
                        stop.set()
                    break
                kind = ev["event"]
                if kind == "ref":
                    if ev.get("discard"):
                        out["discard"] = ev["discard"]
                    else:
                        out["reference_checksum"] = ev["reference_checksum"]
                elif kind == "begin":
                    current = ev["variant"]
                    w.compiles += 1
                elif kind == "result":
                    out["variants"][ev["record"]["variant"]] = ev["record"]
                    if stop is not None and ev["record"]["status"] in FAILURE_STATUSES:
                        stop.set()
                elif kind == "done":
                    todo = []
                    if w.compiles >= self.recycle:
                        self._retire(i)
                    break
            if out["discard"]:
                return out
        return out

    def run(self, case: Case, variants: list, deadline: Optional[float] = None,
            stop_on_failure: bool = False) -> dict:
        """`deadline` (time.monotonic()): past it, the case is abandoned ({"incomplete": True}).
        `stop_on_failure`: the first failing variant ends the run (the others are not run)."""
        doc = _corpus.case_to_json(case)
        parts = [variants[i::self.jobs] for i in range(self.jobs)]
        parts = [(i, p) for i, p in enumerate(parts) if p] or [(0, [])]
        stop = threading.Event() if stop_on_failure else None
        if self.executor is None or len(parts) == 1:
            results = [self._run_part(i, doc, p, deadline, stop) for i, p in parts]
        else:
            results = list(self.executor.map(lambda ip: self._run_part(ip[0], doc, ip[1], deadline, stop),
                                             parts))
        if any(r.get("incomplete") for r in results):
            return {"incomplete": True, "discard": None, "variants": {}}
        out = {"discard": None, "variants": {}}
        for r in results:
            if r.get("discard"):
                return {"discard": r["discard"], "variants": {}}
            out["reference_checksum"] = r.get("reference_checksum")
            out["variants"].update(r["variants"])
        out["variants"] = {v: out["variants"][v] for v in variants if v in out["variants"]}
        return out

    def close(self, kill: bool = False):
        self.closed = True
        for i in range(self.jobs):
            if self.workers[i] is not None:
                self.workers[i].kill() if kill else self.workers[i].close()
                self.workers[i] = None
        if self.executor is not None:
            self.executor.shutdown()


class InProcess:
    """The same interface without subprocesses (debugging, replays, small runs)."""
    restarts = crashes = 0

    def __init__(self, bugs: tuple = ()):
        self.bugs = tuple(bugs)

    def run(self, case: Case, variants: list, deadline: Optional[float] = None,
            stop_on_failure: bool = False) -> dict:
        from ..backend import inject
        with inject.inject_bug_TESTING_ONLY(*self.bugs):
            return execute(case, variants)

    def close(self, kill: bool = False):
        pass


# ---------------------------------------------------------------- coverage

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

    def program(self, case: Case):
        """Static facts of one program that ran (counted once per program)."""
        from ..backend.shapes import ShapeAnalysis
        from ..refimpl.specialize import specialize
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

    def report(self) -> dict:
        all_ops = sorted(op.name for op in Op if op is not Op.ARG)
        from ..refimpl.mathlib import FUNCTIONS
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


# ---------------------------------------------------------------- IR-level reduction

def _with_body(case: Case, body) -> Case:
    from dataclasses import replace
    return replace(case, kernel=Kernel(case.kernel.name, case.kernel.params, tuple(body), case.kernel.block))


def _without(body, target):
    out = []
    for s in body:
        if s is target:
            continue
        if isinstance(s, If):
            s = If(s.cond, _without(s.then, target), _without(s.orelse, target), s.loc)
        elif isinstance(s, For):
            s = For(s.var, s.start, s.stop, s.step, _without(s.body, target), s.loc)
        out.append(s)
    return tuple(out)


def _replacing(body, target, new):
    out = []
    for s in body:
        if s is target:
            out.extend(new)
            continue
        if isinstance(s, If):
            s = If(s.cond, _replacing(s.then, target, new), _replacing(s.orelse, target, new), s.loc)
        elif isinstance(s, For):
            s = For(s.var, s.start, s.stop, s.step, _replacing(s.body, target, new), s.loc)
        out.append(s)
    return tuple(out)


def _delete_statements(case: Case):
    """Each statement removed (outermost first: one step can drop a whole loop)."""
    for s in list(walk_stmts(case.kernel.body)):
        yield _with_body(case, _without(case.kernel.body, s))


def _flatten_control(case: Case):
    """An if replaced by one of its branches; a loop whose body does not use its variable
    replaced by its body."""
    for s in list(walk_stmts(case.kernel.body)):
        if isinstance(s, If):
            for branch in (s.then, s.orelse):
                yield _with_body(case, _replacing(case.kernel.body, s, branch))
        elif isinstance(s, For):
            uses = any(n.op is Op.VAR and n.arg == s.var for b in walk_stmts(s.body)
                       for e in stmt_exprs(b) for n in walk_expr(e))
            if not uses:
                yield _with_body(case, _replacing(case.kernel.body, s, s.body))


def _simplify_values(case: Case):
    """A stored or assigned value replaced by one of its operands of the same type."""
    for s in list(walk_stmts(case.kernel.body)):
        if isinstance(s, (Store, Assign, PStore)) and s.value.src:
            for operand in s.value.src:
                if operand.dtype is s.value.dtype:
                    from dataclasses import replace
                    yield _with_body(case, _replacing(case.kernel.body, s, [replace(s, value=operand)]))


_reductions = (_delete_statements, _flatten_control, _simplify_values, _delete_statements)


def _drop_unused_params(case: Case, still_fails) -> Case:
    """Remove parameters nothing refers to (buffers keep their input streams)."""
    from dataclasses import replace
    used = set()
    for s in walk_stmts(case.kernel.body):
        for name in ("buf", "arr"):
            if hasattr(s, name):
                used.add(getattr(s, name))
        for e in stmt_exprs(s):
            used.update(n.arg for n in walk_expr(e) if n.op in (Op.LOAD, Op.PARAM, Op.BUFLEN))
    keep = tuple(p for p in case.kernel.params if p.name in used)
    if len(keep) == len(case.kernel.params):
        return case
    streams = {b.name: b.stream or i + 1 for i, b in enumerate(case.buffers)}
    buffers = tuple(replace(b, stream=streams[b.name]) for b in case.buffers if b.name in used)
    k = Kernel(case.kernel.name, keep, case.kernel.body, case.kernel.block)
    cand = Case(k, case.n, {c: v for c, v in case.consts.items() if c in used}, buffers,
                {n: v for n, v in case.scalars.items() if n in used}, case.seed)
    return cand if still_fails(cand) else case


def _reads_own(load_node) -> bool:
    """A load of an output at the thread's own slot (no neighbour arithmetic in the index)."""
    return not any(x.op is Op.MOD and x.src[0].op is Op.ADD and x.src[0].src[0].op is Op.THREAD_ID
                   for x in walk_expr(load_node.src[0]))


# ---------------------------------------------------------------- campaigns

def _shrink_cost(spec: str) -> tuple:
    """Relative compile cost of a variant (shrinking recompiles its target at every step):
    whole is cheapest; full_packet=on doubles the code, predicated=off scalarises effects."""
    from ..backend.variant import parse_variant
    v = parse_variant(spec)
    if v.lanes == 1:
        return (0, 0)
    return (1 + (not v.predicated) * 2 + v.full_packet, v.lanes)


class _Found(Exception):
    """Raised inside the Hypothesis test when a case fails (so that it shrinks)."""


class _Internal(Exception):
    pass


def _found():
    """Raise _Found from one place: Hypothesis tells failures apart by where they are raised."""
    raise _Found()


@dataclass
class CampaignConfig:
    seconds: float = 60.0
    seed: int = 0
    jobs: int = 1                      # worker processes; 0 runs everything in this process
    max_programs: Optional[int] = None
    variants: tuple = DEFAULT_VARIANTS
    bugs: tuple = ()                   # injected backend bugs (testing the fuzzer itself)
    shrink: bool = True
    shrink_seconds: float = 60.0
    max_shrinks: int = 3               # failures shrunk per campaign; later ones are kept as found
    stop_on_failure: bool = False
    corpus_dir: Optional[str] = None   # where failing cases are written (None: nowhere)
    max_corpus_writes: int = 20
    batch: int = 9                     # examples per Hypothesis run (one seed per batch). Hypothesis
                                       # mutates examples after its first 10 and starts runs of 10 or
                                       # more with deliberately small ones; compiles are dear, so
                                       # fresh random programs pay most here
    max_stmts: int = 16
    progress: bool = False


class Campaign:
    def __init__(self, config: CampaignConfig, pool=None):
        self.cfg = config
        self.pool = pool
        self.cov = Coverage()
        self.programs = self.generated = self.discarded = self.variant_runs = self.skipped = 0
        self.cut_by_time_box = 0
        self.mismatches = 0
        self.failing_programs = 0
        self.discard_reasons = Counter()
        self.failure_kinds = Counter()
        self.failures: list = []
        self.bins = Counter()
        self.seen: set = set()
        self.shrinks_done = 0
        self.corpus_writes = 0
        self.mode = "generate"
        self.internal: Optional[BaseException] = None
        self.stopped = False
        self.interrupted = False

    # ------------------------------------------------------------ helpers
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def time_up(self) -> bool:
        if self.stopped or self.elapsed() >= self.cfg.seconds:
            return True
        return self.cfg.max_programs is not None and self.programs >= self.cfg.max_programs

    def _progress(self, final=False):
        if not self.cfg.progress:
            return
        now = time.monotonic()
        if not final and now - getattr(self, "_last_progress", 0) < 0.5:
            return
        self._last_progress = now
        el = self.elapsed()
        line = (f"\rfuzz {el:6.1f}s/{self.cfg.seconds:.0f}s  programs {self.programs} "
                f"({self.programs / max(el, 1e-9):.2f}/s)  variant runs {self.variant_runs}  "
                f"discarded {self.discarded}  mismatches {self.mismatches}  "
                f"{'[shrinking]' if self.mode == 'shrink' else ''}   ")
        sys.stderr.write(line + ("\n" if final else ""))
        sys.stderr.flush()

    def _run(self, case: Case, variants: list, deadline: Optional[float] = None,
             stop_on_failure: bool = False) -> dict:
        try:
            return self.pool.run(case, variants, deadline, stop_on_failure)
        except Exception as e:  # noqa: BLE001 - a bug in the fuzzer, not a finding
            self.internal = e
            raise _Internal(str(e)) from e

    @staticmethod
    def _failures(res: dict) -> list:
        return [(v, r) for v, r in res["variants"].items() if r["status"] in FAILURE_STATUSES]

    def _bins(self, res: dict) -> dict:
        bins = {}
        ref = res.get("reference_checksum")
        if ref:
            bins.setdefault(ref, []).append("reference")
        for v, r in res["variants"].items():
            key = r.get("checksum") or f"<{r['status']}>"
            if r["status"] == "unsupported":
                continue
            bins.setdefault(key, []).append(v)
        return bins

    # ------------------------------------------------------------ the Hypothesis test body
    def test(self, case: Case):
        if self.internal is not None:
            raise _Internal("earlier internal error")
        if self.mode == "shrink":
            return self._shrink_step(case)
        key = _corpus.case_key(case)
        if key in self.seen or self.time_up():
            return
        self.seen.add(key)
        self.generated += 1
        variants = variants_for(case, self.cfg.variants)
        self.skipped += len([v for v in self.cfg.variants]) - len(variants)
        res = self._run(case, variants, self.t0 + self.cfg.seconds, self.cfg.stop_on_failure)
        if res.get("incomplete"):
            self.generated -= 1
            self.cut_by_time_box += 1
            return
        if res["discard"]:
            self.discarded += 1
            self.discard_reasons[res["discard"]["reason"]] += 1
            self._progress()
            return
        self.programs += 1
        self.cov.program(case)
        for v, r in res["variants"].items():
            if r["status"] == "unsupported":
                continue
            self.variant_runs += 1
            self.cov.variant(r)
        bins = self._bins(res)
        self.bins[len(bins)] += 1
        fails = self._failures(res)
        self._progress()
        if not fails:
            return
        self.mismatches += len(fails)
        self.failing_programs += 1
        for _, r in fails:
            self.failure_kinds[r["status"]] += 1
        found_at = self.elapsed()
        spec, rec = min(fails, key=lambda f: _shrink_cost(f[0]))   # the cheapest to recompile
        record = {"kind": rec["status"], "variant": spec, "description": rec.get("detail", ""),
                  "failing_variants": [v for v, _ in fails], "bins": bins, "found_after_seconds": round(found_at, 2),
                  "shrunk": False}
        if self.cfg.shrink and self.shrinks_done < self.cfg.max_shrinks:
            self.mode = "shrink"
            self.target = (spec, rec["status"])
            self.best, self.best_key, self.best_res = case, key, res
            self.original = case
            self.pending = record
            self.shrink_cache = {}
            self.shrink_steps = 0
            self.shrink_t0 = time.monotonic()
            _found()
        self._record(case, record, res)
        if self.cfg.stop_on_failure:
            self.stopped = True

    def _shrink_step(self, case: Case):
        key = _corpus.case_key(case)
        if key == self.best_key:
            _found()
        hit = self.shrink_cache.get(key)
        if hit is not None:
            if hit:
                _found()
            return
        if time.monotonic() - self.shrink_t0 > self.cfg.shrink_seconds:
            return
        spec, status = self.target
        res = self._run(case, [spec])
        self.shrink_steps += 1
        self._progress()
        fails = not res["discard"] and res["variants"].get(spec, {}).get("status") == status
        self.shrink_cache[key] = fails
        if fails:
            self.best, self.best_key, self.best_res = case, key, res
            _found()

    # ------------------------------------------------------------ results
    def _still_fails(self, case: Case) -> bool:
        from ..refimpl.errors import KernelError
        from ..refimpl.spec import validate
        try:
            validate(case.kernel)
        except KernelError:
            return False
        key = _corpus.case_key(case)
        hit = self.shrink_cache.get(key)
        if hit is None:
            spec, status = self.target
            res = self._run(case, [spec])
            self.shrink_steps += 1
            self._progress()
            hit = self.shrink_cache[key] = (not res["discard"] and
                                            res["variants"].get(spec, {}).get("status") == status)
            if hit:
                self.best_res = res
        return hit

    def _reduce(self, case: Case) -> Case:
        """After Hypothesis: delete statements and simplify stored values on the IR itself while
        the failure stays (delta debugging), within what is left of the shrink budget."""
        deadline = self.shrink_t0 + self.cfg.shrink_seconds
        for attempt in _reductions:
            progress = True
            while progress and time.monotonic() < deadline:
                progress = False
                for cand in attempt(case):
                    if time.monotonic() >= deadline:
                        break
                    if self._still_fails(cand):
                        case, progress = cand, True
                        break
        return _drop_unused_params(case, self._still_fails)

    def _finish_shrink(self):
        record = self.pending
        self.reduce_from = sum(1 for _ in walk_stmts(self.best.kernel.body))
        case = self.best = self._reduce(self.best)
        record["shrunk"] = True
        record["shrink_steps"] = self.shrink_steps
        record["shrink_seconds"] = round(time.monotonic() - self.shrink_t0, 2)
        record["statements_before"] = sum(1 for _ in walk_stmts(self.original.kernel.body))
        record["statements_after_hypothesis"] = self.reduce_from
        record["statements_after"] = sum(1 for _ in walk_stmts(case.kernel.body))
        spec = self.target[0]
        rec = self.best_res["variants"].get(spec, {})
        record["description"] = rec.get("detail", record["description"])
        # the minimal case on the whole matrix: which variants share the bug
        res = self._run(case, variants_for(case, self.cfg.variants))
        if not res["discard"]:
            record["bins"] = self._bins(res)
            record["failing_variants"] = [v for v, _ in self._failures(res)] or [spec]
        self.mode = "generate"
        self.shrinks_done += 1
        self._record(case, record, res)
        if self.cfg.stop_on_failure:
            self.stopped = True

    def _record(self, case: Case, record: dict, res: dict):
        from ..refimpl.printer import format_kernel
        record["kernel"] = format_kernel(case.kernel)
        record["case"] = case.describe()
        record["inputs_seed"] = case.seed
        record["n"], record["block"], record["consts"] = case.n, case.block, dict(case.consts)
        if self.cfg.corpus_dir and self.corpus_writes < self.cfg.max_corpus_writes:
            name = f"fuzz-{record['kind']}-{_corpus.case_key(case)[:10]}"
            note = (f"found by `cohort fuzz --seed {self.cfg.seed}`"
                    + (f" with injected bug(s) {', '.join(self.cfg.bugs)}" if self.cfg.bugs else ""))
            path = _corpus.save_case(self.cfg.corpus_dir, case, name=name,
                                     variants=record["failing_variants"], expected="agree", note=note,
                                     found={k: record[k] for k in ("kind", "variant", "description", "kernel",
                                                                   "bins", "shrunk")})
            record["case_file"] = path
            self.corpus_writes += 1
        self.failures.append(record)

    # ------------------------------------------------------------ driver
    def run(self) -> dict:
        from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
        from .gen import cases
        own_pool = self.pool is None
        if own_pool:
            self.pool = InProcess(self.cfg.bugs) if self.cfg.jobs == 0 else \
                WorkerPool(self.cfg.jobs, self.cfg.bugs)
        strategy = cases(max_stmts=self.cfg.max_stmts)
        self.t0 = time.monotonic()
        batch = 0
        try:
            while not self.time_up():
                def body(case):
                    self.test(case)
                test = given(strategy)(body)
                test = seed((self.cfg.seed * 1_000_003 + batch) % (2 ** 63))(test)
                test = settings(max_examples=self.cfg.batch, deadline=None, database=None,
                                phases=(Phase.generate, Phase.shrink), report_multiple_bugs=False,
                                suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                                print_blob=False)(test)
                batch += 1
                try:
                    test()
                except _Internal:
                    raise self.internal
                except KeyboardInterrupt:
                    self.interrupted = True
                    if self.mode == "shrink":     # keep the smallest failing case seen so far
                        self.mode = "generate"
                        self.pending["shrink_steps"] = self.shrink_steps
                        self._record(self.best, self.pending, {})
                    break
                except BaseException as e:  # noqa: BLE001 - _Found, or Hypothesis' flaky wrappers of it
                    if self.internal is not None:
                        raise self.internal
                    if self.mode != "shrink":
                        raise
                    self._finish_shrink()
                if self.mode == "shrink":      # Hypothesis gave up without reporting: keep the best
                    self._finish_shrink()
        finally:
            if own_pool:
                self.pool.close(kill=self.interrupted)
            self._progress(final=True)
        return self.report(batch)

    def report(self, batches: int = 0) -> dict:
        el = self.elapsed()
        gen = max(self.generated, 1)
        return {
            "seed": self.cfg.seed,
            "seconds": round(el, 2),
            "programs": self.programs,
            "generated": self.generated,
            "discarded": self.discarded,
            "discard_rate": round(self.discarded / gen, 4),
            "discard_reasons": dict(self.discard_reasons),
            "variant_runs": self.variant_runs,
            "variants_skipped": self.skipped,
            "programs_cut_by_time_box": self.cut_by_time_box,
            "programs_per_second": round(self.programs / max(el, 1e-9), 3),
            "variant_runs_per_second": round(self.variant_runs / max(el, 1e-9), 2),
            "mismatches": self.mismatches,
            "failing_programs": self.failing_programs,
            "failure_kinds": dict(self.failure_kinds),
            "failures": self.failures,
            "bins": {str(k): v for k, v in sorted(self.bins.items())},
            "variants": list(self.cfg.variants),
            "fast_math": FAST_MATH_NOTE,
            "injected_bugs": list(self.cfg.bugs),
            "hypothesis_batches": batches,
            "interrupted": self.interrupted,
            "worker_restarts": getattr(self.pool, "restarts", 0),
            "worker_crashes": getattr(self.pool, "crashes", 0),
            "coverage": self.cov.report(),
        }


def default_corpus_dir() -> Optional[str]:
    """tests/corpus of the source tree this package runs from, if there is one."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    d = os.path.join(root, "tests", "corpus")
    return d if os.path.isdir(d) else None


def run_campaign(seconds: float = 60.0, seed: int = 0, **kw) -> dict:
    """A time-boxed campaign (see CampaignConfig); injected bugs active in the caller
    (`inject_bug_TESTING_ONLY`) are passed on to the workers."""
    from ..backend import inject
    bugs = tuple(sorted(set(kw.pop("bugs", ())) | set(inject.key())))
    return Campaign(CampaignConfig(seconds=seconds, seed=seed, bugs=bugs, **kw)).run()


def format_failure(f: dict) -> str:
    how = (f"shrunk from {f.get('statements_before')} to {f.get('statements_after')} statements in "
           f"{f.get('shrink_steps')} steps" if f.get("shrunk") else "not shrunk")
    lines = [f"FAILURE {f['kind']} on {f['variant']} (found after {f['found_after_seconds']} s; {how})",
             f"  {f['description']}",
             f"  {f['case']}",
             f"  failing variants: {', '.join(f['failing_variants'])}"]
    if f.get("case_file"):
        lines.append(f"  replay: {f['case_file']}")
    lines.append("  " + f["kernel"].replace("\n", "\n  "))
    return "\n".join(lines)


def format_report(r: dict) -> str:
    lines = [f"fuzz seed {r['seed']}: {r['programs']} programs in {r['seconds']:.1f} s "
             f"({r['programs_per_second']:.2f}/s), {r['variant_runs']} variant runs, "
             f"{r['discarded']} discarded ({100 * r['discard_rate']:.1f}%), {r['mismatches']} failing variant runs"
             + (" (interrupted)" if r.get("interrupted") else "")]
    if r["programs"] == 0:
        lines.append("NOTHING TESTED: no program ran to completion within the time box (the first compiles "
                     "take seconds); give more --seconds")
    if r["injected_bugs"]:
        lines.append(f"injected bugs: {', '.join(r['injected_bugs'])}")
    lines.append(f"checksum bins per program: {r['bins']}")
    gaps = r["coverage"]["gaps"]
    lines.append("coverage gaps: " + (", ".join(gaps) if gaps else "none"))
    for f in r["failures"]:
        lines.append(format_failure(f))
    return "\n".join(lines)


# ---------------------------------------------------------------- mutation check

def mutation_table(seconds_per_bug: float = 60.0, seed: int = 0, jobs: int = 2, shrink_seconds: float = 30.0,
                   bugs=None) -> list:
    """Each injected backend bug alone: is it caught, how fast, and the minimal kernel."""
    from ..backend.inject import BUGS
    rows = []
    for bug in (bugs or sorted(BUGS)):
        r = run_campaign(seconds_per_bug, seed, bugs=(bug,), jobs=jobs, stop_on_failure=True,
                         shrink_seconds=shrink_seconds, max_shrinks=1)
        f = r["failures"][0] if r["failures"] else None
        rows.append({"bug": bug, "caught": bool(f), "seconds_to_catch": f and f["found_after_seconds"],
                     "programs": r["programs"], "kind": f and f["kind"], "variant": f and f["variant"],
                     "kernel": f and f["kernel"], "description": f and f["description"]})
    return rows


def _main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m cohort.verify.fuzz")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--inject", default="", help="testing only: comma-separated injected backend bugs")
    p.add_argument("--mutations", action="store_true", help="run the mutation check table")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args(argv)
    bugs = tuple(b for b in a.inject.split(",") if b)
    if a.worker:
        worker_main(bugs)
        return 0
    if a.mutations:
        rows = mutation_table(a.seconds, a.seed, a.jobs, bugs=bugs or None)
        print(f"{'mutation':22} {'caught':7} {'seconds':>8} {'programs':>8}  failure")
        for r in rows:
            sec = f"{r['seconds_to_catch']:.1f}" if r["caught"] else "-"
            print(f"{r['bug']:22} {'yes' if r['caught'] else 'NO':7} {sec:>8} {r['programs']:>8}  "
                  f"{(r['kind'] or '') + ' on ' + (r['variant'] or '') if r['caught'] else ''}")
        for r in rows:
            if r["caught"]:
                print(f"\n== {r['bug']}: {r['description']}\n{r['kernel']}")
        return 0 if all(r["caught"] for r in rows) else 1
    r = run_campaign(a.seconds, a.seed, bugs=bugs, jobs=a.jobs, progress=True)
    print(format_report(r))
    return 1 if r["failures"] else 0


if __name__ == "__main__":
    sys.exit(_main())

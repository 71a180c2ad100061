"""Outputs of fixed seeds as checksums, for comparing machines (scripts/test-aarch64).

Runs the same subset on any host and writes one JSON object: per case, the input
checksums, the interpreter's output checksum and each variant's, every variant
checked bit for bit against the interpreter on this machine (DESIGN §3: NaN ==
NaN, via verify.checksum) before it is written. Two machines agree when the two
files hold the same checksums; `--compare A B` says where they do not.

Parts (each can run in its own process; --ops/--ops-except split the operators between processes):
  ops      every operator at its smallest seed size: interpreter, whole, packet at lanes
           4 and 16, and the private form at lanes 8 where there is one (lanes 8 of the
           other forms is left out for time)
  pool     two operators through the worker pool at 2 workers, every grain policy; then
           the idle pool's CPU time over 2 s (its worker must sleep: at most 0.2 s)
  mathlib  every math function over 4,007 inputs (random bits, hard arguments, a
           range): interpreter, whole and packet at 16 lanes (the operators' kernels
           use exp, erf, tanh and sigmoid at 4 lanes too)
  cli      `cohort run` through the pool in a child process (the same interpreter, so an
           emulated one under emulation: no binfmt needed)
The interpreter runs once per (operator, form, shape, seed), not once per variant.
Per case, `case_seconds` in the output holds the seconds since the previous case and, for
operator cases, the build's compile seconds and the interpreter's (where emulated time goes).
Each case also records `raw`, a digest of the bytes without NaN canonicalisation
(NaN payloads may legitimately differ between ISAs: x86 and AArch64 produce
different default NaNs); `--compare` reports raw differences without failing on them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

VARIANTS = ("whole", "packet,lanes=4", "packet,lanes=16")
PRIVATE_VARIANT = "packet"                  # lanes 8, the default
MATH_VARIANTS = ("whole", "packet,lanes=16")
GRAINS = ("caller", "1", "3", "0", "legacy", "auto", "joint_legacy")
POOL_CASES = (("rmsnorm", (17, 65)), ("attention_causal", (1, 4, 2, 16, 32, 16, 16)))
SEED = 0


def _raw(a: np.ndarray) -> str:
    return "sha256:" + hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


_CASE_SECONDS: dict = {}          # key -> seconds since the previous record (what the subset costs where)
_last = [time.perf_counter()]


def _record(out: dict, key: str, r: dict):
    now = time.perf_counter()
    _CASE_SECONDS[key], _last[0] = round(now - _last[0], 2), now
    if "compile_seconds" in r:      # where the time went: LLVM, the interpreter, the rest (launches, facts)
        _CASE_SECONDS[key] = [_CASE_SECONDS[key], round(r["compile_seconds"], 2), round(r["interpreter_seconds"], 2)]
    if not r["agree"]:
        raise SystemExit(f"{key}: the variant disagrees with the interpreter on this machine: "
                         f"{r.get('first_difference') or r.get('verdict')}")
    out[key] = {"inputs": r["input_checksums"], "reference": r["reference_checksum"],
                "checksum": r["checksum"], "raw": _raw(r["output"])}


_REFERENCES: dict = {}


def _cached_reference():
    """check_operator runs the interpreter for every variant; under emulation that run costs more
    than the compile for the pool's attention. The interpreter's output of one (operator, shape,
    seed) is computed once here and handed out as copies (its checksum is still recorded and
    compared per case)."""
    from cohort.verify import opcheck
    if getattr(opcheck.reference, "cached_by_target_outputs", False):
        return
    computed = opcheck.reference

    def reference(op, shape, seed):
        key = (op.name, op.form, tuple(shape), seed)
        if key not in _REFERENCES:
            _REFERENCES[key] = computed(op, shape, seed)
        inputs, y, seconds = _REFERENCES[key]
        return {n: a.copy() for n, a in inputs.items()}, y.copy(), seconds
    reference.cached_by_target_outputs = True
    opcheck.reference = reference


def _no_code_facts():
    """check_operator reports each build's code facts, and NativeCode.facts generates the build's
    assembly to read them: a second code generation per build (a third of a compile on this host),
    for facts this script neither records nor compares (tests/test_target.py checks AArch64 code
    facts on cross-compiled objects). In this process they read as a note instead."""
    from cohort.backend import compiler
    compiler.NativeCode.facts = property(lambda self: {"not computed": "scripts/target_outputs.py"})


def part_ops(out: dict, facts: dict, only=None):
    from cohort.backend.variant import parse_variant
    from cohort.refimpl import ops
    from cohort.verify.opcheck import check_operator
    _cached_reference()
    for name, op in ops.OPERATORS.items():
        if only is not None and name not in only:
            continue
        shape = op.seed_sizes[0]
        for v in VARIANTS:
            _record(out, f"ops/{name}/{ops.fmt_shape(shape)}/{v}", check_operator(op, shape, SEED, parse_variant(v)))
        if "private" in (f[0] for f in op.forms):      # every operator with a private form, at lanes 8
            pop = ops.get(name, "private")
            _record(out, f"ops/{name}:private/{ops.fmt_shape(shape)}/{PRIVATE_VARIANT}",
                    check_operator(pop, shape, SEED, parse_variant(PRIVATE_VARIANT)))


IDLE_SECONDS, IDLE_CPU_LIMIT = 2.0, 0.2


def part_pool(out: dict, facts: dict):
    import resource

    from cohort.backend.variant import parse_variant
    from cohort.refimpl import ops
    from cohort.verify.opcheck import check_operator
    _cached_reference()
    for name, shape in POOL_CASES:
        op = ops.get(name)
        for g in GRAINS:
            v = f"packet,workers=2,grain={g}"
            _record(out, f"pool/{name}/{ops.fmt_shape(shape)}/{v}", check_operator(op, shape, SEED, parse_variant(v)))
    # the pool's worker now idles: it must sleep (the target's wait primitive), not spin
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(IDLE_SECONDS)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    facts["pool_idle"] = {"seconds": IDLE_SECONDS, "cpu_seconds": round(cpu, 4)}
    if cpu > IDLE_CPU_LIMIT:
        raise SystemExit(f"the idle pool used {cpu:.3f} s of CPU in {IDLE_SECONDS} s: its workers spin "
                         f"instead of sleeping (limit {IDLE_CPU_LIMIT} s)")


def _math_inputs() -> np.ndarray:
    rng = np.random.default_rng(11)
    x = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([x, np.float32([16367173 * 2.0 ** 72, 252.89821, -0.0, 1e-45, -103.9, 88.72283, 3.92]),
                           rng.uniform(-12, 12, 1000).astype(np.float32)])


def part_mathlib(out: dict, facts: dict):
    from cohort.backend.compiler import compile_kernel
    from cohort.refimpl import ir, mathlib
    from cohort.refimpl.interpreter import interpret
    from cohort.refimpl.ir import Kernel, Op, Param, ParamKind, Store
    from cohort.verify.checksum import bitwise_equal, checksum
    names = sorted(mathlib.FUNCTIONS)
    gid, F = ir.builtin(Op.GLOBAL_ID), ir.DType.F32
    n_ = ir.builtin(Op.NUM_THREADS)
    x_ = ir.load("x", gid, F)
    k = Kernel("all_math", (Param("x", ParamKind.BUFFER, F), Param("y", ParamKind.BUFFER, F)),
               tuple(Store("y", gid + n_ * j, ir.math(name, x_)) for j, name in enumerate(names)), 32)
    x = _math_inputs()
    n = len(x)
    want = interpret(k, n, {"x": x, "y": np.zeros(n * len(names), np.float32)})["y"]
    inputs = {"x": checksum(x)}
    for v in MATH_VARIANTS:
        y = np.zeros(n * len(names), np.float32)
        compile_kernel(k, None, v).launch(n, {"x": x, "y": y})
        for j, name in enumerate(names):
            part = slice(j * n, (j + 1) * n)
            _record(out, f"mathlib/{name}/{v}", {"agree": bitwise_equal(y[part], want[part]), "input_checksums": inputs,
                                                  "reference_checksum": checksum(want[part]),
                                                  "checksum": checksum(y[part]), "output": y[part],
                                                  "first_difference": name})


def part_cli(out: dict, facts: dict):
    base = [sys.executable, "-m", "cohort.cli"]
    runs = (("rmsnorm", "17x65", "packet,workers=2,grain=1"),)
    for name, shape, v in runs:
        p = subprocess.run(base + ["run", name, "--shape", shape, "--variant", v, "--seed", str(SEED), "--json"],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"cohort run {name} {shape} {v}: exit {p.returncode}\n{p.stderr[-2000:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        if not r["agree"]:
            raise SystemExit(f"cohort run {name} {shape} {v}: disagrees: {r}")
        _CASE_SECONDS[f"cli/run/{name}/{shape}/{v}"] = round(time.perf_counter() - _last[0], 2)
        _last[0] = time.perf_counter()
        out[f"cli/run/{name}/{shape}/{v}"] = {"inputs": r["input_checksums"], "reference": r["reference_checksum"],
                                              "checksum": r["checksum"]}


PARTS = {"ops": part_ops, "pool": part_pool, "mathlib": part_mathlib, "cli": part_cli}


def compare(paths_a: list, paths_b: list) -> int:
    def load(paths):
        cases, env = {}, []
        for p in paths:
            with open(p) as f:
                d = json.load(f)
            cases.update(d["cases"])
            env.append(d["target"])
        return cases, env
    a, ea = load(paths_a)
    b, eb = load(paths_b)
    bad = sorted(k for k in a.keys() | b.keys() if k not in a or k not in b)
    differ = [k for k in sorted(a.keys() & b.keys())
              if {f: v for f, v in a[k].items() if f != "raw"} != {f: v for f, v in b[k].items() if f != "raw"}]
    raw = [k for k in sorted(a.keys() & b.keys()) if a[k].get("raw") != b[k].get("raw")]
    print(f"targets: {ea[0]['name']} ({ea[0]['vector_isa']}) vs {eb[0]['name']} ({eb[0]['vector_isa']})")
    print(f"{len(a.keys() & b.keys())} cases in both; {len(bad)} in one only; {len(differ)} differ")
    for k in bad[:20]:
        print(f"  only in {'first' if k in a else 'second'}: {k}")
    for k in differ[:20]:
        print(f"  DIFFERS: {k}: {a[k]} vs {b[k]}")
    if raw:
        print(f"{len(raw)} cases differ only in NaN payloads (checksums canonicalise NaN, DESIGN §3): "
              + ", ".join(raw[:8]) + (" ..." if len(raw) > 8 else ""))
    return 1 if bad or differ else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="ops,pool,mathlib,cli", help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--ops", help="comma-separated operators for the ops part (default: all); "
                    "`--ops-except` takes the others")
    ap.add_argument("--ops-except", help="comma-separated operators the ops part leaves out")
    ap.add_argument("--out", help="write the JSON here (default: stdout)")
    ap.add_argument("--compare", nargs="+", metavar="FILE", help="result files of one machine (all parts)")
    ap.add_argument("--against", nargs="+", metavar="FILE", help="result files of the other machine")
    args = ap.parse_args(argv)
    if bool(args.compare) != bool(args.against):
        ap.error("--compare and --against go together: one machine's result files, then the other's")
    if args.compare:
        return compare(args.compare, args.against)
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; parts are {', '.join(PARTS)}")
    from cohort.refimpl import ops
    only = set(ops.OPERATORS)
    for flag, names in (("--ops", args.ops), ("--ops-except", args.ops_except)):
        given = {n for n in (names or "").split(",") if n}
        if given - set(ops.OPERATORS):
            ap.error(f"{flag}: unknown operator(s) {', '.join(sorted(given - set(ops.OPERATORS)))}")
        if names is not None:
            only = only & given if flag == "--ops" else only - given
    from cohort.backend import target
    _no_code_facts()
    t = target.host()
    out, seconds, facts = {}, {}, {}
    for p in parts:
        t0 = _last[0] = time.perf_counter()
        PARTS[p](out, facts, only) if p == "ops" else PARTS[p](out, facts)
        seconds[p] = round(time.perf_counter() - t0, 1)
    doc = {"target": {**t.describe(), "name": t.name}, "seconds": seconds, "facts": facts,
           "case_seconds": _CASE_SECONDS, "cases": out}
    text = json.dumps(doc, indent=1, sort_keys=True)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text)
        os.replace(args.out + ".tmp", args.out)
    else:
        print(text)
    print(f"{t.name}: {len(out)} cases, seconds per part: {seconds}" + (f", {facts}" if facts else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

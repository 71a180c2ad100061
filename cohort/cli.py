"""The `cohort` command line (DESIGN §9).

Exit codes: 0 agreed/passed (also: a --campaign whose --seeds are all done),
1 a check failed (also: a bench sample that is not a time, a fuzz campaign
that tested nothing), 2 bad usage or bad input (one line, no traceback; a
malformed file is bad input in every command; output paths are checked before
any work), also what the user's environment refused: a full disk, a quota, a
read-only or forbidden path, no memory (cli_options.environment_error), 3 an
internal error (a bug in cohort; set COHORT_DEBUG=1 for the traceback), 130
interrupted (bench and run --save leave no directory behind, fuzz reports what it ran).
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import sys

import numpy as np

from . import cli_check, cli_fuzz, knobs
from . import cli_options as opt
from .cli_options import (
    UsageError,
    comma_list,
    dash_values,
    environment_error,
    int_in_range,
    normalised_shape,
    parse_seed,
    refuse_empty,
    writable_dir,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cohort", description="GPU-style kernels on the CPU, exact by construction.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    o = sub.add_parser("ops", help="operators, signatures, sizes")
    o.add_argument("--json", action="store_true")

    r = sub.add_parser("run", help="run one operator at one shape and check it")
    r.add_argument("op")
    r.add_argument("--shape", required=True, help="e.g. 17x65, or BxHxHkvxSqxSkvxDxDv for attention; every "
                   f"dimension at least 1, every buffer at most {opt.SHAPE_LIMIT} elements")
    r.add_argument("--variant", default="ref",
                   help="ref (the interpreter), a preset (whole, packet, ...), knobs (lanes=1,fast_math=off) "
                        "or a preset with overrides")
    r.add_argument("--seed", default="0", help="input seed (same seed, same inputs, in every process)")
    r.add_argument("--save", metavar="DIR", help="write every input and output as NAME.npy, plus meta.json")
    r.add_argument("--time", action="store_true",
                   help="time the path that was checked (median, microseconds): the native entry when the "
                        "launch runs on the calling thread, else the runtime's native launch entry")
    r.add_argument("--dump", metavar="DIR|regions",
                   help="write the variant's LLVM IR, assembly, code facts and region plan into DIR; `regions` "
                        "prints the region plan instead (what runs per packet, what once per block, the values "
                        "kept per thread across barriers and collectives); a folder named regions is ./regions")
    r.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    bn = sub.add_parser("bench", help="run a benchmark suite; write replay, audit, tables and plot")
    bn.add_argument("suite", help="native, native-mt, private, e2e, torch, grain, api, quick or safety")
    bn.add_argument("--ops", default=None, help="comma-separated operators (default: the suite's)")
    bn.add_argument("--sizes", default=None, help="comma-separated shapes (default: the suite's)")
    bn.add_argument("--rounds", default=None, metavar="R", help=f"rounds, 1 to {opt.MAX_ROUNDS} (default: the suite's)")
    bn.add_argument("--samples", default=None, metavar="S",
                    help=f"samples per round, 1 to {opt.MAX_SAMPLES} (default: the suite's)")
    bn.add_argument("--out", default=None, help="result directory (default: out/SUITE)")
    bn.add_argument("--workers", default=None, metavar="N",
                    help="requested workers for runtime-E2E suites, 1 to 256 (default: the seeds' 8; native "
                         "suites: 1)")
    bn.add_argument("--json", action="store_true")
    bn.add_argument("--allow-unsafe", action="store_true", help="allow columns built with unsafe=on (no bounds checks)")

    t = sub.add_parser("tables", help="re-derive the tables of a replay")
    t.add_argument("replay")

    au = sub.add_parser("audit", help="audit tools")
    ausub = au.add_subparsers(dest="audit_command", required=True, parser_class=_Parser)
    ac = ausub.add_parser("check", help="re-verify a result directory in a fresh process")
    ac.add_argument("dir")
    ac.add_argument("--json", action="store_true")

    f = sub.add_parser("fuzz", help="differential fuzzing: random kernels, every variant vs the interpreter")
    f.add_argument("--family", choices=("threads", "tiles"), default="threads",
                   help="what is generated: cohort kernels checked on the variant matrix (threads, the default), "
                        "or Triton tile programs checked cohort.triton's reference against its native build "
                        "(tiles; needs the triton extra; docs/fuzzing.md)")
    f.add_argument("--strict-nan", action="store_true",
                   help="--family tiles: count f32 NaNs whose bits differ as a mismatch (DESIGN §3 counts every "
                        "NaN equal; cohort.triton's check mode compares bits)")
    f.add_argument("--seconds", default="60", help=f"time box of the campaign, more than 0 and at most "
                                                    f"{opt.MAX_FUZZ_SECONDS} (default 60); a campaign that "
                                                    "completes no program in it exits 1: it tested nothing")
    f.add_argument("--programs", default=None, metavar="N",
                   help=f"stop after N programs, 1 to {opt.MAX_PROGRAMS} (deterministic for the seed; --seconds "
                        "stays a time box)")
    f.add_argument("--seed", default="0", help="campaign seed (same seed, same programs)")
    f.add_argument("--jobs", default="2", help=f"worker processes for compiles, 0 to {opt.MAX_JOBS} (0: run in this "
                                               "process)")
    f.add_argument("--corpus", metavar="DIR", help="where failing cases are written "
                                                   "(default: tests/corpus of the source tree, if present)")
    f.add_argument("--no-shrink", action="store_true", help="report failures as found, unshrunk")
    f.add_argument("--inject", metavar="BUG[,BUG]", default=None,
                   help="testing the fuzzer itself: deliberate backend bug(s) to inject (backend/inject.py)")
    f.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    f.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address (tcp://host:port), or local:N for a "
                        "LocalCluster of N worker processes (needs cohort[cluster])")
    f.add_argument("--campaign", metavar="DIR", help="durable campaign state: seeds done, failures binned with "
                                                     "their shrunk kernels, coverage, throughput per worker; the "
                                                     "same command again resumes (and says so when its "
                                                     "--seeds are all done)")
    f.add_argument("--merge", nargs="+", metavar="DIR", help="merge campaigns over disjoint seeds into --campaign")
    f.add_argument("--seeds", default=None, metavar="N",
                   help=f"run seeds 0..N-1 of the campaign, then stop (N from 1 to {opt.MAX_SEEDS})")
    f.add_argument("--seeds-per-task", default="1", metavar="N",
                   help=f"seeds per Dask task, 1 to {opt.MAX_PER_SEED} (default 1)")
    f.add_argument("--examples-per-seed", default="9", metavar="N",
                   help=f"programs per seed, 1 to {opt.MAX_PER_SEED} (one Hypothesis run each; default 9)")
    f.add_argument("--max-stmts", default="16", metavar="N",
                   help=f"statements per generated kernel, at most (1 to {opt.MAX_STMTS}; default 16)")
    f.add_argument("--variant", action="append", metavar="SPEC",
                   help="run only these variants (repeatable; default: the whole matrix)")
    f.add_argument("--steer", choices=("mixed", "on", "off"), default=None,
                   help="weigh operations, functions and structures this campaign has not covered yet, and "
                        "make its missing rare shapes on purpose: in every other seed (mixed, the default; "
                        "the others draw unsteered), in every seed (on), or never (off)")
    f.add_argument("--variants-per-program", default=None, metavar="N|all",
                   help="variants each program runs: whole plus N-1 chosen to cover the most knob values "
                        f"(N from 1 to {opt.MAX_PER_SEED}; default 4), or all of them (the default with --variant)")
    cli_check.add_parsers(sub)       # check, time: a user's own kernel
    return p


class _Progress:
    """A one-line progress bar on stderr (only on a terminal)."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.tty = sys.stderr.isatty()

    def __call__(self):
        self.done += 1
        if self.tty:
            width = 30
            full = int(width * self.done / self.total)
            sys.stderr.write(f"\r{self.label} [{'#' * full}{'.' * (width - full)}] {self.done}/{self.total}")
            sys.stderr.flush()

    def close(self):
        if self.tty:
            sys.stderr.write("\n")


# ---------------------------------------------------------------- ops

def cmd_ops(args) -> int:
    from .refimpl import ops
    rows = []
    for op in ops.OPERATORS.values():
        rows.append({"op": op.name, "signature": op.signature(), "definition": op.definition,
                     "dims": "x".join(op.dims), "sizes": [ops.fmt_shape(s) for s in op.seed_sizes],
                     "forms": list(ops.forms(op.name)), "oracle_rel_tol": op.rel_tol})
    if args.json:
        print(json.dumps({"operators": rows}))
        return 0
    for r in rows:
        print(f"{r['op']}: {r['signature']}")
        print(f"    {r['definition']}")
        print(f"    shape {r['dims']}; seed sizes: {', '.join(r['sizes'])}")
        print(f"    forms: {', '.join(r['forms'])}")
    return 0


# ---------------------------------------------------------------- run

def _variant(text: str, flag: str = "--variant"):
    """None for the interpreter (`ref`), else a backend Variant."""
    comma_list(flag, text)              # "packet,," is a typo, not packet
    if text.strip() == "ref":
        return None
    from .backend.variant import VariantError, parse_variant
    try:
        return parse_variant(text)
    except VariantError as e:
        raise UsageError(f"{flag} {text!r}: {e}") from None


DUMP_PRINTED = ("regions",)   # `--dump` words printed, not written (verify/opcheck.check_operator)


def cmd_run(args) -> int:
    from .refimpl import ops
    from .verify.opcheck import check_operator
    try:
        op = ops.get(args.op)
    except ops.UnknownOperator as e:
        raise UsageError(str(e)) from None
    try:
        shape = op.parse_shape(args.shape)
    except ops.ShapeError as e:
        raise UsageError(f"--shape: {args.shape}: {e}") from None
    seed = parse_seed(args.seed)
    variant = _variant(args.variant)
    if variant is None and (args.time or args.dump):
        raise UsageError("--time and --dump need a native variant (e.g. --variant whole)")
    if args.dump and args.dump not in DUMP_PRINTED:
        writable_dir("--dump", args.dump)   # before any work: a bad path is found now, not after
    if args.save:
        _save_target("--save", args.save)
    if variant is not None:
        from .backend.compiler import UnsupportedVariant
        from .backend.variant import VariantError
        try:
            result = check_operator(op, shape, seed, variant, timing=args.time, dump=args.dump)
        except UnsupportedVariant as e:
            raise UsageError(str(e)) from None
        except VariantError as e:           # a variant that does not fit this kernel (found compiling it)
            raise UsageError(f"--variant {args.variant!r}: {e}") from None
    else:
        result = check_operator(op, shape, seed, None)
    y = result.pop("output")
    if args.save:
        inputs = op.make_inputs(shape, seed)
        _save(args.save, op, shape, inputs, y, result)
        result["saved"] = os.path.abspath(args.save)
    if args.json:
        print(json.dumps(result))
    else:
        _print_run(op, result)
    return 0 if result["agree"] else 1


def _print_run(op, r: dict):
    from .refimpl import ops
    print(f"{r['op']} {r['shape']} variant={r['variant']} seed={r['seed']}")
    if "unsafe=on" in r["variant"]:
        print("  unsafe build: no bounds checks (an out-of-bounds index is undefined behaviour)")
    print(f"  reference vs float64 oracle: max rel err {r['max_rel_err_vs_oracle']:.3g} "
          f"(bound {r['oracle_rel_tol']:g}), max abs err {r['max_abs_err_vs_oracle']:.3g}")
    if r["variant"] == "ref":
        print(f"  {'agrees' if r['agree'] else 'DISAGREES'}; {op.output} checksum {r['checksum']}")
    else:
        bands = "intact" if all(r["guard_bands"].values()) else \
            "BROKEN: " + ", ".join(n for n, ok in r["guard_bands"].items() if not ok)
        if "row_ulps_vs_interpreter" in r:
            verdict = (f"within {r['row_ulps_vs_interpreter']:g} row-ulps of the interpreter (fast math; "
                       f"bound {ops.get(r['op']).fast_math_ulps:g})" if r["agree"] else
                       f"OUTSIDE the fast-math bound ({r['row_ulps_vs_interpreter']:g} row-ulps)")
        else:
            verdict = "bit-identical to the interpreter" if r["bitwise_equal"] else "DIFFERS from the interpreter"
        print(f"  native {verdict}; guard bands {bands}")
        checked = r.get("launches_checked", 1)
        print(f"  launched via {r.get('launch_path', '?')}"
              + (f"; {checked} launches checked (the policy's trials and its choice): "
                 + ("all agree" if r.get("launches_agree", True) else "one or more DIFFER from the interpreter")
                 if checked > 1 else ""))
        if "first_difference" in r:
            d = r["first_difference"]
            print(f"  first difference at flat index {d['index']}: native {d['native']!r}, "
                  f"reference {d['reference']!r}")
        print(f"  {op.output} checksum {r['checksum']}")
        f = r["facts"]
        cached = " (LLVM's output from the object cache)" if r.get("compile_cached") else ""
        print(f"  compiled in {r['compile_seconds'] * 1e3:.1f} ms{cached}; lanes {f['lanes']}, "
              f"scalar libm calls {f['scalar_libm_calls']}, vector instructions "
              f"{'yes' if f['uses_vector_instructions'] else 'no'}, direct CFG {f['direct_cfg']}")
        if "time_us" in r:
            where = "native entry (the calling thread's compiled entry)" if r["boundary"] == "native_entry" \
                else "runtime E2E: the runtime's native launch entry in the native timer (tasks, pool, wait; no Python)"
            print(f"  {where}: {r['time_us']:.3f} us (median of {len(r['timing_samples_us'])} samples "
                  f"x {r['timing_iters']} calls)")
        if "regions" in r:
            print("  region plan:")
            for line in r["regions"]:
                print(f"    {line}")
        for path in r.get("dumped", []):
            print(f"  wrote {path}")
    if "saved" in r:
        print(f"  saved to {r['saved']}")


def _save_target(flag: str, directory: str):
    """Before any work: `directory` is absent or a directory, and a folder can be made next to it."""
    from .audit.artifacts import OutputError, stage
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{flag} {directory}: exists and is not a directory")
    above = os.path.dirname(os.path.abspath(directory))
    while not os.path.lexists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        raise UsageError(f"{flag} {directory}: {os.strerror(errno.ENOTDIR)} ({above})")
    try:
        os.rmdir(stage(directory))
    except OutputError as e:
        raise UsageError(f"{flag} {e}") from None


def _save(directory: str, op, shape, inputs: dict, y: np.ndarray, result: dict):
    """Every input and the output as NAME.npy, then meta.json, written into a folder next to
    `directory` and moved into it only when complete: a failure (a full disk) leaves nothing."""
    import shutil

    from .audit.artifacts import stage
    from .verify.files import naming, save_npy
    target = os.path.abspath(directory)
    staging = stage(directory)
    try:
        with naming(target):
            for name, a in {**inputs, op.output: y}.items():
                save_npy(os.path.join(staging, f"{name}.npy"), a)
            with open(os.path.join(staging, "meta.json"), "w") as f:
                json.dump({**result, "buffers": {n: list(s) for n, s in op.buffer_shapes(shape).items()},
                           "output": op.output}, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            if not os.path.isdir(target) or not os.listdir(target):
                if os.path.isdir(target):
                    os.rmdir(target)
                os.rename(staging, target)
            else:                       # a directory with files of its own: ours replace theirs, meta.json last
                names = sorted(os.listdir(staging), key=lambda n: n == "meta.json")
                for name in names:
                    os.replace(os.path.join(staging, name), os.path.join(target, name))
    except OSError as e:
        if str(e.filename).startswith(staging):
            e.filename = target          # the user's directory, not our staging folder
        raise
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


# ---------------------------------------------------------------- bench, tables, audit

def cmd_bench(args) -> int:
    from .audit import artifacts, harness, suites
    from .audit.tables import json_cells
    from .audit.validate import InvalidArtifact
    from .refimpl import ops
    try:
        suite = suites.get(args.suite)
    except KeyError as e:
        raise UsageError(e.args[0]) from None
    unsafe = suites.unsafe_columns(suite)
    if unsafe and not args.allow_unsafe:
        raise UsageError(f"suite {suite.name} has unsafe=on columns ({', '.join(unsafe)}): builds with no "
                         f"bounds checks; pass --allow-unsafe to run them")
    only_ops = None if args.ops is None else comma_list("--ops", args.ops)
    for o in only_ops or []:
        try:
            ops.get(o)
        except ops.UnknownOperator as e:
            raise UsageError(f"--ops: {e}") from None
    only_sizes = (None if args.sizes is None
                  else {normalised_shape("--sizes", t) for t in comma_list("--sizes", args.sizes)})
    args.rounds = int_in_range("--rounds", args.rounds, 1, opt.MAX_ROUNDS)
    args.samples = int_in_range("--samples", args.samples, 1, opt.MAX_SAMPLES)
    from .backend.variant import MAX_WORKERS
    args.workers = int_in_range("--workers", args.workers, 1, MAX_WORKERS)
    opt.check_cases(suite.name, only_ops, only_sizes,
                    [ops.fmt_shape(shape) for _, _, shape in harness.select_cases(suite, only_ops)])
    out = args.out or os.path.join("out", suite.name)
    try:
        artifacts.check_output(out)        # before any measuring: where the results go must take them
    except artifacts.OutputError as e:
        raise UsageError(f"--out {e}") from None
    from .audit.environment import dirty_out_reason
    if args.workers not in (None, 1) and suite.boundary == "native_entry":
        raise UsageError(f"--workers: suite {suite.name} times one thread at the native entry")
    refused = dirty_out_reason(out)
    if refused:
        raise UsageError(refused)
    command = "cohort " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("cohort") else \
        f"cohort bench {args.suite}" + (f" --ops {args.ops}" if args.ops is not None else "") + \
        (f" --sizes {args.sizes}" if args.sizes is not None else "")
    bar = _Progress(harness.total_steps(suite, args.rounds, only_ops, only_sizes), f"bench {suite.name}")
    try:
        try:
            run = harness.run_suite(suite, args.rounds, args.samples, only_ops, only_sizes, command=command,
                                    progress=bar, workers=args.workers)
        finally:
            bar.close()
        paths = artifacts.write(out, run)
    except InvalidArtifact as e:            # a sample that is not a time: nothing is written
        print(f"error: bench {suite.name}: {e}; nothing written", file=sys.stderr)
        return 1
    except artifacts.OutputError as e:
        raise UsageError(f"--out {e}") from None
    with open(paths["tables"]) as f:
        text = f.read()
    if args.json:
        print(json.dumps({"suite": suite.name, "out": os.path.abspath(out), "seconds": round(run.seconds, 3),
                          "failures": run.failures, "cells": json_cells(run.replay)}))
    else:
        print(artifacts.tables_body(text))
        for k in ("replay", "audit", "tables", "plot"):
            if k in paths:
                print(f"wrote {paths[k]}")
        if "plot_note" in paths:
            print(paths["plot_note"])
        for f in run.failures:
            print(f"FAILED: {f}")
    return 1 if run.failures else 0


def cmd_tables(args) -> int:
    from .audit.tables import load_replay, render_markdown
    from .audit.validate import InvalidArtifact
    if not os.path.isfile(args.replay):
        raise UsageError(f"{args.replay}: {'not a file' if os.path.exists(args.replay) else 'no such file'}")
    try:
        replay = load_replay(args.replay)
    except InvalidArtifact as e:
        raise UsageError(f"{args.replay} is not a valid replay: {e}") from None
    from .audit.tables import ReplayError
    try:
        text = render_markdown(replay)
    except ReplayError as e:   # e.g. a ratio whose sides made unequal calls per sample
        raise UsageError(f"replay {args.replay} rejected: {e}") from None
    sys.stdout.write(text)
    return 0


def cmd_audit(args) -> int:
    from .audit.check import audit_path, check_directory
    from .audit.validate import InvalidArtifact
    if not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir} is not a directory")
    if not os.path.exists(os.path.join(args.dir, "replay.json.gz")):
        raise UsageError(f"{args.dir} has no replay.json.gz")
    if not audit_path(args.dir):
        raise UsageError(f"{args.dir} has no audit.json (or audit.json.gz)")
    try:
        problems, notes = check_directory(args.dir)
    except InvalidArtifact as e:   # a malformed artifact is bad input (exit 2, as `cohort tables` says of it)
        if args.json:
            print(json.dumps({"dir": os.path.abspath(args.dir), "ok": False,
                              "problems": [f"not a valid audit: {e}"], "notes": []}))
        raise UsageError(f"{args.dir} is not a valid audit: {e}") from None
    if args.json:
        print(json.dumps({"dir": os.path.abspath(args.dir), "ok": not problems, "problems": problems,
                          "notes": notes}))
    else:
        for n in notes:
            print(f"note: {n}")
        for p in problems:
            print(f"PROBLEM: {p}")
        print("audit check passed: every artifact as written (digests), inputs, references, variant outputs "
              "and tables re-derived and equal"
              if not problems else f"audit check FAILED: {len(problems)} problem(s)")
    return 0 if not problems else 1


# ---------------------------------------------------------------- main

COMMANDS = {"ops": cmd_ops, "run": cmd_run, "bench": cmd_bench, "tables": cmd_tables, "audit": cmd_audit,
            "fuzz": cli_fuzz.cmd_fuzz, "check": cli_check.cmd_check, "time": cli_check.cmd_time}


def main(argv=None) -> int:
    from .audit.validate import InvalidArtifact
    from .refimpl.errors import KernelError
    from .refimpl.interpreter import KernelRuntimeError
    from .verify.corpus import CorpusError
    try:
        parser = _parser()
        argv = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(dash_values(parser, argv))
        args.argv = argv                 # as typed: an interrupted campaign prints the command that resumes it
        refuse_empty(parser, args)
        return COMMANDS[args.command](args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (KernelError, KernelRuntimeError, CorpusError, InvalidArtifact, knobs.KnobError) as e:   # bad input
        # (from a file too, or an environment knob's value)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # `cohort ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - the CLI never shows a traceback by default
        env = environment_error(e)
        if env is not None:             # the user's disk, quota, permissions or memory: not our bug
            print(f"error: {env}", file=sys.stderr)
            return 2
        if knobs.DEBUG.get():
            raise
        print(f"internal error: {type(e).__name__}: {e} (a bug in cohort; COHORT_DEBUG=1 shows the "
              "traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())

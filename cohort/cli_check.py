"""`cohort check FILE.py::KERNEL` and `cohort time FILE.py::KERNEL`: a user's own kernel.

`check` runs the kernel once in the interpreter (the definition) and once in each native
build - whole, packets of 4, 8 and 16 lanes, masked packets, the bounds-checked build, the
sanitizing build (backend/lowering/sanitize.py) and the worker pool - each through the one comparison path (verify/compare.verify_build: the
packet builds' lane claims checked by a second interpreter run, buffers between guard
bands, every buffer compared bit for bit, NaN == NaN). A launch the interpreter rejects (a
race, an uninitialised shared read, a write conflict, barrier divergence, an index out of
bounds) is a failed check, reported in the interpreter's words.

Inputs: every buffer is n elements unless `--arg name=LEN[:DTYPE]` says otherwise, or
`--arg name=@FILE.npy` gives its contents. Buffers the kernel only reads are filled from
the seed (f32, f16, bf16: standard normal; i32, u32: integers in [0, n), indices into
launch-sized buffers; bool: coin flips); buffers it writes start at zero (accumulators).
Scalars (`--arg name=VALUE`) and Const parameters (`--const NAME=V`) must all be given.

Exit codes as every command's: 0 every build agrees, 1 a check failed, 2 bad input (one
line: a missing file, a kernel the frontend or validator rejects, a bad --arg).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

import numpy as np

from .cli_options import UsageError, int_in_range

DEFAULT_VARIANTS = ("whole", "lanes=4", "packet", "lanes=16", "packet-masked", "packet,checked=on",
                    "packet,sanitize=on", "packet,grain=1,workers=2", "whole,grain=auto,workers=2")


def add_parsers(sub):
    for name, text in (("check", "check your own @kernel: the interpreter against every native build"),
                       ("time", "time your own @kernel's native entry (after checking it)")):
        c = sub.add_parser(name, help=text)
        c.add_argument("target", metavar="FILE.py::KERNEL")
        c.add_argument("--n", required=True, help="threads to launch")
        c.add_argument("--const", action="append", default=[], metavar="NAME=V", help="a Const parameter's value")
        c.add_argument("--arg", action="append", default=[], metavar="SPEC",
                       help="a buffer's length (name=LEN or name=LEN:DTYPE; default n), its contents "
                            "(name=@FILE.npy), or a scalar's value (name=VALUE)")
        c.add_argument("--seed", default="0", help="input seed (default 0)")
        c.add_argument("--variant", action="append", metavar="SPEC",
                       help="build(s) to check (repeatable; default: " + " ".join(DEFAULT_VARIANTS) + ")"
                       if name == "check" else "the build to time (default packet)")
        if name == "time":
            c.add_argument("--samples", default="21", help="timed samples, 1 to 1000 (default 21)")
        else:
            c.add_argument("--dump", choices=("regions",),
                           help="regions: print the kernel's region plan (what runs per packet, what once per "
                                "block, the values kept per thread across barriers and collectives)")
        c.add_argument("--json", action="store_true", help="print one JSON object")


# ---------------------------------------------------------------- the kernel and its arguments

def load_kernel(target: str):
    """The KernelFunction named by FILE.py::KERNEL (usage errors name what is wrong)."""
    from .refimpl.errors import KernelError
    from .refimpl.frontend import KernelFunction
    path, sep, name = target.rpartition("::")
    if not sep or not path or not name:
        raise UsageError(f"expected FILE.py::KERNEL, got {target!r}")
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"cohort_check_{os.path.basename(path).split('.')[0]}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))     # its own imports of siblings
    try:
        spec.loader.exec_module(module)
    except KernelError:
        raise                      # the frontend's or validator's one line (exit 2)
    except SyntaxError as e:
        raise UsageError(f"{path}, line {e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed to import: their input
        raise UsageError(f"{path}: importing it raised {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
    obj = getattr(module, name, None)
    if not isinstance(obj, KernelFunction):
        found = sorted(k for k, v in vars(module).items() if isinstance(v, KernelFunction))
        what = "defines no" if obj is None else f"has {type(obj).__name__}, not a @kernel, for"
        raise UsageError(f"{path} {what} {name!r}; its kernels: {', '.join(found) or 'none'}")
    return obj


def _pairs(flag: str, items: list) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"{flag} {item!r}: expected NAME=VALUE")
        if key.strip() in out:
            raise UsageError(f"{flag}: {key.strip()} given twice")
        out[key.strip()] = value.strip()
    return out


def _consts(k, given: dict) -> dict:
    names = [p.name for p in k.const_params]
    extra = sorted(set(given) - set(names))
    if extra:
        raise UsageError(f"--const {extra[0]}: the kernel has no Const parameter of that name "
                         f"(its Const parameters: {', '.join(names) or 'none'})")
    missing = [n for n in names if n not in given]
    if missing:
        raise UsageError(f"--const {missing[0]}=V is missing (Const parameters: {', '.join(names)})")
    return {n: int_in_range(f"--const {n}", given[n], -(2 ** 31), 2 ** 31 - 1) for n in names}


def _random(dtype, length: int, n: int, rng) -> np.ndarray:
    from .refimpl.ir import DType
    from .refimpl.semantics import narrow
    if dtype is DType.F32:
        return rng.standard_normal(length).astype(np.float32)
    if dtype is DType.F16:
        return rng.standard_normal(length).astype(np.float16)
    if dtype is DType.BF16:
        return narrow(rng.standard_normal(length).astype(np.float32), DType.BF16)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, length).astype(np.bool_)
    return rng.integers(0, max(n, 1), length).astype(dtype.np)


def _buffer(p, text, n: int, written: bool, rng):
    from .refimpl.ir import DTYPE_BY_NAME
    flag = f"--arg {p.name}"
    if text is not None and text.startswith("@"):
        try:
            a = np.load(text[1:], allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"{flag}: cannot read {text[1:]}: {e}") from None
        want = np.dtype(np.uint16) if p.dtype.value == "bf16" else np.dtype(p.dtype.np)
        if a.ndim != 1 or a.dtype != want:
            raise UsageError(f"{flag}: {text[1:]} holds {a.dtype} {a.shape}; the buffer is 1-D {want}")
        return np.ascontiguousarray(a)
    length = n
    if text is not None:
        size, _, dt = text.partition(":")
        length = int_in_range(flag, size, 0, (1 << 30) - 1)
        if dt and DTYPE_BY_NAME.get(dt.strip()) is not p.dtype:
            raise UsageError(f"{flag}: the kernel's {p.name} is {p.dtype.value}, not {dt.strip()}")
    if written:
        a = _random(p.dtype, length, n, rng)
        return np.zeros_like(a)
    return _random(p.dtype, length, n, rng)


def _scalar(p, text):
    from .refimpl.ir import DType
    if text is None:
        raise UsageError(f"--arg {p.name}=VALUE is missing (a {p.dtype.value} scalar)")
    try:
        if p.dtype is DType.F32:
            return np.float32(float(text))
        v = int(text, 0)
    except ValueError:
        raise UsageError(f"--arg {p.name}: expected a {p.dtype.value} value, got {text!r}") from None
    lo, hi = (0, 2 ** 32 - 1) if p.dtype is DType.U32 else (-(2 ** 31), 2 ** 31 - 1)
    if not lo <= v <= hi:
        raise UsageError(f"--arg {p.name}: {v} does not fit {p.dtype.value}")
    return np.asarray(v, p.dtype.np)[()]


def launch_args(kfn, args):
    """(kernel function, n, consts, launch arguments) from the command's options."""
    from .refimpl.ir import ParamKind
    from .refimpl.launch_check import written_buffers
    k = kfn.ir
    n = int_in_range("--n", args.n, 0, 2 ** 31 - 1 - k.block)
    seed = int_in_range("--seed", args.seed, 0, 2 ** 63 - 1)
    consts = _consts(k, _pairs("--const", args.const))
    given = _pairs("--arg", args.arg)
    names = {p.name for p in k.params if p.kind is not ParamKind.CONST}
    extra = sorted(set(given) - names)
    if extra:
        raise UsageError(f"--arg {extra[0]}: the kernel has no buffer or scalar of that name "
                         f"(its parameters: {', '.join(sorted(names))})")
    written = written_buffers(k)
    out = {}
    for i, p in enumerate(k.params):
        if p.kind is ParamKind.BUFFER:
            out[p.name] = _buffer(p, given.get(p.name), n, p.name in written, np.random.default_rng([seed, i]))
        elif p.kind is ParamKind.SCALAR:
            out[p.name] = _scalar(p, given.get(p.name))
    return n, consts, out, seed


# ---------------------------------------------------------------- check

def cmd_check(args) -> int:
    kfn = load_kernel(args.target)
    n, consts, launch, seed = launch_args(kfn, args)
    result = check_kernel(kfn, n, consts, launch, parsed_variants(args.variant or list(DEFAULT_VARIANTS)))
    result.update(target=args.target, seed=seed)
    if args.dump == "regions":       # the plan every build emits (backend/region_plan.py)
        from .backend.region_plan import plan_regions
        from .refimpl.specialize import specialize
        result["regions"] = plan_regions(specialize(kfn.ir, consts)).describe()
    if args.json:
        print(json.dumps(result))
    else:
        if args.dump == "regions":
            print("region plan:")
            for line in result["regions"]:
                print(f"  {line}")
        for b in result["builds"]:
            if b["status"] not in ("ok", "unsupported"):
                print(f"  {b['variant']}: {b['status']}: {b['detail']}")
        print(result["summary"])
    return 0 if result["ok"] else 1


def parsed_variants(specs) -> list:
    """(spec, Variant) for each --variant text, parsed once here (a bad one: exit 2)."""
    from .backend.variant import VariantError, parse_variant
    out = []
    for s in specs:
        try:
            out.append((s, parse_variant(s)))
        except VariantError as e:
            raise UsageError(f"--variant {s!r}: {e}") from None
    return out


def check_kernel(kfn, n: int, consts: dict, launch: dict, variants) -> dict:
    """The interpreter's run, then every build's verdict against it (never raises for a finding).
    `variants`: (spec, Variant) pairs (parsed_variants)."""
    from .backend.compiler import UnsupportedVariant, compile_kernel
    from .backend.variant import VariantError
    from .refimpl.interpreter import KernelRuntimeError, interpret
    from .verify.compare import verify_build
    name = kfn.ir.name
    head = f"{name} n={n}"
    ref = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in launch.items()}
    t0 = time.perf_counter()
    try:
        interpret(kfn.ir, n, ref, consts)
    except KernelRuntimeError as e:
        return {"kernel": name, "n": n, "ok": False, "interpreter": str(e), "builds": [],
                "summary": f"FAIL {head}: the interpreter rejects this launch: {e}"}
    ref_seconds = time.perf_counter() - t0
    reference = {k: v for k, v in ref.items() if isinstance(v, np.ndarray)}
    builds = []
    for spec, variant in variants:
        rec = {"variant": spec}
        try:
            ck = compile_kernel(kfn, consts, variant, n=n, verify="never")   # verify_build compares
        except (UnsupportedVariant, VariantError) as e:
            builds.append({**rec, "status": "unsupported", "detail": str(e)})
            continue
        v = verify_build(ck, n, launch, reference, label=spec)
        rec.update(status=v.status, detail=v.detail)
        if getattr(ck.last_prepared, "fallback", None):
            rec["fallback"] = ck.last_prepared.fallback
        builds.append(rec)
    ran = [b for b in builds if b["status"] != "unsupported"]
    bad = [b for b in ran if b["status"] != "ok"]
    skipped = len(builds) - len(ran)
    note = f"; {skipped} not applicable" if skipped else ""
    if bad:
        summary = (f"FAIL {head}: {len(bad)} of {len(ran)} builds disagree with the interpreter "
                   f"({', '.join(b['variant'] for b in bad)}){note}")
    else:
        summary = (f"ok {head}: {len(ran)} builds agree with the interpreter bit for bit, guard bands "
                   f"intact ({', '.join(b['variant'] for b in ran)}){note}; interpreter {ref_seconds:.2f} s")
    return {"kernel": name, "n": n, "ok": bool(ran) and not bad, "interpreter": "ok",
            "interpreter_seconds": round(ref_seconds, 4), "builds": builds, "summary": summary}


# ---------------------------------------------------------------- time

def cmd_time(args) -> int:
    from .backend.compiler import UnsupportedVariant, compile_kernel
    kfn = load_kernel(args.target)
    n, consts, launch, seed = launch_args(kfn, args)
    if args.variant and len(args.variant) > 1:
        raise UsageError("--variant: time takes one build")
    spec = args.variant[0] if args.variant else "packet"
    samples = int_in_range("--samples", args.samples, 1, 1000)
    [(spec, variant)] = parsed_variants([spec])
    try:
        check = check_kernel(kfn, n, consts, launch, [(spec, variant)])
        ck = compile_kernel(kfn, consts, variant, n=n, verify="never")
    except UnsupportedVariant as e:
        raise UsageError(f"--variant {spec!r}: {e}") from None
    if not check["ok"]:
        result = {**check, "target": args.target, "seed": seed}
        print(json.dumps(result) if args.json else check["summary"] + " (not timed)")
        return 1
    if ck.policy.on_caller:
        from .backend import timer
        boundary = "native_entry"
        prepared = ck.prepare(n, launch)
        prepared.run()           # a bounds proof that fails switches to the checked build first
        iters = timer.calibrate_iters(prepared.entry, prepared.address)
        ns = timer.time_entry(prepared.entry, prepared.address, iters, samples)
        prepared.raise_error()
    else:
        from .backend import runtime
        boundary = "runtime_e2e"
        native = runtime.NativeLaunch(ck.prepare(n, launch), variant)
        native.launch()
        iters = native.calibrate()
        ns = native.time(iters, samples)
    us = float(np.median(ns)) / 1e3
    result = {"kernel": kfn.ir.name, "target": args.target, "n": n, "seed": seed, "variant": variant.label,
              "boundary": boundary, "time_us": us, "iters": iters,
              "samples_us": [round(v / 1e3, 4) for v in ns], "checked": check["summary"]}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{kfn.ir.name} n={n} [{variant.label}]: median {us:.3f} us per launch ({boundary}, {samples} samples "
              f"of {iters}); checked against the interpreter first: bit-identical")
    return 0

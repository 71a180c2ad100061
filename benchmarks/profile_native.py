"""Where a native launch's time goes, loop by loop: perf's samples mapped onto the kernel's code.

    perf record -e cpu-clock -o /tmp/p.data \\
        python benchmarks/profile_native.py run attention 1x32x32x256x256x128x128 --form fold32 --variant lanes=16
    python benchmarks/profile_native.py report /tmp/p.data

`run` compiles the operator's kernel in the form and variant (one thread, the caller's; every
buffer on a 64-byte line), times the launch (thread CPU time, median of --calls), runs it
again and again for --seconds, and writes the code's bytes and address range next to --out
(default /tmp/cohort_profile). `report`
takes perf's samples inside that range, disassembles the code (objdump), finds its loops (a
branch back to an earlier address), gives each sample to the innermost loop around it and
prints each loop holding at least --min percent of the samples: its share, the milliseconds
that share is of the timed launch, and what it executes per pass (fma, multiplies, gathers,
divisions, broadcasts, vector loads and stores; x86-64 code). A VM without hardware counters
samples on the clock (cpu-clock): a sample may land an instruction or two past the one that
stalled.
"""
import argparse
import bisect
import json
import re
import subprocess
import sys
import time

MNEMONICS = (("fma", re.compile(r"^vfn?m(add|sub)")), ("mul", re.compile(r"^vmulp")),
             ("gather", re.compile(r"^vgather|^vpgather")), ("scatter", re.compile(r"^vscatter|^vpscatter")), ("div", re.compile(r"^vdiv")),
             ("bcast", re.compile(r"^vbroadcast|^vpbroadcast")),
             ("shift (exp's 2^n)", re.compile(r"^vpslld")))


class Failure(Exception):
    """What a run or report cannot do, said in one line."""


def run(a):
    import ctypes

    import numpy as np
    from matmul_forms_paired import aligned  # (benchmarks/: a copy on a 64-byte line, as torch's)

    from cohort.backend.compiler import compile_kernel
    from cohort.refimpl import ops
    op = ops.get(a.op, a.form)
    shape = op.parse_shape(a.shape)
    launch = op.launch(shape)
    bufs = {n: aligned(a) for n, a in ops.allocate(op, shape, op.make_inputs(shape, 0)).items()}
    ck = compile_kernel(op.kernel, launch.consts, a.variant, n=launch.n, verify="never")
    p = ck.prepare(launch.n, {**bufs, **launch.scalars})
    p.run()
    if p.fallback:
        print(f"note: {p.fallback}", file=sys.stderr)
    times = []
    for _ in range(a.calls):
        t0 = time.thread_time_ns()
        p.run()
        times.append(time.thread_time_ns() - t0)
    ms = float(np.median(times)) / 1e6
    end = time.time() + a.seconds
    while time.time() < end:
        p.run()
    for line in open("/proc/self/maps"):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= p.entry < hi:
            open(a.out + ".bin", "wb").write(ctypes.string_at(lo, hi - lo))
            json.dump({"lo": lo, "hi": hi, "ms": ms, "what": f"{a.op} {a.shape} {op.form} {a.variant}"},
                      open(a.out + ".json", "w"))
            print(f"{a.op} {a.shape} form {op.form} variant {a.variant}: {ms:.3f} ms per launch "
                  f"(median of {a.calls}); code {hex(lo)}-{hex(hi)} written to {a.out}.bin")
            return
    raise Failure("the entry's code is in no mapping of this process")


def report(a):
    meta = json.load(open(a.out + ".json"))
    lo, hi = meta["lo"], meta["hi"]
    perf = subprocess.run(["perf", "script", "-i", a.data, "-F", "ip"], capture_output=True, text=True, check=True)
    samples = [int(x, 16) for x in perf.stdout.split()]
    inside = [s for s in samples if lo <= s < hi]
    if not inside:
        raise Failure(f"none of {len(samples)} samples is in the kernel's code ({hex(lo)}-{hex(hi)})")
    dis = subprocess.run(["objdump", "-D", "-b", "binary", "-mi386:x86-64", f"--adjust-vma={hex(lo)}",
                          a.out + ".bin"], capture_output=True, text=True, check=True).stdout
    insns = []                               # (address, mnemonic, operands)
    for line in dis.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\t[0-9a-f ]+\t(\S+)\s*(.*)", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
    addrs = [i[0] for i in insns]
    loops = set()
    for addr, mn, ops_ in insns:
        t = re.match(r"(0x)?([0-9a-f]+)$", ops_.strip())
        if mn.startswith("j") and t and int(t.group(2), 16) < addr:
            loops.add((int(t.group(2), 16), addr))
    share = {}
    for s in inside:
        around = [lp for lp in loops if lp[0] <= s <= lp[1]]
        key = min(around, key=lambda lp: lp[1] - lp[0]) if around else None
        share[key] = share.get(key, 0) + 1
    n = len(inside)
    print(f"{meta['what']}: {meta['ms']:.3f} ms per launch; {n} samples in its code, {len(samples) - n} elsewhere")
    print(f"{'loop':>23} {'bytes':>6} {'share':>6} {'ms':>7}  per pass")
    for key in sorted(share, key=lambda k: (k is None, k)):
        pct = 100.0 * share[key] / n
        if pct < a.min:
            continue
        if key is None:
            print(f"{'outside every loop':>23} {'':>6} {pct:5.1f}% {meta['ms'] * pct / 100:7.3f}")
            continue
        body = insns[bisect.bisect_left(addrs, key[0]):bisect.bisect_right(addrs, key[1])]
        counts = {name: sum(1 for _, mn, _ in body if rx.match(mn)) for name, rx in MNEMONICS}
        vec = [(mn, o) for _, mn, o in body if mn.startswith("vmov") and re.search(r"[xyz]mm", o)]
        counts["vload"] = sum(1 for mn, o in vec if "(" in o.split(",")[0])
        counts["vstore"] = sum(1 for mn, o in vec if "(" in o.split(",")[-1])
        mix = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        print(f"{hex(key[0]) + '-' + hex(key[1])[-4:]:>23} {key[1] - key[0]:6d} {pct:5.1f}% "
              f"{meta['ms'] * pct / 100:7.3f}  {len(body)} instructions: {mix}")
    rest = sum(v for k, v in share.items() if 100.0 * v / n < a.min)
    print(f"{'loops under ' + str(a.min) + '% each':>23} {'':>6} {100.0 * rest / n:5.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("op")
    r.add_argument("shape")
    r.add_argument("--form", default=None)
    r.add_argument("--variant", default="packet")
    r.add_argument("--calls", type=int, default=15)
    r.add_argument("--seconds", type=float, default=6.0)
    r.add_argument("--out", default="/tmp/cohort_profile")
    p = sub.add_parser("report")
    p.add_argument("data")
    p.add_argument("--out", default="/tmp/cohort_profile")
    p.add_argument("--min", type=float, default=1.0)
    a = ap.parse_args()
    from cohort.refimpl import ops
    try:
        run(a) if a.cmd == "run" else report(a)
    except (Failure, ops.ShapeError, ops.UnknownOperator, OSError, subprocess.CalledProcessError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

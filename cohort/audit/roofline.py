"""Physical lower bounds for a measured time, measured on the machine the suite runs on.

- Memory bound (DESIGN §7, physical bounds): the minimal bytes of a launch (every
  input read once, the output written once) at the single-thread copy bandwidth
  of the smallest cache level the working set fits in, or DRAM's: the best of a
  copy with ordinary and one with non-temporal stores over buffers sized for
  the level. Read-only bandwidth is recorded too. A copy is one stream of each
  kind; a kernel that reads more than it writes can beat it a little (a
  time/bound somewhat under 1 in a cache level is possible, not an error).
- Compute bound: the float32 IEEE operations the interpreter counts for the
  launch (`count_flops`: + - * / sqrt min max of active threads, math templates
  included) at the best rate of independent vector adds and multiplies, 8 and
  16 lanes wide. Compares, selects, conversions and integer work are left out
  and a division counts as one operation, so this too is a lower bound.

The bound is the larger of the two; `time / bound` >= 1 says how far a time is
from what this machine could possibly do with this amount of work.
"""
from __future__ import annotations

import os

import numpy as np


def _stream_ir(name: str, unroll: int, body, tail: str = "") -> str:
    """A loop over float index i (step 8*unroll) calling body(j, idx) for each of its vectors."""
    lines = [f"define void @{name}(ptr %args) {{", "entry:", "  %p = load ptr, ptr %args",
             "  %np = getelementptr i64, ptr %args, i64 1", "  %n = load i64, ptr %np",
             "  %qp = getelementptr i64, ptr %args, i64 2", "  %q = load ptr, ptr %qp",
             "  %op = getelementptr i64, ptr %args, i64 3", "  %out = load ptr, ptr %op",
             "  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for j in range(unroll):
        lines.append(f"  %x{j} = add i64 %i, {8 * j}")
    for j in range(unroll):
        lines += body(j, f"%x{j}")
    lines += [f"  %i1 = add i64 %i, {8 * unroll}", "  %more = icmp slt i64 %i1, %n",
              "  br i1 %more, label %loop, label %done", "done:", tail, "  ret void", "}", ""]
    return "\n".join(lines)


_READ_CHAINS = 8          # two loads a cycle need at least 2 x (add latency 3) chains


def _read_body(j, idx):
    return [f"  %a{j} = phi <8 x float> [zeroinitializer, %entry], [%b{j}, %loop]",
            f"  %s{j} = getelementptr float, ptr %p, i64 {idx}",
            f"  %v{j} = load <8 x float>, ptr %s{j}, align 32",
            f"  %b{j} = fadd <8 x float> %a{j}, %v{j}"]


def _copy_body(nt: bool):
    meta = ", !nontemporal !0" if nt else ""
    return lambda j, idx: [f"  %s{j} = getelementptr float, ptr %p, i64 {idx}",
                           f"  %v{j} = load <8 x float>, ptr %s{j}, align 32",
                           f"  %d{j} = getelementptr float, ptr %q, i64 {idx}",
                           f"  store <8 x float> %v{j}, ptr %d{j}, align 32{meta}"]


def _phis_first(ir: str) -> str:
    """LLVM wants a block's phis first: hoist them to the loop header's top."""
    lines = ir.split("\n")
    at = lines.index("loop:") + 1
    phis = [ln for ln in lines[at:] if " = phi " in ln]
    rest = [ln for ln in lines[at:] if " = phi " not in ln]
    return "\n".join(lines[:at] + phis + rest)


def _sum_and_store(n: int) -> str:
    """Every accumulator reaches the stored value (a dead chain's loads would be deleted)."""
    lines, names = [], [f"%b{j}" for j in range(n)]
    while len(names) > 1:
        nxt = []
        for k in range(0, len(names), 2):
            lines.append(f"  %r{len(lines)} = fadd <8 x float> {names[k]}, {names[k + 1]}")
            nxt.append(f"%r{len(lines) - 1}")
        names = nxt
    return "\n".join(lines + [f"  store <8 x float> {names[0]}, ptr %out, align 4"])


_IR = _phis_first(_stream_ir("rl_read", _READ_CHAINS, _read_body, _sum_and_store(_READ_CHAINS))) \
    + _stream_ir("rl_copy", 4, _copy_body(False)) + _stream_ir("rl_copy_nt", 4, _copy_body(True), "  fence seq_cst") \
    + "".join(f"""
define void @rl_flops{w}(ptr %args) "prefer-vector-width"="{32 * w}" "min-legal-vector-width"="{32 * w}" {{
entry:
  %np = getelementptr i64, ptr %args, i64 1
  %n = load i64, ptr %np
  %outp = getelementptr i64, ptr %args, i64 3
  %out = load ptr, ptr %outp
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
""" + "".join(f"""  %a{j} = phi <{w} x float> [splat (float {j}.0), %entry], [%b{j}, %loop]
  %m{j} = phi <{w} x float> [splat (float 1.0), %entry], [%c{j}, %loop]
""" for j in range(10)) + "".join(f"""  %b{j} = fadd <{w} x float> %a{j}, splat (float 0x3E7AD7F2A0000000)
  %c{j} = fmul <{w} x float> %m{j}, splat (float 0x3FF0000020000000)
""" for j in range(10)) + """  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
""" + "".join(f"""  %s{j} = fadd <{w} x float> %b{j}, %c{j}
  %o{j} = getelementptr <{w} x float>, ptr %out, i64 {j}
  store <{w} x float> %s{j}, ptr %o{j}, align 4
""" for j in range(10)) + """  ret void
}
""" for w in (8, 16)) + "\n!0 = !{i32 1}\n"

FLOPS_PER_ITER = 20          # 10 independent adds and 10 multiplies per loop iteration
LEVELS = ("L1", "L2", "L3")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def cache_sizes() -> dict:
    """{'L1': bytes, 'L2': ..., 'L3': ...} of cpu0's data/unified caches (sysfs), as the OS reports them."""
    sizes = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in sorted(os.listdir(base)):
            d = os.path.join(base, idx)
            try:
                level, kind, size = (_read(os.path.join(d, f)) for f in ("level", "type", "size"))
            except OSError:
                continue
            if kind == "Instruction":
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
            sizes[f"L{level}"] = int(size.rstrip("KMG")) * mult
    except OSError:
        pass
    return sizes


def measure(rounds: int = 5) -> dict:
    """This machine's single-thread bandwidth per memory level and peak float32 op rate."""
    from ..backend import jit, timer
    lib = jit.compile_module(_IR, ["rl_read", "rl_copy", "rl_copy_nt", "rl_flops8", "rl_flops16"])
    caches = cache_sizes()
    levels = {}
    plan = [(lvl, caches[lvl] // 2) for lvl in LEVELS if lvl in caches]
    plan.append(("DRAM", max(256 << 20, 8 * caches.get("L3", 32 << 20))))
    for level, pair_bytes in plan:
        n = max(64, pair_bytes // 8 // 32 * 32)          # floats per buffer: src + dst = pair_bytes
        raw = np.zeros(2 * n + 64, np.float32)
        off = (-raw.ctypes.data // 4) % 16                # 64-byte aligned buffers
        src, dst = raw[off:off + n], raw[off + n + 16:off + 2 * n + 16]
        src[:] = 1.0
        sink = np.zeros(8, np.float32)
        args = np.array([src.ctypes.data, n, dst.ctypes.data, sink.ctypes.data], np.int64)
        res = {"buffer_bytes": int(2 * n * 4)}
        for name, fn_name, moved in (("read", "rl_read", 2 * n * 4), ("copy", "rl_copy", 2 * n * 4),
                                     ("copy_nt", "rl_copy_nt", 2 * n * 4)):
            if name == "read":                          # the whole pair read: the same footprint
                args[1] = 2 * n
            fn = lib.addresses[fn_name]
            iters = timer.calibrate_iters(fn, args.ctypes.data, target_ns=5e6)
            best = min(float(np.median(timer.time_entry(fn, args.ctypes.data, iters, 5))) for _ in range(rounds))
            args[1] = n
            res[name] = round(moved / best, 3)          # GB/s: bytes read (+ written) per ns
        res["gb_per_s"] = max(res["copy"], res["copy_nt"])
        res["size_bytes"] = caches.get(level)
        levels[level] = res
    out = np.zeros(10 * 16, np.float32)
    iters_per_call = 4096
    args = np.array([0, iters_per_call, 0, out.ctypes.data], np.int64)
    peak = {}
    for w in (8, 16):
        fn = lib.addresses[f"rl_flops{w}"]
        iters = timer.calibrate_iters(fn, args.ctypes.data, target_ns=2e6)
        best = min(float(np.median(timer.time_entry(fn, args.ctypes.data, iters, 5))) for _ in range(rounds))
        peak[f"lanes{w}"] = round(FLOPS_PER_ITER * w * iters_per_call / best, 3)   # GFLOP/s
    return {"levels": levels, "flops_gflops": peak, "gflops": max(peak.values()),
            "method": "read, copy and non-temporal copy per cache level; independent vector "
                      "adds and multiplies; single thread, native timer"}


def work(op, shape, inputs: dict) -> dict:
    """Minimal bytes and float32 ops of one launch of `op` at `shape` (deterministic)."""
    from ..refimpl import ops as ops_mod
    from ..refimpl.interpreter import count_flops
    launch = op.launch(shape)
    bufs = ops_mod.allocate(op, shape, inputs)
    read = sum(int(np.asarray(inputs[name]).nbytes) for name in inputs)
    written = int(bufs[op.output].nbytes)
    flops = count_flops(op.kernel.ir, launch.n, {**bufs, **launch.scalars}, launch.consts)
    return {"bytes": read + written, "read": read, "written": written, "flops": int(flops)}


def bounds(w: dict, machine: dict) -> dict:
    """The memory and compute bounds (µs) of work `w` on `machine`, and which one binds."""
    level = next((lvl for lvl in LEVELS if lvl in machine["levels"]
                  and w["bytes"] <= (machine["levels"][lvl]["size_bytes"] or 0)), "DRAM")
    mem_us = w["bytes"] / machine["levels"][level]["gb_per_s"] / 1e3
    cpu_us = w["flops"] / machine["gflops"] / 1e3
    return {"level": level, "memory_us": mem_us, "compute_us": cpu_us, "bound_us": max(mem_us, cpu_us),
            "binding": "memory" if mem_us >= cpu_us else "compute"}

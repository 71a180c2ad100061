"""The cooperative operators (issue 24) against PyTorch on this CPU: paired, one thread.

For each case, in rounds whose order rotates (so drift hits every column alike):
cohort's native launch (a prepared entry called from Python, the build `cohort run`
uses: whole blocks specialised, bounds proven) beside eager torch (ATen/oneDNN) and
torch.compile (Inductor) of the same function, each called from Python on the same
inputs. Printed per case: median time of each column and the ratio cohort / best
peer per round (median and range over rounds). matmul also prints GFLOP/s, each one's
fraction of this CPU's FMA peak (measured here: 12 independent chains of vector FMAs
in the host's full register width, one thread) and cohort's rate / eager's per round
(median [range]); cumsum, histogram and transpose print GB/s against the
memory bound (DESIGN §7's roofline probe). `--workers 2` runs cohort in the pool
with 2 workers and torch with 2 threads. Every buffer starts on a 64-byte line, as
torch's allocator places tensors (numpy's large arrays start 16 bytes into one; a b
misaligned so would make matmul's panel rows straddle two lines: measured 1.2x slower
at 1024^3 on the znver3 VM).

    python benchmarks/bench_coop.py [--ops matmul,cumsum,histogram,transpose] [--rounds 7]
        (--ops defaults to the operators tagged cooperative)
        [--workers 1] [--variant packet] [--quick] [--shapes 1024x1040x1024,...]
"""
import argparse
import os
import statistics
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from cohort import Buffer, f32, fma, global_id, kernel  # noqa: E402

CASES = {
    "matmul": [(64, 64, 64), (1024, 1024, 1024), (1, 4096, 4096), (4, 4096, 4096), (32, 4096, 11008),
               (4096, 4096, 32), (257, 511, 129), (1023, 1021, 997)],
    "cumsum": [(64, 64), (1024, 4096), (32, 65537), (4096, 1023)],
    "histogram": [(4096, 64), (1 << 22, 256), (1 << 22, 4096), (1_000_003, 1000)],
    "transpose": [(1, 64, 64), (1, 2048, 2048), (8, 1024, 1000), (1, 4097, 1023)],
}
QUICK = {"matmul": [(64, 64, 64), (256, 256, 256)], "cumsum": [(64, 64), (256, 4096)],
         "histogram": [(4096, 64), (1 << 18, 256)], "transpose": [(1, 64, 64), (1, 512, 512)]}


def torch_fn(name, shape):
    import torch
    if name == "matmul":
        return torch.matmul
    if name == "cumsum":
        return lambda x: torch.cumsum(x, dim=-1)
    if name == "histogram":
        bins = shape[1]
        # torch.bincount refuses out-of-range indices; the operator ignores them, so the
        # peer gets in-range indices (the same counts) - its cost is the count, not a filter
        return lambda idx: torch.bincount(idx, minlength=bins)
    if name == "transpose":
        return lambda x: x.transpose(-1, -2).contiguous()
    from cohort.torch.binding import BINDINGS  # any other operator: its eager torch code
    return BINDINGS[name].reference(shape)


def peer_inputs(name, inputs, shape):
    import torch
    ts = [torch.from_numpy(np.ascontiguousarray(inputs[n])) for n in inputs]
    if name == "histogram":
        ts = [ts[0].clamp(0, shape[1] - 1)]
    return ts


def line_aligned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` starting on a 64-byte boundary (torch's allocator does this; numpy does not)."""
    raw = np.empty(a.nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def timed(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def _fma_chains(block):
    @kernel(block=block)
    def fma_chains(x: Buffer[f32], y: Buffer[f32]):
        g = global_id()
        a0 = x[g]
        a1 = a0 + 1.0
        a2 = a0 + 2.0
        a3 = a0 + 3.0
        a4 = a0 + 4.0
        a5 = a0 + 5.0
        m = x[g + block]
        for i in range(2000):
            a0 = fma(a0, m, 0.5)
            a1 = fma(a1, m, 0.5)
            a2 = fma(a2, m, 0.5)
            a3 = fma(a3, m, 0.5)
            a4 = fma(a4, m, 0.5)
            a5 = fma(a5, m, 0.5)
        y[g] = ((a0 + a1) + (a2 + a3)) + (a4 + a5)
    return fma_chains


def host_lanes() -> int:
    """Floats in one of this CPU's vector registers (16 on AVX-512, 8 on AVX2, 4 on NEON)."""
    from cohort.backend import target
    return max(4, min(16, target.host().vector_bits // 32))


class FmaPeak:
    """One thread's FMA rate in full-width registers: 6 independent fma chains per lane, two
    packets of the host's width side by side (12 vector chains: more than two FMA units x
    4 cycles of latency need). `run(reps)` is a timed column like the others, so the peak is
    measured in the same rounds as matmul (the clock moves with the load on the other core
    and with the vector width in use)."""

    def __init__(self):
        from cohort.backend.compiler import compile_kernel
        lanes = host_lanes()
        n = 2 * lanes * 64
        ck = compile_kernel(_fma_chains(2 * lanes), {}, f"packet,lanes={lanes}", n=n)
        x = np.full(n + 2 * lanes, 0.5, np.float32)
        self.p = ck.prepare(n, {"x": x, "y": np.zeros(n, np.float32)})
        self.p.run()
        self.flop = n * 6 * 2000 * 2

    def gflops(self, seconds: float) -> float:
        return self.flop / seconds / 1e9

    def best(self) -> float:
        return self.gflops(min(timed(self.p.run, 5) for _ in range(5)))


def run_case(name, shape, args, variant):
    import torch

    from cohort.backend import runtime
    from cohort.backend.compiler import compile_kernel
    from cohort.backend.variant import parse_variant
    from cohort.refimpl import ops
    op = ops.get(name)
    if name == "matmul":                  # the form cohort.torch.matmul picks for this shape
        from cohort.backend import target
        from cohort.refimpl.ops.matmul import form_for
        op = op.with_form(form_for(shape, parse_variant(variant).lanes, target.host().vector_bits))
    inputs = {n: line_aligned(np.ascontiguousarray(a)) for n, a in op.make_inputs(shape, 0).items()}
    launch = op.launch(shape)
    v = parse_variant(variant)
    ck = compile_kernel(op.kernel, launch.consts, v, n=launch.n)
    bufs = {n: a if n in inputs else line_aligned(a) for n, a in ops.allocate(op, shape, inputs).items()}
    p = ck.prepare(launch.n, {**bufs, **launch.scalars})
    out = bufs[op.output]
    ours = (lambda: (out.fill(0), runtime.run(p, v))) if name == "histogram" else (lambda: runtime.run(p, v))
    ours()
    if p.fallback is not None:
        print(f"  note: {p.fallback}")
    fn = torch_fn(name, shape)
    ts = peer_inputs(name, inputs, shape)
    with torch.no_grad():
        eager = lambda: fn(*ts)
        call = lambda *xs: fn(*xs)                     # noqa: E731
        # a fresh code object per case: its own Dynamo cache (no recompile limit across sizes)
        call = types.FunctionType(call.__code__.replace(), call.__globals__, "peer", None, call.__closure__)
        comp_fn = torch.compile(call, dynamic=False)
        comp = lambda: comp_fn(*ts)
        eager()
        comp()
        y = eager().numpy().reshape(-1)
        if name != "histogram":      # peers agree with ours (histogram's peer saw clamped indices)
            ref = out.reshape(-1)
            scale = float(np.abs(y).max()) or 1.0
            assert np.abs(ref.astype(np.float64) - y).max() <= 1e-3 * scale, f"{name} {shape}: peer disagrees"
        t1 = timed(ours, 1)
        reps = max(1, min(200, int(0.2 / max(t1, 1e-7))))
        cols = {"cohort": ours, "eager": eager, "inductor": comp}
        if args.peak:        # the FMA probe as a fourth column, as long per round as cohort's
            preps = max(1, round(t1 * reps / timed(args.peak.p.run, 20)))
            cols["peak"] = lambda: [args.peak.p.run() for _ in range(preps)]
        times = {c: [] for c in cols}
        order = list(cols)
        for r in range(args.rounds):
            for c in order[r % len(order):] + order[:r % len(order)]:
                times[c].append(timed(cols[c], reps))
    med = {c: statistics.median(t) for c, t in times.items()}
    ratios = [times["cohort"][i] / min(times["eager"][i], times["inductor"][i]) for i in range(args.rounds)]
    line = (f"{name:9s} {'x'.join(map(str, shape)):>15s} {op.form:6s} cohort {med['cohort'] * 1e3:9.3f} ms  "
            f"eager {med['eager'] * 1e3:9.3f} ms  inductor {med['inductor'] * 1e3:9.3f} ms  "
            f"cohort/best-peer {statistics.median(ratios):5.2f} [{min(ratios):.2f}, {max(ratios):.2f}]")
    if name == "matmul":
        flop = 2.0 * shape[0] * shape[1] * shape[2]
        rate = [times["eager"][i] / times["cohort"][i] for i in range(args.rounds)]   # cohort's rate / torch's
        line += (f"  GFLOP/s cohort {flop / med['cohort'] / 1e9:6.1f} eager {flop / med['eager'] / 1e9:6.1f}"
                 + f"  rate/eager {statistics.median(rate):.2f} [{min(rate):.2f}, {max(rate):.2f}]")
        if args.peak:        # each round's rate against the FMA peak measured in that round
            pk = [args.peak.gflops(times["peak"][i] / preps) for i in range(args.rounds)]
            ours_f = [flop / times["cohort"][i] / 1e9 / pk[i] for i in range(args.rounds)]
            eager_f = [flop / times["eager"][i] / 1e9 / pk[i] for i in range(args.rounds)]
            line += (f"  of peak ({statistics.median(pk):.0f} GFLOP/s [{min(pk):.0f}, {max(pk):.0f}]): cohort "
                     f"{statistics.median(ours_f):.0%} [{min(ours_f):.0%}, {max(ours_f):.0%}] eager "
                     f"{statistics.median(eager_f):.0%} [{min(eager_f):.0%}, {max(eager_f):.0%}]")
    else:
        nbytes = sum(a.nbytes for a in inputs.values()) + out.nbytes
        line += f"  GB/s cohort {nbytes / med['cohort'] / 1e9:6.2f} eager {nbytes / med['eager'] / 1e9:6.2f}"
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=None, help="comma-separated operators (default: the cooperative ones)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--variant", default="packet")
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--shapes", default=None, help="sizes to run instead of the cases, e.g. 1024x1040x1024,64x64x64")
    args = ap.parse_args()
    import torch

    from cohort.refimpl import ops
    args.ops = args.ops or ",".join(op.name for op in ops.tagged("cooperative"))
    from cohort.backend import target
    torch.set_num_threads(args.workers)
    variant = args.variant + (f",workers={args.workers},grain=0" if args.workers > 1 else "")
    print(f"# {target.host().summary()}; torch {torch.__version__}, {args.workers} thread(s); cohort {variant}; "
          f"load {os.getloadavg()[0]:.1f}")
    args.peak = FmaPeak() if "matmul" in args.ops and args.workers == 1 else None
    if args.peak:
        print(f"# FMA peak, one thread (12 chains of {host_lanes()}-lane fma), best of 5 before the cases: "
              f"{args.peak.best():.1f} GFLOP/s; each matmul case times it again in its rounds")
    for name in args.ops.split(","):
        # an operator without sizes of its own here runs at its seed sizes
        shapes = ([ops.get(name).parse_shape(t) for t in args.shapes.split(",")] if args.shapes
                  else (QUICK if args.quick else CASES).get(name, ops.get(name).seed_sizes))
        for shape in shapes:
            run_case(name, shape, args, variant)
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

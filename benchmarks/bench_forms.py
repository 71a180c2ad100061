"""Native-entry times of an operator's two forms and of the private form's two
layouts (issue 12): stream vs private at private=cohort, and the private form
at private=thread vs private=cohort, at one packet width. An A/A control (the
private=cohort build timed as a second column on its own buffers) gives the
noise floor. Rounds in balanced orders, p50 per round, median over rounds;
a ratio is the median of per-round ratios, with its range. Every column is
checked bit for bit against the stream form's interpreter output, guard bands
intact, after each of its rounds.

    python benchmarks/bench_forms.py [--ops rmsnorm,layernorm,swiglu]   (rope: odd C rounded up)
        [--sizes 17x65,257x1538,1024x4097] [--lanes 8] [--rounds 8] [--samples 7]
"""
import argparse
import os

from bench_packet import column  # a timed column at the native entry that checks its own output

from cohort.audit.measure import run_rounds
from cohort.backend import target
from cohort.refimpl import ops


def even_c(text):
    """rope rounds C up to even, as its seed sizes do (17x65 -> 17x66)."""
    r, c = text.lower().split("x")
    return f"{r}x{int(c) + int(c) % 2}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="rmsnorm,layernorm,swiglu")
    ap.add_argument("--sizes", default="17x65,257x1538,1024x4097")
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--samples", type=int, default=7)
    args = ap.parse_args()
    print(target.host().summary())
    print(f"native entry, lanes={args.lanes}, one thread on the caller; load {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds x {args.samples} samples; times us (median of round p50s); "
          f"ratios: median of per-round ratios [min-max]")
    print(f"{'op':10s} {'shape':10s} {'stream':>9s} {'private':>9s} {'thread':>9s} "
          f"{'private/stream':>20s} {'thread/cohort':>20s} {'A/A':>20s}  gathers+scatters c/t")
    for name in args.ops.split(","):
        stream, private = ops.get(name), ops.get(name, form="private")
        for text in args.sizes.split(","):
            shape = stream.parse_shape(even_c(text) if name == "rope" else text)
            inputs = stream.make_inputs(shape, 0)
            ref = ops.run_reference(stream, shape, inputs)
            cohort_v, thread_v = f"lanes={args.lanes},private=cohort", f"lanes={args.lanes},private=thread"
            specs = {"stream": (stream, cohort_v), "private": (private, cohort_v),
                     "thread": (private, thread_v), "private_aa": (private, cohort_v)}
            cols, checks, builds = {}, {}, {}
            for c, (op, v) in specs.items():
                cols[c], checks[c], builds[c] = column(op, shape, inputs, ref, v)
            m = run_rounds(cols, args.rounds, args.samples, "native_entry", between=lambda c, r: checks[c]())
            cells = []
            for cand, base in (("private", "stream"), ("thread", "private"), ("private_aa", "private")):
                p = m.paired(cand, base)
                cells.append(f"{p['ratio']:6.3f} [{p['min']:.3f}-{p['max']:.3f}]")
            gs = "/".join(str(builds[c].facts["gathers"] + builds[c].facts["scatters"]) for c in ("private", "thread"))
            us = [m.time_ns(c) / 1e3 for c in ("stream", "private", "thread")]
            print(f"{name:10s} {ops.fmt_shape(shape):10s} {us[0]:9.2f} {us[1]:9.2f} {us[2]:9.2f} "
                  f"{cells[0]:>20s} {cells[1]:>20s} {cells[2]:>20s}  {gs}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

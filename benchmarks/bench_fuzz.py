"""Fuzz throughput (programs per second) on the same seeds, by how the campaign runs:

    pool:J      today's default: this process draws, J local worker processes compile
                (the variants of one program split over them)
    local:N     a Dask LocalCluster of N worker processes (`--scheduler local:N`)
    workers:N   a `dask scheduler` and N separate `dask worker` processes on 127.0.0.1,
                started here, the campaign run through `--scheduler tcp://...`

Every mode runs seeds 0..K-1 of the same campaign seed (the same programs), shrinking off,
no corpus. Printed per mode: programs, wall seconds (connecting and starting workers
included), programs/s over the wall, and per worker its programs over its busy seconds
(the per-core rate). Run on a quiet machine for numbers to compare; the modes run one
after another, so a load that changes between them shows.

With --per-program, every mode runs once per setting of `variants_per_program`
(fuzz/rotation.py): `all` is the whole applicable matrix on every program.

    python benchmarks/bench_fuzz.py [--seeds 4] [--seed 11] [--modes pool:1,local:1,local:2,workers:2]
        [--per-program all,6]
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_workers(n: int):
    """(address, processes) of a scheduler and n single-threaded workers on the loopback address."""
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              **quiet)]
    procs += [subprocess.Popen([dask, "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                                "--host", "127.0.0.1"], **quiet) for _ in range(n)]
    from distributed import Client
    with Client(address, timeout=60) as c:
        c.wait_for_workers(n, timeout=120)
    return address, procs


def stop(procs):
    for p in reversed(procs):
        p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


def run_mode(mode: str, seeds: int, seed: int, per_program=None) -> dict:
    from cohort.verify.fuzz import run_campaign
    kind, _, n = mode.partition(":")
    n = int(n or 1)
    kw = dict(seeds=seeds, shrink=False, corpus_dir=None, variants_per_program=per_program)
    procs = []
    t0 = time.monotonic()
    try:
        if kind == "pool":
            r = run_campaign(1e6, seed, jobs=n, **kw)
        elif kind == "local":
            r = run_campaign(1e6, seed, scheduler=f"local:{n}", **kw)
        elif kind == "workers":
            address, procs = start_workers(n)
            t0 = time.monotonic()              # the cluster exists before the campaign, as in use
            r = run_campaign(1e6, seed, scheduler=address, **kw)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    finally:
        stop(procs)
    wall = time.monotonic() - t0
    return {"mode": mode, "per_program": per_program or "all", "programs": r["programs"], "variant_runs": r["variant_runs"], "wall_seconds": round(wall, 1),
            "programs_per_second": round(r["programs"] / wall, 3), "mismatches": r["mismatches"],
            "failures": [f"{f['kind']} on {f['variant']}: {f['description'][:300]}" for f in r["failures"]],
            "workers": r.get("worker_rates", {})}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--modes", default="pool:1,local:1,local:2,workers:2")
    ap.add_argument("--per-program", default="all",
                    help="comma-separated variants-per-program settings, each run in every mode (all = the matrix)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    print(f"{'mode':12s} {'per prog':>8s} {'programs':>8s} {'variant runs':>12s} {'wall s':>8s} {'programs/s':>10s}  per worker "
          f"(programs / busy s)", flush=True)
    settings = [None if v == "all" else int(v) for v in a.per_program.split(",")]
    for mode, per_program in [(m, p) for m in a.modes.split(",") for p in settings]:
        row = run_mode(mode, a.seeds, a.seed, per_program)
        rows.append(row)
        per = ", ".join(f"{v['programs']}/{v['seconds']:.0f}s={v['programs_per_second']:.2f}"
                        for v in row["workers"].values())
        print(f"{mode:12s} {str(row['per_program']):>8s} {row['programs']:8d} {row['variant_runs']:12d} {row['wall_seconds']:8.1f} "
              f"{row['programs_per_second']:10.3f}  {per}", flush=True)
        for f in row["failures"]:        # on a clean backend, a finding (or a worker killed from outside)
            print(f"    FAILURE {f}", flush=True)
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()

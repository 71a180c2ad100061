"""Fuzz campaigns on a real Dask cluster (issue 17): a `dask scheduler` and two `dask worker`
processes on the loopback address, started and stopped here. A campaign runs through
`cohort fuzz --scheduler`; one worker is killed mid-campaign; the campaign completes on the
other, loses no finished seed, and a resumed run adds to the same state."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASK = os.path.join(os.path.dirname(sys.executable), "dask")
SMALL = ["--examples-per-seed", "2", "--max-stmts", "3", "--variant", "whole", "--no-shrink", "--seconds", "600",
         "--json"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


@pytest.fixture
def cluster(tmp_path):
    if not os.path.exists(DASK):
        pytest.skip("no `dask` command next to this Python")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = []
    procs = {}

    def start(name, *argv, **extra):
        log = open(tmp_path / f"{name}.log", "w")
        logs.append(log)
        procs[name] = subprocess.Popen([DASK, *argv], stdout=log, stderr=subprocess.STDOUT, env=env(**extra))

    start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")
    for name in ("a", "b"):       # no nanny: a killed worker stays dead
        start(name, "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-nanny", "--no-dashboard",
              "--host", "127.0.0.1", "--name", name, COHORT_FUZZ_TEST_SEED_DELAY="0.7")
    from distributed import Client
    with Client(address, timeout=60) as c:
        c.wait_for_workers(2, timeout=120)
    try:
        yield address, procs
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=5)       # a worker mid-task can ignore SIGINT for long: killed below
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def seed_lines(directory) -> list:
    path = os.path.join(directory, "log.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f.read().splitlines(True) if '"type":"seed"' in line]


def fuzz(address, directory, seeds: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cohort.cli", "fuzz", "--scheduler", address, "--campaign",
                             str(directory), "--seeds", str(seeds), *SMALL], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env())


def test_campaign_survives_a_killed_worker_and_resumes(cluster, tmp_path):
    address, procs = cluster
    directory = tmp_path / "campaign"
    run = fuzz(address, directory, 6)
    deadline = time.monotonic() + 300
    while not seed_lines(directory) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    before = seed_lines(directory)
    procs["a"].kill()                        # mid-campaign: worker a dies with the tasks it holds
    procs["a"].wait()
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    assert 1 <= len(before) < 6, before      # the kill landed mid-campaign
    report = json.loads(out.strip().splitlines()[-1])
    after = seed_lines(directory)
    assert after[:len(before)] == before                         # no finished seed lost or rewritten
    seeds = [json.loads(line)["index"] for line in after]
    assert sorted(seeds) == list(range(6)), seeds                 # every seed once
    c = report["campaign"]
    assert c["seeds_done"] == 6 and report["mismatches"] == 0 and report["programs"] >= 6
    b = f":{procs['b'].pid}"                  # the survivor ran what was left (worker names are host:pid)
    assert any(json.loads(line)["worker"].endswith(b) for line in after[len(before):])
    # the same command with more seeds resumes: the finished ones are not run again
    out, err = fuzz(address, directory, 7).communicate(timeout=300)
    report = json.loads(out.strip().splitlines()[-1])
    final = seed_lines(directory)
    assert final[:len(after)] == after
    assert sorted(json.loads(line)["index"] for line in final) == list(range(7))
    assert report["campaign"]["seeds_this_run"] == 1 and report["campaign"]["seeds_done"] == 7


def test_a_failure_ends_its_task_at_once_and_its_seed_stays_undone(cluster, tmp_path):
    """stop_on_failure (the mutation check): the task returns at the failing program rather
    than after its seed's last one, the failure is kept, and the seed is not marked done (its
    later programs never ran), so a resumed campaign runs it again."""
    from cohort.verify.fuzz import run_campaign
    address, _ = cluster
    directory = tmp_path / "bug"
    r = run_campaign(300, seed=0, scheduler=address, bugs=("tree_order",), stop_on_failure=True, shrink=False,
                     corpus_dir=None, campaign_dir=str(directory), batch=9, max_stmts=8,
                     variants=("lanes=8,full_packet=on,predicated=on,private=cohort",))
    assert r["failures"], r
    failing = r["failures"][0]["seed"]
    done = [json.loads(line)["seed"] for line in seed_lines(directory)]
    assert failing not in done
    bins = os.listdir(directory / "mismatches")
    assert bins and all(name.endswith(".json") for name in bins)

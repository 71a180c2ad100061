"""Campaigns on a Dask distributed cluster: `cohort fuzz --scheduler ADDRESS` (an
existing scheduler, e.g. `dask scheduler` + `dask worker`s) or `--scheduler local:N`
(a LocalCluster of N worker processes).

A task is a batch of seeds (`seeds_per_task`). A Dask worker draws each seed's
programs itself (the same Hypothesis run the local campaign draws for that
seed) and runs every program's variants in a compile process of its own
(workers.WorkerPool: an LLVM crash or a hang costs one variant run, reported as
a finding, and the Dask worker lives on; the backend's caches stay per
process). It returns one result per program; the driver (this process) keeps
each program once, commits each seed to the campaign directory as it arrives,
and keeps every failure at once. A Dask worker that dies takes its tasks with
it: the scheduler runs them elsewhere; a task that keeps killing workers
(Dask's allowed-failures) is split into single seeds, and a single seed that
still does is recorded as a `crash` finding. Failures are shrunk at the end,
each shrink step a task on the cluster (shrink.py).
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
import warnings
from collections import deque
from typing import Optional

from ... import knobs
from .. import corpus
from ..gen import Steering
from ..matrix import rerun_sensitive, shrink_cost, variants_for
from .config import CampaignConfig, seed_steered
from .coverage import Coverage
from .rotation import draw_variants
from .shrink import shrink_found
from .state import CampaignState, seed_value
from .stress import STRESS, needs_stress
from .summary import campaign_summary, session_report
from .tally import Tally, checksum_bins

# ---------------------------------------------------------------- on the workers

TIME_BOX_GRACE = 30.0              # seconds the driver waits at the time box for tasks to return
WORKERS_EVERY = 1.0                # seconds between the driver's asks for the scheduler's workers
WAKE_EVERY = 0.5                   # the driver wakes at least this often (time box, progress)
_local = threading.local()         # one compile process per Dask worker thread
_seen: set = set()                 # programs this worker process has run (every seed's first is the same)
# (wall time, coverage counts) of the programs this worker process ran lately: a steered seed adds
# the ones the driver had not heard of when it made the task, so the steering is as fresh here as
# in a local campaign (the driver hears of a program only when its task ends)
_ran: deque = deque(maxlen=512)


def steering_for(spec: dict, index: int):
    """The Steering seed `index` of a task is drawn under (None: unsteered): the driver's coverage
    when it made the task, plus what this worker ran since."""
    if "coverage" not in spec or not seed_steered(index, True, spec["plain_every"]):
        return None
    cov = Coverage().add(spec["coverage"])
    for when, counts in list(_ran):
        if when > spec["covered_at"]:
            cov.add(counts)
    return Steering.from_report(cov.report())


def _pool(bugs: tuple, timeout: float):
    from .workers import WorkerPool
    pool = getattr(_local, "pool", None)
    if pool is None or pool.bugs != bugs:
        if pool is not None:
            pool.close()
        pool = _local.pool = WorkerPool(1, bugs, timeout=timeout)
    return pool


def draw_seed(hseed: int, examples: int, max_stmts: int, steer=None, each=None) -> list:
    """The programs of one seed: the campaign's Hypothesis run for it (under `steer`, a
    gen.Steering or None), drawn without running them; `each(case)` sees each as it is drawn."""
    from hypothesis import given, seed
    from hypothesis.errors import HypothesisDeprecationWarning

    from ..gen import cases
    from .shrink import hypothesis_settings
    out = []

    def keep(case):
        out.append(case)
        if each is not None:
            each(case)
    with warnings.catch_warnings():
        # the Dask worker's own threads use the `random` module while Hypothesis draws
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        hypothesis_settings(examples, False)(seed(hseed)(given(cases(max_stmts=max_stmts, steer=steer))(keep)))()
    return out


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_seeds(seeds: list, spec: dict) -> dict:
    """A Dask task: every program of each (index, seed), checked; one result per program.
    Each program goes to the compile process as soon as Hypothesis has drawn it, so the
    drawing of the next ones overlaps its run (workers.WorkerPool.submit)."""
    pool = _pool(tuple(spec["bugs"]), spec["timeout"])
    delay = knobs.FUZZ_TEST_SEED_DELAY.get()   # tests: a worker to kill mid-task
    out = []
    for index, hseed in seeds:
        time.sleep(delay)
        programs = []
        steer = steering_for(spec, index)
        queued = []                  # (case, key, skipped matrix variants, pending run, when queued)

        def submit(case):
            key = corpus.case_key(case)
            if key[:16] in _seen or any(q[1] == key for q in queued):
                return
            applicable = variants_for(case, spec["variants"])
            variants = (draw_variants(applicable, key, spec.get("per_program"), rerun_sensitive(case, applicable))
                        + ([STRESS] if needs_stress(case) else []))
            queued.append((case, key, len(spec["variants"]) - len(applicable), pool.submit(case, variants),
                           time.monotonic()))
        draw_seed(hseed, spec["examples"], spec["max_stmts"], steer, each=submit)
        for i, (case, key, skipped, pending, t0) in enumerate(queued):
            if abandoned(spec):          # the campaign is over: the seed is not done, but the
                for q in queued[i:]:     # programs it finished count (as a local campaign's do)
                    q[3].cancel()
                return {"worker": worker_name(), "seeds": out, "abandoned": True,
                        "partial": {"index": index, "seed": hseed, "programs": programs}}
            res = pending.result()
            t = Tally()
            fails = t.program(case, key, res, skipped)
            t.seconds = time.monotonic() - t0
            _seen.add(key[:16])
            _ran.append((time.time(), t.coverage.counts()))
            failures = []
            if fails:
                v, rec = min(fails, key=lambda f: (f[0] == STRESS, shrink_cost(f[0]) if f[0] != STRESS else ()))
                failures.append({"kind": rec["status"], "variant": v, "description": rec.get("detail", ""),
                                 "failing_variants": [f[0] for f in fails], "bins": checksum_bins(res),
                                 "seed": hseed, "key": key, "case": corpus.case_to_json(case),
                                 "steer": steer.to_json() if steer is not None else None,
                                 "found_by": worker_name(), "shrunk": False})
            programs.append({"key": key[:16], "tally": t.to_json(), "failures": failures})
            if failures and spec.get("stop_on_failure"):   # report now, not when the task ends;
                for q in queued[i + 1:]:
                    q[3].cancel()
                return {"worker": worker_name(), "seeds": out,  # the seed stays undone
                        "partial": {"index": index, "seed": hseed, "programs": programs}}
        out.append({"index": index, "seed": hseed, "programs": programs})
    return {"worker": worker_name(), "seeds": out}


def abandoned(spec: dict) -> bool:
    """Past the campaign's time box, or the driver said stop (a failure found, Ctrl-C):
    a cancelled Dask task runs on unless it looks."""
    if time.time() >= spec["deadline"]:
        return True
    from distributed import Event
    return Event(spec["stop"]).is_set()


def run_case(case_doc: dict, variants: list, spec: dict) -> dict:
    """A Dask task: one case on the listed variants (a shrink step)."""
    return _pool(tuple(spec["bugs"]), spec["timeout"]).run(corpus.case_from_json(case_doc), variants)


# ---------------------------------------------------------------- the driver

class SchedulerUnavailable(RuntimeError):
    """No scheduler at the address, or no worker joined it in time."""


def connect(scheduler: str):
    """(client, cluster or None) for an address or local:N."""
    import logging

    from distributed import Client, LocalCluster
    # a lost connection is reported in one line (ClusterCampaign.report), not as Dask's tracebacks
    for name in ["distributed"] + [n for n in logging.root.manager.loggerDict if n.startswith("distributed.")]:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if scheduler.startswith("local:"):
        import dask
        # Dask's own background work, measured idle on the 2-core VM (CPU s per minute): each
        # worker's statistical profiler and 20 ms event-loop tick 2.6, the in-process scheduler
        # 3.4; with these 0.7 and 1.8 (docs/fuzzing.md). Neither is used: no dashboard, and
        # the tick only times how long the event loop was blocked.
        dask.config.set({"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "500ms"})
        n = int(scheduler.split(":", 1)[1])
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout=30), None
    except (OSError, TimeoutError, ValueError) as e:
        raise SchedulerUnavailable(f"cannot connect ({type(e).__name__}: {e})") from None


class ClusterCampaign:
    def __init__(self, cfg: CampaignConfig, state: Optional[CampaignState] = None):
        self.cfg, self.state = cfg, state
        self.session = Tally()
        self.keys: set = set(state.keys) if state else set()
        self.failures: list = []            # found this run (records as the report shows them)
        self.pending: list = []             # failure entries whose bins want a shrunk kernel
        self.seeds_done = 0
        self.interrupted = False
        self.stopped = False
        self.lost: Optional[str] = None     # why the scheduler was lost, if it was
        self.workers_seen: set = set()      # the scheduler's workers now
        self.workers_ever: set = set()      # ... and every one that took part
        self.workers_lost = 0
        self.tasks_split = 0
        self.next_index = 0
        self.last_progress = 0.0
        self.done_local: set = set()
        self.stop_name = f"cohort-fuzz-stop-{uuid.uuid4().hex}"
        self.worker_rates: dict = {}        # Dask worker -> programs and busy seconds this run

    def spec(self) -> dict:
        return {"bugs": list(self.cfg.bugs), "timeout": 120.0, "examples": self.cfg.examples(),
                "max_stmts": self.cfg.max_stmts, "variants": list(self.cfg.variants),
                "per_program": self.cfg.variants_per_program, "plain_every": self.cfg.plain_every,
                "stop_on_failure": self.cfg.stop_on_failure,
                "deadline": time.time() + self.cfg.seconds - self.elapsed(), "stop": self.stop_name}

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def is_done(self, hseed: int) -> bool:
        return hseed in self.done_local or (self.state is not None and self.state.is_done(hseed))

    def time_up(self) -> bool:
        if self.stopped or self.elapsed() >= self.cfg.seconds:
            return True
        return self.cfg.max_programs is not None and self.session.programs >= self.cfg.max_programs

    def next_batch(self) -> list:
        batch = []
        while len(batch) < self.cfg.seeds_per_task:
            if self.cfg.seeds is not None and self.next_index >= self.cfg.seeds:
                break
            hseed = seed_value(self.cfg.seed, self.next_index)
            if not self.is_done(hseed):
                batch.append((self.next_index, hseed))
            self.next_index += 1
        return batch

    # ------------------------------------------------------------ results
    def take(self, result: dict):
        worker = result["worker"]
        rate = self.worker_rates.setdefault(worker, {"programs": 0, "seconds": 0.0})
        for s in result["seeds"]:
            self.commit(s["index"], s["seed"], self.programs(s["programs"], rate), worker)
        part = result.get("partial")
        if part:      # a seed cut at its first failure (stop_on_failure): counted, not done
            self.session.add(self.programs(part["programs"], rate))

    def programs(self, programs: list, rate: dict) -> Tally:
        """The tally of a task's programs not seen before; their failures recorded."""
        tally = Tally()
        for p in programs:
            t = Tally.from_json(p["tally"])
            rate["seconds"] += t.seconds
            if p["key"] in self.keys:       # run before (another worker, an earlier run)
                continue
            rate["programs"] += t.programs
            self.keys.add(p["key"])
            tally.add(t)
            for f in p["failures"]:
                self.found(f)
        return tally

    def commit(self, index, hseed: int, tally: Tally, worker: str):
        self.done_local.add(hseed)
        self.session.add(tally)
        self.seeds_done += 1
        if self.state is not None:
            self.state.commit_seed(hseed, index, tally, worker)

    def found(self, f: dict):
        f = {**f, "found_after_seconds": round(self.elapsed(), 2)}
        first = True
        if self.state is not None:
            b, first = self.state.add_failure(f)
            first = first and b not in self.state.shrunk
            f["bin"] = b
        if first:
            self.pending.append(f)
        self.failures.append(f)
        if self.cfg.stop_on_failure:
            self.stopped = True

    def crashed(self, index, hseed: int, error: str):
        """A seed whose task kept killing Dask workers: a finding (no program result survives)."""
        f = {"kind": "crash", "variant": "?", "description": f"seed {hseed}: {error}", "failing_variants": [],
             "bins": {}, "seed": hseed, "key": f"seed-{hseed}", "case": None, "shrunk": False}
        self.failures.append({**f, "found_after_seconds": round(self.elapsed(), 2)})
        if self.state is not None:
            self.state.add_failure(f)
        tally = Tally()
        tally.mismatches, tally.failing_programs = 1, 1
        tally.failure_kinds["crash"] += 1
        self.commit(index, hseed, tally, "?")

    # ------------------------------------------------------------ driver
    def progress(self, final=False):
        if not self.cfg.progress:
            return
        now = time.monotonic()
        if not final and now - self.last_progress < 0.5:
            return
        self.last_progress = now
        el, s = self.elapsed(), self.session
        gaps = len(s.coverage.report()["gaps"]) if final or s.programs else "-"
        sys.stderr.write(f"\rfuzz {el:6.1f}s/{self.cfg.seconds:.0f}s  seeds {self.seeds_done}  programs "
                         f"{s.programs} ({s.programs / max(el, 1e-9):.2f}/s)  workers {len(self.workers_seen)}  "
                         f"mismatches {s.mismatches}  coverage gaps {gaps}   " + ("\n" if final else ""))
        sys.stderr.flush()

    def run(self) -> dict:
        from distributed import KilledWorker, wait
        self.t0 = time.monotonic()
        client, cluster = connect(self.cfg.scheduler)
        inflight: dict = {}
        retry: list = []
        try:
            try:
                client.wait_for_workers(1, timeout=120)
            except (OSError, TimeoutError) as e:
                raise SchedulerUnavailable(f"no worker joined in 120 s ({e})") from None
            from distributed import Event
            stop = Event(self.stop_name, client=client)
            spec = self.spec()
            asked = -1.0
            while True:
                if time.monotonic() - asked >= WORKERS_EVERY or not inflight:
                    asked = time.monotonic()       # an RPC to the scheduler: not at every pass
                    workers = client.scheduler_info().get("workers")
                if workers is None or client.status in ("closing", "closed"):
                    raise ConnectionError(f"the client lost the scheduler (client {client.status})")
                lost = self.workers_seen - set(workers)
                self.workers_lost += len(lost)
                self.workers_seen = (self.workers_seen - lost) | set(workers)
                self.workers_ever |= set(workers)
                while not self.time_up() and len(inflight) < max(2 * len(workers), 2):
                    batch = retry.pop() if retry else self.next_batch()
                    if not batch:
                        break
                    if self.cfg.steer:     # what the campaign has covered when the task leaves
                        spec["coverage"], spec["covered_at"] = self.session.coverage.counts(), time.time()
                    inflight[client.submit(run_seeds, batch, dict(spec), pure=False)] = batch
                if not inflight or (self.time_up() and self.stopped):
                    break
                if self.time_up() and self.elapsed() >= self.cfg.seconds:
                    break
                for fut in [f for f in inflight if f.done()]:
                    batch = inflight.pop(fut)
                    if fut.status == "finished":
                        self.take(fut.result())
                    elif fut.status == "error" and isinstance(fut.exception(), KilledWorker):
                        if len(batch) > 1:          # find the seed that kills workers
                            self.tasks_split += 1
                            retry.extend([b] for b in batch)
                        else:
                            self.crashed(*batch[0], f"its task killed the Dask workers that ran it "
                                                    f"({fut.exception()})")
                    elif fut.status == "error":
                        raise fut.exception()
                    else:                            # cancelled: the scheduler lost it
                        retry.append(batch)
                self.progress()
                if inflight:       # until a task ends (no polling: 5 CPU s a minute at 10 Hz)
                    try:
                        wait(list(inflight), timeout=WAKE_EVERY, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        pass
            if not self.stopped and inflight:   # the time box: tasks return what they finished
                self.collect_at_time_box(inflight)  # (a task's programs arrive only when it ends)
            stop.set()                           # running seed tasks end after their current program
            for fut in inflight:
                fut.cancel()
            inflight = {}
            self.shrink_pending(client, spec)
        except KeyboardInterrupt:
            self.interrupted = True
        except SchedulerUnavailable:
            raise
        except (OSError, TimeoutError) as e:         # the scheduler went away (CommClosedError is an OSError)
            self.lost = f"{type(e).__name__}: {e}"
        finally:
            for fut in inflight:
                fut.cancel()
            try:
                client.close(timeout=10)
                if cluster is not None:
                    cluster.close(timeout=10)
            except Exception:  # noqa: BLE001 - closing a lost connection may fail; the state is safe
                pass
            self.progress(final=True)
        return self.report()

    def collect_at_time_box(self, inflight: dict):
        """The programs that tasks running at the end of the time box finished: each task ends at
        its next program (run_seeds: `abandoned`) and returns them as a partial seed. Waits at
        most TIME_BOX_GRACE seconds; a task still running then is dropped."""
        from distributed import wait
        try:
            wait(list(inflight), timeout=TIME_BOX_GRACE, return_when="ALL_COMPLETED")
        except TimeoutError:
            pass
        for fut in [f for f in inflight if f.status == "finished"]:
            inflight.pop(fut)
            self.take(fut.result())

    def shrink_pending(self, client, spec):
        if not self.cfg.shrink:
            return
        run = lambda case, variants, *a: client.submit(  # noqa: E731
            run_case, corpus.case_to_json(case), list(variants), spec, pure=False).result()
        for f in self.pending[:self.cfg.max_shrinks]:
            if f.get("case") is None or f.get("variant") == STRESS:    # another program's launch
                continue
            case, stats, sh = shrink_found(run, f, self.cfg.shrink_seconds, self.cfg.examples(), self.cfg.max_stmts)
            f.update(stats)
            f["description"] = sh.description(f["description"])
            res = run(case, variants_for(case, self.cfg.variants))
            if not res["discard"]:
                f["bins"] = checksum_bins(res)
            if self.state is not None:
                self.state.add_shrunk(f["bin"], {**f, "case": corpus.case_to_json(case)})
            f["shrunk_case"] = case

    def report(self) -> dict:
        from ...refimpl.printer import format_kernel
        failures = []
        for f in self.failures:
            case = f.pop("shrunk_case", None)
            if case is None and f.get("case"):
                case = corpus.case_from_json(f["case"])
            rec = {k: v for k, v in f.items() if k != "case"}
            rec["kernel"] = format_kernel(case.kernel) if case is not None else ""
            rec["case"] = case.describe() if case is not None else f["description"]
            failures.append(rec)
        r = session_report(self.cfg, self.session, self.elapsed(), failures, self.interrupted)
        r.update(scheduler=self.cfg.scheduler, workers=len(self.workers_ever), workers_lost=self.workers_lost,
                 tasks_split=self.tasks_split, seeds_this_run=self.seeds_done,
                 worker_rates={w: {"programs": v["programs"], "seconds": round(v["seconds"], 2),
                                   "programs_per_second": round(v["programs"] / max(v["seconds"], 1e-9), 3)}
                               for w, v in self.worker_rates.items()})
        if self.lost:
            r["scheduler_lost"] = self.lost
        if self.state is not None:
            r["campaign"] = campaign_summary(self.state, self.seeds_done, self.cfg.seeds)
            self.state.write_summary(r)
        return r

"""The runtime: a persistent native worker pool and the measured (auto) choice (DESIGN §5, §6).

A launch on the pool is cut into tasks of `grain` blocks that the pool's
participants (the calling thread and `workers - 1` pool threads) claim until
none are left; every task runs the compiled entry on its block range. Outputs
do not depend on the grain, the worker count or the order tasks run in: blocks
are independent by the kernel model (the interpreter rejects cross-block races).

Whether a launch runs on the caller, on the pool (and in tasks of how many
blocks) or by measurement is launch_policy.py's rule; `run` runs the route it
gives, `AutoChoice` measures auto's candidates (the seeds' joint_tasks and
joint_legacy).

`NativeLaunch` binds a prepared launch to the runtime's native launch entry
(pool_ir's `cohort_runtime_launch`): the runtime-E2E boundary the native
timer calls, with no Python between launches.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
import time
from time import monotonic as _monotonic  # (tests replace `time` with a fake clock)

import numpy as np

from .. import knobs
from . import inject, jit, pool_ir, target
from .launch_policy import Auto, Pool, policy_for, policy_of

_lib: dict = {}
_lib_lock = threading.Lock()


def _native():
    with _lib_lock:
        if not _lib:
            linked = jit.compile_module(pool_ir.ir(target.host()), ["cohort_pool_launch", "cohort_pool_start",
                                                     "cohort_pool_stop", "cohort_worker",
                                                     "cohort_runtime_launch"])
            a = linked.addresses
            _lib["keep"] = linked
            _lib["launch"] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(a["cohort_pool_launch"])
            _lib["start"] = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p,
                                             ctypes.c_void_p)(a["cohort_pool_start"])
            _lib["stop"] = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)(
                a["cohort_pool_stop"])
            _lib["runtime_launch_address"] = a["cohort_runtime_launch"]
            _lib["runtime_launch"] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(a["cohort_runtime_launch"])
        return _lib


# ---------------------------------------------------------------- the OpenMP team

POOL_ENV = knobs.POOL.name          # "auto" (the default) or "cohort": the pool's own threads always
_OPENMP_SONAMES = ("libgomp.so.1",)
_openmp: dict = {"modules": -1, "at": 0.0, "found": None, "forked": False}


def _forked_child():
    # GNU libgomp is not fork-safe: a child's first parallel region waits for the parent's
    # team, which it does not have (torch's own ops hang there too). A forked child keeps to
    # the pool's own threads (there, the caller runs every task the dead workers do not claim).
    _openmp["forked"] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_child)


def pool_host() -> str:
    """Whose threads a launch of more than one worker runs on: "openmp" when an import has
    loaded an OpenMP runtime into the process (torch does) and COHORT_POOL allows it, else
    "cohort" (the pool's own threads). ATen's OpenMP threads spin for milliseconds after each
    parallel region; a second pool beside them loses its core to the spinner, so cohort
    joins the team that is already there (pool_ir, record slot 14)."""
    return "openmp" if openmp_runtime() else "cohort"


def openmp_runtime():
    """(GOMP_parallel, omp_get_thread_num) addresses of the process's OpenMP runtime, or None.
    The search takes tens of microseconds, so it runs again only when sys.modules has grown
    (a library is usually loaded by an import) or a second has passed (ctypes); once found it
    is kept (an OpenMP runtime is never unloaded)."""
    how = knobs.POOL.get()
    if how == "cohort" or _openmp["forked"]:
        return None
    found = _openmp["found"]
    if found is not None:
        return found[:2]
    now = _monotonic()
    if _openmp["modules"] != len(sys.modules) or now > _openmp["at"] + 1.0:
        _openmp["modules"], _openmp["at"] = len(sys.modules), now
        for name in _OPENMP_SONAMES:
            try:
                lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
                fork = ctypes.cast(lib.GOMP_parallel, ctypes.c_void_p).value
                num = ctypes.cast(lib.omp_get_thread_num, ctypes.c_void_p).value
            except (OSError, AttributeError):
                continue
            _openmp["found"] = (fork, num, lib)
            break
    return _openmp["found"][:2] if _openmp["found"] else None


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class WorkerPool:
    """`threads` native worker threads plus the caller; one job at a time."""

    def __init__(self, threads: int):
        lib = _native()
        self.threads = threads
        self.record = np.zeros(pool_ir.POOL_SLOTS, np.int64)
        self.team_record = np.zeros(pool_ir.POOL_SLOTS, np.int64)   # jobs for an OpenMP team
        self.workers = np.zeros(3 * max(threads, 1), np.int64)
        for i in range(threads):
            self.workers[3 * i:3 * i + 3] = (self.record.ctypes.data, i + 1, 0)
        self.tids = np.zeros(max(threads, 1), np.int64)
        self.scratch = np.zeros(64, np.uint8)
        # addresses kept, not read per launch: numpy's .ctypes.data costs ~1.7 us a read, and
        # a small launch through the pool from Python took ~9 us more than on the caller
        self.address = {id(self.record): self.record.ctypes.data, id(self.team_record): self.team_record.ctypes.data}
        self.scratch_base = self.scratch.ctypes.data
        self.lock = threading.Lock()
        self.closed = False
        rc = lib["start"](threads, self.workers.ctypes.data, self.tids.ctypes.data)
        if rc != 0:
            raise OSError(rc, f"pthread_create failed starting {threads} workers")

    def launch_record(self) -> np.ndarray:
        """The record a launch publishes to: the OpenMP team's when the process has one
        (pool_host), else the one the pool's own threads wait on."""
        omp = openmp_runtime()
        if omp is None:
            return self.record
        self.team_record[14], self.team_record[15] = omp
        return self.team_record

    def run(self, prepared, grain: int, participants: int, entry: int = None):
        """Run every block of `prepared` in tasks of `grain` blocks over `participants` threads
        (with `entry`, another compiled entry of the same kernel and ABI)."""
        if prepared.args.size > pool_ir.MAX_ARGS:
            raise ValueError(f"kernel has too many parameters for the pool ({prepared.args.size} slots)")
        participants = max(1, min(participants, self.threads + 1))
        per = prepared.code.scratch_bytes
        with self.lock:
            if self.closed:
                raise RuntimeError("the worker pool has been shut down")
            need = per * participants + 64
            if self.scratch.size < need:
                self.scratch = np.zeros(need, np.uint8)
                self.scratch_base = self.scratch.ctypes.data
            base = self.scratch_base + (-self.scratch_base) % 64
            r = self.launch_record()
            r[2] = entry or (prepared.origin.entry if inject.runtime_planted("pool_rerun_unchecked") else prepared.entry)
            r[4] = max(1, int(grain))
            r[3] = prepared.nblocks - (prepared.nblocks % r[4] if inject.runtime_planted("pool_partial_task") else 0)
            r[8] = participants
            r[9] = base
            r[10] = per
            r[11] = prepared.args.size
            r[16:16 + prepared.args.size] = prepared.args
            _lib["launch"](self.address[id(r)])
        # a safe build that could not prove this launch ran nothing: again, with the checked build
        prepared.raise_error(rerun=lambda: self.run(prepared, grain, participants))

    def close(self):
        with self.lock:
            if not self.closed:
                self.closed = True
                _lib["stop"](self.record.ctypes.data, self.threads, self.tids.ctypes.data)


_pool = None
_pool_lock = threading.Lock()


def pool(workers: int) -> WorkerPool:
    """The process's pool, grown to at least `workers - 1` threads."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.threads < workers - 1:
            old, _pool = _pool, WorkerPool(max(workers - 1, 0))
            if old is not None:
                old.close()
        return _pool


@atexit.register
def _shutdown():
    with _pool_lock:
        if _pool is not None:
            _pool.close()


# ---------------------------------------------------------------- running a route

def run(prepared, how):
    """Run a prepared launch by the route its policy gives (`how`: a Variant or a
    LaunchPolicy; launch_policy.py decides, this runs it)."""
    route = policy_of(how).route(prepared.nblocks)
    kind = type(route)
    if kind is Pool:
        return pool(route.workers).run(prepared, route.grain, route.workers)
    if kind is Auto:
        return choose(prepared, route.workers, route.policy).run(prepared)
    return prepared.run()


# The seeds' joint_tasks (auto) and joint_legacy: chosen by measurement.
# The first launches of a (code, n, workers, policy) try each candidate
# (LaunchPolicy.candidates: this variant's lanes or whole, on the caller or on
# the pool) TRIALS times each in rotation (every trial is a real launch:
# outputs do not depend on the choice), then the fastest median is kept.
TRIALS = 5
_auto: dict = {}
_auto_lock = threading.Lock()


class AutoChoice:
    """The measured choice of one launch's route. `entries` (launch_policy.BuildEntry):
    the builds it may run, as the compiler gives them (PreparedLaunch.auto_entries:
    this variant's build, and the whole build when its scratch memory is the same)."""

    def __init__(self, prepared, workers: int, policy: str = "auto", entries=None):
        self.workers, self.policy = workers, policy
        if entries is None:
            entries = prepared.auto_entries()
        self.candidates = policy_for(policy, workers).candidates(prepared.nblocks, entries)
        self.trials = {c.label: [] for c in self.candidates}
        self.turn = 0
        self.chosen = None if len(self.candidates) > 1 else self.candidates[0]

    def run(self, prepared):
        if self.chosen is not None:
            return self._run(self.chosen, prepared)
        c = self.candidates[self.turn % len(self.candidates)]
        self.turn += 1
        t0 = time.perf_counter_ns()
        self._run(c, prepared)
        self.trials[c.label].append(time.perf_counter_ns() - t0)
        if all(len(v) >= TRIALS for v in self.trials.values()):
            best = min(self.candidates, key=lambda c: sorted(self.trials[c.label])[TRIALS // 2])
            self.chosen = best

    def _run(self, c, prepared):
        if c.on_caller:
            return prepared.run(fn=c.entry.fn)
        route = c.route
        pool(route.workers).run(prepared, route.grain, route.workers, entry=c.entry.address)

    def settle(self, prepared, limit: int = 1000) -> str:
        for _ in range(limit):
            if self.chosen is not None:
                break
            self.run(prepared)
        return self.label

    @property
    def label(self) -> str:
        return self.chosen.label if self.chosen else "measuring"


def choose(prepared, workers: int, policy: str = "auto") -> AutoChoice:
    hit = prepared.auto_choice
    if hit is not None and hit.workers == workers and hit.policy == policy:
        return hit
    key = (prepared.entry, prepared.n, workers, policy)
    with _auto_lock:
        hit = _auto.get(key)
        if hit is None:
            hit = _auto[key] = AutoChoice(prepared, workers, policy)
    prepared.auto_choice = hit
    return hit


def choose_again(prepared, workers: int, policy: str = "auto", limit: int = 1000) -> AutoChoice:
    """A fresh choice for this prepared launch (its trials measured now), settled and kept
    for its later launches."""
    c = AutoChoice(prepared, workers, policy)
    c.settle(prepared, limit)
    prepared.auto_choice = c
    return c


def settle(prepared, workers: int, limit: int = 1000, policy: str = "auto") -> str:
    """Launch until the policy has made its choice (benchmarks time the steady state)."""
    return choose(prepared, workers, policy).settle(prepared, limit)


# ---------------------------------------------------------------- the native launch entry

class NativeLaunch:
    """One prepared launch bound to the runtime's native launch entry
    (`cohort_runtime_launch`, see pool_ir): the record is built once; each call
    of the entry is one whole launch - cut into tasks, dispatched, awaited.

    For auto and joint_legacy the choice is made first (`choose_again`: a fresh
    measurement, as a new process would make it) and written into the record:
    the timed launches run what was chosen, as the steady state of the Python
    API does.
    """

    def __init__(self, prepared, variant):
        lib = _native()
        self.prepared, self.variant = prepared, variant
        self.workers = max(1, int(variant.workers))
        self.fn_address = lib["runtime_launch_address"]
        self.record = np.zeros(9, np.int64)
        per = prepared.code.scratch_bytes
        self.scratch = np.zeros(per * self.workers + 64, np.uint8)   # the pool participants' own
        if prepared.args.size > pool_ir.MAX_ARGS:
            raise ValueError(f"kernel has too many parameters for the pool ({prepared.args.size} slots)")
        r = self.record
        r[1] = prepared.entry
        r[2] = prepared.nblocks
        r[4] = self.workers
        r[5] = prepared.args.ctypes.data
        r[6] = prepared.args.size
        base = self.scratch.ctypes.data
        r[7] = base + (-base) % 64
        r[8] = per
        self.address = r.ctypes.data
        self.choice = None
        policy = policy_of(variant)
        if policy.is_auto:
            self.choose_again()
        else:
            r[3] = policy.native_word
        self._pool = None

    def choose_again(self) -> str:
        """A new measured choice (auto / joint_legacy); returns its label, e.g. 'lanes=8,grain=3'."""
        c = AutoChoice(self.prepared, self.workers, self.variant.grain)
        c.settle(self.prepared)
        self.record[1] = c.chosen.entry.address
        self.record[3] = c.chosen.native_word
        self.choice = c.chosen.label
        return self.choice

    def _bind(self) -> "WorkerPool":
        p = pool(self.workers)
        self._pool = p
        self.record[0] = p.address[id(p.launch_record())]
        return p

    def launch(self):
        """One launch through the native entry (errors inside any task are raised here)."""
        p = self._bind()
        with p.lock:
            _lib["runtime_launch"](self.address)
        self.prepared.raise_error()

    def time(self, iters: int, samples: int) -> np.ndarray:
        """The native timer calling the launch entry: ns per launch, one figure per sample."""
        from . import timer
        p = self._bind()
        with p.lock:   # the pool runs one job at a time; no Python launch may interleave
            ns = timer.time_entry(self.fn_address, self.address, iters, samples)
        self.prepared.raise_error()
        return ns

    def calibrate(self, target_ns: float = 2e5) -> int:
        from . import timer
        p = self._bind()
        with p.lock:
            n = timer.calibrate_iters(self.fn_address, self.address, target_ns)
        self.prepared.raise_error()
        return n

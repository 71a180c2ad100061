"""Worker processes: a fuzz case's variants compiled and checked away from the campaign.

A worker is `python -m cohort.verify.fuzz --worker`: it reads one request (a
case as JSON and the variants to run) per line on stdin and answers with
tagged JSON events (ready, ref, begin, result, done). An LLVM fatal error
kills a worker, not the campaign: the variant it was compiling is reported
as a crash and the worker restarted; a hang is killed after a timeout; a
worker is recycled after a number of compiles because every JIT compile
leaks memory (the JIT keeps every module it linked). With `jobs >= 2` the variants of a case are
split over several workers.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from ... import knobs
from .. import corpus
from ..execute import FAILURE_STATUSES, execute

WORKER_TAG = "@@"


def run_with_stress(case, variants: list, emit=None) -> dict:
    """`execute` for the variants, then the stress check if listed (stress.STRESS, a variant
    run of its own; not for a program the interpreter discards)."""
    from .stress import STRESS, run_stress
    out = execute(case, [v for v in variants if v != STRESS], emit)
    if STRESS in variants and not out["discard"]:
        if emit is not None:
            emit({"event": "begin", "variant": STRESS})
        rec = out["variants"][STRESS] = run_stress(case)
        if emit is not None:
            emit({"event": "result", "record": rec})
    return out


def worker_main(bugs: tuple = ()):
    """Serve requests (one JSON line each) on stdin; answer with tagged JSON lines."""
    import signal

    from ...backend import inject
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the campaign's to handle, not ours
    real_stdout = sys.stdout
    sys.stdout = sys.stderr            # anything else printed goes to the log, not the protocol

    def emit(ev):
        real_stdout.write(WORKER_TAG + json.dumps(ev) + "\n")
        real_stdout.flush()

    crash_on = knobs.FUZZ_TEST_CRASH.get()  # tests: abort when compiling this variant
    hang_at = knobs.FUZZ_TEST_HANG.get()    # tests: append our pid to this file, then hang
    with inject.inject_bug_TESTING_ONLY(*bugs):
        emit({"event": "ready", "pid": os.getpid()})
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            case = corpus.case_from_json(req["case"])

            def hook(ev):
                emit(ev)
                if crash_on and ev.get("event") == "begin" and ev["variant"] == crash_on:
                    os.abort()
                if hang_at and ev.get("event") == "begin":     # a compile that takes an hour
                    with open(hang_at, "a") as fh:
                        fh.write(f"{os.getpid()}\n")
                    time.sleep(3600)
            run_with_stress(case, req["variants"], hook)
            emit({"event": "done"})


class Worker:
    def __init__(self, bugs: tuple):
        self.log = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, "-m", "cohort.verify.fuzz", "--worker"]
        if bugs:
            cmd += ["--inject", ",".join(bugs)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        self.compiles = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(WORKER_TAG):
                self.lines.put(json.loads(line[len(WORKER_TAG):]))
        self.lines.put(None)

    def next(self, timeout: float):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return "timeout"

    def send(self, req: dict):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def death(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        what = "still running" if rc is None else (f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}")
        self.log.seek(0)
        tail = self.log.read()[-600:].strip().replace("\n", " | ")
        return f"worker {what}" + (f"; stderr: {tail}" if tail else "")

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.log.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


class Pending:
    """A program's variant runs queued on a WorkerPool; `result()` waits for all of them."""

    def __init__(self, case, variants: list, deadline: Optional[float], stop_on_failure: bool):
        self.doc = corpus.case_to_json(case)
        self.variants = list(variants)
        self.deadline = deadline
        self.stop_on_failure = stop_on_failure
        self.stop = threading.Event()      # set: the variants still running are killed, the rest skipped
        self.parts: list = []
        self.error: Optional[BaseException] = None
        self.left = len(self.variants)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.cancelled = False

    def cut(self) -> bool:
        """The rest need not run: a failure under stop_on_failure, the interpreter rejected the
        program, the time box ended mid-program, or a worker could not start."""
        if self.stop.is_set():
            return True
        with self.lock:
            return self.error is not None or any(r.get("incomplete") or r.get("discard") for r in self.parts)

    def cancel(self):
        """Skip the variants not started yet: the program counts as not run (incomplete)."""
        self.cancelled = True
        self.stop.set()

    def finish_one(self, part: Optional[dict], error: Optional[BaseException] = None):
        with self.lock:
            if part is not None:
                self.parts.append(part)
            if error is not None and self.error is None:
                self.error = error
            self.left -= 1
            if self.left == 0:
                self.done.set()

    def result(self) -> dict:
        self.done.wait()
        if self.error is not None:
            raise self.error
        if self.cancelled or any(r.get("incomplete") for r in self.parts):
            return {"incomplete": True, "discard": None, "variants": {}}
        out = {"discard": None, "variants": {}}
        for r in self.parts:
            if r.get("discard"):
                return {"discard": r["discard"], "variants": {}}
            out["reference_checksum"] = r.get("reference_checksum")
            out["variants"].update(r["variants"])
        out["variants"] = {v: out["variants"][v] for v in self.variants if v in out["variants"]}
        return out


class WorkerPool:
    """`jobs` worker processes, each served by a thread that takes the next queued variant."""

    def __init__(self, jobs: int = 1, bugs: tuple = (), recycle_compiles: int = 250,
                 timeout: float = 120.0):
        self.jobs, self.bugs = max(1, jobs), tuple(bugs)
        self.recycle, self.timeout = recycle_compiles, timeout
        self.workers: list = [None] * self.jobs
        self.restarts = 0
        self.crashes = 0
        self.closed = False
        self.queue: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.threads: Optional[list] = None

    def _worker(self, i: int) -> Optional[Worker]:
        """Worker i, started if need be; None once the pool is closed (no process is started
        after close(), which kills the ones it finds: under the lock)."""
        with self.lock:
            if self.closed:
                return None
            w = self.workers[i]
            fresh = w is None
            if fresh:
                w = self.workers[i] = Worker(self.bugs)
        if fresh:
            ev = w.next(self.timeout)
            if not isinstance(ev, dict) or ev.get("event") != "ready":
                if self.closed:
                    return None
                msg = w.death()
                w.kill()
                with self.lock:
                    self.workers[i] = None
                raise RuntimeError(f"fuzz worker failed to start: {msg}")
        return w

    def _retire(self, i: int, kill: bool = False):
        with self.lock:
            w, self.workers[i] = self.workers[i], None
        if w is not None:
            w.kill() if kill else w.close()
            self.restarts += 1

    def _run_part(self, i: int, doc: dict, variants: list, deadline: Optional[float] = None,
                  stop: Optional[threading.Event] = None, stop_on_failure: bool = True) -> dict:
        """`stop`: polled, set by the campaign (a cancelled program: its variant is killed) and, with
        `stop_on_failure`, here by a failing variant."""
        out = {"discard": None, "variants": {}}
        todo = list(variants)
        first = True
        failed = stop if stop_on_failure else None
        while todo or first:
            first = False
            if self.closed or (stop is not None and stop.is_set()):
                return out
            w = self._worker(i)
            if w is None:                             # closed while it started
                return out
            w.send({"case": doc, "variants": todo})
            current = "reference"
            last = time.monotonic()
            while True:
                if stop is not None and stop.is_set():
                    self._retire(i, kill=True)        # a failure was found: no more variants wanted
                    return out
                now = time.monotonic()
                wait = max(self.timeout - (now - last), 0.0)
                if deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                if stop is not None:
                    wait = min(wait, 0.2)              # poll the stop flag
                ev = w.next(wait)
                now = time.monotonic()
                if self.closed:                       # the campaign is over (Ctrl-C)
                    return out
                if ev == "timeout" and deadline is not None and now >= deadline:
                    self._retire(i, kill=True)        # the time box ended mid-case: drop the case
                    out["incomplete"] = True
                    return out
                if ev == "timeout" and now - last < self.timeout:
                    continue
                if isinstance(ev, dict):
                    last = now
                if ev == "timeout" or ev is None:
                    status = "timeout" if ev == "timeout" else "crash"
                    if ev == "timeout":
                        w.kill()
                    detail = w.death() if ev is None else f"no answer within {self.timeout:.0f} s"
                    self.crashes += 1
                    self._retire(i, kill=True)
                    if current == "reference":
                        out["discard"] = {"reason": f"interpreter {status}", "message": detail}
                        return out
                    if current in out["variants"]:     # between two variants: blame the next one
                        rest = todo[todo.index(current) + 1:]
                        if not rest:
                            todo = []
                            break
                        current = rest[0]
                    out["variants"][current] = {"variant": current, "status": status,
                                                "detail": f"{current}: {detail}"}
                    todo = todo[todo.index(current) + 1:]
                    if failed is not None:
                        failed.set()
                    break
                kind = ev["event"]
                if kind == "ref":
                    if ev.get("discard"):
                        out["discard"] = ev["discard"]
                    else:
                        out["reference_checksum"] = ev["reference_checksum"]
                elif kind == "begin":
                    current = ev["variant"]
                    w.compiles += 1
                elif kind == "result":
                    out["variants"][ev["record"]["variant"]] = ev["record"]
                    if failed is not None and ev["record"]["status"] in FAILURE_STATUSES:
                        failed.set()
                elif kind == "done":
                    todo = []
                    if w.compiles >= self.recycle:
                        self._retire(i)
                    break
            if out["discard"]:
                return out
        return out

    def submit(self, case, variants: list, deadline: Optional[float] = None,
               stop_on_failure: bool = False) -> "Pending":
        """Queue a program's variants; each goes to whichever worker is free next, after the
        variants queued before it (their costs differ several-fold; a worker keeps the program's
        reference between its variants: execute.reference). The campaign queues the next
        program while this one's last variants still run, so no worker waits for the generator
        or for the slowest variant of a program (campaign.py)."""
        p = Pending(case, variants, deadline, stop_on_failure)
        if not p.variants:
            p.done.set()
        with self.lock:
            if self.threads is None:
                self.threads = [threading.Thread(target=self._serve, args=(i,), daemon=True)
                                for i in range(self.jobs)]
                for t in self.threads:
                    t.start()
        for v in p.variants:
            self.queue.put((p, v))
        return p

    def run(self, case, variants: list, deadline: Optional[float] = None,
            stop_on_failure: bool = False) -> dict:
        """`deadline` (time.monotonic()): past it, the case is abandoned ({"incomplete": True}).
        `stop_on_failure`: the first failing variant ends the run (the others are not run)."""
        return self.submit(case, variants, deadline, stop_on_failure).result()

    def _serve(self, i: int):
        while True:
            item = self.queue.get()
            if item is None:
                return
            p, v = item
            part, error = None, None
            if not (self.closed or p.cut()):
                try:
                    part = self._run_part(i, p.doc, [v], p.deadline, p.stop, p.stop_on_failure)
                except BaseException as e:  # noqa: BLE001 - handed to the waiting campaign
                    error = e
            p.finish_one(part, error)

    def close(self, kill: bool = False):
        """`kill` (Ctrl-C): the workers are killed mid-compile; a serving thread waiting on one
        then sees its end and returns."""
        with self.lock:
            self.closed = True
            workers, self.workers = self.workers, [None] * self.jobs
        for _ in range(self.jobs):
            self.queue.put(None)
        for w in workers:
            if w is not None:
                w.kill() if kill else w.close()
        for t in self.threads or ():
            t.join(timeout=30)


class InProcess:
    """The same interface without subprocesses (debugging, replays, small runs)."""
    restarts = crashes = 0

    def __init__(self, bugs: tuple = ()):
        self.bugs = tuple(bugs)

    def run(self, case, variants: list, deadline: Optional[float] = None,
            stop_on_failure: bool = False) -> dict:
        from ...backend import inject
        with inject.inject_bug_TESTING_ONLY(*self.bugs):
            return run_with_stress(case, variants)

    def close(self, kill: bool = False):
        pass


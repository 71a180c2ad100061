"""A time-boxed campaign in this process: Hypothesis draws the programs, a local
pool of worker processes (workers.py) runs each one's variants.

Seeds: the campaign's index-th Hypothesis run of `batch` programs is seeded by
`state.seed_value(seed, index)`. With a campaign directory (state.py) a seed
whose programs all ran is committed there; a resumed campaign skips it, and
every failure is kept the moment it is found. A failing program is shrunk in
the Hypothesis run that found it (shrink.py), then written to the corpus.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Optional

from .. import corpus
from ..matrix import rerun_sensitive, shrink_cost, variants_for
from .config import CampaignConfig
from .coverage import Coverage
from .rotation import draw_variants
from .shrink import Internal, Shrinker, found, hypothesis_settings, replay_and_shrink
from .state import CampaignState, seed_value
from .stress import STRESS, needs_stress
from .summary import campaign_summary, session_report
from .tally import Tally, checksum_bins, failures_of
from .workers import InProcess, WorkerPool


@dataclass
class Flight:
    """A program on its way through the pool, with what its results are counted and shrunk by."""
    case: object
    key: str
    skipped: int                 # matrix variants that do not apply to it
    pending: object              # workers.Pending (None: run synchronously)
    hseed: int                   # the Hypothesis run that drew it, and that run's strategy
    strategy: object


class Campaign:
    def __init__(self, config: CampaignConfig, pool=None, state: Optional[CampaignState] = None):
        self.cfg = config
        self.pool = pool
        self.state = state
        self.session = Tally()           # this run's seeds
        self.current = Tally()           # the seed being run
        self.failures: list = []
        self.seen: set = set(state.keys) if state else set()
        self.shrinks_done = 0
        self.corpus_writes = 0
        self.shrinker: Optional[Shrinker] = None
        self.pending: Optional[dict] = None
        self.pending_bin: Optional[str] = None
        self.inflight: list = []         # programs queued on the pool, oldest first (collect)
        self.later: list = []            # failures to shrink once their Hypothesis run is over
        self.strategy = None
        self.internal: Optional[BaseException] = None
        self.stopped = False
        self.interrupted = False
        self.seed_cut = False
        self.seeds_done = 0
        self.last_progress = 0.0

    # ------------------------------------------------------------ helpers
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    @property
    def programs(self) -> int:
        return self.session.programs + self.current.programs

    def time_up(self) -> bool:
        if self.stopped or self.elapsed() >= self.cfg.seconds:
            return True
        return self.cfg.max_programs is not None and self.programs + len(self.inflight) >= self.cfg.max_programs

    def progress(self, final=False):
        if not self.cfg.progress:
            return
        now = time.monotonic()
        if not final and now - self.last_progress < 0.5:
            return
        self.last_progress = now
        el, s, c = self.elapsed(), self.session, self.current
        cov = Coverage().add(s.coverage.counts()).add(c.coverage.counts())
        line = (f"\rfuzz {el:6.1f}s/{self.cfg.seconds:.0f}s  programs {self.programs} "
                f"({self.programs / max(el, 1e-9):.2f}/s)  variant runs {s.variant_runs + c.variant_runs}  "
                f"discarded {s.discarded + c.discarded}  mismatches {s.mismatches + c.mismatches}  "
                f"coverage gaps {len(cov.report()['gaps'])}  {'[shrinking]' if self.shrinker else ''}   ")
        sys.stderr.write(line + ("\n" if final else ""))
        sys.stderr.flush()

    def run_case(self, case, variants: list, deadline: Optional[float] = None,
                 stop_on_failure: bool = False) -> dict:
        try:
            return self.pool.run(case, variants, deadline, stop_on_failure)
        except Exception as e:  # noqa: BLE001 - a bug in the fuzzer, not a finding
            self.internal = e
            raise Internal(str(e)) from e

    # ------------------------------------------------------------ the Hypothesis test body
    def test(self, case):
        if self.internal is not None:
            raise Internal("earlier internal error")
        if self.shrinker is not None:
            return self.shrinker.step(case)
        if self.time_up():
            self.seed_cut = True
            return
        key = corpus.case_key(case)
        if key[:16] in self.seen:
            return
        self.seen.add(key[:16])
        applicable = variants_for(case, self.cfg.variants)
        variants = draw_variants(applicable, key, self.cfg.variants_per_program, rerun_sensitive(case, applicable))
        variants += [STRESS] if needs_stress(case) else []
        skipped = len(self.cfg.variants) - len(applicable)
        if hasattr(self.pool, "submit"):
            # programs in flight while Hypothesis draws the next: the workers wait neither for the
            # generator nor for one slow variant of an earlier program (two per worker: one, and
            # a worker idled behind a program of a few seconds, a block of 128 at O3, say)
            pending = self.pool.submit(case, variants, self.t0 + self.cfg.seconds, self.cfg.stop_on_failure)
            self.inflight.append(Flight(case, key, skipped, pending, self.hseed, self.strategy))
            self.collect(keep=2 * getattr(self.pool, "jobs", 1))
            return
        res = self.run_case(case, variants, self.t0 + self.cfg.seconds, self.cfg.stop_on_failure)
        self.result(Flight(case, key, skipped, None, self.hseed, self.strategy), res, in_test=True)

    def collect(self, keep: int = 0):
        """Results of the programs in flight, oldest first: every finished one, then waiting
        until `keep` are left (a failure is seen as soon as its program is done)."""
        while self.inflight and (len(self.inflight) > keep or self.inflight[0].pending.done.is_set()):
            f = self.inflight.pop(0)
            try:
                res = f.pending.result()
            except Exception as e:  # noqa: BLE001 - a bug in the fuzzer, not a finding
                self.internal = e
                raise Internal(str(e)) from e
            self.result(f, res)

    def collect_outside(self):
        """collect() between Hypothesis runs (a fuzzer bug raised as itself)."""
        try:
            self.collect()
        except Internal:
            raise self.internal from None

    def result(self, f: "Flight", res: dict, in_test: bool = False):
        """One program's results into the tally; a failure kept, recorded and, once per bin,
        shrunk: at once in the Hypothesis run drawing it (`in_test`), else after that run by
        replaying it (shrink_later)."""
        case, key = f.case, f.key
        if res.get("incomplete"):
            self.seen.discard(key[:16])
            self.session.cut += 1
            self.seed_cut = True
            return
        fails = self.current.program(case, key, res, f.skipped)
        self.progress()
        if not fails:
            return
        # the cheapest to recompile (a stress failure only when nothing else failed: stress.py)
        spec, rec = min(fails, key=lambda f: (f[0] == STRESS, shrink_cost(f[0]) if f[0] != STRESS else ()))
        record = {"kind": rec["status"], "variant": spec, "description": rec.get("detail", ""),
                  "failing_variants": [v for v, _ in fails], "bins": checksum_bins(res),
                  "found_after_seconds": round(self.elapsed(), 2), "shrunk": False,
                  "seed": f.hseed, "key": key}
        bin_, first = self.keep(case, record)
        shrinks = self.shrinks_done + len(self.later)
        if self.cfg.shrink and first and shrinks < self.cfg.max_shrinks and spec != STRESS:
            if not in_test:
                self.later.append((f, record, res, bin_))
                self.stopped = self.stopped or self.cfg.stop_on_failure
                return
            self.pending, self.pending_bin = record, bin_
            self.shrinker = Shrinker(self.run_case, spec, rec["status"], case, key, res, self.cfg.shrink_seconds,
                                     self.progress)
            found()
        self.record(case, record)
        if self.cfg.stop_on_failure:
            self.stopped = True

    def shrink_later(self):
        """Shrink the failures found after their Hypothesis run moved on: that run is replayed
        (its seed and steering) until the program comes round, then Hypothesis shrinks it."""
        while self.later:
            f, record, res, bin_ = self.later.pop(0)
            sh = Shrinker(self.run_case, record["variant"], record["kind"], f.case, f.key, res,
                          self.cfg.shrink_seconds, self.progress)
            try:
                replay_and_shrink(sh, f.hseed, f.strategy, f.key, self.cfg.examples())
            except Internal:
                raise self.internal from None
            if self.internal is not None:      # raised inside, and wrapped by Hypothesis
                raise self.internal from None
            self.pending, self.pending_bin, self.shrinker = record, bin_, sh
            self.finish_shrink()

    def keep(self, case, record: dict) -> tuple:
        """Into the campaign directory at once (never lost); (its bin, whether the bin still
        needs a shrunk kernel)."""
        if self.state is None:
            return None, True
        b, first = self.state.add_failure({**record, "case": corpus.case_to_json(case)})
        return b, first and b not in self.state.shrunk

    # ------------------------------------------------------------ results
    def finish_shrink(self):
        sh, record = self.shrinker, self.pending
        case, stats = sh.finish()
        record.update(stats)
        record["description"] = sh.description(record["description"])
        # the minimal case on the whole matrix: which variants share the bug
        res = self.run_case(case, variants_for(case, self.cfg.variants))
        if not res["discard"]:
            record["bins"] = checksum_bins(res)
            record["failing_variants"] = [v for v, _ in failures_of(res)] or [sh.spec]
        self.shrinker = None
        self.shrinks_done += 1
        self.record(case, record)
        if self.state is not None:      # the bin stays the found program's
            self.state.add_shrunk(self.pending_bin, {**record, "case": corpus.case_to_json(case)})
        if self.cfg.stop_on_failure:
            self.stopped = True

    def record(self, case, record: dict):
        from ...refimpl.printer import format_kernel
        record["kernel"] = format_kernel(case.kernel)
        record["case"] = case.describe()
        record["inputs_seed"] = case.seed
        record["n"], record["block"], record["consts"] = case.n, case.block, dict(case.consts)
        if self.cfg.corpus_dir and self.corpus_writes < self.cfg.max_corpus_writes and record["variant"] != STRESS:
            name = f"fuzz-{record['kind']}-{corpus.case_key(case)[:10]}"
            note = (f"found by `cohort fuzz --seed {self.cfg.seed}`"
                    + (f" with injected bug(s) {', '.join(self.cfg.bugs)}" if self.cfg.bugs else ""))
            path = corpus.save_case(self.cfg.corpus_dir, case, name=name,
                                    variants=record["failing_variants"], expected="agree", note=note,
                                    found={k: record[k] for k in ("kind", "variant", "description", "kernel",
                                                                  "bins", "shrunk")})
            record["case_file"] = path
            self.corpus_writes += 1
        self.failures.append(record)

    def end_seed(self, index: int):
        """The seed's programs into the session; into the campaign directory if all of them ran."""
        if self.state is not None and not self.seed_cut and not self.interrupted:
            self.state.commit_seed(self.hseed, index, self.current, worker=f"local:{os.getpid()}")
            self.seeds_done += 1
        self.session.add(self.current)
        self.current = Tally()

    def steering(self, index: int):
        """The generator's weights for seed `index`, from what this run has covered so far (None:
        unsteered, CampaignConfig.steered)."""
        if not self.cfg.steered(index):
            return None
        from ..gen import Steering
        return Steering.from_report(self.session.coverage.report())

    # ------------------------------------------------------------ driver
    def run(self) -> dict:
        own_pool = self.pool is None
        if own_pool:
            self.pool = InProcess(self.cfg.bugs) if self.cfg.jobs == 0 else WorkerPool(self.cfg.jobs, self.cfg.bugs)
        self.t0 = time.monotonic()
        self.index = self.runs = 0
        try:
            try:
                self.seeds()
            except KeyboardInterrupt:     # anywhere: in a program's test, a wait, a shrink, between seeds
                self.interrupt()
        finally:
            for f in self.inflight:           # Ctrl-C or an error: nothing more is wanted
                f.pending.cancel()
            if self.current.generated or self.current.cut:
                self.end_seed(self.index)
            if own_pool:
                self.pool.close(kill=self.interrupted)
            self.progress(final=True)
        return self.report(self.runs)

    def seeds(self):
        """The campaign's Hypothesis runs, one per seed, until the time box or --seeds ends them
        (self.index: the seed being run; self.runs: the Hypothesis runs made)."""
        from hypothesis import given, seed

        from ..gen import cases
        index = runs = 0
        while not self.time_up() and (self.cfg.seeds is None or index < self.cfg.seeds):
            self.hseed = seed_value(self.cfg.seed, index)
            if self.state is not None and self.state.is_done(self.hseed):
                self.index = index = index + 1
                continue
            self.seed_cut = False
            t_seed = time.monotonic()
            # steering is refreshed between Hypothesis runs only: a run's shrinking replays
            # its choices under the steering they were drawn with
            strategy = self.strategy = cases(max_stmts=self.cfg.max_stmts, steer=self.steering(index))
            shrinks = self.shrinks_done
            test = hypothesis_settings(self.cfg.examples(), True)(seed(self.hseed)(given(strategy)(self.test)))
            runs += 1
            self.runs = runs
            try:
                test()
            except Internal:
                raise self.internal from None
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001 - Found, BudgetOver, or Hypothesis' wrappers of them
                if self.internal is not None:
                    raise self.internal from None
                if self.shrinker is None:
                    raise
                self.finish_shrink()
            if self.shrinker is not None:      # Hypothesis gave up without reporting: keep the best
                self.finish_shrink()
            if self.state is not None:        # a seed is committed with all of its programs
                self.collect_outside()
            self.current.seconds += time.monotonic() - t_seed
            if self.shrinks_done > shrinks and not self.time_up():
                continue      # the shrink ended the seed's run early: run the rest (seen programs are skipped)
            self.end_seed(index)
            self.index = index = index + 1
            self.shrink_later()
        if self.stopped:
            for f in self.inflight:
                f.pending.cancel()
        self.collect_outside()
        self.shrink_later()

    def interrupt(self):
        """Ctrl-C: stop at once. The programs in flight are dropped (their seed is not committed,
        so a resumed campaign runs it again), the workers are killed when the pool closes, and
        what was found is kept: a shrink's smallest case so far, failures not shrunk yet as found
        (each already in the campaign directory: Campaign.keep)."""
        self.interrupted = True
        for f in self.inflight:
            f.pending.cancel()
        self.inflight = []
        if self.shrinker is not None:     # keep the smallest failing case seen so far
            self.pending["shrink_steps"] = self.shrinker.steps
            self.record(self.shrinker.best, self.pending)
            self.shrinker = None
        for f, record, _res, _bin in self.later:
            self.record(f.case, record)
        self.later = []

    def report(self, batches: int = 0) -> dict:
        r = session_report(self.cfg, self.session, self.elapsed(), self.failures, self.interrupted)
        s = self.session
        r.update(hypothesis_batches=batches, worker_restarts=getattr(self.pool, "restarts", 0),
                 worker_crashes=getattr(self.pool, "crashes", 0),
                 worker_rates={f"local:{os.getpid()}:jobs={self.cfg.jobs}": {
                     "programs": s.programs, "seconds": round(s.seconds, 2),
                     "programs_per_second": round(s.programs / max(s.seconds, 1e-9), 3)}})
        if self.state is not None:
            r["campaign"] = campaign_summary(self.state, self.seeds_done, self.cfg.seeds)
            self.state.write_summary(r)
        return r

"""Shrinking one failure: Hypothesis' own shrinker on the run that found it, then
the IR reducer (reduce.py), both against the failing variant alone (the one
cheapest to recompile, same failure kind), within a time budget.

A campaign that found the failure in its own Hypothesis run shrinks in that
run (`Shrinker.step` is the test body while shrinking). A failure found
elsewhere (a Dask worker) is shrunk by replaying its seed's Hypothesis run
until the failing program comes round again (`shrink_found`); if it does not
(another generator), the IR reducer alone shrinks it.
"""
from __future__ import annotations

import time
from typing import Optional

from ...refimpl.ir import walk_stmts
from .. import corpus
from .reduce import reduce_case


class Found(Exception):
    """Raised inside the Hypothesis test body when a case fails (so that Hypothesis shrinks it)."""


class Internal(Exception):
    """A bug of the fuzzer itself while running a case (not a finding)."""


class BudgetOver(BaseException):
    """The shrink budget is spent: ends the Hypothesis run at once (a BaseException, which
    Hypothesis does not take for a failure to shrink, and its own shrinker would go on for
    minutes more on its own time limit)."""


def found():
    """Raise Found from one place: Hypothesis tells failures apart by where they are raised."""
    raise Found()


def statements(case) -> int:
    return sum(1 for _ in walk_stmts(case.kernel.body))


class Shrinker:
    def __init__(self, run, spec: str, status: str, case, key: str, res: Optional[dict], seconds: float,
                 on_step=None):
        """run(case, variants) -> execute-style result; the failure is `status` on `spec`."""
        self.run, self.spec, self.status = run, spec, status
        self.best, self.best_key, self.best_res = case, key, res
        self.original = case
        self.cache: dict = {}
        self.steps = 0
        self.seconds = seconds
        self.t0 = time.monotonic()
        self.on_step = on_step or (lambda: None)
        self.after_hypothesis = None

    def over(self) -> bool:
        return time.monotonic() - self.t0 > self.seconds

    def fails(self, case, key: str) -> bool:
        hit = self.cache.get(key)
        if hit is None:
            res = self.run(case, [self.spec])
            self.steps += 1
            self.on_step()
            hit = self.cache[key] = (not res["discard"] and
                                     res["variants"].get(self.spec, {}).get("status") == self.status)
            if hit:
                self.best_res = res
        return hit

    def step(self, case):
        """The Hypothesis test body while shrinking: Found when `case` still fails."""
        key = corpus.case_key(case)
        if key == self.best_key:
            found()
        hit = self.cache.get(key)
        if hit is not None:
            if hit:
                found()
            return
        if self.over():
            raise BudgetOver()
        if self.fails(case, key):
            # Hypothesis' "simpler" is its choice sequence's; keep the kernel with fewest statements
            if statements(case) <= statements(self.best):
                self.best, self.best_key = case, key
            found()

    def still_fails(self, case) -> bool:
        from ...refimpl.errors import KernelError
        from ...refimpl.spec import validate
        try:
            validate(case.kernel)
        except KernelError:
            return False
        return self.fails(case, corpus.case_key(case))

    def finish(self):
        """(minimal case, stats): the IR reducer after Hypothesis, in what is left of the budget."""
        self.after_hypothesis = statements(self.best)
        self.best = reduce_case(self.best, self.still_fails, self.t0 + self.seconds)
        stats = {"shrunk": True, "shrink_steps": self.steps, "shrink_seconds": round(time.monotonic() - self.t0, 2),
                 "statements_before": statements(self.original), "statements_after_hypothesis": self.after_hypothesis,
                 "statements_after": statements(self.best)}
        return self.best, stats

    def description(self, default: str = "") -> str:
        rec = (self.best_res or {}).get("variants", {}).get(self.spec, {})
        return rec.get("detail", default)


def hypothesis_settings(examples: int, shrink: bool):
    from hypothesis import HealthCheck, Phase, Verbosity, settings
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    return settings(max_examples=examples, deadline=None, database=None, phases=phases,
                    report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
                    verbosity=Verbosity.quiet, print_blob=False)


def shrink_found(run, record: dict, seconds: float, examples: int, max_stmts: int, on_step=None):
    """Shrink a failure record (case JSON, variant, kind, seed) found elsewhere; (case, stats, shrinker)."""
    from ..gen import Steering, cases
    case = corpus.case_from_json(record["case"])
    key = corpus.case_key(case)
    sh = Shrinker(run, record["variant"], record["kind"], case, key, None, seconds, on_step)
    if record.get("seed") is not None:      # the seed's run, under the steering it was drawn with
        strategy = cases(max_stmts=max_stmts, steer=Steering.from_json(record.get("steer")))
        replay_and_shrink(sh, record["seed"], strategy, key, examples)
    best, stats = sh.finish()
    return best, stats, sh


def replay_and_shrink(sh: Shrinker, hseed: int, strategy, key: str, examples: int):
    """Replay the Hypothesis run of `hseed` over `strategy` until the program `key` comes round,
    then let Hypothesis shrink it with `sh.step` as the test body (a program that does not come
    round is left to the IR reducer, Shrinker.finish). Internal, KeyboardInterrupt and SystemExit
    propagate; Found, BudgetOver and Hypothesis' wrappers of them end the replay."""
    from hypothesis import given
    from hypothesis import seed as hseed_
    seeking = [True]

    def body(c):
        if seeking[0]:
            if corpus.case_key(c) == key:
                seeking[0] = False
                found()
            return
        sh.step(c)
    test = hypothesis_settings(examples, True)(hseed_(hseed)(given(strategy)(body)))
    try:
        test()
    except (Internal, KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - Found, BudgetOver, or Hypothesis' wrappers of them
        pass

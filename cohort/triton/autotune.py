"""@triton.autotune on cohort: the configs left after pruning are timed as native builds and
the fastest is kept, cached per key, as Triton times its own (DESIGN §10, *Autotune*).

The choice is made the same way in every mode: the reference and check modes run the config
native mode would run, so the three modes give the same bits on a correct kernel. Each timed
launch runs natively on the caller's tensors between the `reset_to_zero` / `restore_value`
hooks, as Triton's benchmarking does, and after the choice the reset runs once more before the
chosen config's launch. A config native mode does not build (UnsupportedConstruct) or that
fails is not chosen; when none builds, the first config left is. COHORT_TRITON_AUTOTUNE=first
skips the timing (the first config left, every run: docs/knobs.md).
"""
from __future__ import annotations

import statistics
import time

from .. import knobs
from . import state
from .errors import TritonError

WARMUP = 1             # untimed launches per config (the first builds it)
REPEATS = 5            # timed launches per config: the median is compared
BUDGET_S = 0.2         # fewer timed launches when a config's first one takes longer than this / REPEATS


def _timed(tuner, args, kwargs, config) -> float:
    """The median time of `config`'s native launches (inf when it cannot run natively)."""
    current = {**kwargs, **config.all_kwargs()}
    full = {**tuner.nargs, **current}

    def call():
        if config.pre_hook is not None:
            config.pre_hook(full)
        tuner.pre_hook(full)
        try:
            tuner.fn.run(*args, **current)
        finally:
            tuner.post_hook(full, exception=None)

    times = []
    try:
        with state.native_mode():
            for _ in range(WARMUP):
                call()
            while len(times) < REPEATS:
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
                if sum(times) > BUDGET_S:
                    break
    except TritonError:
        return float("inf")
    return statistics.median(times)


def autotuner_run(self, *args, **kwargs):
    self.nargs = dict(zip(self.arg_names, args))
    config, timed = self.configs[0], False
    if len(self.configs) > 1:
        all_args = {**self.nargs, **kwargs}
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        key = tuple(key)
        if key not in self.cache:
            pruned = self.prune_configs(kwargs)
            if len(pruned) > 1 and knobs.TRITON_AUTOTUNE.get() == "time":
                t0 = time.perf_counter()
                timings = {c: _timed(self, args, kwargs, c) for c in pruned}
                self.bench_time = time.perf_counter() - t0
                self.configs_timings = timings
                best = min(pruned, key=lambda c: timings[c])      # ties: the first, as min keeps
                self.cache[key] = best
            else:
                self.cache[key] = pruned[0]
            timed = len(pruned) > 1
        config = self.cache[key]
    self.best_config = config
    full = {**self.nargs, **kwargs, **config.all_kwargs()}
    if timed:
        self.pre_hook(full, reset_only=True)
    if config.pre_hook is not None:
        config.pre_hook(full)
    try:
        return self.fn.run(*args, **kwargs, **config.all_kwargs())
    finally:
        self.nargs = None

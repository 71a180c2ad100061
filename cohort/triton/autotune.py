"""@triton.autotune on cohort: the first config left after pruning, cached per key.

Choosing by timing native builds is not built yet. As Triton does when it
benchmarks (more than one config left), the `reset_to_zero` / `restore_value`
hook runs before the chosen config's launch; with one config it does not.
"""
from __future__ import annotations


def autotuner_run(self, *args, **kwargs):
    self.nargs = dict(zip(self.arg_names, args))
    config, benchmarked = self.configs[0], False
    if len(self.configs) > 1:
        all_args = {**self.nargs, **kwargs}
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        key = tuple(key)
        if key not in self.cache:
            pruned = self.prune_configs(kwargs)
            self.cache[key] = pruned[0]
            benchmarked = len(pruned) > 1
        config = self.cache[key]
    self.best_config = config
    full = {**self.nargs, **kwargs, **config.all_kwargs()}
    if benchmarked:
        self.pre_hook(full, reset_only=True)
    if config.pre_hook is not None:
        config.pre_hook(full)
    try:
        return self.fn.run(*args, **kwargs, **config.all_kwargs())
    finally:
        self.nargs = None

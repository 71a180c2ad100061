"""How a launch runs: the one rule (DESIGN §5, §6).

A variant's grain and workers decide, for a launch of `nblocks` blocks, one route:

  Caller  every block on the calling thread: grain=caller, or one worker, or a
          grain that makes one task (waking workers could only slow it down)
  Pool    tasks of `grain` blocks claimed by `workers` participants (the caller
          and workers - 1 pool threads, runtime.WorkerPool)
  Auto    grain=auto or joint_legacy: chosen by measurement on the first
          launches (runtime.AutoChoice) among the `Candidate`s made here

`policy_of(variant)` is made once per variant and asked by every consumer:
CompiledKernel and PreparedLaunch (compiler.py), the runtime, cohort.torch's
launcher, `cohort run`/`cohort time` (verify/opcheck.py, cli_check.py), the
fuzz matrix (verify/matrix.py) and the audit columns. Nobody else restates the
rule; tests/test_one_route.py fails if a copy appears.

The runtime's native launch entry (pool_ir's `cohort_runtime_launch`, the
runtime-E2E boundary: no Python between launches) makes the same decision in
native code from `native_word`; tests/test_one_route.py checks that it agrees
with `route` over grains, worker counts and block counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Union

from .variant import AUTO_GRAINS, Variant, parse_variant


def grain_for(grain, nblocks: int, workers: int) -> int:
    """Blocks per task of a fixed grain policy: `legacy` an even split (one task per worker),
    0 the runtime's pick (about four tasks per worker), N >= 1 itself."""
    if grain == "legacy":
        return max(1, -(-nblocks // workers))
    if grain == 0:
        return max(1, -(-nblocks // (4 * workers)))
    return int(grain)


# ---------------------------------------------------------------- routes

@dataclass(frozen=True)
class Caller:
    """Every block on the calling thread. `why`: "grain=caller", "workers=1" or "one task"
    (then `grain` is the policy's task size, at least the launch's block count)."""
    why: str
    grain: Optional[int] = None


@dataclass(frozen=True)
class Pool:
    """Tasks of `grain` blocks (`tasks` of them, the last maybe partial) over `workers` participants."""
    workers: int
    grain: int
    tasks: int


@dataclass(frozen=True)
class Auto:
    """Chosen by measurement (runtime.AutoChoice) among `LaunchPolicy.candidates`."""
    policy: str          # "auto" | "joint_legacy"
    workers: int


Route = Union[Caller, Pool, Auto]
GRAIN_CALLER = Caller("grain=caller")
ONE_WORKER = Caller("workers=1")


# ---------------------------------------------------------------- auto's candidates

@dataclass(frozen=True)
class BuildEntry:
    """A compiled entry auto may run: its build's lanes, the entry's address and its ctypes
    function (CompiledKernel.auto_entries)."""
    lanes: int
    address: int
    fn: object = field(repr=False, compare=False)


@dataclass(frozen=True)
class Candidate:
    """One way auto may run a launch: an entry and a route (Caller or Pool)."""
    label: str           # e.g. "lanes=8,caller", "lanes=1,grain=3", "lanes=8,grain=legacy(13)"
    entry: BuildEntry
    route: Union[Caller, Pool]

    @property
    def on_caller(self) -> bool:
        return type(self.route) is Caller

    @property
    def native_word(self) -> int:
        """The runtime record's policy word that runs this candidate (pool_ir: -1 the caller)."""
        return -1 if type(self.route) is Caller else self.route.grain


# ---------------------------------------------------------------- the policy

_NATIVE_WORD = {"caller": -1, "legacy": -2}   # pool_ir's runtime record, slot 3


@dataclass(frozen=True)
class LaunchPolicy:
    """A variant's launch knobs and the rule that turns them into a route (module notes)."""
    grain: Union[str, int]
    workers: int
    is_auto: bool = field(init=False)
    on_caller: bool = field(init=False)    # every launch on the calling thread, whatever its size
    _routes: dict = field(init=False, default_factory=dict, repr=False, compare=False, hash=False)

    def __post_init__(self):
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        auto = self.grain in AUTO_GRAINS
        object.__setattr__(self, "is_auto", auto)
        object.__setattr__(self, "on_caller", self.grain == "caller" or (self.workers == 1 and not auto))

    def route(self, nblocks: int) -> Route:
        """How a launch of `nblocks` blocks runs."""
        r = self._routes.get(nblocks)
        if r is None:
            r = self._route(nblocks)
            if len(self._routes) > 4096:
                self._routes.clear()
            self._routes[nblocks] = r
        return r

    def _route(self, nblocks: int) -> Route:
        if self.grain == "caller":
            return GRAIN_CALLER
        if self.is_auto:
            return Auto(self.grain, self.workers)
        if self.workers == 1:
            return ONE_WORKER
        grain = grain_for(self.grain, nblocks, self.workers)
        if grain >= nblocks:
            return Caller("one task", grain)
        return Pool(self.workers, grain, -(-nblocks // grain))

    @property
    def native_word(self) -> int:
        """The runtime record's policy word (pool_ir, slot 3): -1 caller, -2 legacy, 0 the
        runtime's pick, N blocks per task. Auto has none: its choice writes a candidate's."""
        if self.is_auto:
            raise ValueError(f"grain={self.grain} is chosen per launch: write the chosen candidate's word")
        return _NATIVE_WORD.get(self.grain, self.grain)

    def candidates(self, nblocks: int, entries) -> tuple:
        """What auto tries for a launch of `nblocks` blocks, per entry (this variant's build,
        then the whole build): auto the caller, the runtime's grain and the legacy split;
        joint_legacy the legacy split only (or the caller, when that split is one task)."""
        if not self.is_auto:
            raise ValueError(f"policy must be one of {AUTO_GRAINS}, got {self.grain!r}")
        w = self.workers
        out = []
        for e in entries:
            lanes = f"lanes={e.lanes}"
            if self.grain == "joint_legacy":
                g = grain_for("legacy", nblocks, w)
                if w > 1 and g < nblocks:
                    out.append(Candidate(f"{lanes},grain=legacy({g})", e, Pool(w, g, -(-nblocks // g))))
                else:
                    out.append(Candidate(f"{lanes},caller", e, Caller("one task", g)))
                continue
            out.append(Candidate(f"{lanes},caller", e, GRAIN_CALLER))
            if w > 1 and nblocks > 1:
                for g in sorted({grain_for(0, nblocks, w), grain_for("legacy", nblocks, w)}):
                    if g < nblocks:
                        out.append(Candidate(f"{lanes},grain={g}", e, Pool(w, g, -(-nblocks // g))))
        return tuple(out)


@lru_cache(maxsize=256)
def policy_for(grain, workers: int) -> LaunchPolicy:
    """The launch policy of these knobs (one object per grain and worker count)."""
    return LaunchPolicy(grain, workers)


def is_auto(spec: str) -> bool:
    """Whether the variant spelled `spec` has its launches' route chosen by measurement
    (grain=auto or joint_legacy): the audit suites and tables set such columns apart."""
    return policy_of(parse_variant(spec)).is_auto


def policy_of(how) -> LaunchPolicy:
    """The launch policy of a Variant (made once per grain and worker count), or `how` itself."""
    if type(how) is LaunchPolicy:
        return how
    if not isinstance(how, Variant):
        raise TypeError(f"expected a Variant or a LaunchPolicy, got {type(how).__name__}")
    return policy_for(how.grain, how.workers)

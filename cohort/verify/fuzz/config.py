"""A campaign's configuration: what it runs, where, for how long, and where it keeps its state."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..matrix import DEFAULT_VARIANTS


@dataclass
class CampaignConfig:
    seconds: float = 60.0
    seed: int = 0
    jobs: int = 1                      # worker processes; 0 runs everything in this process
    max_programs: Optional[int] = None
    variants: tuple = DEFAULT_VARIANTS
    bugs: tuple = ()                   # injected backend bugs (testing the fuzzer itself)
    shrink: bool = True
    shrink_seconds: float = 60.0
    max_shrinks: int = 3               # failures shrunk per campaign; later ones are kept as found
    stop_on_failure: bool = False
    corpus_dir: Optional[str] = None   # where failing cases are written (None: nowhere)
    max_corpus_writes: int = 20
    batch: int = 9                     # examples per Hypothesis run (one seed per batch). Hypothesis
                                       # mutates examples after its first 10 and starts runs of 10 or
                                       # more with deliberately small ones; compiles are dear, so
                                       # fresh random programs pay most here
    max_stmts: int = 16
    progress: bool = False
    campaign_dir: Optional[str] = None  # durable state (state.py): resume, merge
    scheduler: Optional[str] = None     # a Dask scheduler address or local:N (cluster.py)
    seeds_per_task: int = 1             # Dask tasks: seeds per task
    seeds: Optional[int] = None         # run seeds 0..seeds-1 only (a finite campaign; resumable)
    variants_per_program: Optional[int] = 4  # run `whole` + this many - 1 variants drawn per program
                                        # (rotation.py; docs/fuzzing.md measures why); None: all of them
    steer: bool = True                  # weigh what this run has not covered yet and make its missing
                                        # rare shapes on purpose (gen/steer.py); see plain_every
    plain_every: int = 2                # steered: every plain_every-th seed (index plain_every-1, 2*..-1,
                                        # ...) draws from the unsteered distribution, so the aimed
                                        # programs of a campaign's first minutes never crowd out the
                                        # plain ones (NaN compares, stride and sign slips are found
                                        # there: docs/fuzzing.md, 'steering on by default'); 0: every seed steered
    steer_batch: int = 3                # steered: Hypothesis runs of at most this many examples, the
                                        # steering refreshed between them (a run keeps one steering)

    def examples(self) -> int:
        """Examples per Hypothesis run (per seed) in a local campaign."""
        return min(self.batch, self.steer_batch) if self.steer else self.batch

    def steered(self, index: int) -> bool:
        """Whether seed `index` of this campaign is drawn under the steering."""
        return seed_steered(index, self.steer, self.plain_every)

    def meaning(self) -> dict:
        """What a seed of this campaign is (stored in its directory, checked on resume)."""
        return {"seed": self.seed, "variants": list(self.variants), "max_stmts": self.max_stmts,
                "examples_per_seed": self.examples(), "bugs": sorted(self.bugs),
                "variants_per_program": self.variants_per_program}


def seed_steered(index: int, steer: bool, plain_every: int) -> bool:
    """Seed `index` of a campaign is steered (CampaignConfig.plain_every): the same rule locally
    and on a cluster."""
    return steer and not (plain_every > 0 and index % plain_every == plain_every - 1)

"""A campaign's report as data: this run's (from its Tally) and the whole campaign's (from its directory)."""
from __future__ import annotations

import os
from typing import Optional

from ..matrix import FAST_MATH_NOTE
from .config import CampaignConfig
from .state import CampaignState, seed_value
from .tally import Tally


def session_report(cfg: CampaignConfig, t: Tally, seconds: float, failures: list, interrupted: bool) -> dict:
    gen = max(t.generated, 1)
    return {
        "seed": cfg.seed,
        "seconds": round(seconds, 2),
        "programs": t.programs,
        "generated": t.generated,
        "discarded": t.discarded,
        "discard_rate": round(t.discarded / gen, 4),
        "discard_reasons": dict(t.discard_reasons),
        "variant_runs": t.variant_runs,
        "variants_skipped": t.skipped,
        "programs_cut_by_time_box": t.cut,
        "programs_per_second": round(t.programs / max(seconds, 1e-9), 3),
        "variant_runs_per_second": round(t.variant_runs / max(seconds, 1e-9), 2),
        "mismatches": t.mismatches,
        "failing_programs": t.failing_programs,
        "failure_kinds": dict(t.failure_kinds),
        "failures": failures,
        "bins": {str(k): v for k, v in sorted(t.bins.items())},
        "variants": list(cfg.variants),
        "steering": ("off" if not cfg.steer or cfg.plain_every == 1 else "on" if cfg.plain_every <= 0 else
                     "mixed" if cfg.plain_every == 2 else f"steered but 1 seed in {cfg.plain_every} plain"),
        "fast_math": FAST_MATH_NOTE,
        "injected_bugs": list(cfg.bugs),
        "interrupted": interrupted,
        "coverage": t.coverage.report(),
    }


def campaign_summary(state: CampaignState, seeds_this_run: int, seeds: Optional[int] = None) -> dict:
    """The whole campaign so far (every run of it), from its directory. `seeds`: the run's
    --seeds N; complete when seeds 0..N-1 are all done (running it again has nothing to do)."""
    t = state.total
    bins = state.bins()
    return {
        "dir": os.path.abspath(state.dir),
        "seeds_done": len(state.done),
        "seeds_this_run": seeds_this_run,
        "complete": seeds is not None and len(state.done) >= seeds and all(
            state.is_done(seed_value(state.config.get("seed", 0), i)) for i in range(seeds)),
        "programs": t.programs,
        "variant_runs": t.variant_runs,
        "discarded": t.discarded,
        "mismatches": t.mismatches,
        "failing_programs": t.failing_programs,
        "failure_bins": {b: {"count": v["count"], "kind": v["first"]["kind"], "variant": v["first"]["variant"],
                             "shrunk": v["shrunk"] is not None,
                             "case_file": os.path.join(state.cases_dir, f"{b}.json")} for b, v in bins.items()},
        "coverage_gaps": t.coverage.report()["gaps"],
        "workers": {w: {**v, "programs_per_second": round(v["programs"] / max(v["seconds"], 1e-9), 3)}
                    for w, v in state.workers.items()},
    }

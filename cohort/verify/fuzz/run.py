"""`run_campaign`: a campaign in this process (campaign.py) or on a Dask cluster (cluster.py),
with or without a campaign directory (state.py)."""
from __future__ import annotations

import os
from typing import Optional

from .config import CampaignConfig
from .state import CampaignState


def open_state(cfg: CampaignConfig) -> Optional[CampaignState]:
    return CampaignState(cfg.campaign_dir, cfg.meaning()) if cfg.campaign_dir else None


def default_corpus_dir() -> Optional[str]:
    """tests/corpus of the source tree this package runs from, if there is one."""
    here = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    d = os.path.join(root, "tests", "corpus")
    return d if os.path.isdir(d) else None


def run_campaign(seconds: float = 60.0, seed: int = 0, **kw) -> dict:
    """A time-boxed campaign (see CampaignConfig); injected bugs active in the caller
    (`inject_bug_TESTING_ONLY`) are passed on to the workers. With `scheduler`, it runs on
    a Dask cluster (cluster.py); with `campaign_dir`, it resumes and records there."""
    from ...backend import inject
    bugs = tuple(sorted(set(kw.pop("bugs", ())) | set(inject.key())))
    cfg = CampaignConfig(seconds=seconds, seed=seed, bugs=bugs, **kw)
    state = open_state(cfg)
    try:
        if cfg.scheduler:
            from .cluster import ClusterCampaign
            return ClusterCampaign(cfg, state).run()
        from .campaign import Campaign
        return Campaign(cfg, state=state).run()
    finally:
        if state is not None:
            state.close()

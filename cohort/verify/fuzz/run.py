"""The entry of a campaign: local (campaign.py) or on a Dask cluster (cluster.py).
Kept apart so that neither module imports the other's driver (no import cycle)."""
from __future__ import annotations

from .campaign import Campaign, CampaignConfig, open_state
from .cluster import ClusterCampaign


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
            return ClusterCampaign(cfg, state).run()
        return Campaign(cfg, state=state).run()
    finally:
        if state is not None:
            state.close()

"""What a run of programs amounts to: counts, checksum bins, failures by kind,
coverage. One `Tally` per seed (the unit of a campaign's durable state,
computed where the seed ran, a local process or a Dask worker), summed into
the campaign's."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..execute import FAILURE_STATUSES
from .coverage import Coverage
from .stress import STRESS


def checksum_bins(res: dict) -> dict:
    """YARPGen's bins: output checksum -> the variants (and "reference") that produced it.
    A program whose variants fall into more than one bin has found a disagreement."""
    bins = {}
    ref = res.get("reference_checksum")
    if ref:
        bins.setdefault(ref, []).append("reference")
    for v, r in res["variants"].items():
        if r["status"] == "unsupported" or v == STRESS:    # another program's launch (stress.py)
            continue
        bins.setdefault(r.get("checksum") or f"<{r['status']}>", []).append(v)
    return bins


def failures_of(res: dict) -> list:
    """(variant, record) of every failing variant run."""
    return [(v, r) for v, r in res["variants"].items() if r["status"] in FAILURE_STATUSES]


COUNTS = ("programs", "generated", "discarded", "variant_runs", "skipped", "cut", "mismatches", "failing_programs")


@dataclass
class Tally:
    programs: int = 0            # programs every variant ran on
    generated: int = 0           # programs drawn (and not seen before)
    discarded: int = 0           # ... that the interpreter rejected
    variant_runs: int = 0
    skipped: int = 0             # matrix variants that do not apply to a program
    cut: int = 0                 # programs dropped at the end of the time box
    mismatches: int = 0          # failing variant runs
    failing_programs: int = 0
    seconds: float = 0.0         # busy time (per worker: its throughput)
    discard_reasons: Counter = field(default_factory=Counter)
    failure_kinds: Counter = field(default_factory=Counter)
    bins: Counter = field(default_factory=Counter)          # bins per program -> programs
    coverage: Coverage = field(default_factory=Coverage)
    keys: list = field(default_factory=list)                # the programs (case_key prefixes)

    def program(self, case, key: str, res: dict, skipped: int) -> list:
        """Count one program's run (`execute` result; `skipped` matrix variants that do not
        apply to it); returns its failures."""
        self.generated += 1
        self.keys.append(key[:16])
        self.skipped += skipped
        if res["discard"]:
            self.discarded += 1
            self.discard_reasons[res["discard"]["reason"]] += 1
            return []
        self.programs += 1
        self.coverage.program(case)
        for r in res["variants"].values():
            if r["status"] == "unsupported":
                continue
            self.variant_runs += 1
            self.coverage.variant(r)
        self.bins[len(checksum_bins(res))] += 1
        fails = failures_of(res)
        if fails:
            self.mismatches += len(fails)
            self.failing_programs += 1
            for _, r in fails:
                self.failure_kinds[r["status"]] += 1
        return fails

    def add(self, other: "Tally") -> "Tally":
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds
        self.discard_reasons.update(other.discard_reasons)
        self.failure_kinds.update(other.failure_kinds)
        self.bins.update(other.bins)
        self.coverage.add(other.coverage.counts())
        self.keys.extend(other.keys)
        return self

    def to_json(self) -> dict:
        doc = {name: getattr(self, name) for name in COUNTS}
        doc.update(seconds=round(self.seconds, 3), discard_reasons=dict(self.discard_reasons),
                   failure_kinds=dict(self.failure_kinds), bins={str(k): v for k, v in self.bins.items()},
                   coverage=self.coverage.counts(), keys=list(self.keys))
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "Tally":
        t = cls(**{name: int(doc.get(name, 0)) for name in COUNTS})
        t.seconds = float(doc.get("seconds", 0.0))
        t.discard_reasons.update(doc.get("discard_reasons", {}))
        t.failure_kinds.update(doc.get("failure_kinds", {}))
        t.bins.update({int(k): v for k, v in doc.get("bins", {}).items()})
        t.coverage.add(doc.get("coverage", {}))
        t.keys.extend(doc.get("keys", ()))
        return t

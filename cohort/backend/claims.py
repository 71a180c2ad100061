"""Lane claims: what a packet lowering assumes about the lanes of a packet (DESIGN §5).

Each memory access, `if` and loop a packet lowering emits rests on a claim
about its index (or condition, or bounds) across the W lanes it works in:
one value for all lanes, consecutive values, a fixed stride, or nothing
(gather/scatter, divergent `if`). The lowering records one `LaneClaim` per
IR node or statement; verification (`verify/lane_check.py`) runs the
interpreter on the very kernel object that was lowered and checks every
claim on the real lane values. The claims of one build, with the width they
speak of, are a `LaneClaims` mapping; a checker takes its width from there,
never from the variant's knobs (W is lanes x interleave).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Optional


class Site(Enum):
    """What the claim is about."""
    LOAD = "load"              # a buffer load's index
    STORE = "store"            # a buffer store's index
    PLOAD = "pload"            # a private array load's element index
    PSTORE = "pstore"          # a private array store's element index
    SLOAD = "sload"            # a shared array load's index
    SSTORE = "sstore"          # a shared array store's index
    ATOMIC = "atomic"          # an atomic update's index
    IF = "if"                  # an `if` condition
    FOR = "for"                # a loop's start
    FOR_STOP = "for-stop"      # a loop's stop

    @property
    def describes(self) -> str:
        return {"load": "load of", "store": "store to", "pload": "load of private",
                "pstore": "store to private",
                "sload": "load of shared", "sstore": "store to shared", "atomic": "atomic update of", "if": "if condition", "for": "loop start",
                "for-stop": "loop stop"}[self.value]


class Lanes(Enum):
    """How the value varies across the lanes, as the lowering relies on it."""
    UNIFORM = "uniform"        # one value in every lane
    CONTIGUOUS = "contiguous"  # base + lane (a private access: one element index, see lane_stride)
    STRIDED = "strided"        # base + stride * lane
    GATHER = "gather"          # any values (loads)
    SCATTER = "scatter"        # any values (stores)
    DIVERGENT = "divergent"    # an `if` lowered under a mask: any values


class Mode(Enum):
    """How the effect is carried out."""
    UNMASKED = "unmasked"      # no mask: every lane of the packet is active
    MASKED = "masked"          # a masked vector instruction
    PER_LANE = "per-lane"      # one branch per lane (predicated=off)
    COHORT = "cohort"          # private array in cohort layout (element x of thread t at x*B + t)
    THREAD = "thread"          # private array in thread layout (t*size + x)
    BRANCH = "branch"          # one branch for the packet (uniform condition or trip count)
    PREFIX = "prefix"          # loop lanes still running at iteration k are a prefix


_SITES = {s.value: s for s in Site}
_LANES = {x.value: x for x in Lanes}
_MODES = {m.value: m for m in Mode}


@dataclass(frozen=True)
class LaneClaim:
    site: Site
    name: str                            # buffer or private array ("" for control flow)
    lanes: Lanes
    stride: int = 0                      # for STRIDED (and the thread layout's element step)
    modes: frozenset = frozenset()       # of Mode

    @classmethod
    def of(cls, site: str, name: str, access, mode: str, before: Optional["LaneClaim"] = None) -> "LaneClaim":
        """From the lowering's words: `access` a shapes.Access (or None: a divergent `if`);
        a second lowering of the same node (full and masked path) adds its mode."""
        modes = (before.modes if before is not None else frozenset()) | {_MODES[mode]}
        if access is None:
            return cls(_SITES[site], name, Lanes.DIVERGENT, 0, modes)
        return cls(_SITES[site], name, _LANES[access.kind], int(access.stride), modes)

    @property
    def lane_stride(self) -> Optional[int]:
        """The difference between the values of neighbouring active lanes the lowering
        relies on, or None when it relies on nothing."""
        if self.site in (Site.PLOAD, Site.PSTORE):
            # cohort layout with a uniform element index (one vector access at x*B + t0), or
            # thread layout with a known step: the element index is the same in every lane
            uniform_index = self.lanes is Lanes.CONTIGUOUS or self.stride
            return 0 if uniform_index else None
        if self.site is Site.IF:
            return 0 if self.lanes is Lanes.UNIFORM else None
        if self.lanes is Lanes.UNIFORM:
            return 0
        if self.lanes is Lanes.CONTIGUOUS:
            return 1
        if self.lanes is Lanes.STRIDED:
            return self.stride
        return None

    @property
    def unmasked_only(self) -> bool:
        """A memory effect lowered only without a mask: every packet it runs in must be full."""
        return self.modes == frozenset({Mode.UNMASKED}) and self.site in (
            Site.LOAD, Site.STORE, Site.PSTORE, Site.SLOAD, Site.SSTORE)

    @property
    def summary(self) -> str:
        """`site:lanes`, e.g. load:contiguous, if:divergent (coverage counts)."""
        return f"{self.site.value}:{self.lanes.value}"

    def describe(self) -> str:
        what = self.lanes.value if self.lanes is not Lanes.STRIDED else f"strided({self.stride})"
        return f"{self.site.describes} {self.name}".strip() + f" lowered as {what}"


@dataclass(frozen=True, eq=False)
class LaneClaims(Mapping):
    """The claims of one build: id(node or statement of the lowered kernel) -> LaneClaim,
    and `width`, the lanes the lowering worked in (packet lanes x interleave)."""
    claims: dict = field(default_factory=dict)
    width: int = 1

    def __getitem__(self, key):
        return self.claims[key]

    def __iter__(self):
        return iter(self.claims)

    def __len__(self):
        return len(self.claims)

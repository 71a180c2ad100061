"""Variants: named sets of independent knobs (DESIGN §5) and their spelling.

`parse_variant` accepts a preset (`whole`, `packet`, ...), knobs
(`lanes=8,full_packet=off,private=thread`), or a preset followed by knob
overrides (`packet,grain=auto,workers=2`). Knobs not given take the `packet`
preset's values, with grain=caller and workers=1. `workers` is at most
MAX_WORKERS: every worker is a native thread the pool keeps for the process.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Optional, Union


class VariantError(ValueError):
    pass


# Grains chosen by measurement per launch: auto (the seeds' joint_tasks: lanes and grain
# together) and joint_legacy (lanes only, with the legacy even split).
AUTO_GRAINS = ("auto", "joint_legacy")
MAX_WORKERS = 256   # threads a launch may ask for (a larger request is a usage error)


@dataclass(frozen=True)
class Variant:
    lanes: int = 8
    block: Optional[int] = None          # None: the kernel's own block size
    full_packet: bool = True
    predicated: bool = True
    private: str = "cohort"              # "cohort" | "thread"
    fast_math: bool = False
    grain: Union[str, int] = "caller"    # "caller" | N >= 1 | 0 | "legacy" | "auto" | "joint_legacy"
    workers: int = 1
    checked: bool = False                # bounds checks compiled into the native code
    interleave: Union[str, int] = "auto"  # packets of a cohort run side by side: "auto" or 1, 2, 4, ...
    unsafe: bool = False                 # no bounds checks at all (off: affine indices proven per launch)
    sanitize: bool = False               # the interpreter's memory and barrier errors detected (lowering/sanitize*.py)

    def __post_init__(self):
        if self.checked and self.unsafe:
            raise VariantError("checked=on and unsafe=on contradict each other (checked: every access "
                               "checked; unsafe: none)")
        if self.sanitize and self.unsafe:
            raise VariantError("sanitize=on and unsafe=on contradict each other (sanitize: shared and global "
                               "memory checked; unsafe: nothing checked)")

    @property
    def name(self) -> str:
        """Canonical spelling, every knob given (stable across processes)."""
        parts = []
        for k, v in asdict(self).items():
            if (k == "block" and v is None) or (k == "sanitize" and not v):
                continue             # (sanitize=off is left out: names from before the knob stay valid)
            parts.append(f"{k}={_show(v)}")
        return ",".join(parts)

    @property
    def label(self) -> str:
        """The preset's name when the knobs are exactly a preset's, else the canonical name."""
        for name, knobs in PRESETS.items():
            if replace(DEFAULT, **knobs) == self:
                return name
        return self.name

    @property
    def compile_key(self) -> tuple:
        """The knobs that change generated code (not grain or workers)."""
        return (self.lanes, self.block, self.full_packet, self.predicated, self.private,
                self.fast_math, self.checked, self.interleave, self.unsafe, self.sanitize)


def _show(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


DEFAULT = Variant()
PRESETS = {
    "whole": {"lanes": 1},
    "packet": {},
    "packet-thread-private": {"private": "thread"},
    "packet-masked": {"full_packet": False},
    "packet-branchy": {"predicated": False},
    "packet-fast": {"fast_math": True},
}


def _onoff(key: str, text: str) -> bool:
    t = text.lower()
    if t in ("on", "true", "1", "yes"):
        return True
    if t in ("off", "false", "0", "no"):
        return False
    raise VariantError(f"knob {key} takes on or off, got {text!r}")


def _int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise VariantError(f"knob {key} takes an integer, got {text!r}") from None


def _knob(key: str, text: str):
    if key == "lanes":
        v = _int(key, text)
        if v not in (1, 4, 8, 16):
            raise VariantError(f"lanes must be 1, 4, 8 or 16, got {v}")
        return v
    if key == "block":
        v = _int(key, text)
        if v < 1 or v & (v - 1) or v > 1024:
            raise VariantError(f"block must be a power of two from 1 to 1024, got {v}")
        return v
    if key in ("full_packet", "predicated", "fast_math", "checked", "unsafe", "sanitize"):
        return _onoff(key, text)
    if key == "private":
        if text not in ("cohort", "thread"):
            raise VariantError(f"private must be cohort or thread, got {text!r}")
        return text
    if key == "grain":
        if text in ("caller", "legacy") + AUTO_GRAINS:
            return text
        v = _int(key, text)
        if v < 0:
            raise VariantError(f"grain must be caller, legacy, auto, joint_legacy or an integer >= 0, got {v}")
        return v
    if key == "interleave":
        if text == "auto":
            return text
        v = _int(key, text)
        if v < 1 or v & (v - 1):
            raise VariantError(f"interleave must be auto or a power of two, got {v}")
        return v
    if key == "workers":
        v = _int(key, text)
        if not 1 <= v <= MAX_WORKERS:
            raise VariantError(f"workers must be from 1 to {MAX_WORKERS}, got {v}")
        return v
    known = ", ".join(f for f in Variant.__dataclass_fields__)
    raise VariantError(f"unknown knob {key!r}; knobs are {known}")


def register_packet(vector_bits: int) -> str:
    """The packet variant whose packet fills one vector register of `vector_bits`: 16 lanes on
    512-bit registers, else `packet` (8 lanes). cohort.torch's default (cohort/torch/launch.py)
    and the torch suite's description of it (audit/suites.py) both ask this."""
    return "packet,lanes=16" if vector_bits >= 512 else "packet"


def parse_variant(text: str) -> Variant:
    """A Variant from its spelling; raises VariantError with a one-line reason."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise VariantError("empty variant")
    knobs = {}
    if "=" not in items[0]:
        preset = items.pop(0)
        if preset == "ref":         # the interpreter: no native variant, so no knobs to set on it
            raise VariantError("ref is the interpreter and takes no knobs; give a native preset "
                               f"({', '.join(PRESETS)}) before knob=value")
        if preset not in PRESETS:
            raise VariantError(f"unknown variant {preset!r}; presets are ref, {', '.join(PRESETS)}")
        knobs.update(PRESETS[preset])
    for item in items:
        if "=" not in item:
            raise VariantError(f"expected knob=value, got {item!r} (a preset name must come first)")
        key, value = (s.strip() for s in item.split("=", 1))
        knobs[key] = _knob(key, value)
    v = replace(DEFAULT, **knobs)
    if v.block is not None and v.block < v.lanes:
        raise VariantError(f"block ({v.block}) must be at least lanes ({v.lanes})")
    return v

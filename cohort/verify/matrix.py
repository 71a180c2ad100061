"""The variant matrix a fuzz case runs on (DESIGN §5), and how it is cut to a case.

KNOB_MATRIX: lanes 1, 4, 8, 16 x full_packet x predicated x private, at
interleave=auto (as many packets side by side as lower as well as one).
Around it, one or two specs for each other knob value that must not change
an output:

- INTERLEAVE_VARIANTS pin the interleave at one packet, at the whole cohort
  (`max`) and in between (`mid`), resolved per case (`auto` mostly picks the
  largest, so nothing else would run the in-between widths);
- CHECK_VARIANTS: `checked=on` (every access checked, no per-launch proof)
  and `unsafe=on` (no checks at all: the generator's programs are in bounds,
  so it must agree too);
- POOL_VARIANTS run the launch on the worker pool (DESIGN §6) through
  `CompiledKernel.launch`, as a user's launch does: grain 1, a grain that
  leaves the last task partial (`ragged`, resolved per case), the runtime's
  pick (`0`) and the even split (`legacy`), grains 2 and 3, over 2, 3 and 4 participants,
  whole-block bodies (full_packet=on) cut into tasks too.
  Grain and workers change no code, so three of them share a build with a
  KNOB_MATRIX spec (no compile of their own when both run in one worker
  process); the fourth is the checked whole build's.

Not in the matrix: fast_math (FAST_MATH_NOTE), the measured grains
(AUTO_GRAIN_NOTE) and the `block` knob (re-blocking a kernel changes what
its collectives mean: a different program, not a variant of this one).
"""
from __future__ import annotations

KNOB_MATRIX = tuple(["whole"] + [f"lanes={l},full_packet={fp},predicated={pr},private={pv}"
                                 for l in (4, 8, 16) for fp in ("on", "off") for pr in ("on", "off")
                                 for pv in ("cohort", "thread")])
# one packet at a time; the whole cohort side by side ("max" = block // lanes for the case at
# hand); an interleave strictly between ("mid", see resolve_interleave)
INTERLEAVE_VARIANTS = ("lanes=8,full_packet=on,predicated=on,private=cohort,interleave=1",
                       "lanes=4,full_packet=off,predicated=on,private=cohort,interleave=max",
                       "lanes=4,full_packet=on,predicated=on,private=cohort,interleave=mid",
                       "lanes=16,full_packet=off,predicated=off,private=thread,interleave=mid")
CHECK_VARIANTS = ("lanes=8,full_packet=off,predicated=on,private=thread,checked=on",
                  "lanes=16,full_packet=on,predicated=off,private=cohort,unsafe=on")
POOL_VARIANTS = ("whole,grain=1,workers=2",
                 "lanes=4,full_packet=off,predicated=on,private=thread,grain=ragged,workers=3",
                 "lanes=16,full_packet=on,predicated=off,private=cohort,grain=0,workers=2",
                 "whole,checked=on,grain=legacy,workers=3",
                 # issue 28: the whole-block body per task, more grains and worker counts
                 "lanes=8,full_packet=on,predicated=on,private=thread,grain=1,workers=4",
                 "lanes=4,full_packet=on,predicated=off,private=cohort,grain=2,workers=2",
                 "whole,grain=3,workers=2")
DEFAULT_VARIANTS = KNOB_MATRIX + INTERLEAVE_VARIANTS + CHECK_VARIANTS + POOL_VARIANTS
FAST_MATH_NOTE = ("fast_math variants excluded: their contract is a per-operator ulp bound, and no bound "
                  "holds for arbitrary random programs (reassociation, no-NaN/no-inf assumptions)")
AUTO_GRAIN_NOTE = ("grain=auto and joint_legacy excluded: they choose among the caller, grain 0 and the "
                   "legacy split (and the whole build) by timing repeated launches; one checked launch runs "
                   "only their first candidate, and the candidates are each in the matrix")


def short_name(variant) -> str:
    """The knobs that differ from a fuzz spec's defaults, parseable: lanes=..,full_packet=..,predicated=..,
    private=..[,interleave=..] (or `whole`), then block, fast_math, checked, unsafe, grain, workers if set."""
    from ..backend.variant import DEFAULT
    if variant.lanes == 1:
        name = "whole"
    else:
        name = (f"lanes={variant.lanes},full_packet={'on' if variant.full_packet else 'off'},"
                f"predicated={'on' if variant.predicated else 'off'},private={variant.private}")
        if variant.interleave != "auto":
            name += f",interleave={variant.interleave}"
    extra = [f"block={variant.block}"] if variant.block is not None else []
    extra += [f"{knob}=on" for knob in ("fast_math", "checked", "unsafe") if getattr(variant, knob)]
    if variant.grain != DEFAULT.grain:
        extra.append(f"grain={variant.grain}")
    if variant.workers != DEFAULT.workers:
        extra.append(f"workers={variant.workers}")
    return ",".join([name] + extra)


def resolve_interleave(word: str, most: int):
    """`max`: the whole cohort (most = block // lanes packets); `mid`: a power of two strictly
    between 1 and most, about its geometric middle (2 for most 4 or 8, 4 for 16 or 32: the
    widths `auto` skips when it can take all, kept small because compile time grows with
    width). None where there is no such width (that spec is not run for the case)."""
    if word == "max":
        return most if most >= 2 else None
    if word == "mid":
        return 1 << (most.bit_length() - 1) // 2 if most >= 4 else None
    return int(word)


def ragged_grain(nblocks: int):
    """The smallest grain >= 2 that cuts nblocks into several tasks, the last one partial
    (None below 3 blocks)."""
    return next((g for g in range(2, nblocks) if nblocks % g), None)


def pool_split(variant, nblocks: int):
    """(grain, tasks) of a launch of nblocks blocks on the worker pool (its launch policy's
    route, backend/launch_policy.py); None when it runs otherwise (the calling thread, auto)."""
    from ..backend.launch_policy import Pool, policy_of
    route = policy_of(variant).route(nblocks)
    return (route.grain, route.tasks) if type(route) is Pool else None


_PER_CASE = ("interleave=max", "interleave=mid", "grain=ragged")   # words _resolve makes numbers


def _resolve(spec: str, block: int, nblocks: int):
    """The spec with its per-case words (interleave=max|mid, grain=ragged) made numbers;
    None when the case has no such value."""
    from ..backend.variant import parse_variant
    knobs = spec.split(",")
    lanes = parse_variant(",".join(k for k in knobs if k not in _PER_CASE)).lanes
    for i, k in enumerate(knobs):
        if k in _PER_CASE[:2]:
            value = resolve_interleave(k[11:], block // lanes)
        elif k == "grain=ragged":
            value = ragged_grain(nblocks)
        else:
            continue
        if value is None:
            return None
        knobs[i] = f"{k.split('=')[0]}={value}"
    return ",".join(knobs)


def variants_for(case, matrix=DEFAULT_VARIANTS) -> list:
    """The matrix for this case, each spec run once: per-case words resolved (a spec without a
    value for the case is dropped); lanes <= block and lanes x interleave <= block; knobs that
    cannot change this case's code or launch set to their plain value - the private layout
    without private arrays, an interleave with one packet per cohort, grain and workers when
    the launch would be one task on the calling thread - and the duplicates this makes dropped."""
    from dataclasses import replace

    from ..backend.launch_policy import Caller, policy_of
    from ..backend.variant import parse_variant
    from ..refimpl.ir import Private
    has_private = any(isinstance(s, Private) for s in case.kernel.body)
    nblocks = -(-case.n // case.block)
    out = []
    for spec in matrix:
        spec = _resolve(spec, case.block, nblocks)
        if spec is None:
            continue
        v = parse_variant(spec)
        if v.lanes > case.block or (v.interleave != "auto" and v.lanes * v.interleave > case.block):
            continue
        if v.lanes > 1 and not has_private:
            v = replace(v, private="cohort")
        if v.lanes > 1 and case.block // v.lanes == 1:
            v = replace(v, interleave="auto")
        if type(policy_of(v).route(nblocks)) is Caller:
            v = replace(v, grain="caller", workers=1)
        name = short_name(v)
        if name not in out:
            out.append(name)
    return out


def rerun_sensitive(case, applicable: list) -> list:
    """The variants of `applicable` that cut the whole-block body into several pool tasks, a task
    ending before the launch's last whole block, when the program's blocks are not idempotent (a
    store of a value read from its own address, or an atomic add, sub or xor of a global buffer):
    there a block run twice or skipped by a slip at a task's edge changes the outputs; a program
    that only writes what it read elsewhere hides it. Empty otherwise."""
    from ..backend.variant import parse_variant
    from .gen.steer import not_idempotent
    if not not_idempotent(case.kernel):
        return []
    nblocks, nfull = -(-case.n // case.block), case.n // case.block
    out = []
    for spec in applicable:
        v = parse_variant(spec)
        split = pool_split(v, nblocks) if v.full_packet and v.lanes > 1 else None
        if split is not None and split[0] < nfull:
            out.append(spec)
    return out


def shrink_cost(spec: str) -> tuple:
    """Relative compile cost of a variant (shrinking recompiles its target at every step):
    whole is cheapest; full_packet=on doubles the code, predicated=off scalarises effects."""
    from ..backend.variant import parse_variant
    v = parse_variant(spec)
    if v.lanes == 1:
        return (0, 0)
    return (1 + (not v.predicated) * 2 + v.full_packet, v.lanes)

"""The variant matrix a fuzz case runs on (DESIGN §5), and how it is cut to a case.

lanes 1, 4, 8, 16 x full_packet x predicated x private, at interleave=auto
(as many packets side by side as lower as well as one), plus two variants
that pin the interleave knob at its ends. fast_math variants are not in the
matrix (FAST_MATH_NOTE).
"""
from __future__ import annotations

KNOB_MATRIX = tuple(["whole"] + [f"lanes={l},full_packet={fp},predicated={pr},private={pv}"
                                 for l in (4, 8, 16) for fp in ("on", "off") for pr in ("on", "off")
                                 for pv in ("cohort", "thread")])
# one packet at a time, and the whole cohort side by side ("max" = block // lanes for the case at hand)
INTERLEAVE_VARIANTS = ("lanes=8,full_packet=on,predicated=on,private=cohort,interleave=1",
                       "lanes=4,full_packet=off,predicated=on,private=cohort,interleave=max")
DEFAULT_VARIANTS = KNOB_MATRIX + INTERLEAVE_VARIANTS
FAST_MATH_NOTE = ("fast_math variants excluded: their contract is a per-operator ulp bound, and no bound "
                  "holds for arbitrary random programs (reassociation, no-NaN/no-inf assumptions)")


def short_name(variant) -> str:
    """lanes=..,full_packet=..,predicated=..,private=..[,interleave=..] (or `whole`): parseable, compact."""
    if variant.lanes == 1:
        return "whole"
    name = (f"lanes={variant.lanes},full_packet={'on' if variant.full_packet else 'off'},"
            f"predicated={'on' if variant.predicated else 'off'},private={variant.private}")
    interleave = getattr(variant, "interleave", "auto")
    return name if interleave == "auto" else f"{name},interleave={interleave}"


def variants_for(case, matrix=DEFAULT_VARIANTS) -> list:
    """The matrix for this case: lanes <= block, private knob only if there are private arrays,
    interleave=max resolved to block // lanes (and dropped where it is 1: a duplicate)."""
    from ..backend.variant import parse_variant
    from ..refimpl.ir import Private
    has_private = any(isinstance(s, Private) for s in case.kernel.body)
    out = []
    for spec in matrix:
        if "interleave=" in spec:
            lanes = parse_variant(spec.replace("interleave=max", "interleave=auto")).lanes
            if case.block // lanes < 2:       # one packet per cohort: the same code as auto
                continue
            spec = spec.replace("interleave=max", f"interleave={case.block // lanes}")
        v = parse_variant(spec)
        if v.lanes > case.block:
            continue
        if not has_private and v.lanes > 1 and v.private != "cohort":
            continue
        name = short_name(v)
        if name not in out:
            out.append(name)
    return out


def shrink_cost(spec: str) -> tuple:
    """Relative compile cost of a variant (shrinking recompiles its target at every step):
    whole is cheapest; full_packet=on doubles the code, predicated=off scalarises effects."""
    from ..backend.variant import parse_variant
    v = parse_variant(spec)
    if v.lanes == 1:
        return (0, 0)
    return (1 + (not v.predicated) * 2 + v.full_packet, v.lanes)

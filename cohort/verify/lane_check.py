"""Run-time checking of a packet lowering's lane claims (DESIGN §5).

A packet lowering lowers each memory access by how its index varies across
the W lanes it works in (uniform, contiguous, strided), each uniform `if` as
one branch, and some effects without a mask (backend/claims.py). Those are
claims about values; this checker, plugged into the interpreter, verifies
them on the actual lane values of every group of W threads: a wrong analysis
is caught by the reference, not by luck.

The claims are keyed by id(node or statement) of the *specialised* kernel the
backend compiled: run the interpreter on that same kernel object. The width
comes with the claims (`LaneClaims.width`, packets x interleave), never from
the variant's lanes: with interleave 2 a claim about 16 lanes checked in
groups of 8 would pass where the code is wrong.
"""
from __future__ import annotations

import numpy as np


class LaneClaimChecker:
    """The interpreter's `checker` hook for one build's claims."""

    def __init__(self, claims, label: str = ""):
        self.claims, self.W, self.label = claims, claims.width, label
        self.checked = 0
        self.violation = None        # the first violation's message, once one is found

    def check(self, key, values, mask, interp):
        claim = self.claims.get(id(key))
        if claim is None:
            return
        W = self.W
        mask = np.asarray(mask).reshape(-1, W)
        live = mask.any(axis=1)
        if not live.any():
            return
        self.checked += 1
        if claim.unmasked_only:
            partial = live & ~mask.all(axis=1)
            if partial.any():
                self.fail(interp, claim, "unmasked", int(np.flatnonzero(partial)[0]), mask, None)
        stride = claim.lane_stride
        if stride is None:
            return
        v = np.broadcast_to(np.asarray(values), (mask.size,)).reshape(-1, W).astype(np.int64)
        first = np.argmax(mask, axis=1)                       # first active lane of each group
        base = v[np.arange(len(v)), first]
        want = base[:, None] + stride * (np.arange(W)[None, :] - first[:, None])
        bad = mask & (v != want)
        bad_groups = np.flatnonzero(bad.any(axis=1))
        if len(bad_groups):
            what = {0: "uniform", 1: "contiguous"}.get(stride, f"strided({stride})")
            self.fail(interp, claim, what, int(bad_groups[0]), mask, v)

    def fail(self, interp, claim, what: str, group: int, mask, values):
        W = self.W
        lanes = np.flatnonzero(mask[group])
        t0 = group * W
        detail = "" if values is None else f"; active lanes {lanes.tolist()} have values {values[group][lanes].tolist()}"
        subject = f"{claim.site.describes} {claim.name}".strip()
        where = f" [{self.label}]" if self.label else ""
        self.violation = (f"annotation violated{where}: {subject} is lowered as {what}, but packet {group} "
                          f"(threads {t0}..{t0 + W - 1}) does not satisfy it{detail}")
        interp.fail(self.violation, t0 + int(lanes[0]))

"""Run-time checking of a backend's claims about lanes (DESIGN §5).

A packet backend lowers each memory access by how its index varies across
the W lanes of a packet (uniform, contiguous, strided), each uniform `if` as
one branch, and some effects without a mask. Those are claims about values;
this checker, plugged into the interpreter, verifies them on the actual
lane values of every packet: a wrong analysis is caught by the reference,
not by luck.

Annotations map id(node or statement) of the *specialised* kernel the
backend compiled to (kind, name, Access or None, modes); run the
interpreter on that same kernel object.
"""
from __future__ import annotations

import numpy as np


def claimed_stride(kind: str, access):
    """The index stride across lanes an access's lowering relies on, or None."""
    if access is None:
        return None
    if kind in ("pload", "pstore"):
        # cohort layout, contiguous: the element index is the same in every lane;
        # thread layout with a known stride: likewise
        return 0 if access.kind == "contiguous" or access.stride else None
    return {"uniform": 0, "contiguous": 1}.get(access.kind, access.stride if access.kind == "strided" else None)


class AnnotationChecker:
    def __init__(self, annotations: dict, lanes: int, label: str = ""):
        self.annotations, self.W, self.label = annotations, lanes, label
        self.checked = 0

    def check(self, key, values, mask, interp):
        ann = self.annotations.get(id(key))
        if ann is None:
            return
        kind, name, access, modes = ann
        W = self.W
        mask = np.asarray(mask).reshape(-1, W)
        live = mask.any(axis=1)
        if not live.any():
            return
        self.checked += 1
        if modes == frozenset({"unmasked"}) and kind in ("store", "pstore", "load"):
            partial = live & ~mask.all(axis=1)
            if partial.any():
                self._fail(interp, key, kind, name, "unmasked", int(np.flatnonzero(partial)[0]), mask, None)
        if kind == "if":
            stride = 0 if access is not None else None
        elif kind in ("for", "for-stop"):
            stride = 0 if access.kind == "uniform" else access.stride
        else:
            stride = claimed_stride(kind, access)
        if stride is None:
            return
        v = np.broadcast_to(np.asarray(values), (mask.size,)).reshape(-1, W).astype(np.int64)
        first = np.argmax(mask, axis=1)                       # first active lane of each packet
        base = v[np.arange(len(v)), first]
        want = base[:, None] + stride * (np.arange(W)[None, :] - first[:, None])
        bad = mask & (v != want)
        bad_packets = np.flatnonzero(bad.any(axis=1))
        if len(bad_packets):
            what = {0: "uniform", 1: "contiguous"}.get(stride, f"strided({stride})")
            self._fail(interp, key, kind, name, what, int(bad_packets[0]), mask, v)

    def _fail(self, interp, key, kind, name, claim, packet, mask, values):
        W = self.W
        lanes = np.flatnonzero(mask[packet])
        t0 = packet * W
        detail = "" if values is None else f"; active lanes {lanes.tolist()} have values {values[packet][lanes].tolist()}"
        what = {"load": f"load of {name}", "store": f"store to {name}", "pload": f"load of private {name}",
                "pstore": f"store to private {name}", "if": "if condition", "for": "loop start",
                "for-stop": "loop stop"}[kind]
        where = f" [{self.label}]" if self.label else ""
        interp.fail(f"annotation violated{where}: {what} is lowered as {claim}, but packet {packet} "
                    f"(threads {t0}..{t0 + W - 1}) does not satisfy it{detail}", t0 + int(lanes[0]))

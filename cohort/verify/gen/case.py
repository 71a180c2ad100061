"""A generated launch (`Case`) and the specification of its buffers (`BufferSpec`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...refimpl.ir import DType, Kernel

# How a buffer is filled from the inputs seed (inputs.fill):
#   "data":    a mix of ordinary and special values (bool: bytes 0 and 1)
#   "finite":  ordinary values of varied magnitude only
#   "special": mostly NaN, ±inf, ±0, subnormals, huge values
#   "nanzero": f32 only: mostly NaN (several payloads) and ±0, where min/max, compares and
#              selects depend on operand order; a quarter ordinary values
#   "perm":    a permutation of 0..length-1 (i32)
#   "bytes":   bool buffers only: arbitrary bytes (0, 1, 2, 0x80, 0xff, ...). The
#              interpreter reads any nonzero byte as True (a bool is its truth, not its byte)
#   "positive", "negative": f32 only: "finite" values of one sign, never zero (an atomic min's
#              buffer above the zeros it is given, a max's below: coop.py coop_atomic_edges)
FILLS = ("data", "finite", "special", "nanzero", "perm", "bytes", "positive", "negative")
# the fills whose f32 values are mostly special (NaN, ±0, ...): where the generator reaches
# for an edge-case operand
EDGY_FILLS = ("special", "nanzero")


@dataclass(frozen=True)
class BufferSpec:
    name: str
    dtype: DType
    length: int
    fill: str = "data"        # one of FILLS
    stream: int = 0           # which stream of the inputs seed fills it (0: its position + 1)


@dataclass
class Case:
    """One generated launch: everything needed to run it.

    `steering` is the Steering the generator ran under (None: unsteered), so that
    `generate(seed, case.steering)` rebuilds the very same program. `source` is the
    Python kernel source when the kernel came through the frontend (None: built as
    IR), and `source_check` a description of how the frontend's IR differed from
    the generated IR (None: identical, or no source). `shapes` names the rare shapes
    (steer.SHAPES) the generator made, for coverage and steering. None of the four takes part
    in running the case or in its corpus identity (`corpus.case_key`).
    """
    kernel: Kernel
    n: int
    consts: dict
    buffers: tuple
    scalars: dict             # scalar parameter name -> NumPy scalar of its dtype
    seed: int                 # inputs seed (buffer contents)
    steering: Optional[object] = None
    source: Optional[str] = None
    source_check: Optional[str] = None
    shapes: frozenset = frozenset()   # the rare shapes the generator aimed at and made (steer.SHAPES)

    @property
    def block(self) -> int:
        return self.kernel.block

    def describe(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in sorted(self.consts.items())) or "none"
        scal = ", ".join(f"{k}={_show_scalar(v)}" for k, v in self.scalars.items()) or "none"
        bufs = ", ".join(f"{b.name}[{b.length}]{'' if b.fill == 'data' else f'({b.fill})'}" for b in self.buffers)
        return (f"n={self.n} block={self.block} consts: {consts}; scalars: {scal}; buffers: {bufs}; "
                f"inputs seed {self.seed}" + ("; via the Python frontend" if self.source else ""))


def _show_scalar(v) -> str:
    if isinstance(v, np.floating):
        return f"{float(v)!r}"
    return str(int(v))

"""Block collectives fed NaN, ±0 and extremes in chosen lanes (where operand order and the
identity's sign matter), -0.0 everywhere, or values whose rounding shows the tree's order."""
from __future__ import annotations

from ...refimpl.ir import Collective, Expr, Op, Reduce, binary, const, load, select
from .base import F32, I32, U32
from .case import EDGY_FILLS

_F32_EDGES = (float("nan"), -0.0, 0.0, float("inf"), float("-inf"))
_ORDER_EDGES = (float("nan"), -0.0, 0.0)      # where min/max depend on which operand is which
_INT_EDGES = {I32: (-(2 ** 31), 2 ** 31 - 1, -1, 0, 1), U32: (0, 2 ** 32 - 1, 2 ** 31, 1, 2 ** 31 - 1)}


class Collectives:
    def collective_value(self, dt, op=Reduce.SUM) -> Expr:
        """What the block reduces: NaN, ±0, ±inf and integer extremes in chosen lanes
        (where operand order and the identity's sign matter), -0.0 everywhere (a sum that
        is exactly -0.0), ordinary values of mixed magnitude (where order shows in the
        rounding), or any expression."""
        edgy = 3 if self.focused("collective") else 1
        how = self.weighted([(3 if dt is F32 else 0, "ordinary"), (3, "expr"), (5 * edgy, "lanes"),
                             (4 * edgy if dt is F32 else 0, "zeros"), (4 * edgy if dt is F32 else 0, "specials")])
        if how == "ordinary":
            return self.ordinary(2)
        if how == "specials":          # NaN, ±inf, ±0 and subnormals mixed across the lanes
            sp = [b for b in self.inputs if b.dtype is F32 and b.fill in EDGY_FILLS]
            if sp and self.maybe(60):
                buf = self.pick(sp)
                idx = self.forced(self.g() * self.int(1, 5) + self.ci(self.int(0, 9)), buf.name, buf.length)
                return load(buf.name, idx, F32)
            edges = _ORDER_EDGES if op is not Reduce.SUM and self.maybe(75) else _F32_EDGES
            a, b, c = (const(x, F32) for x in self.distinct(edges, 3))
            return select(self.lane_condition(), a, select(self.lane_condition(), b, c))
        if how == "expr":
            return self.expr(dt, self.int(0, 2))
        if how == "zeros":
            # a sum of -0.0 everywhere is exactly -0.0; min/max of a ±0 mix depend on operand order
            pick = self.pick(["negzero", "mixed", "negzero", "scaled"] if op is Reduce.SUM else
                             ["mixed", "mixed", "negzero", "scaled"])
            if pick == "negzero":
                return const(-0.0, F32)
            if pick == "mixed":
                return select(self.lane_condition(), const(-0.0, F32), const(self.pick([0.0, -0.0]), F32))
            return binary(Op.MUL, self.ordinary(1), const(self.pick([0.0, -0.0]), F32))   # ±0, NaN from inf
        if dt is F32:
            edges = _ORDER_EDGES if op is not Reduce.SUM and self.maybe(75) else _F32_EDGES
        else:
            edges = _INT_EDGES[dt]
        a, b = self.distinct(edges, 2)
        rest = self.weighted([(2, "edge"), (2, "expr")])
        other = const(b, dt) if rest == "edge" else (self.ordinary(1) if dt is F32 else self.expr(dt, 1))
        return select(self.lane_condition(), const(a, dt), other)

    def distinct(self, values, k: int) -> list:
        """k values of `values`, the first two at different positions (so different values)."""
        i = self.int(0, len(values) - 1)
        j = (i + self.int(1, len(values) - 1)) % len(values)
        return [values[i], values[j]] + [self.pick(values) for _ in range(k - 2)]

    def collective(self) -> Collective:
        sw = self.sw
        dt = self.weighted([(sw(3, "structure:collective:f32"), F32), (sw(1, "structure:collective:i32"), I32),
                            (sw(1, "structure:collective:u32"), U32)])
        op = self.weighted([(sw(2, "structure:collective:block_sum"), Reduce.SUM),
                            (sw(1, "structure:collective:block_max"), Reduce.MAX),
                            (sw(1, "structure:collective:block_min"), Reduce.MIN)])
        name = self.fresh("r")
        value = self.collective_value(dt, op)
        self.vtypes[name] = dt
        self.defined.add(name)
        return Collective(name, op, value)

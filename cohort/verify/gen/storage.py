"""f16 and bf16 buffers (DESIGN §3: storage types; a load widens to f32, a store rounds to
nearest even). The generator reads them wherever it reads an f32 input (base.Core.leaf: an
input `xh` of either type), and `storage_probe` writes one: a contiguous store, a store under a
condition that turns lanes off inside a packet (a masked store of 16-bit elements), a pair of
adjacent stores (a store group, rounded before the interleave) and a read-back, of values at
the types' rounding edges. The fuzzer draws COHORT_F16 (F16C or the integer conversion) per
program (execute.lowering_switches), so both conversions meet these."""
from __future__ import annotations

from ...refimpl.ir import Assign, DType, If, Op, Store, binary, const, load, var
from .base import F32
from .case import BufferSpec

F16, BF16 = DType.F16, DType.BF16
# f32 values next to a rounding decision of f16 or bf16: ties, the largest finite values and
# just past them (to inf), the subnormal edges, a tie to zero
EDGES = {F16: (65504.0, 65519.0, 65520.0, 1.00048828125, 1.0009765625, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26,
               6.103515625e-05, 6.097555160522461e-05, -0.0, 1e-8, 2049.0, 4097.0),
         BF16: (3.3895313892515355e38, 3.3961775292304835e38, 1.00390625, 1.005859375, 9.183549615799121e-41,
                1.1754943508222875e-38, -0.0, 257.0, 1e-40, 65793.0)}


class Storage:
    def storage_dtype(self) -> DType:
        return F16 if self.maybe(75) else BF16

    def storage_value(self, dt: DType, h):
        """An f32 value for a `dt` store: a drawn expression, or a value times or plus an edge."""
        how = self.weighted([(2, "expr"), (2, "mul"), (2, "add"), (1, "edge")])
        edge = const(self.pick(EDGES[dt]), F32)
        base = h if h is not None and self.maybe(60) else self.expr(F32, 1)
        if how == "expr":
            return self.expr(F32, 2)
        if how == "mul":
            return binary(Op.MUL, base, edge)
        if how == "add":
            return binary(Op.ADD, base, edge)
        return edge

    def storage_probe(self) -> list:
        """Stores of f32 values into a 16-bit buffer `yh` of its own (4 regions of the padded
        launch: g, g under a mixed condition, and the pair 2g, 2g + 1), then a read-back."""
        ins = [b for b in self.inputs if b.dtype.is_storage]
        dt = ins[0].dtype if ins and self.maybe(70) else self.storage_dtype()
        name = f"yh{len(self.atomic_buffers)}"
        P = self.npad
        self.atomic_buffers.append(BufferSpec(name, dt, 4 * P, "data"))
        g = self.g()
        out = []
        h = None
        if ins:
            x = self.pick(ins)
            hv = self.fresh("f")
            out.append(Assign(hv, load(x.name, self.in_index(x), F32)))
            self.vtypes[hv] = F32
            self.defined.add(hv)
            h = var(hv, F32)
        out.append(Store(name, g, self.storage_value(dt, h)))
        out.append(If(self.mixed_condition(), (Store(name, g + self.ci(P), self.storage_value(dt, h)),)))
        out.append(Store(name, g * self.ci(2) + self.ci(2 * P), self.storage_value(dt, h)))
        out.append(Store(name, g * self.ci(2) + self.ci(2 * P + 1), self.storage_value(dt, h)))
        w = self.fresh("f")
        out.append(Assign(w, load(name, g + (self.ci(P) if self.maybe(30) else self.ci(0)), F32)))
        self.vtypes[w] = F32
        self.defined.add(w)
        self.shapes.add("storage:half")
        return out

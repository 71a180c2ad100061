"""Phases and collectives (DESIGN §2, §3).

The body is cut after each top-level collective into phases (region_plan.py, which
also cuts at barriers). Each phase runs the block's packets (threads, at width
1) one after another; then the phase's collective combines the block's values
in the fixed tree of DESIGN §3.
Variables that live across a phase boundary are kept per thread in a
[B x T] array; all others are plain allocas that LLVM promotes to registers.
"""
from __future__ import annotations

from ...refimpl.ir import Assign, Collective, DType, walk_stmts
from ...refimpl.semantics import REDUCE_IDENTITY, REDUCE_OP
from ..context import I32T, vector_const
from ..lower_ops import LOWER


def tree_steps(B: int, lo: int, bugs: tuple) -> list:
    """The strides s = B/2, B/4, ..., lo of the fixed reduction tree (DESIGN §3), in a build
    with planted bugs `bugs`."""
    steps = []
    s = B // 2
    while s >= lo:
        steps.append(s)
        s //= 2
    return steps[::-1] if "tree_order" in bugs else steps


def identity(c: Collective, bugs: tuple):
    """What inactive threads and packets that did not run contribute: the op's identity,
    -0.0 for an f32 sum (+0.0 would turn a sum of -0.0s into +0.0); `bugs`: the build's plants."""
    if c.op.value == "block_sum" and "sum_identity_sign" in bugs:   # planted: the integers' zero
        return 0
    return REDUCE_IDENTITY[(c.op.value, c.value.dtype)].item()


def assigned_in(stmts) -> set:
    return {s.name for s in walk_stmts(stmts) if isinstance(s, Assign)}


class CollectiveLowering:
    # A value living across a collective is kept per thread; when its shape is
    # uniform or affine only lane 0 is stored, and the lanes rebuilt from it.
    def load_cross(self, n: str):
        b, dt = self.b, self.facts.types[n]
        shape = self.shape_of_var(n)
        if shape is None or shape.stride is None or dt is DType.BOOL:
            return self.load_lanes(self.storage.arrays[n], self.now.t0, dt)
        v0 = b.load(self.elem(self.storage.arrays[n], self.now.t0, dt), typ=self.sx.ty(dt), align=4)
        v = self.splat(v0, dt)
        if shape.stride:
            v = b.add(v, vector_const(self.cx.ty(dt), [shape.stride * l for l in range(self.W)]))
        return v

    def store_cross(self, n: str, v):
        dt = self.facts.types[n]
        shape = self.shape_of_var(n)
        if shape is None or shape.stride is None or dt is DType.BOOL:
            return self.store_lanes(v, self.storage.arrays[n], self.now.t0, dt)
        self.b.store(self.lane0(v), self.elem(self.storage.arrays[n], self.now.t0, dt), align=4)

    def contribute(self, coll: Collective):
        """This packet's values of the collective into the block's tree (inactive lanes: the identity)."""
        b, dt = self.b, coll.value.dtype
        self.now.cur = coll
        v = self.ev(coll.value, {})
        if self.mask is not None:
            v = b.select(self.mask, v, self.cx.const(dt, identity(coll, self.config.bugs)))
        self.store_lanes(v, self.storage.trees[id(coll)], self.now.t0, dt)

    def collective(self, c: Collective, npk):
        """Packets that ran are in the scratch array; the others contribute the
        identity. Then the fixed tree: whole packets while s >= W, lanes after
        (none at width 1); the result goes to every thread."""
        b, W, dt = self.b, self.W, c.value.dtype
        tree = self.storage.trees[id(c)]
        ident = self.sx.const(dt, identity(c, self.config.bugs))
        self.counted_loop(b.mul(npk, self.i32(W)), self.i32(self.B),
                          lambda t: b.store(ident, self.elem(tree, t, dt)), "identity")
        op = REDUCE_OP[c.op.value]
        ty = self.cx.ty(dt)
        for s in tree_steps(self.B, W, self.config.bugs):
            def step(qq, s=s):
                at = b.mul(qq, self.i32(W))
                x = b.load(self.elem(tree, at, dt), typ=ty, align=4)
                y = b.load(self.elem(tree, b.add(at, self.i32(s)), dt), typ=ty, align=4)
                b.store(LOWER[op](self.cx, dt, x, y), self.elem(tree, at, dt), align=4)
            self.counted_loop(self.i32(0), self.i32(s // W), step, f"tree{s}")
        v = b.load(self.elem(tree, self.i32(0), dt), typ=ty, align=4)
        for s in tree_steps(W, 1, self.config.bugs):
            lanes = [t + s if t + s < W else t for t in range(W)]
            moved = b.shuffle_vector(v, self.zero(ty), vector_const(self.vty(I32T), lanes))
            self.counts["shuffles"] += 1
            # lane t combines (v[t], v[t+s]) in that order: f32 max/min keep their first
            # operand on a tie or a NaN, so the order is part of the result (DESIGN §3)
            v = LOWER[op](self.cx, dt, *((moved, v) if self.planted("packet_tree_operands") else (v, moved)))
        r = self.splat(self.lane0(v), dt)
        arr = self.storage.arrays[c.name]
        self.counted_loop(self.i32(0), self.i32(self.B // W),
                          lambda qq: b.store(r, self.elem(arr, b.mul(qq, self.i32(W)), dt), align=4),
                          "broadcast")

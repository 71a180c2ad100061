"""Loops, branches and their variables for the frontend (a mixin of frontend.Frontend).

A variable a loop body assigns that existed before the loop is carried (one
variable, one type); names a body makes are gone after the loop; the names two
branches of a runtime `if` assign are merged into one variable each.
"""
from __future__ import annotations

import ast

from . import tir
from .tir import TT, Dt, K, Node
from .tl_objects import unwrap

_MISSING = object()


class Returned(Exception):
    """A `return` being built: unwinds the statements to the kernel or inlined call that catches it."""

    def __init__(self, value):
        self.value = value


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _copy(v: Node) -> Node:
    """A node that reads a variable, as a distinct value (for the loop write-back temporaries)."""
    return Node(K.BROADCAST, v.type, (v,), None)


class ControlFlow:
    def merge(self, before, envs, returned, outs):
        """Names whose values differ between the branches become one variable each."""
        live = [e for e, r in zip(envs, returned) if not r]
        merged = {}
        if not live:
            return merged
        names = set().union(*(e.keys() for e in live))
        for name in sorted(names):
            vals = [e.get(name, _MISSING) for e in live]
            if any(v is _MISSING for v in vals):
                continue                       # defined on one path only: not visible after
            if all(v is vals[0] for v in vals):
                merged[name] = vals[0]
                continue
            vals = [self.B.tile(v) if _is_number(v) else v for v in vals]
            if not all(isinstance(v, Node) for v in vals):
                if all(v == vals[0] for v in vals):
                    merged[name] = vals[0]
                    continue
                raise self.type_error(f"`{name}` is a different compile-time value on each branch of an `if`")
            var = self.fresh(name)
            for (blk, r), e in zip(outs, envs):
                if r:
                    continue
                v = self.B.tile(e[name])
                self.blocks.append(blk)
                self.assign(var, v)
                self.blocks.pop()
            merged[name] = Node(K.VAR, self.vars[var], (), var)
        return merged

    def carried(self, body, env, src):
        """Names a loop body assigns that hold values before the loop: one variable each."""
        names = sorted({n.id for s in body for n in ast.walk(s)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
        out = {}
        for name in names:
            if name not in env:
                continue
            v = env[name]
            if _is_number(v):
                v = self.B.tile(v)
            if not isinstance(v, Node):
                continue
            var = self.fresh(name)
            self.assign(var, v)
            out[name] = var
            env[name] = Node(K.VAR, v.type, (), var)
        return out

    def loop_end(self, carry, env):
        """Write the body's final values back to the carried variables (via temporaries,
        so that a swap reads the old values)."""
        temps = []
        for name, var in carry.items():
            v = env.get(name)
            if v is None or (not isinstance(v, Node) and not _is_number(v)):
                raise self.type_error(f"loop-carried `{name}` is not a tile at the end of the loop body")
            v = self.B.tile(v)
            if v.type != self.vars[var]:
                raise self.type_error(f"loop-carried `{name}` changes type from {self.vars[var]!r} to {v.type!r}")
            temps.append((var, self.let(v, name) if v.op is not K.VAR else self.let(_copy(v), name)))
        for var, t in temps:
            self.assign(var, t)

    def s_For(self, st, env, src):
        if st.orelse:
            raise self.unsupported("`for ... else`")
        it = st.iter
        if not isinstance(it, ast.Call):
            raise self.unsupported(f"`for` over `{ast.unparse(it)}`", "iterate over range, tl.range or tl.static_range")
        fn = unwrap(self.expr(it.func, env, src))
        import triton.language as tl
        args = [self.expr(a, env, src) for a in it.args]
        kwargs = {k.arg: self.expr(k.value, env, src) for k in it.keywords}
        if fn is tl.static_range or (fn is range and all(not isinstance(a, Node) for a in args) and False):
            bounds = [unwrap(a) for a in args]
            if not all(isinstance(b, int) for b in bounds):
                raise self.type_error("tl.static_range needs compile-time integer bounds")
            if not isinstance(st.target, ast.Name):
                raise self.unsupported("a tuple target in `for`")
            for i in range(*bounds):
                env[st.target.id] = i
                self.block(st.body, env, src)
            return
        if fn not in (range, tl.range):
            raise self.unsupported(f"`for` over `{ast.unparse(it)}`", "iterate over range, tl.range or tl.static_range")
        if not isinstance(st.target, ast.Name):
            raise self.unsupported("a tuple target in `for`")
        args = [unwrap(a) for a in args]
        if len(args) == 1:
            args = [0, args[0], 1]
        elif len(args) == 2:
            args = [args[0], args[1], 1]
        if "step" in kwargs:
            args[2] = unwrap(kwargs["step"])
        if isinstance(args[2], int) and args[2] == 0:
            raise self.type_error("range step must not be 0")
        start, stop, step = (self.B.tile(a) for a in args)
        for b in (start, stop, step):
            if b.shape != () or not (isinstance(b.elem, Dt) and b.elem.is_int):
                raise self.type_error("range bounds must be integer scalars")
        dt = start.elem
        for b in (stop, step):
            dt = self.B.promote_int(dt, b.elem)
        dt = Dt.I32 if dt.bits < 32 else dt
        start, stop, step = (self.let(self.B.convert(b, dt), "bound") for b in (start, stop, step))
        line = self.line
        before = set(env)
        carry = self.carried(st.body, env, src)
        iv = self.fresh(st.target.id)
        self.vars[iv] = TT(dt)
        self.blocks.append([])
        env[st.target.id] = Node(K.VAR, TT(dt), (), iv)
        self.dynamic += self.depth > 0
        try:
            self.block(st.body, env, src)
        except Returned:
            raise self.unsupported("`return` inside a `for` loop") from None
        self.loop_end(carry, env)
        self.dynamic -= self.depth > 0
        body = self.blocks.pop()
        self.line = line
        self.emit(tir.For(iv, TT(dt), start, stop, step, tuple(body), line))
        self.scope_end(env, before, carry)

    def s_While(self, st, env, src):
        if st.orelse:
            raise self.unsupported("`while ... else`")
        line = self.line
        before = set(env)
        carry = self.carried(st.body, env, src)
        self.blocks.append([])
        cond = unwrap(self.expr(st.test, env, src))
        cond = self.B.to_bool(self.B.tile(cond))
        if cond.shape != ():
            raise self.type_error("a `while` condition must be a scalar")
        cond_body = self.blocks.pop()
        self.blocks.append([])
        self.dynamic += self.depth > 0
        try:
            self.block(st.body, env, src)
        except Returned:
            raise self.unsupported("`return` inside a `while` loop") from None
        self.loop_end(carry, env)
        self.dynamic -= self.depth > 0
        body = self.blocks.pop()
        self.line = line
        self.emit(tir.While(tuple(cond_body), cond, tuple(body), line))
        self.scope_end(env, before, carry)

    def scope_end(self, env, before, carry):
        """After a loop: carried names read their variables; names the body made are gone
        (a loop may run zero times), as in Triton."""
        for name in list(env):
            if name not in before:
                del env[name]
        for name, var in carry.items():
            env[name] = Node(K.VAR, self.vars[var], (), var)


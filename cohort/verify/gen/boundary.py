"""Accesses at the edge of their buffer (issue 28): an index whose largest (or smallest) value
over the launch is the buffer's last (first) element, one past it, or one short of it.

One past is an expected-error program: the interpreter reports the access (DESIGN §3) and
every build that checks must report the same kernel, statement, load or store, index, thread
and block (`execute.run_variant_error`); the launch-time bounds proof (backend/bounds.py) must
refuse it and the checked build find it. On the edge or one short it runs, and the proof must
pass it (its outputs are compared as usual). So that the error is one fact whatever order the
threads run in (packets, the pool's tasks), the generator computes every index the launch
takes and keeps "one past" only when exactly one access of one thread reaches it; otherwise it
stays on the edge. The buffer (`xe`, read; `ye`, written) is the access's own, its length
chosen to put the edge where it wants.

Forms (the proof's rules each): k*g + c, c - k*g (the low edge: -1), block_id() + c (every
thread of the last block, its first the one reported), block_id()*B + thread_id() + c, a
variable i = k*g + e guarded by i < K, i <= K, K > i, K >= i, not (i >= K), not (i > K),
not (K < i), not (K <= i), or the else branch of i >= K (lower edges: the converses, K < i,
K <= i, not (i < K) among them), the same guard as a select's arm, K a literal or
num_threads() - d; g + j + c in a loop over a uniform range (either direction) or up to a
per-thread stop (g % m + 1, (g & 1) + 1), and (g - d) % k + c, whose C remainder is negative
in some threads.
"""
from __future__ import annotations

from ...refimpl.ir import Assign, For, If, Op, Store, binary, builtin, const, load, select, unary, var
from .base import F32, I32
from .case import BufferSpec
from .steer import SHAPE_FORMS

# the coverage shape (steer.SHAPES, `past:` omitted) of a one-past access of each form; a guard's
# is `guard-le` when it is a `<=` (or `K >= i`)
_SHAPE = {"affine": "affine", "reverse": "affine", "block": "block", "blockthread": "block", "guard": "guard",
          "select": "guard", "loop": "loop", "loop_thread": "loop-thread", "signed": "signed"}
_LE = ("le", "ge_flip", "not_gt", "not_lt_flip")
# `guard-spelled`: a negated comparison, or one with the variable on the right, beyond the first
# spellings (the proof reads each through negation and flipping: bounds.Bounds._facts)
_SPELLED = SHAPE_FORMS["past:guard-spelled"]


# K - v for a guard whose last admitted value is v: `i <= K`-like spellings admit K, `i < K` K - 1,
# `i >= K` K, `i > K` K + 1
_TIGHT = {"lt": 1, "le": 0, "gt_flip": 1, "ge_flip": 0, "not_ge": 1, "else_ge": 1, "ge": 0, "gt": -1,
          "else_lt": 0, "not_gt": 0, "not_lt_flip": 0, "not_le_flip": 1, "lt_flip": -1, "le_flip": 0, "not_lt": 0}


def _cmod(a: int, m: int) -> int:
    r = abs(a) % m
    return -r if a < 0 else r


class Boundary:
    def boundary(self, past: bool) -> list:
        """Top-level statements with one access at the edge of its buffer (module notes); the
        buffer is added to the kernel's (self.inputs, or self.edge_outputs for a store). `past`:
        one past the edge where that is one error in any order, else on it or one short."""
        # the threads that exist: every thread of the started blocks in a cooperative kernel
        # (DESIGN §2's launch rule; build_kernel decides before this whether there is one)
        n, B = self.threads, self.B
        g, t, b, ci = self.g(), self.t(), self.b(), self.ci
        forms = ["affine", "reverse", "block", "blockthread", "guard", "select", "loop", "loop_thread", "signed"]
        aim = self.aim(*(f"past:{c}" for c in sorted(set(_SHAPE.values()) | {"guard-le", "guard-spelled"}))) \
            if past else None
        aim = aim[5:] if aim else None                         # a one-past shape the campaign lacks
        if aim is not None:
            forms = [f for f in forms if _SHAPE[f] == aim or (aim.startswith("guard-") and f in ("guard", "select"))]
        form = self.pick(forms)
        store = form in ("affine", "reverse", "guard") and self.maybe(35)
        delta = 1 if past else self.weighted([(3, 0), (2, -1)])     # one past, on the edge, one short
        side = "hi"
        pre, wrap = [], None                                   # statements before; how the access is placed
        shape, spelled = None, False
        if form == "affine":
            k = self.pick([1, 2, 3])
            base = binary(Op.SHL, g, ci(1)) if k == 2 and self.maybe(30) else (g if k == 1 else g * k)
            side = "lo" if self.maybe(25) else "hi"
            fn = lambda gg, c, k=k: [k * gg + c]
            idx = lambda c, base=base: base + ci(c)
        elif form == "reverse":
            k = self.pick([1, 2])
            side = "lo" if self.maybe(75) else "hi"
            fn = lambda gg, c, k=k: [c - k * gg]
            idx = lambda c, k=k: ci(c) - (g if k == 1 else g * k)
        elif form == "block":
            side = "hi"
            fn = lambda gg, c: [gg // B + c]
            idx = lambda c: b + ci(c)
        elif form == "blockthread":
            side = "hi"
            fn = lambda gg, c: [gg + c]
            idx = lambda c: b * B + t + ci(c)
        elif form in ("guard", "select"):
            k, e = self.pick([1, 1, 2]), self.int(-3, 3)
            name = self.fresh("i")
            self.vtypes[name] = I32
            pre.append(Assign(name, (g if k == 1 else g * k) + ci(e)))
            self.defined.add(name)
            ivals = [k * gg + e for gg in range(n)]
            i = var(name, I32)
            hows = ["lt", "le", "gt_flip", "ge_flip", "not_ge", "else_ge", "ge", "gt", "else_lt",
                    # every spelling: `not` of either order, the comparison reversed (lower edges too)
                    "not_gt", "not_lt_flip", "not_le_flip", "lt_flip", "le_flip", "not_lt"]
            if aim == "guard-spelled":       # the least-made spellings (steer.SHAPE_FORMS; the steering
                # is refreshed every few programs, so the programs under one spread over them)
                made = {h: self.steer.times_made(f"shape:past:guard-spelled:{h}") for h in _SPELLED}
                hows = [h for h in _SPELLED if made[h] == min(made.values())]
            elif aim is not None:     # `<=` (also spelled K >= i) narrows to K, `<` to K - 1
                hows = [h for h in hows if (h in _LE) == (aim == "guard-le")]
            how = self.pick(hows)
            # K tight: the last value the guard admits is one a thread takes, so a proof that
            # narrows the guard by one (a misread spelling) leaves that thread's access unchecked;
            # with K drawn anywhere (k = 2) half the programs admitted no thread at the edge
            v = self.pick(sorted(set(ivals)))
            K = v + _TIGHT[how]
            shape = "guard-le" if how in _LE else "guard"
            spelled = how in _SPELLED
            Ke = ci(K)
            if how in ("lt", "le", "ge", "gt") and self.maybe(30) and self.n - K <= 2 ** 20:
                Ke = builtin(Op.NUM_THREADS) - ci(self.n - K)   # the same K, at run time
            cond, then, pred, side = {
                "lt": (lambda: binary(Op.LT, i, Ke), True, lambda x: x < K, "hi"),
                "le": (lambda: binary(Op.LE, i, Ke), True, lambda x: x <= K, "hi"),
                "gt_flip": (lambda: binary(Op.GT, Ke, i), True, lambda x: x < K, "hi"),
                "ge_flip": (lambda: binary(Op.GE, Ke, i), True, lambda x: x <= K, "hi"),
                "not_ge": (lambda: unary(Op.NOT, binary(Op.GE, i, Ke)), True, lambda x: x < K, "hi"),
                "else_ge": (lambda: binary(Op.GE, i, Ke), False, lambda x: x < K, "hi"),
                "ge": (lambda: binary(Op.GE, i, Ke), True, lambda x: x >= K, "lo"),
                "gt": (lambda: binary(Op.GT, i, Ke), True, lambda x: x > K, "lo"),
                "else_lt": (lambda: binary(Op.LT, i, Ke), False, lambda x: x >= K, "lo"),
                "not_gt": (lambda: unary(Op.NOT, binary(Op.GT, i, Ke)), True, lambda x: x <= K, "hi"),
                "not_lt_flip": (lambda: unary(Op.NOT, binary(Op.LT, Ke, i)), True, lambda x: x <= K, "hi"),
                "not_le_flip": (lambda: unary(Op.NOT, binary(Op.LE, Ke, i)), True, lambda x: x < K, "hi"),
                "lt_flip": (lambda: binary(Op.LT, Ke, i), True, lambda x: x > K, "lo"),
                "le_flip": (lambda: binary(Op.LE, Ke, i), True, lambda x: x >= K, "lo"),
                "not_lt": (lambda: unary(Op.NOT, binary(Op.LT, i, Ke)), True, lambda x: x >= K, "lo"),
            }[how]
            if form == "select":
                store = False
            fn = lambda gg, c, k=k, e=e, pred=pred: [k * gg + e + c] if pred(k * gg + e) else []
            idx = lambda c, i=i: i + ci(c)
            wrap = (form, cond, then)
        elif form == "loop":
            S = self.int(1, 4)
            down = self.maybe(40)
            j = self.fresh("j")
            fn = lambda gg, c, S=S: [gg + jj + c for jj in range(S)]
            idx = lambda c, j=j: g + var(j, I32) + ci(c)
            wrap = ("loop", j, (ci(S - 1), ci(-1), ci(-1)) if down else (ci(0), ci(S), ci(1)))
        elif form == "loop_thread":
            m = self.pick([2, 3, 4])
            j = self.fresh("j")
            parity = self.maybe(40)
            if aim is not None:     # the last thread takes the longest trip: the edge needs the stop's top
                fits = [(p, mm) for p, mm in ((True, 2), (False, 2), (False, 3), (False, 4))
                        if (n - 1) % mm == mm - 1]
                parity, m = self.pick(fits) if fits else (parity, m)
            stop = (binary(Op.AND, g, ci(1)) if parity else binary(Op.MOD, g, ci(m))) + ci(1)
            top = (lambda gg: (gg & 1) + 1) if parity else (lambda gg, m=m: gg % m + 1)
            fn = lambda gg, c, top=top: [gg + jj + c for jj in range(top(gg))]
            idx = lambda c, j=j: g + var(j, I32) + ci(c)
            wrap = ("loop", j, (ci(0), stop, ci(1)))
        else:   # signed: (g - d) % k + c, the low edge at the thread whose remainder is -(k-1)
            k = self.pick([2, 3, 4, 8])
            d = self.int(k - 1, 2 * k - 2)
            side = "lo"
            fn = lambda gg, c, k=k, d=d: [_cmod(gg - d, k) + c]
            idx = lambda c, k=k, d=d: binary(Op.MOD, g - ci(d), ci(k)) + ci(c)
        pairs = [(gg, v) for gg in range(n) for v in fn(gg, 0)]
        vals = [v for _, v in pairs]
        if not vals:                                           # no thread reaches it: nothing to test
            for s in pre:
                self.defined.discard(s.name)
            return []
        lo0, hi0 = min(vals), max(vals)
        if side == "hi":
            c = -lo0 + self.int(0, 3)
            edge = hi0 + c
            if delta == 1 and not self._one_fact(pairs, hi0, form):
                delta = 0                                      # which thread fails would depend on the order
            length = edge + 1 - delta
        else:
            if delta == 1 and not self._one_fact(pairs, lo0, form):
                delta = 0
            c = -lo0 - delta                                   # the smallest index is -delta
            length = hi0 + c + 1 + self.int(0, 3)
        length = max(length, 1)
        if delta == 1:
            self.shapes.add(f"past:{shape if form in ('guard', 'select') else _SHAPE[form]}")
            if form in ("guard", "select") and spelled:
                self.shapes.add("past:guard-spelled")
                self.shapes.add(f"past:guard-spelled:{how}")
        at = idx(c)
        if store:
            self.edge_outputs.append(BufferSpec("ye", F32, length, "data"))
            access = Store("ye", at, self.expr(F32, 1))
        else:
            dt = self.pick([F32, I32])
            self.inputs.append(BufferSpec("xe", dt, length, self.pick(["data", "special"])))
            vname = self.fresh("f" if dt is F32 else "i")
            self.vtypes[vname] = dt
            got = load("xe", at, dt)
            zero = const(0.0, F32) if dt is F32 else ci(0)
            if wrap is not None and wrap[0] == "select":
                return pre + [self._define(vname, select(wrap[1](), got, zero) if wrap[2]
                                           else select(wrap[1](), zero, got))]
            if wrap is not None and wrap[0] == "loop":
                pre.append(self._define(vname, zero))
                access = Assign(vname, binary(Op.ADD, var(vname, dt), got))
            elif wrap is not None:
                pre.append(self._define(vname, zero))
                access = Assign(vname, got)
            else:
                return pre + [self._define(vname, got)]
        if wrap is None:
            return pre + [access]
        if wrap[0] == "loop":
            _, j, (start, stop, step) = wrap
            return pre + [For(j, start, stop, step, (access,))]
        _, cond, then = wrap
        return pre + [If(cond(), (access,), ()) if then else If(cond(), (), (access,))]

    def _one_fact(self, pairs, edge: int, form: str) -> bool:
        """Whether the accesses one past `edge` make one error in any order: one access, or
        (an access once per thread) several threads of one block, whose first is reported by
        the interpreter, by every packet width and by whichever pool task runs that block."""
        hit = [gg for gg, v in pairs if v == edge]
        if len(hit) == 1:
            return True
        return not form.startswith("loop") and len({gg // self.B for gg in hit}) == 1

    def _define(self, name: str, value) -> Assign:
        self.defined.add(name)
        return Assign(name, value)

"""Reductions, scans and tl.dot as tile IR (DESIGN §10 'Reductions, scans, dot')."""
from __future__ import annotations

from . import tir
from .tir import TT, Dt, K, Node, Ptr, Red
from .tl_objects import unwrap


def register(B, reg, tl):
    fe = B.fe

    def axis_of(x, axis):
        a = unwrap(axis)
        if a is None:
            return None
        if not isinstance(a, int) or not -len(x.shape) <= a < len(x.shape):
            raise fe.type_error(f"axis {a!r} for a tile of rank {len(x.shape)}")
        return a % len(x.shape)

    def flat(x):
        return Node(K.RESHAPE, TT(x.elem, (x.type.numel,)), (x,)) if len(x.shape) != 1 else x

    def keep(r, x, axis, keep_dims):
        if not unwrap(keep_dims):
            return r
        if axis is None:
            return Node(K.RESHAPE, TT(r.elem, (1,) * len(x.shape)), (r,))
        return Node(K.EXPAND, TT(r.elem, r.shape[:axis] + (1,) + r.shape[axis:]), (r,), axis)

    def tile_in(x):
        x = B.tile(x)
        if isinstance(x.elem, Ptr):
            raise fe.type_error("reduction of pointers")
        if not x.shape:
            raise fe.type_error("reduction of a scalar")
        return x

    def reduce_(x, axis, red, keep_dims):
        ax = axis_of(x, axis)
        src = flat(x) if ax is None else x
        a = 0 if ax is None else ax
        r = Node(K.REDUCE, TT(x.elem, src.shape[:a] + src.shape[a + 1:]), (src,), (a, red))
        return keep(r, x, ax, keep_dims)

    def sum_dtype(d: Dt, dtype):
        if unwrap(dtype) is not None:
            return B.dt_of(dtype)
        if d.is_int and d.bits < 32:
            return Dt.I32 if d.is_signed or d is Dt.I1 else Dt.U32
        return d

    def tsum(input, axis=None, keep_dims=False, dtype=None):
        x = tile_in(input)
        x = B.convert(x, sum_dtype(x.elem, dtype))
        return reduce_(x, axis, Red.SUM, keep_dims)

    def widen_small(x):
        if x.elem.bits < 32:
            return B.convert(x, Dt.F32 if x.elem.is_float else Dt.I32)
        return x

    def tmax(is_max):
        def h(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
            x = tile_in(input)
            if unwrap(return_indices):
                return (reduce_(x, axis, Red.MAX if is_max else Red.MIN, keep_dims),
                        targ(is_max)(x, axis, return_indices_tie_break_left, keep_dims))
            return reduce_(widen_small(x), axis, Red.MAX if is_max else Red.MIN, keep_dims)
        return h

    def targ(is_max):
        def h(input, axis, tie_break_left=True, keep_dims=False):
            x = tile_in(input)
            if not unwrap(tie_break_left):
                raise fe.unsupported("argmax/argmin with tie_break_left=False", "ties go to the lowest index")
            ax = axis_of(x, axis)
            src = flat(x) if ax is None else x
            a = 0 if ax is None else ax
            r = Node(K.ARGREDUCE, TT(Dt.I32, src.shape[:a] + src.shape[a + 1:]), (src,), (a, is_max))
            return keep(r, x, ax, keep_dims)
        return h

    def xor_sum(input, axis=None, keep_dims=False):
        x = tile_in(input)
        if not x.elem.is_int:
            raise fe.type_error("xor_sum needs integers")
        return reduce_(x, axis, Red.XOR, keep_dims)

    reg(tl.sum, tsum)
    reg(tl.max, tmax(True))
    reg(tl.min, tmax(False))
    reg(tl.argmax, targ(True))
    reg(tl.argmin, targ(False))
    reg(getattr(tl, "xor_sum", None), xor_sum)

    def cumsum(input, axis=0, reverse=False, dtype=None):
        x = tile_in(input)
        x = B.convert(x, sum_dtype(x.elem, dtype))
        ax = axis_of(x, axis)
        return Node(K.SCAN, x.type, (x,), (ax, Red.SUM, bool(unwrap(reverse))))

    def cumprod(input, axis=0, reverse=False):
        x = tile_in(input)
        ax = axis_of(x, axis)
        return Node(K.SCAN, x.type, (x,), (ax, Red.PROD, bool(unwrap(reverse))))

    reg(tl.cumsum, cumsum)
    reg(getattr(tl, "cumprod", None), cumprod)

    # ---------------------------------------------------------- user combine functions
    def region(fn, elems):
        """Inline combine_fn(a..., b...) over scalar parameters of the given element types."""
        names = [fe.fresh("lhs") for _ in elems] + [fe.fresh("rhs") for _ in elems]
        params = []
        for n, e in zip(names, list(elems) * 2):
            fe.vars[n] = TT(e)
            params.append(Node(K.VAR, TT(e), (), n))
        fe.blocks.append([])
        out = fe.call(fn, params, {})
        body = fe.blocks.pop()
        for st in body:
            if not isinstance(st, tir.Let):
                raise fe.unsupported("a combine function with memory access or control flow")
        outs = out if isinstance(out, tuple) else (out,)
        outs = tuple(B.tile(o) for o in outs)
        if len(outs) != len(elems):
            raise fe.type_error(f"the combine function returns {len(outs)} values for {len(elems)} inputs")
        for o, e in zip(outs, elems):
            if o.shape != () or o.elem != e:
                raise fe.type_error(f"the combine function returns {o.type!r} for an input of {e!r}")
        return tir.Region(tuple(names), tuple(body), outs)

    def general(kind):
        def h(input, axis, combine_fn, *rest, reverse=False, keep_dims=False):
            if rest:
                if kind == "scan":
                    reverse = rest[0]
                else:
                    keep_dims = rest[0]
            single = not isinstance(unwrap(input), tuple)
            xs = [tile_in(x) for x in ((input,) if single else unwrap(input))]
            xs = B.bcast(*xs)
            ax = axis_of(xs[0], axis)
            if ax is None:
                xs, ax = [flat(x) for x in xs], 0
                keep_axis = None
            else:
                keep_axis = ax
            reg_ = region(combine_fn, [x.elem for x in xs])
            outs = []
            for i, x in enumerate(xs):
                if kind == "reduce":
                    r = Node(K.COMBINE, TT(x.elem, x.shape[:ax] + x.shape[ax + 1:]), tuple(xs),
                             ("reduce", ax, reg_, i, False))
                    r = keep(r, xs[0] if keep_axis is not None else B.tile(input if single else unwrap(input)[0]),
                             keep_axis, keep_dims)
                else:
                    r = Node(K.COMBINE, x.type, tuple(xs), ("scan", ax, reg_, i, bool(unwrap(reverse))))
                outs.append(r)
            return outs[0] if single else tuple(outs)
        return h

    reg(tl.reduce, general("reduce"))
    reg(tl.associative_scan, general("scan"))

    # ---------------------------------------------------------- dot
    def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
            out_dtype=tl.float32):
        a, b = B.tile(input), B.tile(other)
        if len(a.shape) != len(b.shape) or len(a.shape) not in (2, 3):
            raise fe.type_error(f"tl.dot of shapes {list(a.shape)} x {list(b.shape)}: two 2-D or two 3-D tiles")
        if a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
            raise fe.type_error(f"tl.dot of shapes {list(a.shape)} x {list(b.shape)}")
        out = B.dt_of(out_dtype)
        floats = (Dt.F32, Dt.F16, Dt.BF16)
        if a.elem in floats and b.elem in floats:
            if out is not Dt.F32:
                raise fe.unsupported(f"tl.dot with out_dtype={out!r}", "cohort accumulates in f32")
            if a.elem != b.elem:
                raise fe.type_error(f"tl.dot of {a.elem!r} and {b.elem!r}: both operands need one type")
            a, b = B.convert(a, Dt.F32), B.convert(b, Dt.F32)
        elif a.elem is Dt.I8 and b.elem is Dt.I8:
            out = Dt.I32
            a, b = B.convert(a, Dt.I32), B.convert(b, Dt.I32)
        else:
            raise fe.unsupported(f"tl.dot of {a.elem!r} x {b.elem!r}", "f32, f16, bf16 or int8 operands")
        shape = a.shape[:-2] + (a.shape[-2], b.shape[-1])
        c = B.const(0, out, shape) if unwrap(acc) is None else B.tile(acc)
        if c.shape != shape or c.elem != out:
            raise fe.type_error(f"tl.dot accumulator {c.type!r}, expected {TT(out, shape)!r}")
        return Node(K.DOT, TT(out, shape), (a, b, c))

    reg(tl.dot, dot)

"""The handler of each triton.language primitive, keyed by the function object's id.

One entry per primitive; the handler takes the call's arguments (tiles or
compile-time values) and returns a tile, a compile-time value or a tuple.
Constructs the reference refuses are listed in REFUSED with the reason given.
"""
from __future__ import annotations

from . import tir
from .tir import TT, Bin, Dt, K, Node, Ptr, Red, Un
from .tl_objects import unwrap

REFUSED = {
    "inline_asm_elementwise": "inline assembly has no CPU meaning",
    "make_block_ptr": "block pointers are gone from triton 3.9; use tl.make_tensor_descriptor",
    "advance": "block pointers are gone from triton 3.9; use tl.make_tensor_descriptor",
    "dot_scaled": "scaled (microscaling) dot products",
    "extern_elementwise": "external (libdevice) calls other than the listed functions",
    "map_elementwise": "tl.map_elementwise",
}

LIBDEVICE = {
    "tanh": "tanh", "erf": "erf", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2",
    "sqrt": "sqrt", "sqrt_rn": "sqrt", "rsqrt": "rsqrt", "rsqrt_rn": "rsqrt", "sin": "sin", "cos": "cos",
    "fast_expf": "exp", "fast_logf": "log", "fast_sinf": "sin", "fast_cosf": "cos", "fast_tanhf": "tanh",
    "fast_log2f": "log2", "fast_exp2f": "exp2", "log1p": "log1p", "expm1": "expm1",
}


def table(B) -> dict:
    import triton.language as tl
    fe = B.fe
    t = {}

    def reg(fn, h):
        if fn is not None:
            t[id(fn)] = h

    def refuse(name, why):
        def h(*a, **k):
            raise fe.unsupported(f"`tl.{name}`", why)
        return h

    for name, why in REFUSED.items():
        reg(getattr(tl, name, None), refuse(name, why))

    # ---------------------------------------------------------- grid and constants
    def program_id(axis):
        axis = unwrap(axis)
        if axis not in (0, 1, 2):
            raise fe.type_error(f"program_id axis must be 0, 1 or 2, not {axis!r}")
        return Node(K.PROGRAM_ID, TT(Dt.I32), (), axis)

    def num_programs(axis):
        axis = unwrap(axis)
        if axis not in (0, 1, 2):
            raise fe.type_error(f"num_programs axis must be 0, 1 or 2, not {axis!r}")
        return Node(K.NUM_PROGRAMS, TT(Dt.I32), (), axis)

    reg(tl.program_id, program_id)
    reg(tl.num_programs, num_programs)

    def arange(start, end):
        s, e = unwrap(start), unwrap(end)
        if not (isinstance(s, int) and isinstance(e, int)):
            raise fe.type_error("tl.arange needs compile-time integer bounds")
        n = e - s
        if n <= 0 or n & (n - 1):
            raise fe.type_error(f"tl.arange({s}, {e}): the length {n} must be a power of two")
        return Node(K.ARANGE, TT(Dt.I32, (n,)), (), s)

    reg(tl.arange, arange)

    def shape_of(shape):
        shape = unwrap(shape)
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(unwrap(s) for s in shape)
        for s in shape:
            if not isinstance(s, int) or s <= 0 or s & (s - 1):
                raise fe.type_error(f"tile shape {list(shape)}: each dimension must be a power of two")
        return shape

    def full(shape, value, dtype):
        dt = B.dt_of(dtype)
        shape = shape_of(shape)
        v = unwrap(value)
        if isinstance(v, Node):
            if v.shape:
                raise fe.type_error("tl.full's value must be a scalar")
            return B.broadcast_to(B.convert(v, dt), shape)
        return B.const(v, dt, shape)

    reg(tl.full, full)
    reg(tl.zeros, lambda shape, dtype: full(shape, 0, dtype))

    def to_tensor(x):
        return B.tile(x)

    reg(tl.to_tensor, to_tensor)

    # ---------------------------------------------------------- shapes
    def reshape(x, *shape, can_reorder=False):
        x = B.tile(x)
        if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
            shape = unwrap(shape[0])
        shape = shape_of(shape) if shape else ()
        n = 1
        for s in shape:
            n *= s
        if n != x.type.numel:
            raise fe.type_error(f"reshape of {list(x.shape)} to {list(shape)}: element counts differ")
        return Node(K.RESHAPE, TT(x.elem, shape), (x,))

    reg(tl.reshape, reshape)
    reg(getattr(tl, "view", None), reshape)
    reg(getattr(tl, "ravel", None), lambda x, can_reorder=False: reshape(x, (B.tile(x).type.numel,)))
    reg(tl.trans, lambda x, *dims: B.trans(x, *dims))
    reg(tl.permute, lambda x, *dims: B.trans(x, *dims))

    def expand_dims(x, axis):
        x = B.tile(x)
        axes = unwrap(axis)
        axes = [axes] if isinstance(axes, int) else list(axes)
        rank = len(x.shape) + len(axes)
        for a in sorted(a % rank for a in axes):
            x = Node(K.EXPAND, TT(x.elem, x.shape[:a] + (1,) + x.shape[a:]), (x,), a)
        return x

    reg(tl.expand_dims, expand_dims)

    def broadcast_to(x, *shape):
        if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
            shape = unwrap(shape[0])
        return B.broadcast_to(B.tile(x), tuple(unwrap(s) for s in shape))

    reg(tl.broadcast_to, broadcast_to)
    reg(tl.broadcast, lambda a, b: tuple(B.bcast(B.tile(a), B.tile(b))))

    def join(a, b):
        a, b = B.operands(a, b)
        return Node(K.JOIN, TT(a.elem, a.shape + (2,)), (a, b))

    def split(a):
        a = B.tile(a)
        if not a.shape or a.shape[-1] != 2:
            raise fe.type_error(f"tl.split needs a last dimension of 2, not {list(a.shape)}")
        return tuple(Node(K.SPLIT, TT(a.elem, a.shape[:-1]), (a,), i) for i in (0, 1))

    reg(tl.join, join)
    reg(tl.split, split)

    def gather(src, index, axis):
        # triton.language.semantic.gather's rules; an index outside the axis is an error when
        # the program runs (the GPU's result there is undefined)
        src, index, axis = B.tile(src), B.tile(index), unwrap(axis)
        if not (isinstance(index.elem, Dt) and index.elem.is_int and index.elem is not Dt.I1):
            raise fe.type_error(f"tl.gather: the index must be an integer tile, not {index.elem!r}")
        rank = len(src.shape)
        if len(index.shape) != rank or not rank:
            raise fe.type_error(f"tl.gather: source {list(src.shape)} and index {list(index.shape)} need one rank")
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise fe.type_error(f"tl.gather: axis {axis!r} outside the source's rank {rank}")
        axis %= rank
        if any(x != y for d, (x, y) in enumerate(zip(src.shape, index.shape)) if d != axis):
            raise fe.type_error(f"tl.gather: index {list(index.shape)} must match source {list(src.shape)} "
                                f"off axis {axis}")
        return Node(K.GATHER, TT(src.elem, index.shape), (src, index), axis)

    def histogram(input, num_bins, mask=None):
        # semantic.histogram's rules; values outside 0..num_bins-1 are not counted (the GPU drops them)
        x, bins = B.tile(input), unwrap(num_bins)
        if len(x.shape) != 1:
            raise fe.type_error(f"tl.histogram takes a 1-D tile, not {list(x.shape)}")
        if x.elem not in (Dt.I32, Dt.U32):
            raise fe.type_error(f"tl.histogram takes 32-bit integers, not {x.elem!r}")
        if not isinstance(bins, int) or bins < 1 or bins & (bins - 1):
            raise fe.type_error(f"tl.histogram: num_bins must be a power of two, not {bins!r}")
        srcs = (x,)
        if unwrap(mask) is not None:
            m = B.broadcast_to(B.tile(mask), x.shape)
            if m.elem is not Dt.I1:
                raise fe.type_error(f"tl.histogram: the mask must be int1, not {m.elem!r}")
            srcs += (m,)
        return Node(K.HISTOGRAM, TT(Dt.I32, (bins,)), srcs, bins)

    reg(tl.gather, gather)
    reg(tl.histogram, histogram)

    # ---------------------------------------------------------- casts
    reg(tl.cast, lambda x, dtype, fp_downcast_rounding=None, bitcast=False:
        B.to(x, dtype, fp_downcast_rounding, bitcast))

    # ---------------------------------------------------------- arithmetic
    def arith(name):
        return lambda x, y, sanitize_overflow=True: B.binop(name, x, y)

    reg(getattr(tl, "add", None), arith("Add"))
    reg(getattr(tl, "sub", None), arith("Sub"))
    reg(getattr(tl, "mul", None), arith("Mult"))
    reg(tl.where, lambda condition, x, y: B.where(condition, x, y))

    def minmax(is_max):
        def h(x, y, propagate_nan=None):
            a, b = B.operands(x, y)
            nan_all = unwrap(propagate_nan) is not None and unwrap(propagate_nan) == tl.PropagateNan.ALL
            if isinstance(a.elem, Ptr):
                raise fe.type_error("minimum/maximum of pointers")
            return Node(K.MINMAX, a.type, (a, b), (is_max, bool(nan_all)))
        return h

    reg(tl.maximum, minmax(True))
    reg(tl.minimum, minmax(False))

    def clamp(x, min, max, propagate_nan=None):
        """minimum(maximum(x, min), max) under the NaN rule asked for: NONE (the default) takes
        the non-NaN operand at each step (a NaN x gives min), ALL gives NaN for any NaN."""
        nan_all = unwrap(propagate_nan) is not None and unwrap(propagate_nan) == tl.PropagateNan.ALL
        x = B.tile(x)
        if not x.elem.is_float:
            return minmax(False)(minmax(True)(x, min, propagate_nan), max, propagate_nan)
        a, lo = B.operands(x, min)
        a, hi = B.operands(a, max)
        a, lo, hi = B.bcast(a, lo, hi)
        return Node(K.MINMAX, a.type, (Node(K.MINMAX, a.type, (a, lo), (True, nan_all)), hi), (False, nan_all))

    reg(tl.clamp, clamp)

    def fma(x, y, z):
        a, b = B.operands(x, y)
        a, c = B.operands(a, z)
        a, b, c = B.bcast(a, B.convert(b, a.elem), c)
        if a.elem not in (Dt.F32, Dt.F16, Dt.BF16):
            raise fe.unsupported(f"tl.fma on {a.elem!r}", "cohort's fma is defined on f32 (and f16/bf16 through it)")
        return Node(K.FMA, a.type, (a, b, c))

    reg(tl.fma, fma)

    def umulhi(x, y):
        a, b = B.operands(x, y)
        if not (a.elem.is_int and a.elem.bits in (32, 64)):
            raise fe.type_error("umulhi needs 32- or 64-bit integers")
        return Node(K.UMULHI, a.type, (a, b))

    reg(tl.math.umulhi, umulhi)

    def math1(name):
        def h(x, *rest, **kw):
            x = B.tile(x)
            if isinstance(x.elem, Ptr) or x.elem is not Dt.F32:
                if name in ("sqrt", "abs") and x.elem is Dt.F64:
                    return Node(K.MATH, x.type, (x,), name)
                raise fe.type_error(f"{name} expects fp32 (as Triton: fp32/fp64; cohort's math library is "
                                    f"fp32), got {x.elem!r}; cast with .to(tl.float32)")
            return Node(K.MATH, x.type, (x,), name)
        return h

    for name in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf"):
        reg(getattr(tl.math, name, None), math1(name))
        reg(getattr(tl, name, None), math1(name))
    reg(getattr(tl.math, "sqrt_rn", None), math1("sqrt"))

    def absf(x):
        x = B.tile(x)
        if x.elem is Dt.I1 or (x.elem.is_int and not x.elem.is_signed):
            return x
        return Node(K.UNARY, x.type, (x,), Un.ABS)

    reg(tl.abs, absf)
    reg(tl.math.abs, absf)

    def floorceil(op):
        def h(x):
            x = B.tile(x)
            if not x.elem.is_float:
                raise fe.type_error(f"{op.value} needs a float tile")
            return Node(K.UNARY, x.type, (x,), op)
        return h

    reg(tl.math.floor, floorceil(Un.FLOOR))
    reg(tl.math.ceil, floorceil(Un.CEIL))

    def div_rn(x, y):
        return B.truediv(x, y)

    reg(getattr(tl.math, "div_rn", None), div_rn)
    reg(getattr(tl.math, "fdiv", None), lambda x, y, ieee_rounding=False: B.truediv(x, y))

    # libdevice (both module paths): the listed functions, others refused by name
    from . import libdevice_map
    for fn, name in libdevice_map.functions():
        if name in LIBDEVICE:
            reg(fn, math1(LIBDEVICE[name]))
        elif name in ("fabs", "abs"):
            reg(fn, absf)
        elif name in ("floor", "ceil"):
            reg(fn, floorceil(Un.FLOOR if name == "floor" else Un.CEIL))
        elif name in ("fmax", "fmin"):
            reg(fn, minmax(name == "fmax"))
        elif name == "isnan":
            reg(fn, lambda x: B.compare("NotEq", x, x))
        elif name == "fma":
            reg(fn, fma)
        elif name == "div_rn":
            reg(fn, div_rn)
        else:
            reg(fn, refuse(f"extra.libdevice.{name}", "not in cohort's math library yet"))

    # ---------------------------------------------------------- memory
    from . import memory_builtins
    memory_builtins.register(B, reg, tl)

    # ---------------------------------------------------------- reductions, scans, dot
    from . import reduce_builtins
    reduce_builtins.register(B, reg, tl)

    # ---------------------------------------------------------- hints, asserts, debugging
    def passthrough(x, *a, **k):
        return x

    for name in ("multiple_of", "max_contiguous", "max_constancy"):
        reg(getattr(tl, name, None), passthrough)
    reg(getattr(tl, "assume", None), lambda cond: None)
    reg(tl.debug_barrier, lambda: None)

    def static_assert(cond, msg=""):
        c = unwrap(cond)
        if isinstance(c, Node):
            raise fe.type_error("tl.static_assert needs a compile-time condition")
        if not c:
            raise fe.type_error(f"static_assert failed: {unwrap(msg)}")

    reg(tl.static_assert, static_assert)
    reg(tl.static_print, lambda *a, **k: None)

    def device_assert(cond, msg="", mask=None):
        B.device_assert(cond, unwrap(msg))

    reg(tl.device_assert, device_assert)

    def device_print(prefix, *args, hex=False):
        vals = tuple(B.tile(a) for a in args)
        fe.emit(tir.Print(str(unwrap(prefix)), vals, fe.line))

    reg(tl.device_print, device_print)
    reg(tl.constexpr, lambda x=None: unwrap(x))
    return t


def device_assert(B, cond, msg):
    c = unwrap(cond)
    if not isinstance(c, Node):
        if not c:
            raise B.fe.type_error(f"assertion failed: {msg}")
        return
    B.fe.emit(tir.Assert(B.to_bool(c), str(msg), B.fe.line))


__all__ = ["table", "REFUSED", "LIBDEVICE", "Bin", "Red"]

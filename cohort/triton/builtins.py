"""The language's primitives: each triton.language function the frontend knows, as tile IR.

`Builtins.lookup(fn)` maps a triton.language object (by identity) to its
handler; a @triton.jit function it does not list (tl.sigmoid, tl.cdiv,
tl.softmax, tl.rand, ...) is inlined from triton's own source by the
frontend. Typing follows triton.language.semantic (typing.py).
"""
from __future__ import annotations

import numpy as np

from . import tir
from .tir import TT, Bin, Cmp, Dt, K, Node, Ptr, Un
from .tl_objects import tl_dtype
from .typing import (
    broadcast_shapes,
    check_literal_fits,
    computation_type,
    integer_promote,
    literal_type,
)

_BINOPS = {"Add": Bin.ADD, "Sub": Bin.SUB, "Mult": Bin.MUL, "Div": Bin.DIV, "FloorDiv": Bin.IDIV,
           "Mod": Bin.MOD, "BitAnd": Bin.AND, "BitOr": Bin.OR, "BitXor": Bin.XOR, "LShift": Bin.SHL,
           "RShift": Bin.SHR}
_PYOPS = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mult": lambda a, b: a * b,
          "Div": lambda a, b: a / b, "FloorDiv": lambda a, b: a // b, "Mod": lambda a, b: a % b,
          "BitAnd": lambda a, b: a & b, "BitOr": lambda a, b: a | b, "BitXor": lambda a, b: a ^ b,
          "LShift": lambda a, b: a << b, "RShift": lambda a, b: a >> b, "Pow": lambda a, b: a ** b}
_CMPS = {"Lt": Cmp.LT, "LtE": Cmp.LE, "Gt": Cmp.GT, "GtE": Cmp.GE, "Eq": Cmp.EQ, "NotEq": Cmp.NE}
_PYCMP = {"Lt": lambda a, b: a < b, "LtE": lambda a, b: a <= b, "Gt": lambda a, b: a > b,
          "GtE": lambda a, b: a >= b, "Eq": lambda a, b: a == b, "NotEq": lambda a, b: a != b,
          "Is": lambda a, b: a is b, "IsNot": lambda a, b: a is not b,
          "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b}


def _is_num(v) -> bool:
    return isinstance(v, (bool, int, float)) and not isinstance(v, Node)


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class Builtins:
    def __init__(self, fe):
        self.fe = fe
        self._table = None

    # ------------------------------------------------------------ helpers
    def err(self, msg):
        return self.fe.type_error(msg)

    def dt_of(self, d) -> Dt:
        """A tl.dtype (or its name) as a Dt."""
        from .tl_objects import unwrap
        d = unwrap(d)
        name = getattr(d, "name", d)
        if name in tir.DT_BY_NAME:
            return tir.DT_BY_NAME[name]
        if name in ("fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16"):
            raise self.fe.unsupported(f"the fp8 type {name}")
        raise self.err(f"`{d}` is not a scalar dtype")

    def const(self, value, dt: Dt, shape=()) -> Node:
        """A splat constant; its value is stored exactly as `dt` holds it (floats rounded once)."""
        if dt.is_float:
            from .values import round_f64, to_f32
            value = float(value) if dt is Dt.F64 else float(to_f32(round_f64(float(value), dt), dt))
        elif dt is Dt.I1:
            value = bool(value)
        else:
            value = int(value)
        return Node(K.CONST, TT(dt, tuple(shape)), (), value)

    def tile(self, v) -> Node:
        from .tl_objects import unwrap
        v = unwrap(v)
        if isinstance(v, Node):
            return v
        if _is_num(v):
            return self.const(v, literal_type(v))
        raise self.err(f"cannot make a tile of {type(v).__name__} `{v!r}`")

    def convert(self, v: Node, dt) -> Node:
        if v.elem == dt:
            return v
        if isinstance(v.elem, Ptr) or isinstance(dt, Ptr):
            if isinstance(v.elem, Ptr) and isinstance(dt, Ptr):
                raise self.fe.unsupported("casting a pointer to another element type")
            raise self.fe.unsupported("casting between pointers and integers")
        if v.op is K.CONST:
            from .interp import const_value
            from .values import cast
            val = cast(const_value(v.arg, v.elem), v.elem, dt)
            return Node(K.CONST, TT(dt, v.shape), (), _py(val, dt))
        return Node(K.CAST, TT(dt, v.shape), (v,))

    def broadcast_to(self, v: Node, shape: tuple) -> Node:
        if v.shape == shape:
            return v
        if not v.shape:
            if v.op is K.CONST:
                return Node(K.CONST, TT(v.elem, shape), (), v.arg)
            return Node(K.BROADCAST, TT(v.elem, shape), (v,))
        if len(v.shape) < len(shape):
            for _ in range(len(shape) - len(v.shape)):
                v = Node(K.EXPAND, TT(v.elem, (1,) + v.shape), (v,), 0)
        if len(v.shape) != len(shape) or any(a != b and a != 1 for a, b in zip(v.shape, shape)):
            raise self.err(f"cannot broadcast a tile of shape {list(v.shape)} to {list(shape)}")
        return Node(K.BROADCAST, TT(v.elem, shape), (v,))

    def bcast(self, *vs):
        shape = ()
        for v in vs:
            shape = broadcast_shapes(shape, v.shape)
        return [self.broadcast_to(v, shape) for v in vs]

    def promote_int(self, a: Dt, b: Dt) -> Dt:
        return integer_promote(a, b)

    def to_bool(self, v: Node) -> Node:
        v = self.tile(v)
        if v.elem is Dt.I1:
            return v
        if isinstance(v.elem, Ptr):
            raise self.err("a pointer used as a condition")
        return self.compare("NotEq", v, 0)

    def operands(self, a, b, div_or_mod=False, arith=True):
        """Triton's binary typing: (a, b) as tiles of the computation type and one shape."""
        from .tl_objects import unwrap
        a, b = unwrap(a), unwrap(b)
        aw, bw = _is_num(a), _is_num(b)
        at = literal_type(a) if aw else self.tile(a).elem
        bt = literal_type(b) if bw else self.tile(b).elem
        if isinstance(at, Ptr) or isinstance(bt, Ptr) or not arith:
            return self.bcast(self.tile(a), self.tile(b))
        ct = computation_type(at, aw, bt, bw, div_or_mod)
        out = []
        for v, w in ((a, aw), (b, bw)):
            if w:
                check_literal_fits(v, ct)
                out.append(self.const(v, ct))
            else:
                out.append(self.convert(v, ct))
        return self.bcast(*out)

    # ------------------------------------------------------------ operators
    def binop(self, opname: str, a, b):
        from .tl_objects import unwrap
        a, b = unwrap(a), unwrap(b)
        if not isinstance(a, Node) and not isinstance(b, Node):
            try:
                return _PYOPS[opname](a, b)
            except Exception as e:
                raise self.err(f"compile-time `{opname}` failed: {e}") from None
        if opname == "Pow":
            raise self.fe.unsupported("`**` on tiles", "use libdevice.pow or repeated multiplication")
        if opname == "MatMult":
            raise self.fe.unsupported("`@` on tiles", "use tl.dot")
        op = _BINOPS[opname]
        if op in (Bin.ADD, Bin.SUB):
            ta = a.elem if isinstance(a, Node) else None
            tb = b.elem if isinstance(b, Node) else None
            if isinstance(ta, Ptr) or isinstance(tb, Ptr):
                return self.ptr_add(a, b, op is Bin.SUB)
        if op is Bin.DIV:
            return self.truediv(a, b)
        if op in (Bin.AND, Bin.OR, Bin.XOR, Bin.SHL, Bin.SHR):
            x, y = self.operands(a, b)
            if not (x.elem.is_int and y.elem.is_int):
                raise self.err(f"bitwise `{op.value}` needs integer operands, not {x.elem!r} and {y.elem!r}")
            return Node(K.BINARY, x.type, (x, y), op)
        x, y = self.operands(a, b, div_or_mod=op in (Bin.IDIV, Bin.MOD))
        if op is Bin.IDIV and x.elem.is_float:
            raise self.err("`//` needs integer operands (Triton has no float floor division)")
        return Node(K.BINARY, x.type, (x, y), op)

    def truediv(self, a, b):
        x, y = self.operands(a, b, div_or_mod=True)
        d = x.elem
        if d.is_int:
            x, y = self.convert(x, Dt.F32), self.convert(y, Dt.F32)
        return Node(K.BINARY, x.type, (x, y), Bin.DIV)

    def ptr_add(self, a, b, subtract: bool):
        if isinstance(b, Node) and isinstance(b.elem, Ptr):
            if subtract or (isinstance(a, Node) and isinstance(a.elem, Ptr)):
                raise self.err("pointer arithmetic: only pointer + integer and pointer - integer")
            a, b = b, a
        off = self.tile(b)
        if not (isinstance(off.elem, Dt) and off.elem.is_int):
            raise self.err(f"a pointer plus {off.elem!r}: the offset must be an integer")
        if subtract:
            off = self.unop("USub", off)
        p, o = self.bcast(a, off)
        return Node(K.PTR_ADD, p.type, (p, o))

    def unop(self, opname: str, a):
        from .tl_objects import unwrap
        a = unwrap(a)
        if not isinstance(a, Node):
            return {"USub": lambda x: -x, "UAdd": lambda x: +x, "Not": lambda x: not x,
                    "Invert": lambda x: ~x}[opname](a)
        if isinstance(a.elem, Ptr):
            raise self.err(f"unary `{opname}` on a pointer")
        if opname == "UAdd":
            return a
        if opname == "USub":
            return Node(K.UNARY, a.type, (a,), Un.NEG)
        if opname == "Invert":
            if a.elem.is_float:
                raise self.err("`~` on a float tile")
            return Node(K.UNARY, a.type, (a,), Un.INVERT)
        return Node(K.UNARY, TT(Dt.I1, a.shape), (self.to_bool(a),), Un.NOT)

    def compare(self, opname: str, a, b):
        from .tl_objects import unwrap
        a, b = unwrap(a), unwrap(b)
        if not isinstance(a, Node) and not isinstance(b, Node):
            return _PYCMP[opname](a, b)
        if opname not in _CMPS:
            raise self.fe.unsupported(f"`{opname}` on a tile")
        x, y = self.operands(a, b)
        if isinstance(x.elem, Ptr):
            raise self.fe.unsupported("comparing pointers")
        return Node(K.CMP, TT(Dt.I1, x.shape), (x, y), _CMPS[opname])

    def logical(self, is_and, a, b):
        x, y = self.bcast(self.to_bool(self.tile(a)), self.to_bool(self.tile(b)))
        return Node(K.BINARY, x.type, (x, y), Bin.AND if is_and else Bin.OR)

    def where(self, cond, x, y):
        c = self.to_bool(self.tile(cond))
        from .tl_objects import unwrap
        x, y = unwrap(x), unwrap(y)
        if isinstance(x, Node) and isinstance(x.elem, Ptr) or isinstance(y, Node) and isinstance(y.elem, Ptr):
            raise self.fe.unsupported("tl.where on pointers", "select the offsets instead")
        a, b = self.operands(x, y)
        c, a, b = self.bcast(c, a, b)
        return Node(K.WHERE, a.type, (c, a, b))

    def index(self, v: Node, spec):
        n_colon = sum(1 for s in spec if s == ":")
        if n_colon > len(v.shape):
            raise self.err(f"too many `:` for a tile of rank {len(v.shape)}")
        spec = list(spec) + [":"] * (len(v.shape) - n_colon)
        out = v
        axis = 0
        for s in spec:
            if s is None:
                out = Node(K.EXPAND, TT(out.elem, out.shape[:axis] + (1,) + out.shape[axis:]), (out,), axis)
            axis += 1
        return out

    # ------------------------------------------------------------ attributes and methods
    def tile_attr(self, v: Node, attr: str):
        if attr == "dtype":
            return tl_dtype(v.elem)
        if attr == "shape":
            return tuple(v.shape)
        if attr == "type":
            import triton.language as tl
            return tl.block_type(tl_dtype(v.elem), list(v.shape)) if v.shape else tl_dtype(v.elem)
        if attr == "T":
            return self.trans(v)
        if attr == "numel":
            return v.type.numel
        raise self.fe.unsupported(f"the tile attribute `.{attr}`")

    def method(self, v: Node, name: str, args, kwargs):
        if name == "to":
            return self.to(v, *args, **kwargs)
        import triton.language as tl
        fn = getattr(tl, name, None) or getattr(tl.math, name, None)
        if fn is None:
            raise self.fe.unsupported(f"the tile method `.{name}()`")
        return self.fe.call(fn, [v] + list(args), kwargs)

    def python_builtin(self, fn, args, kwargs):
        from .tl_objects import unwrap
        if any(isinstance(a, Node) for a in args):
            if fn in (min, max) and len(args) >= 2 and not kwargs:
                import triton.language as tl  # as Triton's code generator: tl.minimum/maximum
                acc = args[0]
                for a in args[1:]:
                    acc = self.fe.call(tl.minimum if fn is min else tl.maximum, [acc, a], {})
                return acc
            raise self.fe.unsupported(f"Python `{fn.__name__}` on tiles")
        return fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})

    def lookup(self, fn):
        if self._table is None:
            self._table = self._build_table()
        try:
            return self._table.get(id(fn)) if fn is not None else None
        except TypeError:
            return None

    def device_assert(self, cond, msg):
        from .builtins_table import device_assert
        device_assert(self, cond, msg)

    def _build_table(self):
        from . import builtins_table
        return builtins_table.table(self)

    # ------------------------------------------------------------ conversions
    def to(self, v, dtype, fp_downcast_rounding=None, bitcast=False):
        v = self.tile(v)
        from .tl_objects import unwrap
        if fp_downcast_rounding not in (None, "rtne"):
            raise self.fe.unsupported(f"fp_downcast_rounding={fp_downcast_rounding!r}", "only round to nearest even")
        d = unwrap(dtype)
        import triton.language as tl
        if isinstance(d, tl.pointer_type):
            raise self.fe.unsupported("casting to a pointer type")
        dt = self.dt_of(d)
        if unwrap(bitcast):
            return self.bitcast(v, dt)
        return self.convert(v, dt)

    def bitcast(self, v, dt: Dt):
        v = self.tile(v)
        if isinstance(v.elem, Ptr):
            raise self.fe.unsupported("bitcast of a pointer")
        if v.elem == dt:
            return v
        if v.elem.bits != dt.bits:
            raise self.err(f"bitcast from {v.elem!r} to {dt!r}: different sizes")
        return Node(K.BITCAST, TT(dt, v.shape), (v,))

    def trans(self, v, *dims):
        v = self.tile(v)
        from .tl_objects import unwrap
        dims = tuple(unwrap(d) for d in dims)
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if not dims:
            dims = tuple(reversed(range(len(v.shape))))
        if sorted(dims) != list(range(len(v.shape))):
            raise self.err(f"permutation {list(dims)} for a tile of rank {len(v.shape)}")
        return Node(K.PERMUTE, TT(v.elem, tuple(v.shape[d] for d in dims)), (v,), dims)


def _py(val, dt: Dt):
    a = np.asarray(val)
    if dt is Dt.BF16:
        from .values import to_f32
        return float(to_f32(a, dt))
    return a.item()

"""One element of every tile operation in LLVM IR: the native twin of values.py (DESIGN §10).

Each function takes LLVM values in their register carriers — int1 as i1, integers as iN,
f16 and bf16 as their 16 bits (i16), f32 as float, f64 as double, pointer tiles as i64
element offsets — and mirrors the function of values.py / interp.py of the same name step
for step, so the two can be read side by side: 16-bit floats widen to f32, take the f32
operation and round back (the backend's widen/narrow, the same integer sequences as
refimpl.semantics); casts go through f64 exactly where values.cast does; math lowers the
same refimpl templates the backend lowers (mathlib, mathx) with the backend's rule per
operation (lower_ops.LOWER), so fma is llvm.fma or its exact software form as the target
decides. No instruction carries a fast-math flag.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..backend import codegen
from ..backend import context as bctx
from ..backend.lower_ops import LOWER, narrow, widen
from ..backend.lower_ops import bitcast as t_bitcast
from ..backend.lower_ops import convert as t_convert
from ..backend.variant import parse_variant
from ..refimpl import mathlib
from ..refimpl.ir import DType, Op
from . import mathx, planted
from .tir import Bin, Cmp, Dt, Ptr, Un

F32T, F64T, I64T = ir.FloatType(), ir.DoubleType(), ir.IntType(64)
_STORE16 = {Dt.F16: DType.F16, Dt.BF16: DType.BF16}


def like(ty: ir.Type, v) -> ir.Type:
    """`ty`, or a vector of it as wide as v when v is a vector (a packet of lanes)."""
    return ir.VectorType(ty, v.type.count) if isinstance(v.type, ir.VectorType) else ty


def kc(ty: ir.Type, c) -> ir.Constant:
    """The constant c of type ty (a vector type: c in every lane)."""
    if isinstance(ty, ir.VectorType):
        return bctx.vector_const(ty, c)
    return ir.Constant(ty, c)


def mangle(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{mangle(ty.element)}"
    if ty == F32T:
        return "f32"
    if ty == F64T:
        return "f64"
    if isinstance(ty, ir.PointerType):
        return "p0"
    return f"i{ty.width}"


# The f32 bits of the least x whose exp / exp2 (mathlib, mathx) is not +0: every x below it,
# -inf included, gives +0 (tests/test_triton_native_fast.py checks every float of the window).
ZERO_BELOW = {"exp": 0xC2CFF1B4, "exp2": 0xC315FFFF}


class NativeUnsupported(Exception):
    """An operation the native lowering does not build (the caller names the kernel line)."""


def reg_type(elem) -> ir.Type:
    """The LLVM type a tile element lives in while computed."""
    if isinstance(elem, Ptr):
        return I64T
    if elem is Dt.I1:
        return ir.IntType(1)
    if elem is Dt.F32:
        return F32T
    if elem is Dt.F64:
        return F64T
    return ir.IntType(elem.bits)             # integers; f16/bf16 as their bits


def mem_type(elem) -> ir.Type:
    """The LLVM type of an element in memory (tensors and tile arrays): int1 is a byte."""
    return ir.IntType(8) if elem is Dt.I1 else reg_type(elem)


def to_mem(b, v, elem):
    return b.zext(v, like(ir.IntType(8), v)) if elem is Dt.I1 else v


def from_mem(b, v, elem):
    return b.icmp_unsigned("!=", v, kc(v.type, 0)) if elem is Dt.I1 else v


def const(value, elem) -> ir.Constant:
    """A constant tile element, from the reference's own value (interp.const_value)."""
    from .interp import const_value
    if isinstance(elem, Ptr):
        return ir.Constant(I64T, int(value))
    return scalar_const(np.asarray(const_value(value, elem)), elem)


def scalar_const(v: np.ndarray, elem: Dt) -> ir.Constant:
    """The LLVM constant with exactly the bits of the carrier value v."""
    v = np.asarray(v, elem.np)
    if elem is Dt.I1:
        return ir.Constant(ir.IntType(1), int(bool(v)))
    if elem is Dt.F32:
        return ir.Constant(F32T, float(v))      # llvmlite prints floats exactly (as hex doubles)
    if elem is Dt.F64:
        return ir.Constant(F64T, float(v))
    bits = int(v.reshape(1).view(np.dtype(f"u{v.itemsize}"))[0])
    return ir.Constant(ir.IntType(elem.bits), bits)


def exact_config():
    """The codegen record tile programs are built with, resolved now (target, knobs, plants)."""
    return codegen.resolve(parse_variant("packet"))


class Ops:
    """Element operations over one builder (`b`) and module."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder, config=None):
        # the backend's build record (codegen.py): its fma and f16 choices are the target's,
        # its variant never fast-math, as the reference's operations are each rounded
        self.m, self.b = module, builder
        self.config = config if config is not None else exact_config()
        self._cx = {}

    def cx_for(self, v) -> bctx.Ctx:
        """The backend's lowering context for values shaped like v (scalar, or its lanes)."""
        n = v.type.count if isinstance(v.type, ir.VectorType) else 1
        cx = self._cx.get(n)
        if cx is None:
            cx = self._cx[n] = bctx.Ctx(self.m, self.b, n, self.config)
        return cx

    def call(self, base: str, ret: ir.Type, args: list, *types):
        """The overloaded intrinsic `base`, mangled by `types` (default: the return type)."""
        return self.intrinsic(base + "".join("." + mangle(t) for t in (types or (ret,))), ret, args)

    def intrinsic(self, name: str, ret: ir.Type, args: list):
        fn = self.m.globals.get(name)
        if fn is None:
            fn = ir.Function(self.m, ir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, args)

    # ------------------------------------------------------------ float carriers
    def to_f32(self, v, d: Dt):
        return widen(self.cx_for(v), v, _STORE16[d]) if d in _STORE16 else v

    def from_f32(self, x, d: Dt):
        if d is Dt.BF16 and self.config.planted("triton_bf16_truncate"):
            return planted.bf16_truncate(self.b, x)
        return narrow(self.cx_for(x), x, _STORE16[d]) if d in _STORE16 else x

    def wide(self, v, d: Dt):
        """values._wide_float: any float as f64, exactly."""
        if d is Dt.F64:
            return v
        return self.b.fpext(self.to_f32(v, d), like(F64T, v))

    def exact(self, v, d: Dt):
        """A float as f32 (f64: itself): comparisons there equal values.py's in f64, since the
        widening is exact."""
        return v if d is Dt.F64 else self.to_f32(v, d)

    def signbit(self, x):
        el = x.type.element if isinstance(x.type, ir.VectorType) else x.type
        ity = like(I64T if el == F64T else ir.IntType(32), x)
        return self.b.icmp_signed("<", self.b.bitcast(x, ity), kc(ity, 0))

    def round_f64(self, x, d: Dt):
        """values._round_f64: f64 -> f32 -> 16 bits."""
        if d is Dt.F64:
            return x
        return self.from_f32(self.b.fptrunc(x, like(F32T, x)), d)

    def float_op(self, fn, d: Dt, *xs):
        """values.float_op: f64 as is, else the f32 operation on widened values, rounded back."""
        if d is Dt.F64:
            return fn(*xs)
        return self.from_f32(fn(*(self.to_f32(x, d) for x in xs)), d)

    # ------------------------------------------------------------ casts
    def cast(self, v, src: Dt, dst: Dt):
        b = self.b
        if src is dst:
            return v
        if dst is Dt.I1:
            if src.is_float:
                x = self.exact(v, src)
                return b.fcmp_unordered("!=", x, kc(x.type, 0.0))
            return b.icmp_unsigned("!=", v, kc(v.type, 0))
        rt = like(reg_type(dst), v)
        if src.is_int and dst.is_int:
            if dst.bits > src.bits:
                return b.sext(v, rt) if src.is_signed else b.zext(v, rt)
            return b.trunc(v, rt) if dst.bits < src.bits else v
        if src.is_int:                    # to f64 (64-bit: rounded to odd), then values.round_f64
            wide = b.sitofp(v, like(F64T, v)) if src.is_signed else b.uitofp(v, like(F64T, v))
            if src.bits == 64 and dst is not Dt.F64:
                wide = self.to_f64_odd(v, wide, src.is_signed)
            return self.round_f64(wide, dst)
        if dst.is_float:
            return self.round_f64(self.wide(v, src), dst)
        w = self.wide(v, src)
        t = self.call("llvm.trunc", w.type, [w])
        sat = "llvm.fptosi.sat" if dst.is_signed else "llvm.fptoui.sat"
        return self.call(sat, rt, [t], rt, w.type)          # saturates, NaN -> 0

    def to_f64_odd(self, v, x, signed: bool):
        """values.to_f64_odd: x, the 64-bit integer v rounded to nearest even, rounded to odd."""
        b = self.b
        top = kc(x.type, 2.0 ** 63 if signed else 2.0 ** 64)
        mag = self.call("llvm.fabs", x.type, [x])
        fits = b.fcmp_ordered("<", mag, top)
        safe = b.select(fits, x, kc(x.type, 0.0))
        back = b.fptosi(safe, v.type) if signed else b.fptoui(safe, v.type)
        inexact = b.and_(fits, b.icmp_unsigned("!=", back, v))
        above = b.icmp_signed(">", v, back) if signed else b.icmp_unsigned(">", v, back)
        positive = b.fcmp_ordered(">", x, kc(x.type, 0.0))
        away = b.icmp_unsigned("==", above, positive)
        ity = like(I64T, x)
        bits = b.bitcast(x, ity)
        even = b.icmp_unsigned("==", b.and_(bits, kc(ity, 1)), kc(ity, 0))
        moved = b.add(bits, b.select(away, kc(ity, 1), kc(ity, -1)))
        return b.bitcast(b.select(b.and_(inexact, even), moved, bits), x.type)

    def bitcast(self, v, src: Dt, dst: Dt):
        if dst is Dt.I1:
            return self.b.icmp_unsigned("!=", v, kc(v.type, 0))
        if src is Dt.I1:
            return self.b.zext(v, like(reg_type(dst), v))
        return v if reg_type(src) == reg_type(dst) else self.b.bitcast(v, like(reg_type(dst), v))

    # ------------------------------------------------------------ arithmetic
    def binary(self, op: Bin, d: Dt, a, x):
        b = self.b
        if d.is_float:
            fn = {Bin.ADD: b.fadd, Bin.SUB: b.fsub, Bin.MUL: b.fmul, Bin.DIV: b.fdiv, Bin.MOD: b.frem}.get(op)
            if fn is None:
                raise NativeUnsupported(f"{op.value} on {d!r}")
            return self.float_op(fn, d, a, x)
        if d is Dt.I1 and op in (Bin.ADD, Bin.SUB, Bin.MUL):
            return b.and_(a, x) if op is Bin.MUL else b.xor(a, x)
        if op in (Bin.ADD, Bin.SUB, Bin.MUL, Bin.AND, Bin.OR, Bin.XOR):
            return {Bin.ADD: b.add, Bin.SUB: b.sub, Bin.MUL: b.mul, Bin.AND: b.and_, Bin.OR: b.or_,
                    Bin.XOR: b.xor}[op](a, x)
        zero = kc(a.type, 0)
        if op in (Bin.IDIV, Bin.MOD):     # the caller has reported a zero divisor; make it harmless
            one = kc(a.type, 1)
            safe = b.select(b.icmp_unsigned("==", x, zero), one, x)
            if not d.is_signed:
                return b.udiv(a, safe) if op is Bin.IDIV else b.urem(a, safe)
            neg1 = b.icmp_signed("==", safe, kc(a.type, -1))     # MIN // -1 wraps, MIN % -1 is 0
            safe = b.select(neg1, one, safe)
            if op is Bin.IDIV and self.config.planted("triton_idiv_floor"):
                return planted.floor_div(b, a, safe, neg1)
            if op is Bin.IDIV:
                return b.select(neg1, b.neg(a), b.sdiv(a, safe))
            return b.select(neg1, zero, b.srem(a, safe))
        if op in (Bin.SHL, Bin.SHR):      # the caller has reported an amount outside 0..bits-1
            amount = b.and_(x, kc(a.type, d.bits - 1))
            if op is Bin.SHL:
                return b.shl(a, amount)
            return b.ashr(a, amount) if d.is_signed else b.lshr(a, amount)
        raise NativeUnsupported(f"{op.value} on {d!r}")

    def unary(self, op: Un, d: Dt, a):
        b = self.b
        if op is Un.NOT:
            return b.not_(a) if a.type == like(ir.IntType(1), a) else b.icmp_unsigned("==", a, kc(a.type, 0))
        if op is Un.INVERT:
            return b.not_(a)
        if d.is_float:
            fn = {Un.NEG: lambda v: b.fneg(v), Un.ABS: lambda v: self.call("llvm.fabs", v.type, [v]),
                  Un.FLOOR: lambda v: self.call("llvm.floor", v.type, [v]),
                  Un.CEIL: lambda v: self.call("llvm.ceil", v.type, [v])}[op]
            return self.float_op(fn, d, a)
        if op is Un.NEG:
            return b.neg(a)
        if op is Un.ABS:
            if not d.is_signed:
                return a
            return b.select(b.icmp_signed("<", a, kc(a.type, 0)), b.neg(a), a)
        raise NativeUnsupported(f"{op.value} on {d!r}")

    def compare(self, op: Cmp, d: Dt, a, x):
        b = self.b
        if d.is_float:
            a, x = self.exact(a, d), self.exact(x, d)
            if op is Cmp.NE:
                return b.fcmp_unordered("!=", a, x)
            return b.fcmp_ordered(op.value, a, x)
        if d.is_signed:
            return b.icmp_signed(op.value, a, x)
        return b.icmp_unsigned(op.value, a, x)

    def minmax(self, is_max: bool, nan_all: bool, d: Dt, a, y):
        b = self.b
        if not d.is_float:
            sym = ">" if is_max else "<"
            c = b.icmp_signed(sym, a, y) if d.is_signed else b.icmp_unsigned(sym, a, y)
            return b.select(c, a, y)
        x, w = self.exact(a, d), self.exact(y, d)
        xs = self.signbit(x)
        eq = b.fcmp_ordered("==", x, w)
        if is_max:
            pick = b.or_(b.fcmp_ordered(">", x, w), b.and_(eq, b.not_(xs)))
        else:
            pick = b.or_(b.fcmp_ordered("<", x, w), b.and_(eq, xs))
        xn, yn = b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", w, w)
        true, false = kc(pick.type, 1), kc(pick.type, 0)
        if nan_all:
            pick = b.select(xn, true, b.select(yn, false, pick))
        else:
            pick = b.select(yn, true, b.select(xn, false, pick))
        r = b.select(pick, a, y)
        if d in (Dt.F32, Dt.F64):          # keep InstCombine from folding nested min/max selects
            r = self.call("llvm.arithmetic.fence", r.type, [r])
        return r

    def fma(self, d: Dt, a, x, c):
        if d is Dt.F64:
            raise NativeUnsupported("tl.fma on fp64")
        return self.from_f32(LOWER[Op.FMA](self.cx_for(a), DType.F32, self.to_f32(a, d), self.to_f32(x, d),
                                           self.to_f32(c, d)), d)

    def umulhi(self, d: Dt, a, x):
        b = self.b
        if d.bits != 32:
            raise NativeUnsupported("umulhi on 64-bit integers")
        ext = b.sext if d.is_signed else b.zext
        w = like(I64T, a)
        p = b.mul(ext(a, w), ext(x, w))
        return b.trunc(b.ashr(p, kc(w, 32)) if d.is_signed else b.lshr(p, kc(w, 32)), a.type)

    # ------------------------------------------------------------ math
    def math(self, name: str, d: Dt, x):
        if d is Dt.F64:
            if name != "sqrt":
                raise NativeUnsupported(f"tl.{name} on fp64")
            return self.call("llvm.sqrt", x.type, [x])
        if d is not Dt.F32:
            raise NativeUnsupported(f"tl.{name} on {d!r}")
        b = self.b
        one = kc(x.type, 1.0)
        if name == "sqrt":
            return self.call("llvm.sqrt", x.type, [x])
        if name == "rsqrt":
            return b.fdiv(one, self.call("llvm.sqrt", x.type, [x]))
        if name == "sigmoid":
            e = self.math("exp", d, b.fneg(x))
            return b.fdiv(one, b.fadd(one, e))
        zero_below = ZERO_BELOW.get(name)
        if zero_below is not None:
            # the reference's result is +0 below the bound: those lanes run the template on 0.0
            # instead, so no multiply underflows (an x86 microcode assist, ~100 cycles each:
            # a softmax's masked-off -inf lanes met it on every row) — the same bits
            low = b.fcmp_ordered("<", x, kc(x.type, float(np.uint32(zero_below).view(np.float32))))
            zero = kc(x.type, 0.0)
            if not isinstance(x.type, ir.VectorType):
                y = self.template(mathx.template(name), {("arg", 0): b.select(low, zero, x)}, self.cx_for(x))
                return b.select(low, zero, y)
            # a packet below the bound in every lane (a softmax row's masked-off tail) is +0 at once
            every = self.call("llvm.vector.reduce.and", ir.IntType(1), [low], low.type)
            with b.if_else(every) as (all_low, some):
                with all_low:
                    bb1 = b.block
                with some:
                    y = self.template(mathx.template(name), {("arg", 0): b.select(low, zero, x)}, self.cx_for(x))
                    y = b.select(low, zero, y)
                    bb2 = b.block
            r = b.phi(x.type)
            r.add_incoming(zero, bb1)
            r.add_incoming(y, bb2)
            return r
        return self.template(mathx.template(name), {("arg", 0): x}, self.cx_for(x))

    def template(self, e, memo: dict, cx):
        """A refimpl math template, one backend rule per operation (lowering/exprs.py's table)."""
        r = memo.get(id(e))
        if r is not None:
            return r
        if e.op is Op.ARG:
            r = memo[("arg", e.arg)]
        elif e.op is Op.CONST:
            r = cx.const(e.dtype, e.arg)
        elif e.op is Op.MATH:
            r = self.template(mathlib.template(e.arg), {("arg", 0): self.template(e.src[0], memo, cx)}, cx)
        else:
            s = [self.template(x, memo, cx) for x in e.src]
            if e.op is Op.SELECT:
                r = self.b.select(*s)
            elif e.op is Op.CAST:
                r = t_convert(cx, s[0], e.src[0].dtype, e.dtype)
            elif e.op is Op.BITCAST:
                r = t_bitcast(cx, s[0], e.src[0].dtype, e.dtype)
            elif e.op in LOWER:
                r = LOWER[e.op](cx, e.src[0].dtype, *s)
            else:
                raise NativeUnsupported(f"math template operation {e.op.name}")
        memo[id(e)] = r
        return r

    # ------------------------------------------------------------ reductions and atomics
    def combine(self, red, d: Dt, a, x):
        """interp.combine: one step of a reduction or scan."""
        from .tir import Red
        if red is Red.SUM:
            return self.binary(Bin.ADD, d, a, x)
        if red is Red.PROD:
            return self.binary(Bin.MUL, d, a, x)
        if red in (Red.MAX, Red.MIN):
            return self.minmax(red is Red.MAX, False, d, a, x)
        op = {Red.XOR: Bin.XOR, Red.OR: Bin.OR, Red.AND: Bin.AND}[red]
        return self.binary(op, d, a, x)

    def arg_pick(self, is_max: bool, d: Dt, v1, i1, v2, i2):
        """interp._arg_combine: whether the left (value, index) pair wins."""
        b = self.b
        if d.is_float:
            x, y = self.exact(v1, d), self.exact(v2, d)
            eq, gt, lt = (b.fcmp_ordered(s, x, y) for s in ("==", ">", "<"))
        else:
            sym = b.icmp_signed if d.is_signed else b.icmp_unsigned
            eq, gt, lt = sym("==", v1, v2), sym(">", v1, v2), sym("<", v1, v2)
        tie = b.and_(eq, b.icmp_signed("<", i1, i2))
        if self.config.planted("triton_argmax_tie_last"):
            tie = b.and_(eq, b.icmp_signed(">", i1, i2))
        return b.or_(gt if is_max else lt, tie)

    def atomic_new(self, op: str, d: Dt, old, v, cmp):
        """interp._atomic_new: the value an atomic leaves in memory."""
        b = self.b
        if op == "xchg":
            return v
        if op == "cas":                    # compares bits
            same = b.icmp_unsigned("==", self.bitcast(old, d, _int_of(d)) if d.is_float else old,
                                   self.bitcast(cmp, d, _int_of(d)) if d.is_float else cmp)
            return b.select(same, v, old)
        if d.is_float:
            if d is not Dt.F32 or op not in ("max", "min"):
                raise NativeUnsupported(f"atomic_{op} on {d!r}")
            nan = b.or_(b.fcmp_unordered("uno", old, old), b.fcmp_unordered("uno", v, v))
            ko, kv = (_order_key(b, b.bitcast(t, like(ir.IntType(32), t))) for t in (old, v))
            better = b.icmp_signed(">" if op == "max" else "<", kv, ko)
            canon = b.bitcast(ir.Constant(ir.IntType(32), 0x7FC00000), F32T)
            return b.select(nan, canon, b.select(better, v, old))
        if op == "add":
            return b.add(old, v)
        if op in ("max", "min"):
            return self.minmax(op == "max", False, d, old, v)
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](old, v)


# ---------------------------------------------------------------- shared by the lowering's modules
I1T, I8T, I16T, I32T = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32)
PTR = ir.PointerType()


def i64(v) -> ir.Constant:
    return ir.Constant(I64T, v)


def const_of(n):
    """The compile-time value of a (broadcast) constant node, else None."""
    from .tir import K
    while n.op is K.BROADCAST:
        n = n.srcs[0]
    return n.arg if n.op is K.CONST else None


def like_i1(n: int) -> ir.Type:
    return ir.VectorType(I1T, n) if n > 1 else I1T


def _int_of(d: Dt) -> Dt:
    return {16: Dt.I16, 32: Dt.I32, 64: Dt.I64}[d.bits]


def _order_key(b, bits):
    """refimpl.semantics.f32_order_key."""
    return b.xor(bits, b.and_(b.ashr(bits, kc(bits.type, 31)), kc(bits.type, 0x7FFFFFFF)))


__all__ = ["Ops", "NativeUnsupported", "reg_type", "mem_type", "const", "scalar_const"]

"""Lowering of every non-control operation: one entry per op, mirroring
`refimpl.semantics.ALU` entry for entry, so the two can be read side by side.

Entries work on scalars and on vectors alike (LLVM instructions are
elementwise); `cx` supplies constants and intrinsics of the right shape.
No instruction carries a fast-math flag unless `cx.fast_math` is set, so LLVM
neither contracts into FMA nor reassociates.

Where the interpreter reports an error (division by zero, shift out of range)
native code must still not trap or produce poison: the divisor and the shift
amount are made harmless first. The value produced there is unspecified, and
the interpreter has already rejected such a launch.
"""
from __future__ import annotations

from llvmlite import ir

from ..refimpl.ir import DType, Op
from .context import vector_const

F32, I32, U32, BOOL = DType.F32, DType.I32, DType.U32, DType.BOOL
_FCMP = {Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=", Op.EQ: "=="}
_ICMP = {Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=", Op.EQ: "==", Op.NE: "!="}


def _fflags(cx):
    # DESIGN §3: fast math may contract and reassociate. Not nnan/ninf/nsz:
    # kernels rely on infinities (a running max starts at -inf, exp(-inf) = 0).
    if cx.fast_math:
        return ("contract", "reassoc")
    return ("contract",) if cx.config.planted("fma_contract") else ()


def _int_div(cx, dt, a, b, rem: bool):
    bld = cx.b
    zero = bld.icmp_unsigned("==", b, cx.const(dt, 0))
    bad = zero
    if dt is I32:  # INT_MIN / -1 traps on x86; with divisor 1 it yields INT_MIN (wrap) and remainder 0
        ovf = bld.and_(bld.icmp_signed("==", a, cx.const(I32, -2 ** 31)),
                       bld.icmp_signed("==", b, cx.const(I32, -1)))
        bad = bld.or_(zero, ovf)
    safe = bld.select(bad, cx.const(dt, 1), b)
    k = _pow2_constant(b) if dt is I32 else None
    if k and cx.config.planted("rem_pow2_mask" if rem else "div_pow2_shift"):   # planted: sign ignored
        return bld.and_(a, cx.const(I32, k - 1)) if rem else bld.ashr(a, cx.const(I32, k.bit_length() - 1))
    if dt is I32:
        return bld.srem(a, safe) if rem else bld.sdiv(a, safe)
    return bld.urem(a, safe) if rem else bld.udiv(a, safe)


def _pow2_constant(b):
    """k when b is the constant k = 2^m > 1 (in every lane), else None (for planted bugs)."""
    if not isinstance(b, ir.Constant):
        return None
    vals = b.constant if isinstance(b.constant, list) else [b]
    vals = [v.constant if isinstance(v, ir.Constant) else v for v in vals]
    k = vals[0]
    ok = isinstance(k, int) and k > 1 and not k & (k - 1) and all(v == k for v in vals)
    return k if ok else None


def _shift(cx, dt, a, b, left: bool):
    amount = cx.b.and_(b, cx.const(dt, 31))
    if left:
        return cx.b.shl(a, amount)
    return cx.b.ashr(a, amount) if dt is I32 else cx.b.lshr(a, amount)


def _abs(cx, dt, a):
    if dt is F32:
        return cx.intrinsic("llvm.fabs", [F32], [a])
    if dt is U32:
        return a
    return cx.b.select(cx.b.icmp_signed("<", a, cx.const(I32, 0)), cx.b.neg(a), a)


def _cmp(op):
    def lower(cx, dt, a, b):
        if dt is F32:
            if op is Op.NE and not cx.config.planted("ne_ordered"):
                return cx.b.fcmp_unordered("!=", a, b, flags=_fflags(cx))
            if op is Op.LE and cx.config.planted("le_unordered"):      # planted: not (a > b)
                return cx.b.not_(cx.b.fcmp_ordered(">", a, b, flags=_fflags(cx)))
            return cx.b.fcmp_ordered(_FCMP.get(op, "!="), a, b, flags=_fflags(cx))
        if dt is I32:
            return cx.b.icmp_signed(_ICMP[op], a, b)
        return cx.b.icmp_unsigned(_ICMP[op], a, b)
    return lower


def _minmax_cmp(cx, dt, sym, a, b):
    """min: a if a < b else b (ordered: NaN compares false), as x86 minps."""
    if dt is F32 and cx.config.planted("minmax_nan"):
        return cx.b.fcmp_unordered(sym, a, b)
    return _cmp(Op.LT if sym == "<" else Op.GT)(cx, dt, a, b)


def _minmax(sym):
    def lower(cx, dt, a, b):
        r = cx.b.select(_minmax_cmp(cx, dt, sym, a, b), a, b)
        if dt is F32 and not cx.config.planted("minmax_unfenced"):
            # LLVM's InstCombine (foldSPFofSPF) folds min(min(a, b), b) to min(a, b)
            # for fcmp+select min/max even without fast-math flags, which is wrong when
            # NaN or a zero of the other sign decides the outer select (DESIGN §3). The
            # fence hides this select from the next one's pattern match; instruction
            # selection still sees fcmp+select and emits one minps/maxps.
            r = cx.intrinsic("llvm.arithmetic.fence", [F32], [r])
        return r
    return lower


def _arith(fop, iop):
    def lower(cx, dt, a, b):
        if dt is F32:
            return getattr(cx.b, fop)(a, b, flags=_fflags(cx))
        return getattr(cx.b, iop)(a, b)
    return lower


# ---------------------------------------------------------------- fused multiply-add
# DESIGN §3: fma(a, b, c) is a*b + c rounded once: llvm.fma, or where the target has no
# FMA instruction (LLVM would call libm's fmaf per lane) the software sequence below, the
# interpreter's method. Which one is the build's config.fma (codegen.py decides it).
def _fma(cx, dt, a, b, c):
    # No fast-math flags on either form: reassociation would undo the TwoSum below.
    if cx.config.fma == "hardware":
        return cx.intrinsic("llvm.fma", [F32], [a, c, b] if cx.config.planted("fma_operand_order") else [a, b, c])
    return _fma_software(cx, a, b, c)


def _fma_software(cx, a, b, c):
    bld, n = cx.b, cx.lanes
    f64, i64 = ir.DoubleType(), ir.IntType(64)
    d64, q64 = (f64, i64) if n == 1 else (ir.VectorType(f64, n), ir.VectorType(i64, n))

    def k(ty, scalar_ty, v):
        return ir.Constant(scalar_ty, v) if n == 1 else vector_const(ty, v)
    if cx.config.planted("fma_software_order"):                      # planted: a*c + b
        b, c = c, b
    p = bld.fmul(bld.fpext(a, d64), bld.fpext(b, d64))          # exact: 48 significant bits
    c64 = bld.fpext(c, d64)
    s = bld.fadd(p, c64)
    v = bld.fsub(s, p)                                          # TwoSum: err = p + c - s exactly
    err = bld.fadd(bld.fsub(p, bld.fsub(s, v)), bld.fsub(c64, v))
    zero = k(d64, f64, 0.0)
    bits = bld.bitcast(s, q64)
    even = bld.icmp_unsigned("==", bld.and_(bits, k(q64, i64, 1)), k(q64, i64, 0))
    step = bld.and_(bld.fcmp_ordered("!=", err, zero), even)   # inexact (NaN err: never) and even
    up = bld.icmp_unsigned("==", bld.fcmp_ordered(">", err, zero), bld.fcmp_ordered(">", s, zero))
    delta = bld.select(step, bld.select(up, k(q64, i64, 1), k(q64, i64, -1)), k(q64, i64, 0))
    odd = bld.bitcast(bld.add(bits, delta), d64)                 # s rounded to odd
    return bld.fptrunc(odd, cx.ty(F32))


LOWER = {
    Op.NEG:  lambda cx, dt, a: cx.b.fneg(a, flags=_fflags(cx)) if dt is F32 else cx.b.neg(a),
    Op.NOT:  lambda cx, dt, a: cx.b.not_(a),
    Op.ABS:  _abs,
    Op.SQRT: lambda cx, dt, a: cx.intrinsic("llvm.sqrt", [F32], [a]),

    Op.ADD:  _arith("fadd", "add"),
    Op.SUB:  _arith("fsub", "sub"),
    Op.MUL:  _arith("fmul", "mul"),
    Op.DIV:  lambda cx, dt, a, b: cx.b.fdiv(a, b, flags=_fflags(cx)) if dt is F32 else _int_div(cx, dt, a, b, False),
    Op.MOD:  lambda cx, dt, a, b: _int_div(cx, dt, a, b, True),
    Op.MIN:  _minmax("<"),
    Op.MAX:  _minmax(">"),
    Op.FMA:  _fma,

    Op.AND:  lambda cx, dt, a, b: cx.b.and_(a, b),
    Op.OR:   lambda cx, dt, a, b: cx.b.or_(a, b),
    Op.XOR:  lambda cx, dt, a, b: cx.b.xor(a, b),
    Op.SHL:  lambda cx, dt, a, b: _shift(cx, dt, a, b, True),
    Op.SHR:  lambda cx, dt, a, b: _shift(cx, dt, a, b, False),

    Op.LT:   _cmp(Op.LT),
    Op.LE:   _cmp(Op.LE),
    Op.GT:   _cmp(Op.GT),
    Op.GE:   _cmp(Op.GE),
    Op.EQ:   _cmp(Op.EQ),
    Op.NE:   _cmp(Op.NE),
}


def convert(cx, a, src: DType, dst: DType):
    """CAST: value conversion, as `semantics.convert`."""
    b = cx.b
    if src is dst or {src, dst} == {I32, U32}:
        return a                                                   # same bits
    if dst is BOOL:
        if src is F32:
            return b.fcmp_unordered("!=", a, cx.const(F32, 0.0))   # NaN -> True, -0.0 -> False
        return b.icmp_unsigned("!=", a, cx.const(src, 0))
    if src is BOOL:
        return b.uitofp(a, cx.ty(F32)) if dst is F32 else b.zext(a, cx.ty(dst))
    if dst is F32:
        return b.sitofp(a, cx.ty(F32)) if src is I32 else b.uitofp(a, cx.ty(F32))
    # f32 -> int: truncate, saturate, NaN -> 0 (plain fptosi is poison out of range)
    if cx.config.planted("fptosi_unsat"):
        return b.fptosi(a, cx.ty(dst)) if dst is I32 else b.fptoui(a, cx.ty(dst))
    return cx.intrinsic("llvm.fptosi.sat" if dst is I32 else "llvm.fptoui.sat", [dst, F32], [a])


def bitcast(cx, a, src: DType, dst: DType):
    if src is F32 or dst is F32:
        return cx.b.bitcast(a, cx.ty(dst))
    return a


# ---------------------------------------------------------------- storage types (bf16, f16)
# semantics.widen / narrow, with the same integer operations: one rule each, exact
# on every target (fptrunc to bfloat is a libcall, __truncsfbf2, that the JIT cannot
# resolve; so is half's without F16C). f16 on a target with F16C uses vcvtph2ps /
# vcvtps2ph, which agree with the integer lowering on every pattern (measured,
# tests/test_storage16.py, also with COHORT_F16=software) and are ~2.5x faster. Which one
# is the build's config.f16 (codegen.py decides it).


def _half(cx):
    return ir.HalfType() if cx.lanes == 1 else ir.VectorType(ir.HalfType(), cx.lanes)

def _k(cx, ty, v):
    return ir.Constant(ty, v) if cx.lanes == 1 else vector_const(ir.VectorType(ty, cx.lanes), v)


def widen(cx, h, storage: DType):
    """Storage elements (i16 bits) -> f32, exactly (semantics.widen)."""
    b, i32 = cx.b, ir.IntType(32)
    c = lambda v: _k(cx, i32, v)
    u = b.zext(h, cx.ty(I32))
    if storage is DType.BF16:
        return b.bitcast(b.shl(u, c(16)), cx.ty(F32))
    if cx.config.f16 == "hardware":                      # vcvtph2ps: exact, NaN quieted as below
        return b.fpext(b.bitcast(h, _half(cx)), cx.ty(F32))
    sign = b.shl(b.and_(u, c(0x8000)), c(16))
    em = b.and_(u, c(0x7FFF))
    e13 = b.shl(em, c(13))
    normal = b.add(e13, c(0x38000000))
    quiet = b.select(b.icmp_unsigned(">", em, c(0x7C00)), c(0x400000), c(0))
    special = b.or_(b.or_(e13, c(0x7F800000)), quiet)
    # 0 and subnormals: em * 2^-24, exact (em < 2^10; no flags, no flush to zero)
    tiny = b.bitcast(b.fmul(b.sitofp(em, cx.ty(F32)), _k(cx, ir.FloatType(), 2.0 ** -24)), cx.ty(I32))
    out = b.select(b.icmp_unsigned(">=", em, c(0x7C00)), special,
                   b.select(b.icmp_unsigned(">=", em, c(0x0400)), normal, tiny))
    return b.bitcast(b.or_(sign, out), cx.ty(F32))


def narrow(cx, x, storage: DType):
    """f32 -> storage elements (i16 bits), to nearest even; NaN -> the canonical NaN
    (semantics.narrow)."""
    b, i32 = cx.b, ir.IntType(32)
    c = lambda v: _k(cx, i32, v)
    i16 = ir.IntType(16) if cx.lanes == 1 else ir.VectorType(ir.IntType(16), cx.lanes)
    u = b.bitcast(x, cx.ty(I32))
    a = b.and_(u, c(0x7FFFFFFF))
    nan = b.icmp_unsigned(">", a, c(0x7F800000))
    sign = b.and_(b.lshr(u, c(16)), c(0x8000))
    if storage is DType.BF16:
        r = b.lshr(b.add(b.add(a, c(0x7FFF)), b.and_(b.lshr(a, c(16)), c(1))), c(16))
        return b.trunc(b.select(nan, c(0x7FC0), b.or_(sign, r)), i16)
    if cx.config.f16 == "hardware":                      # vcvtps2ph (round to nearest even), canonical NaN
        h = b.bitcast(b.fptrunc(x, _half(cx)), i16)
        return b.select(nan, b.trunc(c(0x7E00), i16), h)
    n = b.sub(a, c(0x38000000))
    normal = b.lshr(b.add(b.add(n, c(0xFFF)), b.and_(b.lshr(n, c(13)), c(1))), c(13))
    s = b.sub(c(126), b.lshr(a, c(23)))                      # below 2^-14: shift 126 - e, clamped 1..25
    s = b.select(b.icmp_signed("<", s, c(1)), c(1), b.select(b.icmp_signed(">", s, c(25)), c(25), s))
    m = b.or_(b.and_(a, c(0x7FFFFF)), c(0x800000))
    q = b.lshr(m, s)
    rem = b.and_(m, b.sub(b.shl(c(1), s), c(1)))
    half = b.shl(c(1), b.sub(s, c(1)))
    up = b.or_(b.icmp_unsigned(">", rem, half),
               b.and_(b.icmp_unsigned("==", rem, half), b.icmp_unsigned("!=", b.and_(q, c(1)), c(0))))
    tiny = b.add(q, b.zext(up, cx.ty(I32)))
    r = b.select(b.icmp_unsigned(">=", a, c(0x477FF000)), c(0x7C00),
                 b.select(b.icmp_unsigned(">=", a, c(0x38800000)), normal, tiny))
    return b.trunc(b.select(nan, c(0x7E00), b.or_(sign, r)), i16)


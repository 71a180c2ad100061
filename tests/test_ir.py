"""The kernel IR without the frontend: type rules (ir.result_dtype and the
constructors), the validator (spec.validate) on IR built directly, and
specialisation (specialize.specialize: Const binding and exact folding)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from cohort.refimpl import ir
from cohort.refimpl.errors import KernelError
from cohort.refimpl.interpreter import KernelRuntimeError, interpret
from cohort.refimpl.ir import (
    Assign,
    Collective,
    Expr,
    For,
    If,
    IRTypeError,
    Kernel,
    Loc,
    Op,
    Param,
    ParamKind,
    Private,
    PStore,
    Reduce,
    Store,
    boolean,
    f32,
    i32,
    result_dtype,
    u32,
    walk_expr,
    walk_stmts,
)
from cohort.refimpl.opdefs import BINARY
from cohort.refimpl.spec import MAX_PRIVATE, validate
from cohort.refimpl.specialize import specialize

NUMS = (f32, i32, u32)
ALL = (f32, i32, u32, boolean)
BUF, SCAL, CONST = ParamKind.BUFFER, ParamKind.SCALAR, ParamKind.CONST


def v(name, dt):
    return ir.var(name, dt)


def gid():
    return ir.builtin(Op.GLOBAL_ID)


def c(value, dt):
    return ir.const(value, dt)


# =====================================================================
# 1. type rules
# =====================================================================

ARITH = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX)
COMPARE = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)


@pytest.mark.parametrize("op", sorted(BINARY, key=lambda o: o.value), ids=lambda o: o.name)
@pytest.mark.parametrize("a,b", [(a, b) for a in ALL for b in ALL if a is not b], ids=repr)
def test_binary_operands_of_different_types_are_rejected(op, a, b):
    with pytest.raises(IRTypeError, match="different types"):
        result_dtype(op, (a, b))


@pytest.mark.parametrize("op", ARITH, ids=lambda o: o.name)
@pytest.mark.parametrize("dt", NUMS, ids=repr)
def test_arithmetic_keeps_the_operand_type(op, dt):
    assert result_dtype(op, (dt, dt)) is dt


@pytest.mark.parametrize("op", ARITH + (Op.MOD, Op.SHL, Op.SHR), ids=lambda o: o.name)
def test_arithmetic_on_bool_is_rejected(op):
    with pytest.raises(IRTypeError):
        result_dtype(op, (boolean, boolean))


@pytest.mark.parametrize("op", (Op.MOD, Op.SHL, Op.SHR), ids=lambda o: o.name)
def test_integer_only_ops(op):
    assert result_dtype(op, (i32, i32)) is i32
    assert result_dtype(op, (u32, u32)) is u32
    with pytest.raises(IRTypeError, match="integer"):
        result_dtype(op, (f32, f32))


@pytest.mark.parametrize("op", (Op.AND, Op.OR, Op.XOR), ids=lambda o: o.name)
def test_bitwise_and_bool_ops(op):
    assert result_dtype(op, (boolean, boolean)) is boolean
    assert result_dtype(op, (i32, i32)) is i32
    assert result_dtype(op, (u32, u32)) is u32
    with pytest.raises(IRTypeError, match="f32"):
        result_dtype(op, (f32, f32))


@pytest.mark.parametrize("op", COMPARE, ids=lambda o: o.name)
@pytest.mark.parametrize("dt", NUMS, ids=repr)
def test_comparisons_give_bool(op, dt):
    assert result_dtype(op, (dt, dt)) is boolean


def test_only_equality_compares_bools():
    assert result_dtype(Op.EQ, (boolean, boolean)) is boolean
    assert result_dtype(Op.NE, (boolean, boolean)) is boolean
    for op in (Op.LT, Op.LE, Op.GT, Op.GE):
        with pytest.raises(IRTypeError, match="bool"):
            result_dtype(op, (boolean, boolean))


def test_unary_rules():
    for dt in NUMS:
        assert result_dtype(Op.NEG, (dt,)) is dt
        assert result_dtype(Op.ABS, (dt,)) is dt
    for op in (Op.NEG, Op.ABS):
        with pytest.raises(IRTypeError):
            result_dtype(op, (boolean,))
    assert result_dtype(Op.NOT, (boolean,)) is boolean
    assert result_dtype(Op.NOT, (i32,)) is i32
    assert result_dtype(Op.NOT, (u32,)) is u32
    with pytest.raises(IRTypeError, match="f32"):
        result_dtype(Op.NOT, (f32,))
    for op in (Op.SQRT, Op.MATH):
        assert result_dtype(op, (f32,)) is f32
        for dt in (i32, u32, boolean):
            with pytest.raises(IRTypeError, match="needs f32"):
                result_dtype(op, (dt,))


def test_select_rules():
    for dt in ALL:
        assert result_dtype(Op.SELECT, (boolean, dt, dt)) is dt
    with pytest.raises(IRTypeError, match="condition must be bool"):
        result_dtype(Op.SELECT, (i32, f32, f32))
    with pytest.raises(IRTypeError, match="different types"):
        result_dtype(Op.SELECT, (boolean, f32, i32))


def test_cast_and_bitcast_rules():
    for src in ALL:
        for dst in ALL:
            assert result_dtype(Op.CAST, (src,), dst) is dst
    for src in NUMS:
        for dst in NUMS:
            assert result_dtype(Op.BITCAST, (src,), dst) is dst
    for src, dst in ((boolean, i32), (f32, boolean), (boolean, boolean)):
        with pytest.raises(IRTypeError, match="bitcast"):
            result_dtype(Op.BITCAST, (src,), dst)
    with pytest.raises(IRTypeError):
        result_dtype(Op.CAST, (f32,), None)


def test_leaf_builtin_and_memory_rules():
    for op in (Op.THREAD_ID, Op.BLOCK_ID, Op.GLOBAL_ID, Op.BLOCK_SIZE, Op.NUM_THREADS, Op.BUFLEN):
        assert result_dtype(op, ()) is i32
    assert result_dtype(Op.LOAD, (u32,), f32) is f32
    assert result_dtype(Op.PLOAD, (i32,), boolean) is boolean
    for bad in (f32, boolean):
        with pytest.raises(IRTypeError, match="index must be i32 or u32"):
            result_dtype(Op.LOAD, (bad,), f32)
    with pytest.raises(IRTypeError, match="needs a dtype"):
        result_dtype(Op.CONST, ())


# ------------------------------------------------------------ constructors

@pytest.mark.parametrize("dt", NUMS, ids=repr)
def test_weak_int_literal_adopts_the_other_operand_type(dt):
    x = v("x", dt)
    for e in (x + 1, 1 + x, x * 3, ir.binary(Op.MAX, 2, x), ir.binary(Op.LT, x, 0), x - 1):
        lit = [s for s in e.src if s.op is Op.CONST][0]
        assert lit.dtype is dt
        assert e.dtype is (boolean if e.op is Op.LT else dt)
    lit = (x + 1).src[1]
    assert lit.arg == 1 and type(lit.arg) is (float if dt is f32 else int)


def test_weak_float_literal_adopts_f32_and_is_rounded():
    e = v("x", f32) * 0.1
    assert e.src[1].dtype is f32 and e.src[1].arg == float(np.float32(0.1))


@pytest.mark.parametrize("dt", (i32, u32), ids=repr)
def test_float_literal_with_an_integer_is_an_error(dt):
    x = v("x", dt)
    with pytest.raises(IRTypeError, match="float literal"):
        x + 1.5
    with pytest.raises(IRTypeError, match="float literal"):
        1.0 * x
    with pytest.raises(IRTypeError, match="float literal"):
        ir.select(v("c", boolean), x, 2.0)


def test_literal_defaults_and_bools():
    assert ir.lift(3).dtype is i32
    assert ir.lift(3.0).dtype is f32
    assert ir.lift(True).dtype is boolean
    b = v("b", boolean)
    assert (b & True).dtype is boolean and (b & True).src[1].dtype is boolean
    with pytest.raises(IRTypeError):
        b & 1  # an int literal does not become a bool
    assert ir.binary(Op.ADD, 2, 3).dtype is i32


def test_mixing_typed_operands_is_an_error():
    with pytest.raises(IRTypeError, match="different types f32 and i32"):
        v("a", f32) + v("b", i32)
    with pytest.raises(IRTypeError, match="different types i32 and u32"):
        v("a", i32) < v("b", u32)


@pytest.mark.parametrize("value,dt,ok", [
    (2 ** 31 - 1, i32, True), (-(2 ** 31), i32, True), (2 ** 31, i32, False), (-(2 ** 31) - 1, i32, False),
    (0, u32, True), (2 ** 32 - 1, u32, True), (2 ** 32, u32, False), (-1, u32, False),
])
def test_integer_literal_range(value, dt, ok):
    if ok:
        assert ir.const(value, dt).arg == value
    else:
        with pytest.raises(IRTypeError, match="does not fit"):
            ir.const(value, dt)


def test_literal_range_through_weak_typing():
    with pytest.raises(IRTypeError, match="does not fit in i32"):
        v("x", i32) + 2 ** 31
    assert (v("x", u32) + 2 ** 31).src[1].arg == 2 ** 31      # fits in u32
    with pytest.raises(IRTypeError, match="does not fit in u32"):
        v("x", u32) + (-1)


def test_const_stores_the_exact_value_of_its_type():
    assert ir.const(16777217, f32).arg == 16777216.0              # round to nearest even
    assert ir.const(0.1, f32).arg == float(np.float32(0.1))
    assert ir.const(3.0, i32).arg == 3 and type(ir.const(3.0, i32).arg) is int
    assert ir.const(1, boolean).arg is True
    with pytest.raises(IRTypeError, match="not an integer"):
        ir.const(2.5, i32)                                        # never truncated silently


def test_cast_constructor():
    x = v("x", f32)
    assert ir.cast(x, f32) is x
    e = ir.cast(x, i32)
    assert e.op is Op.CAST and e.dtype is i32 and e.src == (x,)
    # literals are converted at build time exactly as CAST would convert them
    assert ir.cast(ir.const(-2.7, f32), i32).arg == -2
    assert ir.cast(ir.const(float("nan"), f32), i32).arg == 0
    assert ir.cast(ir.const(1e10, f32), i32).arg == 2 ** 31 - 1
    assert ir.cast(ir.const(-1e10, f32), u32).arg == 0
    assert ir.cast(ir.const(-1, i32), u32).arg == 2 ** 32 - 1
    assert ir.cast(ir.const(16777217, i32), f32).arg == 16777216.0
    assert ir.cast(ir.const(-0.0, f32), boolean).arg is False
    assert ir.cast(ir.const(float("nan"), f32), boolean).arg is True
    assert ir.cast(True, f32).arg == 1.0


def test_bitcast_constructor():
    x = v("x", f32)
    assert ir.bitcast(x, f32) is x
    e = ir.bitcast(x, u32)
    assert e.op is Op.BITCAST and e.dtype is u32
    with pytest.raises(IRTypeError, match="bitcast"):
        ir.bitcast(v("b", boolean), i32)
    with pytest.raises(IRTypeError, match="bitcast"):
        ir.bitcast(x, boolean)


def test_select_and_math_constructors():
    cnd = v("c", boolean)
    s = ir.select(cnd, 1, v("y", f32))
    assert s.dtype is f32 and s.src[1].dtype is f32
    with pytest.raises(IRTypeError, match="condition must be bool"):
        ir.select(1, 2, 3)
    with pytest.raises(IRTypeError, match="different types"):
        ir.select(cnd, v("a", f32), v("b", i32))
    assert ir.math("exp", 1.0).dtype is f32
    with pytest.raises(IRTypeError, match="needs f32"):
        ir.math("exp", v("i", i32))
    with pytest.raises(IRTypeError):
        ir.unary(Op.NEG, True)
    with pytest.raises(IRTypeError, match="index"):
        ir.load("x", v("f", f32), f32)


def test_walkers():
    a = v("a", f32)
    shared = a * a
    e = shared + shared
    nodes = list(walk_expr(e))
    assert nodes[-1] is e and len(nodes) == 3                     # the shared node once
    body = (If(v("c", boolean), (Assign("z", a),), (For("j", c(0, i32), c(4, i32), c(1, i32),
                                                         (Assign("w", a),)),)),)
    kinds = [type(s).__name__ for s in walk_stmts(body)]
    assert kinds == ["If", "Assign", "For", "Assign"]


# =====================================================================
# 2. the validator
# =====================================================================

X, Y = Param("x", BUF, f32), Param("y", BUF, f32)
YI, YU, YB = Param("yi", BUF, i32), Param("yu", BUF, u32), Param("yb", BUF, boolean)
N, S, C = Param("n", SCAL, i32), Param("s", SCAL, f32), Param("c", CONST, i32)
PARAMS = (X, Y, YI, YU, YB, N, S, C)


def L(line):
    return Loc(line, f"statement at {line}")


def K(*body, params=PARAMS, name="vk", block=32):
    return Kernel(name, tuple(params), tuple(body), block)


def X_AT(idx):
    return ir.load("x", idx, f32)


def BAD(*body, **kw):
    """A kernel whose offending statement has loc L(99)."""
    return K(*body, **kw)


def expect_invalid(k, pattern, line=99, specialised=False):
    with pytest.raises(KernelError) as ei:
        validate(k, specialised)
    e = ei.value
    assert e.kernel == k.name
    assert str(e).startswith(f"kernel {k.name}")
    assert re.search(pattern, e.message), e.message
    if line is None:
        assert e.loc is None
    else:
        assert e.loc is not None and e.loc.line == line, (e.loc, e.message)
        assert f"line {line}: `statement at {line}`" in str(e)
    return e


def _cond():
    return gid() < 10


# each case: (id, kernel, message pattern, line of the offending statement)
INVALID = [
    ("undefined-variable",
     BAD(Store("y", gid(), v("a", f32), L(99))), r"variable a is never assigned"),
    ("assigned-in-one-branch-then-read",
     BAD(If(_cond(), (Assign("a", c(1.0, f32), L(2)),), (), L(1)),
         Store("y", gid(), v("a", f32), L(99))), r"variable a may be used before it is assigned"),
    ("assigned-in-else-only-then-read",
     BAD(If(_cond(), (), (Assign("a", c(1.0, f32), L(2)),), L(1)),
         Assign("b", v("a", f32) + 1, L(99))), r"variable a may be used before"),
    ("assigned-in-loop-then-read",
     BAD(For("j", c(0, i32), ir.param("n", i32), c(1, i32), (Assign("a", X_AT(v("j", i32)), L(2)),), L(1)),
         Store("y", gid(), v("a", f32), L(99))), r"variable a may be used before"),
    ("loop-variable-read-after-loop",
     BAD(For("j", c(0, i32), c(4, i32), c(1, i32), (), L(1)),
         Store("yi", gid(), v("j", i32), L(99))), r"variable j may be used before"),
    ("assigned-in-nested-if-inside-both-branches-only-partly",
     BAD(If(_cond(), (If(gid() > 3, (Assign("a", c(1, i32), L(3)),), (), L(2)),),
            (Assign("a", c(2, i32), L(4)),), L(1)),
         Store("yi", gid(), v("a", i32), L(99))), r"variable a may be used before"),
    ("read-in-own-definition",
     BAD(Assign("a", v("a", f32) + 1, L(99))), r"variable a is never assigned"),
    ("type-change",
     BAD(Assign("a", c(1.0, f32), L(1)), Assign("a", c(1, i32), L(99))),
     r"variable a is f32 but is assigned i32"),
    ("type-change-in-branch",
     BAD(Assign("a", c(1, u32), L(1)), If(_cond(), (Assign("a", c(1, i32), L(99)),), (), L(2))),
     r"variable a is u32 but is assigned i32"),
    ("type-change-by-collective",
     BAD(Assign("a", c(1, i32), L(1)), Collective("a", Reduce.SUM, c(1.0, f32), L(99))),
     r"variable a is i32 but is assigned f32"),
    ("variable-read-with-wrong-type",
     BAD(Assign("a", c(1.0, f32), L(1)), Store("yi", gid(), v("a", i32), L(99))),
     r"variable a is f32, read as i32"),
    ("store-to-scalar-param",
     BAD(Store("n", gid(), c(1, i32), L(99))), r"n is not a buffer parameter"),
    ("store-to-const-param",
     BAD(Store("c", gid(), c(1, i32), L(99))), r"c is not a buffer parameter"),
    ("store-to-unknown-buffer",
     BAD(Store("nosuch", gid(), c(1.0, f32), L(99))), r"nosuch is not a buffer parameter"),
    ("store-type-mismatch",
     BAD(Store("y", gid(), c(1, i32), L(99))), r"storing i32 into buffer y of f32"),
    ("store-type-mismatch-u32",
     BAD(Store("yu", gid(), gid(), L(99))), r"storing i32 into buffer yu of u32"),
    ("store-float-index",
     BAD(Store("y", c(1.0, f32), c(1.0, f32), L(99))), r"index must be i32 or u32, got f32"),
    ("non-bool-if-condition",
     BAD(If(gid(), (), (), L(99))), r"if condition must be bool, got i32"),
    ("non-constant-loop-step-thread",
     BAD(For("j", c(0, i32), c(8, i32), ir.builtin(Op.THREAD_ID) + 1, (), L(99))),
     r"step must be a compile-time constant"),
    ("non-constant-loop-step-scalar",
     BAD(For("j", c(0, i32), c(8, i32), ir.param("n", i32), (), L(99))),
     r"step must be a compile-time constant"),
    ("non-constant-loop-step-variable",
     BAD(Assign("k", c(1, i32), L(1)), For("j", c(0, i32), c(8, i32), v("k", i32), (), L(99))),
     r"step must be a compile-time constant"),
    ("f32-loop-bound",
     BAD(For("j", c(0, i32), c(8.0, f32), c(1, i32), (), L(99))), r"range\(\) bounds and step must be i32"),
    ("loop-variable-assigned-in-loop",
     BAD(For("j", c(0, i32), c(8, i32), c(1, i32), (Assign("j", c(2, i32), L(99)),), L(1))),
     r"cannot assign to loop variable j"),
    ("loop-variable-assigned-in-if-in-loop",
     BAD(For("j", c(0, i32), c(8, i32), c(1, i32),
             (If(_cond(), (Assign("j", c(2, i32), L(99)),), (), L(2)),), L(1))),
     r"cannot assign to loop variable j"),
    ("outer-loop-variable-assigned-in-inner-loop",
     BAD(For("j", c(0, i32), c(8, i32), c(1, i32),
             (For("k", c(0, i32), c(2, i32), c(1, i32), (Assign("j", c(2, i32), L(99)),), L(2)),), L(1))),
     r"cannot assign to loop variable j"),
    ("loop-variable-shadows-variable",
     BAD(Assign("j", c(0, i32), L(1)), For("j", c(0, i32), c(8, i32), c(1, i32), (), L(99))),
     r"loop variable j shadows"),
    ("nested-loops-same-variable",
     BAD(For("j", c(0, i32), c(8, i32), c(1, i32), (For("j", c(0, i32), c(8, i32), c(1, i32), (), L(99)),),
             L(1))), r"loop variable j shadows"),
    ("loop-variable-named-like-a-param",
     BAD(For("n", c(0, i32), c(8, i32), c(1, i32), (), L(99))), r"loop variable n shadows"),
    ("collective-inside-if",
     BAD(If(_cond(), (Collective("t", Reduce.SUM, c(1.0, f32), L(99)),), (), L(1))),
     r"block_sum\(\) is only allowed at the top level"),
    ("collective-inside-else",
     BAD(If(_cond(), (), (Collective("t", Reduce.MIN, c(1.0, f32), L(99)),), L(1))),
     r"block_min\(\) is only allowed at the top level"),
    ("collective-inside-for",
     BAD(For("j", c(0, i32), c(8, i32), c(1, i32), (Collective("t", Reduce.MAX, c(1, i32), L(99)),), L(1))),
     r"block_max\(\) is only allowed at the top level"),
    ("collective-of-bool",
     BAD(Collective("t", Reduce.SUM, c(True, boolean), L(99))), r"needs a number, got bool"),
    ("private-inside-if",
     BAD(If(_cond(), (Private("p", f32, c(4, i32), L(99)),), (), L(1))),
     r"private arrays must be declared at the top level"),
    ("private-inside-for",
     BAD(For("j", c(0, i32), c(8, i32), c(1, i32), (Private("p", f32, c(4, i32), L(99)),), L(1))),
     r"private arrays must be declared at the top level"),
    ("private-size-scalar-param",
     BAD(Private("p", f32, ir.param("n", i32), L(99))), r"private array size must be a compile-time integer"),
    ("private-size-thread-id",
     BAD(Private("p", f32, ir.builtin(Op.THREAD_ID), L(99))), r"compile-time integer"),
    ("private-size-f32",
     BAD(Private("p", f32, c(4.0, f32), L(99))), r"compile-time integer"),
    ("private-reuses-variable-name",
     BAD(Assign("p", c(0, i32), L(1)), Private("p", f32, c(4, i32), L(99))), r"private array p reuses a name"),
    ("private-reuses-param-name",
     BAD(Private("x", f32, c(4, i32), L(99))), r"private array x reuses a name"),
    ("private-declared-twice",
     BAD(Private("p", f32, c(4, i32), L(1)), Private("p", f32, c(4, i32), L(99))), r"reuses a name"),
    ("private-bad-dtype",
     BAD(Private("p", "f32", c(4, i32), L(99))), r"bad private dtype"),
    ("assign-to-private",
     BAD(Private("p", f32, c(4, i32), L(1)), Assign("p", c(1.0, f32), L(99))),
     r"cannot assign to private array p"),
    ("pstore-to-undeclared-private",
     BAD(PStore("p", c(0, i32), c(1.0, f32), L(99))), r"p is not a private array"),
    ("pstore-type-mismatch",
     BAD(Private("p", f32, c(4, i32), L(1)), PStore("p", c(0, i32), c(1, i32), L(99))),
     r"storing i32 into private p of f32"),
    ("pload-undeclared",
     BAD(Assign("a", ir.pload("p", c(0, i32), f32), L(99))), r"p is not a private array"),
    ("pload-wrong-dtype",
     BAD(Private("p", f32, c(4, i32), L(1)), Assign("a", ir.pload("p", c(0, i32), i32), L(99))),
     r"private p is f32"),
    ("unknown-math-function",
     BAD(Assign("a", ir.math("nosuch", c(1.0, f32)), L(99))), r"unknown math function nosuch"),
    ("load-wrong-buffer-dtype",
     BAD(Assign("a", ir.load("x", gid(), i32), L(99))), r"buffer x is f32, loaded as i32"),
    ("load-from-scalar",
     BAD(Assign("a", ir.load("n", gid(), i32), L(99))), r"n is not a buffer parameter"),
    ("buflen-of-scalar",
     BAD(Assign("a", ir.builtin(Op.BUFLEN, "s"), L(99))), r"s is not a buffer parameter"),
    ("param-node-naming-a-buffer",
     BAD(Assign("a", ir.param("x", f32), L(99))), r"x is not a scalar or constant parameter"),
    ("param-node-wrong-dtype",
     BAD(Assign("a", ir.param("s", i32), L(99))), r"parameter s is f32, read as i32"),
    ("assign-to-param",
     BAD(Assign("s", c(1.0, f32), L(99))), r"cannot assign to parameter s"),
    ("collective-to-param",
     BAD(Collective("n", Reduce.SUM, c(1, i32), L(99))), r"cannot assign to parameter n"),
    ("node-dtype-disagrees-with-rule",
     BAD(Assign("a", Expr(Op.ADD, i32, (c(1.0, f32), c(2.0, f32))), L(99))), r"add yields f32, node says i32"),
    ("node-mixing-types",
     BAD(Assign("a", Expr(Op.MUL, f32, (c(1.0, f32), c(2, i32))), L(99))), r"different types"),
    ("node-wrong-arity",
     BAD(Assign("a", Expr(Op.NEG, f32, (), None), L(99))), r"neg has 0 operands"),
    ("load-without-index",
     BAD(Assign("a", Expr(Op.LOAD, f32, (), "x"), L(99))), r"load has 0 operands"),
    ("binary-with-three-operands",
     BAD(Assign("a", Expr(Op.ADD, f32, (c(1.0, f32),) * 3), L(99))), r"add has 3 operands"),
    ("math-placeholder-outside-mathlib",
     BAD(Assign("a", Expr(Op.ARG, f32, (), 0), L(99))), r"math placeholder"),
    ("i32-literal-out-of-range",
     BAD(Assign("a", Expr(Op.CONST, i32, (), 2 ** 31), L(99))), r"literal 2147483648 is not a valid i32"),
    ("u32-literal-negative",
     BAD(Assign("a", Expr(Op.CONST, u32, (), -1), L(99))), r"literal -1 is not a valid u32"),
    ("f32-literal-not-representable",
     BAD(Assign("a", Expr(Op.CONST, f32, (), 0.1), L(99))), r"literal 0.1 is not a valid f32"),
    ("f32-literal-overflowing",
     BAD(Assign("a", Expr(Op.CONST, f32, (), 1e39), L(99))), r"literal 1e\+39 is not a valid f32"),
    ("f32-literal-stored-as-int",
     BAD(Assign("a", Expr(Op.CONST, f32, (), 1), L(99))), r"literal 1 is not a valid f32"),
    ("not-an-expression",
     BAD(Assign("a", 3, L(99))), r"expected an expression"),
]


@pytest.mark.parametrize("k,pattern", [pytest.param(k, p, id=i) for i, k, p in INVALID])
def test_validator_rejects_and_names_kernel_and_statement(k, pattern):
    expect_invalid(k, pattern)


@pytest.mark.parametrize("k,pattern", [
    pytest.param(K(block=24), r"block must be a power of two from 1 to 1024, got 24", id="block-24"),
    pytest.param(K(block=0), r"block must be a power of two from 1 to 1024, got 0", id="block-0"),
    pytest.param(K(block=2048), r"block must be a power of two from 1 to 1024, got 2048", id="block-2048"),
    pytest.param(K(block=-32), r"power of two", id="block-negative"),
    pytest.param(K(params=(X, Y, Param("x", SCAL, f32))), r"parameter x appears twice", id="duplicate-param"),
    pytest.param(K(params=(X, X)), r"parameter x appears twice", id="duplicate-buffer"),
    pytest.param(K(params=(Param("c", CONST, f32),)), r"Const parameter c must be int", id="const-f32"),
    pytest.param(K(params=(Param("b", SCAL, boolean),)), r"scalar parameter b must be f32, i32 or u32",
                 id="bool-scalar"),
])
def test_validator_rejects_kernel_level_problems(k, pattern):
    expect_invalid(k, pattern, line=None)


def test_specialised_validation_requires_bound_constants():
    k = K(Store("yi", gid(), ir.param("c", i32), L(1)))
    validate(k)
    expect_invalid(k, r"Const parameter\(s\) \['c'\] are not bound", line=None, specialised=True)


def test_validator_names_the_statement_of_ir_built_without_locations():
    """IR built in Python has no source line: the message shows the statement's text."""
    k = K(Assign("a", c(1.0, f32)), Store("y", gid(), v("b", f32)), name="noloc")
    with pytest.raises(KernelError) as ei:
        validate(k)
    msg = str(ei.value)
    assert msg.startswith("kernel noloc")
    assert "`y[global_id()] = b`" in msg and "variable b is never assigned" in msg
    k = K(If(gid(), ()), name="noloc2")
    with pytest.raises(KernelError, match=r"kernel noloc2, statement: `if global_id\(\):`: if condition"):
        validate(k)


def test_validator_error_inside_nested_bodies_names_the_inner_statement():
    k = K(If(_cond(), (For("j", c(0, i32), c(3, i32), c(1, i32),
                           (Store("y", v("j", i32), c(1, i32), L(99)),), L(2)),), (), L(1)))
    expect_invalid(k, "storing i32")
    # and after a nested body the If itself is named again
    k = K(If(_cond(), (Assign("a", c(1, i32), L(2)),), (), L(1)),
          If(gid(), (), (), L(99)))
    expect_invalid(k, "if condition")


# ------------------------------------------------------------ valid kernels

def _valid_kernels():
    j, t = v("j", i32), ir.builtin(Op.THREAD_ID)
    yield "both-branches-assign", K(
        If(_cond(), (Assign("a", c(1.0, f32)),), (Assign("a", c(2.0, f32)),)),
        Store("y", gid(), v("a", f32)))
    yield "assigned-before-if-and-in-one-branch", K(
        Assign("a", c(0.0, f32)),
        If(_cond(), (Assign("a", X_AT(gid())),)),
        Store("y", gid(), v("a", f32)))
    yield "elif-chain-all-assign", K(
        If(gid() < 3, (Assign("k", c(0, i32)),),
           (If(gid() < 6, (Assign("k", c(1, i32)),), (Assign("k", c(2, i32)),)),)),
        Store("yi", gid(), v("k", i32)))
    yield "loop-accumulate", K(
        Assign("acc", c(0.0, f32)),
        For("j", t, ir.param("c", i32), ir.builtin(Op.BLOCK_SIZE),
            (Assign("acc", v("acc", f32) + X_AT(j)),)),
        Collective("tot", Reduce.SUM, v("acc", f32)),
        Store("y", gid(), v("tot", f32)))
    yield "loop-variable-reused-by-sequential-loops", K(
        For("j", c(0, i32), c(4, i32), c(1, i32), (Store("yi", j, j),)),
        For("j", c(4, i32), c(8, i32), c(2, i32), (Store("yi", j, j),)),
        Assign("j", c(3, i32)),
        Store("yi", c(9, i32), v("j", i32)))
    yield "nested-loops-negative-step", K(
        For("j", c(8, i32), c(0, i32), c(-1, i32),
            (For("k", c(0, i32), j, ir.param("c", i32) * 2 + 1,
                 (If(ir.binary(Op.EQ, v("k", i32), j), (Store("yi", v("k", i32), j),)),)),)))
    yield "private-arrays", K(
        Private("p", f32, ir.param("c", i32) + 1),
        Private("q", boolean, c(3, i32)),
        For("j", c(0, i32), c(3, i32), c(1, i32),
            (PStore("p", j, ir.cast(j, f32)), PStore("q", j, j > 1))),
        Store("y", gid(), ir.pload("p", c(2, i32), f32)),
        Store("yb", gid(), ir.pload("q", c(1, i32), boolean)))
    yield "collectives-and-phases", K(
        Collective("m", Reduce.MAX, X_AT(gid())),
        Collective("mi", Reduce.MIN, gid()),
        Collective("su", Reduce.SUM, ir.cast(gid(), u32)),
        Store("y", gid(), v("m", f32)), Store("yi", gid(), v("mi", i32)), Store("yu", gid(), v("su", u32)))
    yield "all-expression-kinds", K(
        Assign("a", X_AT(ir.binary(Op.MOD, gid(), c(4, i32)))),
        Assign("b", ir.bitcast(v("a", f32), u32) >> 3),
        Assign("e", ir.math("exp", v("a", f32)) + ir.math("sigmoid", ir.param("s", f32))),
        Assign("f", ir.select(ir.unary(Op.NOT, v("a", f32) > 0.0), ir.unary(Op.NEG, v("a", f32)),
                              ir.unary(Op.SQRT, ir.unary(Op.ABS, v("a", f32))))),
        Assign("g", ir.binary(Op.MIN, ir.builtin(Op.NUM_THREADS), ir.builtin(Op.BUFLEN, "x"))),
        Assign("h", ir.cast(v("b", u32) ^ 5, boolean)),
        Assign("i_", ir.unary(Op.NOT, ir.param("n", i32)) << 1),
        Store("y", gid(), v("e", f32) + v("f", f32)),
        Store("yb", gid(), v("h", boolean) | (ir.builtin(Op.BLOCK_ID) != v("g", i32))))
    yield "empty-kernel", K()
    yield "block-1", K(Store("yi", gid(), ir.builtin(Op.BLOCK_SIZE)), block=1)


VALID = list(_valid_kernels())


@pytest.mark.parametrize("k", [pytest.param(k, id=i) for i, k in VALID])
def test_valid_kernels_validate(k):
    assert validate(k) is k


def test_valid_kernel_runs_and_means_what_it_says():
    """One of the valid kernels, interpreted: the validator accepted a meaningful program."""
    k = dict(VALID)["loop-accumulate"]
    x = np.arange(64, dtype=np.float32)
    bufs = dict(x=x, y=np.zeros(32, np.float32), yi=np.zeros(1, np.int32), yu=np.zeros(1, np.uint32),
                yb=np.zeros(1, bool), n=0, s=0.0)
    interpret(k, 32, bufs, {"c": 64})
    assert np.all(bufs["y"] == np.float32(x.sum()))
    interpret(k, 32, bufs, {"c": 32})
    assert np.all(bufs["y"] == np.float32(x[:32].sum()))


# =====================================================================
# 5. specialisation
# =====================================================================

def _spec_kernel(name="sk", body=None, params=(YI, C)):
    body = body or (Store("yi", gid(), ir.param("c", i32) * 2 + 1, L(1)),)
    return Kernel(name, params, tuple(body))


def _params_in(k):
    return {n.arg for s in walk_stmts(k.body) for e in ir.stmt_exprs(s) for n in walk_expr(e)
            if n.op is Op.PARAM}


def test_specialize_binds_consts_and_folds():
    k = _spec_kernel()
    sk = specialize(k, {"c": 20})
    assert sk.consts == (("c", 20),)
    assert [p.name for p in sk.params] == ["yi"]
    assert sk.const_params == ()
    assert "c" not in _params_in(sk)
    val = sk.body[0].value
    assert val.op is Op.CONST and val.dtype is i32 and val.arg == 41
    assert k.body[0].value.op is Op.ADD      # the original is untouched
    assert sk.body[0].loc == L(1)            # locations survive


def test_specialize_leaves_non_constant_parts_alone():
    k = _spec_kernel(body=(Store("yi", gid(), gid() + ir.param("c", i32) * 3),))
    sk = specialize(k, {"c": 5})
    e = sk.body[0].value
    assert e.op is Op.ADD and e.src[0].op is Op.GLOBAL_ID and e.src[1].op is Op.CONST and e.src[1].arg == 15


def test_specialize_folds_block_size_steps_and_private_sizes():
    k = Kernel("sk", (YI, C), (
        Private("p", i32, ir.param("c", i32) * 2),
        For("j", ir.builtin(Op.THREAD_ID), c(64, i32), ir.builtin(Op.BLOCK_SIZE) * ir.param("c", i32),
            (PStore("p", c(0, i32), v("j", i32)),)),
        Store("yi", gid(), ir.pload("p", c(0, i32), i32))), 16)
    sk = specialize(k, {"c": 3})
    assert sk.body[0].size.op is Op.CONST and sk.body[0].size.arg == 6
    assert sk.body[1].step.op is Op.CONST and sk.body[1].step.arg == 48
    out = np.zeros(16, np.int32)
    interpret(k, 16, {"yi": out}, {"c": 3})
    assert np.array_equal(out, np.arange(16, dtype=np.int32) + 48)   # j = t, t + 48: two trips


def test_specialize_folds_select_on_a_constant_condition():
    k = _spec_kernel(body=(Store("yi", gid(), ir.select(ir.param("c", i32) > 0, gid(), ir.binary(Op.DIV, c(7, i32), c(0, i32)))),))
    sk = specialize(k, {"c": 1})
    assert sk.body[0].value.op is Op.GLOBAL_ID          # the dead branch (a division by zero) is gone


@pytest.mark.parametrize("consts,pattern", [
    ({}, r"missing constant\(s\) \['c'\]"),
    ({"c": 1, "zz": 2}, r"unknown constant\(s\) \['zz'\]"),
    ({"zz": 2}, r"unknown constant\(s\) \['zz'\]"),
    ({"c": 3.0}, r"constant c must be an int, got 3.0"),
    ({"c": "3"}, r"constant c must be an int"),
    ({"c": True}, r"constant c must be an int, got True"),
    ({"c": np.bool_(True)}, r"constant c must be an int"),
    ({"c": None}, r"constant c must be an int"),
    ({"c": 2 ** 31}, r"constant c=2147483648 does not fit in i32"),
    ({"c": -(2 ** 31) - 1}, r"constant c=-2147483649 does not fit in i32"),
])
def test_specialize_argument_errors(consts, pattern):
    k = _spec_kernel(name="argk")
    with pytest.raises(KernelError, match=r"^kernel argk: " + pattern):
        specialize(k, consts)


def test_specialize_accepts_numpy_integers_and_extremes():
    k = _spec_kernel()
    assert specialize(k, {"c": np.int64(7)}).consts == (("c", 7),)
    assert type(specialize(k, {"c": np.int16(7)}).consts[0][1]) is int
    sk = specialize(k, {"c": 2 ** 31 - 1})
    assert sk.body[0].value.arg == -1                  # (2**31 - 1) * 2 + 1 wraps around in i32


def test_specialize_without_consts_and_twice():
    k = Kernel("nk", (YI,), (Store("yi", gid(), ir.builtin(Op.BLOCK_SIZE)),), 8)
    sk = specialize(k, {})
    assert sk.consts == () and sk.body[0].value.op is Op.CONST and sk.body[0].value.arg == 8
    with pytest.raises(KernelError, match=r"unknown constant\(s\) \['c'\]; the kernel's constants are none"):
        specialize(k, {"c": 1})
    once = specialize(_spec_kernel(), {"c": 2})
    assert specialize(once, {}) is once
    with pytest.raises(KernelError, match="already specialised"):
        specialize(once, {"c": 2})


@pytest.mark.parametrize("value,pattern", [(0, r"private array size must be 1\.\.65536, got 0"),
                                           (MAX_PRIVATE + 1, r"must be 1\.\.65536, got 65537"),
                                           (-3, r"got -3")])
def test_specialize_checks_private_size(value, pattern):
    k = Kernel("pk", (YI, C), (Private("p", f32, ir.param("c", i32), L(7)),))
    with pytest.raises(KernelError, match=pattern) as ei:
        specialize(k, {"c": value})
    assert ei.value.loc == L(7)
    specialize(k, {"c": MAX_PRIVATE})


def test_specialize_checks_loop_step_is_nonzero():
    k = Kernel("stepk", (YI, C), (For("j", c(0, i32), c(4, i32), ir.param("c", i32) - 1, (), L(5)),))
    with pytest.raises(KernelError, match="nonzero") as ei:
        specialize(k, {"c": 1})
    assert ei.value.loc == L(5)
    assert specialize(k, {"c": 0}).body[0].step.arg == -1


def test_specialize_validates_its_input():
    k = Kernel("badk", (YI, C), (Store("yi", gid(), v("nope", i32), L(3)),))
    with pytest.raises(KernelError, match="nope is never assigned"):
        specialize(k, {"c": 1})


def test_constant_division_by_zero_is_left_for_run_time():
    body = (If(gid() > 1000, (Store("yi", gid(), ir.binary(Op.DIV, c(1, i32), ir.param("c", i32))),)),
            Store("yi", gid(), c(1, i32) + 0 * gid()))
    k = _spec_kernel(name="dz", body=body)
    sk = specialize(k, {"c": 0})
    assert sk.body[0].then[0].value.op is Op.DIV               # not folded, not an error
    out = np.zeros(8, np.int32)
    interpret(k, 8, {"yi": out}, {"c": 0})                     # the branch is never taken
    assert np.all(out == 1)
    k2 = _spec_kernel(name="dz2", body=(Store("yi", gid(), ir.binary(Op.DIV, c(1, i32), ir.param("c", i32)), L(4)),))
    with pytest.raises(KernelRuntimeError, match=r"kernel dz2, line 4.*division by zero"):
        interpret(k2, 8, {"yi": out}, {"c": 0})


# Folding must never change a bit: every expression below is evaluated once
# folded at specialisation (c a Const) and once by the interpreter (c a scalar).
FOLD_CASES = {
    "f32-rsqrt": lambda p: 1.0 / ir.unary(Op.SQRT, ir.cast(p, f32) * 0.1 + 3.0),
    "f32-div-sub": lambda p: ir.cast(p, f32) / 3.0 - 0.1,
    "f32-tiny": lambda p: ir.cast(p, f32) * 1e-30 * 1e-15,                        # subnormal kept
    "f32-big": lambda p: ir.cast(p, f32) * 3e38 * 10.0,                            # overflow to inf
    "f32-min-nan": lambda p: ir.binary(Op.MIN, ir.cast(p, f32) / 0.0 * 0.0, 2.0),
    "f32-max-nan": lambda p: ir.binary(Op.MAX, c(2.0, f32), ir.cast(p, f32) * 0.0 / 0.0),
    "f32-neg-zero": lambda p: ir.unary(Op.NEG, ir.cast(p, f32) * 0.0),
    "f32-abs": lambda p: ir.unary(Op.ABS, ir.cast(p, f32) - 0.5),
    "f32-bitcast": lambda p: ir.bitcast(ir.cast(p, u32) * 2654435761, f32),
    "f32-from-u32": lambda p: ir.cast(ir.cast(p, u32) * 3 + 7, f32),
    "i32-div": lambda p: ir.binary(Op.DIV, p * 7 - 100, c(3, i32)),
    "i32-div-neg": lambda p: ir.binary(Op.DIV, p * 7 - 100, c(-3, i32)),
    "i32-mod": lambda p: ir.binary(Op.MOD, p * 7 - 100, c(3, i32)),
    "i32-mod-neg": lambda p: ir.binary(Op.MOD, p * 7 - 100, c(-3, i32)),
    "i32-wrap": lambda p: p * 123456789 + 2147483647,
    "i32-shl": lambda p: p << 28,
    "i32-shr": lambda p: ir.unary(Op.NEG, p) >> 2,
    "i32-not": lambda p: ir.unary(Op.NOT, p) ^ 0x5555,
    "i32-abs-min": lambda p: ir.unary(Op.ABS, p | c(-(2 ** 31), i32)),
    "i32-sat": lambda p: ir.cast(ir.cast(p, f32) * 1e9, i32),
    "i32-trunc": lambda p: ir.cast(ir.cast(p, f32) / 7.0, i32),
    "i32-block": lambda p: p * ir.builtin(Op.BLOCK_SIZE) - ir.builtin(Op.BLOCK_SIZE),
    "i32-minmax": lambda p: ir.binary(Op.MAX, ir.binary(Op.MIN, p, c(1000, i32)), c(-1000, i32)),
    "u32-wrap": lambda p: ir.cast(p, u32) * 3000000000 + 5,
    "u32-shr": lambda p: ir.cast(p, u32) >> 3,
    "u32-div": lambda p: ir.binary(Op.DIV, ir.cast(p, u32), c(7, u32)),
    "u32-mod": lambda p: ir.binary(Op.MOD, ir.cast(p, u32), c(7, u32)),
    "u32-from-f32": lambda p: ir.cast(ir.cast(p, f32) * -0.5, u32),
    "u32-bitcast": lambda p: ir.bitcast(ir.cast(p, f32) / 3.0, u32),
    "bool-lt": lambda p: ir.cast(p, f32) / 3.0 < 0.5,
    "bool-ne-nan": lambda p: ir.binary(Op.NE, ir.cast(p, f32) * 0.0, ir.cast(p, f32) * 0.0),
    "bool-eq": lambda p: ir.binary(Op.EQ, ir.binary(Op.EQ, ir.binary(Op.MOD, p, c(2, i32)), c(0, i32)),
                                   c(True, boolean)),
    "bool-not-xor": lambda p: ir.unary(Op.NOT, p > 0) ^ (p < 100),
    "bool-cast": lambda p: ir.cast(ir.cast(p, f32) - 1.0, boolean),
    "select": lambda p: ir.select(p > 3, ir.cast(p, f32) * 0.3, ir.cast(p, f32) / 0.3),
}
FOLD_VALUES = (0, 1, 7, -5, 123456, -(2 ** 31), 2 ** 31 - 1)


@pytest.mark.parametrize("name", FOLD_CASES)
def test_folding_is_bit_exact(name):
    build = FOLD_CASES[name]
    expr = build(ir.param("c", i32))
    dt = expr.dtype
    out = Param("out", BUF, dt)
    k_const = Kernel("fold_" + name, (out, C), (Store("out", gid(), expr),))
    k_scalar = Kernel("fold_" + name, (out, N), (Store("out", gid(), build(ir.param("n", i32))),))
    validate(k_const)
    for value in FOLD_VALUES:
        sk = specialize(k_const, {"c": value})
        folded = sk.body[0].value
        assert folded.op is Op.CONST, (name, value, folded.op)
        if dt is f32:   # the literal is a float32 value, not a float64 one rounded later
            assert np.isnan(folded.arg) or float(np.float32(folded.arg)) == folded.arg, (name, value)
        validate(sk, specialised=True)
        a = np.zeros(1, dt.np)
        b = np.zeros(1, dt.np)
        interpret(k_const, 1, {"out": a}, {"c": value})
        interpret(k_scalar, 1, {"out": b, "n": value})
        assert np.asarray(folded.arg, dt.np) == a[0] or (dt is f32 and np.isnan(a[0]) and np.isnan(folded.arg))
        if dt is f32:
            same = a.view(np.uint32)[0] == b.view(np.uint32)[0] or (np.isnan(a[0]) and np.isnan(b[0]))
            assert same, (name, value, a, b)
        else:
            assert a[0] == b[0], (name, value, a, b)


def test_folding_matches_numpy_float32_arithmetic():
    """The folded literal of 1/sqrt(f32(c)*0.1 + 3) is numpy's float32 result, bit for bit."""
    k = Kernel("fk", (Param("out", BUF, f32), C),
               (Store("out", gid(), FOLD_CASES["f32-rsqrt"](ir.param("c", i32))),))
    for value in (1, 17, 1000):
        got = np.float32(specialize(k, {"c": value}).body[0].value.arg)
        f = np.float32
        want = f(1.0) / np.sqrt(f(value) * f(0.1) + f(3.0))
        assert got.view(np.uint32) == want.view(np.uint32)
        # a float64 evaluation rounded once differs for some inputs; the folder must not use it
    wrong = [v for v in range(1, 400) if np.float32(1.0 / np.sqrt(v * float(np.float32(0.1)) + 3.0))
             != np.float32(specialize(k, {"c": v}).body[0].value.arg)]
    assert wrong, "expected float64 evaluation to differ somewhere (checks the test is sensitive)"

"""The operation registry (refimpl/opdefs.py): one record per Op, tables derived
from the records covering exactly the ops they should, the typing rule against
the rules as the IR documents them, and every fact checked against what the
interpreter actually does."""
from __future__ import annotations

import builtins
import importlib.util
import itertools
import sys

import numpy as np
import pytest

import cohort
from cohort.backend import bounds
from cohort.refimpl import frontend, lang, printer, semantics
from cohort.refimpl.errors import KernelError
from cohort.refimpl.interpreter import count_flops, evaluate, interpret
from cohort.refimpl.ir import (
    VALUE_DTYPES,
    Assign,
    Barrier,
    DType,
    Expr,
    IRTypeError,
    Kernel,
    Op,
    Param,
    ParamKind,
    Private,
    PStore,
    Shared,
    SStore,
    Store,
    builtin,
    const,
    load,
    param,
    pload,
    result_dtype,
    sload,
    var,
)
from cohort.refimpl.opdefs import BINARY, EVALUATE, FLOP_OPS, GROUPS, OPDEFS, RECORDS
from cohort.refimpl.printer import format_kernel
from cohort.refimpl.spec import validate

F32, I32, U32, BOOL = DType.F32, DType.I32, DType.U32, DType.BOOL
ALL = VALUE_DTYPES     # bf16/f16 are storage types: no operation yields or takes one (below)


# ---------------------------------------------------------------- one record per op

@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_no_operation_yields_a_storage_type(op):
    """bf16/f16 are buffer element types: no node has one (leaves and loads refuse it), so
    no operand has one either."""
    d = OPDEFS[op]
    for srcs in itertools.product(tuple(DType), repeat=d.arity):
        for dt in (None,) + tuple(DType):
            try:
                got = result_dtype(op, srcs, dt)
            except IRTypeError:
                continue
            assert not got.is_storage, (op, srcs, dt)


def test_every_op_has_exactly_one_record_in_enum_order():
    assert [d.op for d in RECORDS] == list(Op)
    assert set(OPDEFS) == set(Op) and len(OPDEFS) == len(RECORDS)


def test_groups_partition_the_ops_and_follow_the_enum_labels():
    assert sorted(op.value for g in GROUPS.values() for op in g) == [op.value for op in Op]
    # each group is one run of the enum, as the labels in ir.Op lay them out
    runs = [g for g, _ in itertools.groupby(d.group for d in RECORDS)]
    assert runs == list(GROUPS) == ["leaf", "builtin", "unary", "arith", "ternary", "bitwise", "compare", "convert",
                                    "memory", "math"]


def test_derived_tables_cover_exactly_their_ops():
    assert BINARY == GROUPS["arith"] | GROUPS["bitwise"] | GROUPS["compare"]
    assert set(EVALUATE) == set(Op)
    assert FLOP_OPS == {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.SQRT, Op.MIN, Op.MAX, Op.FMA}
    # the ops that are a function of their operands' values: the ALU, conversions
    assert {d.op for d in RECORDS if d.lanes is not None} == set(semantics.ALU) | {Op.CAST, Op.BITCAST}
    # compile-time constants (loop steps, private sizes): literals, block size, integer arithmetic
    assert {d.op for d in RECORDS if d.compile_time} == \
        {Op.CONST, Op.BLOCK_SIZE, Op.NEG, Op.CAST} | GROUPS["arith"] | GROUPS["bitwise"]
    # the bounds proof knows an interval for every leaf the launch fixes
    assert bounds._LEAVES == {Op.CONST, Op.PARAM} | GROUPS["builtin"]
    assert {d.op for d in RECORDS if d.arity == 0} == GROUPS["leaf"] | GROUPS["builtin"]


@pytest.mark.parametrize("op", sorted(semantics.ALU, key=lambda o: o.value), ids=lambda o: o.name)
def test_each_alu_record_applies_its_own_semantics_entry(op):
    d = OPDEFS[op]
    rng = np.random.default_rng(op.value)
    for dt in sorted(d.signature.types, key=lambda t: t.value):
        vals = [(rng.integers(1, 30, 64) * (1 if dt is U32 else rng.choice([-1, 1], 64))).astype(dt.np)
                if dt is not BOOL else rng.random(64) < 0.5 for _ in range(d.arity)]
        if op in (Op.SHL, Op.SHR):
            vals[1] = vals[1] & 31
        e = Expr(op, d.result_dtype((dt,) * d.arity), tuple(var(f"v{i}", dt) for i in range(d.arity)))
        got = d.lanes(e, vals, True)
        with np.errstate(all="ignore"):
            want = semantics.ALU[op](dt, *vals, mask=True)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (op, dt)   # NaNs too


def test_leaf_facts_are_consistent():
    for d in RECORDS:
        if d.scope is not None or d.blocking:
            assert d.arity == 0, d.op
        if d.arity == 0 and d.scope is not None:
            assert d.compile_time == (d.scope == "kernel"), d.op
    assert {d.op for d in RECORDS if d.scope is None and d.arity == 0} == {Op.VAR, Op.ARG}


# ---------------------------------------------------------------- the typing rule
# Written from the IR's documentation (ir.Op, DESIGN §2-§3), not from opdefs.py.

NUM, INT, LOGIC = {F32, I32, U32}, {I32, U32}, {BOOL, I32, U32}


def _documented(op: Op, srcs: tuple, dt):
    """The documented result dtype, or None where the IR rejects the combination."""
    if op in GROUPS["leaf"]:
        return dt
    if op in GROUPS["builtin"]:
        return I32
    if op in (Op.LOAD, Op.PLOAD, Op.SLOAD):
        return dt if srcs[0] in INT else None
    if op in (Op.NEG, Op.ABS):
        return srcs[0] if srcs[0] in NUM else None
    if op is Op.NOT:
        return srcs[0] if srcs[0] in LOGIC else None
    if op in (Op.SQRT, Op.MATH):
        return F32 if srcs[0] is F32 else None
    if op is Op.FMA:
        return F32 if srcs == (F32, F32, F32) else None
    if op is Op.SELECT:
        return srcs[1] if srcs[0] is BOOL and srcs[1] is srcs[2] else None
    if op is Op.CAST:
        return dt
    if op is Op.BITCAST:
        return dt if srcs[0] in NUM and dt in NUM else None
    a, b = srcs
    if a is not b:
        return None
    if op in (Op.EQ, Op.NE):
        return BOOL
    if op in GROUPS["compare"]:
        return BOOL if a in NUM else None
    if op in (Op.AND, Op.OR, Op.XOR):
        return a if a in LOGIC else None
    if op in (Op.MOD, Op.SHL, Op.SHR):
        return a if a in INT else None
    return a if a in NUM else None


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_the_typing_rule_matches_the_documented_rules_for_every_dtype_combination(op):
    d = OPDEFS[op]
    for srcs in itertools.product(ALL, repeat=d.arity):
        for dt in (None,) + ALL:
            want = _documented(op, srcs, dt) if (dt is not None or d.signature.result != "given") else None
            try:
                got = result_dtype(op, srcs, dt)
            except IRTypeError:
                got = None
            assert got is want, (op, srcs, dt)
    for n in set(range(4)) - {d.arity}:       # a wrong operand count is a type error, not a crash
        with pytest.raises(IRTypeError, match=f"{d.name} has {n} operands"):
            result_dtype(op, (F32,) * n, F32)


# ---------------------------------------------------------------- spellings

def test_every_spelling_form_is_printed_and_every_operator_symbol_parsed():
    assert {sp.form for d in RECORDS for sp in (d.spelling, d.int_spelling) if sp} <= set(printer._FORMS)
    infix = {d.op for d in RECORDS for sp in (d.spelling, d.int_spelling) if sp and sp.form == "infix"}
    assert set(frontend._BINOPS.values()) | set(frontend._CMPOPS.values()) == infix
    assert set(frontend._CMPOPS.values()) == GROUPS["compare"]


def test_every_called_builtin_is_a_name_a_kernel_can_call():
    for d in RECORDS:
        if d.spelling.form != "call" or not d.spelling.text:
            continue
        obj = getattr(cohort, d.spelling.text, None) or getattr(builtins, d.spelling.text)
        if isinstance(obj, lang.Builtin):
            assert obj.name == d.spelling.text and (obj.kind != "builtin" or obj.payload is d.op), d.op
        else:
            assert frontend._PY_CALLS[obj] is d, d.op


def _kernel_using_every_op(rename=None):
    """A kernel with one store per operation (ARG only exists inside math templates);
    the node of op `rename` refers to a name that does not exist."""
    x, xi, b = var("x", F32), var("xi", I32), var("b", BOOL)
    p = pload("pr", xi & 3, F32)
    by_op = {
        Op.CONST: const(2.5, F32), Op.PARAM: param("s", F32), Op.VAR: x,
        Op.THREAD_ID: builtin(Op.THREAD_ID), Op.BLOCK_ID: builtin(Op.BLOCK_ID),
        Op.GLOBAL_ID: builtin(Op.GLOBAL_ID), Op.BLOCK_SIZE: builtin(Op.BLOCK_SIZE),
        Op.NUM_THREADS: builtin(Op.NUM_THREADS), Op.BUFLEN: builtin(Op.BUFLEN, "src"),
        Op.SELECT: Expr(Op.SELECT, F32, (b, x, -x)), Op.CAST: Expr(Op.CAST, I32, (x,)),
        Op.BITCAST: Expr(Op.BITCAST, U32, (x,)), Op.LOAD: load("src", xi & 7, F32), Op.PLOAD: p,
        Op.SLOAD: sload("sh", xi & 3, F32),
        Op.MATH: Expr(Op.MATH, F32, (x,), "exp"), Op.NOT: Expr(Op.NOT, BOOL, (b,)),
    }
    for d in RECORDS:
        if d.op not in by_op and d.op is not Op.ARG:
            operand = x if F32 in d.signature.types else xi
            by_op[d.op] = Expr(d.op, d.result_dtype((operand.dtype,) * d.arity), (operand,) * d.arity)
    by_op[Op.DIV] = Expr(Op.DIV, I32, (xi, xi | 1))            # integer division, never by zero
    by_op[Op.MOD] = Expr(Op.MOD, I32, (xi, xi | 1))
    by_op[Op.SHL] = Expr(Op.SHL, I32, (xi, xi & 7))
    by_op[Op.SHR] = Expr(Op.SHR, I32, (xi, xi & 7))
    if rename is not None:
        e = by_op[rename]
        by_op[rename] = Expr(e.op, e.dtype, e.src, "nosuch")
    params = [Param("src", ParamKind.BUFFER, F32), Param("s", ParamKind.SCALAR, F32)]
    body = [Assign("x", load("src", builtin(Op.GLOBAL_ID) & 7, F32)),
            Assign("xi", Expr(Op.CAST, I32, (x * 8.0,))),
            Assign("b", x > 0.0),
            Private("pr", F32, const(4, I32)), PStore("pr", xi & 3, x),
            Shared("sh", F32, const(4, I32)), SStore("sh", builtin(Op.THREAD_ID), x), Barrier()]
    outs = {}
    for op, e in by_op.items():
        name = f"y_{op.name.lower()}"
        params.append(Param(name, ParamKind.BUFFER, e.dtype))
        body.append(Store(name, builtin(Op.GLOBAL_ID), e))
        outs[op] = name
    return Kernel("every_op", tuple(params), tuple(body), block=4), outs


def test_the_interpreter_dispatches_every_op_and_the_printer_round_trips_it(tmp_path):
    k, outs = _kernel_using_every_op()
    validate(k)
    n = 12
    rng = np.random.default_rng(0)

    def args(kernel):
        a = {"src": (rng.standard_normal(8) * 3).astype(np.float32), "s": 1.5}
        a.update({name: np.zeros(n, kernel.param(name).dtype.np) for name in outs.values()})
        return a

    first = args(k)
    again = {name: v.copy() if isinstance(v, np.ndarray) else v for name, v in first.items()}
    res = interpret(k, n, first)
    assert set(outs) == set(Op) - {Op.ARG}
    assert np.array_equal(res["y_buflen"], np.full(n, 8)) and np.array_equal(res["y_block_size"], np.full(n, 4))
    # print, parse the text back with the frontend: same text, same bits
    text = format_kernel(k)
    path = tmp_path / "every_op_mod.py"
    path.write_text("from cohort import *\n\n\n" + text + "\n")
    spec = importlib.util.spec_from_file_location("every_op_mod", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["every_op_mod"] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules["every_op_mod"]
    k2 = mod.every_op.ir
    assert format_kernel(k2) == text
    res2 = interpret(k2, n, again)
    for name in outs.values():
        assert np.array_equal(res[name].view(np.uint8), res2[name].view(np.uint8)), name
    # ARG: the math placeholder, bound by `evaluate`
    xs = np.array([1.0, -2.0], np.float32)
    assert np.array_equal(evaluate(Expr(Op.ARG, F32, (), 0), x=xs), xs)


@pytest.mark.parametrize("op", [d.op for d in RECORDS if d.arg not in (None, "literal", "placeholder")],
                         ids=lambda o: o.name)
def test_the_validator_checks_the_name_every_named_arg_refers_to(op):
    validate(_kernel_using_every_op()[0])
    with pytest.raises(KernelError, match="nosuch"):
        validate(_kernel_using_every_op(rename=op)[0])


def _store_leaf(op: Op, block: int, n: int) -> np.ndarray:
    e = builtin(op, "src") if op is Op.BUFLEN else param("s", I32) if op is Op.PARAM else \
        const(7, I32) if op is Op.CONST else builtin(op)
    k = Kernel("leaf", (Param("src", ParamKind.BUFFER, I32), Param("s", ParamKind.SCALAR, I32),
                        Param("y", ParamKind.BUFFER, I32)),
               (Store("y", builtin(Op.GLOBAL_ID), e),), block=block)
    return interpret(k, n, {"src": np.zeros(5, np.int32), "s": 3, "y": np.zeros(n, np.int32)})["y"]


@pytest.mark.parametrize("op", [d.op for d in RECORDS if d.scope is not None], ids=lambda o: o.name)
def test_scope_and_blocking_say_what_the_interpreter_does(op):
    d = OPDEFS[op]
    n = 24
    for block in (4, 8):
        v = _store_leaf(op, block, n).reshape(-1, block)
        per_block = bool(np.all(v == v[:, :1]))
        assert per_block == (d.scope != "thread"), (op, block)
        if d.scope in ("kernel", "launch"):
            assert np.all(v == v[0, 0]), op
        if d.scope == "block":
            assert len(np.unique(v[:, 0])) == len(v), op
    assert (not np.array_equal(_store_leaf(op, 4, n), _store_leaf(op, 8, n))) == d.blocking, op


@pytest.mark.parametrize("op", sorted(BINARY | GROUPS["unary"], key=lambda o: o.value), ids=lambda o: o.name)
def test_flop_counts_one_operation_per_active_thread_on_f32_only(op):
    d = OPDEFS[op]
    for dt in (F32, I32):
        if dt not in d.signature.types:
            continue
        x = var("x", dt)
        e = Expr(op, d.result_dtype((dt,) * d.arity), (x,) * d.arity)
        k = Kernel("one", (Param("a", ParamKind.BUFFER, dt), Param("y", ParamKind.BUFFER, e.dtype)),
                   (Assign("x", load("a", builtin(Op.GLOBAL_ID), dt)), Store("y", builtin(Op.GLOBAL_ID), e)),
                   block=4)
        n = 6
        a = np.arange(1, 9, dtype=dt.np)
        flops = count_flops(k, n, {"a": a, "y": np.zeros(n, e.dtype.np)})
        assert flops == (n if d.flop and dt is F32 else 0), (op, dt)

"""The regression corpus replays (a bug once found stays found), and the IR <-> JSON
serializer behind it round-trips every node, statement and parameter exactly."""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from cohort.refimpl import ops
from cohort.refimpl.interpreter import KernelRuntimeError, interpret
from cohort.refimpl.ir import (
    Assign,
    Collective,
    DType,
    For,
    If,
    Kernel,
    Loc,
    Op,
    Param,
    ParamKind,
    Private,
    PStore,
    Reduce,
    Store,
    binary,
    builtin,
    const,
    load,
    stmt_exprs,
    var,
    walk_expr,
    walk_stmts,
)
from cohort.refimpl.printer import format_kernel
from cohort.refimpl.spec import validate
from cohort.refimpl.specialize import specialize
from cohort.verify import corpus
from cohort.verify.checksum import bitwise_equal
from cohort.verify.gen import cases, make_args

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
FILES = corpus.case_files(CORPUS)


# ---------------------------------------------------------------- the corpus

def test_corpus_is_not_empty():
    assert FILES, f"no cases in {CORPUS}"


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_corpus_case_replays(path):
    case, doc = corpus.load_case(path)
    validate(case.kernel)
    res = corpus.replay(doc)
    assert res["discard"] is None, f"the interpreter rejects {path}: {res['discard']}"
    assert res["variants"], "no variant ran"
    bad = {v: r for v, r in res["variants"].items() if r["status"] not in ("ok", "unsupported")}
    report = "\n".join(f"{v}: {r['status']}: {r.get('detail', '')}" for v, r in bad.items())
    if doc.get("expected") == "known_failure":
        if bad:
            pytest.xfail(f"known failure ({doc.get('note', '')}):\n{report}")
        return
    assert doc.get("expected", "agree") == "agree"
    assert not bad, f"{os.path.basename(path)} regressed:\n{report}\n{format_kernel(case.kernel)}"


# ---------------------------------------------------------------- serializer

def _structure(k: Kernel):
    """Every node's full content and the sharing pattern, independent of the serializer."""
    ids, table = {}, []

    def node(e):
        for x in walk_expr(e):
            if id(x) not in ids:
                ids[id(x)] = len(table)
                arg = x.arg
                if x.op is Op.CONST and x.dtype is DType.F32:
                    arg = int(np.asarray(arg, np.float32).view(np.uint32))
                table.append((x.op, x.dtype, tuple(ids[id(s)] for s in x.src), arg))
        return ids[id(e)]

    def stmt(s):
        kids = ()
        if isinstance(s, If):
            kids = (tuple(map(stmt, s.then)), tuple(map(stmt, s.orelse)))
        elif isinstance(s, For):
            kids = (tuple(map(stmt, s.body)),)
        names = tuple(getattr(s, a) for a in ("name", "buf", "arr", "var", "dtype", "op") if hasattr(s, a))
        return (type(s).__name__, names, tuple(node(e) for e in stmt_exprs(s)), s.loc, kids)

    body = tuple(stmt(s) for s in k.body)
    return (k.name, k.params, k.block, k.consts, k.specialised, body, tuple(table))


def _roundtrip(k: Kernel) -> Kernel:
    text = json.dumps(corpus.kernel_to_json(k))
    return corpus.kernel_from_json(json.loads(text))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_generated_kernels_round_trip(case):
    k2 = _roundtrip(case.kernel)
    assert _structure(k2) == _structure(case.kernel)
    assert format_kernel(k2) == format_kernel(case.kernel)
    assert corpus.kernel_digest(k2) == corpus.kernel_digest(case.kernel)
    validate(k2)


@settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_cases_round_trip_and_run_identically(case):
    doc = json.loads(json.dumps(corpus.case_to_json(case)))
    case2 = corpus.case_from_json(doc)
    assert corpus.case_key(case2) == corpus.case_key(case)
    a, b = make_args(case), make_args(case2)
    assert a.keys() == b.keys()
    for name in a:
        if isinstance(a[name], np.ndarray):
            assert bitwise_equal(a[name], b[name]) and a[name].dtype == b[name].dtype
        else:   # scalars: the exact bits, -0.0 and NaN included
            assert np.asarray(a[name]).tobytes() == np.asarray(b[name]).tobytes()
    # a generated program may be an expected-error one (one past the edge of xe or ye,
    # gen/boundary.py): then both copies report the same error
    errors = []
    for k, n, args, consts in ((case.kernel, case.n, a, case.consts), (case2.kernel, case2.n, b, case2.consts)):
        try:
            interpret(k, n, args, consts)
            errors.append(None)
        except KernelRuntimeError as e:
            assert "buffer xe " in str(e) or "buffer ye " in str(e), str(e)
            errors.append(str(e))
    assert errors[0] == errors[1]
    for name in a:
        if isinstance(a[name], np.ndarray):
            assert bitwise_equal(a[name], b[name])


@pytest.mark.parametrize("name", sorted(ops.OPERATORS))
def test_frontend_kernels_round_trip_with_locations(name):
    k = ops.get(name).kernel.ir
    k2 = _roundtrip(k)
    assert _structure(k2) == _structure(k)
    assert any(s.loc.line is not None for s in walk_stmts(k2.body))
    # specialised too
    op = ops.get(name)
    shape = op.seed_sizes[0]
    sk = specialize(k, op.launch(shape).consts)
    sk2 = _roundtrip(sk)
    assert sk2.specialised and sk2.consts == sk.consts and _structure(sk2) == _structure(sk)


def test_literal_bits_and_sharing_survive():
    nan_payload = float(np.asarray(0x7FA00001, np.uint32).view(np.float32))
    vals = [-0.0, 0.0, float("inf"), float("-inf"), nan_payload, float("nan"), 1e-45, 3.4028235e38]
    g = builtin(Op.GLOBAL_ID)
    shared = load("x", g, DType.F32) * 2.0
    body = [Assign(f"v{i}", binary(Op.ADD, shared, const(v, DType.F32)), Loc(i + 3, f"v{i} = ...")) for i, v in
            enumerate(vals)]
    body += [Private("p", DType.BOOL, const(3, DType.I32)),
             PStore("p", const(1, DType.I32), const(True, DType.BOOL)),
             If(binary(Op.LT, g, const(5, DType.I32)), (Store("y", g, var("v0", DType.F32)),), ()),
             For("j", const(0, DType.I32), const(2, DType.I32), const(1, DType.I32),
                 (Assign("u", const(2 ** 32 - 1, DType.U32)),)),
             Collective("r", Reduce.MAX, const(-(2 ** 31), DType.I32))]
    k = Kernel("lits", (Param("x", ParamKind.BUFFER, DType.F32), Param("y", ParamKind.BUFFER, DType.F32),
                        Param("C", ParamKind.CONST, DType.I32)), tuple(body), 16)
    k2 = _roundtrip(k)
    assert _structure(k2) == _structure(k)
    got = [s.value.src[1].arg for s in k2.body[:len(vals)]]
    for a, b in zip(got, vals):
        assert np.asarray(a, np.float32).tobytes() == np.asarray(b, np.float32).tobytes()
    # the shared multiply is one node, used by every assignment
    assert len({id(s.value.src[0]) for s in k2.body[:len(vals)]}) == 1
    assert k2.body[0].loc == Loc(3, "v0 = ...")


@pytest.mark.parametrize("doc,match", [
    ({"format": "nope"}, "not a cohort-kernel"),
    ({"format": corpus.KERNEL_FORMAT, "name": "k", "block": 8, "params": [],
      "nodes": [{"op": "FROB", "dtype": "f32"}], "body": []}, "unknown op"),
    ({"format": corpus.KERNEL_FORMAT, "name": "k", "block": 8, "params": [],
      "nodes": [{"op": "NEG", "dtype": "f32", "src": [0]}], "body": []}, "not an earlier node"),
    ({"format": corpus.KERNEL_FORMAT, "name": "k", "block": 8, "params": [],
      "nodes": [], "body": [{"kind": "assign", "name": "a", "value": 3}]}, "missing node"),
    ({"format": corpus.KERNEL_FORMAT, "name": "k", "block": 8, "params": [],
      "nodes": [{"op": "CONST", "dtype": "f128", "arg": 1}], "body": []}, "unknown dtype"),
    ({"format": corpus.KERNEL_FORMAT, "name": "k", "block": 8, "params": [],
      "nodes": [{"op": "BUFLEN", "dtype": "i32", "arg": 3}], "body": []}, "BUFLEN takes a buffer name, got 3"),
    ({"format": corpus.KERNEL_FORMAT, "name": "k", "block": 8, "params": [],
      "nodes": [{"op": "THREAD_ID", "dtype": "i32", "arg": "x"}], "body": []}, "THREAD_ID takes no argument"),
])
def test_bad_documents_are_rejected_with_a_reason(doc, match):
    with pytest.raises(corpus.CorpusError, match=match):
        corpus.kernel_from_json(doc)

"""The eager-PyTorch column (issue 25): ATen from native code, its twin in Python, the best peer."""
import json

import numpy as np
import pytest

from cohort.refimpl import ops

torch = pytest.importorskip("torch")

from cohort.audit import eager  # noqa: E402
from cohort.audit.inductor_refs import reference_output  # noqa: E402


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("name", sorted(ops.OPERATORS))
def test_the_native_eager_code_is_its_python_twin_bit_for_bit(name):
    # eager_entry.cpp restates each OpBinding's eager code in C++; the same ATen calls give
    # the same bits, so any drift between the two shows here (two sizes: the first and the last).
    # An operator without a twin has no native eager cell, and says why.
    op = ops.get(name)
    if name not in eager.operators():
        with pytest.raises(eager.EagerUnavailable, match=f"has no {name} .*eager_entry.cpp"):
            eager.EagerEntry(name, op.seed_sizes[0], op.make_inputs(op.seed_sizes[0], 3))
        return
    for shape in (op.seed_sizes[0], op.seed_sizes[-1]):
        if int(np.prod(shape)) > 1 << 21:
            continue
        inputs = op.make_inputs(shape, 3)
        e = eager.EagerEntry(name, shape, inputs)
        y = e.output()
        ref = reference_output(name, inputs, shape)
        assert y.dtype == ref.dtype and y.shape == ref.shape
        assert np.array_equal(_bits(y), _bits(ref)), (name, shape)
        e.close()


def test_an_operator_without_a_twin_has_no_eager_cell_and_says_which_file_lacks_it(monkeypatch):
    from cohort.audit.columns import EagerColumn, Unavailable
    op = ops.get("layernorm")
    monkeypatch.setattr(eager, "operators", lambda: [n for n in ops.OPERATORS if n != "layernorm"])
    inputs = op.make_inputs((3, 70), 0)
    with pytest.raises(eager.EagerUnavailable, match=r"has no layernorm \(no C\+\+ twin in audit/eager_entry.cpp\)"):
        eager.EagerEntry("layernorm", (3, 70), inputs)
    with pytest.raises(Unavailable, match="no C\\+\\+ twin"):
        EagerColumn(op, (3, 70), inputs, op.expected(inputs, (3, 70)), "native_entry", 1)


def test_every_eager_entry_is_an_operator():
    # a twin is optional (DESIGN §1: adding an operator touches five files without it); the
    # entry names no operator that does not exist
    assert set(eager.operators()) <= set(ops.OPERATORS)


def test_the_entry_runs_from_the_native_timer_and_each_call_writes_its_output():
    from cohort.backend import timer
    op = ops.get("layernorm")
    inputs = op.make_inputs((33, 70), 1)
    e = eager.EagerEntry("layernorm", (33, 70), inputs)
    first = e.output()
    e.poison(-1234.5)
    assert np.all(e.output() == np.float32(-1234.5))
    ns = timer.time_entry(e.fn_address, e.arg_address, 3, 2)
    assert ns.shape == (2,) and np.all(ns > 0) and e.errors() == 0
    assert np.array_equal(_bits(e.output()), _bits(first))
    assert ops.oracle_error(first, op.expected(inputs, (33, 70)))[1] < 1e-5


def test_an_aten_error_is_counted_and_named_not_a_crash():
    op = ops.get("matmul")
    inputs = op.make_inputs((4, 8, 5), 0)
    bad = {**inputs, "b": np.zeros((3, 5), np.float32)}     # ATen's mm throws; the entry counts it
    with pytest.raises(eager.EagerUnavailable, match="matmul"):
        eager.EagerEntry("matmul", (4, 8, 5), bad)


def test_an_unknown_operator_and_dtype_are_refused_with_their_names():
    with pytest.raises(eager.EagerUnavailable, match="has no rmsnorm:bf16"):
        eager.EagerEntry("rmsnorm:bf16", (3, 8), ops.get("rmsnorm:bf16").make_inputs((3, 8), 0))
    inputs = ops.get("rmsnorm").make_inputs((3, 8), 0)
    with pytest.raises(eager.EagerUnavailable, match="float32, int32 and bool inputs; x is float64"):
        eager.EagerEntry("rmsnorm", (3, 8), {**inputs, "x": inputs["x"].astype(np.float64)})


def _replay_with(figures: dict, ratios: list):
    """A minimal replay: one case, one round figure per column and round (7 samples each)."""
    cols = {n: {"status": "ok", "iters": 4, "kind": "variant"} for n in figures}
    samples = [{"case": "g/op/1", "column": n, "round": r, "position": 0, "boundary": "native_entry",
                "valid": True, "ns": [v] * 7} for n, fs in figures.items() for r, v in enumerate(fs)]
    case = {"id": "g/op/1", "group": "g", "op": "rmsnorm", "shape": [1, 1], "boundary": "native_entry",
            "columns": cols, "ratios": ratios, "rounds": len(next(iter(figures.values())))}
    return {"samples": samples, "cases": [case]}


def test_the_best_peer_is_the_faster_peer_round_by_round():
    from cohort.audit.tables import derive
    ratios = [{"candidate": "c", "baseline": "i|e", "label": "c/best peer"}]
    # rounds: inductor faster in round 0, eager in round 1 and 2
    replay = _replay_with({"c": [10.0, 10.0, 30.0], "i": [20.0, 40.0, 90.0], "e": [50.0, 8.0, 60.0]}, ratios)
    r = derive(json.loads(json.dumps(replay)))[0]["ratios"][0]
    assert r["status"] == "ok" and r["peers"] == ["i", "e"]
    assert (r["min"], r["ratio"], r["max"]) == (0.5, 0.5, 1.25)    # 10/20, 10/8, 30/60
    assert (r["won"], r["rounds"]) == (2, 3)
    # a peer that could not run leaves the other as the best, and the table says so
    replay["cases"][0]["columns"]["e"] = {"status": "unavailable", "reason": "no entry"}
    replay["samples"] = [s for s in replay["samples"] if s["column"] != "e"]
    r = derive(replay)[0]["ratios"][0]
    assert r["peers"] == ["i"] and r["ratio"] == pytest.approx(1 / 3)     # 10/20, 10/40, 30/90


def test_the_torch_suite_times_cohort_torch_eager_and_compile_and_checks_cohort_bitwise():
    from cohort.audit import harness, suites
    from cohort.audit.tables import derive, render_markdown
    run = harness.run_suite(suites.get("torch"), rounds=2, samples=2, only_ops=["rmsnorm"],
                            only_sizes=["1x4096"], command="test")
    assert not run.failures
    cells = derive(run.replay)
    assert [c["group"] for c in cells] == ["1 thread", "all threads"]
    for cell, case in zip(cells, run.replay["cases"]):
        assert {n for n, c in cell["columns"].items() if c["status"] == "ok"} == \
            {"cohort", "torch.ops", "eager", "compile", "cohort'"}
        best = next(r for r in cell["ratios"] if r["label"] == "cohort/best peer")
        assert best["status"] == "ok" and best["peers"] == ["compile", "eager"]
        audit = run.audit["cases"][case["id"]]
        # cohort's output, every round, is the interpreter's bit for bit
        assert all(r["output_checksum"] == audit["reference_checksum"] and r["agree"]
                   for n in ("cohort", "torch.ops") for r in audit["columns"][n]["runs"])
    assert run.replay["cases"][1]["workers"] == run.replay["suite"]["cores"]
    assert "torch_api — one Python call per op" in render_markdown(run.replay)


@pytest.mark.slow     # ~70 s: an Inductor compile at 2 threads and every column's calibration
def test_the_two_thread_suite_times_every_column_natively_at_its_threads():
    from cohort.audit import harness, suites
    from cohort.audit.tables import derive
    run = harness.run_suite(suites.get("native-mt"), rounds=2, samples=2, only_ops=["cumsum"], command="test")
    assert not run.failures
    case = run.replay["cases"][0]
    assert case["boundary"] == "runtime_e2e"
    cols = case["columns"]
    assert all(cols[n]["status"] == "ok" for n in ("packet", "packet-w16", "inductor", "eager"))
    assert cols["inductor"]["facts"]["threads"] == 2 and cols["eager"]["facts"]["threads"] == 2
    best = next(r for r in derive(run.replay)[0]["ratios"] if r["label"] == "packet-w16/best peer")
    assert best["status"] == "ok" and best["peers"] == ["inductor", "eager"]


def test_an_output_that_is_a_view_of_an_input_is_not_poisoned():
    # transpose of a 1x1 matrix: contiguous() returns the input itself, as eager torch does
    inputs = ops.get("transpose").make_inputs((1, 1, 1), 0)
    e = eager.EagerEntry("transpose", (1, 1, 1), inputs)
    before = e.inputs[0].copy()
    e.poison(-1234.5)
    e.run()
    assert np.array_equal(e.inputs[0], before) and np.array_equal(e.output(), before)

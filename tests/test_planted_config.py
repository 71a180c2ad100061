"""Planted bugs (backend/inject.py) are asked of the build's CodegenConfig, whose key is the
compile key: a plant switched on or off in the process while a build runs reaches neither its
code nor its key. Runtime plants (read at launch) go through inject.runtime_planted alone.
The codegen modules are the backend's and the Triton tile lowering's."""
import ast
import pathlib
import threading

import numpy as np
import pytest

from cohort import Buffer, f32, fma, global_id, kernel
from cohort.backend import codegen, compiler, inject
from cohort.backend.inject import BUGS, RUNTIME_PLANTS, inject_bug_TESTING_ONLY
from cohort.backend.variant import parse_variant
from cohort.refimpl.interpreter import interpret

ROOT = pathlib.Path(__file__).resolve().parent.parent
CODEGEN = (ROOT / "cohort" / "backend", ROOT / "cohort" / "triton")
RUNTIME_MODULES = {"runtime.py", "launch_plan.py", "pool_ir.py"}    # launch time, or the pool's build


def _codegen_files():
    return [p for d in CODEGEN for p in sorted(d.rglob("*.py")) if p.name != "inject.py"]


def _calls(tree, attr: str):
    """(line, first argument's literal or None) of every call `<name>.attr(...)` or `attr(...)`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name == attr:
                arg = node.args[0] if node.args else None
                yield node.lineno, arg.value if isinstance(arg, ast.Constant) else None


def test_no_codegen_module_asks_the_process_switches():
    """The codegen modules ask their build (config.planted, or the bugs an analysis was
    given), never the process's switches now: inject has no `active` to ask, and nobody
    brings one back."""
    assert not hasattr(inject, "active")
    offenders = []
    for path in _codegen_files():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr == "active" and isinstance(node.value, ast.Name)
                    and node.value.id == "inject"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: inject.active")
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("inject"):
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: from inject import {a.name}"
                              for a in node.names if a.name in ("active", "_active")]
    assert not offenders, "ask the build's CodegenConfig.planted (backend/codegen.py):\n" + "\n".join(offenders)


def test_runtime_plants_are_read_at_launch_only():
    """runtime_planted names a runtime plant, from a runtime module; planted() names a codegen
    plant; every plant is read somewhere (none is dead)."""
    bad, seen = [], set()
    for path in _codegen_files():
        tree = ast.parse(path.read_text())
        where = lambda line: f"{path.relative_to(ROOT)}:{line}"
        for line, name in _calls(tree, "runtime_planted"):
            if name not in RUNTIME_PLANTS or path.name not in RUNTIME_MODULES:
                bad.append(f"{where(line)}: runtime_planted({name!r})")
        for line, name in _calls(tree, "planted"):
            if name is not None and (name not in BUGS or name in RUNTIME_PLANTS):
                bad.append(f"{where(line)}: planted({name!r})")
        for node in ast.walk(tree):        # `"name" in bugs`, as the analyses ask their build's plants
            if (isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In)
                    and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
                    and "bugs" in ast.unparse(node.comparators[0])
                    and (node.left.value not in BUGS or node.left.value in RUNTIME_PLANTS)):
                bad.append(f"{where(node.lineno)}: {ast.unparse(node)}")
        seen |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in BUGS}
    assert not bad, "\n".join(bad)
    assert set(BUGS) - seen == set()
    assert RUNTIME_PLANTS <= set(BUGS)


def test_planted_refuses_an_unknown_name():
    c = codegen.resolve(parse_variant("packet"))
    assert not c.planted("tree_order")
    with pytest.raises(ValueError, match="unknown planted bug 'tree_ordr'"):
        c.planted("tree_ordr")


@kernel(block=16)
def _fma_probe(a: Buffer[f32], b: Buffer[f32], c: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = fma(a[i], b[i], c[i])


N = 40          # two whole blocks and a partial one


def _run(ck):
    a = np.full(N, 2.0, np.float32)
    b = np.full(N, 3.0, np.float32)
    c = np.full(N, 5.0, np.float32)
    y = np.zeros(N, np.float32)
    ck.launch(N, {"a": a, "b": b, "c": c, "y": y}, verify="never")
    want = np.zeros(N, np.float32)
    interpret(_fma_probe.ir, N, {"a": a, "b": b, "c": c, "y": want})
    return y, want


@pytest.mark.parametrize("variant", ["whole", "packet,interleave=1"])
def test_a_plant_switched_on_by_another_thread_mid_compile_stays_out(variant, monkeypatch):
    """Another thread switches fma_operand_order (fma(a, b, c) as a*c + b) on after this build
    resolved its configuration and keeps it on until the build is done: the build's key lacks
    the plant, so its code must too (2*3 + 5 = 11, not 2*5 + 3 = 13)."""
    plant = "fma_operand_order"
    on, done = threading.Event(), threading.Event()

    def hold():
        with inject_bug_TESTING_ONLY(plant):
            on.set()
            done.wait(60)

    real = codegen.resolve
    holder = threading.Thread(target=hold)

    def resolve_then_toggle(v, *args, **kw):
        config = real(v, *args, **kw)
        if not holder.is_alive() and not on.is_set():
            holder.start()
            assert on.wait(60)
        return config

    monkeypatch.setattr(codegen, "resolve", resolve_then_toggle)
    try:
        ck = compiler.compile_kernel(_fma_probe, None, variant, verify="never")
        assert inject.key() == (plant,)          # still on while the build was lowered and linked
    finally:
        done.set()
        holder.join(60)
    monkeypatch.setattr(codegen, "resolve", real)
    assert ck.config.bugs == ()
    y, want = _run(ck)
    assert np.array_equal(y, want) and y[0] == 11.0
    assert compiler.compile_kernel(_fma_probe, None, variant, verify="never") is ck   # its handle, clean
    # the plant does change this kernel when a build's key carries it
    with inject_bug_TESTING_ONLY(plant):
        planted = compiler.compile_kernel(_fma_probe, None, variant, verify="never")
        assert planted.config.bugs == (plant,)
        y, _ = _run(planted)
    assert y[0] == 13.0

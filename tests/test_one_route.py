"""One launch route, one argument-block writer (backend/launch_policy.py, backend/launch_plan.py).

Whether a launch runs on the calling thread, on the pool or by measurement is decided by
LaunchPolicy alone; every argument block is written by LaunchPlan alone. These tests fail when
a second copy of either appears (by the spellings the copies had), when compiler.py and
runtime.py import each other again, and when the runtime's native launch entry (the same rule
in native code) disagrees with LaunchPolicy.route.
"""
import ast
import pathlib
import re

import numpy as np
import pytest

from cohort import kernel
from cohort.backend import launch_policy, runtime
from cohort.backend.compiler import compile_kernel
from cohort.backend.launch_policy import Auto, Caller, Pool, grain_for, policy_of
from cohort.backend.variant import parse_variant
from cohort.refimpl.lang import Buffer, f32, global_id

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "cohort"

# How the route rule was spelled where it was restated (compiler, runtime twice, torch's
# launcher, opcheck, matrix, the audit columns and suites, AutoChoice's tuples).
ROUTE_SPELLINGS = (
    r'grain\s*[!=]=\s*"caller"',
    r'\.workers\s*[!=]=\s*1\b',
    r'grain\s+(not\s+)?in\s+\(?\s*"auto"',
    r'grain\s+(not\s+)?in\s+AUTO_GRAINS',
    r'\(\s*"auto",\s*"joint_legacy"\s*\)',
    r'def\s+grain_for\b',
    r'grain=\{g\}',
    r'\.chosen\[',
    r'__dict__\.get\("_auto"\)',
)
# How the argument block was written where it was copied (compiler, torch's launcher).
WRITER_SPELLINGS = (
    r'\[SLOT_N\]\s*=',
    r'\[SLOT_PROOF\]\s*=',
    r'\[SLOT_END\]\s*=\s*(self\.)?nblocks\s*$',
    r'\.view\(np\.uint32\)\[0\]',
    r'_F32\.pack\(',
)


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def _hits(spellings, allowed):
    found = []
    for name, text in _sources():
        if name in allowed:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern in spellings:
                if re.search(pattern, code):
                    found.append(f"{name}:{i}: {line.strip()}")
    return found


def test_the_route_rule_is_written_once():
    # variant.py defines the knob's values (AUTO_GRAINS); launch_policy.py is the rule
    assert _hits(ROUTE_SPELLINGS, {"backend/launch_policy.py", "backend/variant.py"}) == []


def test_the_argument_block_has_one_writer():
    assert _hits(WRITER_SPELLINGS, {"backend/launch_plan.py"}) == []


def test_the_spellings_are_found_where_they_are_allowed():
    # the greps above would pass on a rename of the constants: they must find the originals
    text = (PACKAGE / "backend" / "launch_policy.py").read_text()
    assert re.search(ROUTE_SPELLINGS[0], text) and re.search(ROUTE_SPELLINGS[5], text)
    text = (PACKAGE / "backend" / "launch_plan.py").read_text()
    assert re.search(WRITER_SPELLINGS[0], text) and re.search(WRITER_SPELLINGS[1], text)


def _imports(path: pathlib.Path) -> set:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names.add(mod)
            names.update(f"{mod}.{a.name}" if mod else a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_compiler_and_runtime_do_not_import_each_other():
    runtime_imports = _imports(PACKAGE / "backend" / "runtime.py")
    assert not any(n.split(".")[-1] == "compiler" for n in runtime_imports), runtime_imports
    # the compiler hands AutoChoice its entries; it runs routes through the runtime
    assert "runtime" in {n.split(".")[-1] for n in _imports(PACKAGE / "backend" / "compiler.py")}


@pytest.mark.parametrize("spec, nblocks, want", [
    ("packet", 100, Caller("grain=caller")),
    ("packet,grain=0", 100, Caller("workers=1")),
    ("packet,grain=3,workers=2", 100, Pool(2, 3, 34)),
    ("packet,grain=3,workers=2", 3, Caller("one task", 3)),
    ("packet,grain=0,workers=2", 100, Pool(2, 13, 8)),
    ("packet,grain=legacy,workers=8", 100, Pool(8, 13, 8)),
    ("packet,grain=legacy,workers=8", 1, Caller("one task", 1)),
    ("packet,grain=caller,workers=4", 100, Caller("grain=caller")),
    ("packet,grain=auto,workers=1", 100, Auto("auto", 1)),
    ("packet,grain=joint_legacy,workers=4", 100, Auto("joint_legacy", 4)),
])
def test_route(spec, nblocks, want):
    policy = policy_of(parse_variant(spec))
    assert policy.route(nblocks) == want
    assert policy.on_caller == (type(want) is Caller and want.grain is None)
    assert policy is policy_of(parse_variant(spec))      # made once per grain and worker count


def test_grain_rule():
    assert grain_for("legacy", 100, 8) == 13
    assert grain_for(0, 100, 2) == 13
    assert grain_for(3, 100, 2) == 3
    assert grain_for(0, 1, 8) == 1


def test_auto_candidates_are_named_records():
    e8 = launch_policy.BuildEntry(8, 1, None)
    e1 = launch_policy.BuildEntry(1, 2, None)
    auto = policy_of(parse_variant("packet,grain=auto,workers=2")).candidates(100, (e8, e1))
    assert [c.label for c in auto] == ["lanes=8,caller", "lanes=8,grain=13", "lanes=8,grain=50",
                                       "lanes=1,caller", "lanes=1,grain=13", "lanes=1,grain=50"]
    assert [c.native_word for c in auto] == [-1, 13, 50, -1, 13, 50]
    assert [c.on_caller for c in auto] == [True, False, False, True, False, False]
    legacy = policy_of(parse_variant("packet,grain=joint_legacy,workers=8")).candidates(100, (e8,))
    assert [(c.label, c.route) for c in legacy] == [("lanes=8,grain=legacy(13)", Pool(8, 13, 8))]
    with pytest.raises(ValueError, match="policy must be one of"):
        policy_of(parse_variant("packet,grain=3,workers=2")).candidates(100, (e8,))
    with pytest.raises(ValueError, match="chosen per launch"):
        _ = policy_of(parse_variant("packet,grain=auto,workers=2")).native_word


@kernel(block=8)
def _copy(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i]


@pytest.mark.parametrize("spec", ["whole,grain=1,workers=2", "whole,grain=3,workers=3", "whole,grain=0,workers=2",
                                  "whole,grain=legacy,workers=3", "whole,grain=caller,workers=2",
                                  "whole,grain=5,workers=1"])
@pytest.mark.parametrize("n", [8, 24, 40, 200])
def test_native_entry_and_python_launch_take_the_policys_route(spec, n):
    """The runtime's native launch entry decides in native code (pool_ir) from the policy's word;
    a pooled launch writes its grain and participants into the pool's record, a launch on the
    caller writes nothing there: both launch paths must take LaunchPolicy.route's way."""
    variant = parse_variant(spec)
    ck = compile_kernel(_copy, None, variant, verify="never")
    x = np.arange(n, dtype=np.float32)
    route = ck.policy.route(-(-n // 8))
    record = runtime.pool(max(variant.workers, 2)).launch_record()
    for how in ("native", "python"):
        y = np.zeros(n, np.float32)
        record[4] = record[8] = 0
        if how == "native":
            runtime.NativeLaunch(ck.prepare(n, {"x": x, "y": y}), variant).launch()
        else:
            ck.launch(n, {"x": x, "y": y})
        assert np.array_equal(x, y)
        if type(route) is Pool:
            assert (record[4], record[8]) == (route.grain, route.workers), how
        else:
            assert (record[4], record[8]) == (0, 0), how

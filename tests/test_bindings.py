"""One record per operator (issue 50): each refimpl operator's tags, each torch op's TorchOp and
each operator's OpBinding (cohort/torch/binding.py) are what every table reads - the torch ops,
cohort.torch's exports, the audit's cohort.torch column and eager references, the suites.

Also the definition layer's two rules: refimpl imports no framework and states no timing.
"""
import ast
import os
import re

import numpy as np
import pytest

from cohort.refimpl import ops

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cohort")
FRAMEWORKS = ("torch", "triton", "transformers", "dask", "matplotlib", "jax", "tensorflow")


def _sources(package: str):
    for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path) as fh:
                    yield os.path.relpath(path, ROOT), fh.read()


def test_refimpl_imports_no_framework():
    found = []
    for rel, text in _sources("refimpl"):
        for node in ast.walk(ast.parse(text, rel)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{rel}: {n}" for n in names if n.partition(".")[0] in FRAMEWORKS]
    assert not found, found


# a duration, a speed ratio, or a peer's name: measurements and comparisons live in docs/ tables
TIMING = re.compile(r"\d(?:[\d.,]*)\s*(?:µs|us|ns|ms)\b|\d\s*(?:x|×|%)\s*(?:faster|slower)|"
                    r"\b(?:Inductor|oneDNN|MKL|Sleef)\b")


def test_refimpl_states_no_timing():
    found = [f"{rel}:{i}: {line.strip()}" for rel, text in _sources("refimpl")
             for i, line in enumerate(text.splitlines(), 1) if TIMING.search(line)]
    assert not found, found


def test_the_timing_pattern_can_fail():
    for line in ("took 2.77 ms", "0.57 against 0.23 µs", "measured 5x slower", "15% slower", "as Inductor's"):
        assert TIMING.search(line), line
    assert not TIMING.search("the 1.5 ulp; exp(x) in float64; 16 lanes; rows 1x4096")


def test_tags_are_known_and_cooperative_means_shared_memory_or_barriers():
    for op in ops.OPERATORS.values():
        assert op.tags <= set(ops.TAGS), op.name
        assert ("cooperative" in op.tags) == op.kernel.ir.cooperative, op.name
        assert ("llm" in op.tags) == bool(op.llm_sizes), op.name
        for s in op.llm_sizes:
            assert op.parse_shape(ops.fmt_shape(s)) == tuple(s)


def test_a_tag_needs_its_facts():
    op = ops.get("gelu_residual")
    from dataclasses import replace
    with pytest.raises(ValueError, match="llm_sizes"):
        replace(op, tags={"llm"})
    with pytest.raises(ValueError, match="unknown tag"):
        replace(op, tags={"rows"})
    with pytest.raises(KeyError, match="unknown tag"):
        ops.tagged("fast")


def test_the_suites_select_by_tag():
    from cohort.audit import suites
    assert suites.ROW_OPS == tuple(op.name for op in ops.tagged("row"))
    assert suites.ROW_OPS == ("rmsnorm", "layernorm", "masked_softmax", "swiglu", "gelu_residual", "rope")
    assert suites.LLM_CASES == tuple((op.name, s) for op in ops.tagged("llm") for s in op.llm_sizes)
    assert ("rmsnorm", (512, 4096)) in suites.LLM_CASES and ("attention_causal", (1, 32, 8, 512, 512, 128, 128)) \
        in suites.LLM_CASES


torch = pytest.importorskip("torch")

import cohort.torch as ct  # noqa: E402
from cohort.torch.binding import BINDINGS, TORCH_OPS, OpBinding, TorchOp, bind, bindings, register  # noqa: E402


def test_every_operator_has_one_binding():
    # the Inductor and eager columns run every operator: each needs its eager torch code
    assert sorted(BINDINGS) == sorted(ops.OPERATORS)
    assert [b.operator for b in bindings()] == list(ops.OPERATORS)
    assert [b.operator for b in bindings("cooperative")] == [op.name for op in ops.tagged("cooperative")]


def test_every_torch_op_is_registered_once_and_exported():
    for name, op in TORCH_OPS.items():
        assert op.custom_op is not None and hasattr(torch.ops.cohort, name)
        if op.function is not None:
            exported = getattr(ct, name)       # the function, or its front for the native call path
            assert (exported is op.function or exported.__wrapped__ is op.function) and name in ct.__all__
        else:
            assert name.endswith("_backward") and name not in ct.__all__
        if op.autograd_cpu:
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"cohort::{name}", "AutogradCPU")
    with pytest.raises(ValueError, match="registered twice"):
        register(TORCH_OPS["gelu"])
    with pytest.raises(ValueError, match="bound twice"):
        bind(BINDINGS["gelu"])
    with pytest.raises(ops.UnknownOperator):
        bind(OpBinding("no_such_operator", lambda x: x))
    assert isinstance(TORCH_OPS["rmsnorm"], TorchOp)


def _inputs(op, shape):
    return {n: a for n, a in op.make_inputs(shape, 0).items()}


@pytest.mark.parametrize("name", [b.operator for b in bindings() if b.op is not None])
@pytest.mark.parametrize("dispatch", [False, True], ids=["cohort.torch", "torch.ops"])
def test_a_bindings_call_gives_the_interpreters_bits(name, dispatch):
    op = ops.get(name)
    shape = min(op.seed_sizes, key=lambda s: int(np.prod(s)))
    inputs = _inputs(op, shape)
    want = ops.run_reference(op, shape, inputs)
    tensors = [torch.from_numpy(np.ascontiguousarray(inputs[n]).copy()) for n in op.inputs]
    y = BINDINGS[name].call(shape, tensors, dispatch)().numpy().reshape(want.shape)
    assert y.dtype == want.dtype and np.array_equal(y.view(np.uint8), want.view(np.uint8))


def test_the_eager_reference_is_the_operators_function():
    op = ops.get("histogram")
    shape = (1000, 64)
    inputs = _inputs(op, shape)
    from cohort.audit.inductor_refs import reference, reference_output
    assert np.array_equal(reference_output("histogram", inputs, shape), op.expected(inputs, shape))
    with pytest.raises(ValueError, match="needs the shape"):
        reference("histogram")
    assert reference("gelu") is BINDINGS["gelu"].eager
    with pytest.raises(KeyError, match="no op"):
        from cohort.audit.torch_column import call_for
        call_for("rope", (3, 4), [])


def test_torch_tensors_as_buffers_go_through_the_torch_layer():
    from cohort.refimpl import launch_check
    assert launch_check.FRAMEWORK_BUFFERS["torch"] == "cohort.torch.buffers"
    k = ops.get("gelu").kernel
    x = torch.ones(4)
    from cohort.refimpl.errors import KernelError
    with pytest.raises(KernelError, match="requires grad"):
        launch_check.check_args(k.ir, 4, {"x": x, "y": torch.zeros(4, requires_grad=True)})
    bufs, _ = launch_check.check_args(k.ir, 4, {"x": x, "y": torch.zeros(4)})
    assert isinstance(bufs["x"], np.ndarray) and np.shares_memory(bufs["x"], x.numpy())


def test_the_torch_column_does_not_import_the_columns_module():
    # columns.make_column builds a TorchColumn; the reverse import made the two a cycle
    with open(os.path.join(ROOT, "audit", "torch_column.py")) as f:
        tree = ast.parse(f.read())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "columns" not in names and "unavailable" in names

"""TorchInductor column (cohort.audit.inductor): references, native trampoline,
E2E callable, oracle checks, refusal of partial graphs, and the no-torch path.

Inductor compiles cost 1-2 s each (the first in a process ~5 s or more with a
cold cache): the default run compiles a handful of small graphs; the full
operator set and AOTInductor (10-25 s per model) are @pytest.mark.slow.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from cohort.audit import inductor as ind
from cohort.refimpl import ops

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (the [torch] extra)")

SMALL = {"rmsnorm": (9, 37), "layernorm": (9, 37), "masked_softmax": (9, 37), "swiglu": (5, 37),
         "gelu_residual": (5, 37), "rope": (9, 38), "attention": (1, 4, 2, 5, 7, 8, 8),
         "matmul": (9, 37, 11), "cumsum": (5, 37), "histogram": (900, 37), "transpose": (2, 9, 37)}


def _bound(op):
    return ind.ORACLE_FACTOR * op.rel_tol


# ---------------------------------------------------------------- without torch

def test_module_without_torch_gives_one_line_reason():
    """In a process where `import torch` fails, the module imports and every public
    entry point reports TORCH_MISSING on one line."""
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None          # any `import torch` now raises ImportError
        from cohort.audit import inductor as ind
        assert ind.torch_available() is False
        assert ind.unavailable_reason() == ind.TORCH_MISSING
        calls = [lambda: ind.reference("rmsnorm"),
                 lambda: ind.reference_output("rmsnorm", {}),
                 lambda: ind.column("rmsnorm", (3, 5)),
                 lambda: ind.InductorColumn("rmsnorm", (3, 5), {})]
        for c in calls:
            try:
                c()
            except ind.InductorUnavailable as e:
                assert str(e) == ind.TORCH_MISSING and "\\n" not in str(e), str(e)
            else:
                raise AssertionError("no InductorUnavailable")
        print("ok")
    """)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    assert "\n" not in ind.TORCH_MISSING and "torch" in ind.TORCH_MISSING


FAKE_OUTPUT_CODE = '''
cpp_fused_a_0 = async_compile.cpp_pybinding(['const float*', 'float*', 'int64_t'], r"""
extern "C" void kernel(const float* in_ptr0, float* out_ptr0, int64_t ks0)
{
    #pragma omp parallel num_threads(2)
    {
        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1), static_cast<int64_t>(8));
    }
}
""")

class Runner:
    def call(self, args):
        arg0_1, = args
        args.clear()
        assert_size_stride(arg0_1, (4, 4), (4, 1), 'input')
        buf0 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
        buf1 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
        extern_kernels.mm(arg0_1, arg0_1, out=buf0)
        cpp_fused_a_0(buf0, buf1, 4)
        buf2 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(buf1, buf1, buf1)
        return (buf1, )
'''


def test_analyse_output_code_finds_kernels_externs_and_threads():
    f = ind.analyse_output_code(FAKE_OUTPUT_CODE)
    assert f.kernels == {"cpp_fused_a_0": ["const float*", "float*", "int64_t"]}
    assert f.sequence == ["cpp_fused_a_0"]
    assert f.foreign == ["extern_kernels.mm", "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"]
    assert f.omp_threads == 2
    assert f.vector_lanes == [8]
    assert not f.control_flow


# ---------------------------------------------------------------- with torch

@needs_torch
@pytest.mark.parametrize("name", list(SMALL))
def test_eager_reference_matches_oracle(name):
    op = ops.get(name)
    inputs = op.make_inputs(SMALL[name], 3)
    y = ind.reference_output(name, inputs, SMALL[name])
    assert y.shape == tuple(op.buffer_shapes(SMALL[name])[op.output])
    assert ops.oracle_error(y, op.expected(inputs, SMALL[name]))[1] <= _bound(op)


@needs_torch
def test_masked_softmax_reference_zeroes_fully_masked_row():
    op = ops.get("masked_softmax")
    inputs = op.make_inputs((9, 37), 0)
    assert not inputs["mask"][5].any()
    y = ind.reference_output("masked_softmax", inputs)
    assert np.all(y[5] == 0.0) and np.all(np.isfinite(y))


def _check_column(name, shape, seed=1):
    from cohort.backend import timer
    col = ind.column(name, shape, seed=seed)
    assert col.facts is not None and col.facts.omp_threads == 1, "Inductor must bake one thread"
    assert "#pragma omp parallel" not in col.source
    entry = col.native()
    assert entry is not None, col.native_reason
    assert entry.kind == "inductor-kernels" and entry.whole_graph
    assert entry.kernels == col.facts.sequence and entry.kernels
    for boundary in ("native", "e2e"):
        c = col.check(boundary)
        assert c["ok"], c
    ns = timer.time_entry(entry.fn_address, entry.arg_address, 20, 3)
    assert np.all(ns > 0)
    overhead = float(np.median(entry.overhead_ns(200, 3)))
    assert 0 < overhead and np.isfinite(overhead)     # measured: its size is for benchmarks, not tests
    assert col.guards_intact()
    assert col.check("native")["ok"]            # still right after the timed calls
    return col


@needs_torch
def test_rmsnorm_native_and_e2e_within_oracle_bound():
    col = _check_column("rmsnorm", SMALL["rmsnorm"])
    assert col.compile_seconds > 0
    d = col.describe()
    assert d["kernels"] and d["extern_calls"] == [] and d["omp_threads"] == 1


@needs_torch
def test_masked_softmax_native_path_with_fully_masked_row():
    col = _check_column("masked_softmax", SMALL["masked_softmax"], seed=0)
    y = col.output("native")
    assert np.all(y[5] == 0.0) and np.all(np.isfinite(y))


@needs_torch
def test_rope_native_path():
    _check_column("rope", SMALL["rope"])


@needs_torch
def test_harness_protocol_poison_then_timed_run():
    """audit/columns.py: reset_output(poison), timed runs, native_output() read back."""
    from cohort.backend import timer
    op = ops.get("gelu_residual")
    col = ind.column("gelu_residual", SMALL["gelu_residual"], seed=4)
    entry = col.native()
    oracle = op.oracle(col.inputs)
    col.reset_output(-7.0)
    assert np.all(col.native_output() == -7.0)
    timer.time_entry(entry.fn_address, entry.arg_address, 5, 2)
    assert ops.oracle_error(col.native_output(), oracle)[1] <= ind.REL_TOL_FACTOR * op.rel_tol
    assert ops.oracle_error(col.e2e_output(), oracle)[1] <= ind.REL_TOL_FACTOR * op.rel_tol
    assert col.guards_intact()


@needs_torch
def test_e2e_callable_and_bad_boundary():
    col = ind.column("swiglu", SMALL["swiglu"], seed=2)
    y = col.e2e()()
    assert tuple(y.shape) == SMALL["swiglu"]
    with pytest.raises(ValueError):
        col.output("python")


@needs_torch
def test_refuses_graph_with_extern_matmul():
    """A graph whose call() runs an extern kernel (mm) is never timed as whole."""
    import torch

    def with_matmul(x, w):
        return torch.softmax(x @ x.t(), dim=-1) @ x * w

    col = ind.column("rmsnorm", (8, 16), fn=with_matmul, aoti=False)
    assert any("mm" in e for e in col.extern_calls), col.extern_calls
    assert col.native() is None
    assert "partial graph" in col.native_reason and "extern_kernels" in col.native_reason
    with pytest.raises(RuntimeError, match="no native entry"):
        col.output("native")
    assert col.check("e2e")["abs_err"] >= 0       # the E2E path still runs


# ---------------------------------------------------------------- slow

@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("name", ["layernorm", "swiglu", "gelu_residual"])
def test_other_row_operators_native(name):
    _check_column(name, SMALL[name])


@needs_torch
@pytest.mark.slow
def test_attention_jit_graph_is_partial_and_refused():
    col = ind.column("attention", SMALL["attention"], aoti=False)
    assert col.native() is None
    assert "scaled_dot_product" in col.native_reason
    assert col.check("e2e")["ok"]


@needs_torch
@pytest.mark.slow
def test_attention_aoti_whole_graph():
    from cohort.backend import timer
    col = ind.column("attention", SMALL["attention"])
    try:
        with warnings.catch_warnings():     # torch's own deprecation warnings stay off the user's output
            warnings.simplefilter("error", FutureWarning)
            entry = col.native()
        assert entry is not None, col.native_reason
        assert entry.kind == "aoti" and entry.whole_graph
        c = col.check("native")
        assert c["ok"], c
        ns = timer.time_entry(entry.fn_address, entry.arg_address, 50, 3)
        assert np.all(ns > 0) and entry.errors() == 0
        assert col.check("native")["ok"]
        col.reset_output(-7.0)
        assert np.all(col.native_output() == -7.0)
        entry.run()
        assert col.check("native")["ok"] and entry.errors() == 0
        assert col.aoti_compile_seconds > 0
    finally:
        col.close()


def test_trampoline_calls_a_sequence_with_mixed_argument_types():
    """The trampoline IR (no torch needed): two kernels, pointer and integer
    arguments, called in order from one `void tramp(int64_t *args)`."""
    import ctypes

    from cohort.backend import jit, timer
    kernels = jit.compile_module("""
define void @k_add1(ptr %a, ptr %b) {
  %x = load float, ptr %a, align 4
  %y = fadd float %x, 1.0
  store float %y, ptr %b, align 4
  ret void
}
define void @k_scale(ptr %b, i64 %n, ptr %c) {
  %x = load float, ptr %b, align 4
  %f = sitofp i64 %n to float
  %y = fmul float %x, %f
  store float %y, ptr %c, align 4
  ret void
}
""", ["k_add1", "k_scale"])
    ir = ind.trampoline_ir("cohort_test_tramp", [(kernels.addresses["k_add1"], ["ptr", "ptr"]),
                                                 (kernels.addresses["k_scale"], ["ptr", "i64", "ptr"])])
    tramp = jit.compile_module(ir, ["cohort_test_tramp"])
    a, b, c = (np.array([v], np.float32) for v in (2.0, 0.0, 0.0))
    args = np.array([a.ctypes.data, b.ctypes.data, b.ctypes.data, 5, c.ctypes.data], np.int64)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(tramp.addresses["cohort_test_tramp"])(args.ctypes.data)
    assert b[0] == 3.0 and c[0] == 15.0
    assert np.all(timer.time_entry(tramp.addresses["cohort_test_tramp"], args.ctypes.data, 10, 2) > 0)

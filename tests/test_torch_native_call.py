"""The native call path (cohort/torch/native_call.py, native_call.cpp): every op it takes gives
the Python path's bits, errors and gradients, in eager mode, through the dispatcher and inside a
compiled graph; it honours the variant, pools blocks per thread, and says which path is active.

The C++ half needs a C++ compiler; without one it is skipped with the reason stats() gives. The
build is cached under ~/.cache (XDG_CACHE_HOME), so only a cold cache pays it (20-40 s here)."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import cohort.torch as ct  # noqa: E402
from cohort.backend.context import ERR_SCRATCH, ERR_UNPROVEN  # noqa: E402
from cohort.refimpl.interpreter import KernelRuntimeError  # noqa: E402
from cohort.torch import binding, launch, native_call, ops  # noqa: E402

NATIVE_OPS = [op for op in binding.TORCH_OPS.values() if op.native is not None and op.native.roles[0] == "x"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def native():
    """The native path registered in this process (built first on a cold cache)."""
    if native_call.compiler() is None:
        pytest.skip(f"no C++ compiler: {ct.stats()['call_path_why']}")
    try:
        native_call.enable()
    except native_call.NativeCallUnavailable as e:
        pytest.skip(f"the native call path is unavailable here: {e}")
    yield
    native_call.enable()     # the rest of the session as it started (auto: native)


class python_path:
    """The Python kernels inside the block, the native ones again after it."""

    def __enter__(self):
        native_call.disable("this test")

    def __exit__(self, *exc):
        native_call.enable()
        return False


def _inputs(op, shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    out = []
    for role in op.native.roles:
        if role in "xs":
            out.append(torch.randn(*shape, generator=g).to(dtype))
        elif role == "v":
            out.append(torch.randn(shape[-1], generator=g).to(dtype))
        elif role == "m":
            out.append(torch.rand(*shape, generator=g) < 0.7)
        else:
            out.append(1e-5)
    return out


def _bits(t):
    return t.detach().contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16).numpy()


def _same(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(_bits(a), _bits(b))


def _calls(op):
    """The op called three ways: cohort.torch's function, the dispatcher, an overload with eps as keyword."""
    fn, default = getattr(ct, op.name), op.custom_op._opoverload
    return {"eager": fn, "dispatcher": default, "packet": getattr(torch.ops.cohort, op.name)}


def _native_launches():
    return ct.stats()["native_launches"]


SHAPES = [(1, 64), (3, 5, 96), (3, 5, 96), (2, 4096), (1, 4096), (7, 33)]


@pytest.mark.parametrize("op", NATIVE_OPS, ids=lambda o: o.name)
def test_every_op_gives_the_python_paths_bits_first_and_repeated_shapes(native, op):
    with python_path():
        want = [[f(*_inputs(op, s, i)) for f in _calls(op).values()] for i, s in enumerate(SHAPES)]
    before = _native_launches()
    got = [[f(*_inputs(op, s, i)) for f in _calls(op).values()] for i, s in enumerate(SHAPES)]
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            _same(a, b)
    assert _native_launches() > before      # the repeated shapes ran from C++


@pytest.mark.parametrize("op", NATIVE_OPS, ids=lambda o: o.name)
def test_zero_size_non_contiguous_and_half_inputs_fall_back_with_the_same_bits(native, op):
    cases = [_inputs(op, (0, 16)), _inputs(op, (4, 0)) if not op.native.row else _inputs(op, (0, 8)),
             [a.t() if isinstance(a, torch.Tensor) and a.dim() == 2 else a for a in _inputs(op, (24, 24), 3)],
             _inputs(op, (2, 40), 4, torch.bfloat16), _inputs(op, (2, 40), 5, torch.float16)]
    if op.native.row:      # a non-contiguous x with a contiguous weight: x transposed, weight fresh
        x = torch.randn(40, 24).t()
        cases.append([x if i == 0 else a for i, a in enumerate(_inputs(op, (24, 40), 6))])
    with python_path():
        want = [[f(*c) for f in _calls(op).values()] for c in cases]
    for c, w in zip(cases, want):
        for a, b in zip(w, [f(*c) for f in _calls(op).values()]):
            _same(a, b)


@pytest.mark.parametrize("op", NATIVE_OPS, ids=lambda o: o.name)
def test_gradients_are_recorded_as_on_the_python_path(native, op):
    if op.backward is None:
        pytest.skip("no backward")

    def grads():
        args = [a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in _inputs(op, (3, 48), 7)]
        y = getattr(ct, op.name)(*args)
        (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape)).sum().backward()
        return [y] + [a.grad for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]

    with python_path():
        want = grads()
    for a, b in zip(want, grads()):
        _same(a, b)


def _error(f, *args):
    try:
        f(*args)
    except Exception as e:  # noqa: BLE001 - the type and message are what is compared
        return type(e), str(e)
    raise AssertionError("no error")


def _outcome(f):
    """(exception type, message), or the output's bits."""
    try:
        y = f()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return _bits(y).tobytes(), tuple(y.shape)


def test_bad_arguments_raise_the_python_paths_errors(native):
    x, w, b = torch.randn(2, 8), torch.randn(8), torch.randn(8)
    bad = [
        ("rmsnorm", (x.int(), w, 1e-6)), ("rmsnorm", (x, torch.randn(7), 1e-6)), ("rmsnorm", (x, w, -1.0)),
        ("rmsnorm", (x, w, float("nan"))), ("rmsnorm", (x, w.double(), 1e-6)), ("rmsnorm", (x, w, 1e39)),
        ("layernorm", (x, w, torch.randn(9), 1e-5)), ("layernorm", (x, w, b, -0.5)),
        ("swiglu", (x, torch.randn(2, 9))), ("swiglu", (x, x.half())), ("gelu", (x.long(),)),
        ("masked_softmax", (x, torch.ones(2, 8))),
    ]
    for name, args in bad:
        fns = [getattr(ct, name), getattr(torch.ops.cohort, name).default]
        with python_path():
            want = [_error(f, *args) for f in fns]
        assert [_error(f, *args) for f in fns] == want, name
        assert want[0][0] in (TypeError, ValueError), (name, want)


def test_inside_a_compiled_graph_and_under_fake_and_meta_tensors(native):
    x, w = torch.randn(4, 64), torch.randn(64)
    g, u = torch.randn(4, 64), torch.randn(4, 64)

    def f(x, w, g, u):
        return ct.gelu(ct.swiglu(ct.rmsnorm(x, w, 1e-6), u) + g)

    compiled = torch.compile(f, fullgraph=True)
    with python_path():
        want = f(x, w, g, u)
    with torch.no_grad():
        compiled(x, w, g, u)
        before = _native_launches()
        got = compiled(x, w, g, u)
    _same(want, got)
    assert _native_launches() >= before + 3          # every op of the graph from C++
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        y = ct.rmsnorm(mode.from_tensor(x), mode.from_tensor(w))
        assert y.shape == x.shape and type(y).__name__ == "FakeTensor"
    meta = (x.to("meta"), w.to("meta"), w.to("meta"), 1e-5)       # rejected (CPU only), as on the Python path
    with python_path():
        want = _error(torch.ops.cohort.layernorm.default, *meta)
    assert _error(torch.ops.cohort.layernorm.default, *meta) == want
    assert want == (ValueError, "layernorm: x must be on the CPU, got device meta")


def _blocks_of(variant_label):
    return [p for p, _ in native_call._blocks.values() if p.ck.variant.label == variant_label]


def test_the_variant_is_honoured_scoped_and_process_wide(native):
    x, w = torch.randn(5, 80), torch.randn(80)
    with python_path():
        want = ct.rmsnorm(x, w)
    for spec in ("whole", "lanes=4"):
        label = launch._parse(spec).label
        had = len(_blocks_of(label))
        with ct.variant(spec):
            before = _native_launches()
            for _ in range(3):
                _same(ct.rmsnorm(x, w), want)
            assert _native_launches() >= before + 2      # the second and third from C++ ...
        assert len(_blocks_of(label)) == had + 1         # ... on a block of the scoped variant's build
    default_label = launch.current_variant().label
    had = len(_blocks_of(default_label))
    for _ in range(3):
        _same(ct.rmsnorm(x, w), want)                    # outside the block: the default's build again
    assert len(_blocks_of(default_label)) == had + 1
    x2 = torch.randn(6, 80)
    with python_path():
        want2 = ct.rmsnorm(x2, w)
    had = len(_blocks_of("whole"))
    ct.variant("whole")                                  # a process-wide setting
    try:
        for _ in range(3):
            _same(ct.rmsnorm(x2, w), want2)
        assert len(_blocks_of("whole")) == had + 1
    finally:
        ct.variant(launch.DEFAULT_VARIANT)
    before = _native_launches()
    _same(ct.rmsnorm(x2, w), want2)                      # the default again: its own block (a miss)
    assert _native_launches() == before


def test_a_variant_scoped_in_one_thread_leaves_the_other_threads_alone(native):
    x, w = torch.randn(3, 72), torch.randn(72)
    seen = {}

    def run(spec):
        with ct.variant(spec):
            for _ in range(20):
                ct.rmsnorm(x, w)
            seen[spec] = launch.current_variant().label

    had = {lab: len(_blocks_of(lab)) for lab in ("whole", launch.current_variant().label)}
    t = threading.Thread(target=run, args=("whole",))
    t.start()
    for _ in range(20):
        ct.rmsnorm(x, w)
    t.join()
    assert seen["whole"] == "whole"
    assert len(_blocks_of("whole")) >= had["whole"] + 1
    assert len(_blocks_of(launch.current_variant().label)) >= had[launch.current_variant().label] + 1


def test_two_threads_on_one_shape_never_share_a_block(native):
    w = torch.randn(256)
    xs = [torch.randn(2, 256, generator=torch.Generator().manual_seed(i)) for i in range(8)]
    with python_path():
        want = [ct.rmsnorm(x, w) for x in xs]
    errors = []

    def hammer(k):
        for r in range(300):
            i = (r + k) % len(xs)
            y = ct.rmsnorm(xs[i], w)
            if not torch.equal(y, want[i]):
                errors.append((k, r))

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_recorded_error_is_the_python_paths_and_an_unproven_launch_reruns_checked(native):
    x, w = torch.randn(3, 136), torch.randn(136)
    want = ct.rmsnorm(x, w)
    ct.rmsnorm(x, w)
    ck = launch.launcher(ops.op_kernel("rmsnorm"), (("cols", 136),), True).ck
    blocks = [p for p, _ in native_call._blocks.values() if p.ck is ck]     # this shape's (the only one at cols 136)
    assert len(blocks) == 1
    for p in blocks:
        p.err[0] = ERR_UNPROVEN          # as if the proof had failed: nothing ran, rerun checked
    _same(ct.rmsnorm(x, w), want)
    assert any(p.fallback for p in blocks)
    for p in blocks:
        p.err[0] = ERR_SCRATCH
    with pytest.raises(KernelRuntimeError, match="too little scratch memory"):
        ct.rmsnorm(x, w)
    for p in blocks:
        p.err[:] = 0
    _same(ct.rmsnorm(x, w), want)


def test_recording_pauses_the_native_path_so_every_launch_is_listed(native):
    x, w = torch.randn(2, 64), torch.randn(64)
    ct.rmsnorm(x, w)
    with launch.recording() as launches:
        ct.rmsnorm(x, w)
        torch.ops.cohort.rmsnorm.default(x, w, 1e-6)
    assert len(launches) == 2


def test_stats_says_native_when_registered(native):
    # a launch of its own: the test must not depend on which tests ran before it in this worker
    before = ct.stats()["native_launches"]
    x, w = torch.randn(2, 64), torch.randn(64)
    ct.rmsnorm(x, w)
    ct.rmsnorm(x, w)
    s = ct.stats()
    assert s["call_path"] == "native" and s["call_path_why"] == ""
    assert s["launches"] >= s["native_launches"] > before


def _child(env: dict, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": ROOT, **env}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


_REPORT = ("import torch, cohort.torch as ct; x = torch.randn(2, 8); y = ct.rmsnorm(x, torch.ones(8)); "
           "y = ct.rmsnorm(x, torch.ones(8)); s = ct.stats(); print(s['call_path'], '|', s['call_path_why'], '|', "
           "s['native_launches'])")


def test_the_knob_python_keeps_the_python_path():
    out = _child({"COHORT_TORCH_CALL": "python"}, _REPORT).strip()
    assert out == "python | COHORT_TORCH_CALL=python | 0"


def test_a_failing_build_falls_back_to_python_with_the_reason(tmp_path):
    cxx = tmp_path / "broken-c++"
    cxx.write_text("#!/bin/sh\necho 'fatal error: this compiler builds nothing' >&2\nexit 1\n")
    cxx.chmod(0o755)
    out = _child({"COHORT_TORCH_CALL": "native", "CXX": str(cxx), "XDG_CACHE_HOME": str(tmp_path / "cache")},
                 _REPORT).strip()
    path, why, launches = out.split(" | ")
    assert path == "python" and launches == "0"
    assert why.startswith("the build failed: ") and "this compiler builds nothing" in why


def test_auto_builds_in_the_background_then_reports_a_failed_build(tmp_path):
    cxx = tmp_path / "broken-c++"
    cxx.write_text("#!/bin/sh\necho 'fatal error: this compiler builds nothing' >&2\nexit 1\n")
    cxx.chmod(0o755)
    env = {"COHORT_TORCH_CALL": "auto", "CXX": str(cxx), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    path, why, _ = _child(env, _REPORT).strip().split(" | ")
    assert path == "python" and why.startswith("building in the background")
    for _ in range(300):                       # the build process outlives the one that started it
        if not list((tmp_path / "cache").rglob("*.building")):
            break
        time.sleep(0.1)
    path, why, _ = _child(env, _REPORT).strip().split(" | ")
    assert path == "python" and why.startswith("the build failed: fatal error: this compiler builds nothing")
    assert "builds again" in why               # not retried at every import


def _attention_cases():
    g = torch.Generator().manual_seed(11)
    r = lambda *s: torch.randn(*s, generator=g)
    q, k = r(1, 4, 24, 16), r(1, 2, 24, 16)
    v = r(1, 24, 2, 16).transpose(1, 2)                  # as transformers' views: non-contiguous
    q1 = r(2, 4, 1, 16)
    k2, v2 = r(2, 2, 9, 16), r(2, 2, 9, 8)
    return [(q, k, v, True, None), (q, k, v, False, 0.3), (q, k, v, True, None, None, 5),
            (q1, k2, v2, True, None), (q1, k2, v2, False, 0.125, None, None)]


def test_attention_gives_the_python_paths_bits_eager_and_compiled(native):
    op = torch.ops.cohort.attention.default
    cases = _attention_cases()
    with python_path():
        want = [op(*c) for c in cases]
    before = _native_launches()
    for _ in range(2):                                   # a first launch of each shape, then a repeated one
        for c, w in zip(cases, want):
            _same(op(*c), w)
            _same(ct.attention(*c), w)
    assert _native_launches() >= before + len(cases)
    q, k, v = cases[0][:3]
    before = _native_launches()
    _same(ct.attention(q, k, v, causal=True), want[0])                  # keywords: the schema's names
    _same(ct.attention(q, k, v, scale=0.3), want[1])
    assert _native_launches() == before + 2
    calls = [lambda: ct.attention(q, k, v, True, causal=True), lambda: ct.attention(q, k, v, causal=1),
             lambda: ct.attention(q, k, v, casual=True)]
    with python_path():
        wrong = [_outcome(f) for f in calls]
    assert [_outcome(f) for f in calls] == wrong and wrong[0][0] is TypeError and wrong[2][0] is TypeError
    f = torch.compile(lambda q, k, v: ct.attention(q, k, v, causal=True), fullgraph=True)
    with torch.no_grad():
        f(*cases[0][:3])
        before = _native_launches()
        _same(f(*cases[0][:3]), want[0])
    assert _native_launches() == before + 1


def test_attention_falls_back_for_a_mask_and_keeps_its_errors(native):
    q, k, v = _attention_cases()[0][:3]
    mask = torch.rand(1, 1, 24, 24) < 0.8
    op = torch.ops.cohort.attention.default
    bad = [(q, k, v[..., :8].contiguous()[:, :1], True, None), (q, k[..., :8], v, False, None),
           (q, k, v, False, None, None, 3), (q, k, v, True, -1.0 * float("inf")), (q.double(), k, v, True, None)]
    with python_path():
        want = op(q, k, v, False, None, mask)
        errors = [_error(op, *c) for c in bad]
    before = _native_launches()
    _same(op(q, k, v, False, None, mask), want)
    _same(op(q, k, v, False, None, mask), want)
    assert _native_launches() == before                 # a mask: the Python implementation every time
    assert [_error(op, *c) for c in bad] == errors
    assert all(e[0] in (TypeError, ValueError) for e in errors), errors


def test_rope_gives_the_python_paths_bits_and_a_broadcast_table_stays_in_python(native):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 10, 16, generator=g)
    cos, sin = torch.randn(10, 6, generator=g), torch.randn(10, 6, generator=g)
    xt = x.transpose(0, 1).contiguous().transpose(0, 1)      # x's shape, not contiguous
    cases = [(x, cos, sin, False), (x, cos, sin, True), (xt, cos, sin, True),
             (x, cos.expand(2, 3, 10, 6), sin.expand(2, 3, 10, 6), False)]
    op = torch.ops.cohort.rope.default
    with python_path():
        want = [op(*c) for c in cases]
    for _ in range(2):
        before = _native_launches()
        for c, w in zip(cases, want):
            _same(op(*c), w)
            _same(ct.rope(*c[:3], interleaved=c[3]), w)
    assert _native_launches() == before + 6          # 3 cases x 2 calls; the broadcast table (a copy): Python
    calls = [lambda: ct.rope(x, cos, sin), lambda: ct.rope(x, cos, sin, interleaved=1),
             lambda: ct.rope(x, cos, sin, None)]        # interleaved has no default: the function's own error
    with python_path():
        want = [_outcome(f) for f in calls]
    assert [_outcome(f) for f in calls] == want and all(w[0] is TypeError for w in want)


# ---------------------------------------------------------------- rope_hf: native_call.cpp's composite

def _rope_hf_case(lead=(), heads=4, kv_heads=2, S=9, D=16, R=12, seed=3):
    """q and k as transformers' attention makes them ([B, S, H, D] projections viewed as
    [B, H, S, D]: not contiguous), tables [S, R] or [1, S, R] whose halves are rope_half's
    [S, R/2] tables repeated (R < D: partial rotary), and the interpreter's outputs for q and k
    (the rope_half operator on the same tables)."""
    from cohort.refimpl import ops as refops
    op = refops.get("rope_half")
    out = {}
    for name, n, s in (("q", heads, seed), ("k", kv_heads, seed + 1)):
        inputs = op.make_inputs((n, S, D, R), s)
        if name == "k":
            inputs = {**inputs, "cos": out["q"][2], "sin": out["q"][3]}
        ref = torch.from_numpy(np.ascontiguousarray(refops.run_reference(op, (n, S, D, R), inputs)))
        x = torch.from_numpy(np.ascontiguousarray(inputs["x"])).transpose(0, 1).contiguous().transpose(0, 1)
        out[name] = (x[None], ref[None], inputs["cos"], inputs["sin"])
    c, s = torch.from_numpy(out["q"][2]), torch.from_numpy(out["q"][3])
    cos, sin = torch.cat((c, c), -1).reshape(*lead, S, R), torch.cat((s, s), -1).reshape(*lead, S, R)
    return out["q"][0], out["k"][0], cos, sin, (out["q"][1], out["k"][1])


def _python_frames(f):
    """f's result and the names of the Python functions it called."""
    names = []
    sys.setprofile(lambda frame, event, arg: names.append(frame.f_code.co_name) if event == "call" else None)
    try:
        return f(), names
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("lead", [(), (1,)], ids=["[S,R]", "[1,S,R]"])
def test_rope_hf_is_native_with_the_python_paths_and_the_interpreters_bits(native, lead):
    q, k, cos, sin, ref = _rope_hf_case(lead)
    assert not q.is_contiguous() and not k.is_contiguous()
    calls = {"dispatcher": lambda: torch.ops.cohort.rope_hf.default(q, k, cos, sin),
             "eager": lambda: ct.rope_hf(q, k, cos, sin)}
    with python_path():
        want = {name: f() for name, f in calls.items()}
    for name, f in calls.items():
        f()                                                  # a first launch of each shape: Python hands blocks over
        before = _native_launches()
        got, frames = _python_frames(f)
        assert _native_launches() == before + 2, name        # q's and k's launches, from C++ ...
        assert "rope_hf_impl" not in frames and "rope_impl" not in frames, (name, frames)   # ... with no Python
        for g, w, r in zip(got, want[name], ref):
            _same(g, w)
            _same(g, r)
    compiled = torch.compile(lambda q, k, c, s: ct.rope_hf(q, k, c, s), fullgraph=True)
    with torch.no_grad():
        compiled(q, k, cos, sin)
        before = _native_launches()
        got = compiled(q, k, cos, sin)
    assert _native_launches() == before + 2
    for g, r in zip(got, ref):
        _same(g, r)
    s = ct.stats()
    assert s["call_path"] == "native" and "rope_hf" in s["native_ops"] and "rope" in s["native_ops"]


def test_rope_hf_halves_are_checked_in_cpp_on_every_call_as_torch_equal_compares_them(native):
    q, k, cos, sin, _ = _rope_hf_case()
    op = torch.ops.cohort.rope_hf.default
    op(q, k, cos, sin)
    R = cos.shape[-1]
    differ = cos.clone()
    differ[4, R // 2 + 1] = torch.nextafter(differ[4, 1], torch.tensor(2.0))      # one ulp, one element
    nan = cos.clone()
    nan[2, 0] = nan[2, R // 2] = float("nan")          # the same bits, but NaN != NaN (torch.equal: differ)
    zeros = sin.clone()
    zeros[3, 0], zeros[3, R // 2] = 0.0, -0.0          # other bits, but 0.0 == -0.0 (torch.equal: equal)
    cases = [(q, k, differ, sin), (q, k, cos, differ.neg()), (q, k, nan, sin), (q, k, cos, zeros)]
    with python_path():
        want = [_outcome(lambda c=c: op(*c)[0]) for c in cases]
    assert [w[0] for w in want[:3]] == [ValueError] * 3 and isinstance(want[3][0], bytes)
    assert want[0][1].startswith("rope_hf: the two halves of cos (or sin) differ")
    for c, w in zip(cases, want):
        got, frames = _python_frames(lambda c=c: _outcome(lambda: op(*c)[0]))
        assert got == w
        assert "rope_hf_impl" not in frames, frames      # raised (or accepted) by native_call.cpp
    for _ in range(2):                                   # every call, not once per shape
        with pytest.raises(ValueError, match="the two halves of cos"):
            ct.rope_hf(q, k, differ, sin)


def test_rope_hf_falls_back_to_python_where_cpp_does_not_take_it(native):
    q, k, cos, sin, _ = _rope_hf_case()
    g = torch.Generator().manual_seed(8)
    per_row = torch.randn(2, 9, 6, generator=g).repeat(1, 1, 2)          # [B, S, R]: a table per row
    q2, k2 = torch.cat((q, q.flip(2))), torch.cat((k, k.flip(2)))
    cases = [(q2, k2, per_row.cos(), per_row.sin()),                     # expanded over the heads: Python
             (q.to(torch.bfloat16), k.to(torch.bfloat16), cos.to(torch.bfloat16), sin.to(torch.bfloat16)),
             (q[:, :, :0], k[:, :, :0], cos[:0], sin[:0]),               # zero-size
             (q, k[:, :, :5], cos, sin), (q, k, cos[..., :7], sin[..., :7]), (q, k.double(), cos, sin),
             (q, k, cos, sin[..., :8])]                                  # the Python path's errors
    op = torch.ops.cohort.rope_hf.default
    with python_path():
        want = [_outcome(lambda c=c: torch.cat([t.flatten() for t in op(*c)])) for c in cases]
    before = _native_launches()
    assert [_outcome(lambda c=c: torch.cat([t.flatten() for t in op(*c)])) for c in cases] == want
    assert _native_launches() == before                 # none from C++
    assert [w[0] for w in want[3:]] == [ValueError, ValueError, TypeError, ValueError]
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()      # a gradient to record: Python's autograd
    with python_path():
        a, b = ct.rope_hf(qg, kg, cos, sin)
        (a.sum() + 2 * b.sum()).backward()
        want = [a, b, qg.grad, kg.grad]
    qg.grad = kg.grad = None
    a, b = ct.rope_hf(qg, kg, cos, sin)
    (a.sum() + 2 * b.sum()).backward()
    for x, w in zip([a, b, qg.grad, kg.grad], want):
        _same(x, w)
    with launch.recording() as launches:                # recording: the Python implementation, every launch listed
        ct.rope_hf(q, k, cos, sin)
    assert len(launches) == 2


def test_rope_hf_on_the_python_path_when_the_native_one_is_off():
    out = _child({"COHORT_TORCH_CALL": "python"}, (
        "import torch, cohort.torch as ct; q = torch.randn(1, 4, 5, 8); k = torch.randn(1, 2, 5, 8); "
        "c = torch.randn(5, 4).repeat(1, 2); y = ct.rope_hf(q, k, c, c); y = ct.rope_hf(q, k, c, c); "
        "s = ct.stats(); print(s['call_path'], s['native_ops'], s['native_launches'], s['launches'])")).strip()
    assert out == "python () 0 4"

"""cohort.triton's native mode (compiled by llvmlite) agrees bit for bit with the reference on
every example kernel at several sizes (partial last blocks, odd sizes); check mode compares
the two and names the first differing element (a planted bug in the tile lowering is caught);
out-of-bounds accesses fail with the reference's message before a store writes anything; a
construct native mode does not lower is refused with its name and line before anything runs;
the build for other machines' widths (AVX2, AVX-512, NEON) is made by cross-compiling."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402
from conftest import example_module  # noqa: E402

import cohort.triton as ct  # noqa: E402
from cohort.backend.inject import inject_bug_TESTING_ONLY  # noqa: E402
from cohort.triton import launch, native  # noqa: E402

EX = example_module("triton_kernels.py")

# each example kernel at sizes with a partial last block, odd rows and columns, one program
SIZES = {
    "vector add": [dict(n=1), dict(n=255), dict(n=1001), dict(n=4097)],
    "fused softmax": [dict(rows=1, cols=1), dict(rows=37, cols=100), dict(rows=9, cols=513)],
    "matmul (grouped, masked edges)": [dict(M=1, N=1, K=1), dict(M=45, N=37, K=53), dict(M=64, N=96, K=33)],
    "low-memory dropout": [dict(n=3001), dict(n=513)],
    "layer norm forward": [dict(rows=19, cols=300), dict(rows=3, cols=1), dict(rows=5, cols=129)],
    "layer norm backward": [dict(rows=23, cols=100), dict(rows=5, cols=33)],
    "attention forward": [dict(heads=3, T=45, D=16), dict(heads=1, T=17, D=32)],
    "attention forward causal": [dict(heads=3, T=45, D=16), dict(heads=2, T=1, D=16)],
    "rmsnorm": [dict(rows=13, cols=333), dict(rows=2, cols=64)],
    "swiglu": [dict(rows=7, cols=99), dict(rows=1, cols=1)],
    "rotary": [dict(T=11, heads=5, D=32), dict(T=3, heads=1, D=16)],
    "cross-entropy": [dict(rows=9, vocab=1000), dict(rows=2, vocab=257)],
}
CASES = [(name, size) for name, sizes in SIZES.items() for size in sizes]


def _bits(t):
    t = t.detach().contiguous()
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16 if t.element_size() == 2 else torch.int8
                  if t.element_size() == 1 else torch.int64).numpy().copy()


def _outputs(name, size, mode, threads=None):
    launch_, _, _ = EX.CASES[name](torch.Generator().manual_seed(0), **size)
    with ct.on_cpu(mode=mode, threads=threads):
        out = launch_()
        if mode == "native":
            out = launch_()                 # the second launch takes the fast path (native_launch.py)
    return [_bits(o) for o in (out if isinstance(out, tuple) else (out,))]


def test_every_example_kernel_is_covered():
    assert set(SIZES) == set(EX.CASES)


@pytest.mark.parametrize("name,size", CASES, ids=[f"{n}-{'x'.join(map(str, s.values()))}" for n, s in CASES])
def test_native_is_the_reference_bit_for_bit(name, size):
    want = _outputs(name, size, "reference")
    got = _outputs(name, size, "native")
    for w, g in zip(want, got):
        assert np.array_equal(w, g), f"{name} {size}: {np.flatnonzero(w.reshape(-1) != g.reshape(-1))[:5]}"


@pytest.mark.parametrize("name", ["fused softmax", "matmul (grouped, masked edges)", "layer norm backward",
                                  "attention forward causal"])
def test_native_on_the_pool_and_check_mode(name):
    size = SIZES[name][1] if len(SIZES[name]) > 1 else SIZES[name][0]
    want = _outputs(name, size, "reference")
    for got in (_outputs(name, size, "native", threads=2), _outputs(name, size, "check")):
        for w, g in zip(want, got):
            assert np.array_equal(w, g)


@pytest.mark.parametrize("bug,name", [("triton_tree_order", "fused softmax"),
                                      ("triton_dot_k_descending", "matmul (grouped, masked edges)")])
def test_check_mode_catches_a_planted_bug(bug, name):
    launch_, _, _ = EX.CASES[name](torch.Generator().manual_seed(0))
    with inject_bug_TESTING_ONLY(bug), ct.on_cpu(mode="check"):
        with pytest.raises(ct.CheckMismatch, match=r"check: native and reference differ in argument `\w+` at "
                                                   r"element \d+ .*native .* \(bits 0x[0-9a-f]+\), reference"):
            launch_()
    with ct.on_cpu(mode="check"):           # the clean build agrees again (the plant is in the cache key)
        launch_()


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n, other=0.0) * 2.0, mask=o < n + 3)


@triton.jit
def strided_store_kernel(y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + 3 * o, o.to(tl.float32))


@pytest.mark.parametrize("mode", ["reference", "native", "check"])
def test_out_of_bounds_store_fails_before_writing(mode):
    x, y = torch.ones(10), torch.zeros(10)
    with ct.on_cpu(mode=mode):
        with pytest.raises(ct.KernelRuntimeError, match=r"kernel `copy_kernel` \(.*:\d+\), program \(0, 0, 0\): "
                                                         r"store out of bounds: argument `y_ptr` offset 10 \(its "
                                                         r"storage holds elements 0\.\.9"):
            copy_kernel[(1,)](x, y, 10, BLOCK=16)
    assert y.tolist() == [0.0] * 10          # nothing of the failing store was written
    y = torch.zeros(47)
    with ct.on_cpu(mode=mode):
        with pytest.raises(ct.KernelRuntimeError, match=r"offset 48 \("):
            strided_store_kernel[(1,)](y, BLOCK=32)
    assert not y.any()


def test_native_error_is_the_lowest_failing_program():
    # programs 3..7 all read past x's 100 elements; the reference stops at program 3, and so
    # does native's report, on one thread or on the pool
    for threads in (1, 2):
        with ct.on_cpu(mode="native", threads=threads):
            with pytest.raises(ct.KernelRuntimeError, match=r"program \(3, 0, 0\): load out of bounds: argument "
                                                             r"`x_ptr` offset 100 "):
                copy_kernel[(8,)](torch.ones(100), torch.zeros(400), 300, BLOCK=32)


@triton.jit
def huge_tile_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < 4, other=0) + 1.0, mask=offs < 4)


def test_unsupported_construct_is_refused_before_running():
    x = torch.zeros(4)
    for mode in ("native", "check"):
        with ct.on_cpu(mode=mode):
            # the whole program is refused: no line (`?`)
            with pytest.raises(ct.UnsupportedConstruct, match=r"kernel `huge_tile_kernel` \(.*test_triton_native.py:"
                                                              r"\?\): native mode does not lower the program's tiles "
                                                              r"need \d+ bytes; native mode holds up to 2097152 per "
                                                              r"program; run this kernel with mode='reference'"):
                huge_tile_kernel[(1,)](x, BLOCK=1 << 20)
    assert x.tolist() == [0.0] * 4


@triton.jit
def print_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < N, other=0)
    tl.device_print("v", v, v > 2.0)
    tl.device_print("sum", tl.sum(v), pid, v.to(tl.float16), v.to(tl.bfloat16))
    tl.store(y_ptr + offs, v * 2.0, mask=offs < N)


def test_device_print_prints_what_the_reference_prints(capsys):
    # in program-id order on one thread whatever the threads (as the reference); check mode
    # prints the reference's lines once and requires native's to be the same
    x = torch.arange(11, dtype=torch.float32) - 3.5
    outputs = {}
    for mode, threads in (("reference", None), ("native", 1), ("native", 2), ("check", None)):
        y = torch.zeros(11)
        with ct.on_cpu(mode=mode, threads=threads):
            print_kernel[(3,)](x, y, 11, BLOCK=4)
        assert torch.equal(y, x * 2)
        outputs[mode, threads] = capsys.readouterr().out
    want = outputs["reference", None]
    assert want.count("pid (") == 6 and "pid (2, 0, 0) sum" in want
    assert all(out == want for out in outputs.values()), outputs


def test_check_mode_names_a_print_that_differs(capsys, monkeypatch):
    x, y = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    real = native.Printer.__call__

    def off_by_one(self, site, px, py, pz, ptrs):
        return real(self, site, px + 1, py, pz, ptrs)

    monkeypatch.setattr(native.Printer, "__call__", off_by_one)
    native._compiled.clear()
    with ct.on_cpu(mode="check"):
        with pytest.raises(ct.CheckMismatch, match=r"print differently at line 1 of the output: native 'pid \(1, 0, "
                                                   r"0\) v .*', reference 'pid \(0, 0, 0\) v"):
            print_kernel[(2,)](x, y, 8, BLOCK=4)
    native._compiled.clear()


@triton.jit
def reduce_scan_kernel(x_ptr, i_ptr, out_ptr, idx_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    i = tl.load(i_ptr + r * C + c)
    tl.store(out_ptr + r * C + c, tl.cumsum(x, axis=1))
    tl.store(out_ptr + R * C + r * C + c, tl.cumsum(x, axis=0, reverse=True))
    tl.store(out_ptr + 2 * R * C + tl.arange(0, C), tl.max(x, axis=0))
    tl.store(out_ptr + 2 * R * C + C + tl.arange(0, R), tl.min(x, axis=1))
    tl.store(idx_ptr + tl.arange(0, C), tl.argmax(x, axis=0))
    tl.store(idx_ptr + C + tl.arange(0, R), tl.argmin(x, axis=1))
    tl.store(idx_ptr + C + R + tl.arange(0, C), tl.sum(i, axis=0) // (1 + (tl.xor_sum(i, axis=0) & 7)))
    tl.store(idx_ptr + 2 * C + R + tl.arange(0, C), tl.cumsum(i, axis=0).to(tl.int32) >> 1)


def test_reductions_scans_and_integer_ops_agree():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 32, generator=g)
    x[1, 3], x[2, 5], x[4, 4] = float("nan"), -0.0, x[4, 5]            # NaN, signed zero, a tie
    i = torch.randint(-50, 50, (8, 32), generator=g, dtype=torch.int32)
    outs = {}
    for mode in ("reference", "native"):
        out, idx = torch.zeros(2 * 8 * 32 + 32 + 8), torch.zeros(3 * 32 + 8, dtype=torch.int32)
        with ct.on_cpu(mode=mode):
            reduce_scan_kernel[(1,)](x, i, out, idx, R=8, C=32)
        outs[mode] = (_bits(out), _bits(idx))
    for a, b in zip(outs["reference"], outs["native"]):
        assert np.array_equal(a, b)


@triton.jit
def div_kernel(x_ptr, d_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o) // tl.load(d_ptr + o))


def test_integer_division_by_zero_is_the_references_error():
    x = torch.arange(16, dtype=torch.int32) - 8
    d = torch.full((16,), -1, dtype=torch.int32)
    d[5] = 0
    msgs = []
    for mode in ("reference", "native"):
        with ct.on_cpu(mode=mode):
            with pytest.raises(ct.KernelRuntimeError) as e:
                div_kernel[(1,)](x, d, torch.zeros(16, dtype=torch.int32), BLOCK=16)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "integer division by zero" in msgs[0]
    d[5] = 3
    x[0] = -2 ** 31
    outs = []
    for mode in ("reference", "native"):
        out = torch.zeros(16, dtype=torch.int32)
        with ct.on_cpu(mode=mode):
            div_kernel[(1,)](x, d, out, BLOCK=16)
        outs.append(out.tolist())
    assert outs[0] == outs[1] and outs[0][0] == -2 ** 31           # MIN // -1 wraps


def test_fast_path_respecialises_on_argument_kinds():
    x = torch.randn(300)
    for n, block in ((300, 64), (1, 64), (299, 128), (300, 64)):
        y_ref, y_nat = torch.zeros(310), torch.zeros(310)
        with ct.on_cpu(mode="reference"):
            copy_kernel[(triton.cdiv(n, block),)](x, y_ref, n, BLOCK=block)
        with ct.on_cpu(mode="native"):
            copy_kernel[(triton.cdiv(n, block),)](x, y_nat, n, BLOCK=block)
        assert np.array_equal(_bits(y_ref), _bits(y_nat))


def _example_programs():
    progs = {}
    with ct.on_cpu(mode="reference"):
        for name, case in EX.CASES.items():
            case(torch.Generator().manual_seed(0))[0]()
    for (jitfn, _, _), prog in list(launch._BUILDS.items()):
        if jitfn.fn.__module__ == EX.__name__:
            progs[prog.name] = prog
    return progs


def test_cross_compiled_for_every_width(width_target):
    progs = _example_programs()
    assert len(progs) >= 12
    for prog in progs.values():
        obj = native.cross_compile(prog, width_target)
        assert isinstance(obj, bytes) and len(obj) > 0
    ir_text = native.cross_compile(progs["softmax_kernel"], width_target, kind="ir")
    lanes = max(1, width_target.vector_bits // 32)
    assert f"<{lanes} x float>" in ir_text


@triton.jit
def _argmax_combine(v1, i1, v2, i2):
    pick = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(pick, v1, v2), tl.where(pick, i1, i2)


@triton.jit
def _fma_combine(a, b):
    return a * 0.5 + b


@triton.jit
def user_combine_kernel(x_ptr, out_ptr, idx_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    i = tl.broadcast_to(c, (R, C))
    v, k = tl.reduce((x, i), 1, _argmax_combine)
    tl.store(out_ptr + tl.arange(0, R), v)
    tl.store(idx_ptr + tl.arange(0, R), k)
    tl.store(out_ptr + R + r * C + c, tl.associative_scan(x, 1, _fma_combine))
    tl.store(out_ptr + R + R * C + r * C + c, tl.associative_scan(x, 0, _fma_combine, reverse=True))


def test_user_combine_functions_agree():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(5))
    x[2, 7] = x[2, 9] = 9.0                                  # a tie: the lower index wins
    outs = {}
    for mode in ("reference", "native"):
        out, idx = torch.zeros(4 + 2 * 4 * 64), torch.zeros(4, dtype=torch.int32)
        with ct.on_cpu(mode=mode):
            user_combine_kernel[(1,)](x, out, idx, R=4, C=64)
        outs[mode] = (_bits(out), _bits(idx))
    assert outs["reference"][1][2] == 7
    for a, b in zip(outs["reference"], outs["native"]):
        assert np.array_equal(a, b)


@triton.jit
def dot_forms_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)[:, None]
    c = tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + r * N + c)
    b = tl.load(b_ptr + r * N + c)
    acc = tl.zeros((N, N), dtype=tl.float32) + 0.25
    acc = tl.dot(a, b, acc)                  # into the accumulator's own array
    acc = tl.dot(a, b, acc) + acc            # the dot inside an expression that reads acc again
    acc = tl.dot(acc, b, acc)                # acc as an operand and the accumulator
    tl.store(out_ptr + r * N + c, acc)


def test_dot_forms_agree():
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(32, 32, generator=g), torch.randn(32, 32, generator=g)
    outs = []
    for mode in ("reference", "native"):
        out = torch.zeros(32, 32)
        with ct.on_cpu(mode=mode):
            dot_forms_kernel[(1,)](a, b, out, N=32)
        outs.append(_bits(out))
    assert np.array_equal(outs[0], outs[1])

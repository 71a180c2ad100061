"""bf16 and f16 storage (issue 26 item 3; DESIGN §3 "Storage types").

The conversions are defined once (`semantics.widen` / `semantics.narrow`) and
lowered once (`lower_ops.widen` / `lower_ops.narrow`). Here: every one of the
2^16 bit patterns widens exactly; a dense set of f32 patterns (every upper 20
bits with low bits at and around each rounding boundary, so every tie, every
subnormal result and every overflow) rounds as NumPy's float16 cast and
PyTorch's bfloat16 cast do (independent implementations), NaN to the canonical
NaN; and every native variant reproduces the interpreter's bits.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cohort import Buffer, KernelError, bf16, f16, f32, global_id, i32, interpret, kernel, private
from cohort.backend.compiler import compile_kernel
from cohort.backend.variant import parse_variant
from cohort.refimpl.frontend import FrontendError
from cohort.refimpl.ir import DType
from cohort.refimpl.semantics import BF16_NAN, F16_NAN, narrow, widen
from cohort.verify.compare import verify_build

BF16, F16 = DType.BF16, DType.F16
ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def dense_f32() -> np.ndarray:
    """Every upper 20 bits of an f32 (sign, exponent, 11 fraction bits) with low 12 bits
    from a set around both formats' rounding points: f16's normal tie is bit 12 exactly
    (0x1000 with low bits 0), bf16's is 0x8000 (bit 15: one of the enumerated bits), and
    subnormal f16 results round at bits 13..23, all enumerated."""
    hi = np.arange(1 << 20, dtype=np.uint32) << 12
    low = np.array([0, 1, 0x7FF, 0x800, 0x801, 0xFFF], np.uint32)
    return (hi[:, None] | low[None, :]).reshape(-1)


def torch_bf16_bits(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.ascontiguousarray(x)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


# ---------------------------------------------------------------- the definition

def test_every_bf16_pattern_widens_to_its_top_half():
    w = widen(ALL16, BF16).view(np.uint32)
    assert np.array_equal(w, ALL16.astype(np.uint32) << 16)
    t = torch.from_numpy(ALL16.view(np.int16)).view(torch.bfloat16).float().numpy().view(np.uint32)
    assert np.array_equal(w, t)           # PyTorch's widening, NaN payloads included


def test_every_f16_pattern_widens_exactly():
    w = widen(ALL16, F16)
    ref = ALL16.view(np.float16).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(w.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])   # values, ±0, ±inf, subnormals
    h = ALL16[nan].astype(np.uint32)
    # NaN: sign and payload kept (payload at the top of the f32 fraction), quiet bit set (as vcvtph2ps)
    want = ((h & 0x8000) << 16) | 0x7F800000 | ((h & 0x3FF) << 13) | 0x400000
    assert np.array_equal(w.view(np.uint32)[nan], want)
    assert np.count_nonzero(nan) == 2 * 1023


def test_f32_rounds_to_bf16_as_pytorch_does_and_nan_is_canonical():
    u = dense_f32()
    x = u.view(np.float32)
    got = narrow(x, BF16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], torch_bf16_bits(x)[~nan])
    assert np.all(got[nan] == BF16_NAN)
    # ties to even, both directions; overflow to inf; subnormals kept, not flushed
    cases = {0x3F808000: 0x3F80, 0x3F818000: 0x3F82, 0x3F808001: 0x3F81, 0x3F807FFF: 0x3F80,
             0x7F7FFFFF: 0x7F80, 0xFF7F8000: 0xFF80, 0x7F7F7FFF: 0x7F7F, 0x00018000: 0x0002,
             0x00008000: 0x0000, 0x80008001: 0x8001, 0x7F800000: 0x7F80, 0xFF800000: 0xFF80,
             0x80000000: 0x8000, 0x7F800001: BF16_NAN, 0xFFFFFFFF: BF16_NAN}
    for bits, want in cases.items():
        assert int(narrow(np.array([bits], np.uint32).view(np.float32), BF16)[0]) == want, hex(bits)


def test_f32_rounds_to_f16_as_numpy_does_and_nan_is_canonical():
    u = dense_f32()
    x = u.view(np.float32)
    got = narrow(x, F16).view(np.uint16)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(got[~nan], ref[~nan])
    assert np.all(got[nan] == F16_NAN)
    f = lambda v: int(narrow(np.array([v], np.float32), F16).view(np.uint16)[0])
    assert f(65504.0) == 0x7BFF and f(65519.99) == 0x7BFF and f(65520.0) == 0x7C00 and f(-1e30) == 0xFC00
    assert f(2.0 ** -24) == 0x0001 and f(2.0 ** -25) == 0 and f(np.nextafter(np.float32(2.0 ** -25), 1)) == 1
    assert f(3 * 2.0 ** -25) == 0x0002 and f(-(2.0 ** -14)) == 0x8400 and f(2.0 ** -14 - 2.0 ** -25) == 0x0400
    assert f(1.0 + 2.0 ** -11) == 0x3C00 and f(1.0 + 3 * 2.0 ** -11) == 0x3C02 and f(-0.0) == 0x8000


def test_round_trip_is_the_identity_on_non_nan_patterns():
    for st in (BF16, F16):
        w = widen(ALL16, st)
        back = narrow(w, st).view(np.uint16)
        nan = np.isnan(w)
        assert np.array_equal(back[~nan], ALL16[~nan])


# ---------------------------------------------------------------- kernels

@kernel
def convert(xb: Buffer[bf16], xh: Buffer[f16], xf: Buffer[f32], ob: Buffer[bf16], oh: Buffer[f16],
            wb: Buffer[f32], wh: Buffer[f32], mix: Buffer[f32], m: i32):
    i = global_id()
    wb[i] = xb[i]                       # contiguous loads
    wh[i] = xh[i]
    ob[i] = xf[i]                       # contiguous stores, rounded
    oh[i] = xf[i]
    # uniform, strided, gathered loads; a guarded (masked) one
    mix[i] = xb[m] + xh[(2 * i) % len(xh)] + xb[(i * 7919) % len(xb)] + (xh[i + 1] if i < m else 0.0)


@kernel
def scatter(xf: Buffer[f32], ob: Buffer[bf16], oh: Buffer[f16]):
    i = global_id()
    j = (i * 40503) & 65535             # a permutation of 0..65535: scattered stores
    if i % 3 != 0:                      # divergent: masked stores
        ob[j] = xf[i] * 1.5
        oh[j] = xf[i] - 0.25


def _conv_args(n=1 << 16, seed=0):
    rng = np.random.default_rng(seed)
    u = np.arange(n, dtype=np.uint32)
    xf = np.concatenate([rng.integers(0, 1 << 32, n // 2, dtype=np.uint64).astype(np.uint32),
                         ((u[: n // 2] * 0x2F3) << 13) | np.uint32(0x1000)])    # random bits, f16 ties
    return dict(xb=u.astype(np.uint16), xh=u.astype(np.uint16).view(np.float16), xf=xf.view(np.float32),
                ob=np.zeros(n, np.uint16), oh=np.zeros(n, np.float16), wb=np.zeros(n, np.float32),
                wh=np.zeros(n, np.float32), mix=np.zeros(n, np.float32), m=n - 5)


def test_interpreter_loads_and_stores_follow_the_definition():
    a = _conv_args()
    interpret(convert.ir, 1 << 16, a)
    assert np.array_equal(a["wb"].view(np.uint32), widen(a["xb"], BF16).view(np.uint32))
    assert np.array_equal(a["wh"].view(np.uint32), widen(a["xh"], F16).view(np.uint32))
    assert np.array_equal(a["ob"], narrow(a["xf"], BF16))
    assert np.array_equal(a["oh"].view(np.uint16), narrow(a["xf"], F16).view(np.uint16))


VARIANTS = ["whole", "packet", "lanes=16", "packet,predicated=off", "packet,checked=on", "packet,full_packet=off"]
MORE = ["lanes=4", "packet,interleave=2", "whole,checked=on", "lanes=4,predicated=off", "packet,private=thread",
        "packet,grain=4,workers=2", "whole,grain=auto,workers=2"]


@pytest.mark.parametrize("f16", ["auto", "software"])
@pytest.mark.parametrize("variant, n", [(v, (1 << 16) - 13) for v in VARIANTS] +
                         [pytest.param(v, n, marks=pytest.mark.slow) for v in VARIANTS + MORE
                          for n in (1 << 16, (1 << 16) - 13) if v in MORE or n == 1 << 16])
def test_every_variant_converts_bit_for_bit(variant, n, f16, monkeypatch):
    """f16: F16C's instructions where the host has them (auto), and the integer lowering."""
    monkeypatch.setenv("COHORT_F16", f16)
    for k in (convert, scatter):
        a = _conv_args()
        if k is scatter:
            a = {name: a[name] for name in ("xf", "ob", "oh")}
        v = verify_build(compile_kernel(k, {}, parse_variant(variant)), n, a)
        assert v.ok, v.describe()


def test_torch_tensors_are_buffers_of_their_dtype():
    n = 64
    xb = torch.randn(n).to(torch.bfloat16)
    xh = torch.randn(n).to(torch.float16)
    a = dict(xb=xb, xh=xh, xf=torch.randn(n), ob=torch.zeros(n, dtype=torch.bfloat16),
             oh=torch.zeros(n, dtype=torch.float16), wb=torch.zeros(n), wh=torch.zeros(n), mix=torch.zeros(n), m=n - 1)
    interpret(convert.ir, n, a)
    assert torch.equal(a["wb"], xb.float()) and torch.equal(a["wh"], xh.float())
    assert torch.equal(a["ob"], a["xf"].to(torch.bfloat16)) and torch.equal(a["oh"], a["xf"].to(torch.float16))
    ck = compile_kernel(convert, {}, parse_variant("packet"))
    b = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in a.items()}
    b["ob"].zero_()
    ck.launch(n, b)
    assert torch.equal(b["ob"], a["ob"]) and torch.equal(b["mix"], a["mix"])


# ---------------------------------------------------------------- bad input: one line naming the argument

def test_storage_types_are_buffer_element_types_only():
    with pytest.raises(FrontendError, match=r"parameter s: use Buffer\[bf16\]"):
        @kernel
        def k1(x: Buffer[f32], s: bf16):
            x[global_id()] = 1.0
    with pytest.raises(FrontendError, match=r"private\(dtype, size\): dtype must be f32, i32, u32 or bool"):
        @kernel
        def k2(x: Buffer[f32]):
            p = private(f16, 4)
            x[global_id()] = 1.0
    with pytest.raises(FrontendError, match="storing i32 into y of f32"):
        @kernel
        def k3(y: Buffer[bf16]):
            y[global_id()] = global_id()
    # the IR's validator says the same for kernels built directly (the fuzzer's way)
    from cohort.refimpl import ir
    from cohort.refimpl.spec import validate
    gid = ir.builtin(ir.Op.GLOBAL_ID)
    y = ir.Param("y", ir.ParamKind.BUFFER, BF16)
    for body, msg in [((ir.Private("p", F16, ir.const(4, DType.I32)),), "private array p of f16"),
                      ((ir.Store("y", gid, gid),), "storing i32 into buffer y of bf16"),
                      ((ir.Atomic(ir.AtomicOp.MAX, "y", gid, ir.const(1.0, DType.F32)),), "atomic_max\\(\\) on bf16")]:
        with pytest.raises(KernelError, match=msg):
            validate(ir.Kernel("k", (y,), body))
    with pytest.raises(KernelError, match="scalar parameter s must be f32, i32 or u32"):
        validate(ir.Kernel("k", (y, ir.Param("s", ir.ParamKind.SCALAR, BF16)), ()))


def test_wrong_buffer_dtypes_name_the_argument():
    a = _conv_args(64)
    a["ob"] = np.zeros(64, np.float16)
    with pytest.raises(KernelError, match=r"buffer ob must have dtype uint16 \(bf16 elements as their bits\)"):
        interpret(convert.ir, 64, a)
    a = _conv_args(64)
    a["oh"] = torch.zeros(64, dtype=torch.bfloat16)
    with pytest.raises(KernelError, match="buffer oh must have dtype float16, got torch.bfloat16"):
        interpret(convert.ir, 64, a)


@kernel
def pairs(x: Buffer[f32], yb: Buffer[bf16], yh: Buffer[f16]):
    i = global_id()
    a = x[2 * i]
    b = x[2 * i + 1]
    yb[2 * i] = a * 3.0 - b          # an interleaved pair of stores: one shuffle, one vector store
    yb[2 * i + 1] = a + b * 0.5
    yh[2 * i] = a - b
    yh[2 * i + 1] = a * b


@pytest.mark.parametrize("variant", ["whole", "packet", "lanes=16", "packet,predicated=off"])
@pytest.mark.parametrize("f16", ["auto", "software"])
def test_interleaved_stores_round_like_single_ones(variant, f16, monkeypatch):
    monkeypatch.setenv("COHORT_F16", f16)
    n = 1000
    x = np.random.default_rng(3).standard_normal(2 * n).astype(np.float32) * np.float32(3e4)
    a = dict(x=x, yb=np.zeros(2 * n, np.uint16), yh=np.zeros(2 * n, np.float16))
    v = verify_build(compile_kernel(pairs, {}, parse_variant(variant)), n - 3, a)
    assert v.ok, v.describe()


# ---------------------------------------------------------------- every operator in bf16 and f16

from cohort.refimpl import ops  # noqa: E402

SMALL = {"attention": (1, 4, 2, 16, 32, 16, 16), "attention_causal": (1, 4, 2, 16, 32, 16, 16),
         "rope_half": (1, 1, 2, 2), "rope_pairs": (4, 33, 80, 32), "rope": (3, 64)}


def _floats(name: str) -> bool:
    return any(p.dtype is DType.F32 for p in ops.get(name).kernel.ir.buffers)


def _check_operator(name: str, st: str, variants, shape=None, form=None):
    if not _floats(name):       # histogram: int32 in and out
        with pytest.raises(ops.UnknownOperator, match=f"no f32 buffer to store as bf16 or f16; "
                                                      f"{name}'s forms are {name}$"):
            ops.get(f"{name}:{st}")
        return
    op = ops.get(f"{name}:{st}", form)
    shape = shape or SMALL.get(name) or min(op.seed_sizes, key=lambda s: int(np.prod(s)))
    inp = op.make_inputs(shape, 0)
    y = ops.run_reference(op, shape, inp)
    assert y.dtype == DType(st).np
    _, rel = ops.oracle_error(y, op.oracle(inp))
    assert rel <= op.rel_tol, (op.name, shape, rel, op.rel_tol)
    launch = op.launch(shape)
    for variant in variants:
        ck = compile_kernel(op.kernel, launch.consts, parse_variant(variant))
        v = verify_build(ck, launch.n, {**ops.allocate(op, shape, inp), **launch.scalars}, {op.output: y.reshape(-1)})
        assert v.ok, (op.name, form, v.describe())


@pytest.mark.parametrize("st", ["bf16", "f16"])
@pytest.mark.parametrize("name", list(ops.OPERATORS))
def test_every_operator_in_storage_types(name, st):
    """Within the f32 operator's bound plus the output's rounding of the float64 oracle on
    the same (rounded) inputs; the packet variant bit for bit."""
    _check_operator(name, st, ["packet"])


@pytest.mark.slow
@pytest.mark.parametrize("st", ["bf16", "f16"])
@pytest.mark.parametrize("name", list(ops.OPERATORS) + list(ops.BACKWARD))
def test_every_operator_form_and_variant_in_storage_types(name, st):
    op = ops.get(name)
    for form in [op.form] + [f[0] for f in op.forms]:
        shape = op.seed_sizes[0]
        if name == "matmul" and form == "wide":        # the wide form runs fewer than REG rows of >= PANEL columns
            from cohort.refimpl.ops import matmul
            shape = (1, 16, matmul.PANEL + 5)
        _check_operator(name, st, ["whole", "packet", "lanes=16", "packet,predicated=off"], shape, form)


def test_f16_lowering_choice():
    from cohort.backend import target
    from cohort.backend.codegen import f16_lowering
    want = "hardware" if target.current().native_half else "software"
    assert f16_lowering() == want
    asm = compile_kernel(convert, {}, parse_variant("packet")).assembly()
    assert not any(f in asm for f in ("__truncsfbf2", "__extendhfsf2", "__truncsfhf2", "__gnu_"))   # no libcall
    if want == "hardware":
        assert "vcvtph2ps" in asm and "vcvtps2ph" in asm


def test_storage_operator_names_and_bounds():
    op = ops.get("rmsnorm:bf16")
    assert op.name == "rmsnorm:bf16" and op.kernel.ir.name == "rmsnorm_bf16"
    assert op.rel_tol == pytest.approx(1e-5 + 2.0 ** -8 * (1 + 1e-5))
    assert [p.dtype for p in ops.get("attention:f16").kernel.ir.buffers] == [F16, F16, F16, DType.F32, F16]
    with pytest.raises(ops.UnknownOperator, match="unknown storage type 'f64'; rmsnorm's forms are rmsnorm, "
                                                  "rmsnorm:bf16, rmsnorm:f16"):
        ops.get("rmsnorm:f64")


def test_storage_kernels_print_and_parse_back():
    from cohort.verify.gen.pysource import kernel_source, parse_source
    for k in (convert, scatter, pairs):
        text = kernel_source(k.ir)
        assert "Buffer[bf16]" in text or "Buffer[f16]" in text
        assert kernel_source(parse_source(text, k.ir.name)) == text


# ---------------------------------------------------------------- random storage kernels
# A small generator of its own (the fuzzer's, cohort/verify/gen/, draws f32/i32/u32/bool
# kernels): loads from bf16/f16/f32 buffers by every access class, f32 arithmetic, stores
# to 16-bit buffers contiguous, strided in pairs, scattered and under divergent masks,
# over bit patterns that include NaNs, infinities, subnormals and ties.

_LOADS = ["{b}[i]", "{b}[m]", "{b}[(i * 3) % n]", "{b}[n - 1 - i]", "({b}[i + 1] if i < m else 0.5)",
          "{b}[(i // 2) * 2]"]
_OPS = ["({a} + {c})", "({a} * {c})", "({a} - {c})", "min({a}, {c})", "max({a}, {c})", "fma({a}, {c}, {a})",
        "({a} / {c})", "abs({a})", "({a} if {a} < {c} else {c})", "sqrt(abs({a}))", "exp({a})"]


def _random_kernel(rng) -> str:
    def expr(depth):
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(_LOADS).format(b=rng.choice(["xb", "xh", "xf"]))
        return rng.choice(_OPS).format(a=expr(depth - 1), c=expr(depth - 1))
    lines = ["    i = global_id()"]
    stores = [f"    {o}[i] = {expr(2)}" for o in rng.sample(["ob", "oh"], rng.choice([1, 2]))]
    if rng.random() < 0.4:
        stores = ["    if (i % 3) != 1:"] + ["    " + s for s in stores]
    lines += stores
    lines.append(f"    pb[(i * 7) % n] = {expr(1)}" if rng.random() < 0.5 else f"    ph[n - 1 - i] = {expr(1)}")
    return ("@kernel\ndef rk(xb: Buffer[bf16], xh: Buffer[f16], xf: Buffer[f32], ob: Buffer[bf16], "
            "oh: Buffer[f16], pb: Buffer[bf16], ph: Buffer[f16], n: i32, m: i32):\n" + "\n".join(lines) + "\n")


def _special_bits(rng, n):
    f32 = np.concatenate([rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
                          np.array([0x7FC00000, 0xFF800000, 0x7F800000, 0x00000001, 0x80000000, 0x3F808000,
                                    0x477FF000, 0x33000000, 0x7F7FFFFF], np.uint32)])
    f32 = np.where(rng.random(len(f32)) < 0.5, f32, rng.standard_normal(len(f32)).astype(np.float32).view(np.uint32))
    return f32[:n]


@pytest.mark.parametrize("seed", list(range(8)) + [pytest.param(s, marks=pytest.mark.slow) for s in range(8, 80)])
def test_random_storage_kernels_every_variant_bit_for_bit(seed):
    from cohort.verify.gen.pysource import parse_source
    rng = np.random.default_rng(seed)
    import random
    prng = random.Random(seed)
    src = _random_kernel(prng)
    k = parse_source(src, "rk")
    n = int(rng.choice([64, 97, 1000]))
    u16 = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    args = dict(xb=u16, xh=rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16).view(np.float16),
                xf=_special_bits(rng, n).view(np.float32), ob=np.zeros(n, np.uint16), oh=np.zeros(n, np.float16),
                pb=np.zeros(n, np.uint16), ph=np.zeros(n, np.float16), n=n, m=n - 2)
    for variant in ("whole", "packet", prng.choice(["lanes=16", "packet,predicated=off", "lanes=4,checked=on"])):
        v = verify_build(compile_kernel(k, {}, parse_variant(variant)), n, args)
        assert v.ok, f"{variant}: {v.describe()}\n{src}"

"""Masked stores dispatched per vector register (lowering/memory.py masked_store): where the
target's masked stores are microcoded (AMD's AVX2 cores), each register's lanes branch
first - no store when none is on, a plain store when all are, the masked store only when
mixed. Both lowerings must write exactly the active lanes, whatever the mask's pattern, the
element's width, the packet's width or the store's grouping; the choice is part of the
compile key; a bad setting is refused."""
from __future__ import annotations

import re

import numpy as np
import pytest

from cohort import Buffer, Const, bf16, f16, f32, global_id, i32, kernel
from cohort.backend import target
from cohort.backend.codegen import masked_store_lowering
from cohort.backend.compiler import compile_kernel, cross_compile
from cohort.backend.variant import parse_variant
from cohort.knobs import MASKED_STORE
from cohort.refimpl import ops
from cohort.verify.compare import verify_build

MODES = ("intrinsic", "dispatch")
MASKED_STORE_ENV = MASKED_STORE.name
VARIANTS = ("packet", "lanes=4", "lanes=16", "packet,interleave=1", "lanes=16,full_packet=off")


@kernel(block=32)
def sparse(x: Buffer[f32], flags: Buffer[i32], y: Buffer[f32], o: Buffer[bool], h: Buffer[bf16],
           q: Buffer[f16], w: Buffer[i32], P: Const[int]):
    """Stores under masks of every pattern: lanes on where flags[g] % P == 0 (random flags),
    rows of a ragged tile (g % 32 < P), and a whole packet on or off (g // 8 % 2 == 0)."""
    g = global_id()
    f = flags[g]
    if f % P == 0:
        y[g] = x[g] * 2.0
        o[g] = x[g] > 0.0
        h[g] = x[g]
        q[g] = x[g] + 1.0
    if g % 32 < P:
        w[g] = f + 1
    if g // 8 % 2 == 0:
        y[g] = y[g] + 1.0


@kernel(block=16)
def pairs(x: Buffer[f32], y: Buffer[f32], P: Const[int]):
    """A group of two stores (y[2g], y[2g + 1]: one interleaved vector store) under a mask."""
    g = global_id()
    if g % 16 < P:
        y[2 * g] = x[g]
        y[2 * g + 1] = -x[g]


def _args(n, seed):
    rng = np.random.default_rng(seed)
    return dict(x=rng.standard_normal(n).astype(np.float32), flags=rng.integers(0, 1 << 20, n).astype(np.int32),
                y=np.full(n, 7.0, np.float32), o=np.zeros(n, np.bool_), h=np.zeros(n, np.uint16),
                q=np.zeros(n, np.float16), w=np.full(n, -3, np.int32))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("p", [1, 2, 5, 31])
def test_both_lowerings_store_exactly_the_active_lanes(mode, variant, p, monkeypatch):
    monkeypatch.setenv(MASKED_STORE_ENV, mode)
    n = 32 * 7 - 3                     # a partial block at the end
    ck = compile_kernel(sparse, {"P": p}, parse_variant(variant), n=n)
    v = verify_build(ck, n, _args(n, p))
    assert v.ok, v.describe()
    ck2 = compile_kernel(pairs, {"P": p}, parse_variant(variant), n=n)
    a = dict(x=np.arange(n, dtype=np.float32), y=np.full(2 * n, 9.0, np.float32))
    v = verify_build(ck2, n, a)
    assert v.ok, v.describe()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, shape", [("transpose", (1, 5, 64)), ("transpose", (3, 37, 70)),
                                         ("transpose", (2, 33, 9)), ("matmul", (17, 131, 19)),
                                         ("histogram", (1000, 37))])
def test_ragged_operators_agree_with_the_interpreter(mode, name, shape, monkeypatch):
    monkeypatch.setenv(MASKED_STORE_ENV, mode)
    op = ops.get(name)
    inputs = op.make_inputs(shape, 3)
    want = ops.run_reference(op, shape, inputs).reshape(-1)
    launch = op.launch(shape)
    for variant in ("packet", "lanes=16"):
        ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
        bufs = ops.allocate(op, shape, inputs)
        ck.prepare(launch.n, {**bufs, **launch.scalars}).run()
        got = bufs[op.output].reshape(-1)
        assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32)), (name, shape, variant)


def test_dispatch_branches_around_the_masked_store(monkeypatch, width_target):
    """The IR of `pairs` at 8 lanes (a block of 16 is two packets side by side, the group of
    two stores one store of 32 floats), lowered for each target: the intrinsic lowering has
    one masked store of 32 lanes per site; the dispatch one per vector register of the target
    (4 of 8 lanes on AVX2, 2 of 16 on AVX-512, 8 of 4 on NEON), each beside a plain store of
    the same register for the all-on case."""
    def ir_of(mode):
        monkeypatch.setenv(MASKED_STORE_ENV, mode)
        ir = cross_compile(pairs, width_target, parse_variant("packet"), {"P": 5}, kind="ir")
        return ir.replace('"', "")      # llvmlite quotes its names: @"llvm.masked.store.v8f32.p0"

    per = width_target.vector_bits // 32
    regs = 32 // per
    dispatched, plain = ir_of("dispatch"), ir_of("intrinsic")
    sites = plain.count("call void @llvm.masked.store.v32f32")
    assert sites >= 1 and f"llvm.masked.store.v{per}f32" not in plain
    assert "llvm.masked.store.v32f32" not in dispatched
    assert dispatched.count(f"call void @llvm.masked.store.v{per}f32") == regs * sites
    assert len(re.findall(rf"store <{per} x float> %[\w.]+, ptr", dispatched)) >= regs * sites


def test_the_host_build_follows_the_host_choice(monkeypatch):
    """What compile_kernel builds on this host is the cross-compiled IR for the host's target
    (the choice is read from target.current(), never from a width assumed here)."""
    monkeypatch.delenv(MASKED_STORE_ENV, raising=False)
    host = compile_kernel(pairs, {"P": 5}, parse_variant("packet")).llvm_ir
    per = target.host().vector_bits // 32
    if target.host().slow_masked_store:
        assert f"call void @llvm.masked.store.v{per}f32" in host and "llvm.masked.store.v32f32" not in host
    else:
        assert "call void @llvm.masked.store.v32f32" in host


def test_the_choice_follows_the_target_and_the_environment(monkeypatch):
    monkeypatch.delenv(MASKED_STORE_ENV, raising=False)
    host = target.host()
    assert masked_store_lowering() == ("dispatch" if host.slow_masked_store else "intrinsic")
    x86 = target.from_triple("x86_64-unknown-linux-gnu", cpu="znver3", features="+avx2,+fma")
    assert x86.slow_masked_store
    assert not target.from_triple("x86_64-unknown-linux-gnu", cpu="skylake", features="+avx2,+fma").slow_masked_store
    assert not target.from_triple("x86_64-unknown-linux-gnu", cpu="znver4",
                                  features="+avx2,+avx512f").slow_masked_store
    with target.use(x86):
        assert masked_store_lowering() == "dispatch"
    for mode in MODES:
        monkeypatch.setenv(MASKED_STORE_ENV, mode)
        assert masked_store_lowering() == mode
    monkeypatch.setenv(MASKED_STORE_ENV, "sometimes")
    with pytest.raises(ValueError, match=MASKED_STORE_ENV):
        masked_store_lowering()


def test_the_choice_is_part_of_the_compile_key(monkeypatch):
    built = {}
    for mode in MODES:
        monkeypatch.setenv(MASKED_STORE_ENV, mode)
        built[mode] = compile_kernel(pairs, {"P": 5}, parse_variant("packet"))
    assert built["intrinsic"] is not built["dispatch"]
    assert built["intrinsic"].llvm_ir != built["dispatch"].llvm_ir


# ---------------------------------------------------------------- one store for both sides

@kernel(block=16)
def either(x: Buffer[f32], m: Buffer[bool], y: Buffer[f32], z: Buffer[f32], n: Const[int]):
    """Both sides store to y at one index (one store of a select), under a data-dependent
    condition and inside a loop whose last packet is partial; the then side of z's pair
    reads x only where its guard holds (evaluated under its own lanes' mask)."""
    g = global_id()
    for j in range(g, n, 40):
        if m[j]:
            y[j] = x[j] * 2.0
        else:
            y[j] = -1.0
    i = g * 3
    if i < n:
        z[g] = x[i]
    else:
        z[g] = 0.5


@kernel(block=16)
def either_apart(x: Buffer[f32], m: Buffer[bool], y: Buffer[f32]):
    """The two sides' indices differ: two stores, as written."""
    g = global_id()
    if m[g]:
        y[g] = x[g]
    else:
        y[g + 40] = -x[g]


def _either_args(n, seed):
    rng = np.random.default_rng(seed)
    return dict(x=rng.standard_normal(n).astype(np.float32), m=rng.random(n) < 0.8,
                y=np.full(n, 3.0, np.float32), z=np.full(40, 9.0, np.float32))


@pytest.mark.parametrize("variant", ("packet", "lanes=4", "lanes=16", "packet,full_packet=off",
                                     "lanes=4,predicated=off", "packet,interleave=1", "packet,checked=on"))
def test_one_store_for_both_sides_agrees_with_the_interpreter(variant):
    n = 37 * 3 + 2
    apart = _either_args(40, 2)
    for k, consts, args in ((either, {"n": n}, _either_args(n, 1)),
                            (either_apart, {}, {"x": apart["x"], "m": apart["m"], "y": np.zeros(80, np.float32)})):
        nt = 40
        v = verify_build(compile_kernel(k, consts, parse_variant(variant), n=nt), nt, args)
        assert v.ok, v.describe()


def test_one_store_for_both_sides_is_a_plain_store():
    """y's pair in `either` is one contiguous store: in the packet build's full-packet path a
    plain vector store, no masked store of y's two sides; the checked build (every access
    checked, so the order of the two sides' errors matters) keeps two stores."""
    counts = lambda v: compile_kernel(either, {"n": 113}, parse_variant(v)).lowering_counts
    fused = counts("packet")
    kept = counts("packet,checked=on")
    assert fused["masked_stores"] < kept["masked_stores"], (fused, kept)

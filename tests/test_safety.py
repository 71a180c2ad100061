"""Memory safety by default: a native build not marked unsafe never reads or
writes outside a buffer. Affine indices are proven for the whole launch in the
entry's prologue (backend/bounds.py); a launch the proof cannot cover reruns
with the checked build; data-dependent indices are checked per access. Every
out-of-bounds launch below raises KernelRuntimeError naming the statement,
with every buffer's guard bands intact, and the process stays healthy."""
import functools
import gc

import numpy as np
import pytest

from cohort import Buffer, Const, f32, global_id, i32, kernel, num_threads
from cohort.backend import compiler as _compiler
from cohort.backend.variant import VariantError, parse_variant
from cohort.refimpl import ops
from cohort.refimpl.interpreter import KernelRuntimeError, interpret
from cohort.verify.checksum import bitwise_equal
from cohort.verify.compare import verify_build
from cohort.verify.guard import GuardedSet

# this module checks the builds' own behaviour and errors: launches go straight to native
# code (the default verify="first" would report the interpreter's error before the build's)
compile_kernel = functools.partial(_compiler.compile_kernel, verify="never")

DEFAULTS = ["whole", "packet,lanes=4", "packet,lanes=8", "packet,lanes=16"]


@kernel(block=32)
def past_end(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i * 64] = x[i]  # MARK-PAST-END


@kernel(block=32)
def negative(x: Buffer[f32], y: Buffer[f32], off: i32):
    i = global_id()
    y[i] = x[i - off]  # MARK-NEGATIVE


@kernel(block=32)
def wrap_under_min(x: Buffer[f32], y: Buffer[f32], off: i32):
    i = global_id()
    # min and max keep their operands' ranges, so the proof checks the sum for wrapping,
    # not the min (bounds_emit._inside_operands): a sum that wraps must still fail the proof
    y[i] = x[max(min(i + off, 63), -1073741824)]


@kernel(block=32)
def gather(x: Buffer[f32], j: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[j[i]]  # MARK-GATHER


@kernel(block=32)
def scatter(x: Buffer[f32], j: Buffer[i32], y: Buffer[f32]):
    i = global_id()
    y[j[i]] = x[i]  # MARK-SCATTER


@kernel(block=32)
def guarded(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    if i < len(x):              # narrows i for the accesses below: proven (bounds.py)
        y[i] = x[i] * 2.0 + 1.0


@kernel(block=32)
def guarded_opaque(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    if 2 * i < 2 * len(x):      # the same guard, but no variable on either side: nothing narrowed
        y[i] = x[i] * 2.0 + 1.0


@kernel(block=32)
def walking(x: Buffer[f32], y: Buffer[f32], steps: Const[int]):
    j = global_id()
    for k in range(steps):
        y[j] = x[j] + f32(k)     # j is reassigned in the loop: data-dependent, checked per access
        j = j + num_threads()


def _sizes(n_blocks):
    """Launch sizes a multiple of the block (32) and not."""
    return [32 * n_blocks, 32 * n_blocks - 5]


def _expect_error(kfn, variant, n, args, consts=None, marker=None, kind=None):
    ref_args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    with pytest.raises(KernelRuntimeError):        # the interpreter rejects the launch too
        interpret(kfn.ir, n, ref_args, consts)
    guarded_set = GuardedSet({k: v for k, v in args.items() if isinstance(v, np.ndarray)})
    scalars = {k: v for k, v in args.items() if not isinstance(v, np.ndarray)}
    ck = compile_kernel(kfn, consts, variant, n=n)
    with pytest.raises(KernelRuntimeError) as ei:
        ck.launch(n, {**guarded_set.arrays, **scalars})
    msg = str(ei.value)
    assert kfn.__name__ in msg and "out of bounds" in msg, msg
    if marker:
        assert marker in msg, msg
    if kind:
        assert f"{kind} index" in msg, msg
    assert guarded_set.intact(), (variant, guarded_set.status())
    return msg


def _healthy():
    """Allocation-heavy work after the errors, then a correct launch, checked."""
    keep = []
    for i in range(2000):
        a = np.empty(1 + (i * 7919) % 50_000, np.float32)
        a[:] = i
        if i % 7 == 0:
            keep.append(a)
    assert all(float(a[0]) == float(a[-1]) for a in keep)
    del keep
    gc.collect()
    op = ops.get("rmsnorm")
    shape = (17, 65)
    inputs = op.make_inputs(shape, 3)
    ref = ops.run_reference(op, shape, inputs)
    launch = op.launch(shape)
    for v in DEFAULTS:
        bufs = ops.allocate(op, shape, inputs)
        compile_kernel(op.kernel, launch.consts, v, n=launch.n).launch(launch.n, {**bufs, **launch.scalars})
        assert bitwise_equal(bufs["y"].reshape(ref.shape), ref), v


@pytest.mark.parametrize("variant", DEFAULTS)
def test_kernel_errors_in_the_default_build(variant):
    for n in _sizes(4):
        _expect_error(past_end, variant, n, {"x": np.ones(n, np.float32), "y": np.zeros(n * 16, np.float32)},
                      marker="MARK-PAST-END", kind="store")
        _expect_error(negative, variant, n, {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32), "off": 3},
                      marker="MARK-NEGATIVE", kind="load")
        j = np.arange(n, dtype=np.int32)
        j[n // 2] = n + 1000
        _expect_error(gather, variant, n, {"x": np.ones(n, np.float32), "j": j, "y": np.zeros(n, np.float32)},
                      marker="MARK-GATHER", kind="load")
        j = np.arange(n, dtype=np.int32)[::-1].copy()
        j[n - 3] = -7
        _expect_error(scatter, variant, n, {"x": np.ones(n, np.float32), "j": j, "y": np.zeros(n, np.float32)},
                      marker="MARK-SCATTER", kind="store")
        _expect_error(walking, variant, n, {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32)},
                      consts={"steps": 2}, kind="load")
    _healthy()


@pytest.mark.parametrize("variant", DEFAULTS)
def test_data_dependent_indices_run_correctly_when_in_bounds(variant):
    rng = np.random.default_rng(5)
    for n in _sizes(3):
        for kfn in (gather, scatter):
            args = {"x": rng.standard_normal(n).astype(np.float32), "j": rng.permutation(n).astype(np.int32),
                    "y": np.zeros(n, np.float32)}
            _agree(kfn, variant, n, args)
        _agree(walking, variant, n, {"x": rng.standard_normal(3 * n).astype(np.float32),
                                     "y": np.zeros(3 * n, np.float32)}, {"steps": 3})
    ck = compile_kernel(gather, None, variant)
    assert ck.lowering_counts["bounds_checks"] >= 1 and ck.lowering_counts["bounds_proven"] == 2


def _agree(kfn, variant, n, args, consts=None):
    """A prepared launch, run once and checked against the interpreter's run of the source
    kernel (the one comparison path); returns the prepared launch."""
    ref = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    interpret(kfn.ir, n, ref, consts)
    ck = compile_kernel(kfn, consts, variant, n=n)

    def run_prepared(n, a):
        p = ck.prepare(n, a)
        p.run()
        return p
    verdict = verify_build(ck, n, args, {k: v for k, v in ref.items() if isinstance(v, np.ndarray)},
                           claims=False, launch=run_prepared)
    assert verdict.ok, (kfn.__name__, variant, n, verdict.describe())
    return verdict.launch_result


@pytest.mark.parametrize("variant", DEFAULTS + ["packet,grain=1,workers=2", "whole,grain=2,workers=2"])
def test_guarded_access_beyond_the_proof_runs_correctly(variant):
    """n > len(x): the affine proof fails (this guard names no variable, so nothing is
    narrowed), so the launch reruns with the checked build, bit-identical to the
    interpreter; the switch is kept and visible."""
    rng = np.random.default_rng(8)
    for n in _sizes(3):
        args = {"x": rng.standard_normal(n - 20).astype(np.float32), "y": rng.standard_normal(n).astype(np.float32)}
        p = _agree(guarded_opaque, variant, n, args)
        assert p.fallback and "checked" in p.fallback
        assert p.code.variant.checked and p.entry == p.code.entry
        p.run()                                  # later runs go straight to the checked build
        # a launch the proof covers runs the safe build itself
        ok = _agree(guarded_opaque, variant, n, {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32)})
        assert ok.fallback is None and not ok.code.variant.checked


@pytest.mark.parametrize("variant", ["packet,lanes=8", "packet,lanes=16"])
def test_pooled_launches_fall_back_per_launch(variant):
    """Through launch() (pooled argument blocks): a fallback launch of the whole-block build
    never hands its checked twin to a later launch of another size, and a later launch the
    proof covers runs the safe build again."""
    ck = compile_kernel(guarded_opaque, None, variant, n=64)
    rng = np.random.default_rng(3)
    for n, xlen in [(64, 40), (64, 40), (50, 30), (64, 64), (50, 50), (64, 40), (50, 20)]:
        x = rng.standard_normal(xlen).astype(np.float32)
        y, ref = np.zeros(n, np.float32), np.zeros(n, np.float32)
        ck.launch(n, {"x": x, "y": y})
        interpret(guarded_opaque.ir, n, {"x": x, "y": ref})
        assert bitwise_equal(y, ref), (n, xlen)
        assert (ck.last_prepared.fallback is None) == (xlen >= n), (n, xlen)


def _case_sizes(name):
    if name in ("attention", "attention_causal"):
        return [(1, 4, 2, 16, 32, 16, 16), (1, 2, 1, 5, 3, 4, 3)]     # n = 128 and n = 10
    if name in ("rope_half", "rope_pairs"):
        return [(4, 5, 64, 64), (3, 2, 20, 12)]                       # full and partial rotary
    if name in ("swiglu", "gelu_residual"):
        return [(4, 64), (3, 33)]
    if name == "rope":
        return [(4, 64), (3, 34)]
    if name == "matmul":
        return [(7, 20, 35)]                                          # ragged rows and columns
    if name == "transpose":
        return [(2, 33, 40)]
    if name == "histogram":
        return [(600, 40)]                                            # the output is atomics' target
    return [(5, 33)]                                                  # one block per row: whole blocks


@pytest.mark.parametrize("name", list(ops.OPERATORS))
def test_too_short_output_to_every_operator(name):
    op = ops.get(name)
    for shape in _case_sizes(name):
        inputs = op.make_inputs(shape, 0)
        launch = op.launch(shape)
        for variant in DEFAULTS:
            for cut in (1, 7):
                bufs = ops.allocate(op, shape, inputs)
                bufs[op.output] = bufs[op.output][:-cut].copy()
                guarded_set = GuardedSet(bufs)
                ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
                with pytest.raises(KernelRuntimeError) as ei:
                    ck.launch(launch.n, {**guarded_set.arrays, **launch.scalars})
                msg = str(ei.value)
                # a store names the element; an atomic update (histogram) its statement
                assert "store index" in msg and (f"{op.output}[" in msg or f"({op.output}," in msg), msg
                assert guarded_set.intact(), (name, shape, variant, guarded_set.status())
    _healthy()


@pytest.mark.parametrize("name", list(ops.OPERATORS))
def test_every_operator_default_build_has_no_per_access_checks(name):
    op = ops.get(name)
    for shape in op.seed_sizes[:2] + ((2, 4, 2, 5, 3, 4, 3),) * name.startswith("attention"):
        launch = op.launch(shape)
        inputs = op.make_inputs(shape, 0)
        ref = ops.run_reference(op, shape, inputs)
        for variant in DEFAULTS:
            for n in (launch.n, None):       # the whole-block build and the general one
                ck = compile_kernel(op.kernel, launch.consts, variant, n=n)
                c = ck.lowering_counts
                # histogram's bins are its data, but each update's loaded index is bounded on
                # both sides by its guard (`v if 0 <= v < BINS else S`, `if v >= 0 and v < BINS`):
                # proven like the rest (bounds.Bounds.two_sided, clamp_facts)
                assert c["bounds_proven"] > 0 and c["bounds_unprovable"] == 0, (name, variant, c)
                assert c.get("bounds_checks", 0) == 0 and c.get("shared_checks", 0) == 0, (name, variant, c)
                assert "cmpxchg" in ck.llvm_ir     # the prologue's exit, the only error it can record
                bufs = ops.allocate(op, shape, inputs)
                p = ck.prepare(launch.n, {**bufs, **launch.scalars})
                p.run()
                assert p.fallback is None, (name, shape, variant)      # proven: no checked rerun
                assert bitwise_equal(bufs[op.output].reshape(ref.shape), ref)


def test_unsafe_is_the_unchecked_code():
    op = ops.get("rmsnorm")
    launch = op.launch((17, 65))
    for base in ("whole", "packet"):
        unsafe = compile_kernel(op.kernel, launch.consts, base + ",unsafe=on", n=launch.n)
        safe = compile_kernel(op.kernel, launch.consts, base, n=launch.n)
        assert unsafe.code is not safe.code and unsafe.variant.unsafe
        assert "bounds_proven" not in unsafe.lowering_counts and "bounds_checks" not in unsafe.lowering_counts
        assert "cmpxchg" not in unsafe.llvm_ir               # nothing is checked, nothing can fail
        assert "unsafe=on" in unsafe.variant.label
    # unsafe does not check data-dependent indices either (the kernel is not launched out of bounds)
    assert "bounds_checks" not in compile_kernel(gather, None, "packet,unsafe=on").lowering_counts
    with pytest.raises(VariantError, match="contradict"):
        parse_variant("packet,checked=on,unsafe=on")
    assert parse_variant("packet").unsafe is False
    assert parse_variant("whole,unsafe=on").compile_key != parse_variant("whole").compile_key


def test_modulo_pattern_keeps_attention_with_batches_proven():
    """h = bh - (bh // H) * H lies in [0, H - 1]: attention with B > 1 is proven, not rerun."""
    op = ops.get("attention")
    shape = (3, 4, 2, 5, 3, 4, 3)
    inputs = op.make_inputs(shape, 0)
    ref = ops.run_reference(op, shape, inputs)
    launch = op.launch(shape)
    for variant in ("whole", "packet"):
        bufs = ops.allocate(op, shape, inputs)
        p = compile_kernel(op.kernel, launch.consts, variant, n=launch.n).prepare(launch.n, {**bufs, **launch.scalars})
        p.run()
        assert p.fallback is None
        assert bitwise_equal(bufs["o"].reshape(ref.shape), ref)


def test_empty_launch_and_wrapping_index():
    # no threads: nothing runs, nothing to prove
    ck = compile_kernel(past_end, None, "packet")
    ck.launch(0, {"x": np.zeros(0, np.float32), "y": np.zeros(0, np.float32)})
    # an index that wraps in i32 is not proven by its unwrapped interval: rerun checked, error reported
    n = 64
    with pytest.raises(KernelRuntimeError, match="out of bounds"):
        compile_kernel(negative, None, "packet", n=n).launch(
            n, {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32), "off": -(2 ** 31) + 10})


def test_a_wrap_inside_min_and_max_is_still_caught():
    n = 64
    args = lambda off: {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32), "off": off}
    ck = compile_kernel(wrap_under_min, None, "packet", n=n)
    a = args(0)
    ck.launch(n, a)
    assert np.array_equal(a["y"], a["x"])
    with pytest.raises(KernelRuntimeError, match="out of bounds"):
        ck.launch(n, args(2 ** 31 - 10))     # i + off wraps to about -2^31 past thread 9


# ------------------------------------------------------------------ random affine indices
# The proof must never pass a launch that goes out of bounds (the guard bands would show it)
# and, when it fails, the checked rerun must give the interpreter's verdict and outputs.

from cohort.refimpl import ir as kir  # noqa: E402
from cohort.refimpl.ir import Assign, DType, For, If, Kernel, Op, Param, ParamKind, Store  # noqa: E402

I32, F32 = DType.I32, DType.F32


def _random_index(rng, leaves, depth):
    if depth == 0 or rng.random() < 0.25:
        return leaves[rng.integers(len(leaves))]()
    a = _random_index(rng, leaves, depth - 1)
    pick = rng.integers(12)
    if pick < 3:
        return kir.binary(Op.ADD, a, _random_index(rng, leaves, depth - 1))
    if pick < 5:
        return kir.binary(Op.SUB, a, _random_index(rng, leaves, depth - 1))
    if pick == 5:
        big = int(rng.choice([-3, 2, 5, 1 << 20, 1 << 29]))
        return kir.binary(Op.MUL, a, kir.const(big, I32))
    if pick == 6:
        return kir.binary(Op.MUL, a, _random_index(rng, leaves, depth - 1))
    if pick == 7:
        op = Op.DIV if rng.random() < 0.5 else Op.MOD
        return kir.binary(op, a, kir.const(int(rng.choice([-7, -1, 2, 3, 16])), I32))
    if pick == 8:
        op = Op.MIN if rng.random() < 0.5 else Op.MAX
        return kir.binary(op, a, _random_index(rng, leaves, depth - 1))
    if pick == 9:
        op = Op.SHL if rng.random() < 0.5 else Op.SHR
        return kir.binary(op, a, kir.const(int(rng.integers(0, 31)), I32))
    if pick == 10:
        cond = kir.binary(Op.LT, kir.builtin(Op.GLOBAL_ID), kir.const(int(rng.integers(0, 40)), I32))
        return kir.select(cond, a, _random_index(rng, leaves, depth - 1))
    u = kir.cast(a, DType.U32)         # through u32 and back: negative values wrap
    if rng.random() < 0.5:             # u32 products reach 2^64 (past i64's range)
        u = kir.binary(Op.MUL, u, kir.const(int(rng.choice([3, 1 << 31, 0xFFFFFFFF])), DType.U32))
    return kir.cast(kir.binary(Op.ADD, u, kir.const(int(rng.integers(0, 4)), DType.U32)), I32)


def _random_kernel(seed: int) -> Kernel:
    rng = np.random.default_rng(seed)
    base = [lambda: kir.builtin(Op.GLOBAL_ID), lambda: kir.builtin(Op.THREAD_ID), lambda: kir.builtin(Op.BLOCK_ID),
            lambda: kir.builtin(Op.NUM_THREADS), lambda: kir.builtin(Op.BUFLEN, "x"),
            lambda: kir.param("s", I32), lambda: kir.const(int(rng.integers(-40, 40)), I32)]
    start = _random_index(rng, base, 2)
    stop = kir.binary(Op.ADD, start, kir.const(int(rng.integers(0, 5)), I32))
    with_vars = base + [lambda: kir.var("a", I32), lambda: kir.var("j", I32)]
    load = kir.load("x", _random_index(rng, with_vars, 3), F32)
    # a guard comparing a variable with an index expression narrows that variable for the
    # accesses it covers (an if's branch, its else branch, or a select's arm)
    v = kir.var(["a", "j"][rng.integers(2)], I32)
    w = _random_index(rng, base + [lambda: kir.builtin(Op.BUFLEN, "x")] * 3, 2)
    cmp = [Op.LT, Op.LE, Op.GT, Op.GE][rng.integers(4)]
    cond = kir.binary(cmp, v, w) if rng.random() < 0.5 else kir.binary(cmp, w, v)
    acc = kir.var("acc", F32)
    shape = rng.integers(4)
    if shape == 3:
        load = kir.select(cond, load, kir.const(0.0, F32))
    update = Assign("acc", kir.binary(Op.ADD, acc, load))
    step = If(cond, (update,)) if shape == 1 else If(cond, (), (update,)) if shape == 2 else update
    body = [Assign("a", _random_index(rng, base, 3)),
            Assign("acc", kir.const(0.0, F32)),
            For("j", start, stop, kir.const(1, I32), (step,)),
            Store("y", kir.builtin(Op.GLOBAL_ID), kir.var("acc", F32))]
    params = (Param("x", ParamKind.BUFFER, F32), Param("y", ParamKind.BUFFER, F32), Param("s", ParamKind.SCALAR, I32))
    return Kernel(f"rand{seed}", params, tuple(body), 8)


@pytest.mark.parametrize("seed", range(60))
def test_random_affine_indices_never_escape(seed):
    k = _random_kernel(seed)
    rng = np.random.default_rng(1000 + seed)
    for trial in range(3):
        n = int(rng.integers(1, 40))
        args = {"x": rng.standard_normal(int(rng.integers(1, 120))).astype(np.float32),
                "y": np.zeros(n, np.float32), "s": int(rng.integers(-30, 30))}
        ref = {name: (v.copy() if isinstance(v, np.ndarray) else v) for name, v in args.items()}
        try:
            interpret(k, n, ref)
            expect = None
        except KernelRuntimeError as e:
            expect = e
        for variant in ("whole", "packet,lanes=4", "packet"):
            guarded_set = GuardedSet({"x": args["x"], "y": args["y"]})
            ck = compile_kernel(k, None, variant, n=n)
            try:
                ck.launch(n, {**guarded_set.arrays, "s": args["s"]})
                got = None
            except KernelRuntimeError as e:
                got = e
            assert guarded_set.intact(), (seed, trial, variant)
            assert (got is None) == (expect is None), (seed, trial, variant, expect, got)
            if got is None:
                assert bitwise_equal(guarded_set.arrays["y"], ref["y"]), (seed, trial, variant)


def test_u32_product_past_i64_is_not_proven():
    """(u32(gid) + p) * 0xFFFFFFFF: the interval's upper product passes 2^63 (an i64 wrap
    would invert it and look empty); the real index wraps to about -2^31."""
    u = DType.U32
    idx = kir.cast(kir.binary(Op.MUL, kir.binary(Op.ADD, kir.cast(kir.builtin(Op.GLOBAL_ID), u), kir.param("p", u)),
                              kir.const(0xFFFFFFFF, u)), I32)
    k = Kernel("u32wrap", (Param("x", ParamKind.BUFFER, F32), Param("y", ParamKind.BUFFER, F32),
                           Param("p", ParamKind.SCALAR, u)),
               (Store("y", kir.builtin(Op.GLOBAL_ID), kir.load("x", idx, F32)),), 8)
    for variant in ("whole", "packet,lanes=4"):
        guarded_set = GuardedSet({"x": np.ones(64, np.float32), "y": np.zeros(4, np.float32)})
        with pytest.raises(KernelRuntimeError, match="out of bounds"):
            compile_kernel(k, None, variant, n=4).launch(4, {**guarded_set.arrays, "p": 2 ** 31 - 2})
        assert guarded_set.intact()


def test_cli_bench_refuses_unsafe_columns_unless_asked_and_run_says_unsafe(capsys):
    from cohort.cli import main
    assert main(["bench", "safety", "--ops", "rmsnorm", "--sizes", "17x65"]) == 2
    err = capsys.readouterr().err
    assert "--allow-unsafe" in err and err.count("\n") == 1
    assert main(["run", "rmsnorm", "--shape", "17x65", "--variant", "packet,unsafe=on"]) == 0
    out = capsys.readouterr().out
    assert "unsafe build" in out and "bit-identical" in out
    assert main(["run", "rmsnorm", "--shape", "17x65", "--variant", "packet,checked=on,unsafe=on"]) == 2


@kernel(block=32)
def copy(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i]


@pytest.mark.parametrize("variant", DEFAULTS)
def test_a_proof_holds_for_its_own_launch_only(variant):
    """A build remembers its proof in the argument block (context.py, slot 6); a pooled block
    refilled for a launch with a short buffer is proven again and refused, never run on the
    earlier launch's proof."""
    ck = compile_kernel(copy, None, variant, n=64)
    for _ in range(3):
        x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
        ck.launch(64, {"x": x, "y": y})
        assert bitwise_equal(y, x) and ck.last_prepared.fallback is None
        guarded_set = GuardedSet({"x": np.arange(64, dtype=np.float32), "y": np.zeros(40, np.float32)})
        with pytest.raises(KernelRuntimeError, match="out of bounds"):
            ck.launch(64, guarded_set.arrays)
        assert guarded_set.intact()


def _form_sizes(name, form):
    if name == "matmul":      # the wide forms are for b at least 2048 columns wide (form_for)
        return [(2, 5, 4100), (1, 3, 4096), (7, 6, 4097)] if form.startswith("wide") else _case_sizes(name)
    if name in ("histogram", "attention", "attention_causal"):
        # attention: plus a shape of 33 rows, a ragged last block in every form
        return _case_sizes(name) + ([(1, 4, 2, 33, 9, 8, 8)] if name != "histogram" else [])
    return _case_sizes(name) + [(3, 64) if name == "rope" else (3, 63)]


@pytest.mark.parametrize("name", [n for n, op in ops.OPERATORS.items() if op.forms])
def test_every_operator_form_is_proven_without_fallback(name):
    """Every form of every operator runs its safe build itself: the bounds proof covers its
    launches (a form that always fell back would time the checked build instead)."""
    for form in [ops.get(name).form] + [f[0] for f in ops.get(name).forms]:
        op = ops.get(name, form=form)
        for shape in _form_sizes(name, form):
            launch = op.launch(shape)
            for variant in ("whole", "packet"):
                ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
                p = ck.prepare(launch.n, {**ops.allocate(op, shape, op.make_inputs(shape, 0)), **launch.scalars})
                p.run()
                assert p.fallback is None, (name, form, shape, variant)


# ------------------------------------------------------------------ guards narrow the proof

@kernel(block=32)
def guarded_select(x: Buffer[f32], y: Buffer[f32], cols: Const[int]):
    t = global_id()
    tail = t + cols                      # past the end for every thread but the guard's
    y[t] = x[tail] if tail < len(x) else 0.0


@kernel(block=32)
def guarded_else(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    if i >= len(x):
        y[i] = 0.0
    else:
        y[i] = x[i]


@kernel(block=32)
def guard_then_reassigned(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    if i < len(x):
        i = i + 64                       # assigned inside the guarded branch: i is not narrowed
        y[global_id()] = x[i]  # MARK-REASSIGNED


@kernel(block=32)
def guard_on_another_path(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = 0.0
    if i < len(x):
        v = x[i]
    y[i] = v + x[i]  # MARK-UNGUARDED


@pytest.mark.parametrize("variant", DEFAULTS)
def test_guards_narrow_the_proof(variant):
    """`if v < e`, its else branch and a select's arms narrow v for the accesses they guard:
    the launch runs the safe build itself (no fallback), bit-identical to the interpreter."""
    rng = np.random.default_rng(11)
    for n in _sizes(5):
        args = {"x": rng.standard_normal(n - 20).astype(np.float32), "y": rng.standard_normal(n).astype(np.float32)}
        for kfn in (guarded, guarded_else):
            assert _agree(kfn, variant, n, {k: v.copy() for k, v in args.items()}).fallback is None, kfn.__name__
        ck = compile_kernel(guarded_select, {"cols": 5}, variant, n=n)
        y, ref = np.zeros(n, np.float32), np.zeros(n, np.float32)
        ck.launch(n, {"x": args["x"], "y": y})
        interpret(guarded_select.ir, n, {"x": args["x"], "y": ref}, {"cols": 5})
        assert bitwise_equal(y, ref) and ck.last_prepared.fallback is None


@pytest.mark.parametrize("variant", DEFAULTS)
@pytest.mark.parametrize("kfn,mark", [(guard_then_reassigned, "MARK-REASSIGNED"), (guard_on_another_path, "MARK-UNGUARDED")])
def test_guards_never_narrow_what_they_do_not_cover(variant, kfn, mark):
    """A variable assigned inside the guarded branch, or an access reached outside the guard,
    is not narrowed: out of bounds is still reported, guard bands intact."""
    n = 64
    guarded_set = GuardedSet({"x": np.ones(n - 10, np.float32), "y": np.zeros(n, np.float32)})
    with pytest.raises(KernelRuntimeError, match="out of bounds") as e:
        compile_kernel(kfn, None, variant, n=n).launch(n, guarded_set.arrays)
    line = next(i for i, l in enumerate(open(__file__).read().splitlines(), 1) if mark in l and "def " not in l)
    assert f"line {line}" in str(e.value)
    assert guarded_set.intact()


@kernel(block=8)
def _guarded_gather(x: Buffer[f32], y: Buffer[f32], n: Const[int]):
    g = global_id()
    v = i32(x[g] * 64.0)                 # a loaded index: no interval of its own
    w = v if v >= 0 and v < n else 0     # a select arm bounded on both sides
    acc = x[w]
    if v >= 1 and v <= n:                # an if bounding it on both sides (v <= n: x[v - 1])
        acc = acc + x[v - 1]
    y[g] = acc


def test_loaded_indices_bounded_by_their_guards_are_proven():
    """bounds.py: a data-dependent variable between two guards (a select arm's condition, an
    if's) is proven against them, whatever its definition; the results match the interpreter
    on indices inside and outside the guards."""
    from cohort.refimpl.interpreter import interpret
    n = 40
    x = np.random.default_rng(3).normal(0, 0.4, 300).astype(np.float32)
    for variant in ("whole", "packet", "lanes=4,predicated=off"):
        ck = compile_kernel(_guarded_gather, {"n": n}, variant, n=300)
        c = ck.lowering_counts
        assert c["bounds_unprovable"] == 0 and c.get("bounds_checks", 0) == 0, (variant, c)
        got = {"x": x.copy(), "y": np.zeros(300, np.float32)}
        p = ck.prepare(300, got)
        p.run()
        assert p.fallback is None
        want = {"x": x.copy(), "y": np.zeros(300, np.float32)}
        interpret(_guarded_gather.ir, 300, want, {"n": n})
        assert np.array_equal(got["y"].view(np.uint32), want["y"].view(np.uint32)), variant

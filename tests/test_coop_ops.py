"""The cooperative operators (issue 24): matmul, cumsum, histogram and transpose.

Their definitions (DESIGN §4) reimplemented independently here in NumPy and
matched to the bit; every variant bit for bit with the interpreter on ragged,
prime and 1x1 sizes and on special values; the launch's bounds proof covers every
index (no per-access check, no fallback); cohort.torch's ops."""
import numpy as np
import pytest
from conftest import asm_blocks

from cohort import Buffer, Const, barrier, f32, kernel, shared, thread_id
from cohort.backend.compiler import compile_kernel
from cohort.refimpl import ops
from cohort.refimpl.semantics import fma
from cohort.verify.checksum import bitwise_equal
from cohort.verify.compare import verify_build

VARIANTS = ("whole", "packet", "lanes=16", "lanes=4,predicated=off", "packet,interleave=1,private=thread",
            "packet,workers=3,grain=1")


def _run(name, shape, inputs, variant, form=None):
    op = ops.get(name, form)
    launch = op.launch(shape)
    ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
    bufs = ops.allocate(op, shape, inputs)
    p = ck.prepare(launch.n, {**bufs, **launch.scalars})
    from cohort.backend import runtime
    from cohort.backend.variant import parse_variant
    runtime.run(p, parse_variant(variant))
    return bufs[op.output].reshape(op.buffer_shapes(shape)[op.output]), p


def _bits(a):
    return a.view(np.uint32) if a.dtype == np.float32 else a


# ---------------------------------------------------------------- the definitions

def test_matmul_is_one_fma_chain_per_element_in_ascending_k():
    shape = (7, 45, 19)
    inputs = ops.get("matmul").make_inputs(shape, 2)
    a, b = inputs["a"], inputs["b"]
    acc = np.zeros((7, 19), np.float32)
    for k in range(45):
        acc = fma(np.repeat(a[:, k:k + 1], 19, axis=1), np.repeat(b[k:k + 1, :], 7, axis=0), acc)
    y = ops.run_reference(ops.get("matmul"), shape, inputs)
    assert np.array_equal(_bits(y), _bits(acc))


def _pair_sum(a, b):
    """(ah, al) (+) (bh, bl) = (s, al + (bl + e)): s = ah + bh, v = s - ah, e = (ah - (s - v)) + (bh - v)."""
    (ah, al), (bh, bl) = a, b
    s = ah + bh
    v = s - ah
    return s, al + (bl + ((ah - (s - v)) + (bh - v)))


def _renormalised(h, l):
    return (h + l, l - ((h + l) - h)) if abs(l) > 0 else (h, np.float32(0.0))


def _cumsum_definition(x):
    """DESIGN §4's definition, written out in float32 pairs (h, l): groups of 16,
    Hillis-Steele d = 1, 2, 4, 8 of pair sums, out = carry (+) H rounded to h + l (h where
    l is 0 or not a number), carry = out_15 from (-0.0, -0.0), renormalised every 256."""
    f = np.float32
    R, C = x.shape
    y = np.empty_like(x)
    with np.errstate(invalid="ignore", over="ignore"):
        for r in range(R):
            carry = (f(-0.0), f(-0.0))
            for g in range(0, C, 16):
                H = [(x[r, g + t] if g + t < C else f(0.0), f(-0.0)) for t in range(16)]
                for d in (1, 2, 4, 8):
                    H = [_pair_sum(H[t - d], H[t]) if t >= d else H[t] for t in range(16)]
                for t in range(min(16, C - g)):
                    s, ll = _pair_sum(carry, H[t])
                    y[r, g + t] = s + ll if abs(ll) > 0 else s
                carry = _pair_sum(carry, H[15])
                if (g + 16) % 256 == 0 or g + 16 >= C:
                    carry = _renormalised(*carry)
    return y


def test_cumsum_follows_its_documented_definition():
    shape = (3, 533)                      # three steps of 256, the last one partial
    x = ops.get("cumsum").make_inputs(shape, 1)["x"]
    x[0, 0] = -0.0                        # the first carry is -0.0: y[r, 0] is x[r, 0] to the bit
    y = ops.run_reference(ops.get("cumsum"), shape, {"x": x})
    assert np.array_equal(_bits(y), _bits(_cumsum_definition(x)))
    assert _bits(y)[0, 0] == 0x80000000
    special = _special((3, 37), 11)       # infinities and NaN as float32 addition has them
    assert bitwise_equal(ops.run_reference(ops.get("cumsum"), (3, 37), {"x": special}), _cumsum_definition(special))


def test_histogram_counts_in_range_indices_and_ignores_the_rest():
    shape = (5000, 37)
    idx = ops.get("histogram").make_inputs(shape, 3)["idx"]
    assert (idx < 0).any() and (idx >= 37).any()
    for form in ("shared", "global"):
        y = ops.run_reference(ops.get("histogram", form), shape, {"idx": idx})
        ok = idx[(idx >= 0) & (idx < 37)]
        assert y.dtype == np.int32 and np.array_equal(y, np.bincount(ok, minlength=37))


def test_transpose_is_a_copy():
    shape = (2, 45, 33)
    x = ops.get("transpose").make_inputs(shape, 0)["x"]
    y = ops.run_reference(ops.get("transpose"), shape, {"x": x})
    assert np.array_equal(_bits(y), _bits(np.ascontiguousarray(x.transpose(0, 2, 1))))


# ---------------------------------------------------------------- every variant, bit for bit

HIDDEN = [("matmul", (1, 1, 1)), ("matmul", (7, 13, 17)), ("matmul", (1, 300, 5)), ("matmul", (49, 2, 1)),
          ("cumsum", (1, 1)), ("cumsum", (2, 17)), ("cumsum", (1, 131)),
          ("histogram", (1, 1)), ("histogram", (4097, 3)), ("histogram", (977, 1009)),
          ("transpose", (1, 1, 1)), ("transpose", (1, 31, 33)), ("transpose", (3, 1, 67))]


@pytest.mark.parametrize("name,shape", HIDDEN, ids=lambda v: v if isinstance(v, str) else ops.fmt_shape(v))
def test_every_variant_matches_the_interpreter(name, shape):
    op = ops.get(name)
    inputs = op.make_inputs(shape, 5)
    ref = ops.run_reference(op, shape, inputs)
    launch = op.launch(shape)
    for v in VARIANTS:
        ck = compile_kernel(op.kernel, launch.consts, v, n=launch.n)
        verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars},
                               {op.output: ref}, claims=False, label=f"{name} {shape} {v}")
        assert verdict.ok, verdict.describe()


# one row; two rows of a group of four; a full group with K past a pass of four; two groups,
# the second partial (rows past M repeat row M - 1, never stored); a panel shifted left
@pytest.mark.parametrize("shape", [(1, 37, 4096), (2, 20, 4100), (4, 9, 4096), (7, 3, 4100)], ids=ops.fmt_shape)
def test_matmul_wide_forms_give_the_tiled_forms_bits(shape):
    from cohort.backend import target
    from cohort.refimpl.ops.matmul import form_for, tiled_form
    bits = target.host().vector_bits
    form = form_for(shape, 8, bits)
    assert form == ("wide" if shape[0] == 1 else "wide4")
    assert form_for((9, 20, 5000), 8, bits) == form_for((1, 20, 100), 8, bits) == tiled_form(8, bits) == "tiled"
    inputs = ops.get("matmul").make_inputs(shape, 4)
    tiled, _ = _run("matmul", shape, inputs, "packet")
    for wide in ("wide", "wide4"):
        assert np.array_equal(_bits(ops.run_reference(ops.get("matmul", wide), shape, inputs)), _bits(tiled))
        for v in ("whole", "packet", "lanes=16", "lanes=4,predicated=off", "packet,workers=2,grain=1"):
            y, p = _run("matmul", shape, inputs, v, form=wide)
            assert np.array_equal(_bits(y), _bits(tiled)) and p.fallback is None, (wide, v)


def test_matmul_tiled_form_follows_the_targets_vector_width():
    # blocks of 64 columns where a packet fills a 16-float register, 32 there where b's width
    # leaves 1..32 columns past a multiple of 64 (fewer columns computed), 16 columns elsewhere
    # (matmul.py: 24, 16 and 12 vector accumulators, no spills); the choice is the target's,
    # the variant's and the shape's, never the host's alone
    from cohort.backend import target
    from cohort.refimpl.ops.matmul import form_for, tiled_form
    x86 = "x86_64-unknown-linux-gnu"
    avx512 = target.from_triple(x86, "skylake-avx512", "+avx2,+fma,+avx512f").vector_bits
    assert avx512 == 512 and tiled_form(16, avx512) == tiled_form(16, avx512, 1024) == "tiled64"
    assert [tiled_form(16, avx512, n) for n in (1, 32, 33, 64, 96, 97, 129, 160, 161)] == \
        ["tiled32"] * 2 + ["tiled64"] * 2 + ["tiled32", "tiled64"] + ["tiled32"] * 2 + ["tiled64"]
    assert tiled_form(8, avx512) == tiled_form(1, avx512) == "tiled"          # 8-lane packets: 256-bit registers
    for t in (target.from_triple(x86, "haswell", "+avx2,+fma"), target.from_triple(x86),
              target.from_triple("aarch64-unknown-linux-gnu")):
        assert t.vector_bits < 512 and tiled_form(16, t.vector_bits) == "tiled", t
    assert form_for((64, 64, 64), 16, avx512) == "tiled64" and form_for((64, 64, 64), 8, avx512) == "tiled"
    assert form_for((4096, 4096, 32), 16, avx512) == form_for((257, 511, 129), 16, avx512) == "tiled32"
    assert form_for((1, 64, 4096), 16, avx512) == "wide" and form_for((64, 64, 64), 16, 256) == "tiled"
    assert [ops.get("matmul", f).kernel.block for f in ("tiled", "tiled32", "tiled64")] == [16, 32, 64]


def _hot_loop(asm: str) -> list:
    """The instructions of the basic block holding the most vector fmas."""
    return max(asm_blocks(asm), key=lambda b: sum(x.startswith("vfmadd") for x in b))


_AVX512 = "+avx2,+fma,+avx512f,+avx512vl,+avx512bw,+avx512dq"


@pytest.mark.parametrize("cpu,features,form,variant,fmas,shape", [
    ("haswell", "+avx2,+fma", "tiled", "packet", 12, (1024, 1024, 1024)),
    ("skylake-avx512", _AVX512, "tiled32", "lanes=16", 16, (1024, 1024, 1024)),
    ("skylake-avx512", _AVX512, "tiled", "packet", 12, (1024, 1024, 1024)),
    # K not a multiple of the staged step: the k loop's count is not a constant there
    ("haswell", "+avx2,+fma", "tiled", "packet", 12, (1023, 1021, 997)),
    ("skylake-avx512", _AVX512, "tiled32", "lanes=16", 16, (1023, 1021, 997)),
    ("skylake-avx512", _AVX512, "tiled64", "lanes=16", 24, (1024, 1024, 1024)),
    ("skylake-avx512", _AVX512, "tiled64", "lanes=16", 24, (1023, 1021, 997))], ids=str)
def test_matmul_register_block_stays_in_registers(cpu, features, form, variant, fmas, shape):
    # the inner k loop of the form tiled_form picks: one fma per accumulator, one broadcast
    # per row of a, b's packets loaded once, nothing spilled to the stack, and no row's offset
    # sign-extended per k (at most one: the slab's; proven indices do not wrap, exprs.index_value)
    from cohort.backend import target
    from cohort.backend.compiler import cross_compile
    op = ops.get("matmul", form)
    launch = op.launch(shape)
    t = target.from_triple("x86_64-unknown-linux-gnu", cpu, features)
    hot = _hot_loop(cross_compile(op.kernel, t, variant, launch.consts, kind="assembly", full_blocks=True))
    rows = {"tiled": 6, "tiled32": 8, "tiled64": 6}[form]
    assert sum(x.startswith("vfmadd") for x in hot) == fmas
    assert sum(x.startswith("vbroadcastss") for x in hot) == rows
    assert not [x for x in hot if "rsp" in x], hot
    assert sum(x.startswith("movslq") for x in hot) <= 1, hot


# edges of the tiled forms: one row, rows past a register block, two row tiles (192 rows each),
# b narrower than a panel (masked), a last panel shifted left, two column blocks (256 each),
# K past one staged step (128 k with every panel in use, more with fewer panels)
TILED_EDGES = [(1, 1, 1), (7, 13, 17), (5, 33, 31), (37, 129, 70), (193, 40, 33), (13, 300, 300), (6, 1100, 40)]


@pytest.mark.parametrize("shape", TILED_EDGES, ids=ops.fmt_shape)
def test_matmul_tiled_forms_give_the_same_bits_in_every_variant(shape):
    inputs = ops.get("matmul").make_inputs(shape, 7)
    ref = ops.run_reference(ops.get("matmul"), shape, inputs)
    assert np.array_equal(_bits(ops.run_reference(ops.get("matmul", "tiled32"), shape, inputs)), _bits(ref))
    for form in ("tiled", "tiled32", "tiled64"):
        for v in VARIANTS:
            y, p = _run("matmul", shape, inputs, v, form=form)
            assert np.array_equal(_bits(y), _bits(ref)) and p.fallback is None, (form, v)


# M split evenly into row tiles (257 rows: two of 136 and 121 at 8-row register blocks, not 192
# and 65), two column blocks, and K over three staged steps: the sums' first step from +0.0,
# the middle one through the private array, the last stored from registers (tiled64: by its
# last pass); 600 rows: tiled64's blocks of 512 columns (panels_of), the second one three
# panels, the last shifted; 520 x 1100 x 40: one panel of that block's slab, so 1024 k per step
# (the whole slab), two steps. Checked against the definition written out (the interpreter
# takes tens of seconds at these sizes)
@pytest.mark.parametrize("shape", [(257, 300, 260), (385, 20, 70), (600, 300, 700), (520, 1100, 40)],
                         ids=ops.fmt_shape)
def test_matmul_tiled_forms_follow_the_definition_across_row_tiles_and_k_steps(shape):
    from cohort.refimpl.ops.matmul import ROWS, blocks, panels_of, row_tile
    M, K, N = shape
    inputs = ops.get("matmul").make_inputs(shape, 3)
    a, b = inputs["a"], inputs["b"]
    acc = np.zeros((M, N), np.float32)
    for k in range(K):
        acc = fma(np.repeat(a[:, k:k + 1], N, axis=1), np.repeat(b[k:k + 1, :], M, axis=0), acc)
    for form in ("tiled", "tiled32", "tiled64"):
        for v in ("packet", "lanes=16", "packet,workers=3,grain=1"):
            y, p = _run("matmul", shape, inputs, v, form=form)
            assert np.array_equal(_bits(y), _bits(acc)) and p.fallback is None, (form, v)
    assert row_tile(257, 8) == 136 and blocks((257, 300, 260), 32) == 2 * 2
    assert panels_of(511, 64) == 4 and panels_of(512, 64) == 8 and panels_of(4096, 32) == 8
    assert blocks((600, 300, 700), 64) == 4 * 2 and blocks((600, 300, 700), 32) == 4 * 3
    for m in range(1, 3000):
        for reg in (6, 8):
            rt = row_tile(m, reg)
            tiles = -(-m // rt)
            assert rt % reg == 0 and rt <= ROWS and tiles <= -(-m // ROWS), (m, reg)
            assert m - (tiles - 1) * rt > rt - reg * tiles, (m, reg)     # the last tile is not a stub


def _special(shape, seed):
    rng = np.random.default_rng(seed)
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-45, 2.5], np.float32)
    return pool[rng.integers(0, len(pool), shape)]


@pytest.mark.parametrize("name,shape", [("matmul", (9, 21, 11)), ("cumsum", (4, 45)), ("transpose", (1, 19, 40))])
def test_special_values_bit_for_bit(name, shape):
    op = ops.get(name)
    inputs = {n: _special(s, i) for i, (n, s) in enumerate(op.buffer_shapes(shape).items()) if n != op.output}
    ref = ops.run_reference(op, shape, inputs)
    for v in ("whole", "packet", "lanes=16"):
        y, _ = _run(name, shape, inputs, v)
        assert bitwise_equal(y, ref), (name, v)      # bit for bit; every NaN equals every NaN (DESIGN §3)


# the register forms on special values: a staged slab, three k steps of tiled64 and its last
# store pass carry infinities, NaN, signed zeros and subnormals as the one fma chain does
@pytest.mark.parametrize("shape", [(9, 21, 11), (70, 300, 97), (13, 1100, 40)], ids=ops.fmt_shape)
def test_matmul_forms_on_special_values_follow_the_definition(shape):
    M, K, N = shape
    a, b = (ops.get("matmul").make_inputs(shape, 4)[n].copy() for n in ("a", "b"))
    rng = np.random.default_rng(7)
    for x in (a, b):      # a few special values in each, so most sums stay finite and some do not
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 12)] = _special((12,), int(flat.size))
    with np.errstate(invalid="ignore", over="ignore"):
        acc = np.zeros((M, N), np.float32)
        for k in range(K):
            acc = fma(np.repeat(a[:, k:k + 1], N, axis=1), np.repeat(b[k:k + 1, :], M, axis=0), acc)
    assert np.isnan(acc).any() and np.isfinite(acc).any()
    for form in ("tiled", "tiled32", "tiled64"):
        for v in ("whole", "packet", "lanes=16"):
            y, p = _run("matmul", shape, {"a": a, "b": b}, v, form=form)
            assert bitwise_equal(y, acc) and p.fallback is None, (form, v)


def test_the_bounds_proof_covers_every_index():
    # no access is checked one by one and no launch falls back to the checked build: shared
    # indices are proven against their arrays' sizes like buffer indices (bounds.py)
    for name, shape in (("matmul", (37, 129, 70)), ("matmul:tiled32", (37, 129, 70)), ("matmul:tiled32", (6, 1100, 40)),
                        ("matmul:tiled64", (37, 129, 70)), ("matmul:tiled64", (6, 1100, 40)),
                        ("cumsum", (3, 37)), ("transpose", (2, 37, 70))):
        name, _, form = name.partition(":")
        op = ops.get(name, form or None)
        launch = op.launch(shape)
        for v in ("packet", "whole"):
            ck = compile_kernel(op.kernel, launch.consts, v, n=launch.n)
            c = ck.lowering_counts
            assert c["bounds_unprovable"] == 0 and c.get("bounds_checks", 0) == c.get("shared_checks", 0) == 0, \
                (name, v, c)
            _, p = _run(name, shape, op.make_inputs(shape, 0), v, form=form or None)
            assert p.fallback is None, (name, v, p.fallback)


@kernel(block=16)
def off_by_one(x: Buffer[f32], y: Buffer[f32], S: Const[int]):
    t = thread_id()
    s = shared(f32, 16)
    s[t] = x[t]
    barrier()
    y[t] = s[t + S]                    # boundable: the launch's proof fails for S = 1


def test_a_shared_index_the_proof_cannot_cover_is_still_caught():
    from cohort.refimpl.interpreter import KernelRuntimeError
    x = np.arange(16, dtype=np.float32)
    for v in ("packet", "whole"):
        ck = compile_kernel(off_by_one, {"S": 1}, v, n=16)
        assert ck.lowering_counts.get("shared_checks", 0) == 0       # proven at launch, not checked
        p = ck.prepare(16, {"x": x, "y": np.zeros(16, np.float32)})
        with pytest.raises(KernelRuntimeError, match=r"shared array access index 16 out of bounds \(thread 15"):
            p.run()
        assert p.fallback is not None       # the checked build ran and named the access


def test_atomics_run_one_packet_at_a_time():
    op = ops.get("histogram")
    launch = op.launch((5000, 300))
    # the atomic updates the lowering emits: masked throughout (full_packet=off), 6 (5 before
    # the loop for blocks wholly inside the launch); with full_packet on (the default) more, and it is 17
    # since the full path also emits the statements under a varying `if` in its all-on body
    # (stmts.varying_branch)
    for variant, sites in (("packet,full_packet=off", 6), ("packet", 17)):
        facts = compile_kernel(op.kernel, launch.consts, variant, n=launch.n).facts
        assert facts["interleaved_packets"] == 1 and facts["atomic_updates"] == sites, variant


def test_histogram_past_the_shared_bins_counts_in_memory():
    from cohort.refimpl.ops.histogram import HB, SHARED_BINS, items
    shape = (300000, SHARED_BINS + 40)
    assert shape[0] > HB * items(shape[1])            # more than one block: the shared form
    idx = np.concatenate([np.arange(SHARED_BINS - 5, SHARED_BINS + 45, dtype=np.int32)] * 6000)
    y, _ = _run("histogram", shape, {"idx": idx}, "packet")
    assert np.array_equal(y, np.bincount(idx[idx < shape[1]], minlength=shape[1]))

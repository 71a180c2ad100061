"""The bounds proof knows how a thread's ids relate (bounds.py): global_id() - thread_id() is
its block's base, and block_id() * B + thread_id() is its global id. Bounded part by part, a
block-neighbour index base + (thread_id() + c) % B spread over [-(B - 1), ...] and a ragged
launch's bid * B + tid over whole blocks, so such kernels always ran the checked build."""
import functools

import numpy as np
import pytest

from cohort import Buffer, block_id, block_size, f32, global_id, kernel, thread_id
from cohort.backend import compiler as _compiler
from cohort.refimpl.interpreter import KernelRuntimeError, interpret
from cohort.verify.checksum import bitwise_equal
from cohort.verify.guard import GuardedSet

# this module checks the builds' own behaviour and errors: launches go straight to native
# code (the default verify="first" would report the interpreter's error before the build's)
compile_kernel = functools.partial(_compiler.compile_kernel, verify="never")

VARIANTS = ["whole", "packet,lanes=4", "packet,lanes=8", "packet,lanes=16"]
B = 32


@kernel(block=B)
def block_neighbour(x: Buffer[f32], y: Buffer[f32]):
    y[global_id()] = x[global_id() - thread_id() + (thread_id() + 5) % B]


@kernel(block=B)
def id_parts(x: Buffer[f32], y: Buffer[f32]):
    y[block_id() * B + thread_id()] = x[block_id() * block_size() + thread_id() + 1] * 2.0


def _native_error(kfn, variant, n, nx, ny):
    """The native launch reports the access, with the buffers' guard bands intact."""
    got = GuardedSet({"x": np.ones(nx, np.float32), "y": np.zeros(ny, np.float32)})
    with pytest.raises(KernelRuntimeError, match="out of bounds") as e:
        compile_kernel(kfn, None, variant, n=n).launch(n, got.arrays)
    assert "[native" in str(e.value) and got.intact()


def _run(kfn, variant, n, nx, ny):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(nx).astype(np.float32)
    ck = compile_kernel(kfn, None, variant, n=n)
    got = GuardedSet({"x": x, "y": np.zeros(ny, np.float32)})
    ck.launch(n, got.arrays)
    want = {"x": x.copy(), "y": np.zeros(ny, np.float32)}
    interpret(kfn.ir, n, want)
    assert got.intact()
    assert bitwise_equal(got.arrays["y"], want["y"]), (kfn.__name__, variant, n)
    return ck.last_prepared.fallback


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n", [1, 31, 32, 33, 94, 129])
def test_the_block_base_and_the_global_id_are_proven_at_ragged_sizes(variant, n):
    blocks = -(-n // B)
    assert _run(block_neighbour, variant, n, blocks * B, n) is None
    assert _run(id_parts, variant, n, n + 1, n) is None


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_past_is_still_reported_where_a_thread_reaches_it(variant):
    """A buffer one short: the proof fails and the checked build reports the access."""
    n = 2 * B + 30           # thread 26 of the last block reads base + 31
    _native_error(block_neighbour, variant, n, 3 * B - 1, n)
    _native_error(id_parts, variant, n, n, n)
    # no launched thread reaches the last element: the interval (over whole blocks) cannot
    # tell, so the checked build runs, correctly
    assert _run(block_neighbour, variant, 2 * B + 26, 3 * B - 1, 2 * B + 26) is not None


@kernel(block=B)
def id_parts_wrong_size(x: Buffer[f32], y: Buffer[f32]):
    y[global_id()] = x[block_id() * (2 * B) + thread_id()]


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_the_block_size_makes_a_global_id(variant):
    """block_id() * 2B + thread_id() is not the global id: block 1 reads past 2B threads' x."""
    n = 2 * B
    _native_error(id_parts_wrong_size, variant, n, n, n)


@kernel(block=B)
def unreadable_index(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    y[i] = x[i * 2 - i]      # i, in bounds; bounded part by part: [-(n - 1), 2(n - 1)]


def test_a_fuzz_record_says_when_the_safe_body_did_not_run():
    """run_variant marks a legal program whose proof failed (the coverage report's
    lowering counts): the campaign can see safe builds whose body it never tested."""
    from cohort.refimpl.ir import DType
    from cohort.verify.execute import reference, run_variant
    from cohort.verify.gen.case import BufferSpec, Case
    for kfn, fell_back in ((unreadable_index, True), (block_neighbour, False)):
        case = Case(kfn.ir, 64, {}, (BufferSpec("x", DType.F32, 64), BufferSpec("y", DType.F32, 64)), {}, 3)
        ref, _ = reference(case)
        for spec in ("whole", "packet,lanes=8", "whole,checked=on"):
            rec = run_variant(case, spec, ref)
            assert rec["status"] == "ok", rec
            want = fell_back and "checked" not in spec
            assert ("proof_fallback" in rec["lowering"]) == want, (kfn.__name__, spec, rec["lowering"])

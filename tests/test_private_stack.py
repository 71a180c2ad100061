"""Small private arrays live on the entry's stack (core.PRIVATE_STACK_BYTES), large ones in
the caller's scratch; loops of at most loops.UNROLL_TRIPS constant trips are unrolled in a
user's build, so items indexed by their variable become constants LLVM keeps in registers.
Both sides of each threshold, every layout and width, on the caller and in the pool, bit for
bit against the interpreter with guard bands intact."""
import numpy as np
import pytest

from cohort import Buffer, Const, block_id, block_size, f32, kernel, private, thread_id
from cohort.backend import jit
from cohort.backend.compiler import compile_kernel
from cohort.backend.context import private_bytes
from cohort.backend.lowering.core import PRIVATE_STACK_BYTES
from cohort.backend.lowering.loops import UNROLL_TRIPS
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.specialize import specialize
from cohort.verify.checksum import bitwise_equal
from cohort.verify.guard import GuardedSet

B = 32


@kernel(block=B)
def items_kernel(x: Buffer[f32], y: Buffer[f32], cols: Const[int], items: Const[int]):
    base = block_id() * cols
    t = thread_id()
    v = private(f32, items)
    for k in range(items):
        v[k] = x[base + (t + k * block_size()) % cols]   # cols = items * B - 3: the last items wrap
    acc = 0.0
    for k in range(items):
        acc = acc * 0.5 + v[items - 1 - k]         # read back in the other order
    for k in range(items):
        y[block_id() * items * block_size() + t + k * block_size()] = v[k] - acc   # each once


def _run(items, variant, level):
    rows, cols = 5, items * B - 3
    n = rows * B
    rng = np.random.default_rng(items)
    want = {"x": rng.standard_normal(rows * cols).astype(np.float32),
            "y": np.zeros(rows * items * B, np.float32)}
    consts = {"cols": cols, "items": items}
    with jit.quick_compiles(level):
        ck = compile_kernel(items_kernel, consts, variant, n=n)
    got = GuardedSet({k: v.copy() for k, v in want.items()})
    ck.launch(n, got.arrays)
    interpret(specialize(items_kernel.ir, consts), n, want)
    assert got.intact()
    assert bitwise_equal(got.arrays["y"], want["y"]), (items, variant, level)


ON_STACK = PRIVATE_STACK_BYTES // (B * 4)
SIZES = [2, UNROLL_TRIPS, UNROLL_TRIPS + 1, ON_STACK, ON_STACK + 1]
VARIANTS = ["whole", "packet,lanes=4,private=thread", "packet,lanes=8", "packet,lanes=16,interleave=1",
            "packet,lanes=8,grain=1,workers=2"]


def test_the_sizes_straddle_both_thresholds():
    k = lambda items: specialize(items_kernel.ir, {"cols": items * B - 3, "items": items})
    assert private_bytes(k(ON_STACK)) == PRIVATE_STACK_BYTES
    assert private_bytes(k(ON_STACK + 1)) > PRIVATE_STACK_BYTES


@pytest.mark.parametrize("items", SIZES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_private_items_are_exact_on_the_stack_and_in_scratch(items, variant):
    _run(items, variant, jit.FULL)


@pytest.mark.parametrize("items", [2, ON_STACK + 1])
@pytest.mark.parametrize("level", [0, 1])
def test_quick_levels_too(items, level):
    _run(items, "packet,lanes=8", level)


def test_every_unrolling_asked_for_is_done(capfd):
    """LLVM warns on stderr ("loop not unrolled") when it cannot do an unrolling a loop asks
    for: a loop whose bounds are variables kept across regions (layernorm's private form at
    width 1) once did. Its trip count is now written as a constant."""
    from cohort.backend import objcache
    from cohort.refimpl import ops
    op = ops.get("layernorm", form="private")
    for variant in ("whole", "packet", "packet-branchy,lanes=16"):
        launch = op.launch(op.parse_shape("17x66"))
        with objcache.disabled():
            compile_kernel(op.kernel, launch.consts, variant + ",interleave=1" if variant != "whole" else variant,
                           n=launch.n)
    assert "not unrolled" not in capfd.readouterr().err

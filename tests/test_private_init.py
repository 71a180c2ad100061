"""Private arrays written whole before any read are not zeroed (backend/private_init.py):
which arrays the proof accepts, and that every other array still starts at zero."""
import numpy as np
import pytest

from cohort import Buffer, Const, f32, global_id, kernel, private
from cohort.backend.bounds import Bounds
from cohort.backend.compiler import compile_kernel
from cohort.backend.private_init import written_before_read
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.specialize import specialize


@kernel(block=8)
def _cases(x: Buffer[f32], y: Buffer[f32], n: Const[int]):
    g = global_id()
    whole = private(f32, n + 1)            # a loop over n items, then item n
    for k in range(n):
        whole[k] = x[g] + f32(k)
    whole[n] = x[g]
    shifted = private(f32, 4)              # a loop at an offset, then the first item
    for k in range(0, 3):
        shifted[k + 1] = x[g]
    shifted[0] = 1.0
    guarded = private(f32, 2)              # under an if: some threads never write (which, varies by block)
    if g % 3 == 0:
        guarded[0] = 2.0
        guarded[1] = 3.0
    short = private(f32, 3)                # one item never written
    for k in range(2):
        short[k] = x[g]
    early = private(f32, 2)                # read before it is whole
    early[0] = 1.0
    early[1] = early[0] + 1.0
    y[g] = whole[n] + whole[0] + shifted[0] + shifted[3] + guarded[0] + guarded[1] + short[2] + early[1]


def _kernel(n=3):
    return specialize(_cases.ir, {"n": n})


def test_only_arrays_written_whole_before_a_read_skip_their_zeroing():
    k = _kernel()
    assert written_before_read(k, Bounds(k).constant) == {"whole", "shifted"}


@pytest.mark.parametrize("variant", ["whole", "packet", "lanes=4,interleave=1", "packet,private=thread"])
def test_the_zeroed_arrays_still_read_zero_in_every_block(variant):
    # 5 blocks: a block whose thread does not write `guarded` must read 0.0, not what the
    # previous block's thread left in the scratch
    n = 37
    x = np.arange(n, dtype=np.float32) * 0.5
    want = np.zeros(n, np.float32)
    interpret(_cases.ir, n, {"x": x, "y": want}, {"n": 3})
    ck = compile_kernel(_cases, {"n": 3}, variant, n=n)
    got = np.full(n, np.nan, np.float32)
    ck.launch(n, {"x": x, "y": got})
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm", "masked_softmax", "swiglu", "gelu"])
def test_the_row_operators_private_forms_write_their_arrays_whole(name):
    # their partial item is stored whole (0 where it is no column), so no array needs zeroing
    from cohort.refimpl import ops
    from cohort.refimpl.stmts import Private
    op = ops.get(name).with_form("private")
    k = specialize(op.kernel.ir, op.launch((3, 65)).consts)
    arrays = {s.name for s in k.body if isinstance(s, Private)}
    assert arrays and written_before_read(k, Bounds(k).constant) == arrays

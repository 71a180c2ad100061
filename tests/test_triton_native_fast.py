"""The native lowering's fast paths give the reference's bits where they apply and stand aside
where they do not: exp/exp2 below the bound where the reference is +0 (no underflowing
multiply), the launch fast path (native_launch.py) on every kind of argument."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="cohort.triton needs torch (pip install -e '.[triton]')")
triton = pytest.importorskip("triton", reason="cohort.triton needs triton (pip install -e '.[triton]')")
import triton.language as tl  # noqa: E402

import cohort.triton as ct  # noqa: E402
from cohort.triton.mathx import math_f32  # noqa: E402
from cohort.triton.native_ops import ZERO_BELOW  # noqa: E402


def _bits(t):
    t = t.detach().contiguous()
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16 if t.element_size() == 2 else torch.int8
                  if t.element_size() == 1 else torch.int64).numpy().copy()


def _both(kernel, grid, make, **meta):
    """The kernel's outputs (bits) in reference and native mode, from fresh arguments each."""
    outs = []
    for mode in ("reference", "native"):
        args = make()
        with ct.on_cpu(mode=mode):
            kernel[grid](*args, **meta)
            if mode == "native":
                kernel[grid](*args, **meta)          # the second launch takes the launch fast path
        outs.append([_bits(a) for a in args if isinstance(a, torch.Tensor)])
    return outs


@pytest.mark.parametrize("name", sorted(ZERO_BELOW))
def test_zero_below_is_where_the_reference_is_zero(name):
    bound = np.uint32(ZERO_BELOW[name]).view(np.float32)
    lo = np.float32(bound * np.float32(1.02))          # a window below the bound, every float of it
    x = np.arange(ZERO_BELOW[name], np.float32(lo).view(np.uint32) + 1, dtype=np.uint32).view(np.float32)
    y = math_f32(name, x)
    assert y[0] != 0                                    # the bound itself is not +0 ...
    assert not y[1:].view(np.uint32).any()             # ... every float below it is
    assert not math_f32(name, np.array([-np.inf, -3e38], np.float32)).view(np.uint32).any()


@triton.jit
def exp_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, tl.exp(x))
    tl.store(out_ptr + BLOCK + o, tl.exp2(x * 1.5))
    tl.store(out_ptr + 2 * BLOCK + o, tl.sigmoid(-x))


def test_exp_near_and_below_the_zero_bound_is_the_reference():
    special = []
    for name in ("exp", "exp2"):
        b = ZERO_BELOW[name]
        for d in (-2, -1, 0, 1, 2):                     # the bound and its neighbours on both sides
            special.append(np.uint32(b + d).view(np.float32))
    special = np.array(special + [-np.inf, np.nan, -1e30, -100.0, -87.5, -126.0, 0.0, -0.0, 88.0, 1.0],
                       np.float32)
    sub = np.float32(special / np.float32(1.5))         # exp2's operand is x * 1.5
    x = np.concatenate([special, sub, np.linspace(-160, 5, 64 - 2 * special.size, dtype=np.float32)])
    xt = torch.from_numpy(x)
    ref, nat = _both(exp_kernel, (1,), lambda: (xt.clone(), torch.zeros(3 * 64)), BLOCK=64)
    for a, b in zip(ref, nat):
        assert np.array_equal(a, b)

"""The sanitizing build through cohort.torch's ops (`kernel_op` under `cohort.torch.variant`):
each call starts with clean global shadows (a call through another permutation is no race), and
a planted write conflict is reported in the interpreter's words, never a silent answer."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cohort.torch as ct  # noqa: E402
from cohort import Buffer, KernelRuntimeError, f32, global_id, i32, kernel  # noqa: E402


@kernel(block=32)
def scatter(idx: Buffer[i32], x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[idx[g]] = x[g]


@pytest.mark.parametrize("variant", ["packet,sanitize=on", "whole,sanitize=on", "packet,grain=1,workers=2,sanitize=on"])
def test_kernel_op_calls_start_clean_and_a_conflict_is_reported(variant):
    op = ct.kernel_op(f"sanitize_test::scatter_{variant.split(',')[0]}_{len(variant)}", scatter,
                      inputs=("idx", "x"), output="y", shape=lambda idx, x: (x.numel(),),
                      launch=lambda idx, x: (x.numel(), {}), verify="never")
    x = torch.arange(100, dtype=torch.float32)
    g = torch.Generator().manual_seed(5)
    with ct.variant(variant):
        for _ in range(3):                       # one shape, other indices: each call alone is clean
            p = torch.randperm(100, generator=g).to(torch.int32)
            y = op(p, x)
            assert torch.equal(y[p.long()], x)
        p[40] = p[41]
        with pytest.raises(KernelRuntimeError, match=rf"write conflict: threads 40 and 41 both store to "
                                                     rf"y\[{int(p[41])}\] \(thread 41, block 1\) \[native, "):
            op(p, x)

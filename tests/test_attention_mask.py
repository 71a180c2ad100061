"""attention with SDPA's attn_mask and a sliding window (issue 26): the interpreter's
definition, every variant bit for bit, the float64 oracle, and the torch op against
scaled_dot_product_attention."""
import math

import numpy as np
import pytest

from cohort.backend.compiler import compile_kernel
from cohort.refimpl.ops import attention as A
from cohort.refimpl.ops.base import ShapeError, seeded_normal
from cohort.verify.compare import verify_build

SHAPE = (2, 4, 2, 19, 23, 8, 8)          # B, H, Hkv, Sq, Skv, D, Dv: two tiles of rows, a partial key tile
VARIANTS = ("whole", "packet", "packet,lanes=16", "lanes=4,full_packet=off,predicated=off",
            "packet,interleave=1", "packet,checked=on", "whole,grain=1,workers=2")


def _inputs(shape, seed=3):
    return {n: seeded_normal(seed, "attention", n, sh) for n, sh in A.shapes(shape).items()
            if n not in ("o", "bias")}


def _bool_mask(shape4, seed):
    """True = attend; some rows fully masked, some keys masked everywhere."""
    rng = np.random.default_rng(seed)
    keep = rng.random(shape4) < 0.7
    if shape4[2] > 1:
        keep[..., 0, :] = False               # a fully masked row (in every head it broadcasts to)
    return keep


def _bias_of(keep):
    return np.where(keep, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


def _strides(shape4, SKV):
    full = (shape4[1] * shape4[2] * SKV, shape4[2] * SKV, SKV)
    return tuple(0 if shape4[i] == 1 else full[i] for i in range(3))


def _launch_args(shape, inputs, bias=None, shape4=None, causal=False, window=None):
    B, H, HKV, SQ, SKV, D, DV = shape
    L = A.launch(shape, causal, mask_strides=None if bias is None else _strides(shape4, SKV), window=window)
    bufs = {n: np.ascontiguousarray(a).reshape(-1) for n, a in inputs.items()}
    bufs["bias"] = np.zeros(1, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32).reshape(-1)
    bufs["o"] = np.zeros(B * H * SQ * DV, np.float32)
    return L, {**bufs, **L.scalars}


def _reference(shape, L, args):
    from cohort.refimpl.interpreter import interpret
    a = {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in args.items()}
    interpret(A.attention.ir, L.n, a, L.consts)
    B, H, HKV, SQ, SKV, D, DV = shape
    return a["o"].reshape(B, H, SQ, DV)


CASES = {
    "bool [B,1,Sq,Skv]": dict(shape4=(2, 1, 19, 23), kind="bool"),
    "float [B,H,Sq,Skv]": dict(shape4=(2, 4, 19, 23), kind="float"),
    "padding [B,1,1,Skv]": dict(shape4=(2, 1, 1, 23), kind="bool"),
    "causal + float [Sq,Skv]": dict(shape4=(1, 1, 19, 23), kind="float", causal=True),
    "window 5": dict(shape4=None, causal=True, window=5),
    "window 9 + bool": dict(shape4=(2, 1, 19, 23), kind="bool", causal=True, window=9),
}


def _case(name):
    c = CASES[name]
    inputs = _inputs(SHAPE)
    bias = None
    if c.get("shape4"):
        keep = _bool_mask(c["shape4"], 7)
        bias = _bias_of(keep) if c["kind"] == "bool" else \
            (np.random.default_rng(8).standard_normal(c["shape4"]).astype(np.float32) + _bias_of(keep))
    return inputs, bias, c


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_is_within_the_oracle_and_rows_without_keys_are_zero(name):
    inputs, bias, c = _case(name)
    L, args = _launch_args(SHAPE, inputs, bias, c.get("shape4"), c.get("causal", False), c.get("window"))
    y = _reference(SHAPE, L, args).astype(np.float64)
    want = A.reference(inputs["q"], inputs["k"], inputs["v"], c.get("causal", False), None,
                       None if bias is None else bias.astype(np.float64), c.get("window"))
    assert np.isfinite(y).all()
    err = np.abs(y - want).max(axis=-1) / np.maximum(np.abs(want).max(axis=-1), 1e-30)
    zero_rows = np.abs(want).max(axis=-1) == 0
    assert (y[zero_rows] == 0).all()                      # fully masked: exactly 0
    assert err[~zero_rows].max() <= 1e-5


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_variant_is_the_interpreters_bits(name):
    inputs, bias, c = _case(name)
    L, args = _launch_args(SHAPE, inputs, bias, c.get("shape4"), c.get("causal", False), c.get("window"))
    for spec in VARIANTS:
        ck = compile_kernel(A.attention, L.consts, spec, n=L.n)
        verdict = verify_build(ck, L.n, args, label=spec)
        assert verdict.ok, verdict.describe()


def test_an_all_true_mask_is_bitwise_no_mask():
    inputs = _inputs(SHAPE)
    L0, a0 = _launch_args(SHAPE, inputs)
    L1, a1 = _launch_args(SHAPE, inputs, _bias_of(np.ones((2, 1, 19, 23), bool)), (2, 1, 19, 23))
    assert _reference(SHAPE, L0, a0).tobytes() == _reference(SHAPE, L1, a1).tobytes()


def test_a_window_wider_than_the_keys_is_bitwise_causal():
    inputs = _inputs(SHAPE)
    L0, a0 = _launch_args(SHAPE, inputs, causal=True)
    L1, a1 = _launch_args(SHAPE, inputs, causal=True, window=10 ** 6)
    assert _reference(SHAPE, L0, a0).tobytes() == _reference(SHAPE, L1, a1).tobytes()


def test_a_window_without_causal_is_refused():
    with pytest.raises(ShapeError, match="causal"):
        A.launch(SHAPE, False, window=4)


# ---------------------------------------------------------------- the torch op

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _qkv(B=2, H=4, HKV=2, SQ=19, SKV=23, D=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, SQ, D, generator=g), torch.randn(B, HKV, SKV, D, generator=g),
            torch.randn(B, HKV, SKV, D, generator=g))


def _sdpa(q, k, v, mask):
    rep = q.shape[1] // k.shape[1]
    if mask is not None:                    # SDPA wants at least [Sq, Skv]: add the leading 1s
        mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    return F.scaled_dot_product_attention(q.double(), k.repeat_interleave(rep, 1).double(),
                                          v.repeat_interleave(rep, 1).double(),
                                          attn_mask=None if mask is None else
                                          (mask if mask.dtype is torch.bool else mask.double()))


def _close(got, want, live):
    got, want = got.double(), want
    scale = want.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
    return (((got - want).abs() / scale)[live]).max().item()


@pytest.mark.parametrize("mshape", [(2, 1, 19, 23), (19, 23), (2, 4, 19, 23), (2, 1, 1, 23), (23,), (1, 1, 19, 1)])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_torch_mask_matches_sdpa(mshape, dtype):
    import cohort.torch as ct
    q, k, v = _qkv()
    g = torch.Generator().manual_seed(5)
    keep = torch.rand(mshape, generator=g) < 0.75
    mask = keep if dtype is torch.bool else torch.randn(mshape, generator=g).masked_fill(~keep, float("-inf"))
    got = ct.attention(q, k, v, mask=mask)
    want = _sdpa(q, k, v, mask)
    live = torch.isfinite(want).all(dim=-1)               # SDPA's fully masked rows are NaN; ours 0
    assert (got[~live] == 0).all()
    assert _close(got, want, live) <= 1e-5
    # the dispatcher's path gives the same bits
    assert torch.equal(torch.ops.cohort.attention(q, k, v, False, None, mask, None), got)


def test_torch_window_matches_sdpa_with_the_windowed_mask():
    import cohort.torch as ct
    q, k, v = _qkv(SQ=23, SKV=23)
    i = torch.arange(23)[:, None]
    j = torch.arange(23)[None, :]
    for W in (1, 4, 8, 30):
        got = ct.attention(q, k, v, causal=True, window=W)
        want = _sdpa(q, k, v, (j <= i) & (j > i - W))
        assert _close(got, want, torch.ones(got.shape[:-1], dtype=torch.bool)) <= 1e-5, W


def test_torch_bool_mask_is_bitwise_the_float_mask_and_true_is_no_mask():
    import cohort.torch as ct
    q, k, v = _qkv()
    keep = torch.rand(2, 1, 19, 23, generator=torch.Generator().manual_seed(2)) < 0.6
    fmask = torch.zeros(keep.shape).masked_fill(~keep, -math.inf)
    assert torch.equal(ct.attention(q, k, v, mask=keep), ct.attention(q, k, v, mask=fmask))
    assert torch.equal(ct.attention(q, k, v, mask=torch.ones(19, 23, dtype=torch.bool)), ct.attention(q, k, v))


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(mask=torch.ones(19, 23, dtype=torch.int32)), TypeError, "mask must be torch.bool"),
    (dict(mask=torch.ones(19, 23, dtype=torch.float16)), TypeError, r"mask.*\.float\(\)"),
    (dict(mask=torch.ones(19, 22, dtype=torch.bool)), ValueError, "mask of shape"),
    (dict(mask=torch.ones(3, 1, 19, 23, dtype=torch.bool)), ValueError, "does not broadcast"),
    (dict(mask=torch.ones(1, 2, 3, 19, 23, dtype=torch.bool)), ValueError, "does not broadcast"),
    (dict(mask=[[True]]), TypeError, "mask must be a torch.Tensor"),
    (dict(window=4), ValueError, "window=4 needs causal=True"),
    (dict(window=0, causal=True), ValueError, "window must be at least 1"),
    (dict(window=2.5, causal=True), TypeError, "window must be an int"),
])
def test_bad_masks_and_windows_name_the_argument(kw, exc, msg):
    import cohort.torch as ct
    q, k, v = _qkv()
    with pytest.raises(exc, match=msg):
        ct.attention(q, k, v, **kw)
    schema_type = not isinstance(kw.get("mask", torch.ones(1)), torch.Tensor) or isinstance(kw.get("window"), float)
    if schema_type:        # through the dispatcher, torch's schema check names the argument first
        exc, msg = RuntimeError, "mask" if "mask" in kw else "window"
    with pytest.raises(exc, match=msg):
        torch.ops.cohort.attention(q, k, v, kw.get("causal", False), None, kw.get("mask"), kw.get("window"))


def test_masked_attention_traces_with_no_graph_break_and_passes_opcheck():
    import cohort.torch as ct
    q, k, v = _qkv()
    keep = torch.rand(2, 1, 19, 23, generator=torch.Generator().manual_seed(4)) < 0.7
    f = torch.compile(lambda q, k, v, m: ct.attention(q, k, v, mask=m), fullgraph=True, backend="eager")
    assert torch.equal(f(q, k, v, keep), ct.attention(q, k, v, mask=keep))
    torch.library.opcheck(torch.ops.cohort.attention.default, (q, k, v, False, None, keep, None))
    torch.library.opcheck(torch.ops.cohort.attention.default, (q, k, v, True, 0.3, None, 5))

"""Argument checks shared by the ops' real and fake implementations: they read
only dtypes, devices and shapes, so they run on FakeTensors and symbolic
shapes too. Bad input raises TypeError (not a tensor, wrong dtype) or
ValueError (device, shape), naming the op and the argument."""
from __future__ import annotations

import math

import torch

MAX_ELEMENTS = 2 ** 31 - 1024      # a buffer's length and a launch's threads are 32-bit
# the float dtypes of the forward ops' tensors: bf16/f16 are storage, the arithmetic f32 (dtypes.py)
FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def tensor(op: str, name: str, t, dtype=torch.float32, min_dim: int = 0):
    """dtype: one torch dtype, or a tuple of the accepted ones (FLOATS)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in (dtype if isinstance(dtype, tuple) else (dtype,)):
        want = f"{', '.join(map(str, dtype[:-1]))} or {dtype[-1]}" if isinstance(dtype, tuple) else dtype
        f32 = dtype == torch.float32 or (isinstance(dtype, tuple) and torch.float32 in dtype)
        hint = " (convert with .float())" if f32 and t.is_floating_point() else ""
        raise TypeError(f"{op}: {name} must be {want}, got {t.dtype}{hint}")
    if t.device.type != "cpu":
        raise ValueError(f"{op}: {name} must be on the CPU, got device {t.device}")
    if t.dim() < min_dim:
        raise ValueError(f"{op}: {name} needs at least {min_dim} dimension(s), got shape {tuple(t.shape)}")
    if not isinstance(t.numel(), torch.SymInt) and t.numel() > MAX_ELEMENTS:
        raise ValueError(f"{op}: {name} has {t.numel()} elements; at most {MAX_ELEMENTS}")
    return t


def like(op: str, first_name: str, first, *named):
    """Each (name, tensor) of `named` has first's dtype: one float type per call, the output's."""
    for name, t in named:
        if t.dtype != first.dtype:
            raise TypeError(f"{op}: {name} is {t.dtype} and {first_name} is {first.dtype}; they must have one dtype "
                            f"(the output's)")


def number(op: str, name: str, v, positive: bool = False, nonnegative: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a float, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v) or abs(v) > 3.4028234663852886e38 or (positive and v <= 0) or (nonnegative and v < 0):
        bound = " > 0" if positive else " >= 0" if nonnegative else ""
        raise ValueError(f"{op}: {name} must be a finite float32{bound}, got {v!r}")
    return v


def same_shape(op: str, a_name: str, a, b_name: str, b):
    if a.shape != b.shape:
        raise ValueError(f"{op}: {b_name} has shape {tuple(b.shape)}, {a_name} has {tuple(a.shape)}; "
                         f"they must be equal")


def broadcasts(op: str, a_name: str, a, x_name: str, x):
    """a's shape broadcasts to x's (not the other way: x's shape is the result's)."""
    sa, sx = tuple(a.shape), tuple(x.shape)
    if len(sa) > len(sx) or any(d != 1 and d != e for d, e in zip(sa[::-1], sx[::-1])):
        raise ValueError(f"{op}: {a_name} of shape {sa} does not broadcast to {x_name}'s shape {sx}")


def last_dim(op: str, x_name: str, x, w_name: str, w):
    if w.dim() != 1 or w.shape[0] != x.shape[-1]:
        raise ValueError(f"{op}: {w_name} must have shape ({x.shape[-1]},) (the last dimension of "
                         f"{x_name}), got {tuple(w.shape)}")


def attention_mask(mask, window, causal, shape, dtype=torch.float32):
    """The mask's 4-D shape (leading 1s added), checked against (B, H, Sq, Skv): a bool
    (True = attend) or float (added to the scores: float32 or q's dtype `dtype`) tensor
    broadcasting to it, as SDPA's attn_mask; and the window, an int >= 1 with causal=True."""
    op = "attention"
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int):
            raise TypeError(f"{op}: window must be an int (keys i - window < j <= i) or None, "
                            f"got {type(window).__name__}")
        if window < 1 or window > 2 ** 31 - 1:
            raise ValueError(f"{op}: window must be at least 1 (and a 32-bit int), got {window}")
        if not causal:
            raise ValueError(f"{op}: window={window} needs causal=True (a sliding window hides keys "
                             f"j <= i - window of the causal range j <= i)")
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{op}: mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype not in (torch.bool, torch.float32, dtype):
        hint = " (convert with .float())" if mask.is_floating_point() else ""
        also = "" if dtype == torch.float32 else f" or q's {dtype}"
        raise TypeError(f"{op}: mask must be torch.bool (True = attend) or torch.float32{also} (added to the "
                        f"scores), got {mask.dtype}{hint}")
    if mask.device.type != "cpu":
        raise ValueError(f"{op}: mask must be on the CPU, got device {mask.device}")
    sm = tuple(mask.shape)
    if len(sm) > 4 or any(d != 1 and d != e for d, e in zip(sm[::-1], shape[::-1])):
        raise ValueError(f"{op}: mask of shape {sm} does not broadcast to (batch, heads, Sq, Skv) = {tuple(shape)}")
    return (1,) * (4 - len(sm)) + sm


def interleaved(op: str, v):
    if not isinstance(v, bool):
        raise TypeError(f"{op}: interleaved must be given, True or False: True rotates pairs (2k, 2k+1) as "
                        f"GPT-J; False rotates halves (k, k + R/2) as Llama, Mistral, Qwen2, GPT-NeoX, Phi and "
                        f"Gemma (got {v!r})")


def rope_hf(q, k, cos, sin):
    """(cos, sin) of transformers' shapes ([B, S, R] or [S, R], halves repeated) as rope takes
    them: their first halves, [B, 1, S, R/2] (broadcast over the heads) or [S, R/2]."""
    op = "rope_hf"
    for name, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        tensor(op, name, t, FLOATS)
    like(op, "q", q, ("k", k), ("cos", cos), ("sin", sin))
    for name, t in (("q", q), ("k", k)):
        if t.dim() != 4:
            raise ValueError(f"{op}: {name} must be 4-D [batch, heads, sequence, features], got {tuple(t.shape)}")
    B, _, S, D = q.shape
    if k.shape[0] != B or k.shape[2] != S or k.shape[3] != D:
        raise ValueError(f"{op}: k has shape {tuple(k.shape)}, q {tuple(q.shape)}; batch, sequence and "
                         f"features must be equal")
    if cos.shape != sin.shape:
        raise ValueError(f"{op}: cos has shape {tuple(cos.shape)}, sin has {tuple(sin.shape)}; they must be equal")
    if cos.dim() not in (2, 3) or cos.shape[-2] != S or (cos.dim() == 3 and cos.shape[0] not in (1, B)):
        raise ValueError(f"{op}: cos must be [batch, S, R] or [S, R] with S = {S} (and batch {B} or 1), got "
                         f"{tuple(cos.shape)}")
    R = cos.shape[-1]
    if R == 0 or R % 2 or R > D:
        raise ValueError(f"{op}: the rotary dimension R = cos.shape[-1] = {R} must be even, at least 2 and at "
                         f"most the features D = {D}")
    c, s = cos[..., :R // 2], sin[..., :R // 2]
    if cos.dim() == 3:
        c, s = c.unsqueeze(1), s.unsqueeze(1)
    return c, s


def rope(x, cos, sin):
    """(N, S, D, R, cos_rows) of a rope call; cos_rows: S when cos/sin broadcast over x's leading
    dimensions as [S, R/2], N*S when they must be expanded to x's leading dimensions."""
    op = "rope"
    tensor(op, "x", x, FLOATS, min_dim=2)
    tensor(op, "cos", cos, FLOATS, min_dim=2)
    tensor(op, "sin", sin, FLOATS, min_dim=2)
    like(op, "x", x, ("cos", cos), ("sin", sin))
    if cos.shape != sin.shape:
        raise ValueError(f"rope: cos has shape {tuple(cos.shape)}, sin has {tuple(sin.shape)}; they must be equal")
    S, D = x.shape[-2], x.shape[-1]
    half = cos.shape[-1]
    if half == 0:
        raise ValueError("rope: cos and sin have no columns (the rotary dimension R = 2 * cos.shape[-1] is 0)")
    R = 2 * half
    if R > D:
        raise ValueError(f"rope: the rotary dimension R = 2 * cos.shape[-1] = {R} is larger than x's last "
                         f"dimension D = {D}")
    if cos.shape[-2] != S:
        raise ValueError(f"rope: cos has {cos.shape[-2]} positions (shape {tuple(cos.shape)}), x has {S} "
                         f"(x.shape[-2]); cos and sin are [S, R/2]")
    lead_x, lead_c = tuple(x.shape[:-2]), tuple(cos.shape[:-2])
    if len(lead_c) > len(lead_x) or any(c != 1 and c != a for c, a in zip(lead_c[::-1], lead_x[::-1])):
        raise ValueError(f"rope: cos of shape {tuple(cos.shape)} does not broadcast over x's leading "
                         f"dimensions {lead_x}")
    N = math.prod(lead_x)
    shared = all(c == 1 for c in lead_c)
    return N, S, D, R, (S if shared else N * S)


def attention(q, k, v):
    """(B, H, HKV, SQ, SKV, D, DV) of an attention call."""
    op = "attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        tensor(op, name, t, FLOATS)
        like(op, "q", q, (name, t))
        if t.dim() != 4:
            raise ValueError(f"attention: {name} must be 4-D [batch, heads, sequence, features] as in "
                             f"scaled_dot_product_attention, got shape {tuple(t.shape)}")
    B, H, SQ, D = q.shape
    Bk, HKV, SKV, Dk = k.shape
    Bv, HKVv, SKVv, DV = v.shape
    if Bk != B or Bv != B:
        raise ValueError(f"attention: batch sizes differ: q {B}, k {Bk}, v {Bv}")
    if Dk != D:
        raise ValueError(f"attention: k's feature size {Dk} differs from q's {D} (k {tuple(k.shape)}, "
                         f"q {tuple(q.shape)})")
    if HKVv != HKV or SKVv != SKV:
        raise ValueError(f"attention: v has shape {tuple(v.shape)}, k {tuple(k.shape)}; their heads and "
                         f"sequence lengths must be equal")
    if HKV == 0 or H % HKV != 0:
        raise ValueError(f"attention: q's heads ({H}) must be a multiple of k's and v's heads ({HKV})")
    if D == 0 or DV == 0:
        raise ValueError(f"attention: feature sizes must be at least 1, got q/k {D}, v {DV}")
    return B, H, HKV, SQ, SKV, D, DV

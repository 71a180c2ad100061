"""cohort's operators as torch ops: `torch.ops.cohort.<name>`, and functions of
the same names that call them.

Each op is a `torch.library.custom_op` with a fake implementation, so
torch.compile (Inductor or the default backend) traces it as one node with no
graph break. The real implementation checks its arguments, copies a
non-contiguous input to a contiguous one (`.contiguous()`: the only copy),
allocates a new float32 output and launches the operator's kernel (the
interpreter-defined one; DESIGN §4) in the current variant. Inputs are never
written. Gradients: autograd.py (register_autograd; backward kernels).

The functions (`cohort.torch.rmsnorm`, ...) call the op; in eager mode, on
plain tensors with no gradient to record, they run its implementation
directly and skip the dispatcher's layers (custom_op's Python autograd and
aliasing wrappers cost several microseconds per call). Through the dispatcher
(and so in a torch.compile'd graph, which calls torch.ops.cohort.X.default)
the CPU implementation is registered directly and an AutogradCPU kernel runs
it at once for plain tensors with no gradient to record (`fast_autograd`, at
the end of this module); launches reuse argument blocks per launch shape
(launch.py).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..refimpl import ops as registry
from ..refimpl.ops import attention as attention_op
from . import checks
from .checks import FLOATS
from .dtypes import kernel_for
from .launch import launcher

# The formulation each op launches (all forms of an operator are bit-identical, DESIGN §4).
FORMS = {"rmsnorm": "private", "layernorm": "private", "masked_softmax": "private"}


_KERNELS = {name: registry.get(name, FORMS.get(name)).kernel
            for name in ("rmsnorm", "layernorm", "masked_softmax", "swiglu", "gelu", "gelu_tanh", "gelu_residual",
                         "rope_half", "rope_pairs")}


def _kernel(name: str, dtype=torch.float32):
    """The op's kernel for tensors of `dtype` (bf16/f16: re-typed, dtypes.py)."""
    k = _KERNELS[name]
    return k if dtype is torch.float32 else kernel_for(k, dtype)


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_F32_MAX = 3.4028234663852886e38


def _f32(t) -> bool:
    """A float32 CPU tensor small enough for 32-bit lengths: what every op's quick check asks."""
    return (type(t) is torch.Tensor or type(t) is torch.nn.Parameter) and t.dtype is torch.float32 \
        and t.is_cpu and t.numel() <= checks.MAX_ELEMENTS


_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack


def direct(*tensors) -> bool:
    """Run the implementation directly: eager mode, plain tensors, no gradient to record,
    no dispatch mode active (then the dispatcher's path would do nothing else). Also for an
    argument that is no tensor at all: the implementation's check names it (TypeError).
    A negative view (torch._neg_view: its data are the negated values) goes through the
    dispatcher, whose fallback materialises it; the kernels read the data as stored."""
    if _is_compiling() or _dispatch_modes():
        return False
    grad = _grad_enabled()
    for t in tensors:
        if type(t) not in _PLAIN:
            if isinstance(t, torch.Tensor):
                return False                        # a subclass (FakeTensor, ...): the dispatcher's
            return True
        if (grad and t.requires_grad) or t.is_neg():
            return False
    return True


def _rows(x: Tensor):
    """(rows, columns) of x over its last dimension."""
    C = x.shape[-1]
    return (x.numel() // C if C else 0), C


# ---------------------------------------------------------------- norms and softmax

def _rmsnorm_check(x, weight, eps):
    checks.tensor("rmsnorm", "x", x, FLOATS, min_dim=1)
    checks.tensor("rmsnorm", "weight", weight, FLOATS)
    checks.like("rmsnorm", "x", x, ("weight", weight))
    checks.last_dim("rmsnorm", "x", x, "weight", weight)
    return checks.number("rmsnorm", "eps", eps, nonnegative=True)


@torch.library.custom_op("cohort::rmsnorm", mutates_args=())
def _rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return rmsnorm_impl(x, weight, eps)


def rmsnorm_impl(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    if not (_f32(x) and _f32(weight) and weight.dim() == 1 and x.dim() and weight.shape[0] == x.shape[-1]
            and type(eps) is float and 0.0 <= eps <= _F32_MAX):
        eps = _rmsnorm_check(x, weight, eps)         # raises, or accepts an unusual but valid argument
    x, weight = x.contiguous(), weight.contiguous()
    y = torch.empty_like(x)
    R, C = _rows(x)
    if R:
        k = _kernel("rmsnorm", x.dtype)
        launcher(k, (("cols", C),), True)(R * k.block, (x, weight, y), (eps,))
    return y


@_rmsnorm.register_fake
def _(x, weight, eps=1e-6):
    _rmsnorm_check(x, weight, eps)
    return x.new_empty(x.shape)


def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dimension (weight: [C])."""
    if direct(x, weight):
        return rmsnorm_impl(x, weight, eps)
    return torch.ops.cohort.rmsnorm(x, weight, eps)


def _layernorm_check(x, weight, bias, eps):
    checks.tensor("layernorm", "x", x, FLOATS, min_dim=1)
    checks.tensor("layernorm", "weight", weight, FLOATS)
    checks.tensor("layernorm", "bias", bias, FLOATS)
    checks.like("layernorm", "x", x, ("weight", weight), ("bias", bias))
    checks.last_dim("layernorm", "x", x, "weight", weight)
    checks.last_dim("layernorm", "x", x, "bias", bias)
    return checks.number("layernorm", "eps", eps, nonnegative=True)


@torch.library.custom_op("cohort::layernorm", mutates_args=())
def _layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    return layernorm_impl(x, weight, bias, eps)


def layernorm_impl(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    if not (_f32(x) and _f32(weight) and _f32(bias) and weight.dim() == 1 and bias.dim() == 1 and x.dim()
            and weight.shape[0] == x.shape[-1] and bias.shape[0] == x.shape[-1]
            and type(eps) is float and 0.0 <= eps <= _F32_MAX):
        eps = _layernorm_check(x, weight, bias, eps)
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    R, C = _rows(x)
    if R:
        k = _kernel("layernorm", x.dtype)
        launcher(k, (("cols", C),), True)(R * k.block, (x, weight, bias, y), (eps,))
    return y


@_layernorm.register_fake
def _(x, weight, bias, eps=1e-5):
    _layernorm_check(x, weight, bias, eps)
    return x.new_empty(x.shape)


def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """Layer norm over the last dimension: biased variance, (x - mean)/sqrt(var + eps)*weight + bias."""
    if direct(x, weight, bias):
        return layernorm_impl(x, weight, bias, eps)
    return torch.ops.cohort.layernorm(x, weight, bias, eps)


def _masked_softmax_check(x, mask):
    checks.tensor("masked_softmax", "x", x, FLOATS, min_dim=1)
    checks.tensor("masked_softmax", "mask", mask, dtype=torch.bool)
    if mask.shape != x.shape:
        checks.broadcasts("masked_softmax", "mask", mask, "x", x)


@torch.library.custom_op("cohort::masked_softmax", mutates_args=())
def _masked_softmax(x: Tensor, mask: Tensor) -> Tensor:
    return masked_softmax_impl(x, mask)


def masked_softmax_impl(x: Tensor, mask: Tensor) -> Tensor:
    if not (_f32(x) and x.dim() and type(mask) is torch.Tensor and mask.dtype is torch.bool and mask.is_cpu
            and mask.shape == x.shape):
        _masked_softmax_check(x, mask)
        mask = mask.expand(x.shape)                 # a broadcast mask is copied to x's shape
    x, mask = x.contiguous(), mask.contiguous()
    y = torch.empty_like(x)
    R, C = _rows(x)
    if R:
        k = _kernel("masked_softmax", x.dtype)
        launcher(k, (("cols", C),), True)(R * k.block, (x, mask, y))
    return y


@_masked_softmax.register_fake
def _(x, mask):
    _masked_softmax_check(x, mask)
    return x.new_empty(x.shape)


def masked_softmax(x: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last dimension's entries where mask is True; the others are 0, and a
    row with no True entry is all 0 (never NaN). mask: bool, broadcast to x's shape."""
    if direct(x, mask):
        return masked_softmax_impl(x, mask)
    return torch.ops.cohort.masked_softmax(x, mask)


# ---------------------------------------------------------------- elementwise

def _elementwise(name: str, *named):
    first = named[0]
    for arg, t in named:
        checks.tensor(name, arg, t, FLOATS)
    for arg, t in named[1:]:
        checks.like(name, first[0], first[1], (arg, t))
        checks.same_shape(name, first[0], first[1], arg, t)


def _launch_elementwise(name: str, *inputs) -> Tensor:
    inputs = tuple(t.contiguous() for t in inputs)
    y = torch.empty_like(inputs[0])
    n = y.numel()
    if n:
        launcher(_kernel(name, y.dtype))(n, inputs + (y,))
    return y


@torch.library.custom_op("cohort::swiglu", mutates_args=())
def _swiglu(gate: Tensor, up: Tensor) -> Tensor:
    return swiglu_impl(gate, up)


def swiglu_impl(gate: Tensor, up: Tensor) -> Tensor:
    if not (_f32(gate) and _f32(up) and gate.shape == up.shape):
        _elementwise("swiglu", ("gate", gate), ("up", up))
    return _launch_elementwise("swiglu", gate, up)


@_swiglu.register_fake
def _(gate, up):
    _elementwise("swiglu", ("gate", gate), ("up", up))
    return gate.new_empty(gate.shape)


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up = gate * sigmoid(gate) * up (Llama's MLP activation)."""
    if direct(gate, up):
        return swiglu_impl(gate, up)
    return torch.ops.cohort.swiglu(gate, up)


@torch.library.custom_op("cohort::gelu", mutates_args=())
def _gelu(x: Tensor) -> Tensor:
    return gelu_impl(x)


def gelu_impl(x: Tensor) -> Tensor:
    if not _f32(x):
        _elementwise("gelu", ("x", x))
    return _launch_elementwise("gelu", x)


@_gelu.register_fake
def _(x):
    _elementwise("gelu", ("x", x))
    return x.new_empty(x.shape)


def gelu(x: Tensor) -> Tensor:
    """0.5*x*(1 + erf(x/sqrt(2))): torch's gelu(approximate='none')."""
    if direct(x):
        return gelu_impl(x)
    return torch.ops.cohort.gelu(x)


@torch.library.custom_op("cohort::gelu_tanh", mutates_args=())
def _gelu_tanh(x: Tensor) -> Tensor:
    return gelu_tanh_impl(x)


def gelu_tanh_impl(x: Tensor) -> Tensor:
    if not _f32(x):
        _elementwise("gelu_tanh", ("x", x))
    return _launch_elementwise("gelu_tanh", x)


@_gelu_tanh.register_fake
def _(x):
    _elementwise("gelu_tanh", ("x", x))
    return x.new_empty(x.shape)


def gelu_tanh(x: Tensor) -> Tensor:
    """0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))): gelu(approximate='tanh'), GPT-2's gelu_new."""
    if direct(x):
        return gelu_tanh_impl(x)
    return torch.ops.cohort.gelu_tanh(x)


@torch.library.custom_op("cohort::gelu_residual", mutates_args=())
def _gelu_residual(x: Tensor, r: Tensor) -> Tensor:
    return gelu_residual_impl(x, r)


def gelu_residual_impl(x: Tensor, r: Tensor) -> Tensor:
    if not (_f32(x) and _f32(r) and x.shape == r.shape):
        _elementwise("gelu_residual", ("x", x), ("r", r))
    return _launch_elementwise("gelu_residual", x, r)


@_gelu_residual.register_fake
def _(x, r):
    _elementwise("gelu_residual", ("x", x), ("r", r))
    return x.new_empty(x.shape)


def gelu_residual(x: Tensor, r: Tensor) -> Tensor:
    """gelu(x) + r, fused (gelu(x) + r is the same bits)."""
    if direct(x, r):
        return gelu_residual_impl(x, r)
    return torch.ops.cohort.gelu_residual(x, r)


# ---------------------------------------------------------------- rope

@torch.library.custom_op("cohort::rope", mutates_args=())
def _rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    return rope_impl(x, cos, sin, interleaved)


def rope_impl(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    if (_f32(x) and _f32(cos) and _f32(sin) and x.dim() >= 2 and cos.dim() == 2 and cos.shape == sin.shape
            and cos.shape[0] == x.shape[-2] and 0 < 2 * cos.shape[1] <= x.shape[-1]):
        S, D = x.shape[-2], x.shape[-1]                 # the common case: cos/sin [S, R/2]
        R, N, cos_rows = 2 * cos.shape[1], (x.numel() // (S * D) if S * D else 0), S
    else:
        N, S, D, R, cos_rows = checks.rope(x, cos, sin)
        if cos_rows == S:       # shared by every leading index: [S, R/2]
            cos, sin = cos.reshape(S, R // 2), sin.reshape(S, R // 2)
        else:                   # per leading index: expanded to x's leading dimensions (a copy)
            lead = tuple(x.shape[:-2])
            cos, sin = cos.expand(lead + (S, R // 2)), sin.expand(lead + (S, R // 2))
    x, cos, sin = x.contiguous(), cos.contiguous(), sin.contiguous()
    y = torch.empty_like(x)
    if N * S:
        k = _kernel("rope_pairs" if interleaved else "rope_half", x.dtype)
        consts = (("D", D), ("R", R), ("HALF", 0 if interleaved else 1))
        launcher(k, consts, True)(N * k.block, (x, cos, sin, y), (N, S, 0 if cos_rows == S else S))
    return y


@_rope.register_fake
def _(x, cos, sin, interleaved):
    checks.rope(x, cos, sin)
    return x.new_empty(x.shape)


def rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: Optional[bool] = None) -> Tensor:
    """Rotary embedding of x [..., S, D] by cos, sin [S, R/2] (broadcast over x's leading
    dimensions; leading dimensions of their own broadcast too, at the cost of a copy):
    the first R features rotate, the rest pass through. interleaved=True rotates pairs
    (2k, 2k+1) (GPT-J); False rotates halves (k, k + R/2) (Llama, Mistral, Qwen2, GPT-NeoX,
    Phi, Gemma). It has no default: the wrong one gives a wrong answer and no error.
    transformers' own tables ([B, S, R] or [S, R], halves repeated): `rope_hf`."""
    checks.interleaved("rope", interleaved)
    if direct(x, cos, sin):
        return rope_impl(x, cos, sin, interleaved)
    return torch.ops.cohort.rope(x, cos, sin, interleaved)


@torch.library.custom_op("cohort::rope_hf", mutates_args=())
def _rope_hf(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return rope_hf_impl(q, k, cos, sin)


def rope_hf_impl(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor):
    c, s = checks.rope_hf(q, k, cos, sin)
    if not (torch.equal(cos[..., :c.shape[-1]], cos[..., c.shape[-1]:])
            and torch.equal(sin[..., :c.shape[-1]], sin[..., c.shape[-1]:])):
        raise ValueError("rope_hf: the two halves of cos (or sin) differ; transformers' rotate-half tables "
                         "repeat the same R/2 frequencies twice. For a table of R/2 columns use "
                         "rope(x, cos, sin, interleaved=...)")
    if c.dim() == 2 or c.shape[0] == 1:   # one table for every row: [S, R/2], made contiguous once for q and k
        S, half = c.shape[-2], c.shape[-1]
        c, s = c.reshape(S, half).contiguous(), s.reshape(S, half).contiguous()
    return rope_impl(q, c, s, False), rope_impl(k, c, s, False)


@_rope_hf.register_fake
def _(q, k, cos, sin):
    checks.rope_hf(q, k, cos, sin)
    return q.new_empty(q.shape), k.new_empty(k.shape)


def rope_hf(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin) (rotate-half: Llama, Mistral, Qwen2,
    GPT-NeoX, Phi, Gemma) with its tables as they come: q [B, H, S, D], k [B, Hkv, S, D],
    cos/sin [B, S, R] (per-row positions) or [S, R], the two halves of the last dimension
    equal (checked); R < D is partial rotary (the last D - R features pass through).
    Returns (q', k'), each rotated as rope(x, cos[..., :R/2], sin[..., :R/2], interleaved=False)."""
    if direct(q, k, cos, sin):
        return rope_hf_impl(q, k, cos, sin)
    return torch.ops.cohort.rope_hf(q, k, cos, sin)


# ---------------------------------------------------------------- attention

@torch.library.custom_op("cohort::attention", mutates_args=())
def _attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
               mask: Optional[Tensor] = None, window: Optional[int] = None) -> Tensor:
    return attention_impl(q, k, v, causal, scale, mask, window)


_SCALES: dict = {}    # D -> SDPA's default scale, f32(1/sqrt(D))
_NO_BIAS = torch.zeros(1)    # the kernel's mask buffer when there is no mask (never read)


def _bias(mask: Tensor, shape4: tuple, SKV: int):
    """The mask as the kernel reads it: float32 scores to add (a bool mask as 0 / -inf),
    keys contiguous, and the (batch, head, query) strides, 0 where it broadcasts."""
    m = mask.reshape(shape4)
    if m.dtype is not torch.bool:
        m = m.float()                          # a bf16/f16 mask widened exactly
    else:
        m = torch.zeros(shape4).masked_fill_(~m, float("-inf"))
    if shape4[3] != SKV:                       # broadcast over the keys: spelled out
        m = m.expand(*shape4[:3], SKV)
    m = m.contiguous()
    st = m.stride()
    return m, tuple(0 if shape4[i] == 1 else st[i] for i in range(3))


def attention_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
                   mask: Optional[Tensor] = None, window: Optional[int] = None) -> Tensor:
    if _f32(q) and _f32(k) and _f32(v) and q.dim() == 4 and k.dim() == 4 and v.dim() == 4:
        B, H, SQ, D = q.shape                          # shapes checked by checks.attention on a mismatch
        Bk, HKV, SKV, Dk = k.shape
        Bv, HKVv, SKVv, DV = v.shape
        if not (B == Bk == Bv and D == Dk and HKV == HKVv and SKV == SKVv and HKV and H % HKV == 0 and D and DV):
            checks.attention(q, k, v)
    else:
        B, H, HKV, SQ, SKV, D, DV = checks.attention(q, k, v)
    if scale is None:
        scale = _SCALES.get(D)
        if scale is None:
            scale = _SCALES.setdefault(D, attention_op.default_scale(D))
    else:
        scale = checks.number("attention", "scale", scale)
    shape4 = checks.attention_mask(mask, window, causal, (B, H, SQ, SKV), q.dtype) \
        if mask is not None or window is not None else None
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty((B, H, SQ, DV), dtype=q.dtype)
    if B * H * SQ:
        bias, strides = (_NO_BIAS, (0, 0, 0)) if shape4 is None else _bias(mask, shape4, SKV)
        # attention_op.launch's geometry and constants: a block per (batch, head, tile of BLOCK rows)
        n = B * H * -(-SQ // attention_op.BLOCK) * attention_op.BLOCK
        mode = 2 if window is not None else (1 if causal else 0)
        kernel = kernel_for(attention_op.attention, q.dtype, keep=("bias",))
        run = launcher(kernel, (("D", D), ("DV", DV), ("CAUSAL", mode), ("MASK", int(shape4 is not None))), True)
        run(n, (q, k, v, bias, o), (scale, H, HKV, SQ, SKV, *strides, window or 0))
    return o


@_attention.register_fake
def _(q, k, v, causal=False, scale=None, mask=None, window=None):
    B, H, HKV, SQ, SKV, D, DV = checks.attention(q, k, v)
    if scale is not None:
        checks.number("attention", "scale", scale)
    checks.attention_mask(mask, window, causal, (B, H, SQ, SKV), q.dtype)
    return q.new_empty((B, H, SQ, DV))


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
              mask: Optional[Tensor] = None, window: Optional[int] = None) -> Tensor:
    """softmax(scale * q k^T) v in scaled_dot_product_attention's layouts: q [B,H,Sq,D],
    k [B,Hkv,Skv,D], v [B,Hkv,Skv,Dv] -> [B,H,Sq,Dv]; query head h reads KV head
    h*Hkv//H (H a multiple of Hkv, as enable_gqa). scale defaults to 1/sqrt(D).

    causal=True masks key j for query i when j > i + Skv - Sq: aligned to the END of the
    keys (bottom-right), as KV-cache decoding and FlashAttention need. SDPA's is_causal
    aligns top-left (j > i); the two agree only when Sq == Skv. With Sq > Skv the first
    Sq - Skv rows see no key and are 0.

    mask is SDPA's attn_mask: bool (True = attend) or float32 (added to the scaled scores),
    broadcasting to [B, H, Sq, Skv]. window=W (with causal=True) also hides keys j <= i - W
    (i the row's causal diagonal), Mistral's and Qwen2's sliding window. A row that sees
    no key with a finite score is 0 (SDPA: NaN)."""
    if direct(q, k, v) and (mask is None or direct(mask)):
        return attention_impl(q, k, v, causal, scale, mask, window)
    return torch.ops.cohort.attention(q, k, v, causal, scale, mask, window)


OPS = ("rmsnorm", "layernorm", "masked_softmax", "swiglu", "gelu", "gelu_tanh", "gelu_residual", "rope",
       "rope_hf", "attention")

# The CPU kernels, registered directly: for CPU tensors they take the place of custom_op's
# CompositeExplicitAutograd wrapper (which re-checks that the output aliases no input, ~2 us
# a call). custom_op's autograd kernel, fake implementations and schema are unchanged.
_cpu = torch.library.Library("cohort", "IMPL")
for _name in OPS:
    _cpu.impl(_name, globals()[f"{_name}_impl"], "CPU")

# What a call through the dispatcher (torch.ops.cohort.X, and so every call a torch.compile'd
# graph makes) meets first on CPU tensors: the autograd key. custom_op's kernel there is
# Python that, with no gradient to record, enters a guard and redispatches to the CPU kernel
# (a second trip through the dispatcher and Python, ~5 us). This one, registered for
# AutogradCPU (which takes precedence over custom_op's "Autograd" alias), calls the CPU
# kernel itself when the call's dispatch keys are exactly CPU and AutogradCPU (plain CPU
# tensors: no subclass, FakeTensor, dispatch mode, functorch level or negative/conjugate
# view, any of which adds a key) and no argument needs a gradient; that is the kernel the
# redispatch would reach. Anything else goes to custom_op's own kernel, unchanged.
_PLAIN_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU).add(torch._C.DispatchKey.AutogradCPU)
_any_requires_grad = torch._C._any_requires_grad


def fast_autograd(lib, name: str, op, impl):
    """Register for `op` (a custom_op, cohort::`name`) the AutogradCPU kernel described above."""
    from torch._library.autograd import make_autograd_impl
    slow = make_autograd_impl(op._opoverload, op)     # custom_op's own kernel (reads its backward when called)

    def kernel(keyset, *args):
        if keyset == _PLAIN_KEYS and not (_grad_enabled() and _any_requires_grad(*args)):
            return impl(*args)
        return slow(keyset, *args)

    kernel.__name__ = f"{name}_autograd_cpu"
    lib.impl(name, kernel, "AutogradCPU", with_keyset=True)
    return kernel


for _name in OPS:
    fast_autograd(_cpu, _name, globals()[f"_{_name}"], globals()[f"{_name}_impl"])

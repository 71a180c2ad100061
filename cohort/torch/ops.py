"""cohort's operators as torch ops: `torch.ops.cohort.<name>`, and functions of
the same names that call them.

Each op is a `torch.library.custom_op` with a fake implementation, so
torch.compile (Inductor or the default backend) traces it as one node with no
graph break. The real implementation checks its arguments, copies a
non-contiguous input to a contiguous one (`.contiguous()`: the only copy),
allocates a new float32 output and launches the operator's kernel (the
interpreter-defined one; DESIGN §4) in the current variant. Inputs are never
written. Gradients: each op's backward here calls its backward op (autograd.py:
backward kernels). Each op is one TorchOp record and each operator it computes one
OpBinding (with the operator's eager torch code, the audit's peer), registered next
to its definition (binding.py).

The functions (`cohort.torch.rmsnorm`, ...) call the op; in eager mode, on
plain tensors with no gradient to record, they run its implementation
directly and skip the dispatcher's layers (custom_op's Python autograd and
aliasing wrappers cost several microseconds per call). Through the dispatcher
(and so in a torch.compile'd graph, which calls torch.ops.cohort.X.default)
the CPU implementation is registered directly and an AutogradCPU kernel runs
it at once for plain tensors with no gradient to record (binding.fast_autograd_kernel);
launches reuse argument blocks per launch shape (launch.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..refimpl import ops as registry
from . import checks
from .binding import NativeCall, OpBinding, TorchOp, bind, register
from .checks import FLOATS
from .dtypes import kernel_for
from .launch import launcher

# The formulation each op launches (all forms of an operator are bit-identical, DESIGN §4).
FORMS = {"rmsnorm": "private", "layernorm": "private", "masked_softmax": "private"}


_KERNELS: dict = {}     # operator name -> its kernel in the form FORMS gives (the stream form by default)


def op_kernel(name: str, dtype=torch.float32):
    """The kernel of refimpl operator `name` for tensors of `dtype` (bf16/f16: re-typed, dtypes.py)."""
    k = _KERNELS.get(name)
    if k is None:
        k = _KERNELS.setdefault(name, registry.get(name, FORMS.get(name)).kernel)
    return k if dtype is torch.float32 else kernel_for(k, dtype)


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_F32_MAX = 3.4028234663852886e38


def plain_f32(t) -> bool:
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

def rmsnorm_check(x, weight, eps):
    checks.tensor("rmsnorm", "x", x, FLOATS, min_dim=1)
    checks.tensor("rmsnorm", "weight", weight, FLOATS)
    checks.like("rmsnorm", "x", x, ("weight", weight))
    checks.last_dim("rmsnorm", "x", x, "weight", weight)
    return checks.number("rmsnorm", "eps", eps, nonnegative=True)


def rmsnorm_impl(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    if not (plain_f32(x) and plain_f32(weight) and weight.dim() == 1 and x.dim() and weight.shape[0] == x.shape[-1]
            and type(eps) is float and 0.0 <= eps <= _F32_MAX):
        eps = rmsnorm_check(x, weight, eps)         # raises, or accepts an unusual but valid argument
    x, weight = x.contiguous(), weight.contiguous()
    y = torch.empty_like(x)
    R, C = _rows(x)
    if R:
        k = op_kernel("rmsnorm", x.dtype)
        launcher(k, (("cols", C),), True)(R * k.block, (x, weight, y), (eps,))
    return y


def _rmsnorm_fake(x, weight, eps=1e-6):
    rmsnorm_check(x, weight, eps)
    return x.new_empty(x.shape)


def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dimension (weight: [C])."""
    if direct(x, weight):
        return rmsnorm_impl(x, weight, eps)
    return torch.ops.cohort.rmsnorm(x, weight, eps)


def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*(t for t in inputs if isinstance(t, Tensor)))
    ctx.args = tuple(None if isinstance(t, Tensor) else t for t in inputs)


def _rmsnorm_grad(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, dw = torch.ops.cohort.rmsnorm_backward(dy, x, weight, ctx.args[2])
    return dx, dw, None


def _rmsnorm_eager(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


RMSNORM = register(TorchOp("rmsnorm", rmsnorm_impl, _rmsnorm_fake, rmsnorm, _rmsnorm_grad, _save_inputs,
                           native=NativeCall("xve", row=True)))
bind(OpBinding("rmsnorm", _rmsnorm_eager, RMSNORM, schema_tail=(1e-6,)))


def _layernorm_check(x, weight, bias, eps):
    checks.tensor("layernorm", "x", x, FLOATS, min_dim=1)
    checks.tensor("layernorm", "weight", weight, FLOATS)
    checks.tensor("layernorm", "bias", bias, FLOATS)
    checks.like("layernorm", "x", x, ("weight", weight), ("bias", bias))
    checks.last_dim("layernorm", "x", x, "weight", weight)
    checks.last_dim("layernorm", "x", x, "bias", bias)
    return checks.number("layernorm", "eps", eps, nonnegative=True)


def layernorm_impl(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    if not (plain_f32(x) and plain_f32(weight) and plain_f32(bias) and weight.dim() == 1 and bias.dim() == 1 and x.dim()
            and weight.shape[0] == x.shape[-1] and bias.shape[0] == x.shape[-1]
            and type(eps) is float and 0.0 <= eps <= _F32_MAX):
        eps = _layernorm_check(x, weight, bias, eps)
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    R, C = _rows(x)
    if R:
        k = op_kernel("layernorm", x.dtype)
        launcher(k, (("cols", C),), True)(R * k.block, (x, weight, bias, y), (eps,))
    return y


def _layernorm_fake(x, weight, bias, eps=1e-5):
    _layernorm_check(x, weight, bias, eps)
    return x.new_empty(x.shape)


def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """Layer norm over the last dimension: biased variance, (x - mean)/sqrt(var + eps)*weight + bias."""
    if direct(x, weight, bias):
        return layernorm_impl(x, weight, bias, eps)
    return torch.ops.cohort.layernorm(x, weight, bias, eps)


def _layernorm_grad(ctx, dy):
    x, weight, _ = ctx.saved_tensors
    dx, dwb = torch.ops.cohort.layernorm_backward(dy, x, weight, ctx.args[3])
    return dx, dwb[0], dwb[1], None


def _layernorm_eager(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


LAYERNORM = register(TorchOp("layernorm", layernorm_impl, _layernorm_fake, layernorm, _layernorm_grad,
                             _save_inputs, native=NativeCall("xvve", row=True)))
bind(OpBinding("layernorm", _layernorm_eager, LAYERNORM, schema_tail=(1e-5,)))


def masked_softmax_check(x, mask):
    checks.tensor("masked_softmax", "x", x, FLOATS, min_dim=1)
    checks.tensor("masked_softmax", "mask", mask, dtype=torch.bool)
    if mask.shape != x.shape:
        checks.broadcasts("masked_softmax", "mask", mask, "x", x)


def masked_softmax_impl(x: Tensor, mask: Tensor) -> Tensor:
    if not (plain_f32(x) and x.dim() and type(mask) is torch.Tensor and mask.dtype is torch.bool and mask.is_cpu
            and mask.shape == x.shape):
        masked_softmax_check(x, mask)
        mask = mask.expand(x.shape)                 # a broadcast mask is copied to x's shape
    x, mask = x.contiguous(), mask.contiguous()
    y = torch.empty_like(x)
    R, C = _rows(x)
    if R:
        k = op_kernel("masked_softmax", x.dtype)
        launcher(k, (("cols", C),), True)(R * k.block, (x, mask, y))
    return y


def _masked_softmax_fake(x, mask):
    masked_softmax_check(x, mask)
    return x.new_empty(x.shape)


def masked_softmax(x: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last dimension's entries where mask is True; the others are 0, and a
    row with no True entry is all 0 (never NaN). mask: bool, broadcast to x's shape."""
    if direct(x, mask):
        return masked_softmax_impl(x, mask)
    return torch.ops.cohort.masked_softmax(x, mask)


def _masked_softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output, inputs[1])


def _masked_softmax_grad(ctx, dy):
    y, mask = ctx.saved_tensors
    return torch.ops.cohort.masked_softmax_backward(dy, y, mask), None


def _masked_softmax_eager(x, mask):
    # softmax over the unmasked entries; the final masked_fill also turns a
    # fully masked row (softmax of all -inf = NaN) into zeros.
    return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)


MASKED_SOFTMAX = register(TorchOp("masked_softmax", masked_softmax_impl, _masked_softmax_fake, masked_softmax,
                                  _masked_softmax_grad, _masked_softmax_setup, native=NativeCall("xm", row=True)))
bind(OpBinding("masked_softmax", _masked_softmax_eager, MASKED_SOFTMAX))


# ---------------------------------------------------------------- elementwise

def elementwise_check(name: str, *named):
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
        launcher(op_kernel(name, y.dtype))(n, inputs + (y,))
    return y


def swiglu_impl(gate: Tensor, up: Tensor) -> Tensor:
    if not (plain_f32(gate) and plain_f32(up) and gate.shape == up.shape):
        elementwise_check("swiglu", ("gate", gate), ("up", up))
    return _launch_elementwise("swiglu", gate, up)


def _swiglu_fake(gate, up):
    elementwise_check("swiglu", ("gate", gate), ("up", up))
    return gate.new_empty(gate.shape)


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up = gate * sigmoid(gate) * up (Llama's MLP activation)."""
    if direct(gate, up):
        return swiglu_impl(gate, up)
    return torch.ops.cohort.swiglu(gate, up)


def _swiglu_grad(ctx, dy):
    gate, up = ctx.saved_tensors
    g = torch.ops.cohort.swiglu_backward(dy, gate, up)
    return g[0], g[1]


def _swiglu_eager(a, b):
    return F.silu(a) * b


SWIGLU = register(TorchOp("swiglu", swiglu_impl, _swiglu_fake, swiglu, _swiglu_grad, _save_inputs, native=NativeCall("xs")))
bind(OpBinding("swiglu", _swiglu_eager, SWIGLU))


def gelu_impl(x: Tensor) -> Tensor:
    if not plain_f32(x):
        elementwise_check("gelu", ("x", x))
    return _launch_elementwise("gelu", x)


def _gelu_fake(x):
    elementwise_check("gelu", ("x", x))
    return x.new_empty(x.shape)


def gelu(x: Tensor) -> Tensor:
    """0.5*x*(1 + erf(x/sqrt(2))): torch's gelu(approximate='none')."""
    if direct(x):
        return gelu_impl(x)
    return torch.ops.cohort.gelu(x)


def _gelu_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return torch.ops.cohort.gelu_backward(dy, x)


def _gelu_eager(x):
    return F.gelu(x)


GELU = register(TorchOp("gelu", gelu_impl, _gelu_fake, gelu, _gelu_grad, _save_inputs, native=NativeCall("x")))
bind(OpBinding("gelu", _gelu_eager, GELU))


def gelu_tanh_impl(x: Tensor) -> Tensor:
    if not plain_f32(x):
        elementwise_check("gelu_tanh", ("x", x))
    return _launch_elementwise("gelu_tanh", x)


def _gelu_tanh_fake(x):
    elementwise_check("gelu_tanh", ("x", x))
    return x.new_empty(x.shape)


def gelu_tanh(x: Tensor) -> Tensor:
    """0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))): gelu(approximate='tanh'), GPT-2's gelu_new."""
    if direct(x):
        return gelu_tanh_impl(x)
    return torch.ops.cohort.gelu_tanh(x)


def _gelu_tanh_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return torch.ops.cohort.gelu_tanh_backward(dy, x)


def _gelu_tanh_eager(x):
    return F.gelu(x, approximate="tanh")


GELU_TANH = register(TorchOp("gelu_tanh", gelu_tanh_impl, _gelu_tanh_fake, gelu_tanh, _gelu_tanh_grad,
                             _save_inputs, native=NativeCall("x")))
bind(OpBinding("gelu_tanh", _gelu_tanh_eager, GELU_TANH))


def gelu_residual_impl(x: Tensor, r: Tensor) -> Tensor:
    if not (plain_f32(x) and plain_f32(r) and x.shape == r.shape):
        elementwise_check("gelu_residual", ("x", x), ("r", r))
    return _launch_elementwise("gelu_residual", x, r)


def _gelu_residual_fake(x, r):
    elementwise_check("gelu_residual", ("x", x), ("r", r))
    return x.new_empty(x.shape)


def gelu_residual(x: Tensor, r: Tensor) -> Tensor:
    """gelu(x) + r, fused (gelu(x) + r is the same bits)."""
    if direct(x, r):
        return gelu_residual_impl(x, r)
    return torch.ops.cohort.gelu_residual(x, r)


def _gelu_residual_grad(ctx, dy):
    x, _ = ctx.saved_tensors
    return torch.ops.cohort.gelu_backward(dy, x), dy


def _gelu_residual_eager(x, r):
    return F.gelu(x) + r                     # approximate="none": the exact erf form


GELU_RESIDUAL = register(TorchOp("gelu_residual", gelu_residual_impl, _gelu_residual_fake, gelu_residual,
                                 _gelu_residual_grad, _save_inputs, native=NativeCall("xs")))
bind(OpBinding("gelu_residual", _gelu_residual_eager, GELU_RESIDUAL))

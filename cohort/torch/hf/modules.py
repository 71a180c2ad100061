"""What `cohort.torch.hf.install` does to a transformers model's modules, and the attention
function it registers.

install changes behaviour, not structure: each norm, MLP and attention module it runs on
cohort keeps its identity, its parameters, buffers, submodules and hooks, and only its class
changes - to a subclass of the model's own class (`LlamaAttentionOnCohort` of
`LlamaAttention`, `LayerNormOnCohort` of `nn.LayerNorm`) whose `forward` calls cohort.torch,
with the few settings it needs in one plain attribute, `_cohort` (a frozen plan, never a
parameter or a buffer). So state_dict keys, `named_modules`, isinstance checks, hooks and
checkpoints are the model's; `uninstall` puts the original class back and drops `_cohort`.

The subclasses are made on first use and are reachable by name in this module (module
`__getattr__`), so a pickled installed module (torch.save of the whole model) loads in a
process that has not called install yet.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .. import attention_ops
from .. import ops as ct
from .families import FAMILIES

SUFFIX = "OnCohort"


class CohortModule:
    """The behaviour install gives a module (mixed in before the module's own class)."""

    def _apply(self, fn, recurse=True):
        check_conversion(self, fn)                  # .double(), .to("cuda"), ... on this module alone
        return super()._apply(fn, recurse)


class CohortRMSNorm(CohortModule):
    """x / sqrt(mean(x^2) + eps) * weight on cohort's rmsnorm.

    offset=True is Gemma's form, normalized(x) * (1 + weight), computed in float32 and
    rounded once to x's dtype: cohort's rmsnorm on x widened to f32 with the f32 weight
    1 + weight (the same f32 value the model computes), its result cast back. The product
    x * r * (1 + w) is then the operation order the model uses; a bf16 weight of 1 + w
    would round 1 + w to 8 bits first."""

    def forward(self, x):
        plan = self._cohort
        eps = float(getattr(self, plan.eps))              # the module's own, read when it runs
        if plan.offset:
            return rmsnorm_offset(x, self.weight, eps)
        return ct.rmsnorm(x, self.weight, eps)


def rmsnorm_offset(x, weight, eps: float):
    """Gemma's RMSNorm, normalized(x) * (1 + weight) in float32, rounded once to x's dtype."""
    return ct.rmsnorm(x.float(), 1.0 + weight.float(), eps).to(x.dtype)


class CohortLayerNorm(CohortModule):
    """nn.LayerNorm over the last dimension (with weight and bias) on cohort's layernorm."""

    def forward(self, x):
        return ct.layernorm(x, self.weight, self.bias, float(self.eps))


def _gelu_glu(gate, up):
    return ct.gelu(gate) * up


def _gelu_tanh_glu(gate, up):
    return ct.gelu_tanh(gate) * up


# activation -> (gated form, plain form); None: cohort has no operator for it
GATED = {"silu": ct.swiglu, "gelu": _gelu_glu, "gelu_tanh": _gelu_tanh_glu}
PLAIN = {"silu": None, "gelu": ct.gelu, "gelu_tanh": ct.gelu_tanh}


class CohortMLP(CohortModule):
    """A feed-forward block on cohort's activations: gated, down(act(gate(x)) * up(x)) (SwiGLU
    by the fused swiglu; GeGLU as gelu or gelu_tanh, then one multiply by torch), or plain,
    out(act(in(x))), the projections being the module's own (named in the plan)."""

    def forward(self, x):
        plan = self._cohort
        act = getattr(self, plan.act)
        if type(act) is not plan.act_type:               # replaced after install: not what cohort runs
            raise ValueError(f"cohort.torch.hf: {type(self).__name__}.{plan.act} is now {type(act).__name__}, "
                             f"not the {plan.act_type.__name__} install planned for; call "
                             f"cohort.torch.hf.uninstall(model) and install again")
        if plan.gated:
            gate, up, down = (getattr(self, n) for n in plan.names)
            return down(GATED[plan.activation](gate(x), up(x)))
        fc_in, fc_out = (getattr(self, n) for n in plan.names)
        return fc_out(PLAIN[plan.activation](fc_in(x)))


class CohortAttention(CohortModule):
    """Self-attention with cohort's rope (transformers' rotate-half tables as they come, partial
    rotary included) and cohort's attention (grouped KV heads, causal, masks, sliding window),
    on the layer's own projections: separate q/k/v or GPT-NeoX's fused query_key_value, whose
    output is [..., heads, 3 * head_dim] with q, k, v side by side per head.

    While the model's attention implementation (config._attn_implementation, which
    `set_attn_implementation` sets) is not "cohort", the layer runs its own class's forward:
    the switch is honoured, and setting "cohort" again routes back here."""

    def forward(self, *args, **kwargs):
        if self.config._attn_implementation != NAME:
            return super().forward(*args, **kwargs)
        return self._cohort_forward(*args, **kwargs)

    def _cohort_forward(self, hidden_states, *, attention_mask=None, position_embeddings=None, cache=None,
                        past_key_values=None, layer_past=None, **kwargs):
        # keyword-only past hidden_states: the families' own forwards order them differently
        plan = self._cohort
        # the cache under any of the names transformers' layers have passed it by
        cache = next((c for c in (cache, past_key_values, layer_past, kwargs.pop("past_key_value", None))
                      if c is not None), None)
        if position_embeddings is None:
            raise ValueError("cohort attention: position_embeddings (the model's cos/sin tables) were not passed")
        lead = hidden_states.shape[:-1]
        if plan.fused:
            qkv = self.query_key_value(hidden_states).view(*lead, -1, 3 * plan.head_dim).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            shape = (*lead, -1, plan.head_dim)
            q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
            k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
            v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = attention_ops.rope_hf(q, k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
        window = _WINDOWS[plan.window](self)               # read when the layer runs, as the model does
        if window is not None and (type(window) is not int or window < 1):
            raise ValueError(f"cohort attention: sliding_window={window!r} must be a positive int")
        out, _ = cohort_attention(self, q, k, v, attention_mask, scaling=float(self.scaling),
                                  dropout=float(self.attention_dropout or 0.0) if self.training else 0.0,
                                  sliding_window=window, **kwargs)
        return getattr(self, plan.out)(out.reshape(*lead, -1)), None


# ---------------------------------------------------------------- plans

@dataclass(frozen=True)
class NormPlan:
    eps: str = "eps"                # the attribute holding the module's eps (Llama's: variance_epsilon)
    offset: bool = False            # Gemma's (1 + w)


@dataclass(frozen=True)
class MLPPlan:
    activation: str                 # a key of GATED / PLAIN
    gated: bool
    names: tuple                    # the projections: (gate, up, down) or (in, out)
    act: str                        # the activation module's attribute name
    act_type: type                  # ... and its class, which the activation stands for


# where a layer's causal sliding window comes from: Mistral's config, Qwen2's layer (None on
# its full-attention layers), or nowhere
_WINDOWS = {"config": lambda m: getattr(m.config, "sliding_window", None),
            "layer": lambda m: getattr(m, "sliding_window", None),
            "none": lambda m: None}


@dataclass(frozen=True)
class AttentionPlan:
    fused: bool                     # query_key_value (GPT-NeoX) rather than q_proj, k_proj, v_proj
    out: str                        # the output projection: o_proj or dense
    head_dim: int
    window: str                     # where the causal sliding window is read: a key of _WINDOWS


# ---------------------------------------------------------------- the classes

NAME = "cohort"                     # the attention implementation's name in transformers' registries
_KINDS = {"RMSNorm": CohortRMSNorm, "LayerNorm": CohortLayerNorm, "MLP": CohortMLP, "Attention": CohortAttention}
_CLASSES: dict = {}


def _behaviour(base: type) -> type:
    if base is nn.LayerNorm:
        return CohortLayerNorm
    for kind, mixin in _KINDS.items():
        if base.__name__.endswith(kind):
            return mixin
    raise TypeError(f"cohort.torch.hf: no cohort behaviour for {base.__name__}")


def on_cohort(base: type) -> type:
    """base's subclass running on cohort (made once per base; named base.__name__ + "OnCohort"
    in this module, where pickle finds it)."""
    name = base.__name__ + SUFFIX
    cls = _CLASSES.get(name)
    if cls is None:
        cls = type(name, (_behaviour(base), base), {"__module__": __name__, "__qualname__": name,
                                                    "__doc__": f"{base.__name__} running on cohort.torch "
                                                               f"(cohort.torch.hf.install)."})
        _CLASSES[name] = cls
    elif cls.__bases__[1] is not base:
        raise TypeError(f"cohort.torch.hf: two classes named {base.__name__} ({cls.__bases__[1]!r}, {base!r})")
    return cls


def original(cls: type) -> type:
    """The model's own class of a module install changed (cls itself otherwise)."""
    return cls.__bases__[1] if getattr(cls, "__module__", None) == __name__ and cls.__name__.endswith(SUFFIX) else cls


def __getattr__(name: str):
    """An `...OnCohort` class by name, made on demand (unpickling an installed model)."""
    if not name.endswith(SUFFIX):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    base_name = name[:-len(SUFFIX)]
    if base_name == "LayerNorm":
        return on_cohort(nn.LayerNorm)
    from importlib import import_module
    for fam in FAMILIES.values():
        if base_name.startswith(fam.prefix) and base_name[len(fam.prefix):] in _KINDS:
            modeling = import_module(f"transformers.models.{fam.module}.modeling_{fam.module}")
            return on_cohort(getattr(modeling, base_name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------- dtype and device

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_conversion(module: nn.Module, fn) -> None:
    """Refuse, before anything is converted, a `.to()` / `.double()` / `.cuda()` ... (any
    nn.Module._apply) that would leave module's floating parameters in a dtype or on a device
    cohort's operators do not run. fn is tried on an empty tensor like the first one."""
    probe = next((t for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()), None)
    if probe is None:
        return
    try:
        after = fn(torch.empty(0, dtype=probe.dtype, device=probe.device))
    except Exception:                                 # noqa: BLE001 - the conversion itself fails: let it
        return
    if not isinstance(after, torch.Tensor) or not after.is_floating_point():
        return
    if after.dtype not in DTYPES or after.device.type != "cpu":
        what = after.dtype if after.dtype not in DTYPES else f"device {after.device.type!r}"
        raise TypeError(f"cohort.torch.hf: {type(module).__name__} runs on cohort.torch, which cannot run "
                        f"{what} (float32, bfloat16, float16 on the CPU); call cohort.torch.hf.uninstall(model) "
                        f"first")


# ---------------------------------------------------------------- the attention function

# arguments transformers may pass an attention function that would change its result
_UNSUPPORTED = ("softcap", "s_aux", "sinks", "head_mask")


def cohort_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, sliding_window=None,
                     **kwargs):
    """transformers' attention-function signature on cohort.torch.attention (registered as
    "cohort" with AttentionInterface). The KV heads are passed ungrouped (cohort reads head h
    from KV head h*Hkv/H). The mask is what SDPA's mask function builds (registered for
    "cohort" with AttentionMaskInterface): a boolean [B, 1, Sq, Skv] with causality, padding
    and any sliding window in it, or None where causality alone is enough; then cohort's
    causal mask aligns the last query with the last key, which is what a KV cache needs, and
    a sliding window is applied by the kernel. Returns ([B, Sq, H, Dv], None)."""
    if dropout:
        raise ValueError(f"cohort attention: dropout={dropout} is not implemented (attention_dropout must be 0 "
                         f"when training)")
    for name in _UNSUPPORTED:
        if kwargs.get(name) is not None:
            raise ValueError(f"cohort attention does not implement {name}={kwargs[name]!r}")
    if attention_mask is not None:
        out = attention_ops.attention(query, key, value, mask=attention_mask, scale=scaling)
    else:
        causal = kwargs.get("is_causal")
        causal = getattr(module, "is_causal", True) if causal is None else bool(causal)
        if sliding_window is not None and not causal:          # never dropped: cohort's window is causal
            raise ValueError(f"cohort attention has no bidirectional sliding window (sliding_window="
                             f"{sliding_window} on a non-causal layer)")
        out = attention_ops.attention(query, key, value, causal=causal, scale=scaling, window=sliding_window)
    return out.transpose(1, 2), None

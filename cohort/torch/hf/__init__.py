"""cohort.torch.hf: cohort's operators inside a transformers model, in one call.

    import cohort.torch.hf as hf
    model = hf.install(model)          # in place; returns the model
    hf.uninstall(model)                # the model exactly as it was

For the Llama, Mistral, Qwen2, Gemma, GPT-NeoX and Phi families (`config.model_type`
llama, mistral, qwen2, gemma, gpt_neox, phi), any head on top (ForCausalLM, the base model,
...), float32, bfloat16 or float16 weights on the CPU. `install` runs on cohort.torch

- the norms: RMSNorm by cohort's rmsnorm; Gemma's (1 + w) RMSNorm by rmsnorm on x in
  float32 with the float32 weight 1 + w, rounded once to the model's dtype, as Gemma
  computes it; nn.LayerNorm (GPT-NeoX, Phi; weight and bias) by layernorm;
- the MLP's activation: SwiGLU (silu) by the fused swiglu; GeGLU (Gemma's gelu_pytorch_tanh)
  by gelu_tanh, then one multiply; GPT-NeoX's gelu by gelu (erf); Phi's gelu_new by gelu_tanh
  (the same tanh formula);
- the attention layer: cohort's rope_hf on the model's own cos/sin tables (rotate-half;
  partial rotary as GPT-NeoX's rotary_pct and Phi's partial_rotary_factor give it) and
  cohort's attention (grouped KV heads, causal, Mistral's and Qwen2's sliding windows where
  the config has them), registered as the attention implementation "cohort" with SDPA's mask
  function, so padding masks always arrive and are applied.

It changes behaviour, not structure (modules.py): those modules stay where they are, with
their parameters, buffers, submodules and hooks; only their class becomes a subclass of their
own whose forward calls cohort. state_dict keys, save_pretrained checkpoints (loadable
without cohort), named_modules and module-name targets are the model's. torch.save of the
whole installed model pickles those classes: loading it needs cohort importable (not a call
of install); uninstall first for a pickle that does not. Projections,
embeddings, residuals, the rotary tables and the LM head are untouched. Gradients flow
through cohort's backward kernels.

Switches flipped after install: `set_attn_implementation("eager")` (or "sdpa", ...) routes
the attention layers back to their own forward, "cohort" routes them here again;
`output_attentions=True` (per call or in the config) while "cohort" runs is a one-line
ValueError (cohort's attention never forms the weights; "eager" returns them); a `.to()`,
`.double()`, `.cuda()`... to a dtype or device the operators do not run is a one-line
TypeError before any tensor is converted; attention dropout while training is an error at
run time.

Anything else it cannot honour raises a one-line ValueError/TypeError at install naming it:
another family, an activation without a cohort operator, a config option that changes the
computation (logit soft-capping, alibi, qk-norm, bidirectional attention, attention weights
as outputs, ...), an attention layer with submodules it does not know, a dtype or device the
operators do not run. Nothing is copied from transformers: the forwards are cohort's own and
follow the models' parameter layouts.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from importlib import import_module

import torch
from torch import nn

from .families import FAMILIES, Family
from .modules import (
    NAME,
    PLAIN,
    AttentionPlan,
    CohortAttention,
    CohortLayerNorm,
    CohortMLP,
    CohortModule,
    CohortRMSNorm,
    MLPPlan,
    NormPlan,
    check_conversion,
    cohort_attention,
    on_cohort,
    original,
    rmsnorm_offset,
)

__all__ = ["FAMILIES", "NAME", "CohortAttention", "CohortLayerNorm", "CohortMLP", "CohortModule", "CohortRMSNorm",
           "cohort_attention", "install", "rmsnorm_offset", "uninstall"]


# config.hidden_act -> cohort's activation. gelu_new (GPT-2's, Phi's) is the tanh formula
# 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch's gelu(approximate="tanh") is.
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_new": "gelu_tanh"}

# config options that change what a layer computes, and what the computation would need
# (value -> True when it is set to something install cannot honour)
_OPTIONS = {
    "attn_logit_softcapping": ("attention logit soft-capping", lambda v: v is not None),
    "final_logit_softcapping": ("final logit soft-capping", lambda v: v is not None),
    "alibi": ("alibi position biases", bool),
    "qk_layernorm": ("qk-norm (a LayerNorm on queries and keys)", bool),
    "use_qk_norm": ("qk-norm", bool),
    "use_bidirectional_attention": ("bidirectional attention", bool),
    "pretraining_tp": ("tensor-parallel slicing of the projections", lambda v: v is not None and v > 1),
    "output_attentions": ("attention weights as outputs (cohort's attention never forms them)", bool),
}
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# the attention's child modules install knows, by layout (anything else - a q_norm, a
# k_layernorm - would be skipped silently: refused)
_ATTENTION_CHILDREN = {"separate": {"q_proj", "k_proj", "v_proj"}, "fused": {"query_key_value"}}


def _fail(what: str, exc=ValueError):
    raise exc(f"cohort.torch.hf.install: {what}")


def _family(model) -> Family:
    if not isinstance(model, nn.Module):
        _fail(f"model must be a transformers model (torch.nn.Module), got {type(model).__name__}", TypeError)
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in FAMILIES:
        _fail(f"model.config.model_type={kind!r} is not a family it knows ({', '.join(sorted(FAMILIES))})")
    for name, (what, bad) in _OPTIONS.items():
        value = getattr(config, name, None)
        if value is not None and bad(value):
            _fail(f"model.config.{name}={value!r}: {what} is not implemented by cohort's operators")
    params = list(model.parameters())
    dtypes = {p.dtype for p in params}
    if len(dtypes) > 1:
        _fail(f"the model's parameters have several dtypes ({sorted(map(str, dtypes))}); cast it to one of "
              f"float32, bfloat16, float16", TypeError)
    if dtypes and next(iter(dtypes)) not in _DTYPES:
        _fail(f"the model's dtype is {next(iter(dtypes))}; cohort's operators run float32, bfloat16 and float16",
              TypeError)
    devices = {p.device.type for p in params}
    if devices - {"cpu"}:
        _fail(f"the model is on {sorted(devices)}; cohort's operators run on the CPU")
    return FAMILIES[kind]


def _activation(config, act_module: nn.Module, gated: bool) -> str:
    name = getattr(config, "hidden_act", None)
    mine = ACTIVATIONS.get(name) if isinstance(name, str) else None
    if mine is None or (not gated and PLAIN[mine] is None):
        known = sorted(ACTIVATIONS) if gated else sorted(k for k, v in ACTIVATIONS.items() if PLAIN[v])
        _fail(f"model.config.hidden_act={name!r} has no cohort operator in {'a gated' if gated else 'an'} MLP "
              f"(it runs {', '.join(known)})")
    from transformers.activations import ACT2FN
    if type(act_module) is not type(ACT2FN[name]):       # the module is not what the config says
        _fail(f"the MLP's activation is {type(act_module).__name__}, not model.config.hidden_act={name!r}'s "
              f"{type(ACT2FN[name]).__name__}")
    return mine


def _norm(fam: Family, norm: nn.Module):
    if fam.norm == "layer":
        if len(norm.normalized_shape) != 1 or norm.weight is None or norm.bias is None:
            missing = " and ".join(n for n in ("weight", "bias") if getattr(norm, n) is None)
            _fail(f"a LayerNorm over {tuple(norm.normalized_shape)}{' without ' + missing if missing else ''}: "
                  f"cohort's layernorm normalizes the last dimension and takes a weight and a bias")
        return NormPlan()
    return NormPlan(eps="variance_epsilon" if hasattr(norm, "variance_epsilon") else "eps",
                    offset=fam.norm == "rms_offset")


def _mlp(fam: Family, mlp: nn.Module, config):
    kind, *names = fam.mlp
    extra = {n for n, _ in mlp.named_children()} - set(names)
    if extra:
        _fail(f"{type(mlp).__name__} has submodules {sorted(extra)}, which cohort's MLP does not run")
    act = _activation(config, getattr(mlp, names[-1]), kind == "gated")
    return MLPPlan(activation=act, gated=kind == "gated", names=tuple(names[:-1]), act=names[-1],
                   act_type=type(getattr(mlp, names[-1])))


def _attention(fam: Family, attn: nn.Module, config):
    children = {n for n, _ in attn.named_children()} - {fam.out}
    extra = children - _ATTENTION_CHILDREN[fam.qkv]
    if extra or not getattr(attn, "is_causal", True):
        what = f"submodules {sorted(extra)}" if extra else "is_causal=False"
        _fail(f"{type(attn).__name__} (layer {attn.layer_idx}) has {what}, which cohort's attention layer does "
              f"not run")
    if getattr(attn, "config", None) is not config:
        _fail(f"{type(attn).__name__} (layer {attn.layer_idx}) does not share the model's config, whose "
              f"attention implementation routes it")
    head_dim = attn.head_size if fam.qkv == "fused" else attn.head_dim
    window = {"none": None, "config": getattr(config, "sliding_window", None),
              "layer": getattr(attn, "sliding_window", None)}[fam.window]
    if window is not None and (type(window) is not int or window < 1):
        _fail(f"model.config.sliding_window={window!r} must be a positive int")
    return AttentionPlan(fused=fam.qkv == "fused", out=fam.out, head_dim=int(head_dim), window=fam.window)


def register() -> str:
    """Register cohort's attention function, and SDPA's mask function for it, under the name
    "cohort" (transformers gives an attention name without a mask function of its own no mask
    at all: padding would be ignored). Idempotent; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(NAME, cohort_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


@dataclass(frozen=True)
class ModelPlan:
    """What install records on each transformers model (PreTrainedModel) in the tree."""
    attn_implementation: str | None         # the config's before install, which uninstall puts back


def _guarded_apply(model, fn, recurse=True):
    """model._apply while installed: refuses a dtype or device cohort's operators do not run
    before any tensor is converted (nn.Module._apply converts the children one by one)."""
    check_conversion(model, fn)
    return type(model)._apply(model, fn, recurse)


def _refuse_attention_weights(model, args, kwargs):
    """A forward pre-hook on each base model in the tree (_innermost): output_attentions (per
    call or in the config) while the attention implementation is cohort's."""
    config = model.config
    if config._attn_implementation == NAME and kwargs.get("output_attentions",
                                                          getattr(config, "output_attentions", False)):
        raise ValueError("cohort.torch.hf: output_attentions=True: cohort's attention does not form the attention "
                         "weights; model.set_attn_implementation('eager') runs the layers' own attention, which "
                         "returns them")


def _transformers_models(model: nn.Module):
    from transformers import PreTrainedModel
    return [m for m in model.modules() if isinstance(m, PreTrainedModel)]


def _innermost(models: list) -> list:
    """The models of `models` holding no other one: the base models (LlamaModel in
    LlamaForCausalLM), which run the layers and collect attention weights
    (transformers' capture_outputs); an outer model passes output_attentions on to them.
    The refusing hook goes there only: a hook on the outermost model runs outside its
    torch.compile'd frame (a compiled frame of its own and nn.Module's slow call path: 0.13 ms
    of a 0.9 ms forward of the example Llama, docs/torch/call_path.md), while an inner model's
    hook is traced into the frame."""
    return [m for m in models if not any(o is not m for o in _transformers_models(m))]


def install(model: nn.Module) -> nn.Module:
    """Run `model`'s norms, MLP activations, rope and attention on cohort.torch (in place).
    Returns the model. Each module it changes keeps its parameters, buffers, submodules, hooks
    and name: its class becomes a subclass of its own whose forward calls cohort (modules.py),
    so state_dict keys, checkpoints and named_modules are the model's; `uninstall` undoes it.
    Raises, naming the cause, for anything it cannot honour (see the module's docstring); a
    model it has already installed into is returned unchanged."""
    fam = _family(model)
    config = model.config
    modeling = import_module(f"transformers.models.{fam.module}.modeling_{fam.module}")
    norms = (nn.LayerNorm,) if fam.norm == "layer" else (getattr(modeling, f"{fam.prefix}RMSNorm"),)
    mlp_cls, attn_cls = getattr(modeling, f"{fam.prefix}MLP"), getattr(modeling, f"{fam.prefix}Attention")
    plan = []                                           # (module, plan): checked before any change
    for module in model.modules():
        if type(module) in norms:
            plan.append((module, _norm(fam, module)))
        elif type(module) is mlp_cls:
            plan.append((module, _mlp(fam, module, config)))
        elif type(module) is attn_cls:
            plan.append((module, _attention(fam, module, config)))
    if not any(isinstance(p, AttentionPlan) for _, p in plan) and \
            not any(isinstance(m, CohortAttention) for m in model.modules()):
        _fail(f"found no {attn_cls.__name__} in the model: its structure is not the {fam.prefix} family's")
    register()
    for module, p in plan:
        module.__class__ = on_cohort(type(module))
        module._cohort = p
    models = _transformers_models(model)
    inner = _innermost(models)
    for m in models:
        if not isinstance(m.__dict__.get("_cohort"), ModelPlan):
            m._cohort = ModelPlan(m.config._attn_implementation)
            m._apply = partial(_guarded_apply, m)
            if any(m is i for i in inner):
                m.register_forward_pre_hook(_refuse_attention_weights, with_kwargs=True)
    model.config._attn_implementation = NAME
    return model


def uninstall(model: nn.Module) -> nn.Module:
    """Undo `install` in place: every module gets its own class back, loses `_cohort`, and
    each transformers model its guard, its hook (base models) and its config's attention
    implementation as it was before install. Returns the model; a model without cohort is returned unchanged."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"cohort.torch.hf.uninstall: model must be a torch.nn.Module, got {type(model).__name__}")
    for m in model.modules():
        cls = original(type(m))
        if cls is not type(m):
            m.__class__ = cls
            m.__dict__.pop("_cohort", None)
    for m in _transformers_models(model):
        record = m.__dict__.pop("_cohort", None)
        if not isinstance(record, ModelPlan):
            continue
        m.__dict__.pop("_apply", None)
        for key, hook in list(m._forward_pre_hooks.items()):
            if hook is _refuse_attention_weights:
                del m._forward_pre_hooks[key]
                m._forward_pre_hooks_with_kwargs.pop(key, None)
        # (a model installed a second time from its outer model recorded "cohort": nothing to restore)
        if m.config._attn_implementation == NAME and record.attn_implementation not in (None, NAME):
            m.config._attn_implementation = record.attn_implementation
    return model

"""The modules `cohort.torch.hf.install` puts into a transformers model, and the attention
function it registers. Each shares the replaced module's parameters (no copy) and calls
cohort.torch for the part it replaces; projections, embeddings, residuals and the rotary
tables stay the model's own.
"""
from __future__ import annotations

from torch import nn

from .. import ops as ct


class CohortRMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight on cohort's rmsnorm.

    offset=True is Gemma's form, normalized(x) * (1 + weight), computed in float32 and
    rounded once to x's dtype: cohort's rmsnorm on x widened to f32 with the f32 weight
    1 + weight (the same f32 value the model computes), its result cast back. The product
    x * r * (1 + w) is then the operation order the model uses; a bf16 weight of 1 + w
    would round 1 + w to 8 bits first."""

    def __init__(self, weight: nn.Parameter, eps: float, offset: bool = False):
        super().__init__()
        self.weight, self.eps, self.offset = weight, float(eps), offset

    def forward(self, x):
        if self.offset:
            return ct.rmsnorm(x.float(), 1.0 + self.weight.float(), self.eps).to(x.dtype)
        return ct.rmsnorm(x, self.weight, self.eps)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.eps}, offset={self.offset}"


class CohortLayerNorm(nn.Module):
    """nn.LayerNorm over the last dimension (with weight and bias) on cohort's layernorm."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter, eps: float):
        super().__init__()
        self.weight, self.bias, self.eps = weight, bias, float(eps)

    def forward(self, x):
        return ct.layernorm(x, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.eps}"


def _gelu_glu(gate, up):
    return ct.gelu(gate) * up


def _gelu_tanh_glu(gate, up):
    return ct.gelu_tanh(gate) * up


# activation -> (gated form, plain form); None: cohort has no operator for it
GATED = {"silu": ct.swiglu, "gelu": _gelu_glu, "gelu_tanh": _gelu_tanh_glu}
PLAIN = {"silu": None, "gelu": ct.gelu, "gelu_tanh": ct.gelu_tanh}


class CohortMLP(nn.Module):
    """A feed-forward block on cohort's activations: gated, down(act(gate(x)) * up(x)) (SwiGLU
    by the fused swiglu; GeGLU as gelu or gelu_tanh, then one multiply by torch), or plain,
    out(act(in(x)))."""

    def __init__(self, activation: str, *, gate=None, up=None, down=None, fc_in=None, fc_out=None):
        super().__init__()
        self.activation = activation
        if gate is not None:
            self.gate_proj, self.up_proj, self.down_proj = gate, up, down
            self._act = GATED[activation]
        else:
            self.fc_in, self.fc_out = fc_in, fc_out
            self._act = PLAIN[activation]

    def forward(self, x):
        if hasattr(self, "gate_proj"):
            return self.down_proj(self._act(self.gate_proj(x), self.up_proj(x)))
        return self.fc_out(self._act(self.fc_in(x)))

    def extra_repr(self):
        return f"activation={self.activation}, gated={hasattr(self, 'gate_proj')}"


class CohortAttention(nn.Module):
    """Self-attention with cohort's rope (transformers' rotate-half tables as they come, partial
    rotary included) and cohort's attention (grouped KV heads, causal, masks, sliding window).

    qkv: the projections as the model has them - separate q/k/v ("separate") or GPT-NeoX's one
    linear layer whose output is [..., heads, 3 * head_dim] with q, k, v side by side per head
    ("fused"); out: the output projection."""

    def __init__(self, attn: nn.Module, *, qkv: str, out: str, head_dim: int, window, config):
        super().__init__()
        self.config, self.layer_idx = config, attn.layer_idx
        self.head_dim, self.scaling, self.window = head_dim, float(attn.scaling), window
        self.attention_dropout = float(getattr(attn, "attention_dropout", 0.0) or 0.0)
        self.is_causal = True
        self.fused = qkv == "fused"
        if self.fused:
            self.query_key_value = attn.query_key_value
        else:
            self.q_proj, self.k_proj, self.v_proj = attn.q_proj, attn.k_proj, attn.v_proj
        self.o_proj = getattr(attn, out)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, cache=None,
                past_key_values=None, layer_past=None, **kwargs):
        # the cache under any of the names transformers' layers have passed it by
        cache = next((c for c in (cache, past_key_values, layer_past, kwargs.pop("past_key_value", None))
                      if c is not None), None)
        if position_embeddings is None:
            raise ValueError("cohort attention: position_embeddings (the model's cos/sin tables) were not passed")
        lead = hidden_states.shape[:-1]
        if self.fused:
            qkv = self.query_key_value(hidden_states).view(*lead, -1, 3 * self.head_dim).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            shape = (*lead, -1, self.head_dim)
            q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
            k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
            v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = ct.rope_hf(q, k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
        out, _ = cohort_attention(self, q, k, v, attention_mask, scaling=self.scaling,
                                  dropout=self.attention_dropout if self.training else 0.0,
                                  sliding_window=self.window, **kwargs)
        return self.o_proj(out.reshape(*lead, -1)), None


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
        out = ct.attention(query, key, value, mask=attention_mask, scale=scaling)
    else:
        causal = kwargs.get("is_causal")
        causal = getattr(module, "is_causal", True) if causal is None else bool(causal)
        if sliding_window is not None and not causal:          # never dropped: cohort's window is causal
            raise ValueError(f"cohort attention has no bidirectional sliding window (sliding_window="
                             f"{sliding_window} on a non-causal layer)")
        out = ct.attention(query, key, value, causal=causal, scale=scaling, window=sliding_window)
    return out.transpose(1, 2), None

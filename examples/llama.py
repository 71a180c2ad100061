"""A small Llama on cohort's operators.

Builds transformers' LlamaForCausalLM from a config (random weights, float32,
nothing downloaded), then runs its RMSNorms, its MLP's SwiGLU, its rotary
embedding (rotate-half) and its causal attention on cohort.torch: the norms,
MLPs and attention layers are replaced by modules that call cohort.torch
(module replacement), and the attention itself is registered with
transformers' AttentionInterface as "cohort". transformers is not edited.

    python examples/llama.py                      # compare with eager PyTorch, time forward passes
    python examples/llama.py --layers 4 --hidden 256 --heads 8 --kv-heads 2 --prompt 64

The logits agree with the eager model to ~1e-7 relative, greedy generation is
identical (also for a left-padded batch: transformers builds the padding mask
with SDPA's mask function, registered for "cohort", and cohort's attention
takes it), and generation compiles nothing after the first token: sequence
lengths are runtime arguments of cohort's attention and rope kernels.
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
from torch import nn
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

import cohort.torch as ct


def config(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=176, vocab=256, max_positions=256,
           rope_theta=10000.0) -> LlamaConfig:
    return LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                       max_position_embeddings=max_positions, rms_norm_eps=1e-6, rope_theta=rope_theta,
                       hidden_act="silu", tie_word_embeddings=False)


def build_model(cfg: LlamaConfig = None, seed: int = 0) -> LlamaForCausalLM:
    """The reference: random weights (seeded), float32, eval mode, PyTorch's SDPA attention."""
    torch.manual_seed(seed)
    cfg = cfg or config()
    model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
    return model.eval()


# ---------------------------------------------------------------- the cohort modules

class CohortRMSNorm(nn.Module):
    """LlamaRMSNorm on cohort (shares the original's weight)."""

    def __init__(self, norm: nn.Module):
        super().__init__()
        self.weight = norm.weight
        self.eps = norm.variance_epsilon

    def forward(self, x):
        return ct.rmsnorm(x, self.weight, self.eps)


class CohortMLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)) with cohort's fused swiglu."""

    def __init__(self, mlp: nn.Module):
        super().__init__()
        if mlp.config.hidden_act != "silu":
            raise ValueError(f"CohortMLP runs SwiGLU; this model's activation is {mlp.config.hidden_act!r}")
        self.gate_proj, self.up_proj, self.down_proj = mlp.gate_proj, mlp.up_proj, mlp.down_proj

    def forward(self, x):
        return self.down_proj(ct.swiglu(self.gate_proj(x), self.up_proj(x)))


class CohortAttention(nn.Module):
    """LlamaAttention with cohort's rope (rotate-half) and the "cohort" attention function."""

    def __init__(self, attn: nn.Module):
        super().__init__()
        self.config, self.layer_idx, self.head_dim = attn.config, attn.layer_idx, attn.head_dim
        self.scaling, self.is_causal = attn.scaling, attn.is_causal
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, cache=None,
                past_key_values=None, **kwargs):
        cache = cache if cache is not None else past_key_values
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings                    # transformers' [B, S, D], the two halves equal
        q, k = ct.rope_hf(q, k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
        attend = AttentionInterface().get_interface(self.config._attn_implementation, None)
        out, weights = attend(self, q, k, v, attention_mask, scaling=self.scaling, dropout=0.0, **kwargs)
        return self.o_proj(out.reshape(*hidden_states.shape[:-1], -1).contiguous()), weights


def cohort_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, sliding_window=None,
                     **kwargs):
    """transformers' attention-function signature on cohort.torch.attention. The KV heads are
    passed ungrouped (cohort reads head h from KV head h*Hkv/H). transformers builds the mask
    with SDPA's mask function (registered below): a boolean [B, 1, Sq, Skv] with causality,
    padding and any sliding window in it, or None where causality alone is enough; then the
    causal mask aligns the last query with the last key, which is what a KV cache needs."""
    if dropout:
        raise ValueError("cohort attention has no dropout (inference only)")
    for name in ("softcap", "s_aux", "sinks", "head_mask"):       # would change the result: never dropped
        if kwargs.get(name) is not None:
            raise ValueError(f"cohort attention does not implement {name}={kwargs[name]!r}")
    if attention_mask is not None:
        out = ct.attention(query, key, value, mask=attention_mask, scale=scaling)
    else:
        causal = getattr(module, "is_causal", True)
        if sliding_window is not None and not causal:         # never dropped: cohort's window is causal
            raise ValueError(f"cohort attention has no bidirectional sliding window (sliding_window="
                             f"{sliding_window} on a non-causal layer)")
        out = ct.attention(query, key, value, causal=causal, scale=scaling, window=sliding_window)
    return out.transpose(1, 2), None


AttentionInterface.register("cohort", cohort_attention)
# Without a mask function of its own an attention name gets no mask at all (padding would be
# silently ignored); SDPA's is the layout cohort.torch.attention takes.
AttentionMaskInterface.register("cohort", sdpa_mask)


def use_cohort(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """Replace the norms, MLPs and attention layers by cohort modules (in place; weights shared)."""
    inner = model.model
    for layer in inner.layers:
        layer.input_layernorm = CohortRMSNorm(layer.input_layernorm)
        layer.post_attention_layernorm = CohortRMSNorm(layer.post_attention_layernorm)
        layer.mlp = CohortMLP(layer.mlp)
        layer.self_attn = CohortAttention(layer.self_attn)
    inner.norm = CohortRMSNorm(inner.norm)
    model.config._attn_implementation = "cohort"     # its mask function is SDPA's (registered above)
    return model


def padded_batch(vocab: int, lengths, seed: int = 2, pad: int = 0):
    """(input_ids, attention_mask): one random prompt per length, left-padded to the longest."""
    g = torch.Generator().manual_seed(seed)
    n = max(lengths)
    ids = torch.full((len(lengths), n), pad, dtype=torch.long)
    mask = torch.zeros((len(lengths), n), dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, n - length:] = torch.randint(1, vocab, (length,), generator=g)
        mask[row, n - length:] = 1
    return ids, mask


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|."""
    return float((a - b).abs().max() / b.abs().max())


def _time(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=176)
    ap.add_argument("--prompt", type=int, default=32, help="prompt length (tokens)")
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=20, help="timed forward passes (the best is reported)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile timings")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = config(layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads, intermediate=a.intermediate)
    reference = build_model(cfg)
    model = use_cohort(copy.deepcopy(reference))
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref_logits, logits = reference(ids).logits, model(ids).logits
        builds = ct.stats()["builds"]
        ref_tokens = reference.generate(ids, max_new_tokens=a.new_tokens, do_sample=False)
        tokens = model.generate(ids, max_new_tokens=a.new_tokens, do_sample=False)
        print(f"logits: max relative error {relative_error(logits, ref_logits):.2e}")
        print(f"greedy generation of {a.new_tokens} tokens identical: {torch.equal(tokens, ref_tokens)}")
        print(f"builds after the first forward: {builds}; after generating: {ct.stats()['builds']}")
        batch, mask = padded_batch(cfg.vocab_size, (a.prompt, max(1, a.prompt // 2)))
        live = mask.bool()
        err = relative_error(model(batch, attention_mask=mask).logits[live],
                             reference(batch, attention_mask=mask).logits[live])
        same = torch.equal(model.generate(batch, attention_mask=mask, max_new_tokens=a.new_tokens, do_sample=False),
                           reference.generate(batch, attention_mask=mask, max_new_tokens=a.new_tokens,
                                              do_sample=False))
        print(f"left-padded batch of 2: logits max relative error {err:.2e}, greedy generation identical: {same}")
        rows = [("eager PyTorch (SDPA)", lambda: reference(ids)), ("cohort", lambda: model(ids))]
        if not a.no_compile:
            compiled_ref = torch.compile(reference)
            compiled = torch.compile(model, fullgraph=True)
            rows += [("torch.compile(eager model)", lambda: compiled_ref(ids)),
                     ("torch.compile(cohort model, fullgraph)", lambda: compiled(ids))]
        print(f"forward of {a.prompt} tokens, best of {a.repeat} (one thread):")
        for name, fn in rows:
            print(f"  {name:40s} {_time(fn, a.repeat) * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()

"""The model families cohort.torch.hf knows: where each family's modeling code lives and how
its layers are laid out. install reads them to convert a model; modules.py reads them to
rebuild an installed class by name when a pickled model is loaded."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    prefix: str                 # the modeling module's class prefix: LlamaRMSNorm, LlamaMLP, LlamaAttention
    module: str                 # transformers.models.<module>.modeling_<module>
    norm: str                   # "rms", "rms_offset" (Gemma's 1 + w) or "layer" (nn.LayerNorm)
    mlp: tuple                  # ("gated", gate, up, down, act) or ("plain", in, out, act): attribute names
    qkv: str                    # "separate" (q_proj, k_proj, v_proj) or "fused" (query_key_value)
    out: str                    # the attention's output projection
    window: str                 # where a sliding window comes from: "config", "layer" or "none"


_GATED = ("gated", "gate_proj", "up_proj", "down_proj", "act_fn")
FAMILIES = {
    "llama": Family("Llama", "llama", "rms", _GATED, "separate", "o_proj", "none"),
    "mistral": Family("Mistral", "mistral", "rms", _GATED, "separate", "o_proj", "config"),
    "qwen2": Family("Qwen2", "qwen2", "rms", _GATED, "separate", "o_proj", "layer"),
    "gemma": Family("Gemma", "gemma", "rms_offset", _GATED, "separate", "o_proj", "none"),
    "gpt_neox": Family("GPTNeoX", "gpt_neox", "layer", ("plain", "dense_h_to_4h", "dense_4h_to_h", "act"),
                       "fused", "dense", "none"),
    "phi": Family("Phi", "phi", "layer", ("plain", "fc1", "fc2", "activation_fn"), "separate", "dense", "none"),
}

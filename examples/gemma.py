"""A small Gemma on cohort's operators.

Builds transformers' GemmaForCausalLM from a config (random weights, float32 or
bfloat16, nothing downloaded; one KV head, as Gemma-2B has) and runs it through
`cohort.torch.hf.install(model)`: Gemma's RMSNorm, normalized(x) * (1 + w) in
float32, on cohort's rmsnorm with the weight 1 + w; its GeGLU MLP on cohort's
gelu_tanh and one multiply; its rotary embedding and causal attention on
cohort's rope_hf and attention. The command line and the printed comparison are
examples/llama.py's.

    python examples/gemma.py --no-compile
    python examples/gemma.py --dtype bfloat16 --no-compile
"""
from __future__ import annotations

import torch
from llama import arguments, compare  # examples/llama.py, beside this file
from transformers import GemmaConfig, GemmaForCausalLM


def config(layers=2, hidden=64, heads=4, kv_heads=1, head_dim=16, intermediate=176, vocab=256,
           max_positions=256) -> GemmaConfig:
    return GemmaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                       head_dim=head_dim, max_position_embeddings=max_positions, rms_norm_eps=1e-6,
                       hidden_act="gelu_pytorch_tanh")


def build_model(cfg: GemmaConfig = None, seed: int = 0) -> GemmaForCausalLM:
    """The reference: random weights (seeded; the norms' weights drawn too, where Gemma's
    initial ones are 0), float32, eval mode, PyTorch's SDPA attention."""
    torch.manual_seed(seed)
    model = GemmaForCausalLM._from_config(cfg or config(), attn_implementation="sdpa", dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(0.0, 0.1)
    return model.eval()


def main(argv=None):
    ap = arguments(__doc__.split("\n\n")[0])
    ap.set_defaults(kv_heads=1)
    a = ap.parse_args(argv)
    cfg = config(layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads, intermediate=a.intermediate)
    compare(build_model(cfg), cfg.vocab_size, a)


if __name__ == "__main__":
    main()

"""A small Llama on cohort's operators.

Builds transformers' LlamaForCausalLM from a config (random weights, float32
or bfloat16, nothing downloaded), then runs its RMSNorms, its MLP's SwiGLU, its
rotary embedding (rotate-half) and its causal attention on cohort.torch, by
`cohort.torch.hf.install(model)`: the norms, MLPs and attention layers keep
their names and weights and run forwards that call cohort.torch (each one's
class becomes a subclass of its own), and the attention itself is registered
with transformers' AttentionInterface as "cohort". transformers is not edited. examples/gemma.py does the same for Gemma.

    pip install -e '.[hf]'                        # torch and transformers
    python examples/llama.py                      # compare with eager PyTorch, time forward passes
    python examples/llama.py --layers 4 --hidden 256 --heads 8 --kv-heads 2 --prompt 64
    python examples/llama.py --dtype bfloat16     # both models in bf16

The logits agree with the eager model to ~1e-7 relative in float32, greedy
generation is identical (also for a left-padded batch: transformers builds the
padding mask with SDPA's mask function, registered for "cohort", and cohort's
attention takes it), and generation compiles nothing after the first token:
sequence lengths are runtime arguments of cohort's attention and rope kernels.
In bfloat16 the logits agree to a few bf16 roundings (cohort rounds each op's
output once, the eager model at other places), so greedy generation can part
where the eager model's two best logits are a bf16 step apart or tied; the
example then prints those two logits.
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import cohort.torch as ct
import cohort.torch.hf as hf
from cohort.torch.hf import cohort_attention  # noqa: F401  (the attention function "cohort", for tests)


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


def use_cohort(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """Run the norms, MLPs and attention layers on cohort (in place; names and weights kept):
    cohort.torch.hf.install, which also registers the "cohort" attention and its mask function."""
    return hf.install(model)


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
    """max |a - b| / max |b| (in float32)."""
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max())


def first_difference(reference, mask, want, got) -> str:
    """Where two greedy generations of a padded batch first differ: the reference's logits
    for its token and for the other one (a tie at the dtype's resolution, or not)."""
    j = int((want != got).any(0).nonzero()[0])
    m = torch.cat((mask, torch.ones(mask.shape[0], j - mask.shape[1], dtype=mask.dtype)), 1)
    logits = reference(want[:, :j], attention_mask=m).logits[:, -1].float()
    row = int((want[:, j] != got[:, j]).nonzero()[0])
    a, b = float(logits[row, want[row, j]]), float(logits[row, got[row, j]])
    return (f"first at row {row}, token {j - mask.shape[1] + 1}: the eager model's logits for its token and "
            f"cohort's are {a:.4f} and {b:.4f}")


def _time(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def arguments(description: str, intermediate: int = 176) -> argparse.ArgumentParser:
    """The examples' command line: the model's size, the prompt, the dtype, the timing."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=intermediate)
    ap.add_argument("--prompt", type=int, default=32, help="prompt length (tokens)")
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the model's dtype (both models are cast to it)")
    ap.add_argument("--repeat", type=int, default=20, help="timed forward passes (the best is reported)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile timings")
    return ap


def compare(reference, vocab: int, a) -> None:
    """Install cohort into a copy of `reference`; print logits' agreement, greedy generation
    (one prompt, and a left-padded batch of two), builds, and forward times."""
    torch.set_num_threads(1)
    reference = reference.to(getattr(torch, a.dtype))
    model = hf.install(copy.deepcopy(reference))
    ids = torch.randint(0, vocab, (1, a.prompt), generator=torch.Generator().manual_seed(1))
    gen = dict(max_new_tokens=a.new_tokens, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        ref_logits, logits = reference(ids).logits, model(ids).logits
        builds = ct.stats()["builds"]
        same = torch.equal(model.generate(ids, **gen), reference.generate(ids, **gen))
        print(f"{a.dtype} logits: max relative error {relative_error(logits, ref_logits):.2e}")
        print(f"greedy generation of {a.new_tokens} tokens identical: {same}")
        print(f"builds after the first forward: {builds}; after generating: {ct.stats()['builds']}")
        batch, mask = padded_batch(vocab, (a.prompt, max(1, a.prompt // 2)))
        live = mask.bool()
        err = relative_error(model(batch, attention_mask=mask).logits[live],
                             reference(batch, attention_mask=mask).logits[live])
        gen["attention_mask"] = mask
        want, got = reference.generate(batch, **gen), model.generate(batch, **gen)
        same = torch.equal(got, want)
        print(f"left-padded batch of 2: logits max relative error {err:.2e}, greedy generation identical: {same}"
              + ("" if same else f" ({first_difference(reference, mask, want, got)})"))
        rows = [("eager PyTorch (SDPA)", lambda: reference(ids)), ("cohort", lambda: model(ids))]
        if not a.no_compile:
            compiled_ref = torch.compile(reference)
            compiled = torch.compile(model, fullgraph=True)
            rows += [("torch.compile(eager model)", lambda: compiled_ref(ids)),
                     ("torch.compile(cohort model, fullgraph)", lambda: compiled(ids))]
        print(f"forward of {a.prompt} tokens, best of {a.repeat} (one thread):")
        for name, fn in rows:
            print(f"  {name:40s} {_time(fn, a.repeat) * 1e3:8.3f} ms")


def main(argv=None):
    a = arguments(__doc__.split("\n\n")[0]).parse_args(argv)
    cfg = config(layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads, intermediate=a.intermediate)
    compare(build_model(cfg), cfg.vocab_size, a)


if __name__ == "__main__":
    main()

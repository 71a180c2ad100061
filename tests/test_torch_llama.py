"""A real client (issue 16): transformers' LlamaForCausalLM (a tiny random one, float32,
nothing downloaded) running on cohort.torch through examples/llama.py, against the
eager model; and cohort's rope against transformers' own rotary functions, bit for bit
(Llama's and GPT-NeoX's rotate_half, GPT-J's rotate_every_two, partial rotary).
Skipped when transformers is not installed (it is in the dev extra)."""
import copy
import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import cohort.torch as ct  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "llama.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("cohort_example_llama", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod                     # torch.compile looks modules up by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def models(example):
    reference = example.build_model(example.config(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=176))
    return reference, example.use_cohort(copy.deepcopy(reference))


def _prompt(n, vocab=256):
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(n))


def test_logits_agree_with_the_eager_model(example, models):
    reference, model = models
    with torch.no_grad():
        for n in (1, 7, 33):
            want, got = reference(_prompt(n)).logits, model(_prompt(n)).logits
            assert example.relative_error(got, want) <= 1e-5, n


def test_greedy_generation_is_identical_and_compiles_nothing_after_the_first_token(models):
    reference, model = models
    ids = _prompt(11)
    with torch.no_grad():
        model(ids[:, :5])                       # the first token of some other prompt: builds made
        builds = ct.stats()["builds"]
        want = reference.generate(ids, max_new_tokens=8, do_sample=False)
        got = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(got, want) and got.shape[1] == 11 + 8
    assert ct.stats()["builds"] == builds      # new lengths, prefill and decoding: no new build


def test_a_left_padded_batch_gets_its_mask_logits_and_generation_agree(example, models):
    """Issue 26: transformers built no mask for the "cohort" attention name, so padding was
    silently ignored (padded rows' logits off by ~1). With SDPA's mask function registered
    the mask arrives and cohort's attention applies it."""
    reference, model = models
    batch, mask = example.padded_batch(256, (13, 5, 9))
    live = mask.bool()
    with torch.no_grad():
        want, got = reference(batch, attention_mask=mask).logits, model(batch, attention_mask=mask).logits
        assert example.relative_error(got[live], want[live]) <= 1e-5
        # the short rows alone, unpadded, give the same logits as inside the batch
        short = batch[1:2, -5:]
        alone = model(short).logits
        assert example.relative_error(got[1:2, -5:], alone) <= 1e-5
        kw = dict(attention_mask=mask, max_new_tokens=6, do_sample=False)
        assert torch.equal(model.generate(batch, **kw), reference.generate(batch, **kw))


def test_attention_arguments_it_cannot_honour_raise(example):
    q = k = v = torch.randn(1, 2, 3, 8)
    layer = type("Layer", (), {"is_causal": True})()
    for name in ("softcap", "s_aux"):
        with pytest.raises(ValueError, match=f"does not implement {name}"):
            example.cohort_attention(layer, q, k, v, None, **{name: 1.0})
    encoder = type("Layer", (), {"is_causal": False})()
    with pytest.raises(ValueError, match="no bidirectional sliding window"):
        example.cohort_attention(encoder, q, k, v, None, sliding_window=2)
    got = example.cohort_attention(layer, q, k, v, None, sliding_window=2)[0]      # causal: applied
    assert torch.equal(got, ct.attention(q, k, v, causal=True, window=2).transpose(1, 2))
    with pytest.raises(TypeError, match="mask must be torch.bool"):     # a [B, S] padding mask as it
        example.cohort_attention(layer, q, k, v, torch.ones(1, 3, dtype=torch.long))   # comes from the user


def test_the_model_runs_through_cohort_modules_and_attention_interface(models):
    _, model = models
    names = {type(m).__name__ for m in model.modules()}
    assert {"LlamaRMSNormOnCohort", "LlamaMLPOnCohort", "LlamaAttentionOnCohort"} <= names
    assert not {"LlamaRMSNorm", "LlamaMLP", "LlamaAttention"} & names
    assert model.config._attn_implementation == "cohort"
    from transformers import AttentionInterface
    assert "cohort" in AttentionInterface()


def _angles(S, half, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(S, half, generator=g) * 6 - 3


@pytest.mark.parametrize("rotary", [16, 8])
def test_rope_halves_is_llama_and_neox_bit_for_bit(rotary):
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 3, 9, 16, generator=g), torch.randn(2, 3, 9, 16, generator=g)
    a = _angles(9, rotary // 2, 2)
    emb = torch.cat((a, a), dim=-1)                  # transformers' [S, R]: both halves the same
    cos, sin = emb.cos()[None].expand(2, 9, rotary), emb.sin()[None].expand(2, 9, rotary)
    want_q, want_k = neox(q, k, cos, sin)            # partial rotary when rotary < 16
    assert torch.equal(ct.rope(q, a.cos(), a.sin(), interleaved=False), want_q)
    assert torch.equal(ct.rope(k, a.cos(), a.sin(), interleaved=False), want_k)
    if rotary == 16:
        lq, lk = llama(q, k, cos, sin)
        assert torch.equal(ct.rope(q, a.cos(), a.sin(), interleaved=False), lq)


@pytest.mark.parametrize("rotary", [16, 8])
def test_rope_pairs_is_gptj_bit_for_bit(rotary):
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 9, 3, 16, generator=g)        # GPT-J's [B, S, H, D]
    a = _angles(9, rotary // 2, 4)
    sin, cos = a.sin()[None].expand(2, 9, rotary // 2), a.cos()[None].expand(2, 9, rotary // 2)
    rot = gptj(x[..., :rotary], sin, cos)
    want = torch.cat((rot, x[..., rotary:]), dim=-1)
    got = ct.rope(x.transpose(1, 2), a.cos(), a.sin(), interleaved=True).transpose(1, 2)
    assert torch.equal(got, want)


@pytest.mark.slow
def test_compiled_cohort_model_has_no_graph_break(example, models):
    # Inductor compiles the rest of the model (projections, residuals, the rotary table's
    # sin and cos) with its own code: close to the eager logits, not the same bits
    from torch._dynamo.utils import counters
    _, model = models
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for n in (6, 13):
            assert example.relative_error(compiled(_prompt(n)).logits, model(_prompt(n)).logits) <= 1e-5
    assert not counters["graph_break"]


@pytest.mark.parametrize("rotary, per_row", [(16, True), (8, True), (16, False)])
def test_rope_hf_takes_transformers_tables_as_they_come(rotary, per_row):
    """Issue 26: cos/sin as transformers hands them ([B, S, R] with per-row positions, or
    [S, R]; halves repeated; partial rotary) on q and k in one call, bit for bit."""
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox
    g = torch.Generator().manual_seed(7)
    q, k = torch.randn(2, 4, 9, 16, generator=g), torch.randn(2, 2, 9, 16, generator=g)
    a = torch.rand(2 if per_row else 1, 9, rotary // 2, generator=g) * 6 - 3    # a position table per row
    emb = torch.cat((a, a), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    want_q, want_k = neox(q, k, cos.expand(2, 9, rotary), sin.expand(2, 9, rotary))
    if not per_row:
        cos, sin = cos[0], sin[0]                     # [S, R]
    got_q, got_k = ct.rope_hf(q, k, cos, sin)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    f = torch.compile(lambda q, k, c, s: ct.rope_hf(q, k, c, s), fullgraph=True, backend="eager")
    cq, ck = f(q, k, cos, sin)
    assert torch.equal(cq, want_q) and torch.equal(ck, want_k)
    torch.library.opcheck(torch.ops.cohort.rope_hf.default, (q, k, cos, sin))


@pytest.mark.parametrize("call, exc, msg", [
    (lambda q, k, c, s: ct.rope_hf(q, k, torch.cat((c[..., :4], c[..., :4] + 1), -1), s), ValueError,
     "halves of cos"),
    (lambda q, k, c, s: ct.rope_hf(q, k, torch.cat((c, c, c), -1), torch.cat((s, s, s), -1)), ValueError,
     "at most the features"),
    (lambda q, k, c, s: ct.rope_hf(q, k, c[..., :7], s[..., :7]), ValueError, "must be even"),
    (lambda q, k, c, s: ct.rope_hf(q, k, c[:5], s[:5]), ValueError, "S = 9"),
    (lambda q, k, c, s: ct.rope_hf(q, k[:, :, :8], c, s), ValueError, "k has shape"),
    (lambda q, k, c, s: ct.rope_hf(q, k, c, s[..., :4]), ValueError, "sin has"),
    (lambda q, k, c, s: ct.rope(q, c[..., :4], s[..., :4]), TypeError, "interleaved must be given"),
    (lambda q, k, c, s: ct.rope(q, c[..., :4], s[..., :4], interleaved=1), TypeError, "interleaved must be given"),
])
def test_rope_tables_that_do_not_fit_are_an_error(call, exc, msg):
    g = torch.Generator().manual_seed(8)
    q, k = torch.randn(2, 4, 9, 16, generator=g), torch.randn(2, 2, 9, 16, generator=g)
    a = torch.rand(9, 4, generator=g)
    emb = torch.cat((a, a), dim=-1)
    with pytest.raises(exc, match=msg):
        call(q, k, emb.cos(), emb.sin())

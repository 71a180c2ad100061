"""cohort.torch.hf.install (issue 26) on six transformers families - Llama, Mistral (sliding
window), Qwen2 (a sliding layer beside a full one), Gemma ((1 + w) RMSNorm, GeGLU, one KV
head), GPT-NeoX (fused qkv, LayerNorm, gelu, rotary_pct 0.5) and Phi (LayerNorm, gelu_new,
partial_rotary_factor 0.5) - built from small random configs (nothing downloaded), against
the same model in eager PyTorch (SDPA attention).

Tolerances. float32 logits: within 1e-5 of the largest |logit| (measured <= 3e-7): cohort's
operators are float32 with their own summation orders, so each op differs from torch's by a
few float32 ulps (6e-8 each) and two layers add them up; a wrong mask, window, rotary half or
norm offset moves logits by 1e-2 to 1. bfloat16: cohort's error against the float32 model at
most twice eager bf16's (measured 0.8-1.2x), and cohort within 2^-6 of the largest |logit| of
eager bf16 (two models each a few bf16 roundings (2^-8) from float32; measured <= 7.4e-3);
greedy generation identical (Llama, Gemma) or, for the other families under -m slow, identical
up to a first difference that is a tie of eager's logits within that bound.
Training: losses of four SGD steps within 1e-6 relative (measured <= 1.3e-7): cohort's
gradients agree with PyTorch's to float32 rounding (tests/test_autograd.py) and three updates
of lr 0.1 carry that difference into the loss. Greedy generation in float32: identical tokens.
"""
import copy

import pytest

torch = pytest.importorskip("torch")
T = pytest.importorskip("transformers")

import cohort.torch as ct  # noqa: E402
import cohort.torch.hf as hf  # noqa: E402

VOCAB = 128
_COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               max_position_embeddings=128, tie_word_embeddings=False)


_FAMILY = {
    "llama": ("LlamaConfig", dict(num_key_value_heads=2)),
    "mistral": ("MistralConfig", dict(num_key_value_heads=2, sliding_window=5)),
    "qwen2": ("Qwen2Config", dict(num_key_value_heads=2, use_sliding_window=True, sliding_window=4,
                                  max_window_layers=1)),                    # layer 0 full, layer 1 sliding
    "gemma": ("GemmaConfig", dict(num_key_value_heads=1, head_dim=16)),
    "gpt_neox": ("GPTNeoXConfig", dict(rotary_pct=0.5)),
    "phi": ("PhiConfig", dict(num_key_value_heads=2, partial_rotary_factor=0.5)),
}


def config(family: str, **kw):
    """A small random config of the family (2 layers, hidden 64, head_dim 16); kw overrides."""
    cls, own = _FAMILY[family]
    return getattr(T, cls)(**{**_COMMON, **own, **kw})


CLASSES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
           "gemma": "GemmaForCausalLM", "gpt_neox": "GPTNeoXForCausalLM", "phi": "PhiForCausalLM"}
FAMILIES = tuple(CLASSES)


def build(family: str, cfg=None, seed: int = 0):
    """The eager reference: seeded random weights, the norms' weights moved off their
    initial 1 (or Gemma's 0) so that a wrong norm weight shows, float32, eval mode, SDPA."""
    torch.manual_seed(seed)
    cls = getattr(T, CLASSES[family])
    model = cls._from_config(cfg or config(family), attn_implementation="sdpa", dtype=torch.float32).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model


_MODELS: dict = {}


def models(family: str):
    """(eager, cohort) for the family, built once per test session."""
    if family not in _MODELS:
        ref = build(family)
        _MODELS[family] = ref, hf.install(copy.deepcopy(ref))
    return _MODELS[family]


def padded(lengths=(13, 8), seed=1):
    """(input_ids, attention_mask): random prompts left-padded to the longest (pad id 0)."""
    g = torch.Generator().manual_seed(seed)
    n = max(lengths)
    ids = torch.zeros((len(lengths), n), dtype=torch.long)
    mask = torch.zeros((len(lengths), n), dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, n - length:] = torch.randint(1, VOCAB, (length,), generator=g)
        mask[row, n - length:] = 1
    return ids, mask


def rel(a, b) -> float:
    """max |a - b| / max |b|, in float32."""
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).abs().max() / b.abs().max())


GEN = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_and_left_padded_greedy_generation_agree_with_eager(family):
    ref, mine = models(family)
    ids, mask = padded()
    live = mask.bool()
    with torch.no_grad():
        want, got = ref(ids, attention_mask=mask).logits, mine(ids, attention_mask=mask).logits
        assert rel(got[live], want[live]) <= 1e-5
        assert rel(mine(ids[:1]).logits, ref(ids[:1]).logits) <= 1e-5            # no mask at all: causal
        # the short row alone, unpadded, gives the logits it has inside the padded batch
        assert rel(got[1:, -8:], mine(ids[1:, -8:]).logits) <= 1e-5
        kw = dict(attention_mask=mask, **GEN)
        assert torch.equal(mine.generate(ids, **kw), ref.generate(ids, **kw))


@pytest.mark.parametrize("family", ["mistral", "qwen2"])
def test_the_sliding_window_is_applied_and_matters(family):
    """The window changes these models' logits (so dropping it would fail the test above);
    cohort's layers carry the config's window (Qwen2: on its sliding layer only)."""
    ref, mine = models(family)
    windows = [hf.modules._WINDOWS[layer.self_attn._cohort.window](layer.self_attn) for layer in mine.model.layers]
    assert windows == ([5, 5] if family == "mistral" else [None, 4])
    full = build(family, config(family, sliding_window=None, use_sliding_window=False))
    ids, _ = padded()
    with torch.no_grad():
        assert rel(full(ids).logits, ref(ids).logits) > 1e-3


BF16 = 2.0 ** -6            # cohort bf16 against eager bf16, relative to the largest |logit|


def _first_divergence_is_a_tie(ref, ids, mask, want, got) -> bool:
    """Where greedy generations first differ, eager's logit for cohort's token is within BF16
    (relative to the largest |logit|) of eager's own choice: a tie at bf16's resolution, which
    rounding in a different place may break either way."""
    j = int((want != got).any(0).nonzero()[0])
    prefix = want[:, :j]
    m = torch.cat((mask, torch.ones(mask.shape[0], j - mask.shape[1], dtype=mask.dtype)), 1)
    logits = ref(prefix, attention_mask=m).logits[:, -1].float()
    for row in (want[:, j] != got[:, j]).nonzero()[:, 0]:
        gap = logits[row, want[row, j]] - logits[row, got[row, j]]
        if not 0 <= gap <= BF16 * logits[row].abs().max():
            return False
    return True


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_bf16_logits_and_generation(family, exact=True):
    """bf16 logits within the stated bounds; greedy generation of a left-padded batch identical
    (exact=True: Llama, Gemma), or else identical up to a first difference that is a tie of
    eager's logits at bf16's resolution (the other families: their tiny random models have
    near-ties that rounding in another place breaks the other way)."""
    f32, want, got, ref, mine, ids, mask = _low_precision(family, torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert rel(got, f32) <= 2 * rel(want, f32)
    assert rel(got, want) <= BF16
    gen = dict(GEN, max_new_tokens=8)
    with torch.no_grad():
        want, got = ref.generate(ids, attention_mask=mask, **gen), mine.generate(ids, attention_mask=mask, **gen)
    assert torch.equal(got, want) or (not exact and _first_divergence_is_a_tie(ref, ids, mask, want, got))


def _low_precision(family: str, dtype):
    """The padded batch's live logits of the float32 model, the eager model in `dtype` and
    cohort's in `dtype`; then those two models and the batch."""
    ref32, _ = models(family)
    ref = copy.deepcopy(ref32).to(dtype)
    mine = hf.install(copy.deepcopy(ref))
    ids, mask = padded()
    live = mask.bool()
    with torch.no_grad():
        f32 = ref32(ids, attention_mask=mask).logits[live]
        want, got = ref(ids, attention_mask=mask).logits[live], mine(ids, attention_mask=mask).logits[live]
    return f32, want, got, ref, mine, ids, mask


def test_f16_logits():
    """float16: the same rules with f16's rounding (2^-11): cohort within 2^-9 of eager f16's
    largest |logit| (measured 8.9e-4) and no further from float32 than twice eager f16."""
    f32, want, got, *_ = _low_precision("phi", torch.float16)
    assert got.dtype == torch.float16
    assert rel(got, f32) <= 2 * rel(want, f32) and rel(got, want) <= 2.0 ** -9


def _losses(model, steps=4):
    ids, mask = padded()
    labels = ids.masked_fill(~mask.bool(), -100)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for _ in range(steps):
        loss = model(ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
def test_training_steps_match_eager(family):
    ref = build(family)
    mine = hf.install(copy.deepcopy(ref))
    want, got = _losses(ref), _losses(mine)
    assert want[-1] < want[0] - 0.5                     # it trains
    assert max(abs(a - b) / abs(a) for a, b in zip(got, want)) <= 1e-6, (got, want)
    # the updates reached the model's own parameters (shared with the cohort modules, not copied)
    assert rel(dict(mine.named_parameters())["lm_head.weight"], dict(ref.named_parameters())["lm_head.weight"]) < 1e-5


def test_compiles_fullgraph_with_no_graph_break():
    """Dynamo traces the installed model whole (backend "eager": the graph capture is what
    is tested here; Inductor under -m slow)."""
    from torch._dynamo.utils import counters
    _, mine = models("gpt_neox")
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(mine, fullgraph=True, backend="eager")
    ids, mask = padded()
    with torch.no_grad():
        assert torch.equal(f(ids, attention_mask=mask).logits, mine(ids, attention_mask=mask).logits)
    assert not counters["graph_break"]


def test_install_changes_the_classes_only_and_keeps_every_name_and_parameter():
    ref = build("phi")
    params = {id(p) for p in ref.parameters()}
    names = [n for n, _ in ref.named_modules()]
    keys = list(ref.state_dict())
    mine = hf.install(ref)
    kinds = [type(m).__name__ for m in mine.modules()]
    assert kinds.count("PhiAttentionOnCohort") == 2 and kinds.count("PhiMLPOnCohort") == 2
    assert kinds.count("LayerNormOnCohort") == 3                    # input_layernorm x2, final_layernorm
    assert not {"PhiAttention", "PhiMLP", "LayerNorm"} & set(kinds)
    # the model's own classes still (isinstance), the same names, parameters and keys
    from transformers.models.phi.modeling_phi import PhiAttention
    assert isinstance(mine.model.layers[0].self_attn, PhiAttention)
    assert isinstance(mine.model.layers[0].self_attn, hf.CohortAttention)
    assert [n for n, _ in mine.named_modules()] == names and list(mine.state_dict()) == keys
    assert {id(p) for p in mine.parameters()} == params
    assert mine.config._attn_implementation == "cohort"
    assert hf.install(mine) is mine                                  # again: unchanged
    assert [type(m).__name__ for m in mine.modules()] == kinds


def test_a_base_model_without_a_head_installs_too():
    ref, _ = models("qwen2")
    base = hf.install(copy.deepcopy(ref.model))              # Qwen2Model: the same walk, no LM head
    ids, mask = padded()
    live = mask.bool()
    with torch.no_grad():
        want = ref.model(ids, attention_mask=mask).last_hidden_state[live]
        assert rel(base(ids, attention_mask=mask).last_hidden_state[live], want) <= 1e-5


def test_the_attention_function_honours_is_causal_and_refuses_dropout():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 5, 16, generator=g)
    k, v = torch.randn(1, 2, 5, 16, generator=g), torch.randn(1, 2, 5, 16, generator=g)
    layer = type("Layer", (), {"is_causal": True})()
    causal = hf.cohort_attention(layer, q, k, v, None)[0]
    assert torch.equal(causal, ct.attention(q, k, v, causal=True).transpose(1, 2))
    full = hf.cohort_attention(layer, q, k, v, None, is_causal=False)[0]      # transformers' per-call override
    assert torch.equal(full, ct.attention(q, k, v).transpose(1, 2)) and not torch.equal(full, causal)
    with pytest.raises(ValueError, match=r"^cohort attention: dropout=0.5 is not implemented"):
        hf.cohort_attention(layer, q, k, v, None, dropout=0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemma_norm_is_one_plus_w_in_float32(dtype):
    """Gemma's RMSNorm: normalized(x) * (1 + w) in float32, rounded once to the model's dtype."""
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    g = torch.Generator().manual_seed(3)
    norm = GemmaRMSNorm(96, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(96, generator=g) * 0.3)
    norm = norm.to(dtype)
    x = (torch.randn(5, 96, generator=g) * 2).to(dtype)
    want, got = norm(x), hf.rmsnorm_offset(x, norm.weight, norm.eps)
    assert got.dtype == dtype
    # float32: the sums differ in order only; bf16: at most one rounding step apart
    bound = 1e-6 if dtype == torch.float32 else 2.0 ** -8
    assert ((got.float() - want.float()).abs() <= bound * want.float().abs().amax(-1, keepdim=True)).all()
    assert rel(ct.rmsnorm(x, norm.weight, norm.eps), want) > 0.5       # without the offset: far off


# ---------------------------------------------------------------- structure kept: round trips, uninstall

_RELOAD = """
import sys, torch, transformers as T
out = {}
for family, path in zip(sys.argv[2::2], sys.argv[3::2]):
    model = getattr(T, family).from_pretrained(path).eval()
    ids = torch.load(sys.argv[1] + ".ids")
    with torch.no_grad():
        out[family] = model(ids[0], attention_mask=ids[1]).logits
assert not any(m == "cohort" or m.startswith("cohort.") for m in sys.modules), "cohort was imported"
torch.save(out, sys.argv[1])
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each family's installed model saved with save_pretrained, and the logits a fresh
    process without cohort computes from the checkpoint: {family: (directory, logits)}."""
    import subprocess
    import sys
    root = tmp_path_factory.mktemp("saved")
    ids, mask = padded()
    torch.save((ids, mask), str(root / "logits.ids"))
    args = []
    for family in FAMILIES:
        _, mine = models(family)
        mine.save_pretrained(root / family)
        args += [CLASSES[family], str(root / family)]
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", _RELOAD, str(root / "logits"), *args], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    logits = torch.load(root / "logits")
    return {family: (root / family, logits[CLASSES[family]]) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_round_trips_keep_every_weight(family, saved):
    """state_dict keys are the uninstalled model's; a strict load into another installed model,
    save_pretrained then from_pretrained (with cohort, then installed; and in a process
    without cohort), and torch.save of the whole model give the same logits bit for bit."""
    import io
    ref, mine = models(family)
    assert list(mine.state_dict()) == list(ref.state_dict())
    ids, mask = padded()
    with torch.no_grad():
        want, eager = mine(ids, attention_mask=mask).logits, ref(ids, attention_mask=mask).logits
        other = hf.install(build(family, seed=7))
        other.load_state_dict(mine.state_dict(), strict=True)
        assert torch.equal(other(ids, attention_mask=mask).logits, want)
        path, without_cohort = saved[family]
        assert torch.equal(without_cohort, eager)                      # every weight came back
        loaded = getattr(T, CLASSES[family]).from_pretrained(path).eval()
        assert loaded.config._attn_implementation != "cohort"
        assert torch.equal(loaded(ids, attention_mask=mask).logits, eager)
        assert torch.equal(hf.install(loaded)(ids, attention_mask=mask).logits, want)
        buf = io.BytesIO()
        torch.save(mine, buf)
        buf.seek(0)
        again = torch.load(buf, weights_only=False)
        assert [type(m) for m in again.modules()] == [type(m) for m in mine.modules()]
        assert torch.equal(again(ids, attention_mask=mask).logits, want)


def _shape(model):
    """Each module's name, class, attributes, hooks and parameter identities."""
    return [(name, type(m), sorted(m.__dict__), dict(m._forward_pre_hooks), dict(m._forward_hooks),
             [id(p) for p in m.parameters(recurse=False)]) for name, m in model.named_modules()]


@pytest.mark.parametrize("family", ["gemma", "gpt_neox"])
def test_uninstall_restores_the_model_exactly(family):
    ref, _ = models(family)
    model = copy.deepcopy(ref)
    hook = model.model.layers[0].mlp.register_forward_hook(lambda *a: None) if family == "gemma" else None
    before = _shape(model)
    ids, mask = padded()
    hf.install(model)
    assert _shape(model) != before
    with torch.no_grad():
        model(ids, attention_mask=mask)
        assert hf.uninstall(model) is model
        assert _shape(model) == before and model.config._attn_implementation == "sdpa"
        assert torch.equal(model(ids, attention_mask=mask).logits, ref(ids, attention_mask=mask).logits)
        model.double()                                                 # its own again: anything goes
    assert hf.uninstall(model) is model and _shape(model) == _shape(model)
    if hook is not None:
        hook.remove()


def test_torch_save_of_an_installed_model_loads_where_install_never_ran():
    """The ...OnCohort classes are made on demand by name (unpickling needs cohort, not install)."""
    import subprocess
    import sys
    _, mine = models("phi")
    import io
    buf = io.BytesIO()
    torch.save(mine, buf)
    code = ("import sys, io, torch; m = torch.load(io.BytesIO(sys.stdin.buffer.read()), weights_only=False); "
            "print(type(m.model.layers[0].self_attn).__name__, m.config._attn_implementation)")
    done = subprocess.run([sys.executable, "-c", code], input=buf.getvalue(), capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["PhiAttentionOnCohort", "cohort"]


class _LowRank(torch.nn.Module):
    """A LoRA-style wrapper put where PEFT puts one: at the target's own module name."""

    def __init__(self, base, rank=2, seed=5):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.base = base
        self.a = torch.nn.Parameter(torch.randn(rank, base.in_features, generator=g) * 0.1)
        self.b = torch.nn.Parameter(torch.randn(base.out_features, rank, generator=g) * 0.1)

    def forward(self, x):
        return self.base(x) + (x @ self.a.T) @ self.b.T


def test_module_name_targets_and_hooks_reach_the_installed_model():
    """Adapters put at a projection's name (before or after install) run inside cohort's
    layers, and a hook registered on a layer before install still fires."""
    ref, mine = models("llama")
    ids, mask = padded()
    live = mask.bool()
    eager, before, after = copy.deepcopy(ref), copy.deepcopy(ref), copy.deepcopy(mine)
    for model in (eager, before, after):
        for name in ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"):
            parent, leaf = name.rsplit(".", 1)
            owner = model.get_submodule(parent)
            setattr(owner, leaf, _LowRank(getattr(owner, leaf)))
    calls = []
    before.model.layers[0].self_attn.register_forward_hook(lambda *a: calls.append(1))
    hf.install(before)
    with torch.no_grad():
        want = eager(ids, attention_mask=mask).logits[live]
        assert rel(want, ref(ids, attention_mask=mask).logits[live]) > 1e-3          # the adapters matter
        assert rel(before(ids, attention_mask=mask).logits[live], want) <= 1e-5
        assert rel(after(ids, attention_mask=mask).logits[live], want) <= 1e-5
    assert calls == [1]
    assert [n for n, _ in before.named_modules()] == [n for n, _ in eager.named_modules()]


# ---------------------------------------------------------------- switches flipped after install

def test_output_attentions_is_refused_in_one_line_and_eager_returns_them():
    ref, mine = models("llama")
    ids, mask = padded()
    model = copy.deepcopy(mine)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"^cohort.torch.hf: output_attentions=True: cohort's attention does "
                                             r"not form") as e:
            model(ids, attention_mask=mask, output_attentions=True)
        assert "\n" not in str(e.value)
        with pytest.raises(ValueError, match="output_attentions=True"):
            model.model(ids, attention_mask=mask, output_attentions=True)          # the base model too
        with pytest.raises(ValueError, match=r"output_attentions` attribute is not supported when using the "
                                             r"`attn_implementation` set to cohort"):
            model.config.output_attentions = True               # in the config: transformers refuses it
        model.set_attn_implementation("eager")
        eager = copy.deepcopy(ref)
        eager.set_attn_implementation("eager")
        got = model(ids, attention_mask=mask, output_attentions=True).attentions
        want = eager(ids, attention_mask=mask, output_attentions=True).attentions
    assert len(got) == len(want) == 2
    assert all(rel(g, w) <= 1e-5 for g, w in zip(got, want))


def test_set_attn_implementation_after_install_routes_the_attention_layers():
    """"eager" runs the layers' own attention (norms and MLPs stay cohort's), "cohort" routes
    them back: the logits move off cohort's by float32 rounding, and return to its bits."""
    from unittest import mock
    ref, mine = models("qwen2")
    model = copy.deepcopy(mine)
    ids, mask = padded()
    with torch.no_grad():
        want = model(ids, attention_mask=mask).logits
        for name in ("eager", "sdpa"):
            model.set_attn_implementation(name)
            assert model.config._attn_implementation == name
            with mock.patch.object(ct, "attention", side_effect=AssertionError("cohort attention ran")):
                got = model(ids, attention_mask=mask).logits
            live = mask.bool()
            assert rel(got[live], ref(ids, attention_mask=mask).logits[live]) <= 1e-5
        model.set_attn_implementation("cohort")
        assert torch.equal(model(ids, attention_mask=mask).logits, want)


def test_settings_changed_after_install_are_read_when_the_layers_run():
    """The sliding window (Mistral's config) and a norm's eps are read when the layer runs,
    as the model reads them; an activation module swapped after install is refused."""
    ref, mine = models("mistral")
    eager, model = copy.deepcopy(ref), copy.deepcopy(mine)
    ids, mask = padded()
    live = mask.bool()
    with torch.no_grad():
        before = model(ids, attention_mask=mask).logits[live]
        for m in (eager, model):
            m.config.sliding_window = 2
            m.model.norm.variance_epsilon = 0.5
        want = eager(ids, attention_mask=mask).logits[live]
        assert rel(want, before) > 1e-3
        assert rel(model(ids, attention_mask=mask).logits[live], want) <= 1e-5
        model.model.layers[1].mlp.act_fn = torch.nn.GELU()
        with pytest.raises(ValueError, match=r"^cohort.torch.hf: MistralMLPOnCohort.act_fn is now GELU, not the "
                                             r"SiLUActivation install planned for; call cohort.torch.hf.uninstall"):
            model(ids)


def test_installing_the_base_model_then_the_whole_one_uninstalls_to_the_original():
    ref, _ = models("llama")
    model = copy.deepcopy(ref)
    before = _shape(model)
    hf.install(model.model)
    hf.install(model)
    assert model.config._attn_implementation == "cohort"
    hf.uninstall(model)
    assert _shape(model) == before and model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("convert, what", [
    (lambda m: m.double(), "torch.float64"),
    (lambda m: m.to(torch.float64), "torch.float64"),
    (lambda m: m.to("meta"), "device 'meta'"),
    (lambda m: m.model.layers[1].to(torch.float64), "torch.float64"),       # a part of it
    (lambda m: m.model.layers[1].mlp.double(), "torch.float64"),
])
def test_a_dtype_or_device_cohort_does_not_run_is_refused_at_the_conversion(convert, what):
    _, mine = models("gemma")
    model = copy.deepcopy(mine)
    with pytest.raises(TypeError, match=rf"^cohort.torch.hf: \w+ runs on cohort.torch, which cannot run {what} "
                                        rf"\(float32, bfloat16, float16 on the CPU\); call cohort.torch.hf.uninstall"
                                        rf"\(model\) first$"):
        convert(model)
    assert {(p.dtype, p.device.type) for p in model.parameters()} == {(torch.float32, "cpu")}    # nothing converted
    model.to(torch.bfloat16)                                                # one it runs: converted
    with torch.no_grad():
        assert model(padded()[0]).logits.dtype == torch.bfloat16


# ---------------------------------------------------------------- what install refuses

def _gpt2():
    return T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64, n_positions=32))


def _extra_child():
    model = build("llama")
    model.model.layers[1].self_attn.q_norm = torch.nn.Identity()       # an attention part it does not know
    return model


def _mlp_child():
    model = build("gemma")
    model.model.layers[0].mlp.dropout = torch.nn.Dropout(0.1)
    return model


def _layernorm_without_bias():
    model = build("gpt_neox")
    model.gpt_neox.final_layer_norm = torch.nn.LayerNorm(64, bias=False)
    return model


def _act_mismatch():
    model = build("llama")
    model.model.layers[0].mlp.act_fn = torch.nn.GELU()
    return model


def _mixed():
    model = build("llama")
    model.lm_head.to(torch.bfloat16)
    return model


@pytest.mark.parametrize("make, exc, match", [
    (lambda: torch.nn.Linear(2, 2), ValueError, r"model.config.model_type=None is not a family"),
    (lambda: "llama", TypeError, r"model must be a transformers model \(torch.nn.Module\), got str"),
    (_gpt2, ValueError, r"model.config.model_type='gpt2' is not a family it knows \(gemma, gpt_neox, llama"),
    (lambda: build("llama", config("llama", hidden_act="relu")), ValueError,
     r"model.config.hidden_act='relu' has no cohort operator in a gated MLP"),
    (lambda: build("gpt_neox", config("gpt_neox", hidden_act="silu")), ValueError,
     r"model.config.hidden_act='silu' has no cohort operator in an MLP \(it runs gelu, gelu_new"),
    (lambda: build("llama", config("llama", attn_logit_softcapping=30.0)), ValueError,
     r"model.config.attn_logit_softcapping=30.0: attention logit soft-capping is not implemented"),
    (lambda: build("phi", config("phi", qk_layernorm=True)), ValueError, r"model.config.qk_layernorm=True: qk-norm"),
    (lambda: build("gemma", config("gemma", use_bidirectional_attention=True)), ValueError,
     r"model.config.use_bidirectional_attention=True: bidirectional attention"),
    (lambda: build("llama", config("llama", alibi=True)), ValueError, r"model.config.alibi=True: alibi"),
    (lambda: build("qwen2", config("qwen2", output_attentions=True)), ValueError,
     r"model.config.output_attentions=True: attention weights as outputs"),
    (lambda: build("llama").double(), TypeError, r"the model's dtype is torch.float64; cohort's operators run"),
    (_mixed, TypeError, r"the model's parameters have several dtypes"),
    (_extra_child, ValueError, r"LlamaAttention \(layer 1\) has submodules \['q_norm'\], which cohort's"),
    (_mlp_child, ValueError, r"GemmaMLP has submodules \['dropout'\], which cohort's MLP does not run$"),
    (_layernorm_without_bias, ValueError, r"a LayerNorm over \(64,\) without bias: cohort's layernorm"),
    (_act_mismatch, ValueError, r"the MLP's activation is GELU, not model.config.hidden_act='silu''s SiLUActivation"),
    (lambda: build("mistral", config("mistral", sliding_window=0)), ValueError,
     r"model.config.sliding_window=0 must be a positive int"),
])
def test_what_install_cannot_honour_is_a_one_line_error(make, exc, match):
    model = make()
    with pytest.raises(exc, match=r"^cohort.torch.hf.install: " + match) as e:
        hf.install(model)
    assert "\n" not in str(e.value)
    if isinstance(model, torch.nn.Module):                 # nothing replaced before the error
        assert not any(type(m).__name__.startswith("Cohort") for m in model.modules())


def test_attention_dropout_while_training_is_an_error_at_run_time():
    mine = hf.install(build("llama", config("llama", attention_dropout=0.1)))
    ids, mask = padded()
    with torch.no_grad():
        mine(ids, attention_mask=mask)                        # eval: no dropout, runs
    mine.train()
    with pytest.raises(ValueError, match=r"^cohort attention: dropout=0.1 is not implemented") as e:
        mine(ids, attention_mask=mask)
    assert "\n" not in str(e.value)


def test_a_rotary_table_that_is_not_rotate_half_is_an_error():
    """A model whose tables' two halves differ (a layout cohort's rope_hf does not take) fails
    at the first forward, not silently."""
    _, mine = models("llama")
    rotary = copy.deepcopy(mine.model.rotary_emb)

    class Interleaved(torch.nn.Module):
        def forward(self, x, position_ids):
            cos, sin = rotary(x, position_ids)              # GPT-J's layout: each frequency twice in a row
            half = cos.shape[-1] // 2
            return cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)

    model = copy.deepcopy(mine)
    model.model.rotary_emb = Interleaved()
    with torch.no_grad(), pytest.raises(ValueError, match="rope_hf: the two halves of cos"):
        model(padded()[0])


# ---------------------------------------------------------------- slow: every family, Inductor

@pytest.mark.slow
@pytest.mark.parametrize("family", ["mistral", "qwen2", "gpt_neox", "phi"])
def test_bf16_logits_and_generation_every_family(family):
    test_bf16_logits_and_generation(family, exact=False)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["mistral", "qwen2", "gemma", "phi"])
def test_training_steps_match_eager_every_family(family):
    test_training_steps_match_eager(family)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "gemma", "gpt_neox"])
def test_inductor_compiles_the_installed_model_with_no_graph_break(family):
    """Inductor compiles the rest of the model (projections, residuals, the rotary tables)
    with its own code: close to the eager logits, not the same bits."""
    from torch._dynamo.utils import counters
    _, mine = models(family)
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(mine, fullgraph=True)
    ids, mask = padded()
    with torch.no_grad():
        for n in (13, 9):
            x, m = ids[:, -n:], mask[:, -n:]
            got, want = f(x, attention_mask=m).logits, mine(x, attention_mask=m).logits
            assert rel(got[m.bool()], want[m.bool()]) <= 1e-5
    assert not counters["graph_break"]
    assert ct.stats()["launches"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("example, dtype", [("llama", "bfloat16"), ("gemma", "float32"), ("gemma", "bfloat16")])
def test_the_examples_run_and_agree(example, dtype, capsys, monkeypatch):
    """examples/llama.py and examples/gemma.py (which imports llama.py from its directory)."""
    import importlib
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    mod = importlib.import_module(example)
    mod.main(["--prompt", "12", "--new-tokens", "4", "--repeat", "1", "--no-compile", "--dtype", dtype])
    out = capsys.readouterr().out
    assert out.startswith(f"{dtype} logits: max relative error")
    assert "greedy generation of 4 tokens identical: True" in out
    assert "greedy generation identical: True" in out

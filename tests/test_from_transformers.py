"""wt.from_transformers: GPT-2, Llama and Marian from transformers, equal to transformers' own forward.

Every model is built from a small random config (no weights are downloaded) and re-initialised at a unit-ish
scale first: transformers' std 0.02 makes every logit about 0, and an equality test on zeros proves nothing.
"""

import io

import pytest
import torch

import walkthrough as wt

transformers = pytest.importorskip("transformers")  # the `test` extra installs it

ATOL = RTOL = 1e-5
VOCAB, PAD = 40, 39


def unit_scale(model):
    """Weights ~ 1/sqrt(fan-in), embeddings ~ 1, norm scales ~ 1, biases ~ 0.1: logits of a few units."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:  # Marian's fixed sinusoidal table
                continue
            if p.dim() >= 2:
                table = any(part in name for part in ("wte", "wpe", "embed", "shared"))
                p.normal_(0, 1.0 if table else p.size(-1) ** -0.5)
            elif "norm" in name or "ln" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.1)
        for name, b in model.named_buffers():
            if "final_logits_bias" in name:
                b.normal_(0, 0.1)
    return model.eval()


GPT2_CONFIGS = [dict(n_embd=15, n_head=3, n_layer=2, activation_function="gelu_new"),  # d_k 5: odd
                dict(n_embd=16, n_head=2, n_layer=1, activation_function="relu", tie_word_embeddings=False),
                dict(n_embd=12, n_head=4, n_layer=2, activation_function="gelu", n_inner=20)]
LLAMA_CONFIGS = [dict(num_attention_heads=4, num_key_value_heads=4),  # GQA ratio 1
                 dict(num_attention_heads=4, num_key_value_heads=2, attention_bias=True, rope_theta=500000.0),
                 dict(num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=True, mlp_bias=True)]
MARIAN_CONFIGS = [dict(d_model=15, heads=3, activation_function="swish", share=True),  # d_k 5: odd
                  dict(d_model=16, heads=4, activation_function="gelu", share=False, scale_embedding=False)]


def gpt2(changes):
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=24, bos_token_id=1, eos_token_id=2, **changes)
    return unit_scale(transformers.GPT2LMHeadModel(config))


def llama(changes):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                      max_position_embeddings=24, **changes)
    return unit_scale(transformers.LlamaForCausalLM(config))


def marian(changes):
    changes = dict(changes)
    heads, share = changes.pop("heads"), changes.pop("share")
    config = transformers.MarianConfig(**{
        "vocab_size": VOCAB, "decoder_vocab_size": VOCAB, "encoder_layers": 2, "decoder_layers": 2,
        "encoder_attention_heads": heads, "decoder_attention_heads": heads, "encoder_ffn_dim": 24,
        "decoder_ffn_dim": 24, "max_position_embeddings": 24, "pad_token_id": PAD, "decoder_start_token_id": PAD,
        "eos_token_id": 2, "share_encoder_decoder_embeddings": share, "tie_word_embeddings": share, **changes})
    return unit_scale(transformers.MarianMTModel(config))


def ids(batch, length, seed=1):
    return torch.randint(3, PAD, (batch, length), generator=torch.Generator().manual_seed(seed))


def saved_and_loaded(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    again = type(model)(model.cfg).eval()
    again.load_state_dict(torch.load(buffer, weights_only=True))
    return again


def hf_greedy(step, start, steps):
    """transformers' greedy continuation by hand: argmax of the last logits, appended, ``steps`` times."""
    out = start
    for _ in range(steps):
        out = torch.cat([out, step(out)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return out


@pytest.mark.parametrize("build, changes", [(gpt2, c) for c in GPT2_CONFIGS] + [(llama, c) for c in LLAMA_CONFIGS],
                         ids=[f"gpt2-{i}" for i in range(3)] + [f"llama-{i}" for i in range(3)])
def test_causal_lm_equals_transformers(build, changes):
    hf = build(changes)
    ours = wt.from_transformers(hf)
    assert isinstance(ours, wt.GPT) and not ours.training
    prompt = ids(2, 9)
    with torch.no_grad():
        expected = hf(prompt).logits  # [B, L, V]
        assert expected.std() > 0.5  # unit scale: a real comparison, not zeros against zeros
        torch.testing.assert_close(ours(prompt), expected, atol=ATOL, rtol=RTOL)
        cache, cached = ours.new_cache(2), []
        for t in range(prompt.size(1)):  # one token at a time through the KV cache
            cached.append(ours(prompt[:, t:t + 1], cache))
        torch.testing.assert_close(torch.cat(cached, 1), expected, atol=ATOL, rtol=RTOL)
        torch.testing.assert_close(saved_and_loaded(ours)(prompt), expected, atol=ATOL, rtol=RTOL)
        continuation = hf_greedy(lambda x: hf(x).logits, prompt[:, :4], 8)
        for use_cache in (True, False):
            assert torch.equal(wt.greedy_decode(ours, prompt[:, :4], 8, use_cache=use_cache), continuation)
    assert sum(p.numel() for p in ours.parameters()) == wt.config.parameter_count(ours.cfg)


@pytest.mark.parametrize("changes", MARIAN_CONFIGS, ids=["shared-swish", "separate-gelu-unscaled"])
def test_marian_equals_transformers(changes):
    hf = marian(changes)
    ours = wt.from_transformers(hf)
    assert isinstance(ours, wt.Transformer) and ours.cfg.pad_id == PAD
    src = ids(2, 7)
    src[1, 5:] = PAD  # a padded source sentence
    tgt = torch.cat([torch.full((2, 1), PAD), ids(2, 5, seed=2)], dim=1)  # decoder start = pad, as Marian's
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits
        assert expected.std() > 0.5
        torch.testing.assert_close(ours(src, tgt), expected, atol=ATOL, rtol=RTOL)
        memory, cache, cached = ours.encode(src), ours.new_cache(src), []
        for t in range(tgt.size(1)):
            cached.append(ours.output_head(ours.decode(tgt[:, t:t + 1], memory, src, cache)))
        torch.testing.assert_close(torch.cat(cached, 1), expected, atol=ATOL, rtol=RTOL)
        torch.testing.assert_close(saved_and_loaded(ours)(src, tgt), expected, atol=ATOL, rtol=RTOL)
        step = lambda y: hf(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=y).logits  # noqa: E731
        continuation = hf_greedy(step, tgt[:, :1], 6)
        for use_cache in (True, False):  # eos_id=-ish: no row stops early, so every step is compared
            ys = wt.greedy_decode(ours, src, 6, sos_id=PAD, eos_id=VOCAB - 2, use_cache=use_cache)
            assert torch.equal(ys, continuation), "every step compared: no row wrote eos_id"
    assert sum(p.numel() for p in ours.parameters()) == wt.config.parameter_count(ours.cfg)


def test_llama_head_permutation_is_the_pairing_of_rotate_half():
    from walkthrough.interop.hf import _rotary_pairs
    assert _rotary_pairs(8).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def small_llama(**changes):
    return llama(dict(num_attention_heads=4, num_key_value_heads=2, **changes))


@pytest.mark.parametrize("make, match", [
    (lambda: small_llama(rope_scaling={"rope_type": "linear", "factor": 2.0}), r"rope_type.*'linear'.*rope scaling"),
    (lambda: small_llama(hidden_act="gelu"), r"hidden_act='gelu'.*SwiGLU"),
    (lambda: small_llama(head_dim=8), r"head_dim=8"),
    (lambda: gpt2(dict(n_embd=12, n_head=2, n_layer=1, scale_attn_by_inverse_layer_idx=True)),
     r"scale_attn_by_inverse_layer_idx=True"),
    (lambda: marian(dict(d_model=12, heads=2, share=True, decoder_layers=1)), r"decoder_layers=1"),
])
def test_a_config_option_the_package_lacks_is_named(make, match):
    hf = make()
    with pytest.raises(ValueError, match=match):
        wt.from_transformers(hf)


def test_sliding_window_is_named():
    hf = small_llama()
    hf.config.sliding_window = 4  # as Mistral's config has
    with pytest.raises(ValueError, match=r"sliding_window=4"):
        wt.from_transformers(hf)


def test_an_unsupported_class_is_named():
    bert = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, hidden_size=8, num_hidden_layers=1,
                                                          num_attention_heads=2, intermediate_size=8))
    with pytest.raises(TypeError, match=r"reads GPT2LMHeadModel, LlamaForCausalLM, MarianMTModel, got BertModel"):
        wt.from_transformers(bert)


def test_missing_extra_keys_and_other_dtypes_stop_before_any_copy(monkeypatch):
    hf = small_llama()
    weights = hf.state_dict()
    copied = []
    monkeypatch.setattr(torch.nn.Module, "load_state_dict", lambda self, *a, **k: copied.append(self))
    missing = {k: v for k, v in weights.items() if k != "model.layers.1.mlp.up_proj.weight"}
    with pytest.raises(ValueError, match=r"has no 'model.layers.1.mlp.up_proj.weight'"):
        wt.from_transformers(hf, missing)
    with pytest.raises(ValueError, match=r"no place for: \['model.layers.0.extra.weight'\]"):
        wt.from_transformers(hf, {**weights, "model.layers.0.extra.weight": torch.zeros(2)})
    with pytest.raises(TypeError, match=r"float32 or float64.*torch.bfloat16.*hf_model.float\(\)"):
        wt.from_transformers(hf, {k: v.bfloat16() for k, v in weights.items()})
    assert copied == []


def test_a_bias_the_config_asks_for_is_required():
    """Issue #40: a Llama with attention_bias=True and no q_proj.bias loaded with a zero bias (logits off, no
    error). A bias the config gives is required; one it does not give is left over, and named."""
    hf = llama(dict(num_attention_heads=4, num_key_value_heads=2, attention_bias=True))
    weights = hf.state_dict()
    without = {k: v for k, v in weights.items() if k != "model.layers.0.self_attn.q_proj.bias"}
    with pytest.raises(ValueError, match=r"LlamaForCausalLM state dict has no 'model.layers.0.self_attn.q_proj.bias'"):
        wt.from_transformers(hf, without)
    extra = {**weights, "model.layers.1.mlp.up_proj.bias": torch.zeros(24)}  # mlp_bias=False: no place for it
    with pytest.raises(ValueError, match=r"no place for: \['model.layers.1.mlp.up_proj.bias'\]"):
        wt.from_transformers(hf, extra)


@pytest.mark.parametrize(("make", "key"), [
    (lambda: gpt2(GPT2_CONFIGS[0]), "transformer.h.1.attn.c_attn.weight"),
    (lambda: gpt2(GPT2_CONFIGS[1]), "lm_head.weight"),
    (lambda: llama(LLAMA_CONFIGS[1]), "model.layers.0.self_attn.k_proj.weight"),
    (lambda: llama(LLAMA_CONFIGS[1]), "model.layers.1.self_attn.q_proj.bias"),
    (lambda: llama(LLAMA_CONFIGS[0]), "model.norm.weight"),
    (lambda: marian(MARIAN_CONFIGS[1]), "model.decoder.layers.0.encoder_attn.k_proj.weight"),
    (lambda: marian(MARIAN_CONFIGS[0]), "final_logits_bias"),
])
def test_a_misshapen_weight_is_named_by_its_transformers_name(make, key):
    """Before the fix a wrong shape gave a raw ``view`` error (Llama's q/k rows) or load_state_dict's message
    about walkthrough's names (decoder.layers.0.…), which a reader cannot find in their transformers model."""
    hf = make()
    weights = hf.state_dict()
    shape = list(weights[key].shape)
    wrong = {**weights, key: torch.zeros(*shape[:-1], shape[-1] + 1)}
    with pytest.raises(ValueError, match=rf"state dict's '{key}' has shape {[*shape[:-1], shape[-1] + 1]}, but "
                                         rf"the config gives it {shape}".replace("[", r"\[").replace("]", r"\]")):
        wt.from_transformers(hf, wrong)


def test_float64_weights_give_a_float64_model():
    hf = gpt2(GPT2_CONFIGS[0]).double()
    ours = wt.from_transformers(hf)
    prompt = ids(1, 6)
    assert ours.output_head.proj.weight.dtype == torch.float64
    with torch.no_grad():
        torch.testing.assert_close(ours(prompt), hf(prompt).logits, atol=1e-6, rtol=1e-6)  # HF's rotary-free path

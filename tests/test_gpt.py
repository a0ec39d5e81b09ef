"""Notebook 09's model: grouped-query attention against PyTorch's SDPA, rotary positions against the complex-number
formulation, the GPT's causality and cache, its trace, and the numeral task as a language model."""

import dataclasses
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import walkthrough as wt
from walkthrough.__main__ import main
from walkthrough.tasks.data import english_tokens
from walkthrough.tasks.language_model import (
    SEPARATOR,
    GPTSettings,
    GPTTrainer,
    answer_loss,
    make_lm_batch,
    numeral_lm_vocab,
)

ROOT = Path(__file__).resolve().parents[1]
D, H = 32, 4


def small_gpt(positions="rope", norm_first=True, num_kv_heads=2, seed=0, **changes) -> wt.GPT:
    torch.manual_seed(seed)
    cfg = wt.GPTConfig(**{"vocab_size": 50, "d_model": D, "num_heads": H, "num_kv_heads": num_kv_heads, "d_ff": 64,
                          "num_layers": 2, "max_len": 24, "dropout": 0.0, "pad_id": 0, "positions": positions,
                          "norm_first": norm_first, **changes})
    return wt.GPT(cfg).eval()


# ---------------------------------------------------------------------------------------------------
# Grouped-query attention

def sdpa_reference(mha: wt.MultiHeadAttention, query, key, value, mask=None):
    """The module's own weights, PyTorch's attention: project, split (H and H_kv heads), SDPA(enable_gqa), merge."""
    batch, length_q, _ = query.shape
    length_k = key.size(1)
    d_k = mha.d_k
    q = mha.w_q(query).view(batch, length_q, mha.num_heads, d_k).transpose(1, 2)  # [B, H, L_q, d_k]
    k = mha.w_k(key).view(batch, length_k, mha.num_kv_heads, d_k).transpose(1, 2)  # [B, H_kv, L_k, d_k]
    v = mha.w_v(value).view(batch, length_k, mha.num_kv_heads, d_k).transpose(1, 2)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # [B, H, L_q, d_k]
    return mha.w_o(context.transpose(1, 2).reshape(batch, length_q, mha.num_heads * d_k))


def masks(batch: int, length: int):
    ids = torch.randint(1, 9, (batch, length))
    ids[0, -2:] = 0  # the first sentence is two tokens shorter
    yield "none", None
    yield "padding", wt.padding_mask(ids, 0)  # [B, 1, 1, L]
    yield "causal", wt.causal_mask(length)  # [L, L]
    yield "padding and causal", wt.decoder_self_mask(ids, 0)  # [B, 1, L, L]


@pytest.mark.parametrize("kv_heads", [1, 2, H])
def test_gqa_equals_sdpa_enable_gqa(kv_heads):
    torch.manual_seed(kv_heads)
    mha = wt.MultiHeadAttention(D, H, num_kv_heads=kv_heads).eval()
    x = torch.randn(3, 7, D)
    with torch.no_grad():
        for name, mask in masks(3, 7):
            torch.testing.assert_close(mha(x, x, x, mask), sdpa_reference(mha, x, x, x, mask), msg=name)
        memory = torch.randn(3, 5, D)  # a rectangle: 7 queries, 5 keys
        torch.testing.assert_close(mha(x, memory, memory), sdpa_reference(mha, x, memory, memory))


def test_gqa_shapes_and_parameter_count():
    mha = wt.MultiHeadAttention(D, H, num_kv_heads=2)
    assert mha.w_k.weight.shape == mha.w_v.weight.shape == (2 * D // H, D)  # D -> H_kv·d_k
    assert mha.w_q.weight.shape == mha.w_o.weight.shape == (D, D)
    k = torch.randn(2, 2, 5, D // H)  # [B, H_kv, L, d_k]
    expanded = mha.expand_kv(k)  # [B, H, L, d_k]
    assert expanded.shape == (2, H, 5, D // H)
    for head in range(H):  # K/V head j serves query heads 2j and 2j+1
        assert torch.equal(expanded[:, head], k[:, head // 2])


def test_kv_heads_none_or_h_is_pytorchs_multi_head_attention_on_both_paths():
    """H_kv = H (num_kv_heads None or H) is the paper's attention: equal to nn.MultiheadAttention with the same
    weights, on the fused path and written out (comparing None with H alone could not fail: both become H)."""
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(D, H, batch_first=True).eval()
    x = torch.randn(2, 6, D)
    mask = wt.causal_mask(6)
    expected = reference(x, x, x, attn_mask=~mask)[0]  # PyTorch's mask: True = blocked
    for kv_heads in (None, H):
        ours = wt.copy_torch_attention(wt.MultiHeadAttention(D, H, num_kv_heads=kv_heads).eval(), reference)
        with torch.no_grad():
            torch.testing.assert_close(ours(x, x, x, mask), expected)  # the fused path
            with wt.keep_attention_weights(ours):
                torch.testing.assert_close(ours(x, x, x, mask), expected)  # written out


def test_kv_heads_must_divide_heads():
    with pytest.raises(ValueError, match=r"num_kv_heads=3 does not divide num_heads=4.*from \[1, 2, 4\]"):
        wt.MultiHeadAttention(D, H, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads=3 does not divide num_heads=4"):
        wt.GPTConfig(vocab_size=50, d_model=D, num_heads=H, num_kv_heads=3, d_ff=64, num_layers=1, max_len=8)
    with pytest.raises(ValueError, match="num_kv_heads must be at least 1"):
        wt.MultiHeadAttention(D, H, num_kv_heads=0)


# ---------------------------------------------------------------------------------------------------
# Rotary positions

def rope_complex(x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """RoFormer as complex numbers: pair (2i, 2i+1) is x_2i + i·x_2i+1, times exp(i·pos·θ_i), θ_i = 10000^(-2i/d)."""
    d_k, length = x.size(-1), x.size(-2)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d_k // 2, 2).contiguous())  # [..., L, d_k/2]
    theta = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # [d_k/2]
    position = torch.arange(offset, offset + length, dtype=torch.float64)[:, None]  # [L, 1]
    turned = pairs * torch.polar(torch.ones_like(position * theta), position * theta)  # exp(i·pos·θ)
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)


@pytest.mark.parametrize("offset", [0, 5])
def test_rope_equals_the_complex_number_formulation(offset):
    x = torch.randn(2, 3, 9, 16)  # [B, H, L, d_k]
    torch.testing.assert_close(wt.apply_rope(x, offset), rope_complex(x, offset))


def test_rope_preserves_norms_and_moves_every_position_but_zero():
    x = torch.randn(2, 3, 9, 16)
    rotated = wt.apply_rope(x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert torch.equal(rotated[:, :, 0], x[:, :, 0])  # position 0: angle 0
    assert not torch.allclose(rotated[:, :, 1:], x[:, :, 1:])


def rotated_score(q: torch.Tensor, k: torch.Tensor, m: int, n: int) -> float:
    """Query q at position m against key k at position n, both [d_k], after rotation."""
    q_m = wt.apply_rope(q.view(1, 1, 1, -1), offset=m)
    k_n = wt.apply_rope(k.view(1, 1, 1, -1), offset=n)
    return (q_m * k_n).sum().item()


def test_rope_score_depends_only_on_the_distance():
    torch.manual_seed(0)
    q, k = torch.randn(16).double(), torch.randn(16).double()
    for m, n in ((3, 1), (7, 7), (2, 9)):
        base = rotated_score(q, k, m, n)
        for shift in (1, 10, 100):
            assert rotated_score(q, k, m + shift, n + shift) == pytest.approx(base, abs=1e-5)  # float32 angles
    assert rotated_score(q, k, 3, 1) != pytest.approx(rotated_score(q, k, 3, 2), abs=1e-3)  # distance matters


def test_rope_keys_in_the_cache_are_rotated_once_at_their_own_positions():
    torch.manual_seed(0)
    mha = wt.MultiHeadAttention(D, H, num_kv_heads=2, rope=True).eval()
    x = torch.randn(2, 6, D)
    cache = wt.KVCache(grows=True)
    with torch.no_grad():
        outputs = [mha(x[:, :3], x[:, :3], x[:, :3], wt.causal_mask(3), cache)]  # positions 0..2 at once
        outputs += [mha(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], None, cache) for t in range(3, 6)]
        keys = mha.w_k(x).view(2, 6, 2, D // H).transpose(1, 2)  # [B, H_kv, L, d_k]
        torch.testing.assert_close(cache.k, wt.apply_rope(keys))
        torch.testing.assert_close(torch.cat(outputs, dim=1), mha(x, x, x, wt.causal_mask(6)))
    assert cache.k.shape == (2, 2, 6, D // H)


def test_rope_odd_d_k_is_refused():
    with pytest.raises(ValueError, match="d_k must be even, got d_k=3"):
        wt.apply_rope(torch.randn(1, 1, 4, 3))
    with pytest.raises(ValueError, match="d_k must be even, got d_k=3; d_k = d_model / num_heads"):
        wt.MultiHeadAttention(12, 4, rope=True)
    with pytest.raises(ValueError, match=r"turn features in pairs.*d_k=3.*change d_model or num_heads"):
        wt.GPTConfig(vocab_size=50, d_model=12, num_heads=4, d_ff=64, num_layers=1, max_len=8)
    wt.GPTConfig(vocab_size=50, d_model=12, num_heads=4, d_ff=64, num_layers=1, max_len=8, positions="sinusoidal")


# ---------------------------------------------------------------------------------------------------
# The GPT

def test_gpt_maps_ids_to_logits():
    model = small_gpt()
    ids = torch.randint(1, 50, (3, 11))
    assert model(ids).shape == (3, 11, 50)  # [B, L, V]
    assert model.embed.position is None  # rope: nothing added to the embeddings
    assert small_gpt(positions="sinusoidal").embed.position is not None
    assert all(layer.cross_attn is None for layer in model.decoder.layers)


@pytest.mark.parametrize("positions", ["rope", "sinusoidal"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_gpt_is_causal(positions, norm_first):
    model = small_gpt(positions, norm_first)
    ids = torch.randint(1, 50, (2, 10))
    with torch.no_grad():
        before = model(ids)
        for t in (0, 4, 9):
            changed = ids.clone()
            changed[:, t] = changed[:, t] % 49 + 1  # another real token
            after = model(changed)
            torch.testing.assert_close(after[:, :t], before[:, :t], rtol=0, atol=0)  # nothing before t moves
            assert not torch.allclose(after[:, t:], before[:, t:])  # position t itself sees the change


def test_gpt_cached_forward_equals_full_forward_and_holds_kv_heads():
    model = small_gpt(num_kv_heads=1)
    ids = torch.randint(1, 50, (3, 9))
    cache = model.new_cache(3)
    with torch.no_grad():
        full = model(ids)
        steps = [model(ids[:, :4], cache)] + [model(ids[:, t:t + 1], cache) for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    for layer in cache.layers:
        assert layer.self_attn.k.shape == layer.self_attn.v.shape == (3, 1, 9, D // H)  # H_kv = 1 head, not H = 4


@pytest.mark.parametrize("positions", ["rope", "sinusoidal"])
def test_gpt_greedy_decode_same_with_and_without_cache(positions):
    model = small_gpt(positions)
    prompt = torch.randint(1, 50, (2, 5))
    cached = wt.greedy_decode(model, prompt, max_new_tokens=8)
    assert cached.shape == (2, 13)
    assert torch.equal(cached, wt.greedy_decode(model, prompt, max_new_tokens=8, use_cache=False))
    assert torch.equal(cached[:, :5], prompt)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_a_left_padded_row_is_refused_by_a_gpt_with_a_table_of_positions(positions):
    """Issue #40: the forward silently gave a left-padded row other logits than the row alone (the table counts
    the PAD); decoding refused it, the forward did not. Right padding stays allowed: it moves no position."""
    model = small_gpt(positions)
    row = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match=rf"ids rows \[1\] are left-padded \(PAD, id 0, before their first token\), "
                                         rf"but this GPT adds a table of positions \(positions='{positions}'\).*"
                                         r"pad on the right \(wt.pad_batch\).*positions='rope'"):
        model(torch.tensor([[5, 6, 7], [0, 6, 7]]))
    with pytest.raises(ValueError, match=r"left-padded"):  # a prompt given to a cache is the same forward
        model(torch.tensor([[0, 6, 7]]), model.new_cache(1))
    with torch.no_grad():
        torch.testing.assert_close(model(wt.pad_batch([[5, 6, 7], [8, 9]]))[0], model(row)[0])
    rope = small_gpt("rope")
    with torch.no_grad():  # rotary positions count from the first real token: left padding is handled
        torch.testing.assert_close(rope(torch.tensor([[0, 5, 6, 7]]))[0, 1:], rope(row)[0], atol=1e-5, rtol=1e-5)


def test_gpt_bad_input_names_the_parameter():
    model = small_gpt()
    with pytest.raises(ValueError, match="sequence length 25 is longer than max_len=24"):
        model(torch.ones(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match=r"max_len=24.*shorten the prompt"):
        wt.greedy_decode(model, torch.ones(1, 20, dtype=torch.long), max_new_tokens=10)
    with pytest.raises(ValueError, match=r"ids holds token id 50, outside the vocabulary \[0, 50\)"):
        model(torch.tensor([[1, 50]]))
    with pytest.raises(ValueError, match=r"prompt holds token id -1"):
        wt.greedy_decode(model, torch.tensor([[1, -1]]), max_new_tokens=2)
    with pytest.raises(TypeError, match="ids must hold integer token ids"):
        model(torch.ones(1, 3))
    cache = model.new_cache(1)
    model(torch.ones(1, 20, dtype=torch.long), cache)
    with pytest.raises(ValueError, match=r"positions 20\.\.24 go past max_len=24"):
        model(torch.ones(1, 5, dtype=torch.long), cache)


# ---------------------------------------------------------------------------------------------------
# The trace

def test_trace_gpt_matches_the_real_model():
    model = small_gpt(num_kv_heads=2)
    rows = wt.trace_shapes(model.cfg, batch=3, length=7)
    shape = {(r.where, r.step): r.shape for r in rows}
    assert shape["output_head", "logits"] == tuple(model(torch.randint(1, 50, (3, 7))).shape) == (3, 7, 50)
    assert shape["decoder.layers.0.self_attn", "K transpose"] == (3, 2, 7, D // H)  # [B, H_kv, L, d_k]
    assert shape["decoder.layers.0.self_attn", "K shared by a group"] == (3, H, 7, D // H)
    assert shape["decoder.layers.0.self_attn", "scores Q·Kᵀ/√d_k"] == (3, H, 7, 7)
    assert ("decoder.layers.0.self_attn", "Q rotated (RoPE)") in shape
    assert not any("cross_attn" in r.where or r.step == "+ positional encoding" for r in rows)
    step = {(r.where, r.step): r.shape for r in wt.trace_shapes(model.cfg, batch=3, step=7)}
    assert step["decoder.layers.1.self_attn", "K in the cache"] == (3, 2, 7, D // H)
    assert step["decoder.layers.1.self_attn", "scores Q·Kᵀ/√d_k"] == (3, H, 1, 7)
    assert step["output_head", "logits"] == (3, 1, 50)


def test_trace_gpt_at_any_size_allocates_nothing():
    cfg = wt.GPTConfig(vocab_size=128000, d_model=8192, num_heads=64, num_kv_heads=8, d_ff=28672, num_layers=80,
                       max_len=8192)  # ~80 GB of weights: traceable only because nothing is allocated
    shape = {(r.where, r.step): r.shape for r in wt.trace_shapes(cfg, batch=1, length=4096)}
    assert shape["decoder.layers.0.self_attn", "K rotated (RoPE)"] == (1, 8, 4096, 128)
    assert shape["output_head", "logits"] == (1, 4096, 128000)


def test_trace_gpt_bad_input():
    cfg = small_gpt().cfg
    with pytest.raises(ValueError, match="length=25 is longer than max_len=24"):
        wt.trace_shapes(cfg, 2, length=25)
    with pytest.raises(ValueError, match="length= is the decoder-only model's one sequence"):
        wt.trace_shapes(wt.ModelConfig(), 2, length=5)
    with pytest.raises(ValueError, match="batch must be at least 1"):
        wt.trace_shapes(cfg, 0, length=5)


# ---------------------------------------------------------------------------------------------------
# The numeral task as a language model

def test_language_model_batch_puts_the_loss_on_the_answer_only():
    vocab = numeral_lm_vocab()
    assert {"三", "万", "three", "million", SEPARATOR} <= set(vocab.itos)
    batch = make_lm_batch([("三百零五", "three hundred five"), ("七", "seven")], vocab)
    assert batch.ids.shape == batch.labels.shape == (2, 8)  # 4 characters, <sep>, 3 words (the final <eos> is no input)
    assert vocab.itos[batch.ids[0, 4]] == SEPARATOR
    answer = batch.labels[0][batch.labels[0] != 0]
    assert vocab.decode(answer) == english_tokens("three hundred five") and answer[-1] == wt.Vocab.eos_id
    assert batch.labels[0, :4].eq(0).all() and batch.labels[0, 4] == vocab.stoi["three"]  # <sep> predicts word 1
    assert batch.labels[1].tolist() == [0, vocab.stoi["seven"], wt.Vocab.eos_id] + [0] * 5
    # the loss's gradient reaches the answer positions only
    torch.manual_seed(0)
    logits = torch.randn(2, 8, len(vocab), requires_grad=True)
    wt.sequence_loss(logits, batch.labels, wt.Vocab.pad_id).backward()
    gets_gradient = logits.grad.abs().sum(-1) > 0  # [B, L]
    assert torch.equal(gets_gradient, batch.labels != 0)


def test_language_model_settings_are_checked():
    with pytest.raises(ValueError, match="num_kv_heads=3 does not divide num_heads=4"):
        GPTSettings(num_kv_heads=3)
    with pytest.raises(ValueError, match="positions must be one of"):
        GPTSettings(positions="absolute")
    with pytest.raises(TypeError, match=r"settings must be a walkthrough\.GPTSettings"):
        GPTTrainer(wt.TrainSettings())


def test_language_model_trains_and_completes(tmp_path):
    trainer = GPTTrainer(GPTSettings(steps=30, warmup=5))
    first_loss = answer_loss(trainer.model, trainer.batch(0)).item()
    trainer.run(30, progress=False)
    assert trainer.losses[-1] < first_loss
    texts = ["三百零五", "一万零一", "七"]
    completions = trainer.complete(texts)
    assert len(completions) == 3 and all(isinstance(c, str) for c in completions)
    with pytest.raises(TypeError, match="wrap it in a list"):
        trainer.complete("三百")
    path = tmp_path / "lm.pt"
    wt.save_checkpoint(trainer, path)
    again = wt.load_checkpoint(path)
    assert again.step == 30 and again.losses == trainer.losses
    assert again.complete(texts) == completions
    with pytest.raises(ValueError, match="not a walkthrough checkpoint"):
        torch.save({"format": "something else"}, tmp_path / "other.pt")
        wt.load_checkpoint(tmp_path / "other.pt")


def test_cli_trains_the_gpt_and_prints_held_out_accuracy_last(capsys):
    assert main(["train", "--model", "gpt", "--steps", "20", "--held-out", "20"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("held-out exact-match accuracy: ") and last.endswith("(20 examples)")
    assert 0 <= float(last.split(": ")[1].split()[0]) <= 1


def test_numeral_lm_max_len_fits_the_longest_numeral():
    vocab = numeral_lm_vocab()
    longest = 99_999_999  # the most characters and the most words the task samples
    batch = make_lm_batch([(wt.chinese_numeral(longest), wt.english_words(longest))], vocab)
    assert batch.ids.size(1) + 1 == 29 <= GPTSettings().config(len(vocab)).max_len


# ---------------------------------------------------------------------------------------------------
# What grouped-query attention saves, and its explorer

def test_gqa_costs_shrink_by_heads_over_kv_heads():
    costs = {}
    for kv_heads in (1, 2, 4, 8):
        cfg = wt.GPTConfig(vocab_size=100, d_model=512, num_heads=8, num_kv_heads=kv_heads, d_ff=64, num_layers=6,
                           max_len=32)
        costs[kv_heads] = wt.cost.gqa_costs(cfg, batch=32, length=14)
        assert costs[kv_heads].k_shape == (32, kv_heads, 14, 64)
        real = wt.MultiHeadAttention(512, 8, num_kv_heads=kv_heads)
        assert costs[kv_heads].attention_parameters == sum(p.numel() for p in real.parameters())
        assert costs[kv_heads].kv_bytes_per_token == 2 * 6 * kv_heads * 64 * 4
    assert costs[8].kv_bytes_per_token == 24576 and costs[2].kv_bytes_per_token == 24576 // 4
    sharing = wt.cost.kv_sharing(8, 2)  # [H, H_kv]
    assert sharing.tolist() == [[1, 0]] * 4 + [[0, 1]] * 4
    assert torch.equal(wt.cost.kv_sharing(4, 4), torch.eye(4, dtype=torch.long))


def test_gqa_explorer_moves_and_refuses_a_non_divisor():
    widgets = wt.widgets
    box = widgets.gqa_explorer()
    box.control("kv_heads").value = 2
    assert "[32, 2, 14, 64]" in box.text() and "÷4" in box.text()
    box.control("kv_heads").value = 3
    assert "num_kv_heads=3 does not divide num_heads=8" in box.text() and "Traceback" not in box.text()


def test_gqa_trace_names_kv_heads_h_kv_and_gpt_ids_once():
    cfg = wt.GPTConfig(vocab_size=50, d_model=32, num_heads=4, num_kv_heads=2, d_ff=64, num_layers=1, max_len=16)
    rows = wt.by_step(wt.trace_shapes(cfg, 2, length=6))
    assert rows["decoder.layers.0.self_attn", "K transpose"].dims == "B H_kv L d_k"
    assert rows["decoder.layers.0.self_attn", "V view"].dims == "B L H_kv d_k"
    assert rows["decoder.layers.0.self_attn", "Q transpose"].dims == "B H L d_k"
    assert ("embed", "ids") in rows and not any(step == "ids ids" for _, step in rows)
    assert rows["output_head", "logits"].dims == "B L V"
    assert rows["model", "logits flattened"].dims == "B·L V"  # a product's factors renamed too (it read B·L_tgt)
    assert rows["decoder.layers.0.self_attn", "K = X·W_k"].dims == "B L_k H_kv·d_k"
    ungrouped = wt.by_step(wt.trace_shapes(dataclasses.replace(cfg, num_kv_heads=None), 2, length=6))
    assert ungrouped["decoder.layers.0.self_attn", "K = X·W_k"].dims == "B L_k D"  # a product's own name first


def test_apply_rope_refuses_ids_and_offsets_that_are_no_position():
    x = torch.randn(1, 2, 3, 8)
    with pytest.raises(TypeError, match=r"x must be a float tensor.*x\.float\(\)"):
        wt.apply_rope(torch.ones(1, 2, 3, 8, dtype=torch.long))  # all zeros came back
    with pytest.raises(ValueError, match="offset must be >= 0"):
        wt.apply_rope(x, -1)
    with pytest.raises(TypeError, match="offset must be a whole number"):
        wt.apply_rope(x, 1.5)
    with pytest.raises(TypeError, match="offset must be a whole number"):
        wt.apply_rope(x, True)


def test_apply_rope_in_float64_computes_its_angles_in_float64():
    """At position 10⁶ float32 angles are off by up to ~0.06 rad: a float64 query-key score was 0.3 % wrong."""
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 64, dtype=torch.float64), torch.randn(1, 1, 1, 64, dtype=torch.float64)
    offset = 10**6
    pairs = torch.arange(0, 64, 2, dtype=torch.float64)
    angle = (offset * 10000.0 ** (-pairs / 64)).remainder(2 * math.pi)  # [32], exact in float64

    def rotated(x):  # the complex-number form, independent of apply_rope
        z = torch.view_as_complex(x.reshape(32, 2).contiguous()) * torch.polar(torch.ones(32, dtype=torch.float64),
                                                                               angle)
        return torch.view_as_real(z).reshape(1, 1, 1, 64)

    torch.testing.assert_close(wt.apply_rope(q, offset), rotated(q), rtol=1e-9, atol=1e-9)
    score = (wt.apply_rope(q, offset) * wt.apply_rope(k, offset + 3)).sum()
    torch.testing.assert_close(score, (rotated(q) * wt.apply_rope(k, offset + 3)).sum(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_gpt_block_equals_pytorchs_layer_with_the_same_norm_placement(norm_first):
    """An independent reference for the residual path (issue 30): PyTorch's own nn.TransformerEncoderLayer with
    norm_first and a causal mask is a GPT block; swapping pre- and post-norm in ours fails this."""
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    cfg = wt.GPTConfig(vocab_size=8, d_model=16, num_heads=4, d_ff=24, dropout=0.0, positions="learned",
                       norm_first=norm_first)
    ours = wt.DecoderLayer(cfg, cross_attention=False).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0, 0.5)  # norms away from 1 and 0, so their placement shows
        wt.copy_torch_attention(ours.self_attn, theirs.self_attn)
        for mine, torchs in ((ours.feed_forward.linear1, theirs.linear1), (ours.feed_forward.linear2, theirs.linear2),
                             (ours.self_attn_norm.norm, theirs.norm1), (ours.ffn_norm.norm, theirs.norm2)):
            mine.load_state_dict(torchs.state_dict())
        x = 3 * torch.randn(2, 6, 16)
        expected = theirs(x, src_mask=nn.Transformer.generate_square_subsequent_mask(6), is_causal=True)
        torch.testing.assert_close(ours(x, None, wt.causal_mask(6)), expected, rtol=1e-5, atol=1e-5)

"""The package against PyTorch's own layers, with weights copied in."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import walkthrough as wt


def torch_causal_blocked(length):
    """PyTorch's own causal mask, True = blocked (its convention), independent of ours."""
    return torch.isinf(nn.Transformer.generate_square_subsequent_mask(length))


def ragged_ids(lengths, width, vocab, pad_id=0):
    ids = torch.randint(1, vocab, (len(lengths), width))
    for row, n in enumerate(lengths):
        ids[row, n:] = pad_id
    return ids


def test_attention_core_equals_sdpa_with_padding_and_causal_masks():
    q, k, v = torch.randn(3, 4, 6, 8), torch.randn(3, 4, 6, 8), torch.randn(3, 4, 6, 8)
    ids = ragged_ids([6, 4, 2], 6, 10)
    mask = wt.padding_mask(ids, 0) & wt.causal_mask(6)  # [3, 1, 6, 6], True = may attend
    ours, weights = wt.scaled_dot_product_attention(q, k, v, mask)
    additive = nn.Transformer.generate_square_subsequent_mask(6) + torch.where(ids == 0, -torch.inf, 0.0)[:, None, None]
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=additive))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6))
    assert weights[2, 0, 5, 2:].abs().max() == 0  # padded keys get no weight


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_equals_nn_multiheadattention(causal):
    d_model, heads = 24, 3
    ours = wt.MultiHeadAttention(d_model, heads).eval()
    ref = nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    wt.copy_torch_attention(ours, ref)
    torch.testing.assert_close(ours.w_k.weight, ref.in_proj_weight[d_model:2 * d_model])  # the middle third is W_k
    x = torch.randn(2, 5, d_model)
    ids = ragged_ids([5, 3], 5, 9)
    mask = wt.padding_mask(ids, 0)
    attn_mask = None
    if causal:
        mask = mask & wt.causal_mask(5)
        attn_mask = torch_causal_blocked(5)
    expected, expected_weights = ref(x, x, x, key_padding_mask=~(ids != 0), attn_mask=attn_mask,
                                     average_attn_weights=False)
    torch.testing.assert_close(ours(x, x, x, mask), expected)  # fused: no weights made
    assert ours.attn_weights is None
    with wt.keep_attention_weights(ours):
        torch.testing.assert_close(ours(x, x, x, mask), expected)  # written out: the weights kept
    torch.testing.assert_close(ours.attn_weights, expected_weights)


def test_one_big_w_q_split_into_heads_equals_separate_per_head_matrices():
    d_model, heads = 512, 8
    d_k = d_model // heads
    x = torch.randn(3, d_model)  # 早上好: 3 tokens
    w_q = torch.randn(d_model, d_model)
    split = (x @ w_q).view(3, heads, d_k).transpose(0, 1)  # [H, 3, d_k]
    per_head = torch.stack([x @ w_q[:, h * d_k:(h + 1) * d_k] for h in range(heads)])  # H × (3, 512)·(512, 64)
    torch.testing.assert_close(split, per_head)


@pytest.mark.parametrize("d_model,heads,d_ff,layers,seed", [(32, 4, 64, 1, 0), (48, 6, 96, 2, 1), (64, 2, 128, 3, 2)])
def test_model_equals_nn_transformer_at_real_tokens(d_model, heads, d_ff, layers, seed):
    torch.manual_seed(seed)
    cfg = wt.ModelConfig(src_vocab_size=30, tgt_vocab_size=25, d_model=d_model, num_heads=heads, d_ff=d_ff,
                         num_layers=layers, max_len=50, dropout=0.0)
    model = wt.Transformer(cfg).eval()
    ref = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=0.0, batch_first=True).eval()
    wt.copy_torch_transformer(model, ref)
    src = ragged_ids([7, 5, 2, 6], 7, 30)
    tgt = ragged_ids([5, 1, 4, 3], 5, 25)
    with torch.no_grad():
        ours = model.decode(tgt, model.encode(src), src)
        theirs = ref(model.src_embed(src), model.tgt_embed(tgt),
                     tgt_mask=torch_causal_blocked(5),
                     src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0)
    real = tgt != 0
    torch.testing.assert_close(ours[real], theirs[real], atol=1e-5, rtol=1e-5)
    head = nn.Linear(d_model, 25)  # a plain linear layer with the head's weights: logits, not probabilities
    head.load_state_dict(model.output_head.proj.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt)[real], head(theirs)[real], atol=1e-5, rtol=1e-5)


def test_copy_torch_transformer_rejects_other_sizes(small_cfg):
    ref = nn.Transformer(32, 2, 2, 2, 64, batch_first=True)
    with pytest.raises(ValueError, match="sizes differ"):
        wt.copy_torch_transformer(wt.Transformer(small_cfg), ref)
    with pytest.raises(ValueError, match="batch_first=True"):
        wt.copy_torch_transformer(wt.Transformer(small_cfg), nn.Transformer(32, 4, 2, 2, 64))


def test_forward_is_output_head_of_decode_of_encode(small_cfg):
    model = wt.Transformer(small_cfg).eval()
    src, tgt = torch.randint(1, 23, (2, 6)), torch.randint(1, 19, (2, 3))
    with torch.no_grad():
        logits = model(src, tgt)
        torch.testing.assert_close(logits, model.output_head(model.decode(tgt, model.encode(src), src)))
    assert logits.shape == (2, 3, 19)


def test_output_head_gives_logits_h_times_w_transposed_plus_b(small_cfg):
    head = wt.Transformer(small_cfg).eval().output_head
    h = torch.randn(2, 3, 32)  # [B, L_tgt, D]
    weight, bias = head.proj.weight, head.proj.bias  # [V, D], [V]
    with torch.no_grad():
        logits = head(h)
        torch.testing.assert_close(logits, h @ weight.T + bias)  # [B, L_tgt, V]
    assert not torch.allclose(logits.exp().sum(-1), torch.ones(2, 3))  # scores, not (log-)probabilities


@pytest.mark.parametrize("position", [1, 3, 4])
def test_changing_target_token_t_changes_no_output_before_t(small_cfg, position):
    model = wt.Transformer(small_cfg).eval()
    src = torch.randint(1, 23, (2, 6))
    tgt = torch.randint(1, 19, (2, 5))
    changed = tgt.clone()
    changed[:, position] = tgt[:, position] % 18 + 1  # another real (non-PAD) token
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(after[:, :position], before[:, :position])  # the past cannot see the future
    assert not torch.allclose(after[:, position:], before[:, position:])  # ... while t itself and later do


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding and causal", "a fully blocked row"])
def test_fused_attention_equals_the_written_out_path(kv_heads, masking):
    """Training runs PyTorch's fused kernel, figures and traces the written-out path: the same context, masks
    (True = may attend), grouped K/V heads and fully blocked rows (finite, the mean of the values) included."""
    torch.manual_seed(0)
    attention = wt.MultiHeadAttention(32, 4, dropout=0.3, num_kv_heads=kv_heads).eval()  # eval: dropout off
    x, memory = torch.randn(3, 6, 32), torch.randn(3, 5, 32)
    ids = ragged_ids([6, 4, 2], 6, 9)
    masks = {"none": None, "padding": wt.padding_mask(ids, 0), "causal": wt.causal_mask(6),
             "padding and causal": wt.padding_mask(ids, 0) & wt.causal_mask(6),
             # padded queries (rows) of sentences 2 and 3 may attend to nothing: [B, 1, L_q, L_k]
             "a fully blocked row": (ids != 0)[:, None, :, None].expand(3, 1, 6, 6)}
    mask = masks[masking]
    for key in (x, memory) if masking == "none" else (x,):
        fused = attention(x, key, key, mask)
        assert attention.attn_weights is None  # the fused kernel made none
        with wt.keep_attention_weights(attention):
            written = attention(x, key, key, mask)
        assert attention.attn_weights is not None and torch.isfinite(fused).all()
        torch.testing.assert_close(fused, written, rtol=1e-5, atol=1e-6)

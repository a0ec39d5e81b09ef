"""The "why"s notebooks 01-03 demonstrate, checked as package behaviour.

02: a straight view to [B, H, L, d_k] has the right shape and the wrong heads; without ÷√d_k the
score spread grows as √d_k and softmax rows go one-hot. 03: PyTorch's three mask conventions give
our output; -inf turns a fully blocked row into NaN where ours stays finite; -1e9 is not a float16.
01: the embedding's starting scale, times √D, gives a vector the size of a PE row.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import walkthrough as wt
from walkthrough.classroom.viz import NEAR_ONE_HOT, softmax_saturation

BATCH, LENGTH, D_MODEL, HEADS = 2, 5, 32, 4
D_K = D_MODEL // HEADS


@pytest.fixture
def attention():
    torch.manual_seed(0)
    return wt.MultiHeadAttention(D_MODEL, HEADS).eval()


def test_model_split_gives_each_head_its_slice_of_every_token(attention):
    x = torch.randn(BATCH, LENGTH, D_MODEL)  # [B, L, D]
    heads = attention.split_heads(x)  # [B, H, L, d_k]
    for h in range(HEADS):
        for t in range(LENGTH):
            torch.testing.assert_close(heads[:, h, t], x[:, t, h * D_K:(h + 1) * D_K])


def test_straight_view_has_the_same_shape_and_scrambled_heads(attention):
    x = torch.randn(BATCH, LENGTH, D_MODEL)  # [B, L, D]
    right = attention.split_heads(x)  # [B, H, L, d_k]
    wrong = x.view(BATCH, HEADS, LENGTH, D_K)  # [B, H, L, d_k] by name only
    assert wrong.shape == right.shape
    assert not torch.equal(wrong, right)
    # head 0's second "token row" is really token 0's second piece of d_k features
    torch.testing.assert_close(wrong[:, 0, 1], x[:, 0, D_K:2 * D_K])


def test_wrong_split_changes_the_attention_output(attention):
    x = torch.randn(BATCH, LENGTH, D_MODEL)  # [B, L, D]
    q, k, v = attention.w_q(x), attention.w_k(x), attention.w_v(x)  # [B, L, D] each
    split = [t.view(BATCH, LENGTH, HEADS, D_K).transpose(1, 2) for t in (q, k, v)]  # [B, H, L, d_k] each
    context, _ = wt.scaled_dot_product_attention(*split)
    right = attention.w_o(context.transpose(1, 2).reshape(BATCH, LENGTH, D_MODEL))
    torch.testing.assert_close(right, attention(x, x, x))
    context, _ = wt.scaled_dot_product_attention(*(t.view(BATCH, HEADS, LENGTH, D_K) for t in (q, k, v)))
    wrong = attention.w_o(context.reshape(BATCH, LENGTH, D_MODEL))
    assert (wrong - attention(x, x, x)).abs().max() > 0.01


@pytest.mark.parametrize("d_k", [4, 64, 512])
def test_score_spread_is_sqrt_dk_without_the_scale_and_one_with_it(d_k):
    numbers = softmax_saturation(d_k, queries=256, keys=10, seed=0)
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(256, d_k, generator=generator), torch.randn(10, d_k, generator=generator)
    scores = q @ k.T  # [queries, keys], computed here as the reference
    assert numbers.std_unscaled == pytest.approx(scores.std().item(), rel=1e-5)
    assert numbers.std_unscaled == pytest.approx(math.sqrt(d_k), rel=0.15)
    assert numbers.std_scaled == pytest.approx(1.0, rel=0.15)
    unscaled = scores.softmax(-1).max(-1).values  # [queries]
    assert numbers.one_hot_unscaled == int((unscaled > NEAR_ONE_HOT).sum())


def test_without_the_scale_rows_go_one_hot_as_d_k_grows():
    counts = [softmax_saturation(d_k).one_hot_unscaled for d_k in (4, 64, 512)]
    assert counts == sorted(counts) and counts[0] < counts[-1]
    at_64 = softmax_saturation(64)
    assert at_64.one_hot_unscaled > at_64.queries / 2  # the notebook's "most rows near one-hot"
    assert at_64.one_hot_scaled == 0
    assert at_64.top_unscaled > 0.8 > 0.5 > at_64.top_scaled


def padded_causal(ids: torch.Tensor) -> torch.Tensor:
    """ids [B, L] -> our decoder mask [B, 1, L_q, L_k], True = may attend."""
    return wt.padding_mask(ids, 0) & wt.causal_mask(ids.size(1))


def as_mha_blocked(allowed: torch.Tensor, heads: int) -> torch.Tensor:
    """Ours [B, 1, L_q, L_k] -> nn.MultiheadAttention's [B·H, L_q, L_k], True = blocked."""
    batch, _, length, keys = allowed.shape
    return wt.to_blocked(allowed).expand(batch, heads, length, keys).reshape(batch * heads, length, keys)


def test_pytorch_three_mask_conventions_give_our_output():
    torch.manual_seed(0)
    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 0, 0, 0], [5, 0, 0, 0, 0]])  # [B, L]
    allowed = padded_causal(ids)  # [B, 1, L, L]
    reference = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()
    ours = wt.copy_torch_attention(wt.MultiHeadAttention(D_MODEL, HEADS).eval(), reference)
    x = torch.randn(3, 5, D_MODEL)  # [B, L, D]
    expected = ours(x, x, x, allowed)
    blocked = as_mha_blocked(allowed, HEADS)  # [B·H, L, L]
    additive = torch.zeros(blocked.shape).masked_fill(blocked, -math.inf)
    torch.testing.assert_close(reference(x, x, x, attn_mask=blocked)[0], expected)
    torch.testing.assert_close(reference(x, x, x, attn_mask=additive)[0], expected)
    heads = [ours.split_heads(w(x)) for w in (ours.w_q, ours.w_k, ours.w_v)]
    fused = F.scaled_dot_product_attention(*heads, attn_mask=allowed)  # [B, H, L, d_k]
    torch.testing.assert_close(ours.w_o(ours.merge_heads(fused)), expected)
    # the conventions really are opposite: our mask passed as if it were True = blocked changes the result
    inverted = reference(x, x, x, attn_mask=as_mha_blocked(~allowed, HEADS))[0]
    assert not torch.allclose(inverted.nan_to_num(), expected)


def test_fully_blocked_row_is_nan_with_minus_inf_and_zero_with_the_dtype_minimum():
    torch.manual_seed(0)
    scores = torch.randn(1, 1, 4, 4)
    nothing = torch.zeros(4, 4, dtype=torch.bool)  # every key blocked
    assert scores.masked_fill(~nothing, -math.inf).softmax(-1).isnan().all()
    q, k, v = torch.randn(3, 1, 2, 4, 8).unbind(0)
    allowed = padded_causal(torch.zeros(1, 4, dtype=torch.long))  # a sentence of padding only
    context, weights = wt.scaled_dot_product_attention(q, k, v, allowed)
    assert torch.equal(context, torch.zeros_like(context))  # it attends to nothing: no key's value leaks in
    assert torch.equal(weights, torch.zeros_like(weights))


def test_minus_1e9_is_not_a_float16_number():
    assert torch.finfo(torch.float16).max == 65504
    assert torch.tensor(-1e9).to(torch.float16).isinf()
    scores = torch.randn(2, 3, dtype=torch.float16)
    with pytest.raises(RuntimeError):
        scores.masked_fill(torch.ones(2, 3, dtype=torch.bool), -1e9)
    filled = scores.masked_fill(torch.ones(2, 3, dtype=torch.bool), torch.finfo(torch.float16).min)
    assert torch.isfinite(filled.float().softmax(-1)).all()


@pytest.mark.parametrize("d_model", [64, 512])
def test_scaled_token_vector_is_the_size_of_a_pe_row(d_model):
    torch.manual_seed(0)
    embed = wt.Embedding(vocab_size=1000, d_model=d_model, max_len=50, dropout=0.0)
    assert embed.token.weight.std().item() == pytest.approx(d_model ** -0.5, rel=0.05)
    ids = torch.arange(4, 1000)[None]  # [1, L]: every ordinary token once
    scaled = embed.token(ids) * math.sqrt(d_model)  # [1, L, D]: each feature about std 1
    assert scaled.std().item() == pytest.approx(1.0, rel=0.05)
    pe_row = wt.sinusoidal_table(50, d_model)[1]  # [D]: sin² + cos² = 1 per pair, so norm √(D/2)
    assert pe_row.norm().item() == pytest.approx(math.sqrt(d_model / 2), rel=1e-4)
    ratio = scaled.norm(dim=-1).mean().item() / pe_row.norm().item()
    assert 1.2 < ratio < 1.6  # same order: √D against √(D/2)

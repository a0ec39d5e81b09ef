from contextlib import nullcontext

import pytest
import torch
from torch import nn

import walkthrough as wt


def test_mask_shapes_and_convention():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    pad = wt.padding_mask(ids, 0)
    assert pad.shape == (2, 1, 1, 3) and pad.dtype == torch.bool
    assert pad[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    causal = wt.causal_mask(4)
    assert causal.shape == (4, 4)
    assert causal.tolist() == [[True, False, False, False], [True, True, False, False],
                               [True, True, True, False], [True, True, True, True]]
    assert wt.to_blocked(causal).tolist() == torch.triu(torch.ones(4, 4), diagonal=1).bool().tolist()
    combined = wt.decoder_self_mask(ids, 0)
    assert combined.shape == (2, 1, 3, 3)
    assert combined[1, 0].tolist() == [[True, False, False]] * 3


def test_fully_masked_row_attends_to_nothing_in_float16_and_float32():
    for dtype in (torch.float16, torch.float32):
        q = torch.randn(1, 1, 2, 4, dtype=dtype)
        mask = torch.zeros(1, 1, 1, 2, dtype=torch.bool)  # nothing may be attended to
        context, weights = wt.scaled_dot_product_attention(q, q, q, mask)
        assert torch.equal(weights, torch.zeros_like(weights)) and torch.equal(context, torch.zeros_like(context))


def test_fully_padded_source_row_and_bfloat16_model_give_finite_logits(small_cfg):
    model = wt.Transformer(small_cfg).eval()
    src = torch.tensor([[3, 4, 5], [0, 0, 0]])  # second sentence is all padding
    tgt = torch.tensor([[1, 6], [1, 7]])
    with torch.no_grad():
        assert torch.isfinite(model(src, tgt)).all()
        assert torch.isfinite(model.to(torch.bfloat16)(src, tgt)).all()


def test_causal_mask_is_pytorchs_subsequent_mask_read_as_may_attend():
    for length in (1, 2, 5, 9):
        blocked = torch.isinf(nn.Transformer.generate_square_subsequent_mask(length))  # True = blocked (PyTorch)
        assert torch.equal(wt.causal_mask(length), ~blocked)
        assert torch.equal(wt.to_blocked(wt.causal_mask(length)), blocked)


def test_causal_mask_last_rows_are_the_full_masks_last_rows():
    full = torch.nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.bool)  # PyTorch: True = blocked
    for queries in (1, 3, 6):
        torch.testing.assert_close(wt.causal_mask(6, queries=queries), ~full[6 - queries:])


def changed_at(ids: torch.Tensor, position: int, vocab: int) -> torch.Tensor:
    """ids with every row's token at ``position`` replaced by another id (pad becomes real, real may become pad)."""
    out = ids.clone()
    out[:, position] = (ids[:, position] + 1 + torch.arange(ids.size(0))) % vocab
    return out


@pytest.mark.parametrize("written_out", [False, True], ids=["fused", "written out"])
def test_a_later_token_never_changes_an_earlier_output_pad_positions_included(written_out):
    """Causality in both models, with pad ids anywhere (first position included): changing token j changes
    no output at a position before j. Before the fix, a query row whose keys were all pad read every key."""
    torch.manual_seed(0)
    gpt = wt.GPT(wt.GPTConfig(vocab_size=12, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16,
                              dropout=0.0)).eval()
    model = wt.Transformer(wt.ModelConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, num_heads=2, d_ff=32,
                                          num_layers=2, max_len=16, dropout=0.0)).eval()
    ids = torch.tensor([[0, 5, 0, 7, 3, 0], [0, 0, 4, 0, 0, 9], [2, 0, 0, 6, 1, 8]])  # pad_id 0 everywhere
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0], [0, 0, 0, 0]])  # the last sentence all padding
    runs = (lambda x: gpt(x), lambda x: model(src, x))
    with torch.no_grad(), wt.keep_attention_weights(gpt) if written_out else nullcontext(), \
            wt.keep_attention_weights(model) if written_out else nullcontext():
        for run in runs:
            before = run(ids)
            for j in range(1, ids.size(1)):
                after = run(changed_at(ids, j, 12))
                torch.testing.assert_close(after[:, :j], before[:, :j], rtol=0, atol=1e-6)


def test_every_attention_path_gives_a_blind_row_zero():
    """A query row that may see no key: 0 in the written-out, fused, flash and cached paths alike."""
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 2, 5, 4).unbind(0)
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    mask[0, :, :, :2] = False  # sentence 0: keys 0-1 blocked, so queries 0-1 see nothing
    written, _ = wt.scaled_dot_product_attention(q, k, v, mask)
    flash, _ = wt.flash_attention(q, k, v, mask, block_q=2, block_k=2)
    for out in (written, flash):
        assert torch.equal(out[0, :, :2], torch.zeros(2, 2, 4))
        torch.testing.assert_close(out, written)
    attention = wt.MultiHeadAttention(8, 2).eval()  # the module's own two paths: fused (the default) and written out
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        fused = attention(x, x, x, mask)
        with wt.keep_attention_weights(attention):
            written_out = attention(x, x, x, mask)
    for out in (fused, written_out):  # a row that reads nothing is W_o of zeros: W_o's bias
        assert torch.equal(out[0, :2], attention.w_o.bias.expand(2, 8))
    torch.testing.assert_close(fused, written_out)
    gpt = wt.GPT(wt.GPTConfig(vocab_size=12, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=16,
                              dropout=0.0)).eval()
    ids = torch.tensor([[0, 0, 5, 6]])  # two pad tokens first: rows 0-1 see nothing in the first layer
    with torch.no_grad():
        full, cache = gpt(ids), gpt.new_cache(1)
        cached = torch.cat([gpt(ids[:, t:t + 1], cache) for t in range(4)], dim=1)
    torch.testing.assert_close(cached, full)


def test_a_start_token_with_the_pad_id_is_real_and_pad_id_none_masks_nothing():
    """Marian's decoder starts with its pad id: the target's first token is real whatever its id. pad_id=None
    (GPT-2 has no pad token): every token is real, in the mask and in rotary positions."""
    tgt = torch.tensor([[0, 4, 0]])
    assert wt.decoder_self_mask(tgt, 0, start_token=True)[0, 0].tolist() == [[True, False, False],
                                                                            [True, True, False],
                                                                            [True, True, False]]
    assert wt.padding_mask(tgt, None).all()
    torch.manual_seed(0)
    gpt = wt.GPT(wt.GPTConfig(vocab_size=12, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=16,
                              dropout=0.0, pad_id=None)).eval()
    with torch.no_grad():
        padded, alone = gpt(torch.tensor([[0, 5, 6]])), gpt(torch.tensor([[5, 6]]))
    assert not torch.allclose(padded[:, 1:], alone)  # id 0 is a real token here: it is read, and takes position 0

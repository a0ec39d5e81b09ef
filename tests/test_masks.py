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

import pytest
import torch

import walkthrough as wt


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(num_heads=7), ValueError, r"d_model=512 is not divisible by num_heads=7.*pick num_heads from \[1, 2, 4, 8"),
    (dict(d_model=0), ValueError, "d_model must be at least 1"),
    (dict(num_layers=-1), ValueError, "num_layers must be at least 1"),
    (dict(d_ff=2.5), TypeError, "d_ff must be a whole number"),
    (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
    (dict(dropout=-0.1), ValueError, r"dropout must be in \[0, 1\)"),
    (dict(pad_id=30000), ValueError, r"pad_id must be a token id in \[0, 30000\)"),
])
def test_config_rejects_bad_sizes(kwargs, error, message):
    with pytest.raises(error, match=message):
        wt.ModelConfig(**kwargs)


@pytest.fixture
def model(small_cfg):
    return wt.Transformer(small_cfg).eval()


@pytest.mark.parametrize("src,error,message", [
    (torch.tensor([[1, 2, 23]]), ValueError, r"src holds token id 23, outside the vocabulary \[0, 23\)"),
    (torch.tensor([[1, -1]]), ValueError, "src holds token id -1"),
    (torch.tensor([[1.0, 2.0]]), TypeError, r"src must hold integer token ids.*src.long\(\)"),
    (torch.tensor([1, 2]), ValueError, r"src must have 2 dims \[B, L\].*unsqueeze\(0\)"),
    ([[1, 2]], TypeError, "src must be a torch tensor"),
    (torch.ones(1, 65, dtype=torch.long), ValueError, "sequence length 65 is longer than max_len=64"),
])
def test_encode_rejects_bad_ids(model, src, error, message):
    with pytest.raises(error, match=message):
        model.encode(src)


def test_batch_mismatch_is_named(model):
    with pytest.raises(ValueError, match="batch sizes differ: src has 2, tgt has 3"):
        model(torch.ones(2, 4, dtype=torch.long), torch.ones(3, 2, dtype=torch.long))
    memory = model.encode(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="batch sizes differ"):
        model.decode(torch.ones(3, 2, dtype=torch.long), memory, torch.ones(2, 4, dtype=torch.long))


def test_wrong_mask_is_named():
    q = torch.randn(2, 2, 3, 4)
    with pytest.raises(ValueError, match=r"mask shape \[2, 1, 1, 5\] does not broadcast to the scores \[2, 2, 3, 3\]"):
        wt.scaled_dot_product_attention(q, q, q, torch.ones(2, 1, 1, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be a bool tensor.*mask.bool\(\)"):
        wt.scaled_dot_product_attention(q, q, q, torch.ones(3, 3))


def test_causal_mask_rejects_bad_length():
    with pytest.raises(ValueError, match="length must be at least 1, got 0"):
        wt.causal_mask(0)

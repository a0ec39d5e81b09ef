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


@pytest.mark.parametrize("ids,error,message", [
    (torch.ones(1, 3, dtype=torch.uint8), TypeError, r"src must hold integer token ids \(int64\).*src.long\(\)"),
    (torch.ones(1, 0, dtype=torch.long), ValueError, "src is empty"),
    (torch.ones(0, 3, dtype=torch.long), ValueError, "src is empty"),
])
def test_encode_rejects_odd_ids(model, ids, error, message):
    with pytest.raises(error, match=message):
        model.encode(ids)


def test_empty_target_names_tgt(model):
    with pytest.raises(ValueError, match="tgt is empty"):
        model(torch.ones(1, 3, dtype=torch.long), torch.ones(1, 0, dtype=torch.long))


def test_attention_wants_three_dims():
    attention = wt.MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match=r"query must be a \[B, L, D\] tensor, got \[5, 16\].*unsqueeze\(0\)"):
        attention(torch.randn(5, 16), torch.randn(5, 16), torch.randn(5, 16))


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(sos_id=1.5), TypeError, "sos_id must be a whole-number token id, got 1.5"),
    (dict(eos_id=19), ValueError, r"eos_id must be a token id in \[0, 19\), got 19"),
    (dict(max_new_tokens=65), ValueError,
     "max_new_tokens=65 need positions up to 64, but the model has max_len=64"),
    (dict(max_new_tokens=0), ValueError, "max_new_tokens must be at least 1"),
])
def test_greedy_decode_checks_its_ids_before_any_work(model, kwargs, error, message):
    args = {"max_new_tokens": 5, "sos_id": 1, "eos_id": 2, **kwargs}
    with pytest.raises(error, match=message):
        wt.greedy_decode(model, torch.ones(2, 3, dtype=torch.long), **args)


def test_a_model_that_cannot_fit_is_refused_before_allocating():
    with pytest.raises(ValueError, match=r"would need .* GiB .* lower max_len"):
        wt.Transformer(wt.ModelConfig(max_len=10**9))
    with torch.device("meta"):  # shapes at any size stay possible
        wt.Transformer(wt.ModelConfig(max_len=10**9))


@pytest.mark.parametrize("kwargs,message", [
    (dict(activation="gelu"), "activation='relu'"),
    (dict(layer_norm_eps=1e-6), "layer_norm_eps=1e-5 and bias=True"),
    (dict(bias=False), "layer_norm_eps=1e-5 and bias=True"),
])
def test_load_torch_transformer_refuses_a_reference_that_computes_differently(small_cfg, kwargs, message):
    reference = torch.nn.Transformer(32, 4, 2, 2, 64, batch_first=True, **kwargs)
    with pytest.raises(ValueError, match=message):
        wt.load_torch_transformer(wt.Transformer(small_cfg), reference)


def test_gqa_head_counts_are_checked():
    with pytest.raises(ValueError, match=r"num_kv_heads=3 does not divide num_heads=8.*\[1, 2, 4, 8\]"):
        wt.MultiHeadAttention(64, 8, num_kv_heads=3)
    with pytest.raises(ValueError, match="d_k must be even, got d_k=3; d_k = d_model / num_heads"):
        wt.GPTConfig(vocab_size=10, d_model=12, num_heads=4, d_ff=8, num_layers=1, positions="rope")

"""The cost table against FLOPs counted by hand, and each part computing what its name says."""

import pytest
import torch

import walkthrough as wt
from walkthrough.trace import cost

B, L, D, H, D_FF = 3, 7, 64, 4, 96


@pytest.fixture
def cfg():
    return wt.ModelConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=D, num_heads=H, d_ff=D_FF, num_layers=1)


def test_flops_and_parameters_match_a_count_by_hand(cfg):
    by_part = {c.part: c for c in cost.encoder_layer_costs(cfg, batch=B, src_len=L)}
    projection = 2 * B * L * D * D  # one [B·L, D] x [D, D] matmul: a multiply and an add per term
    expected = {  # part: (parameters, matmul FLOPs)
        "Q, K, V, O projections": (4 * (D * D + D), 4 * projection),
        "scores Q·Kᵀ (∝ L²)": (0, 2 * B * H * L * L * (D // H)),  # [B, H, L, d_k] x [B, H, d_k, L]
        "softmax (∝ L²)": (0, 0),
        "weights·V (∝ L²)": (0, 2 * B * H * L * L * (D // H)),  # [B, H, L, L] x [B, H, L, d_k]
        "feed-forward (∝ L)": (D * D_FF + D_FF + D_FF * D + D, 2 * (2 * B * L * D * D_FF)),
        "2 × Add & Norm": (2 * 2 * D, 0),  # LayerNorm: a scale and a shift of D each
    }
    assert list(by_part) == list(expected)
    for part, (params, flops) in expected.items():
        assert by_part[part].params == params, part
        assert by_part[part].gflops * 1e9 == pytest.approx(flops), part
        assert by_part[part].ms is None


def test_each_part_computes_what_its_name_says(cfg):
    layer = wt.EncoderLayer(cfg).eval()
    x = torch.randn(B, L, D)
    attn = layer.self_attn

    def heads(linear):  # [B, L, D] -> [B, H, L, d_k], written out with the weights
        return (x @ linear.weight.T + linear.bias).reshape(B, L, H, D // H).permute(0, 2, 1, 3)
    q, k, v = heads(attn.w_q), heads(attn.w_k), heads(attn.w_v)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
    weights = torch.softmax(scores, dim=-1)
    with torch.no_grad():
        results = {name: run() for name, _, run in cost._parts(layer, x)}
        torch.testing.assert_close(results["scores Q·Kᵀ (∝ L²)"], scores)
        torch.testing.assert_close(results["softmax (∝ L²)"], weights)
        torch.testing.assert_close(results["weights·V (∝ L²)"], torch.einsum("bhqk,bhkd->bhqd", weights, v))
        torch.testing.assert_close(results["feed-forward (∝ L)"], layer.feed_forward(x))


def test_timed_costs_report_a_time_for_every_part_and_the_same_flops(cfg):
    untimed = cost.encoder_layer_costs(cfg, batch=B, src_len=L)
    timed = cost.encoder_layer_costs(cfg, batch=B, src_len=L, timed=True, repeats=1)
    assert [(c.part, c.params, c.gflops) for c in timed] == [(c.part, c.params, c.gflops) for c in untimed]
    assert all(c.ms is not None and c.ms >= 0 for c in timed)
    assert "share" in cost.format_costs(timed) and "share" not in cost.format_costs(untimed)


def test_costs_follow_the_block_options():
    """SwiGLU: a third D×d_ff matrix (params and FLOPs half again); RMSNorm: no shift; bias=False: no biases."""
    modern = wt.ModelConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=D, num_heads=H, d_ff=D_FF, num_layers=1,
                            activation="swiglu", norm="rms", bias=False)
    by_part = {c.part: c for c in cost.encoder_layer_costs(modern, batch=B, src_len=L)}
    assert by_part["Q, K, V, O projections"].params == 4 * D * D
    assert by_part["feed-forward (∝ L)"].params == 3 * D * D_FF
    assert by_part["feed-forward (∝ L)"].gflops * 1e9 == pytest.approx(3 * (2 * B * L * D * D_FF))
    assert by_part["2 × Add & Norm"].params == 2 * D  # RMSNorm: a scale only
    gqa = wt.GPTConfig(vocab_size=11, d_model=D, num_heads=H, num_kv_heads=2, d_ff=D_FF, num_layers=3, bias=False)
    assert cost.gqa_costs(gqa).attention_parameters == 2 * D * D + 2 * D * (2 * D // H)

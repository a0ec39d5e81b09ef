import math

import pytest
import torch

import walkthrough as wt


@pytest.mark.parametrize("max_len,d_model", [(50, 16), (9, 7), (30, 512)])
def test_pe_table_matches_the_formula_at_every_position_and_dim(max_len, d_model):
    table = wt.sinusoidal_table(max_len, d_model)
    assert table.shape == (max_len, d_model)
    for pos in range(max_len):
        for dim in range(d_model):
            angle = pos / 10000 ** (2 * (dim // 2) / d_model)  # dims 2i and 2i+1 share one frequency
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)  # interleaved: sin, cos, sin, ...
            assert math.isclose(table[pos, dim], expected, rel_tol=1e-4, abs_tol=1e-4), (pos, dim)


def test_pe_is_a_buffer_not_a_parameter(small_cfg):
    model = wt.Transformer(small_cfg)
    names = [n for n, _ in model.named_parameters()]
    assert "src_embed.token.weight" in names and not any("position" in n for n in names)
    assert not model.src_embed.position.pe.requires_grad


def test_embedding_scales_by_sqrt_d_model_and_adds_pe(small_cfg):
    embed = wt.Transformer(small_cfg).eval().src_embed
    ids = torch.tensor([[3, 4, 5]])
    expected = embed.token.weight[ids] * math.sqrt(32) + wt.sinusoidal_table(3, 32)
    torch.testing.assert_close(embed(ids), expected)
    assert embed(ids).shape == (1, 3, 32)

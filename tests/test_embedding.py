import math

import torch

import walkthrough as wt


def test_pe_table_matches_the_formula_and_is_a_buffer(small_cfg):
    table = wt.sinusoidal_table(50, 16)
    pos, i = 7, 3
    assert math.isclose(table[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / 16)), rel_tol=1e-5)
    assert math.isclose(table[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / 16)), rel_tol=1e-5)
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

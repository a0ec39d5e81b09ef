"""Notebook 18's explorer: the modern block's choices on the source articles' GPT, its numbers against formulas."""

import math

import pytest

from walkthrough.classroom import widgets
from walkthrough.model.config import parameter_count
from walkthrough.trace import cost

B, L = widgets.SIZES["batch"], widgets.GPT_LENGTH
CHOICES = [dict(), dict(activation="swiglu"), dict(norm="rms"), dict(positions="rope", rope_base=500000.0),
           dict(kv_heads=2), dict(tied=True),
           dict(norm="rms", activation="swiglu", positions="rope", rope_base=500000.0, kv_heads=2, tied=True)]


def expected_matmul_flops(cfg) -> int:
    """2 per multiply-add: the projections, Q·Kᵀ and weights·V (written out), the feed-forward, the output head."""
    d, h, d_k, kv = cfg.d_model, cfg.num_heads, cfg.d_k, cfg.kv_heads * cfg.d_k
    tokens = B * L
    ffn_matrices = 3 if cfg.activation == "swiglu" else 2
    per_layer = 2 * tokens * (2 * d * d + 2 * d * kv + ffn_matrices * d * cfg.d_ff) + 2 * 2 * B * h * L * L * d_k
    return cfg.num_layers * per_layer + 2 * tokens * d * cfg.vocab_size


@pytest.mark.parametrize("choice", CHOICES, ids=[",".join(c) or "source" for c in CHOICES])
def test_the_explorers_numbers_follow_each_choice(choice):
    cfg = widgets.modern_block_config(**choice)
    costs = cost.modern_block_costs(cfg, B, L)
    assert costs["parameters"] == parameter_count(cfg)
    assert costs["flops"] == expected_matmul_flops(cfg)
    assert costs["kv_cache_bytes"] == 2 * cfg.num_layers * cfg.kv_heads * cfg.d_k * 4 * B * L  # K and V, float32
    if cfg.positions == "rope":  # the slowest pair turns by base^(-(d_k - 2)/d_k) per token
        assert costs["rope_wavelength"] == pytest.approx(2 * math.pi * cfg.rope_base ** ((cfg.d_k - 2) / cfg.d_k))
    else:
        assert costs["rope_wavelength"] is None


def test_each_choice_changes_what_it_should_and_nothing_else():
    source = cost.modern_block_costs(widgets.modern_block_config(), B, L)

    def changed(**choice):
        costs = cost.modern_block_costs(widgets.modern_block_config(**choice), B, L)
        return {k for k in costs if costs[k] != source[k]}

    d, d_ff, layers, vocab = 512, 2048, 6, 30000
    swiglu = cost.modern_block_costs(widgets.modern_block_config(activation="swiglu"), B, L)
    assert swiglu["parameters"] - source["parameters"] == layers * (d * d_ff + d_ff)  # W_up and its bias per layer
    assert changed(norm="rms") == {"parameters"}  # RMSNorm drops LayerNorm's shift: no shape, no FLOP
    assert changed(kv_heads=2) == {"parameters", "flops", "kv_cache_bytes"}
    tied = cost.modern_block_costs(widgets.modern_block_config(tied=True), B, L)
    assert source["parameters"] - tied["parameters"] == vocab * d  # one [V, D] matrix fewer
    low, high = (cost.modern_block_costs(widgets.modern_block_config(positions="rope", rope_base=base), B, L)
                 for base in (10000.0, 500000.0))
    assert {k for k in low if low[k] != high[k]} == {"rope_wavelength"}  # the base changes angles, not a count


def test_the_explorer_shows_the_gate_and_up_rows_and_answers_a_bad_choice_in_one_line():
    box = widgets.modern_block_explorer()
    assert "FFN hidden, ReLU" in box.text() and "FFN gate" not in box.text()
    box.control("activation").value = "swiglu"
    assert "FFN gate, SiLU(X·W_1)" in box.text() and "FFN up, X·W_up" in box.text()
    assert "58,529,072" in box.text()  # 52,225,328 + 6 × (512 · 2048 + 2048)
    box.control("kv_heads").value = 3
    assert "num_kv_heads=3 does not divide num_heads=8" in box.text() and "Traceback" not in box.text()
    box.control("kv_heads").value = 2
    box.control("positions").value = "rope"
    assert "47,117 tokens" in box.text()

"""Parameter counts against the paper's Table 3, and one matrix shared three ways (paper §3.4)."""

import dataclasses

import pytest
import torch
from torch import nn

import walkthrough as wt


def parameters(cfg) -> int:
    with torch.device("meta"):  # nothing allocated: the big model costs nothing to count
        model = wt.Transformer(cfg)
    return sum(p.numel() for p in model.parameters())  # a shared matrix is counted once


def test_paper_base_at_the_source_articles_vocabulary():
    d, f, v, n = 512, 2048, 30000, 6
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    norm = 2 * d
    encoder = n * (attention + ffn + 2 * norm) + norm
    decoder = n * (2 * attention + ffn + 3 * norm) + norm
    by_hand = 2 * v * d + encoder + decoder + (d * v + v)
    assert parameters(wt.ModelConfig.paper_base()) == by_hand == 90_250_544


@pytest.mark.parametrize("make,paper_millions", [(wt.ModelConfig.paper_base, 65), (wt.ModelConfig.paper_big, 213)])
def test_shared_embeddings_reproduce_table_3(make, paper_millions):
    cfg = make(src_vocab_size=37000, tgt_vocab_size=37000, share_embeddings=True)
    assert abs(parameters(cfg) / 1e6 - paper_millions) / paper_millions < 0.04


def test_shared_matrix_is_one_tensor_and_trains_as_one():
    cfg = wt.ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                         max_len=16, dropout=0.0, share_embeddings=True)
    model = wt.Transformer(cfg)
    shared = model.src_embed.token.weight
    assert model.tgt_embed.token.weight is shared and model.output_head.proj.weight is shared
    src, tgt = torch.randint(1, 20, (3, 5)), torch.randint(1, 20, (3, 4))
    wt.sequence_loss(model(src, tgt), tgt, 0).backward()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = shared.detach().clone()
    optimizer.step()
    assert not torch.equal(before, shared) and model.output_head.proj.weight is model.tgt_embed.token.weight


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match="share_embeddings=True needs one vocabulary"):
        wt.ModelConfig(src_vocab_size=100, tgt_vocab_size=90, share_embeddings=True)


def test_weights_load_from_nn_transformer_with_shared_embeddings():
    cfg = wt.ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32, num_layers=2,
                         max_len=16, dropout=0.0, share_embeddings=True)
    model = wt.Transformer(cfg).eval()
    reference = nn.Transformer(16, 2, 2, 2, 32, dropout=0.0, batch_first=True).eval()
    wt.copy_torch_transformer(model, reference)
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 20, (2, 3))
    with torch.no_grad():
        ours = model.decode(tgt, model.encode(src), src)
        theirs = reference(model.src_embed(src), model.tgt_embed(tgt),
                           tgt_mask=nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.bool))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_seed_example_is_gone_paper_base_has_the_articles_sizes():
    assert not hasattr(wt.ModelConfig, "seed_example")  # a 0.x package: the old name went, not deprecated
    assert wt.ModelConfig.paper_base() == wt.ModelConfig(src_vocab_size=30000, tgt_vocab_size=30000, d_model=512,
                                                         num_heads=8, d_ff=2048, num_layers=6)


OPTIONS = [dict(), dict(norm="rms"), dict(activation="swiglu"), dict(activation="gelu_tanh", bias=False),
           dict(positions="learned", share_embeddings=True), dict(final_norm=False, norm_first=True),
           dict(positions="rope", norm="rms", activation="swiglu", bias=False, rope_base=500000.0),
           dict(positions="sinusoidal_halves", scale_embeddings=False, activation="silu")]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "paper")
def test_parameter_count_follows_every_option_in_both_models(options):
    """config.parameter_count, a formula, equals the built model's own count for each option (and GQA)."""
    from walkthrough.model.config import parameter_count
    model_cfg = wt.ModelConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=16, num_heads=4, d_ff=24, num_layers=2,
                               max_len=30, **options)
    gpt_cfg = wt.GPTConfig(vocab_size=50, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=30,
                           **options)
    assert parameter_count(model_cfg) == parameters(model_cfg)
    with torch.device("meta"):
        gpt = wt.GPT(gpt_cfg)
    assert parameter_count(gpt_cfg) == sum(p.numel() for p in gpt.parameters())
    assert wt.memory.parameter_tensors(model_cfg) == len(list(wt.Transformer(model_cfg).parameters()))


def test_options_change_the_count_by_what_they_add():
    """The differences themselves, by hand: SwiGLU adds one D×d_ff matrix and its bias per FFN, RMSNorm drops
    each norm's shift, learned positions add a [max_len, D] table per embedding, no bias drops every shift."""
    from walkthrough.model.config import parameter_count
    base = wt.GPTConfig(vocab_size=50, d_model=16, num_heads=4, d_ff=24, num_layers=2, max_len=30)
    count = lambda **changes: parameter_count(dataclasses.replace(base, **changes))  # noqa: E731
    norms = 2 * 2 + 1  # two per layer and the final one
    assert count(activation="swiglu") - count() == 2 * (16 * 24 + 24)
    assert count() - count(norm="rms") == norms * 16
    assert count(positions="learned") - count() == 30 * 16
    assert count(share_embeddings=True) == count() - 50 * 16
    linears = 2 * (4 * 16 + 24 + 16)  # per layer: Q, K, V, O; W_1; W_2
    assert count() - count(bias=False) == linears + norms * 16 + 50  # + the LayerNorm shifts and the head's bias


def test_a_default_config_reads_as_before_and_a_changed_option_shows():
    assert repr(wt.ModelConfig()) == ("ModelConfig(src_vocab_size=30000, tgt_vocab_size=30000, d_model=512, "
                                      "num_heads=8, "
                                      "d_ff=2048, num_layers=6, max_len=5000, dropout=0.1, pad_id=0, "
                                      "share_embeddings=False)")
    assert repr(wt.GPTConfig(norm="rms", share_embeddings=True)).endswith(
        "positions='rope', norm_first=True, share_embeddings=True, norm='rms')")

"""Parameter counts against the paper's Table 3, and one matrix shared three ways (paper §3.4)."""

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
    wt.load_torch_transformer(model, reference)
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

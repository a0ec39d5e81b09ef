import pytest
import torch

import walkthrough as wt


@pytest.fixture
def small_cfg():
    return wt.ModelConfig(src_vocab_size=23, tgt_vocab_size=19, d_model=32, num_heads=4, d_ff=64, num_layers=2,
                          max_len=64, dropout=0.0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)

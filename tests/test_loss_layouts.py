"""Notebook 06's claim: CrossEntropyLoss takes the logits flattened or as [B, V, L]; both are wt.sequence_loss."""

import pytest
import torch
import torch.nn.functional as F

import walkthrough as wt


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_sequence_loss_equals_cross_entropy_with_the_class_dim_second(smoothing):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=generator)  # [B, L, V]
    labels = torch.randint(1, 11, (3, 5), generator=generator)  # [B, L]
    labels[1:, 3:] = 0  # PAD
    unflattened = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=0, label_smoothing=smoothing)
    flattened = F.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1), ignore_index=0, label_smoothing=smoothing)
    torch.testing.assert_close(wt.sequence_loss(logits, labels, 0, smoothing=smoothing), unflattened)
    torch.testing.assert_close(unflattened, flattened)
    with_pad_counted = F.cross_entropy(logits.transpose(1, 2), labels, label_smoothing=smoothing)
    assert not torch.allclose(unflattened, with_pad_counted)  # the PAD positions really are left out


def test_pad_id_none_scores_every_position_id_0_included():
    """pad_id=None (GPT-2: no padding) scores every label, id 0 too; pad_id=0 leaves the 0s out. Each against
    PyTorch's cross-entropy over the positions it should score."""
    logits = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(0))  # [B, L, V]
    labels = torch.tensor([[0, 3, 0, 1], [2, 0, 4, 0]])  # [B, L]: half of them id 0
    every = F.cross_entropy(logits.reshape(-1, 5), labels.reshape(-1))
    real = labels.reshape(-1) != 0
    without_zeros = F.cross_entropy(logits.reshape(-1, 5)[real], labels.reshape(-1)[real])
    assert torch.allclose(wt.sequence_loss(logits, labels, pad_id=None), every)
    assert torch.allclose(wt.sequence_loss(logits, labels, pad_id=0), without_zeros)
    assert not torch.allclose(every, without_zeros)

"""Token ids -> vectors: a learned embedding table plus a fixed sinusoidal position signal."""

from __future__ import annotations

import math

import torch
from torch import nn

from .recording import record


def check_ids(ids: torch.Tensor, vocab_size: int, name: str) -> None:
    """Reject anything that is not a [B, L] tensor of integer ids in [0, vocab_size)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor of token ids, got {type(ids).__name__}; use torch.tensor(...)")
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}; convert with {name}.long()")
    if ids.dim() != 2:
        raise ValueError(
            f"{name} must have 2 dims [B, L] (batch, length), got shape {list(ids.shape)}; "
            f"for one sentence use {name}.unsqueeze(0)"
        )
    if ids.numel() and ids.device.type != "meta":
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"{name} holds token id {bad}, outside the vocabulary [0, {vocab_size}); "
                             f"check the tokeniser or raise the vocab size")


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same). Shape [max_len, D]."""
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])  # odd D: one cosine fewer
    return table


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table. A buffer, not a parameter: it moves with the model but never learns."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)  # [max_len, D]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.size(1)
        if length > self.pe.size(0):
            raise ValueError(f"sequence length {length} is longer than max_len={self.pe.size(0)}; "
                             f"raise max_len in ModelConfig or shorten the input")
        return x + self.pe[:length].to(x.dtype)  # [B, L, D] + [L, D] broadcasts over B


class Embedding(nn.Module):
    """ids [B, L] -> token vectors scaled by sqrt(d_model), plus PE, then dropout: [B, L, D].

    The scale is sqrt(d_model), as in the paper, so the learned vectors and the PE (values in [-1, 1])
    start at comparable sizes. (One seed scales by sqrt of the last dim of the ids, i.e. sqrt(L).)
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float):
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.token = nn.Embedding(vocab_size, d_model)  # the learned table [V, D]
        # Entries start at std 1/sqrt(D), as the paper's weights shared with the output layer do:
        # times sqrt(D) that is std 1, the same order as PE's values.
        nn.init.normal_(self.token.weight, std=d_model ** -0.5)
        self.position = PositionalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, name: str = "ids") -> torch.Tensor:
        check_ids(ids, self.vocab_size, name)
        record(f"{name} ids", ids, "B L", "token ids, one row per sentence")
        x = self.token(ids) * math.sqrt(self.d_model)  # [B, L, D]
        record("embedding", x, "B L D", "each id looked up in the [V, D] table, times sqrt(D)")
        x = self.position(x)  # [B, L, D]
        record("+ positional encoding", x, "B L D", "plus the fixed PE rows 0..L-1: same shape")
        return self.dropout(x)

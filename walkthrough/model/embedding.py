"""Token ids -> vectors: a learned embedding table plus a fixed sinusoidal position signal."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..checks import check_ids, check_positions
from ..recording import record


def sinusoidal_table(max_len: int, d_model: int, halves: bool = False) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same). Shape [max_len, D].

    ``halves``: the same numbers laid out sines first, then cosines (PE[pos, i] and PE[pos, ceil(D/2) + i]),
    as Marian (and tensor2tensor) store them.
    """
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])  # odd D: one cosine fewer
    return torch.cat((table[:, 0::2], table[:, 1::2]), dim=1) if halves else table


class PositionalEncoding(nn.Module):
    """Adds a table of positions: sinusoidal (a buffer: it moves with the model but never learns) or, with
    ``kind="learned"``, a [max_len, D] parameter (GPT-2's)."""

    def __init__(self, d_model: int, max_len: int, kind: str = "sinusoidal"):
        super().__init__()
        self.learned = kind == "learned"
        if self.learned:
            self.pe = nn.Parameter(torch.randn(max_len, d_model) * d_model ** -0.5)  # [max_len, D]
        else:
            self.register_buffer("pe", sinusoidal_table(max_len, d_model, kind == "sinusoidal_halves"),
                                 persistent=False)  # [max_len, D]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x [B, L, D] holding positions offset..offset+L-1 -> x + PE rows of those positions."""
        check_positions(x.size(1), offset, self.pe.size(0))
        return x + self.pe[offset:offset + x.size(1)].to(x.dtype)  # [B, L, D] + [L, D] broadcasts over B


class Embedding(nn.Module):
    """ids [B, L] -> token vectors scaled by sqrt(d_model), plus PE, then dropout: [B, L, D].

    The scale is sqrt(d_model), as in the paper, so the learned vectors and the PE (values in [-1, 1])
    start at comparable sizes. (One source article scales by sqrt of the last dim of the ids, i.e. sqrt(L).)
    ``positions``: the table added ("sinusoidal", "sinusoidal_halves", "learned"), or "rope": none, positions
    are left to attention (notebook 09). ``scale=False``: no sqrt(d_model) (GPT-2 and Llama do not scale).
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float, positions: str = "sinusoidal",
                 scale: bool = True):
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_len = max_len
        self.scaled = scale
        self.scale = math.sqrt(d_model) if scale else 1.0
        self.token = nn.Embedding(vocab_size, d_model)  # the learned table [V, D]
        # Entries start at std 1/sqrt(D) (the scale of a weight shared with a D-input output layer):
        # times sqrt(D) that is std 1, the same order as PE's values.
        nn.init.normal_(self.token.weight, std=d_model ** -0.5)
        self.position = None if positions == "rope" else PositionalEncoding(d_model, max_len, positions)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, offset: int = 0, checked: bool = False) -> torch.Tensor:
        """ids [B, L] at positions offset..offset+L-1 (offset > 0 when decoding with a cache) -> [B, L, D].
        ``checked``: the model calling it has checked the ids and positions on entry; alone, it checks them."""
        if not checked:
            check_ids(ids, self.vocab_size, "ids", self.max_len, offset)
        x = record("embedding" if self.scaled else "embedding_unscaled",
                   self.token(record("ids", ids)) * self.scale)  # [B, L, D]
        if self.position is not None:
            x = record("learned_positions" if self.position.learned else "positions",
                       self.position(x, offset))  # [B, L, D]
        return self.dropout(x)

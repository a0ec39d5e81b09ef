"""The two sublayers besides attention (feed-forward, Add & Norm) and the layers built from them."""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention
from .recording import record


class FeedForward(nn.Module):
    """Position-wise: the same D -> d_ff -> D network applied to every token on its own."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.linear1(x))  # [B, L, d_ff]
        record("FFN hidden, ReLU", hidden, "B L d_ff", "each token widened to d_ff features")
        out = self.linear2(self.dropout(hidden))  # [B, L, D]
        record("FFN out", out, "B L D", "back to D features")
        return out


class AddNorm(nn.Module):
    """Post-norm residual: LayerNorm(x + dropout(sublayer output)).

    LayerNorm normalises each token's D features to mean 0, variance 1, then applies a learned
    scale and shift (two vectors of D).
    """

    def __init__(self, d_model: int, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        out = self.norm(x + self.dropout(sublayer_out))  # [B, L, D]
        record("Add & Norm", out, "B L D", "residual sum, then LayerNorm over each token's D")
        return out


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the FFN, each followed by Add & Norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.add_norm1 = AddNorm(d_model, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.add_norm2 = AddNorm(d_model, dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """x [B, L_src, D], src_mask [B, 1, 1, L_src] -> [B, L_src, D]."""
        x = self.add_norm1(x, self.self_attn(x, x, x, src_mask))
        return self.add_norm2(x, self.feed_forward(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder's memory, then the FFN."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.add_norm1 = AddNorm(d_model, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.add_norm2 = AddNorm(d_model, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.add_norm3 = AddNorm(d_model, dropout)

    def forward(self, y: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        """y [B, L_tgt, D], memory [B, L_src, D], tgt_mask [B, 1, L_tgt, L_tgt],
        src_mask [B, 1, 1, L_src] -> [B, L_tgt, D]."""
        y = self.add_norm1(y, self.self_attn(y, y, y, tgt_mask))
        y = self.add_norm2(y, self.cross_attn(y, memory, memory, src_mask))  # Q from y, K and V from memory
        return self.add_norm3(y, self.feed_forward(y))

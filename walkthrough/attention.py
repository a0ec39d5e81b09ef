"""Scaled dot-product attention, written out, and multi-head attention around it."""

from __future__ import annotations

import math

import torch
from torch import nn

from .masks import check_mask
from .recording import record


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / sqrt(d_k)) V, returning (context [..., L_q, d_v], weights [..., L_q, L_k]).

    q [B, H, L_q, d_k], k [B, H, L_k, d_k], v [B, H, L_k, d_v]; mask bool (True = may attend),
    broadcastable to [B, H, L_q, L_k]. Blocked scores become the dtype's most negative finite
    number: -inf would turn a fully blocked row into NaN, and -1e9 overflows float16.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, H, L_q, L_k]
    record("scores Q·Kᵀ/√d_k", scores, "B H L_q L_k", "how well each query matches each key")
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)  # keep where True
    weights = scores.softmax(dim=-1)  # [B, H, L_q, L_k], each row sums to 1
    record("attention weights", weights, "B H L_q L_k", "softmax over keys: each row sums to 1")
    kept = weights if dropout is None else dropout(weights)
    context = kept @ v  # [B, H, L_q, d_v]
    record("context = weights·V", context, "B H L_q d_k", "per head, a weighted mix of value vectors")
    return context, weights


class MultiHeadAttention(nn.Module):
    """H heads of attention in one go, with one D×D matrix each for Q, K, V and the output.

    One D×D W_q split into H column blocks is the same as H separate D×d_k matrices: the split
    is a ``view``, not a new computation. ``attn_weights`` keeps the last weights for plotting.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}; "
                             f"pick a head count that divides d_model")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.attn_weights: torch.Tensor | None = None

    def split_heads(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """[B, L, D] -> view [B, L, H, d_k] -> transpose [B, H, L, d_k]: heads become a batch dim."""
        batch, length, _ = x.shape
        x = x.view(batch, length, self.num_heads, self.d_k)  # [B, L, H, d_k]
        record(f"{name} view", x, "B L H d_k", "the D features cut into H heads of d_k")
        x = x.transpose(1, 2)  # [B, H, L, d_k]
        record(f"{name} transpose", x, "B H L d_k", "heads moved next to batch: one matmul for all")
        return x

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H, L, d_k] -> transpose [B, L, H, d_k] -> view [B, L, D] (contiguous first: view needs it)."""
        batch, _, length, _ = x.shape
        x = x.transpose(1, 2)  # [B, L, H, d_k]
        record("context transpose", x, "B L H d_k", "heads back beside each other, per token")
        x = x.contiguous().view(batch, length, self.num_heads * self.d_k)  # [B, L, D]
        record("heads merged", x, "B L D", "H heads of d_k concatenated back to D")
        return x

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """query [B, L_q, D], key/value [B, L_k, D], mask -> [B, L_q, D]."""
        if query.size(0) != key.size(0):
            raise ValueError(f"query batch {query.size(0)} and key batch {key.size(0)} differ: "
                             f"source and target batches must hold the same sentences")
        q = self.w_q(query)  # [B, L_q, D]
        record("Q = X·W_q", q, "B L_q D", "queries, one D×D projection for all heads")
        k = self.w_k(key)  # [B, L_k, D]
        record("K = X·W_k", k, "B L_k D", "keys")
        v = self.w_v(value)  # [B, L_k, D]
        record("V = X·W_v", v, "B L_k D", "values")
        q, k, v = self.split_heads(q, "Q"), self.split_heads(k, "K"), self.split_heads(v, "V")
        context, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)  # [B, H, L_q, d_k]
        self.attn_weights = weights.detach()
        out = self.w_o(self.merge_heads(context))  # [B, L_q, D]
        record("output W_o", out, "B L_q D", "mixes the heads' results back into D features")
        return out

"""Scaled dot-product attention, written out, and multi-head attention around it."""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import check_heads, check_rope_pairs, check_same_batch
from .embedding import apply_rope
from .masks import check_mask
from .recording import record
from .steps import ONE_KV_HEAD_PER_HEAD


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
    record("scores", scores)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)  # keep where True
    weights = scores.softmax(dim=-1)  # [B, H, L_q, L_k], each row sums to 1
    record("weights", weights)
    kept = weights if dropout is None else dropout(weights)
    context = kept @ v  # [B, H, L_q, d_v]
    record("context", context)
    return context, weights


_SPLIT_STEPS = {"Q": ("q_view", "q_transpose", None), "K": ("k_view", "k_transpose", "k_grouped"),
                "V": ("v_view", "v_transpose", "v_grouped")}


class KVCache:
    """The keys and values one attention layer has already made, kept between decoding steps.

    ``grows=True`` (self-attention): each step appends the new position's K and V, so both are
    [B, H_kv, t, d_k] after t steps. ``grows=False`` (cross-attention): K and V of the encoder memory,
    [B, H_kv, L_src, d_k], made at the first step and reused unchanged: the memory never changes.
    """

    def __init__(self, grows: bool):
        self.grows = grows
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(2)


class MultiHeadAttention(nn.Module):
    """H heads of attention in one go: W_q is one D×D matrix, W_k and W_v are D×(H_kv·d_k), W_o is D×D.

    One D×D W_q split into H column blocks is the same as H separate D×d_k matrices: the split
    is a ``view``, not a new computation. ``num_kv_heads`` = H_kv < H is grouped-query attention: each
    group of H / H_kv query heads shares one K/V head (1 = multi-query attention); None means H_kv = H.
    ``rope`` rotates Q and K by their positions (notebook 09). ``attn_weights`` keeps the last weights.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, num_kv_heads: int | None = None,
                 rope: bool = False):
        super().__init__()
        check_heads(d_model, num_heads, num_kv_heads)
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.d_k = d_model // num_heads
        if rope:
            check_rope_pairs(self.d_k)
        self.rope = rope
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, self.num_kv_heads * self.d_k)
        self.w_v = nn.Linear(d_model, self.num_kv_heads * self.d_k)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.attn_weights: torch.Tensor | None = None

    @property
    def dim_names(self) -> dict[str, str]:
        """How a trace of this layer alone names its dims: H_kv is H without grouped-query attention."""
        return ONE_KV_HEAD_PER_HEAD if self.num_kv_heads == self.num_heads else {}

    def split_heads(self, x: torch.Tensor, name: str, heads: int | None = None) -> torch.Tensor:
        """[B, L, heads·d_k] -> view [B, L, heads, d_k] -> transpose [B, heads, L, d_k]: heads become a batch dim."""
        heads = self.num_heads if heads is None else heads
        batch, length, _ = x.shape
        x = x.view(batch, length, heads, self.d_k)  # [B, L, H, d_k]
        record(_SPLIT_STEPS.get(name, _SPLIT_STEPS["Q"])[0], x)
        x = x.transpose(1, 2)  # [B, H, L, d_k]
        record(_SPLIT_STEPS.get(name, _SPLIT_STEPS["Q"])[1], x)
        return x

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H, L, d_k] -> transpose [B, L, H, d_k] -> view [B, L, D] (contiguous first: view needs it)."""
        batch, _, length, _ = x.shape
        x = x.transpose(1, 2)  # [B, L, H, d_k]
        record("context_transpose", x)
        x = x.contiguous().view(batch, length, self.num_heads * self.d_k)  # [B, L, D]
        record("merged", x)
        return x

    def expand_kv(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """[B, H_kv, L_k, d_k] -> [B, H, L_k, d_k]: K/V head j serves query heads j·g .. j·g+g-1 (g = H / H_kv)."""
        if self.num_kv_heads == self.num_heads:
            return x
        x = x.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)  # [B, H, L_k, d_k]
        record(_SPLIT_STEPS[name][2], x)
        return x

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None, cache: KVCache | None = None) -> torch.Tensor:
        """query [B, L_q, D], key/value [B, L_k, D], mask (True = may attend) -> [B, L_q, D].

        With a growing ``cache`` (self-attention while decoding), key/value hold only the new positions;
        their K and V are appended to the cache and the queries attend to all of it. With a fixed cache
        (cross-attention), K and V are made from key/value at the first call and reused after.
        """
        for name, x in (("query", query), ("key", key), ("value", value)):
            if not isinstance(x, torch.Tensor) or x.dim() != 3:
                got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(f"{name} must be a [B, L, D] tensor, got {got}; "
                                 f"for one sentence use {name}.unsqueeze(0)")
        check_same_batch(query=query, key=key, value=value)
        q = self.w_q(query)  # [B, L_q, D]
        record("q", q)
        if cache is not None:
            self._check_cache(cache, query.size(0))
        if cache is not None and not cache.grows and cache.k is not None:
            q = self.split_heads(q, "Q")  # [B, H, L_q, d_k]
            k, v = cache.k, cache.v  # the memory's K and V, made at the first step
        else:
            k = self.w_k(key)  # [B, L_k, H_kv·d_k]
            record("k", k)
            v = self.w_v(value)
            record("v", v)
            q = self.split_heads(q, "Q")  # [B, H, L_q, d_k]
            k = self.split_heads(k, "K", self.num_kv_heads)  # [B, H_kv, L_k, d_k]
            v = self.split_heads(v, "V", self.num_kv_heads)
            if self.rope:
                offset = len(cache) if cache is not None else 0  # the new positions come after the cached ones
                q, k = apply_rope(q, offset), apply_rope(k, offset)
                record("q_rotated", q)
                record("k_rotated", k)
            if cache is not None:
                if cache.grows and cache.k is not None:
                    k = torch.cat([cache.k, k], dim=2)  # [B, H_kv, t, d_k]: the past, then the new positions
                    v = torch.cat([cache.v, v], dim=2)
                cache.k, cache.v = k, v
        if cache is not None:
            record("k_cached", k)
        context, weights = scaled_dot_product_attention(
            q, self.expand_kv(k, "K"), self.expand_kv(v, "V"), mask, self.dropout)  # [B, H, L_q, d_k]
        self.attn_weights = weights.detach()
        out = self.w_o(self.merge_heads(context))  # [B, L_q, D]
        record("output", out)
        return out

    def _check_cache(self, cache: KVCache, batch: int) -> None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}; start one with model.new_cache(...)")
        if cache.k is None:
            return
        if cache.k.size(0) != batch:
            raise ValueError(f"the cache holds keys for a batch of {cache.k.size(0)} but this call has {batch}: "
                             f"start a new cache for each batch")
        if (cache.k.size(1), cache.k.size(3)) != (self.num_kv_heads, self.d_k):
            raise ValueError(f"the cache holds {cache.k.size(1)} K/V heads of {cache.k.size(3)} features, this "
                             f"attention makes {self.num_kv_heads} of {self.d_k}: the cache belongs to another "
                             f"model; start a new one")

"""Scaled dot-product attention, written out, and multi-head attention around it.

``MultiHeadAttention.forward`` is one attention call, top to bottom: project, split into heads, rotate (RoPE),
the cache, then either PyTorch's fused kernel or the same attention written out (scores, mask, softmax,
weights·V), merge the heads, W_o. ``record(step, tensor)`` names a tensor for a trace and hands it back.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_heads, check_mask, check_position_ids, check_rope_pairs, check_same_batch
from ..i18n import _
from ..recording import record
from ..steps import DIMS_WITHOUT_GQA
from .cache import KVCache
from .rope import rotate


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None, checked: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / sqrt(d_k)) V, returning (context [..., L_q, d_v], weights [..., L_q, L_k]).

    q [B, H, L_q, d_k], k [B, H, L_k, d_k], v [B, H, L_k, d_v]; mask bool (True = may attend),
    broadcastable to [B, H, L_q, L_k]. Blocked scores become the dtype's most negative finite
    number: -inf would turn a fully blocked row into NaN, and -1e9 overflows float16. A query row that
    may see no key attends to nothing: its weights are all 0 and its context is 0 (FlashAttention's
    convention), so it never reads a key it was denied, the future included. ``checked``: the caller (attention)
    has checked the mask; called alone, it checks it.
    """
    if mask is not None and not checked:  # the scores q and k make: [..., L_q, L_k]
        check_mask(mask, torch.Size((*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.size(-2), k.size(-2))))
    scores = record("scores", q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))  # [B, H, L_q, L_k]
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)  # keep where True
    weights = scores.softmax(dim=-1)  # [B, H, L_q, L_k], each row sums to 1
    if mask is not None:  # a row that may see no key attends to nothing: its weights are 0
        weights = torch.where(mask.any(-1, keepdim=True), weights, 0.0)
    record("weights", weights)
    kept = weights if dropout is None else dropout(weights)
    return record("context", kept @ v), weights  # [B, H, L_q, d_v]


def check_attention_inputs(attention: MultiHeadAttention, query, key, value, mask, cache, positions) -> None:
    """query [B, L_q, D], key/value [B, L_k, D] of one batch and the weights' dtype; mask bool and broadcastable
    to the scores; cache a KVCache that fits; positions None or [B, L_q] of whole numbers >= 0. Asked only when
    the layer is called alone: a model makes these inputs itself and checks its own on entry."""
    d_model, dtype = attention.w_q.in_features, attention.w_q.weight.dtype
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(_("{name} must be a [B, L, D] tensor, got {got}; for one sentence use {name}.unsqueeze(0)")
                .format(name=name, got=got))
        if x.size(-1) != d_model:
            raise ValueError(_("{name} must have D = {d_model} features (the layer's d_model), got {x_shape}").format(
                name=name, d_model=d_model, x_shape=list(x.shape)))
        if x.dtype != dtype:
            raise TypeError(_("{name} is {dtype} but the layer's weights are {dtype_}: convert it with "
                            "{name}.to({dtype_}) (or the model with model.to({dtype}))").format(
                                name=name, dtype=x.dtype, dtype_=dtype))
    check_same_batch(query=query, key=key, value=value)
    if cache is not None:
        if not isinstance(cache, KVCache):
            raise TypeError(_("cache must be a KVCache, got {type}; start one with "
                            "model.new_cache(...)").format(type=type(cache).__name__))
        cache.check(query.size(0), attention.num_kv_heads, attention.d_k)
    if mask is not None:
        keys = key.size(1) if cache is None else len(cache) if cache.has_memory_kv else key.size(1) + cache.offset
        check_mask(mask, torch.Size((query.size(0), attention.num_heads, query.size(1), keys)))
    if positions is not None:
        if not attention.rope:
            raise ValueError(_("positions are for rotary attention (rope=True); this layer's positions come from "
                               "the embedding: leave positions=None"))
        check_position_ids(positions, query.size(0), query.size(1))


@contextmanager
def keep_attention_weights(module: nn.Module):
    """Inside the block, every ``MultiHeadAttention`` in ``module`` keeps its last weights [B, H, L_q, L_k] in
    ``.attn_weights`` (for a figure); they stay there after the block. Outside, attention runs PyTorch's fused
    kernel, which never makes the weights, and ``.attn_weights`` is None."""
    layers = [part for part in module.modules() if isinstance(part, MultiHeadAttention)]
    before = [layer.keep_weights for layer in layers]
    for layer in layers:
        layer.keep_weights = True
    try:
        yield module
    finally:
        for layer, keep in zip(layers, before):
            layer.keep_weights = keep


class MultiHeadAttention(nn.Module):
    """H heads of attention in one go: W_q is one D×D matrix, W_k and W_v are D×(H_kv·d_k), W_o is D×D.

    One D×D W_q split into H column blocks is the same as H separate D×d_k matrices: the split
    is a ``view``, not a new computation. ``num_kv_heads`` = H_kv < H is grouped-query attention: each
    group of H / H_kv query heads shares one K/V head (1 = multi-query attention); None means H_kv = H.
    ``rope`` rotates Q and K by their positions (notebook 09), at ``rope_base``; ``bias``: the four
    projections have biases. ``keep_weights`` (set inside ``with keep_attention_weights(model):``, and by a
    trace) writes attention out and keeps the last weights in ``attn_weights``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, num_kv_heads: int | None = None,
                 rope: bool = False, bias: bool = True, rope_base: float = 10000.0):
        super().__init__()
        check_heads(d_model, num_heads, num_kv_heads)
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.grouped = self.num_kv_heads != num_heads  # grouped-query attention: fewer K/V heads than query heads
        self.d_k = d_model // num_heads
        if rope:
            check_rope_pairs(self.d_k)
        self.rope = rope
        self.rope_base = rope_base
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, self.num_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, self.num_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.keep_weights = False
        self.attn_weights: torch.Tensor | None = None

    @property
    def dim_names(self) -> dict[str, str]:
        """How a trace of this layer alone names its dims: H_kv is H without grouped-query attention."""
        return DIMS_WITHOUT_GQA if self.num_kv_heads == self.num_heads else {}

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None, cache: KVCache | None = None,
                positions: torch.Tensor | None = None, checked: bool = False) -> torch.Tensor:
        """query [B, L_q, D], key/value [B, L_k, D], mask (True = may attend) -> [B, L_q, D].

        With a growing ``cache`` (self-attention while decoding), key/value hold only the new positions;
        their K and V join the cache and the queries attend to all of it. With a fixed cache
        (cross-attention), K and V are made from key/value at the first call and reused after.
        ``positions`` [B, L_q] (rotary self-attention): each row's own positions of the new queries and
        keys (left-padded rows count from their first real token); None: offset, offset + 1, ... for all.
        ``checked``: the model calling it has made (and checked) every input; called alone, it checks them.
        """
        if not checked:
            check_attention_inputs(self, query, key, value, mask, cache, positions)
        start = 0 if cache is None else cache.offset  # the new rows' first position: after the cached ones
        q = self.split_heads(record("q", self.w_q(query)), "q")  # [B, L_q, D] -> [B, H, L_q, d_k]
        if self.rope:
            q = record("q_rotated", rotate(q, start, positions, self.rope_base))  # [B, H, L_q, d_k]
        if cache is not None and cache.has_memory_kv:  # cross-attention after its first step: the memory's K, V
            k, v = cache.k, cache.v  # [B, H_kv, L_src, d_k]
        else:
            k = self.split_heads(record("k", self.w_k(key)), "k")  # [B, L_k, H_kv·d_k] -> [B, H_kv, L_k, d_k]
            if self.rope:
                k = record("k_rotated", rotate(k, start, positions, self.rope_base))  # [B, H_kv, L_k, d_k]
            v = self.split_heads(record("v", self.w_v(value)), "v")  # [B, L_k, H_kv·d_k] -> [B, H_kv, L_k, d_k]
            if cache is not None:
                k, v = cache.update(k, v)  # [B, H_kv, t, d_k]: the earlier positions' first
        if cache is not None:
            record("k_cached", k)

        if not self.keep_weights:  # the fast path: PyTorch's fused kernel, no [L_q, L_k] weights made
            self.attn_weights = None
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.grouped,
                                                     dropout_p=self.dropout.p if self.training else 0.0)
        else:  # the same attention written out, its weights kept for a figure or a trace
            if self.grouped:  # each K/V head serves its group of query heads
                k, v = record("k_grouped", self.expand_kv(k)), record("v_grouped", self.expand_kv(v))
            # [B, H, L_q, d_k] and [B, H, L_q, L_k]; the mask was checked on entry
            context, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, checked=True)
            self.attn_weights = weights.detach()

        return record("output", self.w_o(self.merge_heads(context)))  # [B, L_q, D]

    def split_heads(self, x: torch.Tensor, step: str = "q") -> torch.Tensor:
        """[B, L, heads·d_k] -> view [B, L, heads, d_k] -> transpose [B, heads, L, d_k]: the heads beside the batch.
        ``step``: "q" (H heads) or "k"/"v" (H_kv heads), the name a trace records each step under."""
        batch, length, _features = x.shape
        heads = self.num_heads if step == "q" else self.num_kv_heads
        x = record(f"{step}_view", x.view(batch, length, heads, self.d_k))  # [B, L, heads, d_k]
        return record(f"{step}_transpose", x.transpose(1, 2))  # [B, heads, L, d_k]

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H, L, d_k] -> transpose [B, L, H, d_k] -> view [B, L, D] (contiguous first: view needs it)."""
        batch, _heads, length, _d_k = x.shape
        x = record("context_transpose", x.transpose(1, 2))  # [B, L, H, d_k]
        return record("merged", x.contiguous().view(batch, length, self.num_heads * self.d_k))  # [B, L, D]

    def expand_kv(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H_kv, L_k, d_k] -> [B, H, L_k, d_k]: K/V head j serves query heads j·g .. j·g+g-1 (g = H / H_kv)."""
        if self.num_kv_heads == self.num_heads:
            return x
        return x.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)  # [B, H, L_k, d_k]

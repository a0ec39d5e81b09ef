"""What a decoder keeps between decoding steps (notebook 08): each attention layer's keys and values, the ids so far.

A step either completes or leaves the cache as it was (``DecodingCache.step``): the tensors a cache holds
are never changed in place, only replaced, so going back is putting the old ones back.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from ..checks import check_ids
from ..i18n import _


class KVCache:
    """The keys and values one attention layer has already made, kept between decoding steps.

    ``grows=True`` (self-attention): each step appends the new positions' K and V, so both are
    [B, H_kv, t, d_k] after t positions. ``grows=False`` (cross-attention): K and V of the encoder memory,
    [B, H_kv, L_src, d_k], made at the first step and reused unchanged: the memory never changes.
    """

    def __init__(self, grows: bool):
        self.grows = grows
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(2)

    @property
    def has_memory_kv(self) -> bool:
        """A fixed cache after its first step: K and V come from here, key/value are not projected again."""
        return not self.grows and self.k is not None

    @property
    def offset(self) -> int:
        """The position of the new queries and keys: after the cached ones when growing; 0 for a fixed cache,
        whose keys are the memory's own positions, not earlier ones of the sequence being decoded."""
        return len(self) if self.grows else 0

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keep the new K, V [B, H_kv, n, d_k] (appended after the cached ones when growing) and return all kept."""
        if self.grows and self.k is not None:
            k = torch.cat([self.k, k], dim=2)  # [B, H_kv, t + n, d_k]: the past, then the new positions
            v = torch.cat([self.v, v], dim=2)
        self.k, self.v = k, v
        return k, v

    def check(self, batch: int, kv_heads: int, d_k: int) -> None:
        """Refuse a cache made for another batch or another attention layer's sizes."""
        if self.k is None:
            return
        if self.k.size(0) != batch:
            raise ValueError(_("the cache holds keys for a batch of {self_k_size_0} but this call has {batch}: "
                             "start a new cache for each batch").format(self_k_size_0=self.k.size(0), batch=batch))
        if (self.k.size(1), self.k.size(3)) != (kv_heads, d_k):
            raise ValueError(_("the cache holds {self_k_size_1} K/V heads of {self_k_size_3} features, this "
                             "attention makes {kv_heads} of {d_k}: the cache belongs to another model; start a "
                             "new one").format(
                                 self_k_size_1=self.k.size(1), self_k_size_3=self.k.size(3), kv_heads=kv_heads,
                                 d_k=d_k))


@dataclass
class DecoderLayerCache:
    """One decoder layer's caches: self-attention K/V grow by a position per step; cross-attention K/V stay."""

    self_attn: KVCache = field(default_factory=lambda: KVCache(grows=True))
    cross_attn: KVCache = field(default_factory=lambda: KVCache(grows=False))


class DecodingCache:
    """What incremental decoding keeps between steps, for one model and one batch.

    ``ids`` [B, t]: every token fed so far (for the padding mask); ``layers``: per decoder layer, the
    self-attention K/V (growing) and the cross-attention K/V (fixed). ``source``: a copy of the source ids
    the cross-attention K/V came from, so a cache is never used with another source, even one changed in
    place. Start one with ``model.new_cache(src)`` (encoder-decoder) or ``gpt.new_cache(batch)``.
    """

    def __init__(self, model: nn.Module, batch: int, source: torch.Tensor | None = None):
        if not isinstance(getattr(model, "decoder", None), nn.Module) or not hasattr(model.decoder, "layers"):
            raise TypeError(_("a DecodingCache belongs to a walkthrough Transformer or a GPT, got "
                            "{type}: start one with model.new_cache(src) (Transformer) or "
                            "model.new_cache(batch) (GPT)").format(type=type(model).__name__))
        self.model = model
        self.batch = batch
        # meta ids hold no values to compare: a traced step's source is left unchecked
        self.source = None if source is None or source.device.type == "meta" else source.clone()
        self.ids: torch.Tensor | None = None
        self.layers = [DecoderLayerCache() for _ in model.decoder.layers]

    def __len__(self) -> int:
        return 0 if self.ids is None else self.ids.size(1)

    def append(self, new_ids: torch.Tensor) -> torch.Tensor:
        """Add the new tokens [B, n] to those seen; returns every id so far [B, t + n]."""
        self.ids = new_ids if self.ids is None else torch.cat([self.ids, new_ids], dim=1)
        return self.ids

    @contextmanager
    def step(self):
        """One decoding step: if anything inside fails, every layer's K/V and the ids go back to before it."""
        kept = (self.ids, [(c.self_attn.k, c.self_attn.v, c.cross_attn.k, c.cross_attn.v) for c in self.layers])
        try:
            yield self
        except BaseException:
            self.ids = kept[0]
            for c, (k, v, ck, cv) in zip(self.layers, kept[1]):
                c.self_attn.k, c.self_attn.v, c.cross_attn.k, c.cross_attn.v = k, v, ck, cv
            raise

    def reorder(self, rows: torch.Tensor | list[int]) -> None:
        """Row i now continues old row ``rows[i]`` (beam search: the surviving beams; rows [B'] long ids, or a
        list of ints: the same index written by hand).

        The growing self-attention K/V [B', H_kv, t, d_k] and the ids [B', t] are gathered along the batch
        dim (``index_select``). The fixed cross-attention K/V are left alone when every row keeps a row of
        the same source (beams of one sentence: expanded once, never copied again), gathered otherwise; the
        source is gathered with them, so the next step is checked against (and masked by) row i's own source.
        """
        if isinstance(rows, (list, tuple)):
            if not all(isinstance(row, int) and not isinstance(row, bool) for row in rows):
                raise TypeError(_("rows must be whole-number row indices, got {rows!r}").format(rows=rows))
            device = self.ids.device if self.ids is not None else None
            rows = torch.tensor(rows, dtype=torch.long, device=device)
        if not isinstance(rows, torch.Tensor):
            raise TypeError(_("rows must be a tensor of long ids or a list of ints (one old row per new row), got "
                              "{type}").format(type=type(rows).__name__))
        if rows.dtype != torch.long or rows.dim() != 1 or rows.numel() != self.batch:
            raise ValueError(_("rows must be {batch} long ids (one old row per new row), got "
                             "{dtype} of shape {rows_shape}").format(
                                 batch=self.batch, dtype=rows.dtype, rows_shape=list(rows.shape)))
        if rows.numel() and not 0 <= int(rows.min()) <= int(rows.max()) < self.batch:
            raise ValueError(_("rows must be in [0, {batch}), got {rows_min_item}..{rows_max_item}").format(
                batch=self.batch, rows_min_item=rows.min().item(), rows_max_item=rows.max().item()))
        same_source = self.source is not None and torch.equal(self.source.index_select(0, rows), self.source)
        if self.ids is not None:
            self.ids = self.ids.index_select(0, rows)  # [B', t]
        if not same_source and self.source is not None:
            self.source = self.source.index_select(0, rows)  # [B', L_src]: row i's source, as its cross K/V
        for c in self.layers:
            caches = (c.self_attn,) if same_source else (c.self_attn, c.cross_attn)
            for kv in caches:
                if kv.k is not None:
                    kv.k, kv.v = kv.k.index_select(0, rows), kv.v.index_select(0, rows)  # [B', H_kv, t, d_k]


def check_step(model: nn.Module, ids: torch.Tensor, name: str, vocab_size: int, cache: DecodingCache | None,
               source: torch.Tensor | None = None) -> None:
    """A decoder's new ``ids`` [B, n] (called ``name``): of the vocabulary, at positions that fit max_len after the
    cached ones. ``cache``: None, or one from this model's ``new_cache``, for this batch and (an encoder-decoder's,
    ``source`` given) this source: another one would give silent nonsense. Both models' one check of a step."""
    if cache is not None and not isinstance(cache, DecodingCache):
        made_by = _("cache must come from model.new_cache(batch), got {type}") if source is None else \
            _("cache must come from model.new_cache(src), got {type}")
        raise TypeError(made_by.format(type=type(cache).__name__))
    check_ids(ids, vocab_size, name, model.cfg.max_len, 0 if cache is None else len(cache))
    if cache is None:
        return
    if cache.model is not model:
        raise ValueError(_("this cache was made by another model: start one with this model's new_cache(...)"))
    if ids.size(0) != cache.batch:
        raise ValueError(_("the cache was made for a batch of {batch} but the new tokens have "
                         "{new_ids_size_0} rows: start a new cache for each batch").format(
                             batch=cache.batch, new_ids_size_0=ids.size(0)))
    if cache.source is not None and (source is None or source.shape != cache.source.shape
                                     or not torch.equal(source, cache.source)):
        raise ValueError(_("the source changed since this cache was made: its cross-attention keys and values "
                         "belong to the old source; start a new cache with model.new_cache(src)"))

"""The encoder-decoder Transformer: the encoder stack and the model that joins embeddings, stacks and head."""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import nn

from ..checks import check_ids, check_same_batch
from ..i18n import _
from ..recording import record
from ..steps import DIMS_WITHOUT_GQA
from .cache import DecodingCache, check_step
from .config import ModelConfig
from .embedding import Embedding
from .layers import Decoder, DecoderLayer, EncoderLayer, OutputHead, final_norm, norm_step
from .masks import decoder_self_mask, padding_mask
from .memory_guard import check_fits_in_memory


class Encoder(nn.Module):
    """N encoder layers, then a final norm (as ``nn.TransformerEncoder`` with ``norm=``; none without final_norm)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = final_norm(cfg)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None, checked: bool = False) -> torch.Tensor:
        """x [B, L_src, D], src_mask [B, 1, 1, L_src] -> memory [B, L_src, D]. ``checked``: as attention's."""
        for layer in self.layers:
            x = layer(x, src_mask, checked)  # [B, L_src, D]
        return record(norm_step("memory", self.norm), x if self.norm is None else self.norm(x))


def check_decode_inputs(model: Transformer, tgt: torch.Tensor, memory: torch.Tensor | None, src: torch.Tensor,
                        cache: DecodingCache | None = None) -> None:
    """src and tgt ids, one target row per source row (``check_step``: tgt's positions and the cache); memory
    [B, L_src, D] in the weights' dtype (None: the forward makes it)."""
    check_ids(src, model.cfg.src_vocab_size, "src", model.cfg.max_len)
    if cache is None:
        check_ids(tgt, model.cfg.tgt_vocab_size, "tgt", model.cfg.max_len)
    else:
        check_step(model, tgt, "tgt", model.cfg.tgt_vocab_size, cache, src)
    if memory is None:
        return check_same_batch(src=src, tgt=tgt)
    if not isinstance(memory, torch.Tensor) or memory.shape[1:] != (src.size(1), model.cfg.d_model):
        got = list(memory.shape) if isinstance(memory, torch.Tensor) else type(memory).__name__
        raise ValueError(_("memory must be [B, L_src, D] = [B, {src_size_1}, {d_model}], got {got}; "
                         "pass model.encode(src)").format(src_size_1=src.size(1), d_model=model.cfg.d_model, got=got))
    check_same_batch(tgt=tgt, memory=memory, src=src)
    dtype = model.output_head.proj.weight.dtype
    if memory.dtype != dtype:
        raise TypeError(_("memory is {dtype} but the model's weights are {dtype_}: pass model.encode(src) "
                        "(or memory.to({dtype_}))").format(dtype=memory.dtype, dtype_=dtype))


class Transformer(nn.Module):
    """src ids [B, L_src], tgt ids [B, L_tgt] -> logits [B, L_tgt, V_tgt].

    Its public methods check their inputs once, on entry (``check_ids``, ``check_decode_inputs``), then run the
    unchecked ``_encode`` / ``_decode``, whose layers skip their own checks (``checked=True``). A model too large
    for this process (a mistyped ``max_len=10**9``) is refused before anything is allocated, with the estimate
    and the limit (``wt.memory_guard.check_fits_in_memory``), not left to a raw allocator error or a killed kernel.
    """

    dim_names = DIMS_WITHOUT_GQA  # how a trace names its dims: its K/V heads are its H heads

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise TypeError(_("cfg must be a walkthrough.ModelConfig, got {type}").format(type=type(cfg).__name__))
        check_fits_in_memory(cfg)
        self.cfg = cfg
        self.src_embed, self.tgt_embed = (
            Embedding(vocab, cfg.d_model, cfg.max_len, cfg.dropout, cfg.positions, cfg.scale_embeddings)
            for vocab in (cfg.src_vocab_size, cfg.tgt_vocab_size))
        self.encoder = Encoder(cfg)
        self.decoder = Decoder([DecoderLayer(cfg) for _ in range(cfg.num_layers)], final_norm(cfg))
        self.output_head = OutputHead(cfg.d_model, cfg.tgt_vocab_size, cfg.bias)
        if cfg.share_embeddings:  # paper §3.4: one [V, D] matrix, three uses
            self.tgt_embed.token.weight = self.src_embed.token.weight
            self.output_head.proj.weight = self.src_embed.token.weight

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src [B, L_src] -> memory [B, L_src, D]."""
        check_ids(src, self.cfg.src_vocab_size, "src", self.cfg.max_len)
        return self._encode(src)

    def new_cache(self, src: torch.Tensor) -> DecodingCache:
        """An empty cache for decoding the batch ``src`` [B, L_src] one token at a time."""
        if not isinstance(src, torch.Tensor):
            raise TypeError(_("new_cache(src) takes the source ids [B, L_src] the cache will decode, got "
                            "{type} (a GPT's cache takes a batch size: gpt.new_cache(batch))").format(
                                type=type(src).__name__))
        check_ids(src, self.cfg.src_vocab_size, "src", self.cfg.max_len)
        return DecodingCache(self, src.size(0), src)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: DecodingCache | None = None) -> torch.Tensor:
        """tgt [B, L_tgt], memory [B, L_src, D], src [B, L_src] (for its padding) -> [B, L_tgt, D].

        With a ``cache`` (from ``new_cache(src)``), tgt holds only the new positions, which sit after the
        ``len(cache)`` already decoded: their embeddings get those positions' PE rows. A step that fails
        leaves the cache as it was.
        """
        check_decode_inputs(self, tgt, memory, src, cache)
        return self._decode(tgt, memory, src, cache)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src [B, L_src], tgt [B, L_tgt] -> logits [B, L_tgt, V_tgt]."""
        check_decode_inputs(self, tgt, None, src)
        return self.output_head(self._decode(tgt, self._encode(src), src, None))

    def _encode(self, src: torch.Tensor) -> torch.Tensor:
        x = self.src_embed(src, checked=True)  # [B, L_src, D]
        return self.encoder(x, padding_mask(src, self.cfg.pad_id), checked=True)  # [B, L_src, D]

    def _decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
                cache: DecodingCache | None) -> torch.Tensor:
        with nullcontext() if cache is None else cache.step():  # a step that fails leaves the cache as it was
            y = self.tgt_embed(tgt, 0 if cache is None else len(cache), checked=True)  # [B, L_tgt, D]
            seen = tgt if cache is None else cache.append(tgt)  # [B, t]: every target id so far
            # [B, 1, L_tgt, t]: the first target token is the start token, real whatever its id
            tgt_mask = decoder_self_mask(seen, self.cfg.pad_id, tgt.size(1), start_token=True)
            src_mask = padding_mask(src, self.cfg.pad_id)  # [B, 1, 1, L_src]
            return self.decoder(y, memory, tgt_mask, src_mask, cache, checked=True)  # [B, L_tgt, D]

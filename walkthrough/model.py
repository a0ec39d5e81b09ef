"""The encoder-decoder Transformer: stacks, output head, the decoding cache, greedy decoding, PyTorch weights."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config import ModelConfig, check_fits_in_memory, check_positive_int, check_same_batch, check_token_id
from .embedding import Embedding
from .layers import DecoderLayer, DecoderLayerCache, EncoderLayer
from .masks import decoder_self_mask, padding_mask
from .recording import record
from .steps import ONE_KV_HEAD_PER_HEAD


class Encoder(nn.Module):
    """N encoder layers, then a final LayerNorm (as ``nn.TransformerEncoder`` with ``norm=``)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """x [B, L_src, D], src_mask [B, 1, 1, L_src] -> memory [B, L_src, D]."""
        for layer in self.layers:
            x = layer(x, src_mask)  # [B, L_src, D]
        memory = self.norm(x)
        record("memory", memory)
        return memory


class Decoder(nn.Module):
    """A stack of decoder layers, then a final LayerNorm. The GPT uses it with layers that have no cross-attention."""

    def __init__(self, layers: list[DecoderLayer], d_model: int, length: str = "L_tgt"):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = nn.LayerNorm(d_model)
        self.length = length  # the length dim's name in the trace: L_tgt here, L in a GPT

    def forward(self, y: torch.Tensor, memory: torch.Tensor | None, tgt_mask: torch.Tensor,
                src_mask: torch.Tensor | None = None, cache: DecodingCache | None = None) -> torch.Tensor:
        """y [B, L_tgt, D], memory [B, L_src, D] or None, masks as in ``DecoderLayer`` -> [B, L_tgt, D]."""
        for i, layer in enumerate(self.layers):
            y = layer(y, memory, tgt_mask, src_mask, None if cache is None else cache.layers[i])  # [B, L_tgt, D]
        out = self.norm(y)
        record("decoder_output", out)
        return out


class OutputHead(nn.Module):
    """The output head: [B, L_tgt, D] -> logits over the target vocabulary [B, L_tgt, V_tgt]."""

    def __init__(self, d_model: int, vocab_size: int, length: str = "L_tgt"):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)
        self.length = length

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.proj(h)  # [B, L_tgt, V_tgt]
        record("logits", logits)
        return logits


class DecodingCache:
    """What incremental decoding keeps between steps, for one model and one batch.

    ``ids`` [B, t]: every token fed so far (for the padding mask); ``layers``: per decoder layer, the
    self-attention K/V (growing) and the cross-attention K/V (fixed). ``source``: the source ids the
    cross-attention K/V came from, so a cache is never used with another source.
    """

    def __init__(self, model: nn.Module, batch: int, source: torch.Tensor | None = None):
        self.model = model
        self.batch = batch
        self.source = source
        self.ids: torch.Tensor | None = None
        self.layers = [DecoderLayerCache() for _ in model.decoder.layers]

    def __len__(self) -> int:
        return 0 if self.ids is None else self.ids.size(1)

    def check(self, model: nn.Module, new_ids: torch.Tensor, source: torch.Tensor | None = None) -> None:
        """Refuse a cache from another model, another batch or another source: it would give silent nonsense."""
        if self.model is not model:
            raise ValueError("this cache was made by another model: start one with this model's new_cache(...)")
        if new_ids.size(0) != self.batch:
            raise ValueError(f"the cache was made for a batch of {self.batch} but the new tokens have "
                             f"{new_ids.size(0)} rows: start a new cache for each batch")
        if self.source is None or source is self.source or (source is not None and source.device.type == "meta"):
            return  # nothing to compare (meta tensors hold no values)
        if source is None or source.shape != self.source.shape or not torch.equal(source, self.source):
            raise ValueError("the source changed since this cache was made: its cross-attention keys and values "
                             "belong to the old source; start a new cache with model.new_cache(src)")

    def append(self, new_ids: torch.Tensor) -> torch.Tensor:
        """Add the new tokens [B, n] to those seen; returns every id so far [B, t + n]."""
        self.ids = new_ids if self.ids is None else torch.cat([self.ids, new_ids], dim=1)
        return self.ids


def self_attention_mask(model: nn.Module, new_ids: torch.Tensor, cache: DecodingCache | None,
                        source: torch.Tensor | None = None) -> torch.Tensor:
    """The decoder's self-attention mask for ``new_ids`` [B, n]: [B, 1, n, n] without a cache. With one
    (checked, then extended by the new ids), the new positions ask and every id so far answers: [B, 1, n, t]."""
    if cache is None:
        return decoder_self_mask(new_ids, model.cfg.pad_id)
    if not isinstance(cache, DecodingCache):
        raise TypeError(f"cache must come from model.new_cache(...), got {type(cache).__name__}")
    cache.check(model, new_ids, source)
    return decoder_self_mask(cache.append(new_ids), model.cfg.pad_id, new_ids.size(1))


class Transformer(nn.Module):
    """src ids [B, L_src], tgt ids [B, L_tgt] -> logits [B, L_tgt, V_tgt]."""

    dim_names = ONE_KV_HEAD_PER_HEAD  # how a trace names its dims: its K/V heads are its H heads

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"cfg must be a walkthrough.ModelConfig, got {type(cfg).__name__}")
        if torch.empty(0).device.type != "meta":  # on the meta device nothing is allocated: any size is fine
            check_fits_in_memory(cfg, "this Transformer")
        self.cfg = cfg
        self.src_embed = Embedding(cfg.src_vocab_size, cfg.d_model, cfg.max_len, cfg.dropout)
        self.tgt_embed = Embedding(cfg.tgt_vocab_size, cfg.d_model, cfg.max_len, cfg.dropout)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder([DecoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout)
                                for _ in range(cfg.num_layers)], cfg.d_model)
        self.generator = OutputHead(cfg.d_model, cfg.tgt_vocab_size)
        if cfg.share_embeddings:  # paper §3.4: one [V, D] matrix, three uses
            self.tgt_embed.token.weight = self.src_embed.token.weight
            self.generator.proj.weight = self.src_embed.token.weight

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src [B, L_src] -> memory [B, L_src, D]."""
        x = self.src_embed(src, "src")
        return self.encoder(x, padding_mask(src, self.cfg.pad_id))

    def new_cache(self, src: torch.Tensor) -> DecodingCache:
        """An empty cache for decoding the batch ``src`` [B, L_src] one token at a time."""
        return DecodingCache(self, src.size(0), src)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: DecodingCache | None = None) -> torch.Tensor:
        """tgt [B, L_tgt], memory [B, L_src, D], src [B, L_src] (for its padding) -> [B, L_tgt, D].

        With a ``cache`` (from ``new_cache(src)``), tgt holds only the new positions, which sit after the
        ``len(cache)`` already decoded: their embeddings get those positions' PE rows.
        """
        offset = 0 if cache is None else len(cache)
        y = self.tgt_embed(tgt, "tgt", offset)
        check_same_batch(tgt=tgt, memory=memory, src=src)
        if memory.shape[1:] != (src.size(1), self.cfg.d_model):
            raise ValueError(f"memory must be [B, L_src, D] = [B, {src.size(1)}, {self.cfg.d_model}], "
                             f"got {list(memory.shape)}; pass model.encode(src)")
        tgt_mask = self_attention_mask(self, tgt, cache, src)  # [B, 1, L_tgt, L_tgt], or [B, 1, n, t] cached
        return self.decoder(y, memory, tgt_mask, padding_mask(src, self.cfg.pad_id), cache)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src [B, L_src], tgt [B, L_tgt] -> logits [B, L_tgt, V_tgt]."""
        if isinstance(src, torch.Tensor) and isinstance(tgt, torch.Tensor) and src.dim() == tgt.dim() == 2:
            check_same_batch(src=src, tgt=tgt)
        return self.generator(self.decode(tgt, self.encode(src), src))


def check_decoding_ids(model: nn.Module, vocab_size: int, max_len: int, **ids) -> None:
    """max_len new tokens must fit the model's positions; start/end ids must be tokens of its vocabulary."""
    check_positive_int("max_len", max_len)
    if max_len > model.cfg.max_len:
        raise ValueError(f"max_len={max_len} new tokens need positions up to {max_len - 1}, but the model has "
                         f"max_len={model.cfg.max_len}: decode fewer tokens")
    for name, value in ids.items():
        if value is not None:
            check_token_id(name, value, vocab_size)


@torch.no_grad()
def greedy_steps(model: Transformer, src: torch.Tensor, max_len: int, sos_id: int, eos_id: int,
                 use_cache: bool = True) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Decode one position at a time, yielding (prefix [B, t+1], probabilities [B, V_tgt]) per step.

    The prefix grows [B, 1] -> [B, 2] -> ...; rows that produced ``eos`` are padded from then on.
    Stops when every row has finished or after ``max_len`` new tokens. ``use_cache``: feed only the
    newest token and reuse the keys and values of earlier steps (same result); False re-runs the
    decoder on the whole prefix at every step.
    """
    check_decoding_ids(model, model.cfg.tgt_vocab_size, max_len, sos_id=sos_id, eos_id=eos_id)
    was_training = model.training
    model.eval()
    try:
        memory = model.encode(src)  # [B, L_src, D], computed once
        cache = model.new_cache(src) if use_cache else None
        ys = torch.full((src.size(0), 1), sos_id, dtype=torch.long, device=src.device)  # [B, 1]
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            fed = ys[:, -1:] if use_cache else ys  # [B, 1] or [B, t]
            probs = model.generator(model.decode(fed, memory, src, cache)[:, -1]).softmax(-1)  # [B, V_tgt]
            next_id = probs.argmax(-1).masked_fill(finished, model.cfg.pad_id)  # [B]
            ys = torch.cat([ys, next_id[:, None]], dim=1)  # [B, t+1]
            finished |= next_id == eos_id
            yield ys, probs
            if finished.all():
                break
    finally:
        model.train(was_training)


def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, sos_id: int, eos_id: int,
                  use_cache: bool = True) -> torch.Tensor:
    """src [B, L_src] -> ids [B, T] starting with ``sos``; after ``eos`` a row holds ``pad``."""
    *_, (ys, _probs) = greedy_steps(model, src, max_len, sos_id, eos_id, use_cache)
    return ys


@torch.no_grad()
def copy_torch_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy an ``nn.MultiheadAttention``'s weights into ours.

    PyTorch keeps W_q, W_k, W_v stacked in one ``in_proj_weight`` [3D, D]; we split it in three.
    """
    if theirs.in_proj_weight is None or theirs.embed_dim != ours.w_q.in_features or theirs.num_heads != ours.num_heads:
        raise ValueError("theirs must be an nn.MultiheadAttention with the same embed_dim and num_heads "
                         "(and kdim = vdim = embed_dim)")
    w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)
    b_q, b_k, b_v = theirs.in_proj_bias.chunk(3)
    for linear, weight, bias in ((ours.w_q, w_q, b_q), (ours.w_k, w_k, b_k), (ours.w_v, w_v, b_v),
                                 (ours.w_o, theirs.out_proj.weight, theirs.out_proj.bias)):
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)
    return ours


def load_torch_transformer(model: Transformer, reference: nn.Transformer) -> Transformer:
    """Copy an ``nn.Transformer(batch_first=True, norm_first=False)``'s weights into ``model``'s stacks.

    Embeddings and the output head are ours alone and are left as they are.
    """
    enc_layers, dec_layers = reference.encoder.layers, reference.decoder.layers
    first = enc_layers[0]
    if not first.self_attn.batch_first or first.norm_first:
        raise ValueError("reference must be built with batch_first=True and norm_first=False (post-norm)")
    for layer in [*enc_layers, *dec_layers]:
        if getattr(layer, "activation_relu_or_gelu", 1) != 1:
            raise ValueError("reference must use activation='relu' (ours is ReLU, as in the paper); "
                             "rebuild it with activation='relu'")
        if layer.norm1.eps != 1e-5 or layer.linear1.bias is None or layer.norm1.bias is None:
            raise ValueError("reference must use layer_norm_eps=1e-5 and bias=True (ours have both); "
                             "rebuild it with the defaults")
    theirs = (reference.d_model, reference.nhead, first.linear1.out_features, len(enc_layers), len(dec_layers))
    cfg = model.cfg
    ours = (cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.num_layers, cfg.num_layers)
    if theirs != ours:
        raise ValueError(f"sizes differ (d_model, nhead, dim_feedforward, encoder layers, decoder layers): "
                         f"reference {theirs}, model {ours}; build both from the same sizes")

    def copy_module(dst, src):
        dst.load_state_dict(src.state_dict())

    with torch.no_grad():
        for ours_layer, ref in zip(model.encoder.layers, enc_layers):
            copy_torch_attention(ours_layer.self_attn, ref.self_attn)
            copy_module(ours_layer.feed_forward.linear1, ref.linear1)
            copy_module(ours_layer.feed_forward.linear2, ref.linear2)
            copy_module(ours_layer.add_norm1.norm, ref.norm1)
            copy_module(ours_layer.add_norm2.norm, ref.norm2)
        for ours_layer, ref in zip(model.decoder.layers, dec_layers):
            copy_torch_attention(ours_layer.self_attn, ref.self_attn)
            copy_torch_attention(ours_layer.cross_attn, ref.multihead_attn)
            copy_module(ours_layer.feed_forward.linear1, ref.linear1)
            copy_module(ours_layer.feed_forward.linear2, ref.linear2)
            copy_module(ours_layer.add_norm1.norm, ref.norm1)
            copy_module(ours_layer.add_norm2.norm, ref.norm2)
            copy_module(ours_layer.add_norm3.norm, ref.norm3)
        copy_module(model.encoder.norm, reference.encoder.norm)
        copy_module(model.decoder.norm, reference.decoder.norm)
    return model

"""The encoder-decoder Transformer: stacks, output head, greedy decoding, and weight import from PyTorch."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config import ModelConfig, check_positive_int
from .embedding import Embedding
from .layers import DecoderLayer, EncoderLayer
from .masks import decoder_self_mask, padding_mask
from .recording import record


class Encoder(nn.Module):
    """N encoder layers, then a final LayerNorm (as ``nn.TransformerEncoder`` with ``norm=``)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)  # [B, L_src, D]
        memory = self.norm(x)
        record("memory (final LayerNorm)", memory, "B L_src D", "the encoder output, read by each decoder layer")
        return memory


class Decoder(nn.Module):
    """N decoder layers, then a final LayerNorm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, y: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            y = layer(y, memory, tgt_mask, src_mask)  # [B, L_tgt, D]
        out = self.norm(y)
        record("decoder output (final LayerNorm)", out, "B L_tgt D", "one D-vector per target position")
        return out


class Generator(nn.Module):
    """Output head: [B, L_tgt, D] -> logits over the target vocabulary [B, L_tgt, V_tgt]."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.proj(h)  # [B, L_tgt, V_tgt]
        record("logits", logits, "B L_tgt V", "a score for every vocabulary word at every position")
        return logits


class Transformer(nn.Module):
    """src ids [B, L_src], tgt ids [B, L_tgt] -> logits [B, L_tgt, V_tgt]."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"cfg must be a walkthrough.ModelConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.src_embed = Embedding(cfg.src_vocab_size, cfg.d_model, cfg.max_len, cfg.dropout)
        self.tgt_embed = Embedding(cfg.tgt_vocab_size, cfg.d_model, cfg.max_len, cfg.dropout)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.generator = Generator(cfg.d_model, cfg.tgt_vocab_size)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src [B, L_src] -> memory [B, L_src, D]."""
        x = self.src_embed(src, "src")
        return self.encoder(x, padding_mask(src, self.cfg.pad_id))

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """tgt [B, L_tgt], memory [B, L_src, D], src [B, L_src] (for its padding) -> [B, L_tgt, D]."""
        y = self.tgt_embed(tgt, "tgt")
        if not (tgt.size(0) == memory.size(0) == src.size(0)):
            raise ValueError(f"batch sizes differ: tgt has {tgt.size(0)} rows, memory {memory.size(0)}, "
                             f"src {src.size(0)}; pair each source sentence with one target sentence")
        if memory.shape[1:] != (src.size(1), self.cfg.d_model):
            raise ValueError(f"memory must be [B, L_src, D] = [B, {src.size(1)}, {self.cfg.d_model}], "
                             f"got {list(memory.shape)}; pass model.encode(src)")
        return self.decoder(y, memory, decoder_self_mask(tgt, self.cfg.pad_id), padding_mask(src, self.cfg.pad_id))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src [B, L_src], tgt [B, L_tgt] -> logits [B, L_tgt, V_tgt]."""
        if isinstance(src, torch.Tensor) and isinstance(tgt, torch.Tensor) and src.dim() == tgt.dim() == 2 \
                and src.size(0) != tgt.size(0):
            raise ValueError(f"src has {src.size(0)} sentences but tgt has {tgt.size(0)}; "
                             f"they must be the same batch")
        return self.generator(self.decode(tgt, self.encode(src), src))


@torch.no_grad()
def greedy_steps(model: Transformer, src: torch.Tensor, max_len: int, sos_id: int,
                 eos_id: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Decode one position at a time, yielding (prefix [B, t+1], probabilities [B, V_tgt]) per step.

    The prefix grows [B, 1] -> [B, 2] -> ...; rows that produced ``eos`` are padded from then on.
    Stops when every row has finished or after ``max_len`` new tokens.
    """
    check_positive_int("max_len", max_len)
    was_training = model.training
    model.eval()
    try:
        memory = model.encode(src)  # [B, L_src, D], computed once
        ys = torch.full((src.size(0), 1), sos_id, dtype=torch.long, device=src.device)  # [B, 1]
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            probs = model.generator(model.decode(ys, memory, src)[:, -1]).softmax(-1)  # [B, V_tgt]
            next_id = probs.argmax(-1).masked_fill(finished, model.cfg.pad_id)  # [B]
            ys = torch.cat([ys, next_id[:, None]], dim=1)  # [B, t+1]
            finished |= next_id == eos_id
            yield ys, probs
            if finished.all():
                break
    finally:
        model.train(was_training)


def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, sos_id: int, eos_id: int) -> torch.Tensor:
    """src [B, L_src] -> ids [B, T] starting with ``sos``; after ``eos`` a row holds ``pad``."""
    *_, (ys, _probs) = greedy_steps(model, src, max_len, sos_id, eos_id)
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

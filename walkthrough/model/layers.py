"""The two sublayers besides attention (feed-forward, Add & Norm), the layers built from them, the decoder stack
and the output head (shared by the encoder-decoder and the GPT). Each layer is built from its model's config."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..recording import record
from .attention import MultiHeadAttention
from .cache import DecoderLayerCache, DecodingCache
from .config import GPTConfig, ModelConfig

ACTIVATION_FUNCTIONS = {"relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
                        "silu": F.silu, "swiglu": F.silu}


class FeedForward(nn.Module):
    """Position-wise: the same D -> d_ff -> D network applied to every token on its own.

    SwiGLU (``activation="swiglu"``) widens twice: SiLU(x·W_1) gates x·W_up feature by feature.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu", bias: bool = True):
        super().__init__()
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = ACTIVATION_FUNCTIONS[self.activation](self.linear1(x))  # [B, L, d_ff]
        if self.up is not None:
            record("ffn_gate", hidden)
            up = self.up(x)  # [B, L, d_ff]
            record("ffn_up", up)
            hidden = hidden * up  # [B, L, d_ff]
        record("ffn_hidden" if self.activation == "relu" else "ffn_activated", hidden)
        out = self.linear2(self.dropout(hidden))  # [B, L, D]
        record("ffn_out", out)
        return out


def make_norm(cfg: ModelConfig | GPTConfig) -> nn.Module:
    """LayerNorm (mean 0, variance 1, learned scale and shift) or RMSNorm (divide by the root mean square, scale)."""
    if cfg.norm == "rms":
        return nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


def norm_step(step_id: str, norm: nn.Module | None) -> str:
    """The trace's id for a step that ends in ``norm``: ``step_id`` for a LayerNorm, its RMSNorm or no-norm twin."""
    if norm is None:
        return f"{step_id}_no_norm"
    return step_id.removesuffix("_norm") + "_rms_norm" if isinstance(norm, nn.RMSNorm) else step_id


def final_norm(cfg) -> nn.Module | None:
    """The norm after a stack of ``cfg`` (a ModelConfig or GPTConfig), of the layers' kind; None without
    ``cfg.final_norm``."""
    return make_norm(cfg) if cfg.final_norm else None


class AddNorm(nn.Module):
    """Post-norm residual: LayerNorm(x + dropout(sublayer output)).

    LayerNorm normalises each token's D features to mean 0, variance 1, then applies a learned
    scale and shift (two vectors of D). ``cfg.norm="rms"`` makes it an RMSNorm.
    """

    def __init__(self, cfg: ModelConfig | GPTConfig):
        super().__init__()
        self.norm = make_norm(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        out = self.norm(x + self.dropout(sublayer_out))  # [B, L, D]
        record(norm_step("add_norm", self.norm), out)
        return out


class ResidualLayer(nn.Module):
    """What both layers share: each sublayer sits on the residual stream, its norm after (post) or before (pre)."""

    norm_first = False

    def residual(self, x: torch.Tensor, add_norm: AddNorm, sublayer) -> torch.Tensor:
        """Post-norm: LayerNorm(x + sublayer(x)). Pre-norm: x + sublayer(LayerNorm(x)), the sum never normalised."""
        if not self.norm_first:
            return add_norm(x, sublayer(x))
        out = x + add_norm.dropout(sublayer(add_norm.norm(x)))  # [B, L, D]
        record(norm_step("pre_norm", add_norm.norm), out)
        return out


def self_attention(cfg: ModelConfig | GPTConfig) -> MultiHeadAttention:
    """A layer's self-attention: ``cfg.kv_heads`` K/V heads, rotating Q and K when ``cfg.positions`` is "rope"."""
    return MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.dropout, cfg.kv_heads, cfg.positions == "rope",
                              cfg.bias, cfg.rope_base)


def feed_forward(cfg: ModelConfig | GPTConfig) -> FeedForward:
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation, cfg.bias)


class EncoderLayer(ResidualLayer):
    """Self-attention over the source, then the FFN, each with its Add & Norm, named by the sublayer it norms."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm_first = cfg.norm_first
        self.self_attn = self_attention(cfg)
        self.self_attn_norm = AddNorm(cfg)
        self.feed_forward = feed_forward(cfg)
        self.ffn_norm = AddNorm(cfg)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None, checked: bool = False) -> torch.Tensor:
        """x [B, L_src, D], src_mask [B, 1, 1, L_src] -> [B, L_src, D]. ``checked``: as attention's."""
        x = self.residual(x, self.self_attn_norm, lambda h: self.self_attn(h, h, h, src_mask, checked=checked))
        return self.residual(x, self.ffn_norm, self.feed_forward)


class DecoderLayer(ResidualLayer):
    """Masked self-attention, cross-attention to the encoder's memory, then the FFN.

    Without cross-attention (``cross_attention=False``) it is a GPT block: masked self-attention and
    the FFN. ``cfg.norm_first`` puts each norm before its sublayer (pre-norm, as current GPTs) instead
    of after the residual sum (post-norm, the paper). Cross-attention never rotates and has all H K/V heads.
    """

    def __init__(self, cfg: ModelConfig | GPTConfig, cross_attention: bool = True):
        super().__init__()
        self.norm_first = cfg.norm_first
        self.self_attn = self_attention(cfg)
        self.self_attn_norm = AddNorm(cfg)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.dropout, bias=cfg.bias)
            self.cross_attn_norm = AddNorm(cfg)
        else:
            self.cross_attn = self.cross_attn_norm = None
        self.feed_forward = feed_forward(cfg)
        self.ffn_norm = AddNorm(cfg)

    def forward(self, y: torch.Tensor, memory: torch.Tensor | None, tgt_mask: torch.Tensor,
                src_mask: torch.Tensor | None = None, cache: DecoderLayerCache | None = None,
                positions: torch.Tensor | None = None, checked: bool = False) -> torch.Tensor:
        """y [B, L_tgt, D], memory [B, L_src, D] (None without cross-attention), tgt_mask [B, 1, L_tgt, L_k],
        src_mask [B, 1, 1, L_src] -> [B, L_tgt, D]. With a ``cache``, y holds only the new positions.
        ``positions`` [B, L_tgt]: each row's own positions, for rotary self-attention (left-padded prompts).
        ``checked``: as attention's (the model has checked every input; alone, each attention checks its own)."""
        self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        y = self.residual(y, self.self_attn_norm,
                          lambda x: self.self_attn(x, x, x, tgt_mask, self_cache, positions, checked=checked))
        if self.cross_attn is not None:
            # Q from y, K and V from the memory
            y = self.residual(y, self.cross_attn_norm,
                              lambda x: self.cross_attn(x, memory, memory, src_mask, cross_cache, checked=checked))
        return self.residual(y, self.ffn_norm, self.feed_forward)


class Decoder(nn.Module):
    """A stack of decoder layers, then a final norm (``norm=None``: none, as Marian's). The GPT uses it with layers
    that have no cross-attention."""

    def __init__(self, layers: list[DecoderLayer], norm: nn.Module | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = norm

    def forward(self, y: torch.Tensor, memory: torch.Tensor | None, tgt_mask: torch.Tensor,
                src_mask: torch.Tensor | None = None, cache: DecodingCache | None = None,
                positions: torch.Tensor | None = None, checked: bool = False) -> torch.Tensor:
        """y [B, L_tgt, D], memory [B, L_src, D] or None; masks, positions, ``checked`` as in ``DecoderLayer``
        -> [B, L_tgt, D]."""
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.layers[i]
            y = layer(y, memory, tgt_mask, src_mask, layer_cache, positions, checked)  # [B, L_tgt, D]
        out = y if self.norm is None else self.norm(y)
        record(norm_step("decoder_output", self.norm), out)
        return out


class OutputHead(nn.Module):
    """The output head: [B, L_tgt, D] -> logits over the target vocabulary [B, L_tgt, V_tgt]."""

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.proj(h)  # [B, L_tgt, V_tgt]
        record("logits", logits)
        return logits


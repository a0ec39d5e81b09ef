"""Model sizes and options (``ModelConfig``, ``GPTConfig``, the layers' options in both), checked once when made, so
every later shape error has a clear cause; ``parameter_count(cfg)``: what a config costs before anything is built."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..checks import (
    check_bool,
    check_choice,
    check_dropout,
    check_heads,
    check_positive_int,
    check_positive_number,
    check_rope_pairs,
    check_token_id,
)
from ..i18n import _

POSITIONS = ("sinusoidal", "sinusoidal_halves", "learned", "rope")
NORMS = ("layer", "rms")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu")


MAX_LAYERS = 256


def _check_model_options(cfg: ModelConfig | GPTConfig, vocab_size: int) -> None:
    """What both configs share: dropout, pad_id (None: no padding), positions, tying, the final norm, the layers'
    options."""
    check_dropout(cfg.dropout)
    if cfg.num_layers > MAX_LAYERS:  # each layer is built in turn: 20,000 tiny ones took two minutes
        raise ValueError(_("num_layers={num_layers} is more than the {most} layers a model here is built with (the "
                           "largest published models have about 100): use num_layers <= {most}").format(
                               num_layers=cfg.num_layers, most=MAX_LAYERS))
    if cfg.pad_id is not None:
        check_token_id("pad_id", cfg.pad_id, vocab_size)
    check_choice("positions", cfg.positions, POSITIONS)
    if cfg.positions == "rope":
        check_rope_pairs(cfg.d_k)
    for name in ("share_embeddings", "final_norm", "scale_embeddings", "norm_first", "bias"):
        check_bool(name, getattr(cfg, name))
    check_choice("norm", cfg.norm, NORMS)
    check_positive_number("norm_eps", cfg.norm_eps, "1e-5")
    check_choice("activation", cfg.activation, ACTIVATIONS)
    check_positive_number("rope_base", cfg.rope_base, "10000")


OPTION = "option"  # a field's metadata key: an option added after the sizes (its default stays out of the repr)


@dataclass(frozen=True, kw_only=True)
class _Options:
    """The options both configs share (keyword-only: after each config's own fields), and the one home of the
    layers' options: every layer is built from its config. The defaults are the source articles' block.

    ``norm``: "layer" (LayerNorm) or "rms" (RMSNorm: no mean, no shift); ``norm_eps`` inside its square root.
    ``activation``: the feed-forward's "relu", "gelu" (exact), "gelu_tanh" (GPT-2's), "silu" (swish, Marian's)
    or "swiglu" (Llama's: SiLU(x·W_1) ⊙ x·W_up, a third matrix). ``bias``: a shift in every linear (and
    LayerNorm). ``rope_base``: the base of the rotary angles (10000 in RoFormer, 500000 in Llama 3).
    ``norm_first`` (each config's own default): pre-norm, x + sublayer(norm(x)).
    """

    scale_embeddings: bool = True
    final_norm: bool = True
    norm: str = "layer"
    norm_eps: float = 1e-5
    activation: str = "relu"
    bias: bool = True
    rope_base: float = 10000.0

    def __repr__(self) -> str:
        """The sizes, then only the options changed from their defaults: a default config reads as it always did."""
        in_order = sorted(fields(self), key=lambda f: f.kw_only)  # each config's own fields, then the shared options
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in in_order if not (f.kw_only or OPTION in f.metadata)
                 or getattr(self, f.name) != f.default]
        return f"{type(self).__name__}({', '.join(shown)})"

    @property
    def d_k(self) -> int:
        """Features per head."""
        return self.d_model // self.num_heads

    @property
    def kv_heads(self) -> int:
        """K/V heads of self-attention: one per query head unless a GPT groups them."""
        return self.num_heads


@dataclass(frozen=True, repr=False)
class ModelConfig(_Options):
    """Every size the encoder-decoder needs. Frozen, so a config can key a cache.

    ``d_model`` must split evenly into ``num_heads`` heads of size ``d_k = d_model // num_heads``.
    ``share_embeddings`` (paper §3.4): one [V, D] matrix serves as source embedding, target embedding
    and output projection; it needs equal vocabularies. ``pad_id=None``: no token is padding.
    ``positions``: "sinusoidal" (the paper's table, sines and cosines interleaved), "sinusoidal_halves"
    (the same numbers, sines in the first half of the features: Marian's), "learned" (a [max_len, D]
    parameter) or "rope" (self-attention rotates Q and K by ``rope_base``). ``scale_embeddings``: the
    token vectors times sqrt(D). ``final_norm``: a norm after each stack. The layers' options: ``_Options``.
    """

    src_vocab_size: int = 30000
    tgt_vocab_size: int = 30000
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    max_len: int = 5000
    dropout: float = 0.1
    pad_id: int | None = 0
    share_embeddings: bool = False
    positions: str = field(default="sinusoidal", metadata={OPTION: True})
    norm_first: bool = field(default=False, metadata={OPTION: True})

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads)
        _check_model_options(self, min(self.src_vocab_size, self.tgt_vocab_size))
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(_("share_embeddings=True needs one vocabulary for both sides, got src_vocab_size="
                             "{src_vocab_size} and tgt_vocab_size={tgt_vocab_size}: build a joint "
                             "vocabulary or set share_embeddings=False").format(
                                 src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size))

    @classmethod
    def paper_base(cls, **changes) -> ModelConfig:
        """The paper's base model (D 512, 8 heads, d_ff 2048, 6 layers) with the source articles' 30000-token
        vocabularies; keyword arguments change any field."""
        return cls(**changes)

    @classmethod
    def paper_big(cls, **changes) -> ModelConfig:
        """The paper's big model: D 1024, 16 heads, d_ff 4096, 6 layers, dropout 0.3."""
        return cls(**{"d_model": 1024, "num_heads": 16, "d_ff": 4096, "dropout": 0.3, **changes})


@dataclass(frozen=True, repr=False)
class GPTConfig(_Options):
    """Sizes of the decoder-only model (notebook 09).

    ``num_kv_heads`` < ``num_heads`` is grouped-query attention (1 = multi-query); None means one K/V
    head per query head. ``positions``: "rope" rotates Q and K inside attention, the others add a table to
    the input (as ``ModelConfig``'s). ``norm_first``: pre-norm, as every current GPT (the paper is post-norm).
    ``share_embeddings``: the output head reuses the token table (GPT-2's tied embeddings). The other
    options are ``ModelConfig``'s; the defaults are notebook 09's GPT.
    """

    vocab_size: int = 50257
    d_model: int = 768
    num_heads: int = 12
    num_kv_heads: int | None = None
    d_ff: int = 3072
    num_layers: int = 12
    max_len: int = 1024
    dropout: float = 0.1
    pad_id: int | None = 0
    positions: str = "rope"
    norm_first: bool = True
    share_embeddings: bool = field(default=False, metadata={OPTION: True})

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads, self.num_kv_heads)
        _check_model_options(self, self.vocab_size)

    @property
    def kv_heads(self) -> int:
        """K/V heads actually used (num_kv_heads, or num_heads when it is None)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads


def parameter_count(cfg: ModelConfig | GPTConfig) -> int:
    """Every learned number of the model ``cfg`` describes (a shared matrix counted once); tested equal to the
    built model's own count for every option, so it cannot drift from the model."""
    d, f, layers, bias = cfg.d_model, cfg.d_ff, cfg.num_layers, int(cfg.bias)
    linear = lambda n_in, n_out: n_in * n_out + bias * n_out  # noqa: E731 (a weight and, with bias, its shift)
    ffn_inputs = 3 if cfg.activation == "swiglu" else 2  # SwiGLU: W_1 and W_up read x, W_2 writes back
    feed_forward = (ffn_inputs - 1) * linear(d, f) + linear(f, d)
    norm = d + (bias * d if cfg.norm == "layer" else 0)  # a scale; LayerNorm also a shift (RMSNorm never)
    final_norm = norm if cfg.final_norm else 0
    positions = cfg.max_len * d if cfg.positions == "learned" else 0  # one learned table per embedding
    if isinstance(cfg, GPTConfig):
        kv = cfg.kv_heads * cfg.d_k  # K and V project to the K/V heads only
        attention = 2 * linear(d, d) + 2 * linear(d, kv)
        head = (0 if cfg.share_embeddings else d * cfg.vocab_size) + bias * cfg.vocab_size
        return cfg.vocab_size * d + positions + layers * (attention + feed_forward + 2 * norm) + final_norm + head
    attention = 4 * linear(d, d)
    embeddings = cfg.src_vocab_size * d + (0 if cfg.share_embeddings else cfg.tgt_vocab_size * d) + 2 * positions
    head = (0 if cfg.share_embeddings else d * cfg.tgt_vocab_size) + bias * cfg.tgt_vocab_size
    encoder = layers * (attention + feed_forward + 2 * norm) + final_norm
    decoder = layers * (2 * attention + feed_forward + 3 * norm) + final_norm
    return embeddings + encoder + decoder + head

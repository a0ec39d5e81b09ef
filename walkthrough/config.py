"""Model sizes, checked once so every later shape error has a clear cause."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass


def check_positive_int(name: str, value, hint: str = "") -> None:
    """Raise a ValueError (or TypeError) naming ``name`` unless ``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number, got {value!r} ({type(value).__name__}){hint}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}{hint}")


def check_token_id(name: str, value, vocab_size: int) -> None:
    """A single token id (pad, sos, eos): a whole number in [0, vocab_size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole-number token id, got {value!r} ({type(value).__name__})")
    if not 0 <= value < vocab_size:
        raise ValueError(f"{name} must be a token id in [0, {vocab_size}), got {value}")


def check_heads(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> None:
    """d_model splits into num_heads heads of d_k; num_kv_heads (grouped-query attention) divides num_heads."""
    check_positive_int("d_model", d_model)
    check_positive_int("num_heads", num_heads)
    if d_model % num_heads:
        fits = [h for h in range(1, min(d_model, 64) + 1) if d_model % h == 0]
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}: each head gets "
                         f"d_model / num_heads features, so pick num_heads from {fits} or change d_model")
    if num_kv_heads is not None:
        check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            fits = [h for h in range(1, num_heads + 1) if num_heads % h == 0]
            raise ValueError(f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}: each K/V head "
                             f"serves a whole group of query heads, so pick num_kv_heads from {fits}")


def check_same_batch(**tensors) -> None:
    """Every named tensor has the same batch size (dim 0): one source sentence per target sentence."""
    sizes = {name: t.size(0) for name, t in tensors.items()}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise ValueError(f"batch sizes differ: {listed}; each must hold the same sentences (one row per sentence)")


def check_rope_pairs(d_k: int) -> None:
    """Rotary positions turn features in pairs (2i, 2i+1): d_k must be even."""
    if d_k % 2:
        raise ValueError(f"rotary positions turn features in pairs, so d_k must be even, got d_k={d_k}; "
                         f"d_k = d_model / num_heads: change d_model or num_heads")


def _check_dropout(dropout) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(f"dropout must be a number in [0, 1), got {dropout!r}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1) (0.1 is usual), got {dropout}")


def check_fits_in_memory(parameters: int, buffers: int, what: str) -> None:
    """Refuse to build a model whose float32 weights and tables would not fit in this machine's memory."""
    needed = 4 * (parameters + buffers)
    try:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system: no limit we can read
        return
    if needed > available // 2:
        raise ValueError(f"{what} would need {needed / 2**30:.1f} GiB of weights and position tables, more than "
                         f"half of this machine's {available / 2**30:.0f} GiB: lower max_len, the vocabulary or the "
                         f"sizes (to see shapes at any size, trace on the meta device: wt.trace_shapes)")


@dataclass(frozen=True)
class ModelConfig:
    """Every size the encoder-decoder needs. Frozen, so a config can key a cache.

    ``d_model`` must split evenly into ``num_heads`` heads of size ``d_k = d_model // num_heads``.
    ``share_embeddings`` (paper §3.4): one [V, D] matrix serves as source embedding, target embedding
    and output projection; it needs equal vocabularies.
    """

    src_vocab_size: int = 30000
    tgt_vocab_size: int = 30000
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    max_len: int = 5000
    dropout: float = 0.1
    pad_id: int = 0
    share_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads)
        _check_dropout(self.dropout)
        check_token_id("pad_id", self.pad_id, min(self.src_vocab_size, self.tgt_vocab_size))
        if not isinstance(self.share_embeddings, bool):
            raise TypeError(f"share_embeddings must be True or False, got {self.share_embeddings!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"share_embeddings=True needs one vocabulary for both sides, got src_vocab_size="
                             f"{self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}: build a joint "
                             f"vocabulary or set share_embeddings=False")

    @property
    def d_k(self) -> int:
        """Features per head."""
        return self.d_model // self.num_heads

    @classmethod
    def paper_base(cls, **changes) -> ModelConfig:
        """The paper's base model (D 512, 8 heads, d_ff 2048, 6 layers) with the source articles' 30000-token
        vocabularies; keyword arguments change any field."""
        return cls(**changes)

    @classmethod
    def paper_big(cls, **changes) -> ModelConfig:
        """The paper's big model: D 1024, 16 heads, d_ff 4096, 6 layers, dropout 0.3."""
        return cls(**{"d_model": 1024, "num_heads": 16, "d_ff": 4096, "dropout": 0.3, **changes})

    @classmethod
    def seed_example(cls) -> ModelConfig:
        """Deprecated name of ``paper_base()``."""
        warnings.warn("ModelConfig.seed_example() is now ModelConfig.paper_base()", DeprecationWarning, stacklevel=2)
        return cls.paper_base()


POSITIONS = ("sinusoidal", "rope")


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the decoder-only model (notebook 09).

    ``num_kv_heads`` < ``num_heads`` is grouped-query attention (1 = multi-query); None means one K/V
    head per query head. ``positions``: "sinusoidal" adds the table to the input, "rope" rotates Q and K
    inside attention. ``norm_first``: pre-norm, as every current GPT (the paper is post-norm).
    """

    vocab_size: int = 50257
    d_model: int = 768
    num_heads: int = 12
    num_kv_heads: int | None = None
    d_ff: int = 3072
    num_layers: int = 12
    max_len: int = 1024
    dropout: float = 0.1
    pad_id: int = 0
    positions: str = "rope"
    norm_first: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads, self.num_kv_heads)
        _check_dropout(self.dropout)
        check_token_id("pad_id", self.pad_id, self.vocab_size)
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.positions == "rope":
            check_rope_pairs(self.d_k)
        if not isinstance(self.norm_first, bool):
            raise TypeError(f"norm_first must be True or False, got {self.norm_first!r}")

    @property
    def d_k(self) -> int:
        """Features per head."""
        return self.d_model // self.num_heads

    @property
    def kv_heads(self) -> int:
        """K/V heads actually used (num_kv_heads, or num_heads when it is None)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

"""Model sizes, checked once so every later shape error has a clear cause."""

from __future__ import annotations

from dataclasses import dataclass


def check_positive_int(name: str, value, hint: str = "") -> None:
    """Raise a ValueError (or TypeError) naming ``name`` unless ``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number, got {value!r} ({type(value).__name__}){hint}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}{hint}")


@dataclass(frozen=True)
class ModelConfig:
    """Every size the model needs. Frozen, so a config can key a cache.

    ``d_model`` must split evenly into ``num_heads`` heads of size ``d_k = d_model // num_heads``.
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

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        if self.d_model % self.num_heads:
            fits = [h for h in range(1, min(self.d_model, 64) + 1) if self.d_model % h == 0]
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}: each head gets "
                f"d_model / num_heads features, so pick num_heads from {fits} or change d_model"
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise TypeError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1) (0.1 is usual), got {self.dropout}")
        if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int):
            raise TypeError(f"pad_id must be a whole number, got {self.pad_id!r}")
        smallest_vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        if not 0 <= self.pad_id < smallest_vocab:
            raise ValueError(f"pad_id must be a token id in [0, {smallest_vocab}), got {self.pad_id}; 0 is usual")

    @property
    def d_k(self) -> int:
        """Features per head."""
        return self.d_model // self.num_heads

    @classmethod
    def seed_example(cls) -> ModelConfig:
        """The sizes the seed articles use: the paper's base model with 30000-token vocabularies."""
        return cls()

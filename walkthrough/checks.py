"""The validators every layer of the package shares: each raises a ValueError or TypeError that names the argument
and the fix, in the reader's language."""

from __future__ import annotations

from .i18n import _


def check_positive_int(name: str, value, hint: str = "") -> None:
    """Raise a ValueError (or TypeError) naming ``name`` unless ``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(_("{name} must be a whole number, got {value!r} ({type}){hint}").format(
            name=name, value=value, type=type(value).__name__, hint=hint))
    if value < 1:
        raise ValueError(_("{name} must be at least 1, got {value}{hint}").format(name=name, value=value, hint=hint))


def check_token_id(name: str, value, vocab_size: int) -> None:
    """A single token id (pad, sos, eos): a whole number in [0, vocab_size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(_("{name} must be a whole-number token id, got {value!r} ({type})").format(
            name=name, value=value, type=type(value).__name__))
    if not 0 <= value < vocab_size:
        raise ValueError(_("{name} must be a token id in [0, {vocab_size}), got {value}").format(
            name=name, vocab_size=vocab_size, value=value))


def check_heads(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> None:
    """d_model splits into num_heads heads of d_k; num_kv_heads (grouped-query attention) divides num_heads."""
    check_positive_int("d_model", d_model)
    check_positive_int("num_heads", num_heads)
    if d_model % num_heads:
        fits = [h for h in range(1, min(d_model, 64) + 1) if d_model % h == 0]
        raise ValueError(_("d_model={d_model} is not divisible by num_heads={num_heads}: each head gets "
                         "d_model / num_heads features, so pick num_heads from {fits} or change d_model").format(
                             d_model=d_model, num_heads=num_heads, fits=fits))
    if num_kv_heads is not None:
        check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            fits = [h for h in range(1, num_heads + 1) if num_heads % h == 0]
            raise ValueError(_("num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}: each K/V head "
                             "serves a whole group of query heads, so pick num_kv_heads from {fits}").format(
                                 num_kv_heads=num_kv_heads, num_heads=num_heads, fits=fits))


def check_same_batch(**tensors) -> None:
    """Every named tensor has the same batch size (dim 0): one source sentence per target sentence."""
    sizes = {name: t.size(0) for name, t in tensors.items()}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise ValueError(_("batch sizes differ: {listed}; each must hold the same sentences (one row per sentence)")
            .format(listed=listed))


def check_rope_pairs(d_k: int) -> None:
    """Rotary positions turn features in pairs (2i, 2i+1): d_k must be even."""
    if d_k % 2:
        raise ValueError(_("rotary positions turn features in pairs, so d_k must be even, got d_k={d_k}; "
                         "d_k = d_model / num_heads: change d_model or num_heads").format(d_k=d_k))


def check_dropout(dropout) -> None:
    """A dropout probability: a number in [0, 1), the one check of it wherever it is given."""
    message = _("dropout must be in [0, 1) (0 turns it off, 0.1 is the paper's), got {dropout!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(message.format(dropout=dropout))
    if not 0 <= dropout < 1:  # NaN fails this too
        raise ValueError(message.format(dropout=dropout))


def check_choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(_("{name} must be one of {choices}, got {value!r}").format(
            name=name, choices=choices, value=value))


def check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(_("{name} must be True or False, got {value!r}").format(name=name, value=value))


def check_positive_number(name: str, value, usual: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(_("{name} must be a number > 0 ({usual} is usual), got {value!r}").format(
            name=name, usual=usual, value=value))

"""The validators every layer of the package shares, the one home of input checking: each raises a ValueError or
TypeError that names the argument and the fix, in the reader's language. The layers call them on entry (a model
once, for everything it then makes itself) and otherwise read as the math."""

from __future__ import annotations

import torch

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


def check_fraction(name: str, value, hint: str) -> None:
    """A probability such as dropout or label smoothing: a number in [0, 1), the one check of both wherever they
    are given. ``hint``: the usual values, said in the message."""
    message = _("{name} must be in [0, 1) ({hint}), got {value!r}").format(name=name, hint=hint, value=value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(message)
    if not 0 <= value < 1:  # NaN fails this too
        raise ValueError(message)


def check_dropout(dropout) -> None:
    check_fraction("dropout", dropout, _("0 turns it off, 0.1 is the paper's"))


def check_smoothing(smoothing) -> None:
    check_fraction("smoothing", smoothing, _("0.1 is usual; 0 turns smoothing off"))


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


def check_ids(ids: torch.Tensor, vocab_size: int, name: str, max_len: int | None = None, offset: int = 0) -> None:
    """Reject anything that is not a [B, L] tensor (L >= 1) of integer ids in [0, vocab_size); with ``max_len``,
    also ids at positions offset .. offset+L-1 past a table of max_len rows."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(_("{name} must be a torch tensor of token ids, got {type}; use torch.tensor(...)").format(
            name=name, type=type(ids).__name__))
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(_("{name} must hold integer token ids (int64), got dtype {dtype}; "
                        "convert with {name}.long()").format(name=name, dtype=ids.dtype))
    if ids.dim() != 2:
        raise ValueError(
            _("{name} must have 2 dims [B, L] (batch, length), got shape {ids_shape}; "
            "for one sentence use {name}.unsqueeze(0)").format(name=name, ids_shape=list(ids.shape))
        )
    if ids.size(0) == 0 or ids.size(1) == 0:
        raise ValueError(_("{name} is empty (shape {ids_shape}): give at least one sentence of at least one "
                         "token (a target starts with <sos>)").format(name=name, ids_shape=list(ids.shape)))
    if ids.device.type != "meta":
        low, high = (int(end) for end in torch.aminmax(ids))
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(_("{name} holds token id {bad}, outside the vocabulary [0, {vocab_size}); "
                             "check the tokeniser or raise the vocab size").format(
                                 name=name, bad=bad, vocab_size=vocab_size))
    if max_len is not None:
        check_positions(ids.size(1), offset, max_len)


def check_positions(length: int, offset: int, max_len: int) -> None:
    """Positions offset .. offset+length-1 must exist in a table of max_len rows."""
    if offset + length > max_len:
        what = f"positions {offset}..{offset + length - 1} go past" if offset else \
            f"sequence length {length} is longer than"
        raise ValueError(_("{what} max_len={max_len}; raise max_len in the config or shorten the input").format(
            what=what, max_len=max_len))


def check_mask(mask: torch.Tensor, scores_shape: torch.Size) -> None:
    """A mask must be bool and broadcast to the scores [B, H, L_q, L_k]."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(_("mask must be a bool tensor (True = may attend), got {got}; "
                        "for a 0/1 mask use mask.bool(), for an nn.MultiheadAttention mask use ~mask").format(got=got))
    # broadcasts to the scores: no more dims, and each of its dims 1 or the scores' (plain Python: every layer asks)
    fits = mask.dim() <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape)))
    if not fits:
        raise ValueError(_("mask shape {mask_shape} does not broadcast to the scores "
                         "{list_scores_shape} [B, H, L_q, L_k]; padding masks are [B, 1, 1, L_k], "
                         "causal masks [L_q, L_k]").format(
                             mask_shape=list(mask.shape), list_scores_shape=list(scores_shape)))


def check_rope_input(x: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None) -> None:
    """x: a float tensor [..., L, d_k] with even d_k; offset: a whole number >= 0 (the first position);
    positions: None, or whole numbers >= 0 [B, L] for x [B, H, L, d_k]."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(_("x must be a float tensor [B, H, L, d_k] (queries or keys), got {got}; "
                        "rotating whole numbers rounds every feature away: convert with x.float()").format(got=got))
    if x.dim() < 2:
        raise ValueError(_("x must be [..., L, d_k] (usually [B, H, L, d_k]), got shape {x_shape}").format(
            x_shape=list(x.shape)))
    check_rope_pairs(x.size(-1))
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(_("offset must be a whole number of positions (the first one's index), got {offset!r}").format(
            offset=offset))
    if offset < 0:
        raise ValueError(_("offset must be >= 0 (positions start at 0), got {offset}").format(offset=offset))
    if positions is not None:
        if x.dim() != 4:
            raise ValueError(_("x must be [B, H, L, d_k] when positions [B, L] are given, got shape "
                               "{shape}").format(shape=list(x.shape)))
        check_position_ids(positions, x.size(0), x.size(2))


def check_position_ids(positions, batch: int, length: int) -> None:
    """positions: whole numbers >= 0 [B, L], one per batch row and sequence position (reading the values is a host
    sync: a model, which makes its positions itself, never asks)."""
    if not isinstance(positions, torch.Tensor) or positions.is_floating_point() or positions.dtype == torch.bool:
        got = positions.dtype if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise TypeError(_("positions must be a tensor of whole numbers [B, L] (each row's position ids), got "
                          "{got}").format(got=got))
    if positions.shape != (batch, length):
        raise ValueError(_("positions must be [B, L] = {wanted} (one per row and position), got {got}").format(
            wanted=[batch, length], got=list(positions.shape)))
    if positions.device.type != "meta" and positions.numel() and int(positions.min()) < 0:
        raise ValueError(_("positions must be >= 0 (positions start at 0), got {low}").format(
            low=int(positions.min())))

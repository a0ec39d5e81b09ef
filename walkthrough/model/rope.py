"""Rotary positions (RoFormer, notebook 09): Q and K turned by their positions inside attention."""

from __future__ import annotations

import torch

from ..checks import check_positive_int, check_rope_input
from ..i18n import _


def rope_angles(length: int, d_k: int, offset: int = 0, device=None,
                dtype: torch.dtype = torch.float32, base: float = 10000.0) -> torch.Tensor:
    """[L, d_k/2]: angle pos · base^(-2i/d_k) for positions offset..offset+L-1 and feature pairs i.

    Computed in ``dtype``: float32 rounds an angle near position 10⁶ by up to ~0.06 rad, float64 does not.
    """
    position = torch.arange(offset, offset + length, dtype=dtype, device=device)  # [L]
    return torch.outer(position, rope_frequencies(d_k, device, dtype, base))


def rope_frequencies(d_k: int, device=None, dtype: torch.dtype = torch.float32, base: float = 10000.0) -> torch.Tensor:
    """[d_k/2]: the angle per position of feature pair i, base^(-2i/d_k) (base 10000 in RoFormer, 500000 in
    Llama 3: a larger base turns the slow pairs slower, for longer contexts)."""
    return float(base) ** (-torch.arange(0, d_k, 2, dtype=dtype, device=device) / d_k)


def apply_rope(x: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None,
               base: float = 10000.0) -> torch.Tensor:
    """Rotate each feature pair (2i, 2i+1) of x [B, H, L, d_k] by its position's angle -> [B, H, L, d_k].

    Position m turns pair i by m·θ_i, so a query at m and a key at n meet at angle (m - n)·θ_i: their
    score depends on the distance m - n alone. Nothing is added to the token vectors. ``offset``: the
    position of x's first row (after the cached ones when decoding). ``positions`` [B, L] instead: each
    batch row's own positions (left-padded prompts: every row counts from its first real token).
    ``base``: of the angles (``rope_frequencies``). Checks its inputs, then ``rotate``s.
    """
    check_rope_input(x, offset, positions)
    return rotate(x, offset, positions, base)


def rotate(x: torch.Tensor, offset: int, positions: torch.Tensor | None, base: float) -> torch.Tensor:
    """``apply_rope`` on inputs already checked (attention's own Q and K)."""
    angle_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32  # half precision: float32 angles
    if positions is None:
        angles = rope_angles(x.size(-2), x.size(-1), offset, x.device, angle_dtype, base)  # [L, d_k/2]
    else:
        frequency = rope_frequencies(x.size(-1), x.device, angle_dtype, base)  # [d_k/2]
        angles = positions.to(angle_dtype)[:, None, :, None] * frequency  # [B, 1, L, d_k/2]: one row's for all heads
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # [B, H, L, d_k/2] each: the two coordinates of every pair
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # [B, H, L, d_k/2, 2]
    return rotated.flatten(-2)  # [B, H, L, d_k], pairs back in place


def position_ids(ids: torch.Tensor, pad_id: int | None, new_positions: int | None = None) -> torch.Tensor:
    """ids [B, t] (every id so far) -> each one's position [B, t], or the last n's [B, n] (``new_positions=n``).

    Each row counts from its first real token, so left padding takes no position: a left-padded prompt
    gets the positions it has alone. The PAD before it get 0 (they are never attended to). ``pad_id=None``:
    no padding, positions 0, 1, ...
    """
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        got = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise TypeError(_("ids must be a tensor of integer token ids [B, t], got {got}").format(got=got))
    if ids.dim() != 2:
        raise ValueError(_("ids must be [B, t] (every id so far, one row per sequence), got shape {shape}; for "
                           "one sequence use ids.unsqueeze(0)").format(shape=list(ids.shape)))
    if new_positions is not None:
        check_positive_int("new_positions", new_positions)
        if new_positions > ids.size(1):
            raise ValueError(_("new_positions={new_positions} is more than the {t} ids given: the new ids are "
                               "the last ones of ids [B, t], so new_positions is at most t").format(
                                   new_positions=new_positions, t=ids.size(1)))
    first = torch.zeros(ids.size(0), dtype=torch.long, device=ids.device) if pad_id is None else \
        (ids != pad_id).long().argmax(dim=1)  # [B]: index of the first real token (argmax: the first max)
    positions = (torch.arange(ids.size(1), device=ids.device) - first[:, None]).clamp(min=0)  # [B, t]
    return positions if new_positions is None else positions[:, ids.size(1) - new_positions:]

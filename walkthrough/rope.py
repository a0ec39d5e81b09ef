"""Rotary positions (RoFormer, notebook 09): Q and K turned by their positions inside attention."""

from __future__ import annotations

import torch

from .config import check_rope_pairs, checks_inputs


def rope_angles(length: int, d_k: int, offset: int = 0, device=None,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[L, d_k/2]: angle pos · 10000^(-2i/d_k) for positions offset..offset+L-1 and feature pairs i.

    Computed in ``dtype``: float32 rounds an angle near position 10⁶ by up to ~0.06 rad, float64 does not.
    """
    position = torch.arange(offset, offset + length, dtype=dtype, device=device)  # [L]
    frequency = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=dtype, device=device) / d_k)  # [d_k/2]
    return torch.outer(position, frequency)


def check_rope_input(x: torch.Tensor, offset: int = 0) -> None:
    """x: a float tensor [..., L, d_k] with even d_k; offset: a whole number >= 0 (the first position)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a float tensor [B, H, L, d_k] (queries or keys), got {got}; "
                        f"rotating whole numbers rounds every feature away: convert with x.float()")
    if x.dim() < 2:
        raise ValueError(f"x must be [..., L, d_k] (usually [B, H, L, d_k]), got shape {list(x.shape)}")
    check_rope_pairs(x.size(-1))
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be a whole number of positions (the first one's index), got {offset!r}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0 (positions start at 0), got {offset}")


@checks_inputs(check_rope_input)
def apply_rope(x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Rotate each feature pair (2i, 2i+1) of x [B, H, L, d_k] by its position's angle -> [B, H, L, d_k].

    Position m turns pair i by m·θ_i, so a query at m and a key at n meet at angle (m - n)·θ_i: their
    score depends on the distance m - n alone. Nothing is added to the token vectors. ``offset``: the
    position of x's first row (after the cached ones when decoding).
    """
    check_rope_input(x, offset)
    angle_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32  # half precision: float32 angles
    angles = rope_angles(x.size(-2), x.size(-1), offset, x.device, angle_dtype)  # [L, d_k/2]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # [B, H, L, d_k/2] each: the two coordinates of every pair
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # [B, H, L, d_k/2, 2]
    return rotated.flatten(-2)  # [B, H, L, d_k], pairs back in place

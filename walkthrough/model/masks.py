"""Attention masks. One convention everywhere in this package: bool, True = may attend.

PyTorch has two: ``nn.MultiheadAttention``/``nn.Transformer`` take True = blocked, while
``F.scaled_dot_product_attention`` takes True = may attend. ``to_blocked`` converts ours to the first.
"""

from __future__ import annotations

import torch

from ..checks import check_positive_int
from ..i18n import _
from ..recording import record


def padding_mask(ids: torch.Tensor, pad_id: int | None, start_token: bool = False) -> torch.Tensor:
    """ids [B, L] -> [B, 1, 1, L]: True where the key is a real token.

    The two 1s let it broadcast over heads and over query positions: every query may look at
    the same real keys. ``pad_id=None``: the model has no padding (GPT-2), every token is real.
    ``start_token``: ids[:, 0] is the decoder's start token, real whatever its id (Marian's is its pad id).
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        shape = list(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(_("ids must be a [B, L] tensor of token ids, got {shape}").format(shape=shape))
    real = torch.ones_like(ids, dtype=torch.bool) if pad_id is None else ids != pad_id  # [B, L]
    if start_token:
        real[:, 0] = True
    mask = real[:, None, None, :]  # [B, 1, 1, L_k]
    record("padding_mask", mask)
    return mask


def causal_mask(length: int, device: torch.device | str | None = None, queries: int | None = None) -> torch.Tensor:
    """[L, L] lower triangle: position q may attend to positions 0..q, never to later ones.

    ``queries=n``: only the last n rows, [n, L] (a cached decoding step asks with its newest positions).
    """
    check_positive_int("length", length)
    queries = length if queries is None else queries
    check_positive_int("queries", queries)
    mask = torch.ones(queries, length, dtype=torch.bool, device=device).tril(length - queries)  # [L_q, L_k]
    record("causal_mask", mask)
    return mask


def decoder_self_mask(tgt: torch.Tensor, pad_id: int | None, new_positions: int | None = None,
                      start_token: bool = False) -> torch.Tensor:
    """tgt [B, L] -> [B, 1, L, L]: a key is allowed if it is real AND not in the future.

    ``new_positions=n`` (decoding with a cache: tgt holds every id so far, only the last n ask):
    -> [B, 1, n, L]. For n = 1 the causal part is all True: the newest position's past is everything.
    ``pad_id``, ``start_token``: as in ``padding_mask``.
    """
    length = tgt.size(1)
    queries = length if new_positions is None else new_positions
    causal = causal_mask(length, device=tgt.device, queries=queries)  # [L_q, L_k]
    mask = padding_mask(tgt, pad_id, start_token) & causal  # [B, 1, L_q, L_k]
    record("self_mask", mask)
    return mask


def to_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Our True = may attend -> ``nn.MultiheadAttention``'s True = blocked (one source article draws it so)."""
    return ~mask

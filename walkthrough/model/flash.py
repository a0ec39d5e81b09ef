"""FlashAttention by hand: exact attention computed tile by tile, never holding the [L_q, L_k] scores.

Plain attention builds the scores and the weights, [B, H, L_q, L_k] each: memory grows as L². Softmax
seems to need a whole row before it can give any weight (its max, for stability, and its sum). The
online softmax (在线 softmax) does not: per query row it keeps a running max ``m``, a running sum
``l`` of exp(score - m) and a running output ``acc`` = Σ exp(score - m)·v, and when a later block of
keys brings a larger max it rescales what it has by exp(m_old - m_new). At the end, out = acc / l,
exactly softmax(scores) @ V, and lse = m + log(l) is the row's log-sum-exp: the one number per row the
backward keeps to recompute any weight, exp(score - lse).

FlashAttention runs this over tiles (分块): a block of ``block_q`` queries against a block of
``block_k`` keys, so only [B, H, block_q, block_k] scores exist at a time. With ``causal=True`` the
tiles wholly above the diagonal are skipped (never computed), and the ones the diagonal crosses are
computed with the causal mask inside them. The loops are for reading, not speed: a GPU kernel runs
the same arithmetic with each tile in the on-chip SRAM.

Conventions as in ``attention.scaled_dot_product_attention``: a bool mask, True = may attend,
broadcastable to [B, H, L_q, L_k]; a blocked score becomes the dtype's minimum, and a row with nothing
to attend to gives 0 (it reads no value). ``causal`` is aligned
bottom-right, as ``masks.causal_mask(L_k, queries=L_q)``: query i sees keys 0 .. i + L_k - L_q.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..checks import check_mask, check_positive_int
from ..i18n import N_, _


@dataclass(frozen=True)
class Tile:
    """One tile of the [L_q, L_k] grid: a block of query positions against a block of key positions.

    ``diagonal``: the causal diagonal crosses it, so it is computed with the causal mask inside (partly masked).
    """

    queries: range
    keys: range
    diagonal: bool = False


def flash_tiles(L_q: int, L_k: int, block_q: int = 16, block_k: int = 16, causal: bool = False) -> list[Tile]:
    """The tiles ``flash_attention`` computes, in its order (query blocks outer, key blocks inner).

    With ``causal`` the tiles wholly above the diagonal are left out: every score in them is blocked.
    """
    check_positive_int("L_q", L_q)
    check_positive_int("L_k", L_k)
    _check_blocks(block_q, block_k, causal)
    offset = L_k - L_q  # causal, bottom-right: query i sees keys 0 .. i + offset (the last query sees every key)
    tiles = []
    for q_start in range(0, L_q, block_q):
        queries = range(q_start, min(q_start + block_q, L_q))
        for k_start in range(0, L_k, block_k):
            keys = range(k_start, min(k_start + block_k, L_k))
            if causal and keys[0] > queries[-1] + offset:
                continue  # wholly above the diagonal: skipped, not computed and masked
            tiles.append(Tile(queries, keys, causal and keys[-1] > queries[0] + offset))
    return tiles


def online_softmax_step(m: torch.Tensor, sum_exp: torch.Tensor, acc: torch.Tensor, scores: torch.Tensor,
                        v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Take in one block of keys. Running max m [..., rows], running sum l = Σ exp(score - m) [..., rows],
    running output acc = Σ exp(score - m)·v [..., rows, d_v]; scores [..., rows, keys] (scaled, masked),
    v [..., keys, d_v] -> the new (m, l, acc).

    Start from m = the dtype's minimum, l = 0, acc = 0; after the last block acc / l = softmax(scores) @ V.
    """
    m_new = torch.maximum(m, scores.amax(-1))  # [..., rows]
    rescale = torch.exp(m - m_new)  # [..., rows]: 1 where the max stayed, < 1 where a larger score arrived
    p = torch.exp(scores - m_new[..., None])  # [..., rows, keys]: this block's weights, not yet divided by l
    return m_new, rescale * sum_exp + p.sum(-1), rescale[..., None] * acc + p @ v


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                    causal: bool = False, block_q: int = 16, block_k: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V in tiles: q [B, H, L_q, d_k], k [B, H, L_k, d_k], v [B, H, L_k, d_v]
    -> (out [B, H, L_q, d_v], lse [B, H, L_q]), with no [L_q, L_k] tensor.

    Equal to ``scaled_dot_product_attention(q, k, v, mask)`` (float rounding aside); ``causal=True`` adds
    the causal mask and skips the tiles above its diagonal. ``lse`` = logsumexp of the row's scaled,
    masked scores. Half-precision inputs are accumulated in float32, as FlashAttention does (a running sum of
    70,000 equal weights passes float16's 65,504): out comes back in the input dtype, lse stays float32.
    """
    mask = _check_inputs(q, k, v, mask, causal, block_q, block_k)
    lowest = torch.finfo(q.dtype).min  # a blocked score; float32 holds float16's and bfloat16's exactly
    running = torch.promote_types(q.dtype, torch.float32)  # the dtype of m, l and acc
    scale = 1 / math.sqrt(q.size(-1))
    by_block: dict[int, list[Tile]] = {}  # query block start -> its tiles (causal: none for a block above them all)
    for tile in flash_tiles(q.size(2), k.size(2), block_q, block_k, causal):
        by_block.setdefault(tile.queries.start, []).append(tile)
    outs, lses = [], []
    for start in range(0, q.size(2), block_q):
        rows = slice(start, start + block_q)
        q_block = q[:, :, rows].to(running)  # [B, H, b_q, d_k]
        m = torch.full(q_block.shape[:3], lowest, dtype=running, device=q.device)  # [B, H, b_q]
        sum_exp = torch.zeros_like(m)  # [B, H, b_q]: l
        acc = torch.zeros(*q_block.shape[:3], v.size(-1), dtype=running, device=q.device)  # [B, H, b_q, d_v]
        for tile in by_block.get(start, []):
            scores = _scores(q_block, k, tile, mask, scale, k.size(2) - q.size(2), lowest)  # [B, H, b_q, b_k]
            m, sum_exp, acc = online_softmax_step(m, sum_exp, acc, scores, v[:, :, _as_slice(tile.keys)].to(running))
        # A row that saw only blocked scores (m still the minimum) attends to nothing: 0, as the plain path
        # gives it. l >= 1 once a tile is seen (its max adds exp(0)).
        blocked = m == lowest  # [B, H, b_q]
        sum_exp = sum_exp.clamp(min=1)
        outs.append(torch.where(blocked[..., None], 0.0, acc / sum_exp[..., None]).to(q.dtype))
        lses.append(torch.where(blocked, lowest, m + sum_exp.log()))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)  # [B, H, L_q, d_v], [B, H, L_q]


def flash_attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                             lse: torch.Tensor, d_out: torch.Tensor, mask: torch.Tensor | None = None,
                             causal: bool = False, block_q: int = 16, block_k: int = 16,
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of q, k and v through ``flash_attention``, given d_out [B, H, L_q, d_v] (the gradient of out):
    tile by tile, with no [L_q, L_k] tensor.

    Each tile's weights are recomputed from q, k and the forward's ``lse`` (P = exp(S - lse)), and the
    softmax backward dS = P ∘ (dP - Δ) needs only one number per row, Δ = rowsum(d_out ∘ out). A
    blocked score gets no gradient, and a row with nothing to attend to (lse at the dtype's minimum) gives none.
    """
    mask = _check_inputs(q, k, v, mask, causal, block_q, block_k)
    for name, tensor, shape in (("out", out, (*q.shape[:3], v.size(-1))), ("lse", lse, q.shape[:3]),
                                ("d_out", d_out, (*q.shape[:3], v.size(-1)))):
        if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != tuple(shape):
            got = list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ValueError(_("{name} must have shape {list_shape}, got {got}: pass what flash_attention "
                             "returned for these q, k, v (and the gradient of out)").format(
                                 name=name, list_shape=list(shape), got=got))
    lowest = torch.finfo(q.dtype).min
    scale = 1 / math.sqrt(q.size(-1))
    delta = (d_out * out).sum(-1)  # [B, H, L_q]: Δ_i = Σ_j P_ij dP_ij
    grad_q, grad_k, grad_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for tile in flash_tiles(q.size(2), k.size(2), block_q, block_k, causal):
        rows, keys = _as_slice(tile.queries), _as_slice(tile.keys)
        scores = _scores(q[:, :, rows], k, tile, mask, scale, k.size(2) - q.size(2), lowest)  # [B, H, b_q, b_k]
        # the forward's weights; a blocked score weighs 0 (only a row blocked throughout would make it exp(0))
        p = torch.where(scores > lowest, torch.exp(scores - lse[:, :, rows, None]), 0)  # [B, H, b_q, b_k]
        grad_v[:, :, keys] += p.transpose(-2, -1) @ d_out[:, :, rows]  # [B, H, b_k, d_v]
        d_p = d_out[:, :, rows] @ v[:, :, keys].transpose(-2, -1)  # [B, H, b_q, b_k]
        d_s = p * (d_p - delta[:, :, rows, None]) * scale  # [B, H, b_q, b_k]: through softmax and ÷√d_k
        grad_q[:, :, rows] += d_s @ k[:, :, keys]  # [B, H, b_q, d_k]
        grad_k[:, :, keys] += d_s.transpose(-2, -1) @ q[:, :, rows]  # [B, H, b_k, d_k]
    return grad_q, grad_k, grad_v


def _as_slice(positions: range) -> slice:
    return slice(positions.start, positions.stop)


def _scores(q_block: torch.Tensor, k: torch.Tensor, tile: Tile, mask: torch.Tensor | None, scale: float,
            offset: int, lowest: float) -> torch.Tensor:
    """One tile's scaled scores [B, H, b_q, b_k], the blocked ones set to ``lowest``: by the mask, and by the
    causal mask (query i sees keys up to i + offset) on a tile the diagonal crosses."""
    scores = q_block @ k[:, :, _as_slice(tile.keys)].to(q_block.dtype).transpose(-2, -1) * scale  # [B, H, b_q, b_k]
    if mask is not None:
        rows = _as_slice(tile.queries) if mask.size(2) > 1 else slice(None)  # a dim of 1 broadcasts: keep it whole
        keys = _as_slice(tile.keys) if mask.size(3) > 1 else slice(None)
        scores = torch.where(mask[:, :, rows, keys], scores, lowest)
    if tile.diagonal:
        keys, queries = (torch.tensor(positions, device=q_block.device) for positions in (tile.keys, tile.queries))
        seen = keys[None, :] <= queries[:, None] + offset  # [b_q, b_k]
        scores = torch.where(seen, scores, lowest)
    return scores


def _check_blocks(block_q, block_k, causal) -> None:
    for name, value in (("block_q", block_q), ("block_k", block_k)):
        check_positive_int(name, value, _("; a block is a number of positions, e.g. {name}=16").format(name=name))
    if not isinstance(causal, bool):
        raise TypeError(_("causal must be True or False, got {causal!r}").format(causal=causal))


def _check_inputs(q, k, v, mask, causal, block_q, block_k) -> torch.Tensor | None:
    """Every argument checked before any work; returns the mask with 4 dims (leading 1s added) or None."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(_("{name} must be a torch tensor [B, H, L, d_k], got {type}").format(
                name=name, type=type(x).__name__))
        if not x.is_floating_point():
            raise TypeError(_("{name} must hold floating-point numbers, got {dtype}: use {name}.float()").format(
                name=name, dtype=x.dtype))
        if x.dim() != 4:
            raise ValueError(_("{name} must be [B, H, L, d_k], got shape {x_shape}; "
                             "for one head or one sentence add the dim with {name}[None] or {name}.unsqueeze(1)")
                                 .format(name=name, x_shape=list(x.shape)))
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(_("q, k and v must share one dtype, got {q_dtype}, {k_dtype}, {v_dtype}: convert with .to()")
            .format(q_dtype=q.dtype, k_dtype=k.dtype, v_dtype=v.dtype))
    for dim, what in ((0, N_("batch size B")), (1, N_("number of heads H"))):
        if not q.size(dim) == k.size(dim) == v.size(dim):
            raise ValueError(_("q, k and v must have the same {what} (dim {dim}), got {q_size_dim}, {k_size_dim}, "
                             "{v_size_dim}; for grouped K/V heads repeat them first (repeat_interleave on dim 1)")
                                 .format(what=_(what), dim=dim, q_size_dim=q.size(dim), k_size_dim=k.size(dim),
                                 v_size_dim=v.size(dim)))
    if q.size(3) != k.size(3):
        raise ValueError(_("q and k must have the same d_k (dim 3): every query is dotted with every key, "
                         "got {q_size_3} and {k_size_3}").format(q_size_3=q.size(3), k_size_3=k.size(3)))
    if q.size(3) == 0:
        raise ValueError(_("q and k have d_k = 0 features (dim 3): a score is a dot product of d_k numbers, "
                           "scaled by 1/√d_k; give each head at least one feature"))
    if k.size(2) != v.size(2):
        raise ValueError(_("k and v must have the same length L_k (dim 2): one value per key, "
                         "got {k_size_2} and {v_size_2}").format(k_size_2=k.size(2), v_size_2=v.size(2)))
    _check_blocks(block_q, block_k, causal)
    if mask is None:
        return None
    check_mask(mask, torch.Size((q.size(0), q.size(1), q.size(2), k.size(2))))
    return mask[(None,) * (4 - mask.dim())]  # [B or 1, H or 1, L_q or 1, L_k or 1]

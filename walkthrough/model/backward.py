"""The backward pass of each step, written out: what ``loss.backward()`` computes, one function per step.

Each function takes what the forward step saw and the gradient of the loss with respect to the step's
output (``d_out``), and returns the gradients with respect to its inputs and weights. The rule behind
every shape: a tensor's gradient has the tensor's shape, and a weight's gradient sums over every
batch dim (``dW = Xᵀ·dY`` over B and L: 32 sentences of 10 tokens vanish into one ``[D_out, D_in]``).
tests/test_backward.py checks each against ``torch.autograd.grad``.
"""

from __future__ import annotations

import math

import torch

from ..checks import check_mask, check_smoothing
from ..i18n import _


def _check_tensor(name: str, value, dims: str | None = None) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(_("{name} must be a torch tensor, got {type}").format(name=name, type=type(value).__name__))
    if dims is not None and value.dim() != len(dims.split()):
        raise ValueError(_("{name} must be [{dims}], got shape {value_shape}").format(
            name=name, dims=', '.join(dims.split()), value_shape=list(value.shape)))


def _check_same_shape(name: str, value: torch.Tensor, expected: torch.Size, what: str) -> None:
    if value.shape != expected:
        raise ValueError(_("{name} must have {what}'s shape {list_expected} (a gradient has the shape of what it "
                         "is the gradient of), got {value_shape}").format(
                             name=name, what=what, list_expected=list(expected), value_shape=list(value.shape)))


def _check_same_dtype(**tensors: torch.Tensor) -> None:
    """One dtype for every tensor of a step (a matrix product of float32 and float64 has none)."""
    if len({t.dtype for t in tensors.values()}) > 1:
        listed = ", ".join(f"{name} {t.dtype}" for name, t in tensors.items())
        raise TypeError(_("{names} must share one dtype, got {listed}: convert them with .to(...), e.g. "
                          "x.to(weight.dtype)").format(names=", ".join(tensors), listed=listed))


def softmax_backward(probs: torch.Tensor, d_probs: torch.Tensor) -> torch.Tensor:
    """probs = softmax(scores) over the last dim, d_probs = ∂loss/∂probs -> d_scores, both [..., L_k].

    Row by row, the Jacobian of softmax is diag(p) - p pᵀ, so d_scores = p ⊙ (d_probs - Σ_j p_j d_probs_j):
    each entry's gradient minus the row's probability-weighted mean. No [L_k, L_k] matrix is built.
    """
    _check_tensor("probs", probs)
    _check_tensor("d_probs", d_probs)
    _check_same_shape("d_probs", d_probs, probs.shape, "probs")
    row_mean = (probs * d_probs).sum(dim=-1, keepdim=True)  # [..., 1]
    return probs * (d_probs - row_mean)  # [..., L_k]


def linear_backward(x: torch.Tensor, weight: torch.Tensor, d_out: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """y = x Wᵀ + b with x [..., D_in], weight [D_out, D_in] (as ``nn.Linear`` stores it), d_out [..., D_out]
    -> (d_x [..., D_in], d_weight [D_out, D_in], d_bias [D_out]).

    d_x = d_out W; d_weight = d_outᵀ x and d_bias = Σ d_out, summed over every batch dim (all rows of all sentences).
    """
    _check_tensor("x", x)
    _check_tensor("weight", weight, "D_out D_in")
    _check_tensor("d_out", d_out)
    _check_same_dtype(x=x, weight=weight, d_out=d_out)
    if x.size(-1) != weight.size(1):
        raise ValueError(_("x has {x_size_1} features but weight [D_out, D_in] = {weight_shape} expects "
                         "{weight_size_1}: pass nn.Linear's .weight as it is (not transposed)").format(
                             x_size_1=x.size(-1), weight_shape=list(weight.shape), weight_size_1=weight.size(1)))
    _check_same_shape("d_out", d_out, x.shape[:-1] + (weight.size(0),), "the output x Wᵀ")
    rows_in = x.reshape(-1, x.size(-1))  # [B·L, D_in]: every batch dim flattened into rows
    rows_out = d_out.reshape(-1, d_out.size(-1))  # [B·L, D_out]
    d_x = d_out @ weight  # [..., D_in]
    d_weight = rows_out.T @ rows_in  # [D_out, D_in]: the B·L rows summed away
    d_bias = rows_out.sum(dim=0)  # [D_out]
    return d_x, d_weight, d_bias


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                       mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """context = softmax(Q Kᵀ / √d_k, masked) V; q [B, H, L_q, d_k], k [B, H, L_k, d_k], v [B, H, L_k, d_v],
    d_out [B, H, L_q, d_v], mask bool (True = may attend) broadcastable to [B, H, L_q, L_k]
    -> (d_q [B, H, L_q, d_k], d_k [B, H, L_k, d_k], d_v [B, H, L_k, d_v]).

    The forward's weights are recomputed here (autograd keeps them instead). Blocked scores were set to
    the dtype's minimum, so they get no gradient; a row that may see no key attended to nothing (weights 0,
    as forward) and gives none.
    """
    for name, value in (("q", q), ("k", k), ("v", v), ("d_out", d_out)):
        _check_tensor(name, value, "B H L d")
    if k.shape[:2] != q.shape[:2] or k.size(-1) != q.size(-1) or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(_("q [B, H, L_q, d_k] = {q_shape}, k [B, H, L_k, d_k] = {k_shape} and "
                         "v [B, H, L_k, d_v] = {v_shape} do not fit together").format(
                             q_shape=list(q.shape), k_shape=list(k.shape), v_shape=list(v.shape)))
    _check_same_shape("d_out", d_out, q.shape[:-1] + (v.size(-1),), "the context [B, H, L_q, d_v]")
    _check_same_dtype(q=q, k=k, v=v, d_out=d_out)
    scale = math.sqrt(q.size(-1))
    scores = q @ k.transpose(-2, -1) / scale  # [B, H, L_q, L_k]
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # [B, H, L_q, L_k]
    if mask is not None:
        weights = torch.where(mask.any(-1, keepdim=True), weights, 0.0)  # a row that sees no key: all 0
    d_v = weights.transpose(-2, -1) @ d_out  # [B, H, L_k, d_v]: each key's value collects from every query
    d_weights = d_out @ v.transpose(-2, -1)  # [B, H, L_q, L_k]
    d_scores = softmax_backward(weights, d_weights)  # [B, H, L_q, L_k]
    if mask is not None:
        d_scores = torch.where(mask, d_scores, 0.0)  # a blocked score was a constant, not Q·Kᵀ
    d_q = d_scores @ k / scale  # [B, H, L_q, d_k]
    d_k = d_scores.transpose(-2, -1) @ q / scale  # [B, H, L_k, d_k]
    return d_q, d_k, d_v


def layer_norm_backward(x: torch.Tensor, weight: torch.Tensor, d_out: torch.Tensor, eps: float = 1e-5
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """y = (x - mean) / √(var + eps) · weight + bias over the last dim; x [..., D], weight [D], d_out [..., D]
    -> (d_x [..., D], d_weight [D], d_bias [D]).

    With x̂ the normalised x and g = d_out · weight: d_x = (g - mean(g) - x̂ · mean(g · x̂)) / √(var + eps),
    the two means taken over each token's D features (mean and variance depend on every feature).
    """
    _check_tensor("x", x)
    _check_tensor("weight", weight, "D")
    _check_tensor("d_out", d_out)
    if weight.size(0) != x.size(-1):
        raise ValueError(_("weight must be [D] = [{x_size_1}] (one scale per feature of x), got {weight_shape}").format(
            x_size_1=x.size(-1), weight_shape=list(weight.shape)))
    _check_same_shape("d_out", d_out, x.shape, "x")
    if x.size(-1) == 0:
        raise ValueError(_("x has no features (D = 0, shape {x_shape}): LayerNorm takes the mean and variance "
                           "of each token's D features, so D must be at least 1").format(x_shape=list(x.shape)))
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:  # NaN fails too
        raise ValueError(_("eps must be a positive number (nn.LayerNorm's default is 1e-5), got {eps!r}").format(
            eps=eps))
    mean = x.mean(dim=-1, keepdim=True)  # [..., 1]
    rstd = (x.var(dim=-1, keepdim=True, correction=0) + eps).rsqrt()  # [..., 1]
    x_hat = (x - mean) * rstd  # [..., D]
    g = d_out * weight  # [..., D]
    d_x = rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    d_weight = (d_out * x_hat).reshape(-1, x.size(-1)).sum(dim=0)  # [D], summed over every token
    d_bias = d_out.reshape(-1, x.size(-1)).sum(dim=0)  # [D]
    return d_x, d_weight, d_bias


def cross_entropy_backward(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int,
                           smoothing: float = 0.0) -> torch.Tensor:
    """The gradient of the mean (label-smoothed) cross-entropy: logits [..., V], labels [...] class ids
    -> d_logits [..., V].

    softmax(logits) minus the target ((1 - ε) on the label plus ε/V everywhere), divided by the number of
    counted tokens; rows whose label is ``ignore_index`` (PAD) are zero: they were not in the loss.
    """
    _check_tensor("logits", logits)
    _check_tensor("labels", labels)
    if labels.shape != logits.shape[:-1]:
        raise ValueError(_("labels must be logits' shape without V, {list_logits_shape_1} (class ids, not "
                         "one-hot), got {labels_shape}").format(
                             list_logits_shape_1=list(logits.shape[:-1]), labels_shape=list(labels.shape)))
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise TypeError(_("labels must be integer class ids, got {dtype}; use labels.long()").format(
            dtype=labels.dtype))
    check_smoothing(smoothing)
    counted = labels != ignore_index  # [...]
    count = int(counted.sum())
    if count == 0:
        raise ValueError(_("every label is ignore_index={ignore_index}: no token counts, so the mean loss is "
                         "undefined; pass a batch with at least one real token").format(ignore_index=ignore_index))
    vocab = logits.size(-1)
    outside = counted & ((labels < 0) | (labels >= vocab))  # [...]
    if outside.any():
        raise ValueError(_("labels hold class id {bad}, outside [0, {vocab}) (V = logits.size(-1) = {vocab}), and "
                           "it is not ignore_index={ignore_index}: check the labels against the vocabulary").format(
                               bad=labels[outside][0].item(), vocab=vocab, ignore_index=ignore_index))
    target = torch.full_like(logits, smoothing / vocab)  # [..., V]
    target.scatter_add_(-1, labels.masked_fill(~counted, 0).unsqueeze(-1),  # ignored rows: any id, zeroed below
                        torch.full_like(logits[..., :1], 1 - smoothing))  # (1 - ε) more on the label
    d_logits = (logits.softmax(dim=-1) - target) / count  # [..., V]
    return torch.where(counted.unsqueeze(-1), d_logits, 0.0)


def embedding_backward(ids: torch.Tensor, d_out: torch.Tensor, num_embeddings: int) -> torch.Tensor:
    """rows = table[ids] with ids [B, L], d_out [B, L, D] -> d_table [V, D].

    An index-add: each looked-up row collects the gradients of every position that used it; every other
    row of the table gets exactly zero (a word not in the batch is not changed by this step).
    """
    _check_tensor("ids", ids)
    _check_tensor("d_out", d_out)
    if d_out.shape[:-1] != ids.shape:
        raise ValueError(_("d_out must be [*ids.shape, D] = [{ids}, D], "
                         "got {d_out_shape}").format(
                             ids=', '.join(map(str, ids.shape)), d_out_shape=list(d_out.shape)))
    if isinstance(num_embeddings, bool) or not isinstance(num_embeddings, int) or num_embeddings < 1:
        raise ValueError(_("num_embeddings must be the table's number of rows (the vocabulary size), "
                         "got {num_embeddings!r}").format(num_embeddings=num_embeddings))
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(_("ids must be integer token ids, got {dtype}; use ids.long()").format(dtype=ids.dtype))
    if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < num_embeddings:
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(_("ids hold token id {bad}, outside the table's rows [0, {num_embeddings}): check the "
                           "ids, or pass the table's own size as num_embeddings").format(
                               bad=bad, num_embeddings=num_embeddings))
    d_table = d_out.new_zeros(num_embeddings, d_out.size(-1))  # [V, D]
    return d_table.index_add_(0, ids.reshape(-1), d_out.reshape(-1, d_out.size(-1)))


def split_heads_backward(d_heads: torch.Tensor) -> torch.Tensor:
    """The split was view [B, L, D] -> [B, L, H, d_k], then transpose -> [B, H, L, d_k]: both only move
    numbers, so the gradient goes back through the inverse, transpose then view: d_heads [B, H, L, d_k]
    -> d_x [B, L, D] (the heads' merge)."""
    _check_tensor("d_heads", d_heads, "B H L d_k")
    batch, heads, length, d_k = d_heads.shape
    return d_heads.transpose(1, 2).reshape(batch, length, heads * d_k)  # [B, L, D]

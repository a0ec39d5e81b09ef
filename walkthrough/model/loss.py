"""The training loss: cross-entropy on class ids, PAD ignored, optional label smoothing."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checks import check_smoothing
from ..i18n import _
from ..recording import record


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, pad_id: int | None, smoothing: float = 0.0
                  ) -> torch.Tensor:
    """Cross-entropy of logits [B, L, V] against class ids [B, L], PAD positions ignored (``pad_id=None``: a
    model without padding, such as GPT-2, scores every position).

    Flattened here to [B·L, V] vs [B·L] so each predicted token is one row; ``F.cross_entropy`` would
    also take [B, V, L]. A one-hot [B, L, V] target is the same loss written out.
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError(_("logits and labels must be tensors: logits [B, L, V] floats, labels [B, L] class ids"))
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(_("logits must be [B, L, V] and labels [B, L] class ids; got {logits_shape} and "
                         "{labels_shape} (labels are ids, not one-hot)").format(
                             logits_shape=list(logits.shape), labels_shape=list(labels.shape)))
    check_smoothing(smoothing)
    all_pad = pad_id is not None and labels.device.type != "meta" and not (labels != pad_id).any()
    if all_pad:  # the mean over no tokens would be NaN
        raise ValueError(_("every label is PAD (pad_id={pad_id}): there is nothing to score; pass labels with at "
                         "least one real token (or the right pad_id)").format(pad_id=pad_id))
    record("labels", labels)
    flat_logits = logits.reshape(-1, logits.size(-1))  # [B·L, V]
    record("logits_flat", flat_logits)
    flat_labels = labels.reshape(-1)  # [B·L]
    record("labels_flat", flat_labels)
    ignored = -100 if pad_id is None else pad_id  # -100: cross_entropy's own "no index ignored" default
    return F.cross_entropy(flat_logits, flat_labels, ignore_index=ignored, label_smoothing=smoothing)

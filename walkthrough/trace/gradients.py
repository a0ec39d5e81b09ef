"""The gradient of every named step and every weight, from a real backward pass on the meta device.

The forward trace (``trace.py``) records each named step's shape. Here the same steps are recorded
with autograd switched on, the loss is differentiated with ``torch.autograd.grad`` on the meta device
(shapes only: any size costs nothing), and each step gets the shape of ∂loss/∂step beside its own.
The rule it shows: a tensor's gradient has the tensor's shape; a weight's gradient has the weight's
shape, its batch dims summed away. Ids and masks are not differentiable: they get no gradient.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass

import torch
from torch import nn

from ..checks import check_positive_int
from ..i18n import N_, _, ljust, width
from ..model.attention import keep_attention_weights
from ..model.config import GPTConfig, ModelConfig
from ..model.gpt import GPT
from ..model.loss import sequence_loss
from ..recording import Recorder, Row, listening
from .hooks import running_modules
from .meta import checked_sizes, meta_model


@dataclass(frozen=True)
class GradientRow:
    """One step of the forward pass (``forward``, a traced ``Row``) and the shape of the loss's gradient
    with respect to its output (``grad_shape``; None for ids and masks, which have no gradient)."""

    forward: Row
    grad_shape: tuple[int, ...] | None


class _RecordedTensors(torch.overrides.TorchFunctionMode):
    """Finds the tensor behind each row ``record`` appends: the latest tensor seen (as an argument or a
    result of a torch function) with the row's shape. ``record`` itself reads the tensor's dims, so the
    tensor it was given is the last one seen before its row appears."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder
        self.tensors: list[torch.Tensor | None] = []
        self.recent: list[torch.Tensor] = []

    def catch_up(self) -> None:
        for row in self.recorder.rows[len(self.tensors):]:
            found = next((t for t in reversed(self.recent) if tuple(t.shape) == row.shape), None)
            self.tensors.append(found)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.catch_up()
        out = func(*args, **(kwargs or {}))
        seen = [a for a in args if isinstance(a, torch.Tensor)] + ([out] if isinstance(out, torch.Tensor) else [])
        self.recent = (self.recent + seen)[-8:]
        return out


def _differentiable(tensor: torch.Tensor | None) -> bool:
    return tensor is not None and tensor.is_floating_point() and tensor.requires_grad


@functools.lru_cache(maxsize=64)
def _backward_pass(cfg: ModelConfig | GPTConfig, batch: int, src_len: int | None, decoded: int
                   ) -> tuple[tuple[GradientRow, ...], tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]]:
    model = meta_model(cfg)
    ids = torch.zeros(batch, decoded, dtype=torch.long, device="meta")  # the target, or the GPT's one sequence
    recorder = Recorder(getattr(model, "dim_names", None))  # the model names its own dims (H_kv is H here)
    tap = _RecordedTensors(recorder)
    with running_modules(model, scopes=recorder.scopes), listening(recorder), keep_attention_weights(model), tap:
        if isinstance(cfg, GPTConfig):  # attention written out: every step recorded
            logits = model(ids)
        else:
            logits = model(torch.zeros(batch, src_len, dtype=torch.long, device="meta"), ids)
        loss = sequence_loss(logits, ids, cfg.pad_id)
        tap.catch_up()
    steps = [t for t in tap.tensors if _differentiable(t)]
    names, weights = zip(*model.named_parameters())
    grads = torch.autograd.grad(loss, steps + list(weights), allow_unused=True)
    step_grads = dict(zip(map(id, steps), grads[:len(steps)]))
    rows = tuple(GradientRow(row, tuple(step_grads[id(t)].shape) if _differentiable(t) else None)
                 for row, t in zip(recorder.rows, tap.tensors))
    params = tuple((name, tuple(w.shape), tuple(g.shape)) for name, w, g in zip(names, weights, grads[len(steps):]))
    return rows, params


def trace_gradients(cfg: ModelConfig | GPTConfig, batch: int | None = None, src_len: int | None = None,
                    tgt_len: int | None = None, *, length: int | None = None) -> tuple[GradientRow, ...]:
    """Every named step of one training step of the model of ``cfg`` (``Transformer`` or ``GPT``), in forward
    order, each with the shape of the loss's gradient with respect to it. Reverse the order to follow the
    backward pass. Sizes as ``trace_shapes`` takes them, the source articles' where left out."""
    return _backward_pass(cfg, *checked_sizes(cfg, batch, src_len, tgt_len, length))[0]


def parameter_gradients(cfg: ModelConfig | GPTConfig, batch: int | None = None, src_len: int | None = None,
                        tgt_len: int | None = None, *, length: int | None = None
                        ) -> tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]:
    """(parameter name, its shape, its gradient's shape) for every weight of the model of ``cfg``, after a real
    backward pass (sizes as ``trace_gradients``): the same shape whatever the batch."""
    return _backward_pass(cfg, *checked_sizes(cfg, batch, src_len, tgt_len, length))[1]


class GradientTable:
    """Forward rows beside their gradient rows: where, step, the step's shape, ∂loss/∂step's shape, dims.
    HTML in a notebook (``highlight``ed rows marked), fixed-width text elsewhere."""

    HEADINGS = (N_("where"), N_("step"), N_("forward shape"), N_("gradient shape"), N_("dims"))

    def __init__(self, rows, highlight: tuple[str, ...] = ()):
        self.rows = list(rows)
        self.highlight = (highlight,) if isinstance(highlight, str) else tuple(highlight)

    def _cells(self, row: GradientRow) -> tuple[str, ...]:
        grad = _("no gradient") if row.grad_shape is None else str(list(row.grad_shape))
        return row.forward.where, _(row.forward.step), str(list(row.forward.shape)), grad, row.forward.dims

    def __repr__(self) -> str:
        cells = [tuple(_(h) for h in self.HEADINGS)] + [self._cells(r) for r in self.rows]
        widths = [max(width(c[i]) for c in cells) for i in range(len(self.HEADINGS))]
        lines = ["  ".join(ljust(c[i], widths[i]) for i in range(len(widths))).rstrip() for c in cells]
        lines.insert(1, "-" * width(lines[0]))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{_(h)}</th>" for h in self.HEADINGS)
        body = []
        for row in self.rows:
            marked = any(h in row.forward.step or h in row.forward.where for h in self.highlight)
            style = " style='background:#fff3b0;font-weight:bold'" if marked else ""
            body.append(f"<tr{style}>" + "".join(f"<td style='text-align:left;white-space:nowrap'>{html.escape(c)}</td>"
                                                 for c in self._cells(row)) + "</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def layer_gradient_norms(cfg: GPTConfig, batch: int = 16, length: int = 32, seed: int = 0) -> list[float]:
    """At initialisation, one number per layer of ``GPT(cfg)``: the norm of the gradient of all that layer's
    weights, for the next-token loss on one batch of random ids [batch, length + 1].

    Every matrix starts Xavier-uniform, as the paper-era code initialised them (the Annotated Transformer
    does it after building the model), so post-norm (``cfg.norm_first=False``) and pre-norm
    (``norm_first=True``) start from the same kind of weights; ``seed`` fixes weights and ids.
    """
    if not isinstance(cfg, GPTConfig):
        raise TypeError(_("cfg must be a walkthrough.GPTConfig (set norm_first there), got {type}").format(
            type=type(cfg).__name__))
    check_positive_int("batch", batch)
    check_positive_int("length", length)
    if length > cfg.max_len:
        raise ValueError(_("length={length} is longer than max_len={max_len}; raise max_len or shorten length").format(
            length=length, max_len=cfg.max_len))
    torch.manual_seed(seed)
    model = GPT(cfg)
    for weight in model.parameters():
        if weight.dim() > 1:
            nn.init.xavier_uniform_(weight)
    usable = [i for i in range(cfg.vocab_size) if i != cfg.pad_id]
    picks = torch.randint(len(usable), (batch, length + 1), generator=torch.Generator().manual_seed(seed))
    ids = torch.tensor(usable)[picks]  # [B, L + 1], no PAD: every position counts
    loss = sequence_loss(model(ids[:, :-1]), ids[:, 1:], cfg.pad_id)  # predict each next id
    layers = list(model.decoder.layers)
    grads = torch.autograd.grad(loss, [w for layer in layers for w in layer.parameters()])
    norms, start = [], 0
    for layer in layers:
        count = len(list(layer.parameters()))
        norms.append(torch.cat([g.flatten() for g in grads[start:start + count]]).norm().item())
        start += count
    return norms

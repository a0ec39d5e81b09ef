"""What one training step keeps in memory: the tensors autograd saves for the backward pass, the
weights, their gradients and Adam's two running averages.

``training_memory(cfg, batch, src_len, tgt_len)`` adds it up from a formula, one named term per kind
of saved tensor; ``measure_saved(...)`` runs a real training forward pass and counts what autograd
actually saves (``torch.autograd.graph.saved_tensors_hooks``: each storage once, parameters left
out). tests/test_memory.py checks the two are equal, to the byte, at several sizes and option sets (norm,
activation, positions, norm_first, final_norm, bias, tying...), dropout off and on.
Both describe the path a training step takes: the model with nothing recording (``model.train()``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..checks import check_positive_int, check_smoothing
from ..i18n import N_, _, ljust, width
from ..model.attention import keep_attention_weights
from ..model.config import ModelConfig, parameter_count
from ..model.loss import sequence_loss
from ..model.transformer import Transformer
from .hooks import running_modules
from .meta import meta_model

FLOAT = 4  # bytes of a float32
LONG = 8  # bytes of an int64 token id
BOOL = 1


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes of one training step. ``terms``: the saved activations, one (name, bytes) per kind, summed
    over every layer; ``activations`` is their sum. ``optimizer``: Adam's exp_avg and exp_avg_sq (one
    float per parameter each) plus one step counter per parameter tensor."""

    activations: int
    parameters: int
    gradients: int
    optimizer: int
    terms: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return self.activations + self.parameters + self.gradients + self.optimizer

    def __repr__(self) -> str:
        totals = ((_("activations saved for backward"), self.activations), (_("parameters"), self.parameters),
                  (_("gradients"), self.gradients), (_("optimizer (Adam: 2 floats each)"), self.optimizer),
                  (_("total"), self.total))
        terms = [(_(name), size) for name, size in self.terms]  # the names stay English in .terms (keys)
        columns = max(width(name) + 2 for name, _size in terms + list(totals))
        unit = _("bytes")
        lines = [f"{ljust(totals[0][0], columns)}{totals[0][1]:>15,} {unit}"]
        lines += [f"  {ljust(name, columns - 2)}{size:>15,}" for name, size in terms]
        lines += [f"{ljust(name, columns)}{size:>15,} {unit}" for name, size in totals[1:]]
        return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def parameter_tensors(cfg: ModelConfig) -> int:
    """How many parameter tensors (Adam keeps one step counter for each): counted on the model itself, on the
    meta device (nothing allocated, counted once per config: an explorer asks for 60 lengths a move), so every
    option is followed."""
    return sum(1 for _ in meta_model(cfg).parameters())


def _attention_terms(batch: int, heads: int, l_q: int, l_k: int, d_model: int, dropout: bool, written_out: bool,
                     mask_entries: int) -> dict[str, int]:
    """Saved by one attention call: the projections' input, Q, K and V, the output W_o reads, and either the
    [B, H, L_q, L_k] weights or, in PyTorch's fused kernel, one log-sum-exp per query row.

    The weights are kept when the model writes attention out (a trace records, or weights are kept for a
    figure) and, on CPU, when the fused call has dropout: PyTorch then takes its own written-out path,
    which keeps the softmax's weights, the dropout noise and the dropped weights (3 × [B, H, L_q, L_k]).
    Without dropout the fused kernel keeps the log-sum-exp instead, and the additive float mask it is given
    (``mask_entries`` numbers, made anew in every call).
    """
    rows_q, rows_k = batch * l_q, batch * l_k
    terms = {
        N_("attention input (Q/K/V projections)"): FLOAT * rows_q * d_model,  # cross: K/V read the memory once
        N_("Q, K, V (split into heads)"): FLOAT * (rows_q + 2 * rows_k) * d_model,
        N_("attention output (W_o input)"): FLOAT * rows_q * d_model,
    }
    if written_out or dropout:
        # written out, a row that sees no key is set to 0: the softmax's weights, then the zeroed ones
        # (the dropout keeps its noise and the dropped weights instead of these), and one bool per query row
        terms[N_("attention weights [B, H, L_q, L_k]")] = (FLOAT * batch * heads * l_q * l_k
                                                          * (3 if dropout else 2 if written_out else 1))
        if written_out:
            terms[N_("masks")] = BOOL * mask_entries // l_k
    else:
        terms[N_("softmax log-sum-exp [B, H, L_q]")] = FLOAT * batch * heads * l_q
        terms[N_("masks")] = FLOAT * mask_entries
    return terms


def _add(total: dict[str, int], more: dict[str, int], times: int = 1) -> None:
    for name, size in more.items():
        total[name] = total.get(name, 0) + times * size


def _norm_terms(rows: int, d_model: int, norm: str) -> dict[str, int]:
    """LayerNorm keeps its input and, per token, its mean and 1/std; RMSNorm its input, per token its 1/rms,
    and the normalised input (which its scale multiplies). Pre-norm or post-norm, each norm keeps the same."""
    if norm == "rms":
        return {N_("RMSNorm inputs, 1/rms, normalised inputs"): FLOAT * rows * (2 * d_model + 1)}
    return {N_("LayerNorm inputs, means, 1/std"): FLOAT * rows * (d_model + 2)}


def _residual_terms(rows: int, d_model: int, dropout: bool, norm: str) -> dict[str, int]:
    """Add & Norm: the dropout noise on the sublayer's output (if any), then the norm's own."""
    terms = _norm_terms(rows, d_model, norm)
    if dropout:
        terms[N_("dropout noise (residual, embedding)")] = FLOAT * rows * d_model
    return terms


def _ffn_terms(rows: int, d_model: int, d_ff: int, dropout: bool, activation: str) -> dict[str, int]:
    """The FFN keeps its input (for W_1, and W_up) and hidden layers [B, L, d_ff]: what its activation's
    backward reads (ReLU: its output; GELU, SiLU: their input; SwiGLU: SiLU's input and output, and x·W_up),
    then what W_2 reads: the activated layer (ReLU's output is the one it kept already; SwiGLU's is the
    product), or, with dropout, the noise and the dropped layer."""
    activation_keeps = 3 if activation == "swiglu" else 1
    w2_reads = 2 if dropout else 0 if activation == "relu" else 1
    return {N_("FFN input"): FLOAT * rows * d_model,
            N_("FFN hidden [B, L, d_ff]"): FLOAT * rows * d_ff * (activation_keeps + w2_reads)}


def _rope_terms(batch: int, length: int, d_model: int, heads: int, fused: bool) -> dict[str, int]:
    """Rotary self-attention keeps cos and sin [L, d_k/2], made for Q and again for K. The fused kernel's
    output then follows the rotated Q's layout (heads first), so merging the heads copies it for W_o."""
    terms = {N_("RoPE cos, sin [L, d_k/2] (for Q and for K)"): FLOAT * 4 * length * (d_model // heads // 2)}
    if fused:
        terms[N_("merged heads (a copy, after RoPE)")] = FLOAT * batch * length * d_model
    return terms


def training_memory(cfg: ModelConfig, batch: int, src_len: int, tgt_len: int, smoothing: float = 0.1,
                    keep_weights: bool = False) -> TrainingMemory:
    """Bytes of one float32 training step of ``Transformer(cfg)`` on [batch, src_len] -> [batch, tgt_len]
    on CPU, with labels of their own and ``smoothing`` label smoothing, Adam as the optimizer.

    ``keep_weights=False``: attention as a training step runs it, PyTorch's fused kernel (the model with
    nothing recording). ``True``: written out, as inside ``wt.keep_attention_weights(model)``. Either way
    ``activations`` equals what ``measure_saved`` counts on the real model (tests/test_memory.py).
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(_("cfg must be a walkthrough.ModelConfig, got {type}").format(type=type(cfg).__name__))
    for name, value in (("batch", batch), ("src_len", src_len), ("tgt_len", tgt_len)):
        check_positive_int(name, value)
    for name, value in (("src_len", src_len), ("tgt_len", tgt_len)):
        if value > cfg.max_len:
            raise ValueError(_("{name}={value} is longer than the model's max_len={max_len}: Transformer(cfg) "
                               "refuses such a batch, so no step of it has a size; use at most {max_len} or a "
                               "cfg with a larger max_len").format(name=name, value=value, max_len=cfg.max_len))
    check_smoothing(smoothing)
    if not isinstance(keep_weights, bool):
        raise TypeError(_("keep_weights must be True or False, got {keep_weights!r}").format(keep_weights=keep_weights))
    d, f, h, layers, dropout = cfg.d_model, cfg.d_ff, cfg.num_heads, cfg.num_layers, cfg.dropout > 0
    src_rows, tgt_rows = batch * src_len, batch * tgt_len
    terms: dict[str, int] = {N_("token ids (embedding lookups)"): LONG * (src_rows + tgt_rows)}
    if dropout:
        _add(terms, {N_("dropout noise (residual, embedding)"): FLOAT * (src_rows + tgt_rows) * d})
    if keep_weights:  # our torch.where keeps the bool masks, one per kind, shared by every layer
        terms[N_("masks")] = BOOL * (batch * src_len * 2 + batch * tgt_len * tgt_len)
    rope, fused = cfg.positions == "rope", not (keep_weights or dropout)  # with dropout, CPU writes it out
    encoder_layer: dict[str, int] = {}
    _add(encoder_layer, _attention_terms(batch, h, src_len, src_len, d, dropout, keep_weights, batch * src_len))
    _add(encoder_layer, _rope_terms(batch, src_len, d, h, fused) if rope else {})
    _add(encoder_layer, _residual_terms(src_rows, d, dropout, cfg.norm), 2)
    _add(encoder_layer, _ffn_terms(src_rows, d, f, dropout, cfg.activation))
    decoder_layer: dict[str, int] = {}
    _add(decoder_layer, _attention_terms(batch, h, tgt_len, tgt_len, d, dropout, keep_weights,
                                         batch * tgt_len * tgt_len))  # padding and causal: [B, 1, L_tgt, L_tgt]
    _add(decoder_layer, _rope_terms(batch, tgt_len, d, h, fused) if rope else {})  # self-attention only
    _add(decoder_layer, _attention_terms(batch, h, tgt_len, src_len, d, dropout, keep_weights, batch * src_len))
    _add(decoder_layer, _residual_terms(tgt_rows, d, dropout, cfg.norm), 3)
    _add(decoder_layer, _ffn_terms(tgt_rows, d, f, dropout, cfg.activation))
    _add(terms, encoder_layer, layers)
    _add(terms, decoder_layer, layers)
    if cfg.final_norm:
        _add(terms, _norm_terms(src_rows + tgt_rows, d, cfg.norm))  # the final norm of each stack
    terms[N_("encoder memory (read by every cross-attention)")] = FLOAT * src_rows * d
    terms[N_("output head input")] = FLOAT * tgt_rows * d
    terms[N_("loss: log-probabilities [B·L_tgt, V]")] = FLOAT * tgt_rows * cfg.tgt_vocab_size
    terms[N_("loss: labels, counts")] = (LONG * tgt_rows + FLOAT
                                         + ((BOOL * tgt_rows + LONG) if smoothing > 0 else 0))
    parameters = FLOAT * parameter_count(cfg)
    optimizer = 2 * parameters + FLOAT * parameter_tensors(cfg)
    return TrainingMemory(sum(terms.values()), parameters, parameters, optimizer, tuple(terms.items()))


@dataclass(frozen=True)
class SavedTensor:
    """One storage autograd kept for the backward pass: the module that saved it, a shape it was saved
    with (a view may show another shape of the same storage), its dtype and the storage's bytes."""

    where: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    bytes: int


@dataclass(frozen=True)
class SavedTensors:
    """What one forward pass saved: ``tensors`` in the order they were saved, ``total`` bytes."""

    tensors: tuple[SavedTensor, ...]

    @property
    def total(self) -> int:
        return sum(t.bytes for t in self.tensors)

    def by(self, key) -> dict[str, int]:
        """Bytes grouped by ``key(saved_tensor)``, e.g. ``lambda t: t.where.split(".self_attn")[0]``."""
        groups: dict[str, int] = {}
        for t in self.tensors:
            groups[key(t)] = groups.get(key(t), 0) + t.bytes
        return groups


@contextlib.contextmanager
def saved_tensors(model: nn.Module) -> Iterator[list[SavedTensor]]:
    """Collect, while the block runs, every storage autograd saves for the backward pass, each once, the
    model's parameters left out (they are memory anyway). Tagged with the module path that saved it."""
    parameters = {id(p.untyped_storage()) for p in model.parameters()}
    kept: dict[int, torch.UntypedStorage] = {}  # keeps each storage alive, so its id is never reused
    found: list[SavedTensor] = []

    def pack(tensor):
        storage = tensor.untyped_storage()
        if id(storage) not in parameters and id(storage) not in kept:
            kept[id(storage)] = storage
            found.append(SavedTensor(scopes[-1], tuple(tensor.shape), tensor.dtype, storage.nbytes()))
        return tensor

    with running_modules(model) as scopes, torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield found


def training_batch(cfg: ModelConfig, batch: int, src_len: int, tgt_len: int, device: str = "cpu", seed: int = 0
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random (src [B, L_src], decoder input [B, L_tgt], labels [B, L_tgt]) ids, no padding (fixed seed)."""
    if device == "meta":
        return tuple(torch.zeros(batch, n, dtype=torch.long, device="meta") for n in (src_len, tgt_len, tgt_len))
    generator = torch.Generator().manual_seed(seed)
    low = 0 if cfg.pad_id is None else cfg.pad_id + 1  # pad_id=None: every id is a real token
    src = torch.randint(low, cfg.src_vocab_size, (batch, src_len), generator=generator)
    tgt_in = torch.randint(low, cfg.tgt_vocab_size, (batch, tgt_len), generator=generator)
    labels = torch.randint(low, cfg.tgt_vocab_size, (batch, tgt_len), generator=generator)
    return src, tgt_in, labels


def measure_saved(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor,
                  smoothing: float = 0.1, keep_weights: bool = False) -> tuple[SavedTensors, torch.Tensor]:
    """Run one training forward pass (train mode) and return (what autograd saved, the loss).

    ``keep_weights``: attention written out (``keep_attention_weights``) instead of the fused kernel.
    Works on the meta device too (a model and ids built there): the sizes of the saved tensors are
    known without any data, so the source articles' sizes cost nothing.
    """
    model.train()
    written_out = keep_attention_weights(model) if keep_weights else contextlib.nullcontext()
    with saved_tensors(model) as found, written_out:
        loss = sequence_loss(model(src, tgt_in), labels, model.cfg.pad_id, smoothing)
    return SavedTensors(tuple(found)), loss


@contextlib.contextmanager
def checkpointed(layers: nn.ModuleList) -> Iterator[None]:
    """Activation checkpointing on each of ``layers`` while the block runs: the forward keeps only each
    layer's inputs, and the backward runs the layer's forward again to get what it needs
    (``torch.utils.checkpoint``, non-reentrant). The layers are restored afterwards."""
    for layer in layers:
        layer.forward = functools.partial(checkpoint, type(layer).forward.__get__(layer), use_reentrant=False)
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward  # the class's forward again


def crossover_length(cfg: ModelConfig, batch: int, smoothing: float = 0.1) -> int | None:
    """The shortest L (source and target both L tokens) at which one training step's saved activations
    outgrow the parameters and Adam's state together; None if that never happens up to ``cfg.max_len``.
    The activations grow with L (and the attention weights with L²); the weights and Adam do not."""
    def passes(length: int) -> bool:
        table = training_memory(cfg, batch, length, length, smoothing)
        return table.activations > table.parameters + table.optimizer

    if not passes(cfg.max_len):
        return None
    low, high = 1, cfg.max_len  # passes(high) holds; find the first L that passes
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if passes(middle) else (middle + 1, high)
    return low

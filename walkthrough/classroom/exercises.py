"""Your turn: exercises that check themselves against the package.

``check_exercise(name, fn)`` runs the student's ``fn`` on a few random sizes (fixed seed, so the
message repeats), compares each result with what the package computes, and prints what is wrong:
not a tensor, the wrong shape (which dim), the right shape with wrong values (with a hint when the
values are a known mistake, such as an inverted mask), or "not yet" for an unwritten stub.

Each exercise below is one small function: it makes inputs, asks the package for the answer, lists
the typical mistakes (what a wrong solution would return, and the hint for it) and hands them to
``check_tensor``.
"""

from __future__ import annotations

import copy
import inspect
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from ..i18n import N_, _
from ..model import backward
from ..model.attention import MultiHeadAttention, scaled_dot_product_attention
from ..model.decoding import filter_logits
from ..model.embedding import sinusoidal_table
from ..model.flash import online_softmax_step
from ..model.loss import sequence_loss
from ..model.masks import causal_mask, padding_mask, to_blocked
from ..tasks.data import pad_batch
from ..tasks.distributed import shard_slice
from ..tasks.training import teacher_forcing
from ..text import bpe
from . import student
from .quiz import Question

NOT_YET = N_("not yet: write the function above, then run this cell again.")


class NotYet(Exception):
    """The student's function is still a stub."""


class Wrong(Exception):
    """What is wrong with the student's result, in words for them."""


@dataclass(frozen=True)
class ExerciseResult:
    """What ``check_exercise`` found; true when the function is right. The message is printed already."""

    name: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        """Show nothing as a cell's last value: the message was printed (a notebook shows it once)."""


class Inputs:
    """Random sizes and tensors for one check, from a fixed seed."""

    def __init__(self, seed: int = 0):
        self.random = random.Random(seed)
        self.generator = torch.Generator().manual_seed(seed)

    def sizes(self, count: int, low: int = 2, high: int = 9) -> list[int]:
        """``count`` different sizes in [low, high): different, so a swapped dim shows."""
        return self.random.sample(range(low, high), count)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator)

    def ids(self, lengths: list[int], avoid: set[int], vocab: int = 20) -> list[list[int]]:
        """Lists of token ids of the given lengths, none of them in ``avoid`` (the special ids)."""
        usable = [i for i in range(vocab) if i not in avoid]
        return [[self.random.choice(usable) for _position in range(length)] for length in lengths]


def call(fn: Callable, *args):
    """The student's result; a stub (NotImplementedError, None, ...) is "not yet", a crash is explained.

    ``fn`` gets its own copies of ``args``, so the answer the package computes from them is never
    changed by it, and a change it makes to its input in place is named. What it changes of torch's
    global settings (default dtype, grad mode, random state) is put back.
    """
    given = copy.deepcopy(args)
    try:
        result = student.run(fn, *given)
    except student.Stub as stub:
        raise NotYet from stub
    except student.Crash as crash:
        raise Wrong(_("your function raised {type}: {error}").format(
            type=type(crash.error).__name__, error=crash.error)) from crash
    if result is None or result is Ellipsis:
        raise NotYet
    changed = [i for i, (before, after) in enumerate(zip(args, given)) if not unchanged(before, after)]
    if changed:
        raise Wrong(_("your function changed its input {name} in place (an op ending in _ such as mul_, or +=, "
                      ".clear(), ...). Its caller still needs it: compute a new tensor (x * 2, not x.mul_(2)) and "
                      "leave the input as it came.").format(name=argument_name(fn, changed[0])))
    return result


def unchanged(before, after) -> bool:
    """Whether a (copied) input still equals the original: tensors bit for bit, lists item by item."""
    if isinstance(before, torch.Tensor):
        return (isinstance(after, torch.Tensor) and after.shape == before.shape and after.dtype == before.dtype
                and torch.equal(after, before))
    if isinstance(before, (list, tuple)):
        return (type(after) is type(before) and len(after) == len(before)
                and all(unchanged(b, a) for b, a in zip(before, after)))
    return after == before


def argument_name(fn: Callable, position: int) -> str:
    """The name the student gave their function's argument at ``position`` (or 'argument 2' if unnamed)."""
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # a builtin without a signature
        names = []
    return names[position] if position < len(names) else _("argument {number}").format(number=position + 1)


def real_tensor(result, what: str) -> torch.Tensor:
    """The result as a plain dense real CPU tensor, or Wrong naming why it is not one."""
    if not isinstance(result, torch.Tensor):
        extra = _(": return the tensor alone") if isinstance(result, tuple) else ""
        raise Wrong(_("{what} is a {type}, not a torch tensor{extra}.").format(what=what, type=type(result).__name__,
                                                                             extra=extra))
    result = student.plain(result)
    if result.layout != torch.strided:
        raise Wrong(_("{what} is a sparse tensor ({layout}): return a dense one (.to_dense()).").format(
            what=what, layout=result.layout))
    if result.is_meta:
        raise Wrong(_("{what} is on the meta device: it has a shape but no values. Compute it from the inputs "
                      "(without device='meta').").format(what=what))
    if result.is_complex():
        raise Wrong(_("{what} is complex ({dtype}): the answer is real; keep to real operations.").format(
            what=what, dtype=result.dtype))
    if result.is_quantized or result.device.type != "cpu":
        raise Wrong(_("{what} is a {dtype} tensor on {device}: return a plain CPU tensor.").format(
            what=what, dtype=result.dtype, device=result.device))
    return result


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape and values (compared as float64, so a 0/1 int mask equals a bool one)."""
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-5, equal_nan=True)


def number(value: torch.Tensor) -> str:
    """One entry for a message: True/False for a mask, 4 significant digits otherwise."""
    return str(value.item()) if value.dtype == torch.bool else f"{value.item():.4g}"


def check_tensor(result, expected: torch.Tensor, dims: str, mistakes: dict[str, torch.Tensor] | None = None,
                 what: str = N_("your result")) -> None:
    """Raise Wrong naming what differs: type, a known mistake's hint, shape (which dim), values, dtype.

    ``mistakes`` maps a hint to what a solution with that mistake returns for the same inputs. ``what`` and
    each hint are shown through ``_`` (write them ``_("...").format(...)`` or mark them ``N_``).
    """
    what = _(what)
    result = real_tensor(result, what)
    for hint, wrong in (mistakes or {}).items():
        if same(result, wrong) and not same(wrong, expected):  # a "mistake" that happens to be right is none
            raise Wrong(_("{what}: {hint}").format(what=what, hint=_(hint)))
    if result.shape != expected.shape:
        if expected.dim() == 0:
            raise Wrong(_("{what} should be one number (shape []), but has shape {shape}.").format(
                what=what, shape=list(result.shape)))
        detail = Question(expected.shape, dims).what_is_wrong(tuple(result.shape), wrote=N_("yours has"))
        raise Wrong(_("{what} has shape {shape}, not {expected} = [{dims}]. {detail}").format(
            what=what, shape=list(result.shape), expected=list(expected.shape), dims=", ".join(dims.split()),
            detail=detail))
    if not same(result, expected):
        gap = (result.double() - expected.double()).abs().nan_to_num(nan=math.inf)
        where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
        at = _(" at {index}").format(index=list(where)) if where else ""
        raise Wrong(_("{what} has the right shape but wrong values:{at} {got} instead of {wanted}.").format(
            what=what, at=at, got=number(result[where]), wanted=number(expected[where])))
    if expected.dtype == torch.bool and result.dtype != torch.bool:
        raise Wrong(_("{what} has the right values but dtype {dtype}: a mask is bool (build it from a comparison, "
                      "or use .bool()).").format(what=what, dtype=result.dtype))


CASES = 3  # random sizes per exercise
EXERCISES: dict[str, Callable[[Callable, Inputs], None]] = {}


def exercise(name: str):
    """Register a check under the name the student passes to ``check_exercise``."""
    def register(check):
        EXERCISES[name] = check
        return check
    return register


@exercise("sinusoidal_table")
def check_sinusoidal_table(fn, inputs):
    """fn(max_len, d_model) -> PE [max_len, d_model] (notebook 01)."""
    for max_len, half in zip(inputs.sizes(CASES, 5, 30), inputs.sizes(CASES, 2, 9)):
        d_model = 2 * half
        expected = sinusoidal_table(max_len, d_model)  # [max_len, D]
        sines, cosines = expected[:, 0::2], expected[:, 1::2]  # [max_len, D/2] each
        angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(half) / d_model)  # exponent i/D, not 2i/D
        mistakes = {
            N_("sin and cos are swapped: even columns 2i hold sin, odd columns 2i+1 hold cos."):
                torch.stack([cosines, sines], -1).flatten(1),
            N_("the sines fill the first half and the cosines the second: they interleave, "
            "sin in column 2i, cos in column 2i+1."): torch.cat([sines, cosines], 1),
            N_("the frequencies are off: the exponent is 2i/d_model, with i the pair index (columns 2i and 2i+1)."):
                torch.stack([angle.sin(), angle.cos()], -1).flatten(1),
        }
        check_tensor(call(fn, max_len, d_model), expected, "max_len D", mistakes,
                     _("your table for max_len={max_len}, d_model={d_model}").format(max_len=max_len, d_model=d_model))


@exercise("split_heads")
def check_split_heads(fn, inputs):
    """fn(x [B, L, D], num_heads) -> [B, H, L, d_k] (notebook 02)."""
    for _case in range(CASES):
        batch, length, heads, d_k = inputs.sizes(4)
        x = inputs.randn(batch, length, heads * d_k)  # [B, L, D]
        expected = MultiHeadAttention(heads * d_k, heads).split_heads(x)  # [B, H, L, d_k]
        mistakes = {
            N_("a straight view to [B, H, L, d_k] cuts across tokens: the shape is right, but each 'head' holds "
            "pieces of several tokens. View to [B, L, H, d_k] first, then transpose(1, 2)."):
                x.view(batch, heads, length, d_k),
            N_("each head takes every H-th feature: head h is the block of features h·d_k .. (h+1)·d_k - 1, "
            "so view to [B, L, H, d_k] (H before d_k)."): x.view(batch, length, d_k, heads).permute(0, 3, 1, 2),
        }
        check_tensor(call(fn, x, heads), expected, "B H L d_k", mistakes,
                     _("for x {x_shape} and num_heads={heads}, your result").format(x_shape=list(x.shape), heads=heads))


@exercise("padding_mask")
def check_padding_mask(fn, inputs):
    """fn(ids [B, L], pad_id) -> [B, 1, 1, L] bool, True = may attend (notebook 03)."""
    for pad_id in (0, 3, 7):
        batch, length = inputs.sizes(2, 3, 9)
        ids = pad_batch(inputs.ids([inputs.random.randint(1, length) for _ in range(batch - 1)] + [length],
                                   avoid={pad_id}), pad_id)  # [B, L], the last row full
        expected = padding_mask(ids, pad_id)  # [B, 1, 1, L]
        mistakes = {
            N_("it is inverted: here True = may attend (a real token), so PAD positions are False. "
            "(nn.MultiheadAttention's key_padding_mask is the other way round.)"): ~expected,
            **{_("right values, but shape {shape}: add the broadcast dims so it is [B, 1, 1, L] "
               "(mask[:, None, None, :] from [B, L]), to fit the scores [B, H, L_q, L_k].").format(
                   shape=shape): expected.view(sizes)
               for shape, sizes in (("[B, L]", (batch, length)), ("[B, 1, L]", (batch, 1, length)))},
        }
        check_tensor(call(fn, ids, pad_id), expected, "B 1 1 L_k", mistakes,
                     _("for ids {ids_shape} with pad_id={pad_id}, your mask").format(
                         ids_shape=list(ids.shape), pad_id=pad_id))


@exercise("causal_mask_blocked")
def check_causal_mask_blocked(fn, inputs):
    """fn(L) -> [L, L] bool in nn.MultiheadAttention's convention, True = blocked (notebook 03)."""
    for length in inputs.sizes(CASES, 3, 9):
        expected = to_blocked(causal_mask(length))  # [L_q, L_k], True above the diagonal
        ones = torch.ones(length, length, dtype=torch.bool)
        mistakes = {
            N_("it uses True = may attend (this package's convention); nn.MultiheadAttention wants "
            "True = blocked: invert it."): causal_mask(length),
            N_("you blocked the diagonal too: a position may attend to itself, so only keys after it are "
            "blocked (triu with diagonal=1)."): ones.triu(),
            N_("you blocked the past instead of the future: the blocked keys are above the diagonal "
            "(triu, not tril)."): ones.tril(-1),
            N_("that is the additive float mask (0 / -inf); this exercise wants the bool one, True = blocked."):
                torch.zeros(length, length).masked_fill(expected, -math.inf),
        }
        check_tensor(call(fn, length), expected, "L_q L_k", mistakes, _("for L={length}, your mask").format(
            length=length))


@exercise("cross_attention_scores")
def check_cross_attention_scores(fn, inputs):
    """fn(q [B, H, L_tgt, d_k], k [B, H, L_src, d_k]) -> scores [B, H, L_tgt, L_src] (notebook 04)."""
    for _case in range(CASES):
        batch, heads, tgt_len, src_len, d_k = inputs.sizes(5, 2, 10)
        q, k = inputs.randn(batch, heads, tgt_len, d_k), inputs.randn(batch, heads, src_len, d_k)
        product = q @ k.transpose(-2, -1)  # [B, H, L_tgt, L_src]
        expected = product / math.sqrt(d_k)
        _context, weights = scaled_dot_product_attention(q, k, inputs.randn(batch, heads, src_len, d_k))
        torch.testing.assert_close(expected.softmax(-1), weights)  # the package agrees these are its scores
        mistakes = {
            N_("you forgot to divide by √d_k."): product,
            N_("you divided by d_k; the scale is √d_k."): product / d_k,
            N_("you computed K·Qᵀ: rows must be the target (query) positions, so q @ k.transpose(-2, -1)."):
                k @ q.transpose(-2, -1) / math.sqrt(d_k),
        }
        check_tensor(call(fn, q, k), expected, "B H L_tgt L_src", mistakes,
                     _("for q {q_shape} and k {k_shape}, your scores").format(
                         q_shape=list(q.shape), k_shape=list(k.shape)))


def normalise(x, dim, eps, correction=0, eps_inside=True):
    """(x - mean) / sqrt(var + eps) over ``dim``, with the usual mistakes switchable (a model of wrong answers)."""
    centred = x - x.mean(dim, keepdim=True)
    spread = x.var(dim, keepdim=True, correction=correction)
    return centred / ((spread + eps).sqrt() if eps_inside else spread.sqrt() + eps)


@exercise("layer_norm")
def check_layer_norm(fn, inputs):
    """fn(x [..., D], gamma [D], beta [D], eps) -> same shape as x (notebook 05)."""
    for eps in (1e-5, 0.1, 1.0):  # a large eps shows where it goes
        batch, length, d_model = inputs.sizes(3, 3, 12)
        x = inputs.randn(batch, length, d_model) * 3 + 1  # [B, L, D], not already normalised
        norm = nn.LayerNorm(d_model, eps=eps)  # what AddNorm holds
        with torch.no_grad():
            norm.weight.copy_(inputs.randn(d_model))
            norm.bias.copy_(inputs.randn(d_model))
            expected = norm(x)  # [B, L, D]
        gamma, beta = norm.weight.detach().clone(), norm.bias.detach().clone()
        normalised = partial(normalise, x, eps=eps)
        mistakes = {
            N_("you normalised over the batch dim: LayerNorm normalises each token's D features (dim=-1)."):
                normalised(0) * gamma + beta,
            N_("you normalised over the length dim: LayerNorm normalises each token's D features (dim=-1)."):
                normalised(1) * gamma + beta,
            N_("you used the unbiased variance (÷(D-1)); LayerNorm divides by D (unbiased=False)."):
                normalised(-1, correction=1) * gamma + beta,
            N_("you forgot the learned scale and shift: multiply by gamma, then add beta."): normalised(-1),
            N_("eps goes inside the square root: (x - mean) / sqrt(var + eps)."):
                normalised(-1, eps_inside=False) * gamma + beta,
        }
        check_tensor(call(fn, x, gamma, beta, eps), expected, "B L D", mistakes,
                     _("for x {x_shape} and eps={eps}, your result").format(x_shape=list(x.shape), eps=eps))


@exercise("rms_norm")
def check_rms_norm(fn, inputs):
    """fn(x [..., D], gamma [D], eps) -> same shape as x: RMSNorm, as Llama's blocks normalise (notebook 18)."""
    for eps in (1e-5, 0.1, 1.0):  # a large eps shows where it goes
        batch, length, d_model = inputs.sizes(3, 3, 12)
        x = inputs.randn(batch, length, d_model) * 3 + 1  # [B, L, D]: a mean far from 0 shows a centring
        norm = torch.nn.RMSNorm(d_model, eps=eps)
        with torch.no_grad():
            norm.weight.copy_(inputs.randn(d_model))
            expected = norm(x)  # [B, L, D]
        gamma = norm.weight.detach().clone()
        mean_square = x.pow(2).mean(-1, keepdim=True)  # [B, L, 1]
        mistakes = {
            N_("you subtracted the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square."):
                normalise(x, -1, eps) * gamma,
            N_("you forgot the learned scale: multiply by gamma."): x / (mean_square + eps).sqrt(),
            N_("eps goes inside the square root: x / sqrt(mean(x²) + eps)."): x / (mean_square.sqrt() + eps) * gamma,
            N_("you normalised over the batch dim: RMSNorm normalises each token's D features (dim=-1)."):
                x / (x.pow(2).mean(0, keepdim=True) + eps).sqrt() * gamma,
        }
        check_tensor(call(fn, x, gamma, eps), expected, "B L D", mistakes,
                     _("for x {x_shape} and eps={eps}, your result").format(x_shape=list(x.shape), eps=eps))


@exercise("sequence_loss")
def check_sequence_loss(fn, inputs):
    """fn(logits [B, L, V], labels [B, L], pad_id) -> the mean loss over real tokens, a scalar (notebook 06)."""
    for pad_id in (0, 2, 5):
        batch, length = inputs.sizes(2, 3, 8)
        vocab = inputs.random.randint(8, 16)  # > pad_id: a PAD label is a class too, when not ignored
        labels = pad_batch(inputs.ids([inputs.random.randint(1, length) for _ in range(batch - 1)] + [length],
                                      avoid={pad_id}, vocab=vocab), pad_id)  # [B, L]
        logits = inputs.randn(batch, length, vocab)  # [B, L, V]
        expected = sequence_loss(logits, labels, pad_id)
        per_token = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")  # [B, L]
        real = labels != pad_id  # [B, L]
        mistakes = {
            N_("PAD positions count: ignore them (ignore_index=pad_id)."): per_token.mean(),
            N_("you applied softmax before the loss: cross_entropy takes raw logits (it does log_softmax itself)."):
                sequence_loss(logits.softmax(-1), labels, pad_id),
            N_("you summed: the loss is the mean over the real (non-PAD) tokens."): (per_token * real).sum(),
            N_("you divided by all B·L positions, PAD included: divide by the number of real tokens."):
                (per_token * real).sum() / labels.numel(),
            N_("you averaged each sentence first: the loss is the mean over all real tokens of the batch."):
                ((per_token * real).sum(1) / real.sum(1)).mean(),
        }
        check_tensor(call(fn, logits, labels, pad_id), expected, "", mistakes,
                     _("for logits {logits_shape} and pad_id={pad_id}, your loss").format(
                         logits_shape=list(logits.shape), pad_id=pad_id))


@exercise("teacher_forcing")
def check_teacher_forcing(fn, inputs):
    """fn(targets, sos_id, eos_id, pad_id) -> (decoder_input [B, L], labels [B, L]) (notebook 07)."""
    for sos_id, eos_id, pad_id in ((1, 2, 0), (5, 6, 7), (3, 0, 9)):
        targets = inputs.ids([inputs.random.randint(1, 6) for _ in range(4)], avoid={sos_id, eos_id, pad_id})
        about = _("for sos_id={sos_id}, eos_id={eos_id}, pad_id={pad_id}").format(
            sos_id=sos_id, eos_id=eos_id, pad_id=pad_id)
        result = call(fn, targets, sos_id, eos_id, pad_id)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise Wrong(_("{about}, return two tensors, (decoder_input, labels); got {type}.").format(
                about=about, type=type(result).__name__))
        expected_input, expected_labels = teacher_forcing(targets, sos_id, eos_id, pad_id)  # [B, L] each
        starts = pad_batch([[sos_id] + t for t in targets], pad_id)
        ends = pad_batch([t + [eos_id] for t in targets], pad_id)
        decoder_input, labels = (real_tensor(part, _("{about}, your {what}").format(about=about, what=what))
                                 for part, what in zip(result, (_("decoder input"), _("labels"))))
        if same(decoder_input, labels):
            raise Wrong(_("{about}, your decoder input and labels are the same: the labels are the input "
                        "shifted left by one, so each position predicts the next token.").format(about=about))
        check_tensor(decoder_input, expected_input, "B L_tgt", {
            N_("it ends with <eos> instead of starting with <sos>: did you shift the wrong way?"): ends,
            N_("it should start with <sos>: decoder input = <sos> + y."): pad_batch(targets, pad_id),
        }, _("{about}, your decoder input").format(about=about))
        check_tensor(labels, expected_labels, "B L_tgt", {
            N_("they start with <sos> instead of ending with <eos>: did you shift the wrong way?"): starts,
            N_("they miss <eos>: labels = y + <eos>, so the model learns to stop."): pad_batch(targets, pad_id),
            N_("they miss <eos> (padded instead): labels = y + <eos>, so the model learns to stop."):
                pad_batch([t + [pad_id] for t in targets], pad_id),
        }, _("{about}, your labels").format(about=about))


@exercise("greedy_next_tokens")
def check_greedy_next_tokens(fn, inputs):
    """fn(logits [B, V], finished [B] bool, pad_id) -> next ids [B]: the argmax, PAD once a row has finished
    (notebook 17: one step of greedy decoding a real batch)."""
    for pad_id in (0, 3):
        batch, vocab = inputs.sizes(2, 3, 9)
        logits = inputs.randn(batch, vocab)  # [B, V]
        finished = torch.tensor([inputs.random.random() < 0.5 for _ in range(batch - 1)] + [True])  # [B]
        best = logits.argmax(-1)  # [B]
        expected = torch.where(finished, torch.full_like(best, pad_id), best)  # [B]
        mistakes = {
            N_("a finished row (one that already wrote <eos>) must get PAD: keep finished rows finished."): best,
            N_("the unfinished rows must get their best token: PAD goes only to the finished ones."):
                torch.where(finished, best, torch.full_like(best, pad_id)),
        }
        check_tensor(call(fn, logits, finished, pad_id), expected, "B", mistakes,
                     _("for logits {logits_shape} and pad_id={pad_id}, your next ids").format(
                         logits_shape=list(logits.shape), pad_id=pad_id))


@exercise("cached_attention_step")
def check_cached_attention_step(fn, inputs):
    """fn(q [B, H, 1, d_k], k_cache [B, H, t, d_k], v_cache [B, H, t, d_k]) -> context [B, H, 1, d_k] (notebook 08)."""
    for _case in range(CASES):
        batch, heads, cached, d_k = inputs.sizes(4, 2, 10)
        q = inputs.randn(batch, heads, 1, d_k)
        k, v = inputs.randn(batch, heads, cached, d_k), inputs.randn(batch, heads, cached, d_k)
        expected, _weights = scaled_dot_product_attention(q, k, v)  # [B, H, 1, d_k]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # [B, H, 1, t]
        mistakes = {
            N_("you applied a causal mask as if the query were position 0; a cached step's query is the newest "
            "position and may see every cached key: no mask. (F.scaled_dot_product_attention's is_causal=True "
            "does this for a one-row query: it aligns the mask top-left.)"):
                scaled_dot_product_attention(q, k, v, causal_mask(cached)[:1])[0],
            N_("you forgot to divide the scores by √d_k."): (q @ k.transpose(-2, -1)).softmax(-1) @ v,
            **{_("softmax over the wrong dim ({dim}): each query's weights sum to 1 over the keys, the last "
               "dim of the scores [B, H, 1, t]: softmax(dim=-1).").format(
                   dim=dim): scores.softmax(dim) @ v for dim in (1, 2)},
        }
        check_tensor(call(fn, q, k, v), expected, "B H L_q d_k", mistakes,
                     _("for q {q_shape} and a cache of t={cached}, your context").format(
                         q_shape=list(q.shape), cached=cached))


@exercise("expand_kv_heads")
def check_expand_kv_heads(fn, inputs):
    """fn(k [B, H_kv, L, d_k], num_heads) -> [B, H, L, d_k], kv head j serving query heads j·g .. j·g+g-1 (09)."""
    for _case in range(CASES):
        batch, length, d_k = inputs.sizes(3, 2, 8)
        kv_heads = inputs.random.randint(2, 4)
        heads = kv_heads * inputs.random.randint(2, 3)
        k = inputs.randn(batch, kv_heads, length, d_k)
        expected = MultiHeadAttention(heads * d_k, heads, num_kv_heads=kv_heads).expand_kv(k)
        mistakes = {
            N_("the K/V heads are tiled (repeat): query head h got K/V head h % H_kv. Each K/V head serves a "
            "group of consecutive query heads: use repeat_interleave."): k.repeat(1, heads // kv_heads, 1, 1),
        }
        check_tensor(call(fn, k, heads), expected, "B H L d_k", mistakes,
                     _("for k {k_shape} and num_heads={heads}, your result").format(k_shape=list(k.shape), heads=heads))


@exercise("heads_into_batch")
def check_heads_into_batch(fn, inputs):
    """fn(x [L, B, D] sequence-first, num_heads) -> [B·H, L, d_k], heads moved into the batch as PyTorch does (10)."""
    for _case in range(CASES):
        length, batch, heads, d_k = inputs.sizes(4)
        x = inputs.randn(length, batch, heads * d_k)  # [L, B, D]
        ours = MultiHeadAttention(heads * d_k, heads).split_heads(x.transpose(0, 1))  # [B, H, L, d_k]
        expected = ours.reshape(batch * heads, length, d_k)  # [B·H, L, d_k]: row b·H + h is sentence b, head h
        mistakes = {
            N_("the heads are scrambled: reshaping [B, L, D] straight to [B·H, L, d_k] cuts across tokens. "
            "View x as [L, B·H, d_k] first (each head's d_k features stay together), then swap L and B·H."):
                x.transpose(0, 1).reshape(batch * heads, length, d_k),
        }
        check_tensor(call(fn, x, heads), expected, "B·H L d_k", mistakes,
                     _("for x {x_shape} and num_heads={heads}, your result").format(x_shape=list(x.shape), heads=heads))


@exercise("online_softmax_step")
def check_online_softmax_step(fn, inputs):
    """fn(m [R], l [R], acc [R, d_v], scores [R, b], v [b, d_v]) -> (m, l, acc) after one more block (notebook 13)."""
    for _case in range(CASES):
        rows, keys, d_v = inputs.sizes(3, 2, 9)
        lowest = torch.finfo(torch.float32).min
        start = torch.full((rows,), lowest), torch.zeros(rows), torch.zeros(rows, d_v)
        m, sum_exp, acc = online_softmax_step(*start, inputs.randn(rows, keys), inputs.randn(keys, d_v))  # block 1
        scores, v = inputs.randn(rows, keys), inputs.randn(keys, d_v)  # block 2: larger scores in every other row
        scores[::2] += 3
        expected = online_softmax_step(m, sum_exp, acc, scores, v)
        m_new = expected[0]
        p = torch.exp(scores - m_new[:, None])  # [R, b]
        about = _("for {rows} rows and a block of {keys} keys, your").format(rows=rows, keys=keys)
        result = call(fn, m.clone(), sum_exp.clone(), acc.clone(), scores.clone(), v.clone())
        if not (isinstance(result, tuple) and len(result) == 3):
            raise Wrong(_("{about} function should return three tensors, (m, l, acc); got {type}.").format(
                about=about, type=type(result).__name__))
        check_tensor(result[0], m_new, "R", {
            N_("m is the max of this block alone: the running max is the larger of the old m and this block's max."):
                scores.amax(-1)}, _("{about} running max m").format(about=about))
        forgot = N_("you forgot to rescale: where the max grew from m to m_new, the old {what} was counted against "
                    "the old m; multiply it by exp(m - m_new) before adding this block.")
        inverted = N_("the rescale is upside down: it is exp(m_old - m_new) (at most 1), not exp(m_new - m_old).")
        check_tensor(result[1], expected[1], "R", {
            _(forgot).format(what=_("sum l")): sum_exp + p.sum(-1),
            inverted: torch.exp(m_new - m) * sum_exp + p.sum(-1),
        }, _("{about} running sum l").format(about=about))
        check_tensor(result[2], expected[2], "R d_v", {
            _(forgot).format(what=_("output acc")): acc + p @ v,
            inverted: torch.exp(m_new - m)[:, None] * acc + p @ v,
        }, _("{about} running output acc").format(about=about))


@exercise("softmax_backward")
def check_softmax_backward(fn, inputs):
    """fn(probs [..., L_k], d_probs [..., L_k]) -> d_scores [..., L_k], through softmax by hand (notebook 11)."""
    for _case in range(CASES):
        batch, heads, length = inputs.sizes(3, 2, 9)
        probs = (inputs.randn(batch, heads, length, length) * 2).softmax(-1)  # [B, H, L_q, L_k]
        d_probs = inputs.randn(batch, heads, length, length)
        expected = backward.softmax_backward(probs, d_probs)
        mistakes = {
            N_("you forgot the row sum: d_scores = p ⊙ (d_probs - Σ_j p_j·d_probs_j); every score moves every "
            "probability of its row, because they must still sum to 1."): probs * d_probs,
            N_("the sum runs over the wrong dim: softmax normalised each row (dim=-1, the keys), so sum over -1."):
                probs * (d_probs - (probs * d_probs).sum(-2, keepdim=True)),
            N_("you subtracted the plain mean of d_probs: subtract the probability-weighted sum Σ_j p_j·d_probs_j."):
                probs * (d_probs - d_probs.mean(-1, keepdim=True)),
            N_("the sign is flipped: p ⊙ (d_probs - Σ p·d_probs), not the other way round."):
                probs * ((probs * d_probs).sum(-1, keepdim=True) - d_probs),
            N_("you returned d_probs unchanged: softmax's Jacobian is diag(p) - p pᵀ, not the identity."): d_probs,
        }
        check_tensor(call(fn, probs, d_probs), expected, "B H L_q L_k", mistakes,
                     _("for probs {probs_shape}, your d_scores").format(probs_shape=list(probs.shape)))


@exercise("scores_backward")
def check_scores_backward(fn, inputs):
    """fn(q [B, H, L_q, d_k], k [B, H, L_k, d_k], d_scores [B, H, L_q, L_k]) -> (d_q, d_k), scores = Q·Kᵀ/√d_k (11)."""
    for case in range(CASES):
        batch, heads, l_q, d_k = inputs.sizes(4, 2, 9)
        l_k = l_q if case == 0 else inputs.random.choice([n for n in range(2, 9) if n not in (l_q, d_k)])
        q, k = inputs.randn(batch, heads, l_q, d_k), inputs.randn(batch, heads, l_k, d_k)
        d_scores = inputs.randn(batch, heads, l_q, l_k)
        scale = math.sqrt(d_k)
        expected_q, expected_k = d_scores @ k / scale, d_scores.transpose(-2, -1) @ q / scale
        about = _("for q {q_shape} and k {k_shape}").format(q_shape=list(q.shape), k_shape=list(k.shape))
        result = call(fn, q, k, d_scores)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise Wrong(_("{about}, return two tensors, (d_q, d_k); got {type}.").format(
                about=about, type=type(result).__name__))
        square = l_q == l_k  # only then does a transposed d_scores still fit, and give the wrong numbers
        check_tensor(result[0], expected_q, "B H L_q d_k", {
            N_("you forgot the ÷√d_k: the scores were divided by √d_k, so their gradient carries it too."):
                d_scores @ k,
            N_("you divided by d_k; the scale is √d_k."): d_scores @ k / d_k,
            **({N_("d_scores is transposed: row i of d_scores belongs to query i, so d_q = d_scores @ K / √d_k."):
                d_scores.transpose(-2, -1) @ k / scale} if square else {}),
        }, _("{about}, your d_q").format(about=about))
        check_tensor(result[1], expected_k, "B H L_k d_k", {
            N_("you forgot the ÷√d_k: the scores were divided by √d_k, so their gradient carries it too."):
                d_scores.transpose(-2, -1) @ q,
            N_("you divided by d_k; the scale is √d_k."): d_scores.transpose(-2, -1) @ q / d_k,
            **({N_("K's gradient needs d_scores transposed (keys are its columns): d_k = d_scoresᵀ @ Q / √d_k."):
                d_scores @ q / scale} if square else {}),
        }, _("{about}, your d_k").format(about=about))


@exercise("rank_shard")
def check_rank_shard(fn, inputs):
    """fn(batch_size, world_size, rank) -> (start, stop): the rows of a global batch that rank holds (notebook 14)."""
    cases = [(9, 4), (10, 4), (5, 5)] + [(world + extra, world) for world, extra in
                                          zip(inputs.sizes(CASES, 2, 9), inputs.sizes(CASES, 0, 20))]
    for batch, world in cases:
        about = _("for a batch of {batch} on {world} ranks").format(batch=batch, world=world)
        got = []
        for rank in range(world):
            result = call(fn, batch, world, rank)
            if isinstance(result, slice):
                result = (result.start, result.stop)
            if not (isinstance(result, (tuple, list)) and len(result) == 2
                    and all(isinstance(i, int) and not isinstance(i, bool) for i in result)):
                raise Wrong(_("{about}, rank {rank}: return two whole numbers (start, stop), got {result!r}.").format(
                    about=about, rank=rank, result=result))
            got.append(tuple(result))
        sizes = [stop - start for start, stop in got]
        empty = [rank for rank, size in enumerate(sizes) if size <= 0]
        if empty:
            raise Wrong(_("{about}, rank {empty_0} gets no sentence (rows {got_empty_0}): a rank with nothing "
                        "to train on has no gradient to all-reduce. Rounding the shard size up fills the "
                        "first ranks and starves the last: give every rank batch // world rows, and one more "
                        "to the first batch % world ranks.").format(
                            about=about, empty_0=empty[0], got_empty_0=got[empty[0]]))
        if [start for start, _ in got[1:]] != [stop for _, stop in got[:-1]] or got[0][0] != 0 \
                or got[-1][1] != batch:
            raise Wrong(_("{about}, your shards {got} do not cover rows 0..{batch_1} once each, in order: "
                        "each shard starts where the previous one stopped, the first at 0, the last stops at "
                        "{batch}. Rounding the size down leaves the last batch % world rows untrained.").format(
                            about=about, got=got, batch_1=batch - 1, batch=batch))
        expected = [(s.start, s.stop) for s in (shard_slice(batch, world, rank) for rank in range(world))]
        if max(sizes) - min(sizes) > 1:
            raise Wrong(_("{about}, your shard sizes {sizes} differ by more than one: the slowest rank sets "
                        "every step's pace. Spread the remainder, one extra row each.").format(
                            about=about, sizes=sizes))
        if got != expected:
            raise Wrong(_("{about}, your shards are {got}; torch.tensor_split (and walkthrough) give the extra "
                        "rows to the first ranks: {expected}.").format(about=about, got=got, expected=expected))


@exercise("top_p_filter")
def check_top_p_filter(fn, inputs):
    """fn(logits [B, V], top_p) -> logits [B, V], the tokens outside the nucleus at -inf (notebook 12)."""
    for case in range(CASES):
        rows, vocab = inputs.sizes(2, 3, 12)
        logits = torch.randint(-4, 4, (rows, vocab), generator=inputs.generator).float() / 2  # many ties
        logits[0, 0] = 6.0  # one token above any top_p: the keep-one rule
        top_p = (0.5, 0.75, 0.9)[case]
        expected = filter_logits(logits, top_p=top_p)
        probs = logits.softmax(-1)
        ranked, order = probs.sort(dim=-1, descending=True, stable=True)
        below = torch.zeros_like(probs).scatter(-1, order, (ranked.cumsum(-1) < top_p).float()).bool()
        unranked = probs.cumsum(-1) - probs < top_p  # the mass before each token in id order, not by probability
        check_tensor(call(fn, logits, top_p), expected, "B V", {
            N_("keep a token while the mass ranked above it is below top_p: the token that crosses top_p stays "
            "(the kept set must reach top_p), and the most likely token always stays."):
                logits.masked_fill(~below, -math.inf),
            N_("rank the tokens by probability first (most likely first, the lower id first on a tie), then "
            "add up their probabilities: in id order the sum means nothing."): logits.masked_fill(~unranked, -math.inf),
        }, _("for logits {logits_shape} and top_p={top_p}, your result").format(
            logits_shape=list(logits.shape), top_p=top_p))


@exercise("bpe_merge")
def check_bpe_merge(fn, inputs):
    """fn(ids, pair, new_id) -> ids with every occurrence of pair, left to right, replaced by new_id (notebook 16)."""
    for length in inputs.sizes(CASES, 6, 14):
        ids = [inputs.random.choice((104, 105, 106)) for _position in range(length)]
        ids[1:4] = [105, 105, 105]  # a run of three: (105, 105) merges once, at the left, not twice
        pair, new_id = (ids[1], ids[2]), 300
        expected = bpe.merge(ids, pair, new_id)
        first_at = next(i for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) == pair)
        mistakes = {
            N_("only the first occurrence was merged: keep going to the end of the list."):
                ids[:first_at] + [new_id] + ids[first_at + 2:],
            N_("the last id is missing: when the scan stops one before the end, the last id still belongs to "
               "the result."): expected[:-1],
        }
        result = call(fn, ids, pair, new_id)
        if not isinstance(result, list) or not all(isinstance(i, int) for i in result):
            raise Wrong(_("your function returned a {type}: return a list of ints.").format(type=type(result).__name__))
        about = _("for ids={ids}, pair={pair}, new_id={new_id}").format(ids=ids, pair=pair, new_id=new_id)
        for hint, wrong in mistakes.items():
            if result == wrong != expected:
                raise Wrong(f"{about}: {_(hint)}")
        if result != expected:
            raise Wrong(_("{about}, your result is {got}, not {expected}.").format(about=about, got=result,
                                                                                 expected=expected))


def check_exercise(name: str, fn: Callable, seed: int = 0) -> ExerciseResult:
    """Run the student's ``fn`` for exercise ``name`` on random sizes, print what is wrong (or that it is right).

    Returns an ExerciseResult, true when every size passed. ``name`` is one of ``EXERCISES``; ``seed``
    picks the sizes. ``fn`` works on copies of the inputs; changing them in place is named as a mistake.
    A function that never returns keeps the cell running: interrupt it (the stop button, a
    KeyboardInterrupt), which stops the check and leaves torch's settings as they were.
    """
    if not isinstance(name, str):
        raise TypeError(_("name must be the exercise's name as a string, e.g. 'split_heads', got a {type}; the "
                          "exercises are: {names}").format(type=type(name).__name__, names=", ".join(EXERCISES)))
    if name not in EXERCISES:
        raise ValueError(_("no exercise named {name!r}; the exercises are: {names}").format(
            name=name, names=", ".join(EXERCISES)))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(_("seed must be a whole number such as 0, got {seed!r}").format(seed=seed))
    if seed < 0:
        raise ValueError(_("seed must be 0 or more, got {seed}").format(seed=seed))
    if not callable(fn):
        raise TypeError(_("fn must be your function (pass it without calling it), got {type}").format(
            type=type(fn).__name__))
    try:
        with torch.random.fork_rng(devices=[]):  # a check draws weights: the notebook's random stream stays as it was
            EXERCISES[name](fn, Inputs(seed))
        passed, message = True, _("✓ {name}: right, on {cases} random sizes.").format(name=name, cases=CASES)
    except NotYet:
        passed, message = False, f"… {name}: {_(NOT_YET)}"
    except Wrong as wrong:
        passed, message = False, f"✗ {name}: {wrong}"
    print(message)
    return ExerciseResult(name, passed, message)

"""Decoding, for both models: one set of verbs, each taking either the encoder-decoder (``Transformer``, from a
source [B, L_src] and ``sos_id``) or the decoder-only ``GPT`` (from a prompt [B, L_p]).

- ``greedy_decode``: the most likely token at every step; ``greedy_steps`` yields each step as it goes.
- ``sample_decode``: each token drawn (temperature, top-k, top-p); temperature 0 is ``greedy_decode``.
- ``beam_search``: the ``beam_size`` best partial sequences kept at every step; ``beam_size=1`` is greedy.

Each returns the decoder's side as it grew: ``sos`` then the new tokens (encoder-decoder), or the prompt then
the new tokens (GPT). With ``use_cache`` (the default) each step feeds only the newest token and reuses the keys
and values of earlier steps; the result is the same.

Every verb takes the same two ids. ``sos_id``: the encoder-decoder's start token, required for it; a GPT takes
none (its prompt is its start). ``eos_id``: the end token: a row that produced it holds PAD from then on (``eos``
again in a GPT without padding) and decoding stops once every row has; None decodes ``max_new_tokens`` tokens in
every row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import nn

from ..checks import check_ids, check_positive_int, check_token_id
from ..i18n import _
from . import memory_guard
from .gpt import GPT
from .transformer import Transformer


def _check_source(model: Transformer, src: torch.Tensor) -> None:
    """src [B, L_src]: token ids of the source vocabulary, at least one real (non-PAD) token per row, as a
    GPT's prompt must have: a row of PAD only has nothing to attend to and would decode silently. A model with
    ``pad_id=None`` has no PAD: every token is real (``src != None`` would be one bool, not a row each)."""
    check_ids(src, model.cfg.src_vocab_size, "src")
    if src.device.type == "meta" or model.cfg.pad_id is None:  # shapes only, or no PAD: no ids to look at
        return
    empty = (~(src != model.cfg.pad_id).any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(_("src rows {rows} hold only PAD (id {pad_id}): give every source at least one token "
                           "(drop the empty sentences)").format(rows=empty, pad_id=model.cfg.pad_id))


def _check_left_padded(model: GPT, prompt: torch.Tensor) -> None:
    """prompt [B, L_p]: PAD (model.cfg.pad_id) only before a row's first real token, at least one real token
    per row; left padding only for a GPT whose positions can start at each row's first token (rope)."""
    pad_id = model.cfg.pad_id
    if pad_id is None:
        return  # a GPT without padding (GPT-2): every token is real
    real = prompt != pad_id  # [B, L_p]
    empty = (~real.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(_("prompt rows {rows} hold only PAD (id {pad_id}): give every row at least one token "
                           "(drop the empty prompts)").format(rows=empty, pad_id=pad_id))
    inside = (real.cummax(dim=1).values & ~real).any(dim=1).nonzero().flatten().tolist()  # PAD after a real token
    if inside:
        raise ValueError(_("prompt rows {rows} have PAD (id {pad_id}) after their first token: pad prompts of "
                           "different lengths on the left, e.g. wt.left_pad(prompts, pad_id), so every row's "
                           "next token is in the last column").format(rows=inside, pad_id=pad_id))
    if not real.all() and model.cfg.positions != "rope":
        raise ValueError(_("prompt is left-padded, but this GPT adds a table of positions "
                           "(positions={positions!r}), which would count the PAD: generate prompts of one length "
                           "together, or use a GPT with positions='rope'").format(positions=model.cfg.positions))


def _vocab_size(model: Transformer | GPT) -> int:
    return model.cfg.tgt_vocab_size if isinstance(model, Transformer) else model.cfg.vocab_size


def _check_start(model, inputs, max_new_tokens: int, sos_id, eos_id) -> None:
    """What every verb is given, checked before any work: the model, its source or prompt, the ids, the length."""
    if not isinstance(model, (Transformer, GPT)):
        raise TypeError(_("model must be a walkthrough.Transformer (with src and sos_id) or a walkthrough.GPT "
                          "(with a prompt), got {type}").format(type=type(model).__name__))
    check_positive_int("max_new_tokens", max_new_tokens)
    if isinstance(model, Transformer):
        if sos_id is None:
            raise TypeError(_("an encoder-decoder starts its target with a start token: pass sos_id, e.g. "
                              "sos_id=wt.Vocab.sos_id"))
        check_token_id("sos_id", sos_id, model.cfg.tgt_vocab_size)
        if max_new_tokens > model.cfg.max_len:
            raise ValueError(_("max_new_tokens={max_new_tokens} need positions up to {max_new_tokens_1}, but the "
                               "model has max_len={max_len}: decode fewer tokens").format(
                                   max_new_tokens=max_new_tokens, max_new_tokens_1=max_new_tokens - 1,
                                   max_len=model.cfg.max_len))
    elif sos_id is not None:
        raise TypeError(_("a GPT continues its prompt and takes no sos_id: leave sos_id out (a start token, if the "
                          "GPT has one, goes at the front of the prompt)"))
    if eos_id is not None:
        check_token_id("eos_id", eos_id, _vocab_size(model))
    if isinstance(model, Transformer):
        _check_source(model, inputs)
        return
    check_ids(inputs, model.cfg.vocab_size, "prompt")
    needed = inputs.size(1) + max_new_tokens - 1  # the last new token is never fed back
    if needed > model.cfg.max_len:
        raise ValueError(_("a prompt of {prompt_size_1} tokens and {max_new_tokens} new ones need {needed} positions, "
                           "but max_len={max_len}: shorten the prompt or ask for fewer tokens").format(
                               prompt_size_1=inputs.size(1), max_new_tokens=max_new_tokens, needed=needed,
                               max_len=model.cfg.max_len))
    _check_left_padded(model, inputs)


@contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    """The model in eval mode (no dropout) while the block runs, then back in the mode it was in."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


class _NextLogits:
    """Either model's next-token logits for a batch of growing sequences, with or without the cache: the one
    place the two models differ. ``copies``: each input row repeated (beam search's beams of one sentence)."""

    def __init__(self, model: Transformer | GPT, inputs: torch.Tensor, sos_id: int | None, use_cache: bool,
                 copies: int = 1):
        self.model = model
        if isinstance(model, Transformer):
            self.src = inputs.repeat_interleave(copies, dim=0)  # [N, L_src], N = B·copies
            self.memory = model.encode(inputs).repeat_interleave(copies, dim=0)  # [N, L_src, D], encoded once
            self.cache = model.new_cache(self.src) if use_cache else None
            self.start = torch.full((self.src.size(0), 1), sos_id, dtype=torch.long, device=inputs.device)  # [N, 1]
        else:
            self.start = inputs.repeat_interleave(copies, dim=0)  # [N, L_p]
            self.cache = model.new_cache(self.start.size(0)) if use_cache else None

    def __call__(self, ys: torch.Tensor) -> torch.Tensor:
        """ys [N, t], the sequences so far -> logits [N, V] for the token after each."""
        unseen = ys if self.cache is None else ys[:, len(self.cache):]  # [N, t], or the tokens the cache lacks
        if isinstance(self.model, Transformer):  # the loop's own ids, memory and cache: decode's checks skipped
            return self.model.output_head(self.model._decode(unseen, self.memory, self.src, self.cache)[:, -1])
        return self.model(unseen, self.cache)[:, -1]


def _finished_token(model: Transformer | GPT, eos_id: int | None) -> int | None:
    """What a row that has ended holds from then on: PAD, or ``eos`` again in a model without padding."""
    return eos_id if model.cfg.pad_id is None else model.cfg.pad_id


def _decode(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, sos_id: int | None,
            eos_id: int | None, use_cache: bool, choose: Callable[[torch.Tensor], torch.Tensor],
            no_repeat: bool = False) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The loop of greedy and sampled decoding (inputs already checked): ``choose`` turns each step's logits
    [B, V] into ids [B]; yields (the sequences so far [B, t+1], that step's logits [B, V], the model's own).
    ``no_repeat``: never choose the token just written again (a small model's "hundred hundred hundred")."""
    with _evaluating(model):
        next_logits = _NextLogits(model, inputs, sos_id, use_cache)
        ys = next_logits.start  # [B, 1] (sos) or [B, L_p] (the prompt)
        finished = torch.zeros(ys.size(0), dtype=torch.bool, device=ys.device)  # [B]
        for _step in range(max_new_tokens):
            logits = next_logits(ys)  # [B, V]
            next_id = choose(logits.scatter(1, ys[:, -1:], float("-inf")) if no_repeat else logits)  # [B]
            if eos_id is not None:
                next_id = next_id.masked_fill(finished, _finished_token(model, eos_id))
                finished |= next_id == eos_id
            ys = torch.cat([ys, next_id[:, None]], dim=1)  # [B, t+1]
            yield ys, logits
            if finished.all():
                break


@torch.no_grad()
def greedy_steps(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, sos_id: int | None = None,
                 eos_id: int | None = None, use_cache: bool = True, no_repeat: bool = False
                 ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``greedy_decode`` one step at a time: yields (the sequences so far [B, t+1], that step's probabilities
    [B, V]) per step, the sequences growing by one column each time. ``no_repeat``: the best token other than the
    one just written.

    ``sos_id``, ``eos_id``: as for every verb (the module's docstring).
    """
    _check_start(model, inputs, max_new_tokens, sos_id, eos_id)
    _check_rows_fit(model, inputs, max_new_tokens)
    for ys, logits in _decode(model, inputs, max_new_tokens, sos_id, eos_id, use_cache, _greedy, no_repeat):
        yield ys, logits.softmax(-1)


def _greedy(logits: torch.Tensor) -> torch.Tensor:
    next_id = logits.argmax(-1)  # [B]: the first max, the lower id on a tie
    if logits.gather(1, next_id[:, None]).isnan().any():  # argmax picks a row's NaN: B values to look at, not B·V
        _check_scores(logits, 0)  # names the rows and the cause
    return next_id


@torch.no_grad()
def greedy_decode(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, sos_id: int | None = None,
                  eos_id: int | None = None, use_cache: bool = True, no_repeat: bool = False) -> torch.Tensor:
    """The most likely token at every step. Encoder-decoder: src [B, L_src] -> ids [B, T] starting with ``sos``,
    T <= 1 + max_new_tokens. GPT: prompt [B, L_p] -> [B, L_p + T], T <= max_new_tokens; prompts of different
    lengths go in one batch left-padded (``wt.left_pad``), and each row gets the tokens it gets alone.

    ``sos_id``, ``eos_id``: as for every verb (the module's docstring).

    ``greedy_steps``' loop without its probabilities: the argmax of the logits is the same token.
    """
    _check_start(model, inputs, max_new_tokens, sos_id, eos_id)
    _check_rows_fit(model, inputs, max_new_tokens)
    for prefix, _logits in _decode(model, inputs, max_new_tokens, sos_id, eos_id, use_cache, _greedy, no_repeat):
        ys = prefix  # each step's [B, V] logits are dropped as the next step's arrive
    return ys


@torch.no_grad()
def sample_decode(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, sos_id: int | None = None,
                  eos_id: int | None = None, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None, generator: torch.Generator | None = None,
                  use_cache: bool = True) -> torch.Tensor:
    """``greedy_decode``'s loop with each new token drawn by ``sample_next``: temperature, then top_k, then top_p;
    a seeded ``generator`` reproduces the draws, and ``temperature=0`` gives exactly ``greedy_decode``'s tokens.
    The same shapes as ``greedy_decode``.

    ``sos_id``, ``eos_id``: as for every verb (the module's docstring).
    """
    _check_start(model, inputs, max_new_tokens, sos_id, eos_id)
    _check_sampling(_vocab_size(model), inputs.device, temperature, top_k, top_p, generator)
    _check_rows_fit(model, inputs, max_new_tokens)
    for prefix, _logits in _decode(model, inputs, max_new_tokens, sos_id, eos_id, use_cache,
                                   lambda logits: sample_next(logits, temperature, top_k, top_p, generator)):
        ys = prefix  # each step's [B, V] logits are dropped as the next step's arrive
    return ys


# ---- choosing the next token (notebook 12): sampling filters, sampling generation, beam search ----

def _check_temperature(temperature) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(_("temperature must be a number such as 0.8 (0 = greedy), got {temperature!r}").format(
            temperature=temperature))
    if not 0 <= temperature < math.inf:  # NaN fails this too
        raise ValueError(_("temperature must be a finite number >= 0 (0 = greedy, 1 = the model's own "
                         "probabilities), got {temperature}").format(temperature=temperature))


def _check_filters(vocab_size: int, top_k, top_p) -> None:
    if top_k is not None:
        check_positive_int("top_k", top_k, _(" (None keeps every token)"))
        if top_k > vocab_size:
            raise ValueError(_("top_k={top_k} is more than the vocabulary's {vocab_size} tokens: use at most "
                             "{vocab_size}, or None to keep every token").format(top_k=top_k, vocab_size=vocab_size))
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)):
            raise TypeError(_("top_p must be a probability such as 0.9, got {top_p!r}").format(top_p=top_p))
        if not 0 < top_p <= 1:  # NaN fails this too
            raise ValueError(_("top_p must be in (0, 1] (1 keeps every token, 0.9 the most likely ones whose "
                             "probabilities add up to 0.9), got {top_p}").format(top_p=top_p))


def _check_logits(logits, dims: str) -> None:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        got = logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise TypeError(_("logits must be a float tensor {dims}, got {got}").format(dims=dims, got=got))
    if logits.dim() == 0 or logits.size(-1) == 0:
        raise ValueError(_("logits must be {dims} with at least one token, got shape {logits_shape}").format(
            dims=dims, logits_shape=list(logits.shape)))


def _check_scores(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits [..., V] -> logits / temperature (the logits themselves at temperature 0), refused unless every
    row can rank its tokens: no NaN, no +inf, no overflow from a tiny temperature, one token above -inf."""
    def rows(bad: torch.Tensor) -> list[int]:  # bad [..., V] -> the rows (flattened) holding one
        return bad.reshape(-1, logits.size(-1)).any(-1).nonzero().flatten().tolist()

    scaled = logits if temperature == 0 else logits / temperature
    if scaled.isfinite().all():  # the usual case, one pass: no NaN, no inf, no overflow, a token in every row
        return scaled
    if logits.isnan().any():
        raise ValueError(_("logits hold NaN (rows {rows}): a NaN has no rank, so no token can be chosen; the "
                           "model computed it (look for a NaN weight or input)").format(rows=rows(logits.isnan())))
    if (logits == math.inf).any():
        raise ValueError(_("logits hold +inf (rows {rows}): an infinite logit has no probability to compare; "
                           "the model overflowed (look for a huge weight, or float16 overflow)").format(
                               rows=rows(logits == math.inf)))
    overflow = scaled.isinf() & logits.isfinite()
    if overflow.any():
        largest = logits[logits.isfinite()].abs().max().item()
        raise ValueError(_("temperature={temperature} is too small: logits / temperature overflow {dtype} "
                           "(the largest logit is {largest:.4g}); use temperature=0 for greedy decoding, or at "
                           "least {lowest:.3g}").format(temperature=temperature, dtype=logits.dtype, largest=largest,
                                                        lowest=largest / torch.finfo(logits.dtype).max))
    if (scaled == -math.inf).all(-1).any():
        raise ValueError(_("every logit of rows {rows} is -inf: no token is left to choose").format(
            rows=rows((scaled == -math.inf).all(-1, keepdim=True).expand_as(scaled))))
    return scaled


def _check_generator(generator, device: torch.device) -> None:
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(_("generator must be a torch.Generator (or None), got {type}").format(
            type=type(generator).__name__))
    if generator.device.type != device.type:
        raise ValueError(_("generator is on {device} but the logits are on {device_}: make it with "
                         "torch.Generator(device='{type}')").format(
                             device=generator.device, device_=device, type=device.type))


def _check_sampling(vocab_size: int, device: torch.device, temperature, top_k, top_p, generator) -> None:
    _check_temperature(temperature)
    _check_filters(vocab_size, top_k, top_p)
    _check_generator(generator, device)


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """logits [..., V] -> the same shape, the tokens filtered out set to -inf (the others unchanged).

    ``top_k``: exactly the k largest stay, even when logits tie (the lower id wins a tie).
    ``top_p`` (nucleus), applied after top_k: the smallest set of most likely tokens whose probability
    reaches top_p stays (ranked as top_k ranks them); the most likely token always stays; 1 keeps every token.
    """
    _check_logits(logits, "[..., V]")
    _check_filters(logits.size(-1), top_k, top_p)
    order = logits.sort(dim=-1, descending=True, stable=True).indices  # [..., V] ids, most likely first
    keep_ranked = torch.ones_like(order, dtype=torch.bool)  # [..., V] by rank
    if top_k is not None:
        keep_ranked[..., top_k:] = False
    if top_p is not None and top_p < 1:  # 1 keeps every token, exactly (a cumulative sum may round to 1 early)
        probs = logits.gather(-1, order).masked_fill(~keep_ranked, -math.inf).softmax(-1)  # [..., V] by rank
        above = torch.cat([torch.zeros_like(probs[..., :1]), probs.cumsum(-1)[..., :-1]], dim=-1)  # mass ranked above
        keep_ranked &= above < top_p  # stop once the tokens above already reach top_p
        keep_ranked[..., 0] = True
    keep = torch.zeros_like(keep_ranked).scatter(-1, order, keep_ranked)  # [..., V] by id
    return logits.masked_fill(~keep, -math.inf)


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> torch.Tensor:
    """logits [..., V] -> the distribution ``sample_next`` draws from [..., V]: logits / temperature, then
    filtered (``filter_logits``), then softmax. ``temperature=0``: all the mass on the argmax (lower id on a tie).
    Logits no token can be ranked by (NaN, +inf, overflowing once divided by a tiny temperature, a row all -inf)
    are refused with a ValueError naming the cause."""
    _check_logits(logits, "[..., V]")
    _check_temperature(temperature)
    scaled = _check_scores(logits, temperature)  # [..., V]
    if temperature == 0:
        return torch.zeros_like(logits).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    return filter_logits(scaled, top_k, top_p).softmax(-1)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """logits [B, V] -> ids [B], one draw per row from ``next_token_probs``; ``temperature=0`` is greedy
    (argmax, no draw). The same seeded ``generator`` gives the same ids."""
    _check_logits(logits, "[B, V]")
    if logits.dim() != 2:
        raise ValueError(_("logits must be [B, V] (one row per sequence), got shape {logits_shape}").format(
            logits_shape=list(logits.shape)))
    _check_sampling(logits.size(-1), logits.device, temperature, top_k, top_p, generator)
    if temperature == 0:
        _check_scores(logits, 0)
        return logits.argmax(-1)  # [B], the first max: the lower id on a tie
    probs = next_token_probs(logits, temperature, top_k, top_p)  # [B, V]
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # [B]


def length_penalty_factor(length: torch.Tensor, length_penalty: float) -> torch.Tensor:
    """GNMT's length penalty (Wu et al. 2016): ((5 + len) / 6) ** length_penalty; 1 when length_penalty = 0."""
    return ((5 + length.to(torch.get_default_dtype())) / 6) ** length_penalty


class Beams(NamedTuple):
    """What ``beam_search`` found for each input row: the best sequence and its score, then every beam, best first.
    T counts the start (``sos``, or the prompt) and the new tokens."""

    best: torch.Tensor  # [B, T]
    best_score: torch.Tensor  # [B]
    ids: torch.Tensor  # [B, beam, T]
    scores: torch.Tensor  # [B, beam]


def _check_beam(vocab: int, beam_size, length_penalty) -> None:
    check_positive_int("beam_size", beam_size, _(" (1 is greedy decoding)"))
    if beam_size > vocab:
        raise ValueError(_("beam_size={beam_size} is more than the {vocab} target tokens: the first step could not "
                         "fill the beams; use at most {vocab}").format(beam_size=beam_size, vocab=vocab))
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise TypeError(_("length_penalty must be a number (0 = none, GNMT uses 0.6-1.0), got {length_penalty!r}")
            .format(length_penalty=length_penalty))
    if not math.isfinite(length_penalty):
        raise ValueError(_("length_penalty must be a finite number (0 = none, GNMT uses 0.6-1.0), got {length_penalty}")
            .format(length_penalty=length_penalty))


def beam_peak_bytes(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, beam_size: int) -> int:
    """About the most ``beam_search`` holds at once, in bytes: for each of the B·beam rows, a step's scores over
    the vocabulary (the logits, their log-softmax, the totals, the ranked totals, the sorted values and their
    int64 indices: about 8 float32 numbers per token) and the cache's keys and values (2 per layer, over the
    source or prompt and every new token)."""
    rows, width = inputs.size(0) * beam_size, model.cfg.d_model
    length = inputs.size(1) + max_new_tokens + 1  # the source (its cross-attention cache) or prompt, and the target
    return 4 * rows * (8 * _vocab_size(model) + 2 * model.cfg.num_layers * length * width)


def _check_rows_fit(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int) -> None:
    """Greedy and sampled decoding: a batch of rows this process cannot hold is refused before decoding (a
    [100000, 4] source at V = 50,000 asked for 20 GB and the kernel died)."""
    if inputs.device.type == "cpu":  # the guard reads this process's host memory
        memory_guard.check_room(beam_peak_bytes(model, inputs, max_new_tokens, 1), _(
            "decoding {rows} rows at once (each scoring all {vocab} tokens at every step)").format(
                rows=inputs.size(0), vocab=_vocab_size(model)), _("decode fewer rows at a time"))


def _check_beam_fits(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, beam_size: int) -> None:
    """Refuse a beam this process cannot hold before decoding (the classroom failure: 32 phrases at beam 500 took
    234 s and 5.2 GB, and on a 2 GB hub the kernel dies): the estimate against the memory guard's limit."""
    if inputs.device.type != "cpu":  # the guard reads this process's host memory
        return
    headroom = memory_guard.memory_headroom()
    needed = beam_peak_bytes(model, inputs, max_new_tokens, beam_size)
    if headroom is not None and needed > headroom[0]:
        room, limit = headroom
        raise ValueError(_("beam_size={beam_size} for {batch} rows would need about {needed:.1f} GiB ({rows} beams, "
                           "each scoring all {vocab} tokens at every step), but {limit} leaves this process "
                           "{room:.1f} GiB: use a smaller beam_size (4 to 10 is usual) or decode fewer rows at a "
                           "time").format(beam_size=beam_size, batch=inputs.size(0), needed=needed / 2**30,
                                          rows=inputs.size(0) * beam_size, vocab=_vocab_size(model), limit=limit,
                                          room=max(room, 0) / 2**30))


@torch.no_grad()
def beam_search(model: Transformer | GPT, inputs: torch.Tensor, max_new_tokens: int, sos_id: int | None = None,
                eos_id: int | None = None, beam_size: int = 4, length_penalty: float = 0.0,
                use_cache: bool = True) -> Beams:
    """The best of ``beam_size`` beams per input row, as ``Beams(best [B, T], best_score [B], ids [B, beam, T],
    scores [B, beam])``, best first. T as in ``greedy_decode``; after a beam's ``eos`` it holds PAD.

    ``sos_id``, ``eos_id``: as for every verb (the module's docstring).

    A beam's score is the sum of its chosen tokens' log-probabilities (up to and including ``eos``)
    divided by GNMT's length penalty ``((5 + len) / 6) ** length_penalty``, len = those tokens' count
    (0: no penalty, the plain log-probability). Each step every live beam proposes every token; the
    beam_size best-scoring continuations of each row survive. A finished beam proposes only itself
    (PAD, at no cost), so it stays finished and keeps its score. Stops when every beam has finished.

    The beams live in the batch dim: row b's beams are rows b·beam .. b·beam + beam - 1 of [B·beam, ...].
    The source's memory (hence the cross-attention cache) is expanded once; after each step the
    self-attention cache follows the surviving beams (``DecodingCache.reorder``: index_select on the batch dim).
    """
    _check_start(model, inputs, max_new_tokens, sos_id, eos_id)
    vocab = _vocab_size(model)
    _check_beam(vocab, beam_size, length_penalty)
    _check_beam_fits(model, inputs, max_new_tokens, beam_size)
    with _evaluating(model):
        batch, k, device = inputs.size(0), beam_size, inputs.device
        next_logits = _NextLogits(model, inputs, sos_id, use_cache, copies=k)
        ys = next_logits.start  # [B·beam, t0]: t0 = 1 (sos) or L_p (the prompt)
        log_p = torch.full((batch, k), -math.inf, device=device)  # [B, beam]
        log_p[:, 0] = 0.0  # at the start the beams are one: only the first proposes, or all would be the same
        lengths = torch.zeros(batch, k, dtype=torch.long, device=device)  # [B, beam] tokens scored
        finished = torch.zeros(batch, k, dtype=torch.bool, device=device)  # [B, beam]
        ended = torch.full((vocab,), -math.inf, device=device)  # [V]: a finished beam's only continuation
        if eos_id is not None:
            ended[_finished_token(model, eos_id)] = 0.0  # PAD (eos without padding), at no cost
        for _step in range(max_new_tokens):
            step = next_logits(ys).log_softmax(-1)  # [B·beam, V]
            step = torch.where(finished[..., None], ended, step.view(batch, k, vocab))  # [B, beam, V]
            total = log_p[..., None] + step  # [B, beam, V]
            new_lengths = lengths + (~finished).long()  # [B, beam]
            ranked = total / length_penalty_factor(new_lengths, length_penalty)[..., None]  # [B, beam, V]
            # a stable sort, not topk (whose ties fall either way): of equal scores the lower beam, then the
            # lower token id wins, the tie rule of greedy decoding and top_k; [B, beam], best first
            choice = ranked.view(batch, k * vocab).sort(dim=-1, descending=True, stable=True).indices[:, :k]
            beam, token = choice // vocab, choice % vocab  # [B, beam] each: which old beam, which token
            log_p = total.view(batch, k * vocab).gather(-1, choice)
            lengths = new_lengths.gather(-1, beam)
            finished = finished.gather(-1, beam)
            if eos_id is not None:
                finished |= token == eos_id
            rows = (beam + k * torch.arange(batch, device=device)[:, None]).view(-1)  # [B·beam] old rows
            ys = torch.cat([ys.index_select(0, rows), token.view(-1, 1)], dim=1)  # [B·beam, t+1]
            if next_logits.cache is not None:
                next_logits.cache.reorder(rows)
            if finished.all():
                break
        scores = log_p / length_penalty_factor(lengths, length_penalty)  # [B, beam], best first
        every = ys.view(batch, k, -1)  # [B, beam, T]
        return Beams(every[:, 0], scores[:, 0], every, scores)

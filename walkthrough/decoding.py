"""Decoding, for both models: one new token at a time, the greedy choice, with or without the cache."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import torch
from torch import nn

from .config import check_positive_int, check_token_id
from .embedding import check_ids
from .gpt import GPT
from .i18n import _
from .model import Transformer


def check_decoding_ids(model: nn.Module, vocab_size: int, max_new_tokens: int, **ids) -> None:
    """max_new_tokens must fit the model's positions; start/end ids must be tokens of its vocabulary."""
    check_positive_int("max_new_tokens", max_new_tokens)
    if max_new_tokens > model.cfg.max_len:
        raise ValueError(_("max_new_tokens={max_new_tokens} need positions up to {max_new_tokens_1}, but the model "
                         "has max_len={max_len}: decode fewer tokens").format(
                             max_new_tokens=max_new_tokens, max_new_tokens_1=max_new_tokens - 1,
                             max_len=model.cfg.max_len))
    for name, value in ids.items():
        check_token_id(name, value, vocab_size)


def _new_tokens(max_new_tokens: int | None, max_len: int | None) -> int:
    """``max_new_tokens``, or the old name ``max_len`` (DESIGN's contract) with a DeprecationWarning."""
    if max_len is None:
        if max_new_tokens is None:
            raise TypeError(_("give max_new_tokens: how many tokens to decode at most"))
        return max_new_tokens
    if max_new_tokens is not None:
        raise TypeError(_("give max_new_tokens only (max_len is its old name)"))
    warnings.warn("max_len is now max_new_tokens (cfg.max_len is the position table's size)", DeprecationWarning,
                  stacklevel=3)
    return max_len


def check_source(model: Transformer, src: torch.Tensor) -> None:
    """src [B, L_src]: token ids of the source vocabulary, at least one real (non-PAD) token per row, as a
    GPT's prompt must have: a row of PAD only has nothing to attend to and would decode silently."""
    check_ids(src, model.cfg.src_vocab_size, "src")
    if src.device.type == "meta":  # shapes only: no ids to look at
        return
    empty = (~(src != model.cfg.pad_id).any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(_("src rows {rows} hold only PAD (id {pad_id}): give every source at least one token "
                           "(drop the empty sentences)").format(rows=empty, pad_id=model.cfg.pad_id))


def _check_model(model, wanted: type, right: str) -> None:
    if not isinstance(model, wanted):
        raise TypeError(_("model must be a walkthrough.{type}, got {type_}; {right}").format(
            type=wanted.__name__, type_=type(model).__name__, right=right))


@torch.no_grad()
def greedy_steps(model: Transformer, src: torch.Tensor, max_new_tokens: int | None = None, sos_id: int | None = None,
                 eos_id: int | None = None, use_cache: bool = True, *, max_len: int | None = None,
                 ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Decode one position at a time, yielding (prefix [B, t+1], probabilities [B, V_tgt]) per step.

    The prefix grows [B, 1] -> [B, 2] -> ...; rows that produced ``eos`` are padded from then on.
    Stops when every row has finished or after ``max_new_tokens`` new tokens. ``use_cache``: feed only
    the newest token and reuse the keys and values of earlier steps (same result); False re-runs the
    decoder on the whole prefix at every step.
    """
    max_new_tokens = _new_tokens(max_new_tokens, max_len)
    _check_model(model, Transformer, "for a GPT use wt.greedy_generate(model, prompt, max_new_tokens)")
    check_decoding_ids(model, model.cfg.tgt_vocab_size, max_new_tokens, sos_id=sos_id, eos_id=eos_id)
    check_source(model, src)
    yield from _decode_steps(model, src, max_new_tokens, sos_id, eos_id, use_cache, 0, None, None, None)


def _decode_steps(model: Transformer, src: torch.Tensor, max_new_tokens: int, sos_id: int, eos_id: int,
                  use_cache: bool, temperature: float, top_k: int | None, top_p: float | None,
                  generator: torch.Generator | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The encoder-decoder's loop (inputs already checked): each new token from ``sample_next``; yields
    (prefix [B, t+1], the model's probabilities [B, V_tgt]) per step. Temperature 0 is greedy."""
    was_training = model.training
    model.eval()
    try:
        memory = model.encode(src)  # [B, L_src, D], computed once
        cache = model.new_cache(src) if use_cache else None
        ys = torch.full((src.size(0), 1), sos_id, dtype=torch.long, device=src.device)  # [B, 1]
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _step in range(max_new_tokens):
            fed = ys[:, -1:] if use_cache else ys  # [B, 1] or [B, t]
            logits = model.output_head(model.decode(fed, memory, src, cache)[:, -1])  # [B, V_tgt]
            next_id = sample_next(logits, temperature, top_k, top_p, generator).masked_fill(finished, model.cfg.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)  # [B, t+1]
            finished |= next_id == eos_id
            yield ys, logits.softmax(-1)
            if finished.all():
                break
    finally:
        model.train(was_training)


def greedy_decode(model: Transformer, src: torch.Tensor, max_new_tokens: int | None = None,
                  sos_id: int | None = None, eos_id: int | None = None, use_cache: bool = True, *,
                  max_len: int | None = None) -> torch.Tensor:
    """src [B, L_src] -> ids [B, T] starting with ``sos``, T <= 1 + max_new_tokens; after ``eos`` a row
    holds ``pad``. One step's probabilities are alive at a time."""
    _check_model(model, Transformer, "for a GPT use wt.greedy_generate(model, prompt, max_new_tokens)")
    for prefix, _probs in greedy_steps(model, src, _new_tokens(max_new_tokens, max_len), sos_id, eos_id,
                                       use_cache):
        ys = prefix  # the step's [B, V] probabilities are dropped as the next step's arrive
    return ys


@torch.no_grad()
def sample_decode(model: Transformer, src: torch.Tensor, max_new_tokens: int, sos_id: int, eos_id: int,
                  temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                  generator: torch.Generator | None = None, use_cache: bool = True) -> torch.Tensor:
    """src [B, L_src] -> ids [B, T] starting with ``sos``, T <= 1 + max_new_tokens, ``pad`` after ``eos``.

    ``generate``'s sibling for the encoder-decoder: each new token comes from ``sample_next`` (temperature,
    top_k, top_p, a seeded ``generator`` reproduces the draws). ``greedy_decode`` is the same loop at
    temperature 0, so ``temperature=0`` gives exactly its tokens.
    """
    _check_model(model, Transformer, "for a GPT use wt.generate(model, prompt, max_new_tokens, ...)")
    check_decoding_ids(model, model.cfg.tgt_vocab_size, max_new_tokens, sos_id=sos_id, eos_id=eos_id)
    _check_sampling(model.cfg.tgt_vocab_size, src.device, temperature, top_k, top_p, generator)
    check_source(model, src)
    for prefix, _probs in _decode_steps(model, src, max_new_tokens, sos_id, eos_id, use_cache, temperature, top_k,
                                        top_p, generator):
        ys = prefix  # each step's [B, V] probabilities are dropped as the next step's arrive
    return ys


def greedy_generate(model: GPT, prompt: torch.Tensor, max_new_tokens: int, eos_id: int | None = None,
                    use_cache: bool = True) -> torch.Tensor:
    """prompt [B, L_p] (rows of different lengths left-padded) -> [B, L_p + T], T <= max_new_tokens.

    The argmax at every step: ``generate`` at temperature 0. Rows that produced ``eos`` are padded from
    then on; stops when all have. With ``use_cache`` the prompt runs once and each later step feeds only
    the newest token.
    """
    return generate(model, prompt, max_new_tokens, eos_id, temperature=0, use_cache=use_cache)


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


def check_left_padded(model: GPT, prompt: torch.Tensor) -> None:
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


@torch.no_grad()
def generate(model: GPT, prompt: torch.Tensor, max_new_tokens: int, eos_id: int | None = None,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None, use_cache: bool = True) -> torch.Tensor:
    """prompt [B, L_p] -> [B, L_p + T], T <= max_new_tokens.

    Each new token comes from ``sample_next`` (temperature 0: greedy, which is ``greedy_generate``).
    Rows that produced ``eos`` are padded from then on; stops when all have. With ``use_cache`` the
    prompt runs once and each later step feeds only the newest token; the cache grows for all rows at once.

    Prompts of different lengths go in one batch left-padded (``wt.left_pad``): PAD first, then the prompt,
    so every row's next token is in the last column. PAD keys are masked at every step and each row's
    positions start at its first real token (rotary positions), so a row gets the tokens it gets alone.
    """
    _check_model(model, GPT, "for an encoder-decoder use wt.greedy_decode(model, src, max_new_tokens, sos_id, "
                             "eos_id), wt.sample_decode(..., temperature=...) or wt.beam_search(...)")
    check_ids(prompt, model.cfg.vocab_size, "prompt")
    check_positive_int("max_new_tokens", max_new_tokens)
    if eos_id is not None:
        check_token_id("eos_id", eos_id, model.cfg.vocab_size)
    _check_sampling(model.cfg.vocab_size, prompt.device, temperature, top_k, top_p, generator)
    needed = prompt.size(1) + max_new_tokens - 1  # the last new token is never fed back
    if needed > model.cfg.max_len:
        raise ValueError(_("a prompt of {prompt_size_1} tokens and {max_new_tokens} new ones need {needed} positions, "
                         "but max_len={max_len}: shorten the prompt or ask for fewer tokens").format(
                             prompt_size_1=prompt.size(1), max_new_tokens=max_new_tokens, needed=needed,
                             max_len=model.cfg.max_len))
    check_left_padded(model, prompt)
    was_training = model.training
    model.eval()
    try:
        cache = model.new_cache(prompt.size(0)) if use_cache else None
        ids, fed = prompt, prompt
        finished = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)
        for _step in range(max_new_tokens):
            logits = model(fed, cache)[:, -1]  # [B, V]
            next_id = sample_next(logits, temperature, top_k, top_p, generator)  # [B]
            if eos_id is not None:  # a finished row repeats pad (eos in a model without padding)
                next_id = next_id.masked_fill(finished, eos_id if model.cfg.pad_id is None else model.cfg.pad_id)
            ids = torch.cat([ids, next_id[:, None]], dim=1)  # [B, t+1]
            fed = next_id[:, None] if use_cache else ids
            if eos_id is not None:
                finished |= next_id == eos_id
                if finished.all():
                    break
        return ids
    finally:
        model.train(was_training)


def length_penalty_factor(length: torch.Tensor, length_penalty: float) -> torch.Tensor:
    """GNMT's length penalty (Wu et al. 2016): ((5 + len) / 6) ** length_penalty; 1 when length_penalty = 0."""
    return ((5 + length.to(torch.get_default_dtype())) / 6) ** length_penalty


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, max_new_tokens: int | None = None, sos_id: int | None = None,
                eos_id: int | None = None, beam_size: int = 4, length_penalty: float = 0.0, use_cache: bool = True,
                return_all: bool = False, *, max_len: int | None = None):
    """src [B, L_src] -> (ids [B, T], scores [B]): the best of ``beam_size`` beams per sentence.

    ``return_all=True`` -> (ids, scores, every beam's ids [B, beam, T], their scores [B, beam]), best first.
    ids start with ``sos``; after a beam's ``eos`` it holds ``pad``; T <= 1 + max_new_tokens.

    A beam's score is the sum of its chosen tokens' log-probabilities (up to and including ``eos``)
    divided by GNMT's length penalty ``((5 + len) / 6) ** length_penalty``, len = those tokens' count
    (0: no penalty, the plain log-probability). Each step every live beam proposes every token; the
    beam_size best-scoring continuations of each sentence survive. A finished beam proposes only itself
    (pad, at no cost), so it stays finished and keeps its score. Stops when every beam has finished.

    The beams live in the batch dim: sentence b's beams are rows b·beam .. b·beam + beam - 1 of
    [B·beam, ...]. The memory (hence the cross-attention cache) is expanded once; after each step the
    self-attention cache follows the surviving beams (``DecodingCache.reorder``: index_select on the batch dim).
    """
    max_new_tokens = _new_tokens(max_new_tokens, max_len)
    _check_model(model, Transformer, "for a GPT use wt.generate(model, prompt, max_new_tokens, ...)")
    vocab, pad_id = model.cfg.tgt_vocab_size, model.cfg.pad_id
    check_decoding_ids(model, vocab, max_new_tokens, sos_id=sos_id, eos_id=eos_id)
    check_source(model, src)
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
    was_training = model.training
    model.eval()
    try:
        batch, k = src.size(0), beam_size
        memory = model.encode(src).repeat_interleave(k, dim=0)  # [B·beam, L_src, D], expanded once
        beam_src = src.repeat_interleave(k, dim=0)  # [B·beam, L_src]
        cache = model.new_cache(beam_src) if use_cache else None
        ys = torch.full((batch * k, 1), sos_id, dtype=torch.long, device=src.device)  # [B·beam, 1]
        log_p = torch.full((batch, k), -math.inf, device=src.device)  # [B, beam]
        log_p[:, 0] = 0.0  # at the start the beams are one: only the first proposes, or all would be the same
        lengths = torch.zeros(batch, k, dtype=torch.long, device=src.device)  # [B, beam] tokens scored
        finished = torch.zeros(batch, k, dtype=torch.bool, device=src.device)  # [B, beam]
        stay = torch.full((vocab,), -math.inf, device=src.device)
        stay[pad_id] = 0.0  # a finished beam's only continuation: pad, at no cost
        for _step in range(max_new_tokens):
            fed = ys[:, -1:] if use_cache else ys  # [B·beam, 1] or [B·beam, t]
            step = model.output_head(model.decode(fed, memory, beam_src, cache)[:, -1]).log_softmax(-1)  # [B·beam, V]
            step = torch.where(finished[..., None], stay, step.view(batch, k, vocab))  # [B, beam, V]
            total = log_p[..., None] + step  # [B, beam, V]
            new_lengths = lengths + (~finished).long()  # [B, beam]
            ranked = total / length_penalty_factor(new_lengths, length_penalty)[..., None]  # [B, beam, V]
            # a stable sort, not topk (whose ties fall either way): of equal scores the lower beam, then the
            # lower token id wins, the tie rule of greedy decoding and top_k; [B, beam], best first
            choice = ranked.view(batch, k * vocab).sort(dim=-1, descending=True, stable=True).indices[:, :k]
            beam, token = choice // vocab, choice % vocab  # [B, beam] each: which old beam, which token
            log_p = total.view(batch, k * vocab).gather(-1, choice)
            lengths = new_lengths.gather(-1, beam)
            finished = finished.gather(-1, beam) | (token == eos_id)
            rows = (beam + k * torch.arange(batch, device=src.device)[:, None]).view(-1)  # [B·beam] old rows
            ys = torch.cat([ys.index_select(0, rows), token.view(-1, 1)], dim=1)  # [B·beam, t+1]
            if cache is not None:
                cache.reorder(rows)
            if finished.all():
                break
        scores = log_p / length_penalty_factor(lengths, length_penalty)  # [B, beam], best first
        every = ys.view(batch, k, -1)  # [B, beam, T]
        if return_all:
            return every[:, 0], scores[:, 0], every, scores
        return every[:, 0], scores[:, 0]
    finally:
        model.train(was_training)

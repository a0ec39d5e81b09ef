"""Decoding, for both models: one new token at a time, the greedy choice, with or without the cache."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch
from torch import nn

from .config import check_positive_int, check_token_id
from .embedding import check_ids
from .gpt import GPT
from .model import Transformer


def check_decoding_ids(model: nn.Module, vocab_size: int, max_new_tokens: int, **ids) -> None:
    """max_new_tokens must fit the model's positions; start/end ids must be tokens of its vocabulary."""
    check_positive_int("max_new_tokens", max_new_tokens)
    if max_new_tokens > model.cfg.max_len:
        raise ValueError(f"max_new_tokens={max_new_tokens} need positions up to {max_new_tokens - 1}, but the model "
                         f"has max_len={model.cfg.max_len}: decode fewer tokens")
    for name, value in ids.items():
        check_token_id(name, value, vocab_size)


def _new_tokens(max_new_tokens: int | None, max_len: int | None) -> int:
    """``max_new_tokens``, or the old name ``max_len`` (DESIGN's contract) with a DeprecationWarning."""
    if max_len is None:
        if max_new_tokens is None:
            raise TypeError("give max_new_tokens: how many tokens to decode at most")
        return max_new_tokens
    if max_new_tokens is not None:
        raise TypeError("give max_new_tokens only (max_len is its old name)")
    warnings.warn("max_len is now max_new_tokens (cfg.max_len is the position table's size)", DeprecationWarning,
                  stacklevel=3)
    return max_len


def _check_model(model, wanted: type, right: str) -> None:
    if not isinstance(model, wanted):
        raise TypeError(f"model must be a walkthrough.{wanted.__name__}, got {type(model).__name__}; {right}")


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
    was_training = model.training
    model.eval()
    try:
        memory = model.encode(src)  # [B, L_src, D], computed once
        cache = model.new_cache(src) if use_cache else None
        ys = torch.full((src.size(0), 1), sos_id, dtype=torch.long, device=src.device)  # [B, 1]
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_new_tokens):
            fed = ys[:, -1:] if use_cache else ys  # [B, 1] or [B, t]
            probs = model.output_head(model.decode(fed, memory, src, cache)[:, -1]).softmax(-1)  # [B, V_tgt]
            next_id = probs.argmax(-1).masked_fill(finished, model.cfg.pad_id)  # [B]
            ys = torch.cat([ys, next_id[:, None]], dim=1)  # [B, t+1]
            finished |= next_id == eos_id
            yield ys, probs
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
    for prefix, _ in greedy_steps(model, src, _new_tokens(max_new_tokens, max_len), sos_id, eos_id, use_cache):
        ys = prefix  # the step's [B, V] probabilities are dropped as the next step's arrive
    return ys


@torch.no_grad()
def greedy_generate(model: GPT, prompt: torch.Tensor, max_new_tokens: int, eos_id: int | None = None,
                    use_cache: bool = True) -> torch.Tensor:
    """prompt [B, L_p] (no padding: every row the same length) -> [B, L_p + T], T <= max_new_tokens.

    Rows that produced ``eos`` are padded from then on; stops when all have. With ``use_cache`` the
    prompt runs once and each later step feeds only the newest token.
    """
    _check_model(model, GPT, "for an encoder-decoder use wt.greedy_decode(model, src, max_new_tokens, sos_id, "
                             "eos_id)")
    check_ids(prompt, model.cfg.vocab_size, "prompt")
    check_positive_int("max_new_tokens", max_new_tokens)
    if eos_id is not None:
        check_token_id("eos_id", eos_id, model.cfg.vocab_size)
    needed = prompt.size(1) + max_new_tokens - 1  # the last new token is never fed back
    if needed > model.cfg.max_len:
        raise ValueError(f"a prompt of {prompt.size(1)} tokens and {max_new_tokens} new ones need {needed} positions, "
                         f"but max_len={model.cfg.max_len}: shorten the prompt or ask for fewer tokens")
    if (prompt == model.cfg.pad_id).any():
        raise ValueError("prompt holds pad tokens: generate for prompts of one length together (group them by length)")
    was_training = model.training
    model.eval()
    try:
        cache = model.new_cache(prompt.size(0)) if use_cache else None
        ids, fed = prompt, prompt
        finished = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)
        for _ in range(max_new_tokens):
            next_id = model(fed, cache)[:, -1].argmax(-1).masked_fill(finished, model.cfg.pad_id)  # [B]
            ids = torch.cat([ids, next_id[:, None]], dim=1)  # [B, t+1]
            fed = next_id[:, None] if use_cache else ids
            if eos_id is not None:
                finished |= next_id == eos_id
                if finished.all():
                    break
        return ids
    finally:
        model.train(was_training)

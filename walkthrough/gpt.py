"""The decoder-only model (notebook 09): the encoder-decoder's decoder with the encoder and cross-attention removed.

Built from the same parts: ``Embedding``, ``DecoderLayer(cross_attention=False)``, ``Decoder``,
``OutputHead``, the same ``DecodingCache``. What changes: grouped-query attention (fewer K/V heads)
and rotary positions (Q and K rotated inside attention instead of a table added to the input).
"""

from __future__ import annotations

import torch
from torch import nn

from .config import GPTConfig, check_fits_in_memory, check_positive_int, check_token_id
from .embedding import Embedding, check_ids
from .layers import DecoderLayer
from .model import Decoder, DecodingCache, OutputHead, self_attention_mask
from .steps import ONE_KV_HEAD_PER_HEAD


class GPT(nn.Module):
    """Token ids [B, L] -> logits [B, L, V]: position t predicts token t+1, seeing tokens 0..t only."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if not isinstance(cfg, GPTConfig):
            raise TypeError(f"cfg must be a walkthrough.GPTConfig, got {type(cfg).__name__}")
        if torch.empty(0).device.type != "meta":
            check_fits_in_memory(cfg, "this GPT")
        self.cfg = cfg
        rope = cfg.positions == "rope"
        self.embed = Embedding(cfg.vocab_size, cfg.d_model, cfg.max_len, cfg.dropout, add_positions=not rope)
        self.decoder = Decoder([DecoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout, cross_attention=False,
                                             norm_first=cfg.norm_first, num_kv_heads=cfg.num_kv_heads, rope=rope)
                                for _ in range(cfg.num_layers)], cfg.d_model, length="L")
        self.generator = OutputHead(cfg.d_model, cfg.vocab_size, length="L")

    @property
    def dim_names(self) -> dict[str, str]:
        """How a trace names this model's dims: one sequence of length L; H_kv is H without grouped-query attention."""
        return {"L_tgt": "L", **(ONE_KV_HEAD_PER_HEAD if self.cfg.kv_heads == self.cfg.num_heads else {})}

    def new_cache(self, batch: int) -> DecodingCache:
        """An empty cache for generating ``batch`` sequences one token at a time."""
        return DecodingCache(self, batch)

    def forward(self, ids: torch.Tensor, cache: DecodingCache | None = None) -> torch.Tensor:
        """ids [B, L] -> logits [B, L, V]. With a ``cache``, ids are only the new tokens after ``len(cache)``."""
        offset = 0 if cache is None else len(cache)
        x = self.embed(ids, "ids", offset)  # [B, L, D]
        mask = self_attention_mask(self, ids, cache)  # [B, 1, L, L], or [B, 1, n, t] cached
        return self.generator(self.decoder(x, None, mask, None, cache))


@torch.no_grad()
def greedy_generate(model: GPT, prompt: torch.Tensor, max_new_tokens: int, eos_id: int | None = None,
                    use_cache: bool = True) -> torch.Tensor:
    """prompt [B, L_p] (no padding: every row the same length) -> [B, L_p + T], T <= max_new_tokens.

    Rows that produced ``eos`` are padded from then on; stops when all have. With ``use_cache`` the
    prompt runs once and each later step feeds only the newest token.
    """
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

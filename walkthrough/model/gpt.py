"""The decoder-only model (notebook 09): the encoder-decoder's decoder with the encoder and cross-attention removed.

Built from the same parts: ``Embedding``, ``DecoderLayer(cross_attention=False)``, ``Decoder``,
``OutputHead``, the same ``DecodingCache``. What changes: grouped-query attention (fewer K/V heads)
and rotary positions (Q and K rotated inside attention instead of a table added to the input).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import nn

from ..checks import check_positive_int
from ..i18n import _
from ..steps import DIMS_WITHOUT_GQA
from .cache import DecodingCache, check_step
from .config import GPTConfig
from .embedding import Embedding
from .layers import Decoder, DecoderLayer, OutputHead, final_norm
from .masks import decoder_self_mask
from .memory_guard import check_fits_in_memory
from .rope import position_ids


def check_no_left_padding(model: GPT, ids: torch.Tensor) -> None:
    """ids [B, L]: no row left-padded (PAD first, a real token later) in a GPT that adds a table of positions.

    Prevents a silent difference: the table would count the PAD, so a left-padded row's logits would differ
    from the same row alone. A rope GPT counts from each row's first real token and takes left padding."""
    pad_id = model.cfg.pad_id
    if pad_id is None or model.cfg.positions == "rope" or ids.device.type == "meta":
        return
    real = ids != pad_id  # [B, L]
    rows = (~real[:, 0] & real.any(dim=1)).nonzero().flatten().tolist()
    if rows:
        raise ValueError(_("ids rows {rows} are left-padded (PAD, id {pad_id}, before their first token), but this "
                           "GPT adds a table of positions (positions={positions!r}), which would count the PAD: "
                           "pad on the right (wt.pad_batch), run rows of one length together, or use a GPT with "
                           "positions='rope'").format(rows=rows, pad_id=pad_id, positions=model.cfg.positions))


class GPT(nn.Module):
    """Token ids [B, L] -> logits [B, L, V]: position t predicts token t+1, seeing tokens 0..t only.

    A model too large for this process is refused before anything is allocated (as ``Transformer``)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if not isinstance(cfg, GPTConfig):
            raise TypeError(_("cfg must be a walkthrough.GPTConfig, got {type}").format(type=type(cfg).__name__))
        check_fits_in_memory(cfg)
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.d_model, cfg.max_len, cfg.dropout, cfg.positions,
                               cfg.scale_embeddings)
        self.decoder = Decoder([DecoderLayer(cfg, cross_attention=False) for _ in range(cfg.num_layers)],
                               final_norm(cfg))
        self.output_head = OutputHead(cfg.d_model, cfg.vocab_size, cfg.bias)
        if cfg.share_embeddings:  # GPT-2's tied embeddings: one [V, D] matrix reads ids in and scores them out
            self.output_head.proj.weight = self.embed.token.weight

    @property
    def dim_names(self) -> dict[str, str]:
        """How a trace names this model's dims: one sequence of length L; H_kv is H without grouped-query attention."""
        return {"L_tgt": "L", **(DIMS_WITHOUT_GQA if self.cfg.kv_heads == self.cfg.num_heads else {})}

    def new_cache(self, batch: int) -> DecodingCache:
        """An empty cache for generating ``batch`` sequences one token at a time."""
        check_positive_int("batch", batch, " (gpt.new_cache(batch) takes the number of sequences; an "
                                           "encoder-decoder's cache takes the source ids: model.new_cache(src))")
        return DecodingCache(self, batch)

    def forward(self, ids: torch.Tensor, cache: DecodingCache | None = None) -> torch.Tensor:
        """ids [B, L] -> logits [B, L, V]. With a ``cache``, ids are only the new tokens after ``len(cache)``;
        a step that fails leaves the cache as it was.

        PAD keys are masked. With rotary positions each row counts its positions from its first real token
        (``position_ids``), so a left-padded prompt gives the logits it gives alone; with a table of positions
        (learned, sinusoidal) it would not, and a left-padded row is refused (``check_no_left_padding``).
        """
        check_step(self, ids, "ids", self.cfg.vocab_size, cache)  # the one check: the layers skip theirs
        if cache is None or len(cache) == 0:  # a prompt: later steps append after it
            check_no_left_padding(self, ids)
        with nullcontext() if cache is None else cache.step():  # a step that fails leaves the cache as it was
            x = self.embed(ids, 0 if cache is None else len(cache), checked=True)  # [B, L, D]
            seen = ids if cache is None else cache.append(ids)  # [B, t]: every id so far
            mask = decoder_self_mask(seen, self.cfg.pad_id, ids.size(1))  # [B, 1, L, t]
            positions = position_ids(seen, self.cfg.pad_id, ids.size(1)) if self.cfg.positions == "rope" else None
            return self.output_head(self.decoder(x, None, mask, None, cache, positions, checked=True))  # [B, L, V]

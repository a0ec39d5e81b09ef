"""Our models on the meta device, built once per config: shapes for any size at no memory cost."""

from __future__ import annotations

import functools
from types import MappingProxyType

import torch
from torch import nn

from ..checks import check_positive_int
from ..i18n import _
from ..model.config import GPTConfig, ModelConfig
from ..model.gpt import GPT
from ..model.transformer import Transformer

SOURCE_SIZES = MappingProxyType({"batch": 32, "src_len": 10, "tgt_len": 4})  # the source articles' B, L_src, L_tgt


@functools.lru_cache(maxsize=8)
def meta_model(cfg: ModelConfig | GPTConfig) -> nn.Module:
    """``Transformer(cfg)`` or ``GPT(cfg)`` on the meta device in eval mode (dropout changes no shape), kept
    per config so that moving a batch size or a length reuses it."""
    with torch.device("meta"):
        return (GPT(cfg) if isinstance(cfg, GPTConfig) else Transformer(cfg)).eval()


def checked_sizes(cfg: ModelConfig | GPTConfig, batch: int | None = None, src_len: int | None = None,
                  tgt_len: int | None = None, length: int | None = None, decoded_by_step: bool = False
                  ) -> tuple[int, int | None, int | None]:
    """``(batch, src_len, decoded)``, checked, for a run of ``cfg``'s model on the meta device: the encoder–decoder
    reads [batch, src_len] and decodes [batch, tgt_len]; the GPT reads one [batch, length] sequence (its src_len
    is None). Sizes left out are the source articles' (``SOURCE_SIZES``); a GPT reads their source and target as
    one sequence of 10 + 4 = 14 tokens. ``decoded_by_step``: a decoding step says how far the decoder has read,
    so the decoded length stays as given (None, checked by the step)."""
    if not isinstance(cfg, (ModelConfig, GPTConfig)):
        raise TypeError(_("cfg must be a walkthrough.ModelConfig (encoder–decoder) or GPTConfig (decoder-only), "
                          "got {type}").format(type=type(cfg).__name__))
    is_gpt = isinstance(cfg, GPTConfig)
    if is_gpt and (src_len is not None or tgt_len is not None):
        raise ValueError(_("a GPTConfig traces one sequence: give its length as length=... (src_len and tgt_len "
                           "are the encoder–decoder's, for a ModelConfig)"))
    if not is_gpt and length is not None:
        raise ValueError(_("length= is the decoder-only model's one sequence (a GPTConfig); a ModelConfig takes "
                           "src_len and tgt_len"))
    batch = SOURCE_SIZES["batch"] if batch is None else batch
    check_positive_int("batch", batch)
    if not is_gpt:
        src_len = SOURCE_SIZES["src_len"] if src_len is None else src_len
        _check_length("src_len", src_len, cfg.max_len)
    decoded, name = (length, "length") if is_gpt else (tgt_len, "tgt_len")
    if not decoded_by_step:
        whole = SOURCE_SIZES["src_len"] + SOURCE_SIZES["tgt_len"] if is_gpt else SOURCE_SIZES["tgt_len"]
        decoded = whole if decoded is None else decoded
        _check_length(name, decoded, cfg.max_len)
    return batch, src_len, decoded


def _check_length(name: str, value, max_len: int) -> None:
    check_positive_int(name, value)
    if value > max_len:
        raise ValueError(_("{name}={value} is longer than max_len={max_len}; raise max_len or shorten {name}").format(
            name=name, value=value, max_len=max_len))

"""Our models on the meta device, built once per config: shapes for any size at no memory cost."""

from __future__ import annotations

import functools

import torch
from torch import nn

from .config import GPTConfig, ModelConfig
from .gpt import GPT
from .model import Transformer


@functools.lru_cache(maxsize=8)
def meta_model(cfg: ModelConfig | GPTConfig) -> nn.Module:
    """``Transformer(cfg)`` or ``GPT(cfg)`` on the meta device in eval mode (dropout changes no shape), kept
    per config so that moving a batch size or a length reuses it."""
    with torch.device("meta"):
        return (GPT(cfg) if isinstance(cfg, GPTConfig) else Transformer(cfg)).eval()

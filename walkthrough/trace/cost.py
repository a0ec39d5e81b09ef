"""What a layer costs, part by part: parameters, matmul FLOPs (counted), time (measured); and what
grouped-query attention saves (notebook 09)."""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..i18n import N_, _, ljust, rjust
from ..model.attention import MultiHeadAttention
from ..model.config import GPTConfig, ModelConfig
from ..model.gpt import GPT
from ..model.layers import EncoderLayer
from ..model.rope import rope_frequencies


@dataclass(frozen=True)
class Cost:
    part: str
    params: int
    gflops: float           # matmul FLOPs, counted by torch's FlopCounterMode (elementwise work counts 0)
    ms: float | None        # measured on this CPU, or None when not timed


def _parts(layer: EncoderLayer, x: torch.Tensor):
    """Each sublayer as (name, its modules, a function running just that part on ready inputs and returning
    its result), for x [B, L, D]."""
    attn, ffn = layer.self_attn, layer.feed_forward
    q = attn.split_heads(attn.w_q(x))  # [B, H, L, d_k]
    k = attn.split_heads(attn.w_k(x), "k")
    v = attn.split_heads(attn.w_v(x), "v")
    scores = q @ k.transpose(-2, -1)  # [B, H, L, L]
    weights = scores.softmax(-1)  # [B, H, L, L]
    norms = (layer.self_attn_norm, layer.ffn_norm)
    return [
        (N_("Q, K, V, O projections"), (attn.w_q, attn.w_k, attn.w_v, attn.w_o),
         lambda: [lin(x) for lin in (attn.w_q, attn.w_k, attn.w_v, attn.w_o)]),
        (N_("scores Q·Kᵀ (∝ L²)"), (), lambda: q @ k.transpose(-2, -1)),
        (N_("softmax (∝ L²)"), (), lambda: scores.softmax(-1)),
        (N_("weights·V (∝ L²)"), (), lambda: weights @ v),  # [B, H, L, d_k]
        (N_("feed-forward (∝ L)"), (ffn,), lambda: ffn(x)),
        (N_("2 × Add & Norm"), norms, lambda: [n(x, x) for n in norms]),  # LayerNorm or RMSNorm
    ]


def encoder_layer_costs(cfg: ModelConfig, batch: int, src_len: int, timed: bool = False,
                        repeats: int = 5) -> list[Cost]:
    """Costs of each part of one encoder layer on a [batch, src_len, d_model] input, built with ``cfg``'s options
    (SwiGLU's third matrix, RMSNorm's missing shift, no biases all show in the parameters and FLOPs).

    Untimed runs on the meta device (instant, any size); timed runs on the CPU and reports the
    median of ``repeats`` runs.
    """
    device = "cpu" if timed else "meta"
    with torch.device(device), torch.inference_mode():
        layer = EncoderLayer(cfg).eval()
        x = torch.randn(batch, src_len, cfg.d_model)
        out = []
        for name, modules, run in _parts(layer, x):
            params = sum(p.numel() for m in modules for p in m.parameters())
            with FlopCounterMode(display=False) as counter:
                run()
            ms = None
            if timed:
                run()
                samples = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    run()
                    samples.append((time.perf_counter() - start) * 1e3)
                ms = sorted(samples)[len(samples) // 2]
            out.append(Cost(name, params, counter.get_total_flops() / 1e9, ms))
    return out


def format_costs(costs: list[Cost]) -> str:
    """A text table (in the chosen language); the time share column appears when the costs were timed."""
    timed = all(c.ms is not None for c in costs)
    total = sum(c.ms for c in costs) if timed else 0.0
    lines = [ljust(_("part"), 24) + rjust(_("params"), 12) + rjust(_("matmul GFLOPs"), 15)
             + (rjust(_("ms"), 9) + rjust(_("share"), 8) if timed else "")]
    for c in costs:
        line = f"{ljust(_(c.part), 24)}{c.params:>12,}{c.gflops:>15.3f}"
        if timed:
            line += f"{c.ms:>9.2f}{c.ms / total:>8.0%}"
        lines.append(line)
    return "\n".join(lines)


def kv_sharing(heads: int, kv_heads: int) -> torch.Tensor:
    """[H, H_kv]: 1 where query head h reads K/V head j, as the real ``MultiHeadAttention.expand_kv`` decides."""
    attention = MultiHeadAttention(2 * heads, heads, num_kv_heads=kv_heads)  # the smallest one; checks kv_heads
    marker = torch.arange(kv_heads, dtype=torch.float32).view(1, kv_heads, 1, 1)  # [1, H_kv, 1, 1]: head j holds j
    read = attention.expand_kv(marker).view(heads).long()  # [H]: the K/V head each query head reads
    return torch.nn.functional.one_hot(read, kv_heads)  # [H, H_kv]


@dataclass(frozen=True)
class GQACosts:
    """What the number of K/V heads changes, for one GPT config: K's shape, one attention's weights, the cache."""

    k_shape: tuple[int, ...]  # [B, H_kv, L, d_k], traced
    attention_parameters: int  # W_q, W_k, W_v, W_o and their biases, one layer
    kv_bytes_per_token: int  # K and V of every layer, float32, for one cached token


def gqa_costs(cfg: GPTConfig, batch: int = 32, length: int = 14) -> GQACosts:
    """K's shape and the attention's parameter count from the real module on the meta device; the cache per token."""
    with torch.device("meta"):
        attention = MultiHeadAttention(cfg.d_model, cfg.num_heads, num_kv_heads=cfg.num_kv_heads, bias=cfg.bias)
        x = torch.empty(batch, length, cfg.d_model)  # [B, L, D]
        k = attention.split_heads(attention.w_k(x), "k")  # [B, H_kv, L, d_k]
    parameters = sum(p.numel() for p in attention.parameters())
    kv_heads, d_k = k.size(1), k.size(3)
    return GQACosts(tuple(k.shape), parameters, 2 * cfg.num_layers * kv_heads * d_k * 4)


@functools.lru_cache(maxsize=64)  # a move asks for its choice and the source block's: each counted once
def modern_block_costs(cfg: GPTConfig, batch: int, length: int) -> dict[str, int | float | None]:
    """What the block's choices change, from the real GPT built on the meta device: its parameters (a tied matrix
    once), the forward's matmul FLOPs on [batch, length] ids (counted by torch's FlopCounterMode), the KV cache's
    bytes for those batch·length tokens (float32), and RoPE's slowest pair's wavelength in tokens (None without
    RoPE). Every layer is alike: a model of one layer is counted, and the other layers' share added (counting
    all six was nearly all of a move)."""
    with torch.device("meta"):
        model = GPT(dataclasses.replace(cfg, num_layers=1)).eval()
    ids = torch.zeros(batch, length, dtype=torch.long, device="meta")  # [B, L]: only the shape matters
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(ids)
    more = cfg.num_layers - 1
    layer_flops = sum(counter.get_flop_counts()["GPT.decoder.layers.0"].values())
    layer_parameters = sum(p.numel() for p in model.decoder.layers[0].parameters())
    slowest = float(rope_frequencies(cfg.d_k, dtype=torch.float64, base=cfg.rope_base).min())
    return {"parameters": sum(p.numel() for p in model.parameters()) + more * layer_parameters,
            "flops": counter.get_total_flops() + more * layer_flops,
            "kv_cache_bytes": gqa_costs(cfg, batch, length).kv_bytes_per_token * batch * length,
            "rope_wavelength": 2 * math.pi / slowest if cfg.positions == "rope" else None}

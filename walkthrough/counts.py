"""What a config costs before anything is built: its parameter count."""

from __future__ import annotations

from .config import GPTConfig, ModelConfig


def parameter_count(cfg: ModelConfig | GPTConfig) -> int:
    """Every learned number of the model ``cfg`` describes (a shared matrix counted once); tested equal to the
    built model's own count for every option, so it cannot drift from the model."""
    d, f, layers, bias = cfg.d_model, cfg.d_ff, cfg.num_layers, int(cfg.bias)
    linear = lambda n_in, n_out: n_in * n_out + bias * n_out  # noqa: E731 (a weight and, with bias, its shift)
    ffn_inputs = 3 if cfg.activation == "swiglu" else 2  # SwiGLU: W_1 and W_up read x, W_2 writes back
    feed_forward = (ffn_inputs - 1) * linear(d, f) + linear(f, d)
    norm = d + (bias * d if cfg.norm == "layer" else 0)  # a scale; LayerNorm also a shift (RMSNorm never)
    final_norm = norm if cfg.final_norm else 0
    positions = cfg.max_len * d if cfg.positions == "learned" else 0  # one learned table per embedding
    if isinstance(cfg, GPTConfig):
        kv = cfg.kv_heads * cfg.d_k  # K and V project to the K/V heads only
        attention = 2 * linear(d, d) + 2 * linear(d, kv)
        head = (0 if cfg.share_embeddings else d * cfg.vocab_size) + bias * cfg.vocab_size
        return cfg.vocab_size * d + positions + layers * (attention + feed_forward + 2 * norm) + final_norm + head
    attention = 4 * linear(d, d)
    embeddings = cfg.src_vocab_size * d + (0 if cfg.share_embeddings else cfg.tgt_vocab_size * d) + 2 * positions
    head = (0 if cfg.share_embeddings else d * cfg.tgt_vocab_size) + bias * cfg.tgt_vocab_size
    encoder = layers * (attention + feed_forward + 2 * norm) + final_norm
    decoder = layers * (2 * attention + feed_forward + 3 * norm) + final_norm
    return embeddings + encoder + decoder + head

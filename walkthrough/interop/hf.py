"""Hugging Face ``transformers`` models as walkthrough models: the config read, every weight copied (issue 27).

``from_transformers(hf_model)`` builds the equal model: ``GPT2LMHeadModel`` and ``LlamaForCausalLM`` become a
``GPT``, ``MarianMTModel`` (the architecture of opus-mt-zh-en) a ``Transformer``. Everything is checked first
(the class, each config option, each weight's name and dtype), so a model that cannot be expressed stops with
an error naming what, before any weight is copied. ``transformers`` is imported by nobody here: the model
object is all this module reads.
"""

from __future__ import annotations

import torch

from ..i18n import _
from ..model.config import GPTConfig, ModelConfig
from ..model.embedding import sinusoidal_table
from ..model.gpt import GPT
from ..model.transformer import Transformer

GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu",
                    "silu": "silu", "swish": "silu"}
MARIAN_ACTIVATIONS = {**GPT2_ACTIVATIONS}


class _Weights:
    """The transformers state dict, taken key by key, each with the shape the config gives it: a missing key, a
    key left over and a key of another shape are each an error naming the transformers key (not a ``view``
    error or ``load_state_dict``'s message about our names, which a reader cannot find in their model)."""

    def __init__(self, state_dict: dict[str, torch.Tensor], model_class: str):
        self.left = dict(state_dict)
        self.model_class = model_class

    def take(self, key: str, *shape: int) -> torch.Tensor:
        if key not in self.left:
            raise ValueError(_("the {model_class} state dict has no {key!r}: pass the model's own "
                               "state_dict() (or one saved from the same config)").format(
                                   model_class=self.model_class, key=key))
        tensor = self.left.pop(key)
        if tensor.shape != shape:
            raise ValueError(_("the {model_class} state dict's {key!r} has shape {got}, but the config gives it "
                               "{wanted}: pass the model's own state_dict() (or one saved from the same "
                               "config)").format(model_class=self.model_class, key=key, got=list(tensor.shape),
                                                 wanted=list(shape)))
        return tensor

    def drop(self, key: str) -> None:
        """A key that holds nothing to copy: a tied matrix already taken, or a fixed position table."""
        self.left.pop(key, None)

    def check_all_taken(self) -> None:
        if self.left:
            raise ValueError(_("the {model_class} state dict has keys walkthrough has no place for: {keys}; "
                               "they belong to another architecture or config").format(
                                   model_class=self.model_class, keys=sorted(self.left)))


def _unsupported(model_class: str, option: str, value, why: str) -> ValueError:
    return ValueError(_("{model_class} with {option}={value!r} cannot be expressed: {why}").format(
        model_class=model_class, option=option, value=value, why=why))


def _check_float_dtype(state_dict: dict[str, torch.Tensor]) -> torch.dtype:
    dtypes = {t.dtype for t in state_dict.values() if t.is_floating_point()}
    if len(dtypes) != 1 or not dtypes <= {torch.float32, torch.float64}:
        raise TypeError(_("walkthrough loads float32 or float64 weights (one dtype), got {dtypes}: convert the "
                          "model first with hf_model.float()").format(dtypes=sorted(map(str, dtypes))))
    return dtypes.pop()


def _rotary_pairs(d_k: int) -> torch.Tensor:
    """[d_k]: the transformers feature each of ours is. Llama rotates feature i with i + d_k/2, we rotate 2i
    with 2i+1, so our feature 2i is its i and our 2i+1 its i + d_k/2 (head size 8: 0 4 1 5 2 6 3 7)."""
    half = torch.arange(d_k // 2)
    return torch.stack((half, half + d_k // 2), dim=1).flatten()


def _rotary_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """W_q or W_k [heads·d_k, ...] (or its bias) with each head's rows in our pairing."""
    d_k = weight.size(0) // heads
    return weight.view(heads, d_k, *weight.shape[1:])[:, _rotary_pairs(d_k)].reshape(weight.shape)


def _gpt2(config, weights: _Weights) -> tuple[GPTConfig, dict[str, torch.Tensor]]:
    name = "GPT2LMHeadModel"
    if config.activation_function not in GPT2_ACTIVATIONS:
        raise _unsupported(name, "activation_function", config.activation_function,
                           _("the feed-forward knows {known}").format(known=sorted(GPT2_ACTIVATIONS)))
    for option, wanted in (("add_cross_attention", False), ("scale_attn_weights", True),
                           ("scale_attn_by_inverse_layer_idx", False)):
        if getattr(config, option, wanted) != wanted:
            raise _unsupported(name, option, getattr(config, option),
                               _("attention here is softmax(Q·Kᵀ/√d_k)·V in self-attention only"))
    d, tied = config.n_embd, config.tie_word_embeddings
    cfg = GPTConfig(vocab_size=config.vocab_size, d_model=d, num_heads=config.n_head, d_ff=config.n_inner or 4 * d,
                    num_layers=config.n_layer, max_len=config.n_positions, dropout=config.resid_pdrop, pad_id=None,
                    positions="learned", norm_first=True, share_embeddings=tied, scale_embeddings=False,
                    norm_eps=config.layer_norm_epsilon, activation=GPT2_ACTIVATIONS[config.activation_function])
    ours = {"embed.token.weight": weights.take("transformer.wte.weight", cfg.vocab_size, d),
            "embed.position.pe": weights.take("transformer.wpe.weight", cfg.max_len, d)}
    for i in range(cfg.num_layers):
        hf, we = f"transformer.h.{i}.", f"decoder.layers.{i}."
        q, k, v = weights.take(hf + "attn.c_attn.weight", d, 3 * d).t().chunk(3)  # Conv1D: [in, out]; ours [out, in]
        bq, bk, bv = weights.take(hf + "attn.c_attn.bias", 3 * d).chunk(3)
        ours.update({we + "self_attn.w_q.weight": q, we + "self_attn.w_k.weight": k, we + "self_attn.w_v.weight": v,
                     we + "self_attn.w_q.bias": bq, we + "self_attn.w_k.bias": bk, we + "self_attn.w_v.bias": bv})
        for hf_part, our_part, size_in, size_out in (("attn.c_proj", "self_attn.w_o", d, d),
                                                     ("mlp.c_fc", "feed_forward.linear1", d, cfg.d_ff),
                                                     ("mlp.c_proj", "feed_forward.linear2", cfg.d_ff, d)):
            ours[we + our_part + ".weight"] = weights.take(hf + hf_part + ".weight", size_in, size_out).t()
            ours[we + our_part + ".bias"] = weights.take(hf + hf_part + ".bias", size_out)
        for hf_part, our_part in (("ln_1", "add_norm1.norm"), ("ln_2", "add_norm3.norm")):
            for what in ("weight", "bias"):
                ours[f"{we}{our_part}.{what}"] = weights.take(f"{hf}{hf_part}.{what}", d)
    ours["decoder.norm.weight"], ours["decoder.norm.bias"] = (weights.take(f"transformer.ln_f.{what}", d)
                                                              for what in ("weight", "bias"))
    if tied:
        weights.drop("lm_head.weight")
        ours["output_head.proj.weight"] = ours["embed.token.weight"]
    else:
        ours["output_head.proj.weight"] = weights.take("lm_head.weight", cfg.vocab_size, d)
    ours["output_head.proj.bias"] = torch.zeros(cfg.vocab_size)  # GPT-2's head has none
    for i in range(cfg.num_layers):
        weights.drop(f"transformer.h.{i}.attn.bias")  # older checkpoints store the causal mask
        weights.drop(f"transformer.h.{i}.attn.masked_bias")
    return cfg, ours


def _llama(config, weights: _Weights) -> tuple[GPTConfig, dict[str, torch.Tensor]]:
    name = "LlamaForCausalLM"
    d, heads, kv_heads = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    rope = dict(getattr(config, "rope_parameters", None) or {"rope_type": "default",
                                                               "rope_theta": config.rope_theta})
    checks = ((config.hidden_act, "silu", "hidden_act", _("the feed-forward here is SwiGLU with SiLU")),
              (rope.get("rope_type", "default"), "default", "rope_parameters['rope_type']",
               _("rope scaling is not implemented: rotary angles are position · rope_base^(-2i/d_k)")),
              (getattr(config, "head_dim", d // heads), d // heads, "head_dim",
               _("each head here has d_model / num_heads features")),
              (getattr(config, "sliding_window", None), None, "sliding_window",
               _("attention here sees every earlier position (no sliding window)")))
    for value, wanted, option, why in checks:
        if value != wanted:
            raise _unsupported(name, option, value, why)
    # ours: every linear has a bias or none does; where the config gives Llama none, ours is 0
    bias = config.attention_bias or config.mlp_bias
    cfg = GPTConfig(vocab_size=config.vocab_size, d_model=d, num_heads=heads, num_kv_heads=kv_heads,
                    d_ff=config.intermediate_size, num_layers=config.num_hidden_layers,
                    max_len=config.max_position_embeddings, dropout=config.attention_dropout, pad_id=None,
                    positions="rope", rope_base=float(rope["rope_theta"]), norm_first=True,
                    share_embeddings=config.tie_word_embeddings, scale_embeddings=False, norm="rms",
                    norm_eps=config.rms_norm_eps, activation="swiglu", bias=bias)
    kv = kv_heads * cfg.d_k
    ours = {"embed.token.weight": weights.take("model.embed_tokens.weight", cfg.vocab_size, d)}
    for i in range(cfg.num_layers):
        hf, we = f"model.layers.{i}.", f"decoder.layers.{i}."
        attention, mlp = config.attention_bias, config.mlp_bias  # which of Llama's linears have a bias
        parts = (("self_attn.q_proj", "self_attn.w_q", d, d, heads, attention),
                 ("self_attn.k_proj", "self_attn.w_k", d, kv, kv_heads, attention),
                 ("self_attn.v_proj", "self_attn.w_v", d, kv, None, attention),
                 ("self_attn.o_proj", "self_attn.w_o", d, d, None, attention),
                 ("mlp.gate_proj", "feed_forward.linear1", d, cfg.d_ff, None, mlp),
                 ("mlp.up_proj", "feed_forward.up", d, cfg.d_ff, None, mlp),
                 ("mlp.down_proj", "feed_forward.linear2", cfg.d_ff, d, None, mlp))
        for hf_part, our_part, size_in, size, rotated_heads, has_bias in parts:
            tensors = {"weight": weights.take(f"{hf}{hf_part}.weight", size, size_in)}
            if bias:  # the config's bias is required (a missing one is an error); one it gives none is 0
                tensors["bias"] = weights.take(f"{hf}{hf_part}.bias", size) if has_bias else torch.zeros(size)
            for what, tensor in tensors.items():
                rotated = tensor if rotated_heads is None else _rotary_rows(tensor, rotated_heads)
                ours[f"{we}{our_part}.{what}"] = rotated
        ours[we + "add_norm1.norm.weight"] = weights.take(hf + "input_layernorm.weight", d)
        ours[we + "add_norm3.norm.weight"] = weights.take(hf + "post_attention_layernorm.weight", d)
    ours["decoder.norm.weight"] = weights.take("model.norm.weight", d)
    if cfg.share_embeddings:
        weights.drop("lm_head.weight")
        ours["output_head.proj.weight"] = ours["embed.token.weight"]
    else:
        ours["output_head.proj.weight"] = weights.take("lm_head.weight", cfg.vocab_size, d)
    if bias:
        ours["output_head.proj.bias"] = torch.zeros(cfg.vocab_size)
    return cfg, ours


def _marian(config, weights: _Weights) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    name = "MarianMTModel"
    for encoder_side, decoder_side in (("encoder_layers", "decoder_layers"), ("encoder_ffn_dim", "decoder_ffn_dim"),
                                       ("encoder_attention_heads", "decoder_attention_heads")):
        if getattr(config, encoder_side) != getattr(config, decoder_side):
            raise _unsupported(name, decoder_side, getattr(config, decoder_side),
                               _("the encoder and decoder here have one size, {option}={value}").format(
                                   option=encoder_side, value=getattr(config, encoder_side)))
    if config.activation_function not in MARIAN_ACTIVATIONS:
        raise _unsupported(name, "activation_function", config.activation_function,
                           _("the feed-forward knows {known}").format(known=sorted(MARIAN_ACTIVATIONS)))
    shared, tied = config.share_encoder_decoder_embeddings, config.tie_word_embeddings
    if shared != tied:
        raise _unsupported(name, "tie_word_embeddings", tied, _("one matrix serves all three uses, or none is "
                                                                "shared (share_encoder_decoder_embeddings={shared})")
                           .format(shared=shared))
    cfg = ModelConfig(src_vocab_size=config.vocab_size, tgt_vocab_size=config.decoder_vocab_size or config.vocab_size,
                      d_model=config.d_model, num_heads=config.encoder_attention_heads, d_ff=config.encoder_ffn_dim,
                      num_layers=config.encoder_layers, max_len=config.max_position_embeddings,
                      dropout=config.dropout, pad_id=config.pad_token_id, share_embeddings=shared,
                      positions="sinusoidal_halves", scale_embeddings=config.scale_embedding, final_norm=False,
                      activation=MARIAN_ACTIVATIONS[config.activation_function])
    d, v_src, v_tgt = cfg.d_model, cfg.src_vocab_size, cfg.tgt_vocab_size
    if shared:
        table = weights.take("model.shared.weight", v_src, d)
        for key in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
            weights.drop(key)
        ours = {key: table for key in ("src_embed.token.weight", "tgt_embed.token.weight", "output_head.proj.weight")}
    else:
        weights.drop("model.shared.weight")
        ours = {"src_embed.token.weight": weights.take("model.encoder.embed_tokens.weight", v_src, d),
                "tgt_embed.token.weight": weights.take("model.decoder.embed_tokens.weight", v_tgt, d),
                "output_head.proj.weight": weights.take("lm_head.weight", v_tgt, d)}
    ours["output_head.proj.bias"] = weights.take("final_logits_bias", 1, v_tgt).flatten()
    attention = (("q_proj", "w_q"), ("k_proj", "w_k"), ("v_proj", "w_v"), ("out_proj", "w_o"))
    sides = (("encoder", ("self_attn", "self_attn"), ("self_attn_layer_norm", "add_norm1"),
              ("final_layer_norm", "add_norm2")),
             ("decoder", ("self_attn", "self_attn"), ("encoder_attn", "cross_attn"),
              ("self_attn_layer_norm", "add_norm1"), ("encoder_attn_layer_norm", "add_norm2"),
              ("final_layer_norm", "add_norm3")))
    table = sinusoidal_table(cfg.max_len, cfg.d_model, halves=True)  # [max_len, D]: what ours adds
    for side, *parts in sides:
        positions = weights.take(f"model.{side}.embed_positions.weight", *table.shape)  # fixed: ours is built
        if not torch.allclose(positions.to(table.dtype), table, atol=1e-5):
            raise ValueError(_("{key} is not the sinusoidal table Marian builds (sines, then cosines): "
                               "walkthrough builds that one and cannot load another").format(
                                   key=f"model.{side}.embed_positions.weight"))
        for i in range(cfg.num_layers):
            hf, we = f"model.{side}.layers.{i}.", f"{side}.layers.{i}."
            pairs = [("fc1", "feed_forward.linear1", (cfg.d_ff, d)), ("fc2", "feed_forward.linear2", (d, cfg.d_ff))]
            for hf_part, our_part in parts:
                if hf_part.endswith("attn"):
                    pairs += [(f"{hf_part}.{a}", f"{our_part}.{b}", (d, d)) for a, b in attention]
                else:
                    pairs.append((hf_part, our_part + ".norm", (d,)))
            for hf_part, our_part, shape in pairs:  # weight [out, in] (a norm's [D]), bias [out]
                ours[f"{we}{our_part}.weight"] = weights.take(f"{hf}{hf_part}.weight", *shape)
                ours[f"{we}{our_part}.bias"] = weights.take(f"{hf}{hf_part}.bias", shape[0])
    return cfg, ours


READERS = {"GPT2LMHeadModel": (_gpt2, GPT), "LlamaForCausalLM": (_llama, GPT), "MarianMTModel": (_marian, Transformer)}


def from_transformers(hf_model, state_dict: dict[str, torch.Tensor] | None = None) -> GPT | Transformer:
    """The walkthrough model equal to a ``transformers`` model, in eval mode: ``GPT2LMHeadModel`` and
    ``LlamaForCausalLM`` -> ``wt.GPT``, ``MarianMTModel`` -> ``wt.Transformer``. ``state_dict``: the weights
    to load (default: ``hf_model.state_dict()``), float32 or float64.

    Read from the config: sizes, grouped-query heads, ``rope_theta``, the norm and its eps, the activation,
    biases, tied embeddings. Llama's q/k rows are permuted per head (it rotates feature i with i + d_k/2,
    we 2i with 2i+1); GPT-2's Conv1D weights are transposed; Marian's ``final_logits_bias`` becomes the head's
    bias and its decoder starts with its pad id (pass ``sos_id=hf_model.config.decoder_start_token_id`` to
    decoding). Loaded GPTs have ``pad_id=None``: like transformers without an attention mask, they mask nothing.
    """
    model_class = type(hf_model).__name__
    if model_class not in READERS:
        raise TypeError(_("from_transformers reads {known}, got {model_class}").format(
            known=", ".join(READERS), model_class=model_class))
    weights = _Weights(hf_model.state_dict() if state_dict is None else state_dict, model_class)
    dtype = _check_float_dtype(weights.left)
    read, build = READERS[model_class]
    cfg, ours = read(hf_model.config, weights)
    weights.check_all_taken()
    model = build(cfg).to(dtype).eval()
    model.load_state_dict({key: tensor.to(dtype) for key, tensor in ours.items()})
    return model

"""Hugging Face ``transformers`` models as walkthrough models: the config read, every weight copied (issue 27).

``from_transformers(hf_model)`` builds the equal model: ``GPT2LMHeadModel`` and ``LlamaForCausalLM`` become a
``GPT``, ``MarianMTModel`` (the architecture of opus-mt-zh-en) a ``Transformer``. Everything is checked first
(the class, each config option, each weight's name and dtype), so a model that cannot be expressed stops with
an error naming what, before any weight is copied. ``transformers`` is imported by nobody here: the model
object is all this module reads.
"""

from __future__ import annotations

import torch
from torch import nn

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


# Each family's names, {transformers' name: ours}, "{i}" standing for every layer. A tuple of ours is one tensor of
# theirs cut into equal parts along its rows (GPT-2's c_attn holds W_q, W_k and W_v); None, a key with nothing to copy.
GPT2_NAMES = {
    "transformer.wte.weight": "embed.token.weight",
    "transformer.wpe.weight": "embed.position.pe",
    "transformer.h.{i}.ln_1.weight": "decoder.layers.{i}.self_attn_norm.norm.weight",
    "transformer.h.{i}.ln_1.bias": "decoder.layers.{i}.self_attn_norm.norm.bias",
    "transformer.h.{i}.attn.c_attn.weight": ("decoder.layers.{i}.self_attn.w_q.weight",
                                             "decoder.layers.{i}.self_attn.w_k.weight",
                                             "decoder.layers.{i}.self_attn.w_v.weight"),
    "transformer.h.{i}.attn.c_attn.bias": ("decoder.layers.{i}.self_attn.w_q.bias",
                                           "decoder.layers.{i}.self_attn.w_k.bias",
                                           "decoder.layers.{i}.self_attn.w_v.bias"),
    "transformer.h.{i}.attn.c_proj.weight": "decoder.layers.{i}.self_attn.w_o.weight",
    "transformer.h.{i}.attn.c_proj.bias": "decoder.layers.{i}.self_attn.w_o.bias",
    "transformer.h.{i}.ln_2.weight": "decoder.layers.{i}.ffn_norm.norm.weight",
    "transformer.h.{i}.ln_2.bias": "decoder.layers.{i}.ffn_norm.norm.bias",
    "transformer.h.{i}.mlp.c_fc.weight": "decoder.layers.{i}.feed_forward.linear1.weight",
    "transformer.h.{i}.mlp.c_fc.bias": "decoder.layers.{i}.feed_forward.linear1.bias",
    "transformer.h.{i}.mlp.c_proj.weight": "decoder.layers.{i}.feed_forward.linear2.weight",
    "transformer.h.{i}.mlp.c_proj.bias": "decoder.layers.{i}.feed_forward.linear2.bias",
    "transformer.h.{i}.attn.bias": None,  # older checkpoints store the causal mask
    "transformer.h.{i}.attn.masked_bias": None,
    "transformer.ln_f.weight": "decoder.norm.weight",
    "transformer.ln_f.bias": "decoder.norm.bias",
    "lm_head.weight": "output_head.proj.weight",
}
LLAMA_NAMES = {
    "model.embed_tokens.weight": "embed.token.weight",
    "model.layers.{i}.input_layernorm.weight": "decoder.layers.{i}.self_attn_norm.norm.weight",
    "model.layers.{i}.self_attn.q_proj.weight": "decoder.layers.{i}.self_attn.w_q.weight",
    "model.layers.{i}.self_attn.k_proj.weight": "decoder.layers.{i}.self_attn.w_k.weight",
    "model.layers.{i}.self_attn.v_proj.weight": "decoder.layers.{i}.self_attn.w_v.weight",
    "model.layers.{i}.self_attn.o_proj.weight": "decoder.layers.{i}.self_attn.w_o.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "decoder.layers.{i}.ffn_norm.norm.weight",
    "model.layers.{i}.mlp.gate_proj.weight": "decoder.layers.{i}.feed_forward.linear1.weight",
    "model.layers.{i}.mlp.up_proj.weight": "decoder.layers.{i}.feed_forward.up.weight",
    "model.layers.{i}.mlp.down_proj.weight": "decoder.layers.{i}.feed_forward.linear2.weight",
    "model.norm.weight": "decoder.norm.weight",
    "lm_head.weight": "output_head.proj.weight",
}
LLAMA_ATTENTION_BIASES = {  # when the config's attention_bias is set
    "model.layers.{i}.self_attn.q_proj.bias": "decoder.layers.{i}.self_attn.w_q.bias",
    "model.layers.{i}.self_attn.k_proj.bias": "decoder.layers.{i}.self_attn.w_k.bias",
    "model.layers.{i}.self_attn.v_proj.bias": "decoder.layers.{i}.self_attn.w_v.bias",
    "model.layers.{i}.self_attn.o_proj.bias": "decoder.layers.{i}.self_attn.w_o.bias",
}
LLAMA_MLP_BIASES = {  # when the config's mlp_bias is set
    "model.layers.{i}.mlp.gate_proj.bias": "decoder.layers.{i}.feed_forward.linear1.bias",
    "model.layers.{i}.mlp.up_proj.bias": "decoder.layers.{i}.feed_forward.up.bias",
    "model.layers.{i}.mlp.down_proj.bias": "decoder.layers.{i}.feed_forward.linear2.bias",
}
MARIAN_NAMES = {
    "model.shared.weight": None,  # the same matrix as the embeddings below (or unused, when they differ)
    "model.encoder.embed_tokens.weight": "src_embed.token.weight",
    "model.decoder.embed_tokens.weight": "tgt_embed.token.weight",
    "lm_head.weight": "output_head.proj.weight",
    "final_logits_bias": "output_head.proj.bias",
    "model.encoder.embed_positions.weight": None,  # fixed sinusoidal tables: ours are built (checked equal)
    "model.decoder.embed_positions.weight": None,
    **{f"model.{side}.layers.{{i}}.{theirs}.{what}": f"{side}.layers.{{i}}.{ours}.{what}"
       for side, parts in (
           ("encoder", (("self_attn.q_proj", "self_attn.w_q"), ("self_attn.k_proj", "self_attn.w_k"),
                        ("self_attn.v_proj", "self_attn.w_v"), ("self_attn.out_proj", "self_attn.w_o"),
                        ("self_attn_layer_norm", "self_attn_norm.norm"), ("fc1", "feed_forward.linear1"),
                        ("fc2", "feed_forward.linear2"), ("final_layer_norm", "ffn_norm.norm"))),
           ("decoder", (("self_attn.q_proj", "self_attn.w_q"), ("self_attn.k_proj", "self_attn.w_k"),
                        ("self_attn.v_proj", "self_attn.w_v"), ("self_attn.out_proj", "self_attn.w_o"),
                        ("self_attn_layer_norm", "self_attn_norm.norm"),
                        ("encoder_attn.q_proj", "cross_attn.w_q"), ("encoder_attn.k_proj", "cross_attn.w_k"),
                        ("encoder_attn.v_proj", "cross_attn.w_v"), ("encoder_attn.out_proj", "cross_attn.w_o"),
                        ("encoder_attn_layer_norm", "cross_attn_norm.norm"), ("fc1", "feed_forward.linear1"),
                        ("fc2", "feed_forward.linear2"), ("final_layer_norm", "ffn_norm.norm"))))
       for theirs, ours in parts for what in ("weight", "bias")},
}
CONV1D = ("attn.c_attn.", "attn.c_proj.", "mlp.c_fc.", "mlp.c_proj.")  # GPT-2's linears store W as [in, out]
ONE_ROW = {"final_logits_bias"}  # Marian's head bias is stored [1, V]


def _copy(names: dict, layers: int, weights: _Weights, model: nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor ``names`` lists, taken with the shape ``model`` (built on the meta device) gives its own
    tensor (a GPT-2 Conv1D weight transposed, a tuple's parts stacked), and handed back under our names."""
    shapes = {key: tensor.shape for key, tensor in model.state_dict().items()}
    ours = {}
    for pattern, targets in names.items():
        for i in range(layers) if "{i}" in pattern else (None,):
            theirs = pattern.format(i=i)
            if targets is None:
                weights.drop(theirs)
                continue
            parts = [target.format(i=i) for target in ((targets,) if isinstance(targets, str) else targets)]
            rows = [shapes[part][0] for part in parts]
            shape = (sum(rows), *shapes[parts[0]][1:])
            transposed = len(shape) == 2 and any(f".{layer}" in theirs for layer in CONV1D)
            if theirs in ONE_ROW:
                tensor = weights.take(theirs, 1, *shape).flatten()
            else:
                tensor = weights.take(theirs, *(shape[::-1] if transposed else shape))
            ours.update(zip(parts, (tensor.t() if transposed else tensor).split(rows)))
    return ours


def _gpt2(config) -> GPTConfig:
    name = "GPT2LMHeadModel"
    if config.activation_function not in GPT2_ACTIVATIONS:
        raise _unsupported(name, "activation_function", config.activation_function,
                           _("the feed-forward knows {known}").format(known=sorted(GPT2_ACTIVATIONS)))
    for option, wanted in (("add_cross_attention", False), ("scale_attn_weights", True),
                           ("scale_attn_by_inverse_layer_idx", False)):
        if getattr(config, option, wanted) != wanted:
            raise _unsupported(name, option, getattr(config, option),
                               _("attention here is softmax(Q·Kᵀ/√d_k)·V in self-attention only"))
    d = config.n_embd
    return GPTConfig(vocab_size=config.vocab_size, d_model=d, num_heads=config.n_head, d_ff=config.n_inner or 4 * d,
                     num_layers=config.n_layer, max_len=config.n_positions, dropout=config.resid_pdrop, pad_id=None,
                     positions="learned", norm_first=True, share_embeddings=config.tie_word_embeddings,
                     scale_embeddings=False, norm_eps=config.layer_norm_epsilon,
                     activation=GPT2_ACTIVATIONS[config.activation_function])


def _llama(config) -> GPTConfig:
    name = "LlamaForCausalLM"
    d, heads = config.hidden_size, config.num_attention_heads
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
    return GPTConfig(vocab_size=config.vocab_size, d_model=d, num_heads=heads, num_kv_heads=config.num_key_value_heads,
                     d_ff=config.intermediate_size, num_layers=config.num_hidden_layers,
                     max_len=config.max_position_embeddings, dropout=config.attention_dropout, pad_id=None,
                     positions="rope", rope_base=float(rope["rope_theta"]), norm_first=True,
                     share_embeddings=config.tie_word_embeddings, scale_embeddings=False, norm="rms",
                     norm_eps=config.rms_norm_eps, activation="swiglu",
                     bias=config.attention_bias or config.mlp_bias)  # ours: every linear has a bias, or none


def _marian(config) -> ModelConfig:
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
    return ModelConfig(src_vocab_size=config.vocab_size, tgt_vocab_size=config.decoder_vocab_size or config.vocab_size,
                       d_model=config.d_model, num_heads=config.encoder_attention_heads, d_ff=config.encoder_ffn_dim,
                       num_layers=config.encoder_layers, max_len=config.max_position_embeddings,
                       dropout=config.dropout, pad_id=config.pad_token_id, share_embeddings=shared,
                       positions="sinusoidal_halves", scale_embeddings=config.scale_embedding, final_norm=False,
                       activation=MARIAN_ACTIVATIONS[config.activation_function])


def _names(model_class: str, config, cfg: ModelConfig | GPTConfig) -> dict:
    """The family's table as this config has it: a tied matrix taken once, Llama's biases where the config
    gives them, Marian's one shared matrix or three."""
    if model_class == "LlamaForCausalLM":
        names = {**LLAMA_NAMES, **(LLAMA_ATTENTION_BIASES if config.attention_bias else {}),
                 **(LLAMA_MLP_BIASES if config.mlp_bias else {})}
    elif model_class == "MarianMTModel" and cfg.share_embeddings:
        names = {**MARIAN_NAMES, "model.shared.weight": "src_embed.token.weight",
                 "model.encoder.embed_tokens.weight": None, "model.decoder.embed_tokens.weight": None}
    else:
        names = {"GPT2LMHeadModel": GPT2_NAMES, "MarianMTModel": MARIAN_NAMES}[model_class]
    return {**names, "lm_head.weight": None} if cfg.share_embeddings else names


def _check_marian_positions(weights: _Weights, cfg: ModelConfig) -> None:
    table = sinusoidal_table(cfg.max_len, cfg.d_model, halves=True)  # [max_len, D]: what ours adds
    for side in ("encoder", "decoder"):
        key = f"model.{side}.embed_positions.weight"
        if not torch.allclose(weights.take(key, *table.shape).to(table.dtype), table, atol=1e-5):
            raise ValueError(_("{key} is not the sinusoidal table Marian builds (sines, then cosines): "
                               "walkthrough builds that one and cannot load another").format(key=key))


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
    A bias ours has and theirs does not (GPT-2's head, Llama's where its config gives none) is 0.
    """
    model_class = type(hf_model).__name__
    if model_class not in READERS:
        raise TypeError(_("from_transformers reads {known}, got {model_class}").format(
            known=", ".join(READERS), model_class=model_class))
    weights = _Weights(hf_model.state_dict() if state_dict is None else state_dict, model_class)
    dtype = _check_float_dtype(weights.left)
    read, build = READERS[model_class]
    cfg = read(hf_model.config)
    if model_class == "MarianMTModel":
        _check_marian_positions(weights, cfg)
    with torch.device("meta"):
        shapes_of = build(cfg)
    ours = _copy(_names(model_class, hf_model.config, cfg), cfg.num_layers, weights, shapes_of)
    weights.check_all_taken()
    if model_class == "LlamaForCausalLM":
        for key, tensor in ours.items():
            if ".self_attn.w_q." in key or ".self_attn.w_k." in key:
                ours[key] = _rotary_rows(tensor, cfg.num_heads if ".w_q." in key else cfg.kv_heads)
    for key, tensor in shapes_of.state_dict().items():
        if key not in ours and key.endswith(".bias"):
            ours[key] = torch.zeros(tensor.shape)
    if cfg.share_embeddings:  # one matrix, taken once: the other uses are the same tensor
        token = ours.get("embed.token.weight", ours.get("src_embed.token.weight"))
        for key in ("tgt_embed.token.weight", "output_head.proj.weight"):
            if key in shapes_of.state_dict():
                ours[key] = token
    model = build(cfg).to(dtype).eval()
    model.load_state_dict({key: tensor.to(dtype) for key, tensor in ours.items()})
    return model

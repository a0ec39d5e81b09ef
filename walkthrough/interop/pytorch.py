"""Weights from PyTorch's own layers: ``nn.MultiheadAttention`` and ``nn.Transformer`` copied into ours.

Used to show that our model computes what PyTorch's does (notebooks 02, 03, 04 and 10, the reference tests).
"""

from __future__ import annotations

import torch
from torch import nn

from ..i18n import _
from ..model.attention import MultiHeadAttention
from ..model.transformer import Transformer


@torch.no_grad()
def copy_torch_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy an ``nn.MultiheadAttention``'s weights into ours.

    PyTorch keeps W_q, W_k, W_v stacked in one ``in_proj_weight`` [3D, D]; we split it in three.
    """
    if theirs.in_proj_weight is None or theirs.embed_dim != ours.w_q.in_features or theirs.num_heads != ours.num_heads:
        raise ValueError(_("theirs must be an nn.MultiheadAttention with the same embed_dim and num_heads "
                         "(and kdim = vdim = embed_dim)"))
    w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)
    b_q, b_k, b_v = theirs.in_proj_bias.chunk(3)
    for linear, weight, bias in ((ours.w_q, w_q, b_q), (ours.w_k, w_k, b_k), (ours.w_v, w_v, b_v),
                                 (ours.w_o, theirs.out_proj.weight, theirs.out_proj.bias)):
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)
    return ours


def copy_torch_transformer(model: Transformer, reference: nn.Transformer) -> Transformer:
    """Copy an ``nn.Transformer(batch_first=True, norm_first=False)``'s weights into ``model``'s stacks.

    Embeddings and the output head are ours alone and are left as they are.
    """
    enc_layers, dec_layers = reference.encoder.layers, reference.decoder.layers
    first = enc_layers[0]
    if not first.self_attn.batch_first or first.norm_first:
        raise ValueError(_("reference must be built with batch_first=True and norm_first=False (post-norm)"))
    for layer in [*enc_layers, *dec_layers]:
        if getattr(layer, "activation_relu_or_gelu", 1) != 1:
            raise ValueError(_("reference must use activation='relu' (ours is ReLU, as in the paper); "
                             "rebuild it with activation='relu'"))
        if layer.norm1.eps != 1e-5 or layer.linear1.bias is None or layer.norm1.bias is None:
            raise ValueError(_("reference must use layer_norm_eps=1e-5 and bias=True (ours have both); "
                             "rebuild it with the defaults"))
    theirs = (reference.d_model, reference.nhead, first.linear1.out_features, len(enc_layers), len(dec_layers))
    cfg = model.cfg
    ours = (cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.num_layers, cfg.num_layers)
    if theirs != ours:
        raise ValueError(_("sizes differ (d_model, nhead, dim_feedforward, encoder layers, decoder layers): "
                         "reference {theirs}, model {ours}; build both from the same sizes").format(
                             theirs=theirs, ours=ours))

    def copy_module(dst, src):
        dst.load_state_dict(src.state_dict())

    with torch.no_grad():
        for ours_layer, ref in zip(model.encoder.layers, enc_layers):
            copy_torch_attention(ours_layer.self_attn, ref.self_attn)
            copy_module(ours_layer.feed_forward.linear1, ref.linear1)
            copy_module(ours_layer.feed_forward.linear2, ref.linear2)
            copy_module(ours_layer.self_attn_norm.norm, ref.norm1)
            copy_module(ours_layer.ffn_norm.norm, ref.norm2)
        for ours_layer, ref in zip(model.decoder.layers, dec_layers):
            copy_torch_attention(ours_layer.self_attn, ref.self_attn)
            copy_torch_attention(ours_layer.cross_attn, ref.multihead_attn)
            copy_module(ours_layer.feed_forward.linear1, ref.linear1)
            copy_module(ours_layer.feed_forward.linear2, ref.linear2)
            copy_module(ours_layer.self_attn_norm.norm, ref.norm1)
            copy_module(ours_layer.cross_attn_norm.norm, ref.norm2)
            copy_module(ours_layer.ffn_norm.norm, ref.norm3)
        copy_module(model.encoder.norm, reference.encoder.norm)
        copy_module(model.decoder.norm, reference.decoder.norm)
    return model

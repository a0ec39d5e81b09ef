"""Transformer, by hand: a small, real encoder-decoder Transformer that shows its shapes."""

from . import cost, viz, widgets
from .attention import MultiHeadAttention, scaled_dot_product_attention
from .config import ModelConfig
from .data import PHRASES, Vocab, chinese_numeral, english_words, numeral_vocabs, pad_batch, phrase_vocabs
from .embedding import Embedding, PositionalEncoding, sinusoidal_table
from .layers import AddNorm, DecoderLayer, EncoderLayer, FeedForward
from .masks import causal_mask, decoder_self_mask, padding_mask, to_blocked
from .model import Transformer, copy_torch_attention, greedy_decode, greedy_steps, load_torch_transformer
from .trace import Row, check_shape, format_table, shape_map, show, summarise, trace_shapes
from .train import (
                    Trainer,
                    TrainSettings,
                    held_out_pairs,
                    load_checkpoint,
                    save_checkpoint,
                    sequence_loss,
                    teacher_forcing,
                    translate,
                    warmup_lr,
)

__all__ = [
                    "PHRASES",
                    "AddNorm",
                    "DecoderLayer",
                    "Embedding",
                    "EncoderLayer",
                    "FeedForward",
                    "ModelConfig",
                    "MultiHeadAttention",
                    "PositionalEncoding",
                    "Row",
                    "TrainSettings",
                    "Trainer",
                    "Transformer",
                    "Vocab",
                    "causal_mask",
                    "check_shape",
                    "chinese_numeral",
                    "copy_torch_attention",
                    "cost",
                    "decoder_self_mask",
                    "english_words",
                    "format_table",
                    "greedy_decode",
                    "greedy_steps",
                    "held_out_pairs",
                    "load_checkpoint",
                    "load_torch_transformer",
                    "numeral_vocabs",
                    "pad_batch",
                    "padding_mask",
                    "phrase_vocabs",
                    "save_checkpoint",
                    "scaled_dot_product_attention",
                    "sequence_loss",
                    "shape_map",
                    "show",
                    "sinusoidal_table",
                    "summarise",
                    "teacher_forcing",
                    "to_blocked",
                    "trace_shapes",
                    "translate",
                    "viz",
                    "warmup_lr",
                    "widgets",
]

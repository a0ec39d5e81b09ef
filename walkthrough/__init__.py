"""Transformer, by hand: a small, real encoder-decoder Transformer that shows its shapes.

The rule of the public API: what a notebook calls is flat, ``wt.name``; a tool's own vocabulary beyond its entry
point stays in its module, ``wt.module.name``. So ``wt.training_memory`` (what one training step keeps) is flat,
and the pieces it is checked against (``wt.memory.measure_saved``) are not; a notebook reaches each name one way
(tests/test_api.py). The namespaces: ``wt.backward``, ``wt.bpe``, ``wt.config``, ``wt.cost``,
``wt.distributed``, ``wt.gradients``, ``wt.memory``, ``wt.rope``, ``wt.sentences``, ``wt.translator``, and ``wt.viz``
(matplotlib) and ``wt.widgets`` (ipywidgets), which load on first use, so ``import walkthrough`` stays light in a
script or a test that draws nothing. Names that check the student start with ``check_``; nothing else public does.

The flat names, by what they are for (tests/test_api.py keeps this list and ``__all__`` the same):

- **Models**: ``ModelConfig``, ``Transformer``, ``GPTConfig``, ``GPT``, ``Embedding``, ``sinusoidal_table``,
  ``apply_rope``, ``MultiHeadAttention``, ``scaled_dot_product_attention``, ``keep_attention_weights``,
  ``FeedForward``, ``AddNorm``, ``EncoderLayer``, ``DecoderLayer``, ``Encoder``, ``Decoder``, ``OutputHead``,
  ``KVCache``, ``DecodingCache``, ``position_ids``, ``causal_mask``, ``padding_mask``, ``decoder_self_mask``,
  ``to_blocked``,
  ``sequence_loss``, ``flash_attention``, ``flash_attention_backward``, ``flash_tiles``, ``online_softmax_step``
- **Real models in**: ``from_transformers``, ``copy_torch_attention``, ``copy_torch_transformer``
- **Decoding** (one set of verbs for both models): ``greedy_decode``, ``greedy_steps``, ``sample_decode``,
  ``beam_search``, ``Beams``, ``sample_next``, ``next_token_probs``, ``filter_logits``
- **Shapes**: ``STEPS``, ``SOURCE_SIZES``, ``Row``, ``OpRow``, ``trace_shapes``, ``trace_module``,
  ``TraceError``, ``shape_table``, ``ShapeTable``, ``shape_map``, ``summarise``, ``by_step``, ``print_shape``,
  ``assert_shape``, ``training_memory``
- **Data**: ``Vocab``, ``PHRASES``, ``phrase_vocabs``, ``numeral_vocabs``, ``chinese_numeral``,
  ``chinese_tokens``, ``english_words``, ``pad_batch``, ``left_pad``, ``EVERYDAY_PHRASES``, ``cedict_pairs``,
  ``cedict_rule_counts``, ``sentence_pairs``, ``sentence_ids``, ``sentence_rule_counts``, ``hsk_pairs``,
  ``BPETokenizer``, ``SEPARATOR``
- **Training**: ``make_batch``, ``teacher_forcing``, ``warmup_lr``, ``lr_curve``, ``smoothing_floor``,
  ``TrainSettings``, ``Trainer``, ``held_out_pairs``, ``translate``, ``cross_attention_map``, ``GPTSettings``,
  ``GPTTrainer``, ``make_lm_batch``, ``TranslatorSettings``
- **Checkpoints** (one save and one load for every task): ``save_checkpoint``, ``load_checkpoint``,
  ``shipped_file``
- **Checking the student**: ``ask_shape``, ``check_shape_answer``, ``check_exercise``, ``check_model``,
  ``block_gaps``, ``side_by_side``
- **Language**: ``set_language``, ``get_language``
"""

import importlib

from .classroom.exercises import check_exercise
from .classroom.model_check import block_gaps, check_model, side_by_side
from .classroom.quiz import ask_shape, check_shape_answer
from .i18n import get_language, set_language
from .interop.hf import from_transformers
from .interop.pytorch import copy_torch_attention, copy_torch_transformer
from .model import backward, config, rope
from .model.attention import MultiHeadAttention, keep_attention_weights, scaled_dot_product_attention
from .model.cache import DecodingCache, KVCache
from .model.config import GPTConfig, ModelConfig
from .model.decoding import (
    Beams,
    beam_search,
    filter_logits,
    greedy_decode,
    greedy_steps,
    next_token_probs,
    sample_decode,
    sample_next,
)
from .model.embedding import Embedding, sinusoidal_table
from .model.flash import flash_attention, flash_attention_backward, flash_tiles, online_softmax_step
from .model.gpt import GPT
from .model.layers import AddNorm, Decoder, DecoderLayer, EncoderLayer, FeedForward, OutputHead
from .model.loss import sequence_loss
from .model.masks import causal_mask, decoder_self_mask, padding_mask, to_blocked
from .model.rope import apply_rope, position_ids
from .model.transformer import Encoder, Transformer
from .recording import Row
from .steps import STEPS
from .tasks import distributed, translator
from .tasks.checkpoints import load_checkpoint, save_checkpoint, shipped_file
from .tasks.data import (
    PHRASES,
    Vocab,
    chinese_numeral,
    chinese_tokens,
    english_words,
    left_pad,
    numeral_vocabs,
    pad_batch,
    phrase_vocabs,
)
from .tasks.language_model import (
    SEPARATOR,
    GPTSettings,
    GPTTrainer,
    make_lm_batch,
)
from .tasks.numerals import (
    Trainer,
    TrainSettings,
    cross_attention_map,
    held_out_pairs,
    lr_curve,
    translate,
)
from .tasks.training import make_batch, smoothing_floor, teacher_forcing, warmup_lr
from .tasks.translator import TranslatorSettings
from .text import bpe, sentences
from .text.bpe import BPETokenizer
from .text.corpus import EVERYDAY_PHRASES, cedict_pairs, cedict_rule_counts
from .text.sentences import hsk_pairs, sentence_ids, sentence_pairs, sentence_rule_counts
from .trace import cost, gradients, memory
from .trace.memory import training_memory
from .trace.meta import SOURCE_SIZES
from .trace.tables import ShapeTable, assert_shape, by_step, print_shape, shape_map, shape_table, summarise
from .trace.tracer import OpRow, TraceError, trace_module, trace_shapes

__all__ = [
    "EVERYDAY_PHRASES",
    "GPT",
    "PHRASES",
    "SEPARATOR",
    "SOURCE_SIZES",
    "STEPS",
    "AddNorm",
    "BPETokenizer",
    "Beams",
    "Decoder",
    "DecoderLayer",
    "DecodingCache",
    "Embedding",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPTConfig",
    "GPTSettings",
    "GPTTrainer",
    "KVCache",
    "ModelConfig",
    "MultiHeadAttention",
    "OpRow",
    "OutputHead",
    "Row",
    "ShapeTable",
    "TraceError",
    "TrainSettings",
    "Trainer",
    "Transformer",
    "TranslatorSettings",
    "Vocab",
    "apply_rope",
    "ask_shape",
    "assert_shape",
    "backward",
    "beam_search",
    "block_gaps",
    "bpe",
    "by_step",
    "causal_mask",
    "cedict_pairs",
    "cedict_rule_counts",
    "check_exercise",
    "check_model",
    "check_shape_answer",
    "chinese_numeral",
    "chinese_tokens",
    "config",
    "copy_torch_attention",
    "copy_torch_transformer",
    "cost",
    "cross_attention_map",
    "decoder_self_mask",
    "distributed",
    "english_words",
    "filter_logits",
    "flash_attention",
    "flash_attention_backward",
    "flash_tiles",
    "from_transformers",
    "get_language",
    "gradients",
    "greedy_decode",
    "greedy_steps",
    "held_out_pairs",
    "hsk_pairs",
    "keep_attention_weights",
    "left_pad",
    "load_checkpoint",
    "lr_curve",
    "make_batch",
    "make_lm_batch",
    "memory",
    "next_token_probs",
    "numeral_vocabs",
    "online_softmax_step",
    "pad_batch",
    "padding_mask",
    "phrase_vocabs",
    "position_ids",
    "print_shape",
    "rope",
    "sample_decode",
    "sample_next",
    "save_checkpoint",
    "scaled_dot_product_attention",
    "sentence_ids",
    "sentence_pairs",
    "sentence_rule_counts",
    "sentences",
    "sequence_loss",
    "set_language",
    "shape_map",
    "shape_table",
    "shipped_file",
    "side_by_side",
    "sinusoidal_table",
    "smoothing_floor",
    "summarise",
    "teacher_forcing",
    "to_blocked",
    "trace_module",
    "trace_shapes",
    "training_memory",
    "translate",
    "translator",
    "warmup_lr",
]


_ON_FIRST_USE = {"viz": ".classroom.viz", "widgets": ".classroom.widgets"}  # matplotlib, ipywidgets: when first used


def __getattr__(name: str):
    if name in _ON_FIRST_USE:
        return importlib.import_module(_ON_FIRST_USE[name], __name__)
    raise AttributeError(f"module 'walkthrough' has no attribute {name!r}")

"""Transformer, by hand: a small, real encoder-decoder Transformer that shows its shapes.

The rule of the public API: what a notebook calls is flat, ``wt.name``; a tool's own vocabulary beyond its entry
point stays in its module, ``wt.module.name``. So ``wt.training_memory`` (what one training step keeps) is flat,
and the pieces it is checked against (``wt.memory.measure_saved``) are not; a notebook reaches each name one way
(tests/test_api.py). The namespaces: ``wt.backward``, ``wt.bpe``, ``wt.class_sentences``, ``wt.config``,
``wt.cost``, ``wt.distributed``, ``wt.gradients``, ``wt.memory``, ``wt.rope``, ``wt.sentences``, ``wt.translator``,
and ``wt.viz`` (matplotlib) and ``wt.widgets`` (ipywidgets), which load on first use, so ``import walkthrough`` stays
light in a script or a test that draws nothing. Names that check the student start with ``check_``; nothing else
public does.

The flat names, by what they are for (tests/test_api.py keeps this list and the imports the same):

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
  ``TraceError``, ``shape_table``, ``ShapeTable``, ``Table``, ``shape_map``, ``summarise``, ``by_step``,
  ``print_shape``, ``assert_shape``, ``training_memory``
- **Data**: ``Vocab``, ``PHRASES``, ``phrase_vocabs``, ``numeral_vocabs``, ``chinese_numeral``,
  ``chinese_tokens``, ``english_words``, ``pad_batch``, ``left_pad``, ``EVERYDAY_PHRASES``, ``cedict_pairs``,
  ``sentence_pairs``, ``sentence_ids``, ``sentence_rule_counts``, ``hsk_pairs``, ``BPETokenizer``, ``SEPARATOR``
- **Training**: ``make_batch``, ``teacher_forcing``, ``warmup_lr``, ``lr_curve``, ``smoothing_floor``,
  ``TrainSettings``, ``Trainer``, ``held_out_pairs``, ``translate``, ``cross_attention_map``, ``GPTSettings``,
  ``GPTTrainer``, ``make_lm_batch``, ``TranslatorSettings``
- **Checkpoints** (one save and one load for every task): ``save_checkpoint``, ``load_checkpoint``,
  ``shipped_file``
- **Checking the student**: ``ask_shape``, ``check_shape_answer``, ``check_exercise``, ``check_model``,
  ``block_gaps``, ``side_by_side``
- **Language**: ``set_language``, ``get_language``
"""

# The imports below are the public names (the docstring lists them; tests/test_api.py holds the two the same).
# ruff: noqa: F401

import importlib
import re
import sys

from .classroom.exercises import check_exercise
from .classroom.model_check import block_gaps, check_model, side_by_side
from .classroom.quiz import ask_shape, check_shape_answer
from .i18n import _, get_language, set_language
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
from .tasks import class_sentences, distributed, translator
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
    cross_attention_map,
    held_out_pairs,
    lr_curve,
    translate,
)
from .tasks.training import TrainSettings, make_batch, smoothing_floor, teacher_forcing, warmup_lr
from .tasks.translator import TranslatorSettings
from .text import bpe, sentences
from .text.bpe import BPETokenizer
from .text.corpus import EVERYDAY_PHRASES, cedict_pairs
from .text.sentences import hsk_pairs, sentence_ids, sentence_pairs, sentence_rule_counts
from .trace import cost, gradients, memory
from .trace.memory import training_memory
from .trace.meta import SOURCE_SIZES
from .trace.tables import ShapeTable, Table, assert_shape, by_step, print_shape, shape_map, shape_table, summarise
from .trace.tracer import OpRow, TraceError, trace_module, trace_shapes

# What `from walkthrough import *` and the API reference (pdoc, `make api`) take: the names the docstring lists,
# read from it (tests/test_api.py holds the docstring to the imports above), never a third listing.
__all__ = [name for name in dict.fromkeys(re.findall(r"``(?:wt\.)?(\w+)``", __doc__ or "")) if name in globals()]
_ON_FIRST_USE = {"viz": ".classroom.viz", "widgets": ".classroom.widgets"}  # matplotlib, ipywidgets: when first used
# Each module's path before the package was put in folders -> its path now (a notebook saved last term imports them)
_MOVED = {old: f"{folder}.{old}" for folder, olds in (
    ("classroom", "exercises model_check quiz student viz widgets"), ("interop", "hf pytorch"),
    ("model", "attention backward cache config decoding embedding flash gpt layers loss masks memory_guard rope"),
    ("tasks", "checkpoints data distributed language_model training translator"), ("text", "bpe corpus sentences"),
    ("trace", "cost gradients hooks memory meta op_tap tables")) for old in olds.split()} | {
    "model": "model.transformer", "trace": "trace.tracer", "numeral_task": "tasks.numerals"}


def _moved(old: str) -> str:
    return _("walkthrough.{old} is now walkthrough.{new} (the package was put in folders): use that path "
             "(docs/architecture.md lists every module)").format(old=old, new=_MOVED[old])


class _MovedModules:
    """Asked last for a module of the package no file holds: an old path (``walkthrough.widgets``, or a name of the
    old ``walkthrough.model`` as in ``from walkthrough.model import Transformer``) gets a message naming the new."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None):
        package, old, *name = fullname.split(".") + [""]
        if package == __name__ and old in _MOVED and (
                not name[0] or hasattr(sys.modules.get(f"{__name__}.{_MOVED[old]}"), name[0])):
            raise ModuleNotFoundError(_moved(old))  # without name=: `from walkthrough import data` shows it too
        return None


sys.meta_path.append(_MovedModules)


def __getattr__(name: str):
    if name in _ON_FIRST_USE:
        return importlib.import_module(_ON_FIRST_USE[name], __name__)
    if name in _MOVED:
        raise AttributeError(_moved(name))
    raise AttributeError(f"module 'walkthrough' has no attribute {name!r}")

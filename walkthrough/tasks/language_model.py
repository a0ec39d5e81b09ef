"""The notebook-07 numeral task as a language model (notebook 09): one sequence, one vocabulary, one stack.

The encoder-decoder reads 三百零五 with its encoder and writes "three hundred five" with its decoder.
A decoder-only model (仅解码器) gets one sequence instead, ``三 百 零 五 <sep> three hundred five <eos>``,
and learns to continue it: the prompt is the Chinese numeral and a separator, the answer is the English
words and an end token. The loss counts the answer tokens only: predicting the prompt (a random number)
is not the task. Training runs on ``TrainingLoop`` (training.py); this module supplies the data, the loss,
the score and the checkpoint format.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..i18n import N_, _
from ..model.config import GPTConfig
from ..model.decoding import greedy_decode
from ..model.gpt import GPT
from ..model.loss import sequence_loss
from ..model.memory_guard import check_fits_in_memory
from .checkpoints import GPT_CHECKPOINT_FORMAT, REBUILT_BY, restore, settings_from
from .data import Vocab, chinese_tokens, english_tokens, numeral_pairs, numeral_vocabs, pad_batch
from .numerals import exact_match, held_out_pairs, validate_texts
from .training import TrainingLoop, TrainSettings, torch_threads, validate_threads

SEPARATOR = "<sep>"
MAX_LEN = 32  # the longest example, 15 Chinese characters + <sep> + 12 English words + <eos>, is 29 tokens


def numeral_lm_vocab() -> Vocab:
    """One joint vocabulary: the specials, the 15 numeral characters, the 31 English words and ``<sep>``."""
    chinese, english = numeral_vocabs()
    return Vocab(chinese.itos[4:] + english.itos[4:] + [SEPARATOR])


def prompt_ids(zh: str, vocab: Vocab) -> list[int]:
    """三百 -> ids of ``三 百 <sep>``: what the model is given."""
    return vocab.encode(chinese_tokens(zh) + [SEPARATOR])


@dataclass
class LMBatch:
    ids: torch.Tensor     # [B, L]: prompt and answer, without the final <eos>
    labels: torch.Tensor  # [B, L]: the next token where it is an answer token, <pad> (ignored) elsewhere


def make_lm_batch(pairs: list[tuple[str, str]], vocab: Vocab) -> LMBatch:
    """(Chinese, English) pairs -> input ids and answer-only labels, both [B, L], padded on the right.

    Position t predicts token t+1. The label of t is that token only when it belongs to the answer
    (the English words or <eos>), so the position of ``<sep>`` predicts the first English word, and
    the prompt's positions are ignored by the loss like padding.
    """
    inputs, labels = [], []
    for zh, en in pairs:
        prompt = prompt_ids(zh, vocab)
        answer = vocab.encode(english_tokens(en)) + [Vocab.eos_id]
        sequence = prompt + answer
        inputs.append(sequence[:-1])
        labels.append([Vocab.pad_id] * (len(prompt) - 1) + answer)  # aligned with sequence[1:]
    return LMBatch(pad_batch(inputs), pad_batch(labels))


def answer_loss(model: GPT, batch: LMBatch, smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy of the next-token prediction on the answer tokens (prompt and padding ignored)."""
    logits = model(batch.ids)  # [B, L, V]
    return sequence_loss(logits, batch.labels, Vocab.pad_id, smoothing)


@dataclass(frozen=True)
class GPTSettings(TrainSettings):
    """The language-model task's defaults: ``TrainSettings`` plus grouped-query attention (4 heads, 2 K/V
    heads), rotary positions and pre-norm; no label smoothing, 800 steps. Reaches 95% held-out exact match
    in well under a minute on 2 CPU cores."""

    steps: int = 800
    smoothing: float = 0.0
    num_kv_heads: int = 2
    positions: str = "rope"
    norm_first: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        self.config(len(numeral_lm_vocab()))  # K/V heads, positions, rope pairs: GPTConfig checks them, before training

    def config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size=vocab_size, d_model=self.d_model, num_heads=self.num_heads,
                         num_kv_heads=self.num_kv_heads, d_ff=self.d_ff, num_layers=self.num_layers,
                         max_len=MAX_LEN, dropout=0.0, pad_id=Vocab.pad_id, positions=self.positions,
                         norm_first=self.norm_first)


class GPTTrainer(TrainingLoop):
    """The numeral task as a language model on ``TrainingLoop``. Deterministic for a seed and a thread count.

    Every step trains on a fresh batch of random numbers (never a held-out one); the score is exact
    match of the greedy continuation on 500 held-out numbers. Training and scoring run on ``threads``
    CPU threads (one by default: as fast for a model this small, and far faster on a shared server).
    """

    checkpoint_format = GPT_CHECKPOINT_FORMAT

    def __init__(self, settings: GPTSettings = GPTSettings(), threads: int = 1):
        if not isinstance(settings, GPTSettings):
            raise TypeError(_("settings must be a walkthrough.GPTSettings, got {type}").format(
                type=type(settings).__name__))
        validate_threads(threads)  # before the model is built
        self.settings = settings
        self.vocab = numeral_lm_vocab()
        torch.manual_seed(settings.seed)
        cfg = settings.config(len(self.vocab))
        check_fits_in_memory(cfg)  # refused before anything is allocated
        model = GPT(cfg)
        super().__init__(model, self.batch, self.loss, steps=settings.steps, warmup=settings.warmup,
                         peak_lr=settings.peak_lr, score=self.score, score_name=N_("held-out exact match"),
                         threads=threads)

    def batch(self, step: int) -> LMBatch:
        """The training batch of a step: fixed by (seed, step), so a resumed run sees the same data."""
        pairs = numeral_pairs(self.settings.batch_size, seed=self.settings.seed * 1_000_003 + step, held_out=False)
        return make_lm_batch(pairs, self.vocab)

    def checkpoint_data(self) -> dict:
        """What rebuilds this trainer besides its settings (``save_checkpoint``): its vocabulary."""
        return {"itos": self.vocab.itos}

    @classmethod
    def from_checkpoint(cls, state: dict, path: Path) -> GPTTrainer:
        """The trainer ``state`` (a checked checkpoint, ``load_checkpoint``) describes, its weights and history in."""
        trainer = cls(settings_from(state, GPTSettings, path))
        if state["itos"] != trainer.vocab.itos:
            raise ValueError(_("{path} was trained with another vocabulary than this task's; retrain it").format(
                path=path))
        restore(trainer, state, path)
        return trainer

    def loss(self, model: GPT, batch: LMBatch) -> torch.Tensor:
        return answer_loss(model, batch, self.settings.smoothing)

    def score(self) -> float:
        return self.accuracy(held_out_pairs(500))

    def complete(self, texts: list[str]) -> list[str]:
        """Chinese numerals -> the model's English continuations (greedy, with the KV cache)."""
        with torch_threads(self.threads):
            return complete(self.model, texts, self.vocab)

    def accuracy(self, pairs: list[tuple[str, str]]) -> float:
        """Share of pairs whose continuation equals the English words exactly (``exact_match``)."""
        return exact_match(self.complete, pairs)


REBUILT_BY[GPT_CHECKPOINT_FORMAT] = GPTTrainer


def complete(model: GPT, texts: list[str], vocab: Vocab) -> list[str]:
    """Greedy continuation of ``<numeral> <sep>`` for each text; ``len(texts)`` English strings out.

    Prompts of equal length go to ``greedy_decode`` together, unpadded.
    """
    validate_texts(texts)
    if len(vocab) != model.cfg.vocab_size:
        raise ValueError(_("the vocabulary ({len_vocab} tokens) does not match the model ({vocab_size}); "
                         "use the one it was trained with").format(
                             len_vocab=len(vocab), vocab_size=model.cfg.vocab_size))
    prompts = [prompt_ids(text, vocab) for text in texts]
    answers: list[str] = [""] * len(texts)
    for length in sorted({len(p) for p in prompts}):
        rows = [i for i, p in enumerate(prompts) if len(p) == length]
        if length >= model.cfg.max_len:
            raise ValueError(_("texts[{rows_0}] is {length_1} characters long; the model reads at most "
                             "{model_cfg_max_len_1} including the separator: give a shorter numeral").format(
                                 rows_0=rows[0], length_1=length - 1, model_cfg_max_len_1=model.cfg.max_len - 1))
        prompt = torch.tensor([prompts[i] for i in rows])  # [B_len, L_p]
        out = greedy_decode(model, prompt, max_new_tokens=model.cfg.max_len - length + 1,
                            eos_id=Vocab.eos_id)  # [B_len, L_p + T]
        for i, row in zip(rows, out[:, length:]):
            answers[i] = " ".join(vocab.decode(row))
    return answers

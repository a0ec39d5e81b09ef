"""The numeral task of notebooks 06 and 07 on ``TrainingLoop``: settings, the Trainer, translation, exact match,
and saving a Trainer to a checkpoint and back.

Chinese numerals -> English words (or, given ``pairs``, a few memorised phrases). The loop itself is in
training.py, the checkpoint file format in checkpoints.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ..checks import check_dropout, check_positive_int
from ..i18n import N_, _
from ..model.attention import keep_attention_weights
from ..model.config import ModelConfig
from ..model.decoding import greedy_decode
from ..model.loss import sequence_loss
from ..model.memory_guard import check_fits_in_memory
from ..model.transformer import Transformer
from .checkpoints import CHECKPOINT_FORMAT, REBUILT_BY, restore, settings_from
from .data import Vocab, chinese_tokens, english_tokens, numeral_pairs, numeral_vocabs, pad_batch
from .training import (
    Batch,
    TrainingLoop,
    TrainSettings,
    make_batch,
    torch_threads,
    warmup_lr,
)

MAX_HELD_OUT = 10_000  # scoring decodes every held-out number; 500 is the notebooks'


def task_config(settings: TrainSettings, src_vocab: Vocab, tgt_vocab: Vocab, dropout: float = 0.0) -> ModelConfig:
    return ModelConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), d_model=settings.d_model,
                       num_heads=settings.num_heads, d_ff=settings.d_ff, num_layers=settings.num_layers,
                       max_len=32, dropout=dropout, pad_id=Vocab.pad_id)


class Trainer(TrainingLoop):
    """The translation task on ``TrainingLoop``: Chinese numerals -> English words. Deterministic for a seed.

    By default it trains the numeral task on fresh random numbers every step and scores on 500 held-out
    numbers; given ``pairs``, every batch is those pairs (a model that memorises a few phrases, as
    notebook 06 needs) and the score is exact match on them.

    ``dropout`` (default 0: this task learns without it) belongs to the run, not to the settings, so
    checkpoints made before it existed still load (with none); a checkpoint saved since keeps it, so a resumed
    run drops out as the run it continues did.
    """

    checkpoint_format = CHECKPOINT_FORMAT

    def __init__(self, settings: TrainSettings = TrainSettings(), pairs: list[tuple[str, str]] | None = None,  # noqa: B008 (frozen)
                 dropout: float = 0.0):
        if type(settings) is not TrainSettings:  # a subclass (GPTSettings) describes another model
            hint = (_("; each task's settings go to its own trainer (GPTSettings to GPTTrainer, TranslatorSettings to "
                      "TranslatorTrainer)") if isinstance(settings, TrainSettings) else "")
            raise TypeError(_("settings must be a walkthrough.TrainSettings, got {type}{hint}").format(
                type=type(settings).__name__, hint=hint))
        check_dropout(dropout)
        self.settings = settings
        self.pairs = pairs
        if pairs is None:
            self.src_vocab, self.tgt_vocab = numeral_vocabs()
            score_name = N_("held-out exact match")
        else:
            if not pairs or not all(isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(s, str) for s in p)
                                    for p in pairs):
                raise ValueError(_("pairs must be a non-empty list of (Chinese, English) string pairs, "
                                 "e.g. [('早上好', 'good morning')]"))
            self.src_vocab = Vocab(t for zh, _ in pairs for t in chinese_tokens(zh))
            self.tgt_vocab = Vocab(t for _, en in pairs for t in english_tokens(en))
            score_name = N_("exact match on its phrases")
        torch.manual_seed(settings.seed)
        cfg = task_config(settings, self.src_vocab, self.tgt_vocab, dropout)
        check_fits_in_memory(cfg)  # refused before anything is allocated
        model = Transformer(cfg)
        super().__init__(model, self.batch, self.loss, steps=settings.steps, warmup=settings.warmup,
                         peak_lr=settings.peak_lr, score=self.score, score_name=score_name)

    def batch(self, step: int) -> Batch:
        """The training batch of a given step: fixed by (seed, step), so a resumed run sees the same data."""
        if self.pairs is not None:
            return make_batch(self.pairs, self.src_vocab, self.tgt_vocab)
        pairs = numeral_pairs(self.settings.batch_size, seed=self.settings.seed * 1_000_003 + step, held_out=False)
        return make_batch(pairs, self.src_vocab, self.tgt_vocab)

    def loss(self, model: Transformer, batch: Batch) -> torch.Tensor:
        """Label-smoothed cross-entropy of the teacher-forced prediction, PAD ignored."""
        logits = model(batch.src, batch.tgt_in)  # [B, L_tgt, V]
        return sequence_loss(logits, batch.labels, Vocab.pad_id, self.settings.smoothing)

    def score(self) -> float:
        return self.accuracy(held_out_pairs(500) if self.pairs is None else self.pairs)

    def checkpoint_data(self) -> dict:
        """What rebuilds this trainer besides its settings (``save_checkpoint``): its pairs, vocabularies, dropout."""
        return {"pairs": self.pairs, "src_itos": self.src_vocab.itos, "tgt_itos": self.tgt_vocab.itos,
                "dropout": self.model.cfg.dropout}

    @classmethod
    def from_checkpoint(cls, state: dict, path: Path) -> Trainer:
        """The trainer ``state`` (a checked checkpoint, ``load_checkpoint``) describes, its weights and history in."""
        pairs = state["pairs"] and [tuple(pair) for pair in state["pairs"]]
        trainer = cls(settings_from(state, TrainSettings, path), pairs, dropout=state.get("dropout", 0.0))
        if state["src_itos"] != trainer.src_vocab.itos or state["tgt_itos"] != trainer.tgt_vocab.itos:
            raise ValueError(_("{path} was trained with other vocabularies than its task's; "
                             "its translations would be meaningless: retrain it").format(path=path))
        restore(trainer, state, path)
        return trainer

    def translate(self, texts: list[str]) -> list[str]:
        """Greedy translations, on the trainer's threads (one: small steps, no waiting on a busy machine)."""
        with torch_threads(self.threads):
            return translate(self.model, texts, self.src_vocab, self.tgt_vocab)

    def accuracy(self, pairs: list[tuple[str, str]]) -> float:
        """Share of pairs translated exactly (``exact_match``)."""
        return exact_match(self.translate, pairs)


REBUILT_BY[CHECKPOINT_FORMAT] = Trainer


def validate_texts(texts, example: str = "三百", kind: str = N_("string")) -> None:
    """Texts to translate or complete: a list of non-blank strings. ``example`` and ``kind`` (a ``N_`` noun, such as
    "phrase") are what the messages suggest, so each task's messages show its own kind of input."""
    if isinstance(texts, str):
        raise TypeError(_("texts must be a list of strings, got the single string {texts!r}: "
                        "wrap it in a list, [{texts!r}]").format(texts=texts))
    if not isinstance(texts, (list, tuple)):
        raise TypeError(_("texts must be a list of strings such as [{example!r}], got {type}").format(
            example=example, type=type(texts).__name__))
    if not texts:
        raise ValueError(_("texts is empty: give at least one, e.g. [{example!r}]").format(example=example))
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(_("texts[{i}] must be a string such as {example!r}, got {text!r} ({type})").format(
                i=i, example=example, text=text, type=type(text).__name__))
        if not text.strip():
            raise ValueError(_("texts[{i}] is blank ({text!r}): there is nothing to translate; "
                             "give a Chinese {kind} such as {example!r}").format(
                                 i=i, text=text, kind=_(kind), example=example))
        broken = next((c for c in text if "\ud800" <= c <= "\udfff"), None)  # UTF-8 cannot encode these
        if broken is not None:
            raise ValueError(_("texts[{i}] is not valid text: it holds {char!r}, half of a character (what a broken "
                             "paste, or bytes read with the wrong encoding, leave behind); paste or type the phrase "
                             "again").format(i=i, char=broken))


def translate(model: Transformer, texts: list[str], src_vocab: Vocab, tgt_vocab: Vocab,
              max_new_tokens: int = 20) -> list[str]:
    """Greedy translation of Chinese strings with a trained model: ``len(texts)`` strings in and out."""
    validate_texts(texts)
    if (len(src_vocab), len(tgt_vocab)) != (model.cfg.src_vocab_size, model.cfg.tgt_vocab_size):
        raise ValueError(_("the vocabularies ({len_src_vocab}, {len_tgt_vocab} tokens) do not match the model "
                         "({src_vocab_size}, {tgt_vocab_size}); use the ones it was trained with").format(
                             len_src_vocab=len(src_vocab), len_tgt_vocab=len(tgt_vocab),
                             src_vocab_size=model.cfg.src_vocab_size, tgt_vocab_size=model.cfg.tgt_vocab_size))
    src = pad_batch([src_vocab.encode(chinese_tokens(t)) for t in texts])  # [B, L_src]
    out = greedy_decode(model, src, max_new_tokens, Vocab.sos_id, Vocab.eos_id)  # [B, <= 1 + max_new_tokens]
    return [" ".join(tgt_vocab.decode(row)) for row in out]


def exact_match(answer: Callable[[list[str]], list[str]], pairs: list[tuple[str, str]]) -> float:
    """Share of (Chinese, English) pairs whose ``answer`` (a trainer's translate or complete) equals the English
    word for word: every numeral task's accuracy."""
    if not pairs:
        raise ValueError(_("pairs is empty: give at least one (Chinese, English) pair to score"))
    guesses = answer([zh for zh, _ in pairs])
    return sum(g == en for g, (_, en) in zip(guesses, pairs)) / len(pairs)


@torch.no_grad()
def cross_attention_map(trainer: Trainer, zh: str, en: str, layer: int = -1):
    """Teacher-forced cross-attention of one pair, averaged over heads.

    Returns (weights [L_tgt, L_src], the word each row predicts, the source tokens).
    """
    batch = make_batch([(zh, en)], trainer.src_vocab, trainer.tgt_vocab)
    was_training = trainer.model.training
    trainer.model.eval()
    with keep_attention_weights(trainer.model):
        trainer.model(batch.src, batch.tgt_in)
    trainer.model.train(was_training)
    weights = trainer.model.decoder.layers[layer].cross_attn.attn_weights[0].mean(0)  # [L_tgt, L_src]
    predicted = [trainer.tgt_vocab.itos[i] for i in batch.labels[0]]
    return weights, predicted, chinese_tokens(zh)


def held_out_pairs(count: int = 500) -> list[tuple[str, str]]:
    """Numbers training never samples (``is_held_out``), fixed by seed; at most ``MAX_HELD_OUT``."""
    check_positive_int("count", count)
    if count > MAX_HELD_OUT:  # found by drawing numbers until enough are held out, then all decoded at once
        raise ValueError(_("count must be at most {MAX_HELD_OUT:,} held-out examples, got {count:,}: "
                         "500 already scores to within a few percent").format(MAX_HELD_OUT=MAX_HELD_OUT, count=count))
    return numeral_pairs(count, seed=12345, held_out=True)


def lr_curve(settings: TrainSettings) -> list[float]:
    """The schedule over the settings' steps, for plotting before training."""
    return [warmup_lr(s, settings.warmup, settings.steps, settings.peak_lr) for s in range(settings.steps)]

"""The real translator (notebook 17): CC-CEDICT phrases -> English, on the package's own Transformer.

One byte-level BPE vocabulary (Hugging Face ``tokenizers``) serves both languages, so one ``[V, D]`` matrix is
the source embedding, the target embedding and the output head (``share_embeddings``). The training loop is
``TrainingLoop``; the task adds only its batches (a fixed shuffle of the train split per epoch, the
everyday phrases repeated) and its loss (label-smoothed cross-entropy, PAD ignored).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .attention import keep_attention_weights
from .checkpoints import (
    TRANSLATOR_CHECKPOINT_FORMAT,
    read_checkpoint,
    settings_from,
    shipped_file,
    validate_checkpoint_path,
    write_checkpoint,
)
from .checks import check_dropout, check_positive_int
from .config import ModelConfig
from .corpus import EVERYDAY_PHRASES, LICENCE_NOTE, cedict_pairs
from .data import EOS, PAD, SOS, UNK, Vocab, pad_batch
from .decoding import beam_search, greedy_decode
from .i18n import N_, _
from .loss import sequence_loss, validate_smoothing
from .memory_guard import check_fits_in_memory
from .model import Transformer
from .numeral_task import validate_texts
from .training import (
    Batch,
    TrainingLoop,
    default_warmup,
    teacher_forcing,
    torch_threads,
    validate_learning_rate,
    validate_warmup,
)

SPECIAL_TOKENS = [PAD, SOS, EOS, UNK]  # ids 0..3, as every Vocab of the package: pad_id is 0 everywhere
MAX_TOKENS = 48  # a phrase's tokens fed to the model (the longest in the dictionary pairs: 21)
MAX_NEW_TOKENS = 24  # the longest English the model writes, in tokens


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer (Hugging Face ``tokenizers``) trained on ``texts``: any string round-trips.

    The settings that make ``decode(encode(s)) == s`` for every string: no prefix space, no regex split (a
    phrase is merged as a whole), every one of the 256 byte symbols in the base alphabet (so a character never
    seen is its UTF-8 bytes), and the ByteLevel decoder.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


@dataclass(frozen=True)
class TranslatorSettings:
    """The shipped translator's sizes and schedule (1 thread of 2 shared CPU cores trained it in 28 minutes)."""

    vocab_size: int = 4000
    d_model: int = 256
    num_heads: int = 4
    d_ff: int = 512
    num_layers: int = 2
    dropout: float = 0.0  # two epochs or so fit in the budget: far from over-fitting, dropout only slows it
    batch_size: int = 128
    steps: int = 2000  # measured 0.55-2.8 s a step on one thread (the machine shared with 8 engineers): ~25 min
    warmup: int | None = None
    peak_lr: float = 1.5e-3
    smoothing: float = 0.1
    everyday_repeats: int = 50  # each everyday phrase is this many times in an epoch's data (the rest: once)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers", "batch_size", "steps",
                     "everyday_repeats"):
            check_positive_int(name, getattr(self, name))
        if self.warmup is None:
            object.__setattr__(self, "warmup", default_warmup(self.steps))  # frozen: set once, here
        validate_warmup(self.warmup, self.steps)
        validate_learning_rate("peak_lr", self.peak_lr)
        validate_smoothing(self.smoothing)
        check_dropout(self.dropout)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(_("seed must be a whole number >= 0 (it fixes the data and the initial weights), "
                             "got {seed!r}").format(seed=self.seed))

    def model_config(self, vocab_size: int) -> ModelConfig:
        return ModelConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=self.d_model,
                           num_heads=self.num_heads, d_ff=self.d_ff, num_layers=self.num_layers,
                           max_len=MAX_TOKENS + 2, dropout=self.dropout, pad_id=Vocab.pad_id, share_embeddings=True)


def training_data(settings: TranslatorSettings) -> list[tuple[str, str]]:
    """The train split, with each everyday phrase ``everyday_repeats`` times (said in notebook 17)."""
    train = cedict_pairs("train")
    everyday = [pair for pair in train if pair[0] in set(EVERYDAY_PHRASES)]
    return train + everyday * (settings.everyday_repeats - 1)


def fine_tune_data(phrases: list[tuple[str, str]], repeats: int = 24, others: int = 1000,
                   seed: int = 0) -> list[tuple[str, str]]:
    """A class's (zh, en) phrases, each ``repeats`` times, mixed with ``others`` train pairs drawn with ``seed``.

    Notebook 17 fine-tunes on it: the phrases alone (32 of them a batch) taught them in 30 steps but pushed the
    validation loss from 3.65 to 5.42; the train pairs mixed in keep the rest of what the model knows in play.
    """
    check_positive_int("repeats", repeats)
    check_positive_int("others", others)
    for i, pair in enumerate(phrases):
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(t, str) and t.strip() for t in pair)):
            raise ValueError(_("phrases[{i}] must be a (Chinese, English) pair of non-blank strings such as "
                             "('早上好', 'good morning'), got {pair!r}").format(i=i, pair=pair))
    return list(phrases) * repeats + random.Random(seed).sample(cedict_pairs("train"), others)


class Translator:
    """A trained model and its tokenizer: ``translate(["早上好"]) -> ["good morning"]``.

    ``settings``, ``step`` and ``losses`` say how it was trained (from its checkpoint).
    """

    def __init__(self, model: Transformer, tokenizer, settings: TranslatorSettings | None = None,
                 step: int = 0, losses: list[float] | None = None):
        # Text that spells "<unk>" or "<eos>" is those letters' bytes, never the special id (which decode drops):
        # the special ids come from the model and the batches, not from anything a student types.
        tokenizer.encode_special_tokens = True
        self.model, self.tokenizer = model, tokenizer
        self.settings, self.step, self.losses = settings, step, list(losses or [])

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids[:MAX_TOKENS]

    def decode(self, ids) -> str:
        """Ids -> text, stopping at <eos> and dropping <sos> and <pad>."""
        before_eos = itertools.takewhile(lambda i: i != Vocab.eos_id, (int(i) for i in ids))
        return self.tokenizer.decode([i for i in before_eos if i not in (Vocab.pad_id, Vocab.sos_id)])

    def tokens(self, text: str) -> list[str]:
        """Each token of ``text`` as text (a token holding part of a character's bytes shows as �)."""
        return [self.tokenizer.decode([i]) for i in self.encode(text)]

    def source_batch(self, texts: list[str]) -> torch.Tensor:
        return pad_batch([self.encode(text) for text in texts], Vocab.pad_id)  # [B, L_src]

    def batch(self, pairs: list[tuple[str, str]]) -> Batch:
        """(zh, en) pairs -> padded ids: src [B, L_src], tgt_in and labels [B, L_tgt]."""
        tgt_in, labels = teacher_forcing([self.encode(en) for _, en in pairs])
        return Batch(self.source_batch([zh for zh, _ in pairs]), tgt_in, labels)

    @torch.no_grad()
    def translate(self, texts: list[str], beam_size: int | None = None, batch_size: int = 32) -> list[str]:
        """One English phrase per text: greedy, or the best of ``beam_size`` beams.

        Any string is read (a character never seen is its bytes); a text longer than ``MAX_TOKENS`` tokens
        is cut there, since the model never saw a phrase that long. ``batch_size`` texts decode at once (each
        with ``beam_size`` beams): small enough that a class's kernels stay small.
        """
        validate_texts(texts, "早上好", N_("phrase"))
        if beam_size is not None:
            check_positive_int("beam_size", beam_size)
        self.model.eval()
        out = []
        with torch_threads(1):
            for start in range(0, len(texts), batch_size):
                src = self.source_batch(texts[start:start + batch_size])  # [B, L_src]
                if beam_size is None:
                    ids = greedy_decode(self.model, src, MAX_NEW_TOKENS, Vocab.sos_id, Vocab.eos_id)  # [B, T]
                else:
                    ids = beam_search(self.model, src, MAX_NEW_TOKENS, Vocab.sos_id, Vocab.eos_id,
                                      beam_size=beam_size).best  # [B, T]
                out += [self.decode(row).strip() for row in ids]
        return out

    @torch.no_grad()
    def cross_attention(self, zh: str, en: str | None = None, layer: int = -1):
        """Teacher-forced cross-attention of one pair, averaged over heads: (weights [L_tgt, L_src], the token each
        row predicts, the source tokens). ``en`` left out: the model's own greedy translation."""
        en = self.translate([zh])[0] if en is None else en
        batch = self.batch([(zh, en)])
        self.model.eval()
        with keep_attention_weights(self.model), torch_threads(1):
            self.model(batch.src, batch.tgt_in)
        weights = self.model.decoder.layers[layer].cross_attn.attn_weights[0].mean(0)  # [L_tgt, L_src]
        predicted = [self.tokenizer.decode([int(i)]) if int(i) != Vocab.eos_id else EOS for i in batch.labels[0]]
        return weights, predicted, self.tokens(zh)

    @torch.no_grad()
    def loss(self, pairs: list[tuple[str, str]], batch_size: int = 64) -> float:
        """Mean teacher-forced cross-entropy per target token (no smoothing) over ``pairs``."""
        self.model.eval()
        total, tokens = 0.0, 0
        with torch_threads(1):
            for start in range(0, len(pairs), batch_size):
                batch = self.batch(pairs[start:start + batch_size])
                count = int((batch.labels != Vocab.pad_id).sum())
                total += sequence_loss(self.model(batch.src, batch.tgt_in), batch.labels, Vocab.pad_id).item() * count
                tokens += count
        return total / tokens


class TranslatorTrainer(TrainingLoop):
    """The translation task on ``TrainingLoop``: a fixed shuffle per epoch (from the seed), so step ``s``'s batch
    is the same in every run and a resumed run sees the same data.

    By default a new model on ``training_data(settings)``; given ``model`` (a loaded translator's), it trains
    that one further (a fine-tune), and given ``pairs``, on those pairs instead.
    """

    def __init__(self, settings: TranslatorSettings, tokenizer, threads: int = 1, model: Transformer | None = None,
                 pairs: list[tuple[str, str]] | None = None):
        if not isinstance(settings, TranslatorSettings):
            raise TypeError(_("settings must be a walkthrough.TranslatorSettings, got {type}").format(
                type=type(settings).__name__))
        self.settings = settings
        if model is None:
            torch.manual_seed(settings.seed)
            cfg = settings.model_config(tokenizer.get_vocab_size())
            check_fits_in_memory(cfg)  # refused before anything is allocated
            model = Transformer(cfg)
        self.translator = Translator(model, tokenizer, settings)
        self.pairs = training_data(settings) if pairs is None else list(pairs)
        if len(self.pairs) < settings.batch_size:
            raise ValueError(_("{count} pairs do not fill one batch of batch_size={batch_size}: give more pairs "
                             "or a smaller batch_size").format(count=len(self.pairs), batch_size=settings.batch_size))
        self._batches_per_epoch = len(self.pairs) // settings.batch_size
        self._epoch_order: tuple[int, list[int]] | None = None
        self._ids = [(self.translator.encode(zh), self.translator.encode(en)) for zh, en in self.pairs]
        super().__init__(model, self.batch, self.loss, steps=settings.steps, warmup=settings.warmup,
                         peak_lr=settings.peak_lr, threads=threads)

    def batch(self, step: int) -> Batch:
        epoch, index = divmod(step, self._batches_per_epoch)
        if self._epoch_order is None or self._epoch_order[0] != epoch:
            order = list(range(len(self._ids)))
            random.Random(self.settings.seed * 1_000_003 + epoch).shuffle(order)
            self._epoch_order = (epoch, order)
        size = self.settings.batch_size
        chosen = [self._ids[i] for i in self._epoch_order[1][index * size:(index + 1) * size]]
        tgt_in, labels = teacher_forcing([en for _, en in chosen])
        return Batch(pad_batch([zh for zh, _ in chosen], Vocab.pad_id), tgt_in, labels)

    def loss(self, model: Transformer, batch: Batch) -> torch.Tensor:
        logits = model(batch.src, batch.tgt_in)  # [B, L_tgt, V]
        return sequence_loss(logits, batch.labels, Vocab.pad_id, self.settings.smoothing)


def scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """Corpus chrF and BLEU (sacrebleu, its default settings) of ``hypotheses`` against one reference each."""
    import sacrebleu

    return {"chrF": sacrebleu.corpus_chrf(hypotheses, [references]).score,
            "BLEU": sacrebleu.corpus_bleu(hypotheses, [references]).score}


def sentence_chrf(hypothesis: str, reference: str) -> float:
    import sacrebleu

    return sacrebleu.sentence_chrf(hypothesis, [reference]).score


def nearest_headword_baseline(texts: list[str], train: list[tuple[str, str]] | None = None) -> list[str]:
    """The baseline a student can run by hand: the gloss of the training headword sharing the most characters
    with the text (ties: the one with fewest characters the text lacks, then the first in the train split).
    A text that shares no character with any headword gets an empty guess."""
    train = cedict_pairs("train") if train is None else train
    by_character: dict[str, list[int]] = {}
    for index, (zh, _en) in enumerate(train):
        for character in set(zh):
            by_character.setdefault(character, []).append(index)
    guesses = []
    for text in texts:
        shared: dict[int, int] = {}
        for character in set(text):
            for index in by_character.get(character, ()):
                shared[index] = shared.get(index, 0) + 1
        if not shared:
            guesses.append("")
            continue
        best = min(shared, key=lambda i: (-shared[i], len(set(train[i][0]) - set(text)), i))
        guesses.append(train[best][1])
    return guesses


def tokenizer_path(checkpoint: Path) -> Path:
    """The tokenizer's file beside its checkpoint: ``cedict.pt`` -> ``cedict_tokenizer.json``."""
    return checkpoint.with_name(f"{checkpoint.stem}_tokenizer.json")


def save_translator(trainer: TranslatorTrainer, path: str | Path, optimizer: bool = False) -> None:
    """The weights, settings and history (``optimizer=True``: all a resume needs), and the tokenizer beside it.

    The tokenizer is stored in the checkpoint too (its JSON, covered by the digest), so the pair cannot be
    mixed up; the file beside it is for reading and for other tools.
    """
    path = validate_checkpoint_path(path, for_writing=True)
    tokenizer_json = trainer.translator.tokenizer.to_str()
    write_checkpoint(path, TRANSLATOR_CHECKPOINT_FORMAT, {
        "settings": asdict(trainer.settings), "tokenizer": tokenizer_json, **trainer.state_dict(optimizer)})
    tokenizer_path(path).write_text(tokenizer_json)
    licence_note(path.with_name(f"{path.stem}_LICENCE.json"), [path.name, tokenizer_path(path).name])


def load_translator(path: str | Path | None = None, allow_untrained: bool = False) -> Translator:
    """The shipped translator (``checkpoints/cedict.pt``), or the one saved at ``path``, ready to translate.
    ``allow_untrained``: as for ``load_checkpoint``."""
    from tokenizers import Tokenizer

    path = Path(shipped_file("checkpoints", "cedict.pt") if path is None else path)
    state = read_checkpoint(path, TRANSLATOR_CHECKPOINT_FORMAT, allow_untrained)
    settings = settings_from(state, TranslatorSettings, path)
    tokenizer = Tokenizer.from_str(state["tokenizer"])
    with torch.random.fork_rng(devices=[]):  # building draws initial weights: the caller's random stream stays
        model = Transformer(settings.model_config(tokenizer.get_vocab_size()))
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise ValueError(_("{path}: its weights do not fit the settings stored with them ({err}); "
                         "save it again").format(path=path, err=str(err).splitlines()[0])) from None
    model.eval()
    return Translator(model, tokenizer, settings, state["step"], state["losses"])


def licence_note(path: Path, files: list[str]) -> None:
    """Write the share-alike note beside ``files``, derived from CC-CEDICT."""
    path.write_text(json.dumps({"files": files, "licence": "CC BY-SA 4.0", "note": LICENCE_NOTE}, indent=1) + "\n")

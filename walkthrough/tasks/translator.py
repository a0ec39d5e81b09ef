"""The real translator (notebook 17): Tatoeba's Chinese sentences -> English, on the package's own Transformer.

One byte-level BPE vocabulary (Hugging Face ``tokenizers``) serves both languages, so one ``[V, D]`` matrix is
the source embedding, the target embedding and the output head (``share_embeddings``). The training loop is
``TrainingLoop``; the task adds only its batches (a fixed shuffle of the train split per epoch) and its loss
(label-smoothed cross-entropy, PAD ignored). Two baselines a student can run by hand sit beside it
(``translation_memory``, ``word_for_word``), scored the same way (``scores``).
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import unicodedata
import warnings
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from ..checks import check_dropout, check_positive_int
from ..i18n import N_, _
from ..model.attention import keep_attention_weights
from ..model.config import ModelConfig
from ..model.decoding import beam_search, greedy_decode
from ..model.loss import sequence_loss
from ..model.memory_guard import check_fits_in_memory
from ..model.transformer import Transformer
from ..text.bpe import BYTE_OF, gpt2_bpe
from ..text.corpus import cedict_dictionary
from ..text.sentences import LICENCE_NOTE, sentence_pairs
from .checkpoints import REBUILT_BY, TRANSLATOR_CHECKPOINT_FORMAT, settings_from, side_file
from .class_sentences import CATEGORIES, category_checks, class_set, made_pairs
from .data import EOS, PAD, SOS, UNK, Vocab, pad_batch
from .numerals import validate_texts
from .training import (
    Batch,
    TrainingLoop,
    TrainSettings,
    teacher_forcing,
    torch_threads,
)

SPECIAL_TOKENS = [PAD, SOS, EOS, UNK]  # ids 0..3, as every Vocab of the package: pad_id is 0 everywhere
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)  # every byte, then the special tokens: no merge yet
MAX_TOKENS = 64  # a sentence's tokens fed to the model (the longest Chinese kept, 32 characters, is at most 48)
SORTED_RUN = 50  # batches sorted by length together: long enough to pad little, short enough to stay random
MAX_NEW_TOKENS = 48  # the longest English the model writes, in tokens (the longest train sentence: 40)
MAX_BEAM = 64  # the widest beam translate and the command line take
UNSURE_BELOW = 0.2  # a translation is unsure when one of its tokens had less (notebook 17's table by bucket)


def train_tokenizer(texts: list[str], vocab_size: int):
    """The translator's byte-level BPE (GPT-2's rules, ``gpt2_bpe``) trained on ``texts``, with the package's four
    special tokens first: any string round-trips."""
    return gpt2_bpe(texts, vocab_size, SPECIAL_TOKENS)


@dataclass(frozen=True)
class TranslatorSettings(TrainSettings):
    """The shipped translator's sizes and schedule (scripts/make_checkpoints.py trains it on one CPU thread):
    ``TrainSettings`` (checked as every task's) with other defaults, plus the shared vocabulary's size and dropout."""

    d_model: int = 256
    d_ff: int = 1024
    batch_size: int = 128
    steps: int = 3500
    peak_lr: float = 1e-3
    vocab_size: int = 8000
    dropout: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("vocab_size", self.vocab_size)
        if self.vocab_size < MIN_VOCAB_SIZE:
            raise ValueError(_("vocab_size={vocab_size} is below the {minimum} ids every vocabulary starts with "
                               "(256 bytes and 4 special tokens): use vocab_size >= {minimum}").format(
                                   vocab_size=self.vocab_size, minimum=MIN_VOCAB_SIZE))
        check_dropout(self.dropout)

    def model_config(self, vocab_size: int) -> ModelConfig:
        return ModelConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=self.d_model,
                           num_heads=self.num_heads, d_ff=self.d_ff, num_layers=self.num_layers,
                           max_len=MAX_TOKENS + 2, dropout=self.dropout, pad_id=Vocab.pad_id, share_embeddings=True)


def tokenizer_path(checkpoint: Path) -> Path:
    """The tokenizer's file beside its checkpoint: ``tatoeba.pt`` -> ``tatoeba_tokenizer.json``."""
    return side_file(checkpoint, "tokenizer.json")


def check_pairs(pairs, name: str = "pairs") -> None:
    """(Chinese, English) pairs as the translator takes them: a non-empty list of pairs of non-blank, whole text."""
    if not isinstance(pairs, list):
        raise TypeError(_("{name} must be a list of (Chinese, English) pairs such as [('早上好！', 'Good morning!')], "
                          "got {type}").format(name=name, type=type(pairs).__name__))
    if not pairs:
        raise ValueError(_("pairs is empty: give at least one (Chinese, English) pair"))
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
                isinstance(t, str) and t.strip() and not any("\ud800" <= c <= "\udfff" for c in t) for t in pair)):
            raise ValueError(_("{name}[{i}] must be a (Chinese, English) pair of non-blank strings of whole characters "
                               "such as ('早上好！', 'Good morning!'), got {pair!r}").format(name=name, i=i, pair=pair))


def check_parts(tokenizer, model=None) -> None:
    """A translator's parts: a ``tokenizers.Tokenizer`` (``train_tokenizer``'s, or a loaded translator's) and, when
    given, the encoder-decoder ``Transformer`` it feeds."""
    from tokenizers import Tokenizer

    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(_("tokenizer must be a Hugging Face tokenizers.Tokenizer, as train_tokenizer(texts, "
                          "vocab_size) makes or a loaded translator's .tokenizer holds, got {type}").format(
                              type=type(tokenizer).__name__))
    if model is not None and not isinstance(model, Transformer):
        raise TypeError(_("model must be a walkthrough.Transformer, e.g. a loaded translator's .model, got "
                          "{type}").format(type=type(model).__name__))


def fine_tune_data(pairs: list[tuple[str, str]], repeats: int = 24, others: int = 1000,
                   seed: int = 0) -> list[tuple[str, str]]:
    """A class's (zh, en) sentences, each ``repeats`` times, mixed with ``others`` train pairs drawn with ``seed``.

    Notebook 17 fine-tunes on it: the sentences alone would teach them and make the model forget the rest; the
    train pairs mixed in keep what the model knows in play.
    """
    check_positive_int("repeats", repeats)
    check_positive_int("others", others)
    check_pairs(pairs)
    train = sentence_pairs("train")
    if others > len(train):
        raise ValueError(_("others={others} is more than the {count:,} train pairs there are: use others <= "
                           "{count}").format(others=others, count=len(train)))
    return [tuple(pair) for pair in pairs] * repeats + random.Random(seed).sample(train, others)


class Translator:
    """A trained model and its tokenizer: ``translate(["早上好"]) -> ["good morning"]``.

    ``settings``, ``step`` and ``losses`` say how it was trained (from its checkpoint).
    """

    def __init__(self, model: Transformer, tokenizer, settings: TranslatorSettings | None = None,
                 step: int = 0, losses: list[float] | None = None):
        # Text that spells "<unk>" or "<eos>" is those letters' bytes, never the special id (which decode drops):
        # the special ids come from the model and the batches, not from anything a student types.
        check_parts(tokenizer, model)
        tokenizer.encode_special_tokens = True
        self.model, self.tokenizer = model, tokenizer
        self.settings, self.step, self.losses = settings, step, list(losses or [])

    @classmethod
    def from_checkpoint(cls, state: dict, path: Path) -> Translator:
        """The translator ``state`` (a checked checkpoint, ``load_checkpoint``) holds, ready to translate."""
        from tokenizers import Tokenizer

        settings = settings_from(state, TranslatorSettings, path)
        tokenizer = Tokenizer.from_str(state["tokenizer"])
        model = Transformer(settings.model_config(tokenizer.get_vocab_size()))
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as err:
            raise ValueError(_("{path}: its weights do not fit the settings stored with them ({err}); "
                               "save it again").format(path=path, err=str(err).splitlines()[0])) from None
        return cls(model.eval(), tokenizer, settings, state["step"], state["losses"])

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids[:MAX_TOKENS]

    def decode(self, ids) -> str:
        """Ids -> text, stopping at <eos> and dropping <sos> and <pad>."""
        ids, size = [int(i) for i in ids], self.tokenizer.get_vocab_size()
        wrong = next((i for i in ids if not 0 <= i < size), None)
        if wrong is not None:
            raise ValueError(_("ids hold {id}, which is no token: this vocabulary's ids are 0 to {last}").format(
                id=wrong, last=size - 1))
        before_eos = itertools.takewhile(lambda i: i != Vocab.eos_id, ids)
        return self.tokenizer.decode([i for i in before_eos if i not in (Vocab.pad_id, Vocab.sos_id)])

    def tokens(self, text: str) -> list[str]:
        """Each token of ``text`` as text (a token holding part of a character's bytes shows as �)."""
        validate_texts([text], "早上好！", N_("sentence"))
        return [self.tokenizer.decode([i]) for i in self.encode(text)]

    def token_bytes(self, text: str) -> list[bytes]:
        """The UTF-8 bytes each token of ``text`` stands for (notebook 16's rule: a character never merged is its
        bytes, so a token may hold part of one)."""
        return [bytes(BYTE_OF[symbol] for symbol in self.tokenizer.id_to_token(i)) for i in self.encode(text)]

    def source_batch(self, texts: list[str]) -> torch.Tensor:
        return pad_batch([self.encode(text) for text in texts], Vocab.pad_id)  # [B, L_src]

    def batch(self, pairs: list[tuple[str, str]]) -> Batch:
        """(zh, en) pairs -> padded ids: src [B, L_src], tgt_in and labels [B, L_tgt]."""
        tgt_in, labels = teacher_forcing([self.encode(en) for _, en in pairs])
        return Batch(self.source_batch([zh for zh, _ in pairs]), tgt_in, labels)

    @torch.no_grad()
    def translate(self, texts: list[str], beam_size: int | None = None, batch_size: int = 32,
                  no_repeat: bool = True) -> list[str]:
        """One English phrase per text: greedy, or the best of ``beam_size`` beams.

        Any string is read (a character never seen is its bytes); a text longer than ``MAX_TOKENS`` tokens
        is cut there, since the model never saw a phrase that long. ``batch_size`` texts decode at once (each
        with ``beam_size`` beams): small enough that a class's kernels stay small. ``no_repeat`` (greedy): never
        the token just written again, the rule notebook 17 measures.
        """
        validate_texts(texts, "早上好！", N_("sentence"))
        check_positive_int("batch_size", batch_size)
        if beam_size is not None:
            check_positive_int("beam_size", beam_size)
            if beam_size > MAX_BEAM:
                raise ValueError(_("beam_size={beam_size} is more than {most}: a wider beam only costs time on "
                                   "sentences this short (256 beams took 1.7 s for one word); use beam_size <= "
                                   "{most}").format(beam_size=beam_size, most=MAX_BEAM))
        self.model.eval()
        out = []
        with torch_threads(1):
            for start in range(0, len(texts), batch_size):
                src = self.source_batch(texts[start:start + batch_size])  # [B, L_src]
                if beam_size is None:
                    ids = greedy_decode(self.model, src, MAX_NEW_TOKENS, Vocab.sos_id, Vocab.eos_id,
                                        no_repeat=no_repeat)  # [B, T]
                else:
                    ids = beam_search(self.model, src, MAX_NEW_TOKENS, Vocab.sos_id, Vocab.eos_id,
                                      beam_size=beam_size).best  # [B, T]
                out += [self.decode(row).strip() for row in ids]
        return out

    @torch.no_grad()
    def token_probs(self, pairs: list[tuple[str, str]], batch_size: int = 4) -> list[list[tuple[str, float]]]:
        """Each English token of each (zh, en) pair, <eos> last, with the probability the model gives it after
        the tokens before it: for the model's own greedy output, exactly what it chose each token with."""
        check_positive_int("batch_size", batch_size)
        check_pairs(pairs)
        self.model.eval()
        found = []
        with torch_threads(1):
            for start in range(0, len(pairs), batch_size):
                batch = self.batch(pairs[start:start + batch_size])
                probs = self.model(batch.src, batch.tgt_in).softmax(-1)  # [B, L_tgt, V]
                chosen = probs.gather(-1, batch.labels[..., None])[..., 0]  # [B, L_tgt]
                found += [[(EOS if i == Vocab.eos_id else self.tokenizer.decode([i]), float(p))
                           for i, p in zip(row.tolist(), row_probs) if i != Vocab.pad_id]
                          for row, row_probs in zip(batch.labels, chosen)]
        return found

    @torch.no_grad()
    def cross_attention(self, zh: str, en: str | None = None, layer: int = -1, per_head: bool = False):
        """Teacher-forced cross-attention of one pair, averaged over heads: (weights [L_tgt, L_src], the token each
        row predicts, the source tokens). ``en`` left out: the model's own greedy translation. ``per_head``: each
        head's map, [H, L_tgt, L_src]."""
        layers = len(self.model.decoder.layers)
        if isinstance(layer, bool) or not isinstance(layer, int) or not -layers <= layer < layers:
            raise ValueError(_("layer must be a whole number from {low} to {high} (this decoder has {layers} layers; "
                               "-1 is the last), got {layer!r}").format(low=-layers, high=layers - 1, layers=layers,
                                                                        layer=layer))
        en = self.translate([zh])[0] if en is None else en
        batch = self.batch([(zh, en)])
        self.model.eval()
        with keep_attention_weights(self.model), torch_threads(1):
            self.model(batch.src, batch.tgt_in)
        weights = self.model.decoder.layers[layer].cross_attn.attn_weights[0]  # [H, L_tgt, L_src]
        weights = weights if per_head else weights.mean(0)  # [L_tgt, L_src]
        predicted = [self.tokenizer.decode([int(i)]) if int(i) != Vocab.eos_id else EOS for i in batch.labels[0]]
        return weights, predicted, self.tokens(zh)

    @torch.no_grad()
    def loss(self, pairs: list[tuple[str, str]], batch_size: int = 4) -> float:
        """Mean teacher-forced cross-entropy per target token (no smoothing) over ``pairs``, ``batch_size`` pairs at a
        time: 4 sentences' logits [4, L_tgt, V] kept a kernel 12 MB larger, 16 sentences' 100 MB (measured), and a
        class shares one server."""
        check_positive_int("batch_size", batch_size)
        check_pairs(pairs)
        self.model.eval()
        total, tokens = 0.0, 0
        with torch_threads(1):
            for start in range(0, len(pairs), batch_size):
                batch = self.batch(pairs[start:start + batch_size])
                count = int((batch.labels != Vocab.pad_id).sum())
                total += sequence_loss(self.model(batch.src, batch.tgt_in), batch.labels, Vocab.pad_id).item() * count
                tokens += count
        return total / tokens


REBUILT_BY[TRANSLATOR_CHECKPOINT_FORMAT] = Translator


class TranslatorTrainer(TrainingLoop):
    """The translation task on ``TrainingLoop``: a fixed shuffle per epoch (from the seed), so step ``s``'s batch
    is the same in every run and a resumed run sees the same data.

    By default a new model on the train split of ``sentence_pairs`` and the made pairs that teach numbers and
    names (``class_sentences.made_pairs``); given ``model`` (a loaded translator's), it
    trains that one further (a fine-tune), and given ``pairs``, on those pairs instead.
    """

    checkpoint_format = TRANSLATOR_CHECKPOINT_FORMAT

    def __init__(self, settings: TranslatorSettings, tokenizer, threads: int = 1, model: Transformer | None = None,
                 pairs: list[tuple[str, str]] | None = None):
        if not isinstance(settings, TranslatorSettings):
            raise TypeError(_("settings must be a walkthrough.TranslatorSettings, got {type}").format(
                type=type(settings).__name__))
        check_parts(tokenizer, model)
        if pairs is not None:
            check_pairs(pairs)
        self.settings = settings
        cfg = settings.model_config(tokenizer.get_vocab_size())
        torch.manual_seed(settings.seed)  # the initial weights and every dropout mask: a run repeats, a fine-tune too
        if model is None:
            check_fits_in_memory(cfg)  # refused before anything is allocated
            model = Transformer(cfg)
        elif model.cfg != cfg:  # a checkpoint of it could never be loaded: its settings would not build its model
            differ = [f"{name}={getattr(cfg, name)!r} (model: {getattr(model.cfg, name)!r})"
                      for name in ("d_model", "num_heads", "d_ff", "num_layers", "src_vocab_size", "max_len",
                                   "dropout") if getattr(cfg, name) != getattr(model.cfg, name)]
            raise ValueError(_("settings do not fit the model to fine-tune: {differ}; start from the model's own "
                               "settings, e.g. dataclasses.replace(translator.settings, steps=...)").format(
                                   differ="; ".join(differ) or repr(cfg)))
        self.translator = Translator(model, tokenizer, settings)
        self.pairs = sentence_pairs("train") + made_pairs() if pairs is None else list(pairs)
        if len(self.pairs) < settings.batch_size:
            raise ValueError(_("{count} pairs do not fill one batch of batch_size={batch_size}: give more pairs "
                             "or a smaller batch_size").format(count=len(self.pairs), batch_size=settings.batch_size))
        self._batches_per_epoch = len(self.pairs) // settings.batch_size
        self._epoch_order: tuple[int, list[int]] | None = None
        self._ids = [(self.translator.encode(zh), self.translator.encode(en)) for zh, en in self.pairs]
        super().__init__(model, self.batch, self.loss, steps=settings.steps, warmup=settings.warmup,
                         peak_lr=settings.peak_lr, threads=threads)

    @property
    def epochs(self) -> float:
        """How many times the training pairs have been seen so far."""
        return self.step * self.settings.batch_size / len(self.pairs)

    def batch(self, step: int) -> Batch:
        epoch, index = divmod(step, self._batches_per_epoch)
        if self._epoch_order is None or self._epoch_order[0] != epoch:
            self._epoch_order = (epoch, self._epoch_batches(epoch))
        chosen = [self._ids[i] for i in self._epoch_order[1][index]]
        tgt_in, labels = teacher_forcing([en for _, en in chosen])
        return Batch(pad_batch([zh for zh, _ in chosen], Vocab.pad_id), tgt_in, labels)

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        """One epoch's batches: the pairs shuffled, then each run of ``SORTED_RUN`` batches sorted by length and
        cut into batches, in a shuffled order. A batch of sentences of about one length pads little: a padded
        token costs as much as a real one, and a random batch of Tatoeba is two-thirds padding."""
        rng, size = random.Random(self.settings.seed * 1_000_003 + epoch), self.settings.batch_size
        order = list(range(len(self._ids)))
        rng.shuffle(order)
        batches = []
        run = SORTED_RUN * size
        for start in range(0, self._batches_per_epoch * size, run):
            chunk = sorted(order[start:min(start + run, self._batches_per_epoch * size)],
                           key=lambda i: (len(self._ids[i][0]), len(self._ids[i][1])))
            batches += [chunk[i:i + size] for i in range(0, len(chunk), size)]
        rng.shuffle(batches)
        return batches

    def checkpoint_data(self) -> dict:
        """What rebuilds the translator besides its settings (``save_checkpoint``): its tokenizer's JSON, so the
        weights and their vocabulary cannot be mixed up (the file beside it is for reading and for other tools)."""
        return {"tokenizer": self.translator.tokenizer.to_str()}

    def files_beside(self, path: Path) -> dict[Path, str]:
        """The tokenizer and the licence note (CC BY 2.0 FR, as the sentences), written beside the checkpoint."""
        tokenizer = tokenizer_path(path)
        return {tokenizer: self.translator.tokenizer.to_str(),
                side_file(path, "LICENCE.json"): json.dumps(
                    {"files": [path.name, tokenizer.name], "licence": "CC BY 2.0 FR", "note": LICENCE_NOTE},
                    indent=1) + "\n"}

    def loss(self, model: Transformer, batch: Batch) -> torch.Tensor:
        logits = model(batch.src, batch.tgt_in)  # [B, L_tgt, V]
        return sequence_loss(logits, batch.labels, Vocab.pad_id, self.settings.smoothing)


def scores(hypotheses: list[str], references: list[str] | list[tuple[str, ...]]) -> dict[str, float]:
    """Corpus chrF and BLEU (sacrebleu, its default settings) of ``hypotheses`` against their references: one
    string each, or a tuple of every reference of that sentence (a sentence with several is scored once)."""
    import sacrebleu

    several = [(ref,) if isinstance(ref, str) else tuple(ref) for ref in references]
    for name, texts in (("hypotheses", hypotheses), ("references", [r for refs in several for r in refs])):
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise TypeError(_("{name} must be a list of strings, one per sentence").format(name=name))
    if not hypotheses or len(hypotheses) != len(references):
        raise ValueError(_("hypotheses and references must be two lists of the same, non-zero length (one "
                           "reference per translation), got {hypotheses} and {references}").format(
                               hypotheses=len(hypotheses), references=len(references)))
    streams = [[refs[k] if k < len(refs) else None for refs in several] for k in range(max(map(len, several)))]
    return {"chrF": sacrebleu.corpus_chrf(hypotheses, streams).score,
            "BLEU": sacrebleu.corpus_bleu(hypotheses, streams).score}


def class_set_table(guesses: dict[str, list[str]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per category of the class set, per system (``guesses``: its translation of every class-set sentence, in
    order): chrF and BLEU against both references, and the percentage its category's check holds (None: none)."""
    rows = class_set()
    table = {}
    for category in CATEGORIES:
        index = [i for i, row in enumerate(rows) if row[0] == category]
        table[category] = {}
        for system, outputs in guesses.items():
            checks = [category_checks(category, rows[i][1], outputs[i], rows[i][3]) for i in index]
            table[category][system] = scores([outputs[i] for i in index], [rows[i][2] for i in index]) | {
                "check": None if checks[0] is None else 100 * sum(checks) / len(checks)}
    return table


def sentence_chrf(hypothesis: str, reference: str) -> float:
    import sacrebleu

    return sacrebleu.sentence_chrf(hypothesis, [reference]).score


def sentence_bleu(hypothesis: str, reference: str) -> float:
    import sacrebleu

    return sacrebleu.sentence_bleu(hypothesis, [reference]).score


def _character_grams(text: str) -> Counter[str]:
    """The characters of ``text`` and its pairs of neighbouring characters (spaces left out)."""
    text = "".join(text.split())
    return Counter(list(text) + [text[i:i + 2] for i in range(len(text) - 1)])


def unsure_note(probs: list[tuple[str, float]]) -> str | None:
    """None when the model gave every token of a translation (``token_probs``) at least ``UNSURE_BELOW``; else
    a note naming its least likely token: the mark the explorer and ``python -m walkthrough translate`` show."""
    token, p = min(probs, key=lambda pair: pair[1])
    return None if p >= UNSURE_BELOW else _("unsure: {token!r} at {p:.0%}").format(token=token.strip() or token,
                                                                                  p=p)


def translation_memory(texts: list[str], train: list[tuple[str, str]] | None = None) -> list[str]:
    """Baseline 1, by hand: the English of the most similar training sentence, by the cosine of character 1- and
    2-gram counts weighted by TF-IDF (ties: the first in the train split; no shared gram: an empty guess)."""
    validate_texts(texts, "早上好！", N_("sentence"))
    train = sentence_pairs("train") if train is None else train
    df = Counter(gram for zh, _ in train for gram in _character_grams(zh))  # in how many sentences each gram is
    columns = {gram: i for i, gram in enumerate(df)}
    idf = torch.tensor([math.log(len(train) / n) + 1.0 for n in df.values()])  # [G]

    def tf_idf(sentences: list[str]) -> torch.Tensor:  # [N, G], each row of length 1, sparse (CSR)
        starts, cols, counts = array("q", [0]), array("q"), array("f")  # flat and compact: a class's kernel stays small
        for text in sentences:
            row = sorted((columns[gram], n) for gram, n in _character_grams(text).items() if gram in columns)
            cols.extend(col for col, _ in row), counts.extend(n for _, n in row), starts.append(len(cols))
        starts_, cols_ = torch.tensor(starts, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
        values = torch.tensor(counts, dtype=torch.float32) * idf[cols_]
        rows = torch.repeat_interleave(torch.arange(len(sentences)), starts_.diff())
        norms = torch.zeros(len(sentences)).index_add_(0, rows, values ** 2).sqrt()
        with warnings.catch_warnings():  # PyTorch calls its CSR layout "beta" on every use: a student needs no warning
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(starts_, cols_, values / norms[rows], (len(sentences), len(columns)))

    memory = tf_idf([zh for zh, _ in train])  # [N_train, G]
    guesses = []
    for start in range(0, len(texts), 32):  # 32 texts at a time: [32, G] queries, [N_train, 32] cosines, a few MB
        queries = tf_idf(texts[start:start + 32]).to_dense()  # [b, G]
        cosines = memory @ queries.T  # [N_train, b]
        best = cosines.argmax(0)  # the first of equal maxima
        guesses += [train[int(i)][1] if cosines[i, j] > 0 else "" for j, i in enumerate(best)]
    return guesses


def near_training(texts: list[str], train: list[str]) -> list[bool]:
    """For each text, whether a training sentence is the same once at most one character is taken out of each (one
    character changed, added or dropped): a test sentence the model may recall more than translate."""
    def shortened(text: str) -> set[str]:
        return {text} | {text[:i] + text[i + 1:] for i in range(len(text))}
    seen = set().union(*map(shortened, train))
    return [not shortened(text).isdisjoint(seen) for text in texts]


def word_for_word(texts: list[str]) -> list[str]:
    """Baseline 2, by hand: each text cut into CC-CEDICT headwords, longest match first, each replaced by its
    first gloss, in Chinese word order (a character the dictionary lacks is kept as it is)."""
    validate_texts(texts, "早上好！", N_("sentence"))
    dictionary = cedict_dictionary()
    longest = max(map(len, dictionary))
    guesses = []
    for text in texts:
        words, start = [], 0
        while start < len(text):
            for end in range(min(len(text), start + longest), start, -1):
                if text[start:end] in dictionary:
                    words.append(dictionary[text[start:end]])
                    break
            else:
                end = start + 1
                words.append(unicodedata.normalize("NFKC", text[start]).replace("。", "."))
            start = end
        guesses.append(re.sub(r" ([.,!?;:])", r"\1", " ".join(word for word in words if word.strip())))
    return guesses

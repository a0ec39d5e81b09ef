"""Byte-pair encoding by hand: how a real vocabulary turns text into ids (notebook 16).

A vocabulary starts as the 256 byte values (so any text can be written with it) plus three special tokens,
and grows by merging: count every pair of neighbouring tokens in the training text, give the most frequent
pair a new id, replace it everywhere, repeat until the vocabulary has ``vocab_size`` tokens.

The rules this tokenizer follows, each chosen so that Hugging Face ``tokenizers`` makes the same merges
(``library_bpe`` trains it with them; tests/test_bpe.py compares the two):

- ids 0, 1, 2 are ``<pad>``, ``<sos>``, ``<eos>``; byte ``b`` is id ``3 + b``; merged tokens follow in the
  order they were learned. Text that spells ``<eos>`` is only bytes: special tokens never come from text.
- Text is cut before every space, so ``"good morning"`` is the chunks ``"good"`` and ``" morning"``; a merge
  never crosses a chunk. Chinese has no spaces: a phrase is one chunk.
- Between equally frequent pairs the smaller pair of ids wins (the library's rule).
- A merge whose bytes are already a learned token or a byte reuses that token's id. A special token is not
  text: a merge that spells ``<eos>`` gets a new id of its own (the library does the same), so the text
  ``"<eos>"`` round-trips and a smaller vocabulary stays the first merges of a larger one.
- Any Python string that UTF-8 can write round-trips, ``decode(encode(s)) == s``, never-seen characters
  included, since every character is its UTF-8 bytes (a Chinese character is 3 of them). A lone surrogate
  (not a character) is refused. ``decode`` of ids that cut a character in half shows U+FFFD there.
"""

from __future__ import annotations

import heapq
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import cache

from ..i18n import _
from .corpus import cedict_pairs

SPECIAL_TOKENS = ("<pad>", "<sos>", "<eos>")
PAD_ID, SOS_ID, EOS_ID = 0, 1, 2
FIRST_BYTE_ID = len(SPECIAL_TOKENS)  # byte b is id FIRST_BYTE_ID + b
BASE_SIZE = FIRST_BYTE_ID + 256  # the smallest vocabulary: the special tokens and every byte

# From raw bytes to the source articles' 30000: the sizes notebook 16 measures and its explorer offers
VOCAB_SIZES = (BASE_SIZE, 300, 500, 1000, 2000, 5000, 10_000, 20_000, 30_000)

Pair = tuple[int, int]
# GPT-2's byte-to-character table, as the library's ByteLevel writes a token: a printable byte stands for itself,
# the others for U+0100 onwards in byte order. Read backwards: the bytes a token holds.
_PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
BYTE_OF = {chr(b): b for b in _PRINTABLE} | {
    chr(0x100 + n): b for n, b in enumerate(b for b in range(256) if b not in _PRINTABLE)}


def chunks(text: str) -> list[str]:
    """``text`` cut before every space: the pieces a merge stays inside."""
    return [piece for piece in re.split(r"(?= )", text) if piece]


def utf8(text: str, parameter: str) -> bytes:
    """``text`` as UTF-8 bytes, or a message naming ``parameter`` when ``text`` cannot be written so."""
    if not isinstance(text, str):
        raise TypeError(_("{parameter} must be a str, got {kind}").format(parameter=parameter,
                                                                          kind=type(text).__name__))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            _("{parameter} holds a lone surrogate {char!r} at index {index}: it is not a character and UTF-8 "
              "cannot write it; remove it, or read the text with errors='replace'").format(
                parameter=parameter, char=text[error.start], index=error.start)
        ) from None


def merge(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair``, left to right, replaced by ``new_id``."""
    if pair[0] not in ids:  # most chunks lack the pair: skipped at C speed
        return ids
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def token_id(vocab: list[bytes], token: bytes) -> int:
    """The id of ``token`` among the bytes and learned tokens of ``vocab``, appended when new. Special tokens are
    not searched: a merge that spells ``<eos>`` gets an id of its own, or text would make a special token."""
    try:
        return vocab.index(token, FIRST_BYTE_ID)
    except ValueError:
        vocab.append(token)
        return len(vocab) - 1


def readable(token: bytes) -> str:
    """A token's bytes as text; bytes that are part of a character show as ``\\xe6``."""
    return token.decode("utf-8", errors="backslashreplace")


class BPETokenizer:
    """A byte-level BPE vocabulary: ``train(texts, vocab_size)``, then ``encode`` text to ids and ``decode`` back.

    ``vocab[i]`` is token ``i``'s bytes; ``merges`` maps each learned pair of ids to its new id, in the order
    learned. Untrained, it is the base vocabulary: specials and bytes, no merges.
    """

    pad_id, sos_id, eos_id = PAD_ID, SOS_ID, EOS_ID

    def __init__(self):
        self.vocab: list[bytes] = [name.encode() for name in SPECIAL_TOKENS] + [bytes([b]) for b in range(256)]
        self.merges: dict[Pair, int] = {}
        self.rank: dict[Pair, int] = {}  # a merge's place in the order learned: encode applies the earliest first

    def learned(self, merges: dict[Pair, int]) -> BPETokenizer:
        """This tokenizer with ``merges`` (in the order learned) as its merge table."""
        self.merges = merges
        self.rank = {pair: r for r, pair in enumerate(merges)}
        return self

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={len(self)}, merges={len(self.merges)})"

    def train(self, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """Learn merges from ``texts`` until the vocabulary has ``vocab_size`` tokens (or no pair is left): count
        every pair, merge the most frequent, repeat. The algorithm as taught, so it recounts every pair after
        each merge: 140 merges take seconds. ``train_fast`` learns the same merges in the same order."""
        words, counts = self.start_training(texts, vocab_size)
        merges: dict[Pair, int] = {}
        while len(self.vocab) < vocab_size:
            pair_counts = count_pairs(words, counts)
            if not pair_counts:
                break
            pair = max(pair_counts, key=lambda p: (pair_counts[p], -p[0], -p[1]))  # ties: the smaller pair wins
            new_id = merges[pair] = token_id(self.vocab, self.vocab[pair[0]] + self.vocab[pair[1]])
            words = [merge(word, pair, new_id) for word in words]
        return self.learned(merges)

    def train_fast(self, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """``train``'s merges in ``train``'s order, far faster (2000 tokens: a second, not a minute): after a merge
        only the counts of the words that held the pair change, so only those are updated, and the most frequent
        pair waits at the top of a heap."""
        words, counts = self.start_training(texts, vocab_size)
        pair_counts = count_pairs(words, counts)
        words_with: defaultdict[Pair, set[int]] = defaultdict(set)  # pair -> the words that hold it
        for w, word in enumerate(words):
            for pair in zip(word, word[1:]):
                words_with[pair].add(w)
        # The heap holds (-count, pair); a count that has changed since its entry was pushed has a newer entry,
        # so a popped entry that disagrees with pair_counts is skipped.
        heap = [(-count, pair) for pair, count in pair_counts.items()]
        heapq.heapify(heap)
        merges: dict[Pair, int] = {}
        while len(self.vocab) < vocab_size and heap:
            negative_count, pair = heapq.heappop(heap)
            if pair_counts.get(pair) != -negative_count:
                continue
            new_id = merges[pair] = token_id(self.vocab, self.vocab[pair[0]] + self.vocab[pair[1]])
            changed = set()
            for w in words_with.pop(pair):
                old, words[w] = words[w], merge(words[w], pair, new_id)
                for neighbours, sign in ((old, -1), (words[w], 1)):
                    for p in zip(neighbours, neighbours[1:]):
                        pair_counts[p] += sign * counts[w]
                        changed.add(p)
                for p in zip(words[w], words[w][1:]):
                    words_with[p].add(w)
            for p in changed:
                if pair_counts[p] > 0:
                    heapq.heappush(heap, (-pair_counts[p], p))
                else:
                    del pair_counts[p]
        return self.learned(merges)

    def start_training(self, texts: Iterable[str], vocab_size: int) -> tuple[list[list[int]], list[int]]:
        """Checks a trainer's input, then starts this tokenizer afresh (a refusal leaves it as it was), and returns the
        texts' chunks (``words_of``)."""
        if isinstance(texts, str) or not isinstance(texts, Iterable):
            raise TypeError(_("texts must be a list of strings, got {kind}: pass [text] for one text").format(
                kind=type(texts).__name__))
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(_("vocab_size must be an int, got {kind}").format(kind=type(vocab_size).__name__))
        if vocab_size < BASE_SIZE:
            raise ValueError(_("vocab_size must be at least {base} (256 bytes and {specials} special tokens), "
                               "got {size}").format(base=BASE_SIZE, specials=FIRST_BYTE_ID, size=vocab_size))
        found = words_of(texts)  # every text is checked here
        self.__init__()
        return found

    def smaller(self, vocab_size: int) -> BPETokenizer:
        """The vocabulary this one had when it reached ``vocab_size`` tokens: training is greedy, so a smaller
        vocabulary is the first merges of a larger one."""
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(_("vocab_size must be an int, got {kind}").format(kind=type(vocab_size).__name__))
        if not BASE_SIZE <= vocab_size <= len(self):
            raise ValueError(_("vocab_size must be between {base} and this vocabulary's {size}, got {asked}").format(
                base=BASE_SIZE, size=len(self), asked=vocab_size))
        smaller = BPETokenizer()
        smaller.vocab = self.vocab[:vocab_size]
        merges: dict[Pair, int] = {}
        full = vocab_size == BASE_SIZE  # training stops as soon as the vocabulary has vocab_size tokens
        for pair, new_id in self.merges.items():
            if full or new_id >= vocab_size:
                break
            merges[pair] = new_id
            full = new_id == vocab_size - 1
        return smaller.learned(merges)

    def encode(self, text: str) -> list[int]:
        """``text``'s ids: each chunk's bytes, merged in the order the merges were learned."""
        utf8(text, "text")
        return [i for piece in chunks(text) for i in self.encode_chunk(piece)]

    def encode_chunk(self, piece: str) -> list[int]:
        ids = [FIRST_BYTE_ID + b for b in piece.encode()]
        while len(ids) > 1:
            earliest = min(zip(ids, ids[1:]), key=lambda pair: self.rank.get(pair, len(self.rank)))
            if earliest not in self.rank:
                break
            ids = merge(ids, earliest, self.merges[earliest])
        return ids

    def steps(self, text: str) -> list[tuple[Pair | None, list[int]]]:
        """How ``text``'s ids change merge by merge: ``(None, its bytes' ids)`` first, then each merge that
        changed them, with the ids after it."""
        utf8(text, "text")
        pieces = [[FIRST_BYTE_ID + b for b in piece.encode()] for piece in chunks(text)]
        history: list[tuple[Pair | None, list[int]]] = [(None, [i for piece in pieces for i in piece])]
        for pair, new_id in self.merges.items():
            merged = [merge(piece, pair, new_id) for piece in pieces]
            if merged != pieces:
                pieces = merged
                history.append((pair, [i for piece in pieces for i in piece]))
        return history

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; the special tokens write nothing."""
        return b"".join(self.vocab[i] for i in self.checked(ids) if i >= FIRST_BYTE_ID).decode(
            "utf-8", errors="replace")

    def tokens(self, text: str) -> list[str]:
        """``text``'s tokens, each as readable text (see ``readable``)."""
        return [readable(self.vocab[i]) for i in self.encode(text)]

    def checked(self, ids: Iterable[int]) -> list[int]:
        ids = list(ids)
        for position, i in enumerate(ids):
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self):
                raise ValueError(_("ids[{position}] is {value!r}: ids must be ints from 0 to {last} "
                                   "(this vocabulary's size - 1)").format(position=position, value=i,
                                                                         last=len(self) - 1))
        return ids


def corpus_slice(pairs: Iterable[tuple[str, str]], characters: int = 50_000, seed: int = 0) -> list[str]:
    """Texts for training by hand: ``(zh, en)`` pairs in a seeded random order, each pair's two texts in turn,
    until ``characters`` characters (a random order, so the slice is not the headwords of one radical)."""
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    texts, total = [], 0
    for zh, en in shuffled:
        if total + len(zh) + len(en) > characters:
            break
        texts += [zh, en]
        total += len(zh) + len(en)
    return texts


def words_of(texts: Iterable[str]) -> tuple[list[list[int]], list[int]]:
    """The training texts' chunks as byte ids, each distinct chunk once (equal chunks merge alike), and how
    often each occurs."""
    chunk_counts: Counter[str] = Counter()
    for text in texts:
        utf8(text, "texts")  # a text that is no string, or one UTF-8 cannot write, is named here
        chunk_counts.update(chunks(text))
    return [[FIRST_BYTE_ID + b for b in piece.encode()] for piece in chunk_counts], list(chunk_counts.values())


def count_pairs(words: list[list[int]], counts: list[int]) -> Counter[Pair]:
    """How often each pair of neighbouring ids occurs: each word's pairs, times the word's count."""
    pair_counts: Counter[Pair] = Counter()
    for word, count in zip(words, counts):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += count
    return pair_counts


@cache
def corpus_vocabulary(vocab_size: int = 30_000) -> BPETokenizer:
    """The real vocabulary: the library's BPE (``library_bpe``) on every text of ``cedict_pairs("train")``,
    Chinese and English, as a ``BPETokenizer`` (its ``smaller`` gives every smaller size). Trained once per
    process; derived from CC-CEDICT, so CC BY-SA 4.0, like the corpus."""
    return from_library(library_bpe([text for pair in cedict_pairs("train") for text in pair], vocab_size))


def byte_char(b: int) -> str:
    """The character that stands for byte ``b`` when the library is handed bytes as text: U+0100 + b, a
    letter for every byte, in byte order, so the library numbers the bytes as ``BPETokenizer`` does."""
    return chr(0x100 + b)


def library_bpe(texts: Iterable[str], vocab_size: int):
    """Hugging Face ``tokenizers`` trained with ``BPETokenizer``'s rules: the same three special tokens first,
    the 256 bytes as the base alphabet, chunks cut before each space."""
    from tokenizers import Regex, pre_tokenizers

    split = pre_tokenizers.Split(Regex(byte_char(ord(" "))), behavior="merged_with_next")
    return train_library((as_byte_chars(text) for text in texts), vocab_size, SPECIAL_TOKENS, split,
                         [byte_char(b) for b in range(256)])


def gpt2_bpe(texts: Iterable[str], vocab_size: int, special_tokens: Iterable[str]):
    """Hugging Face ``tokenizers`` trained with GPT-2's rules (notebook 17's translator): GPT-2's split first cuts a
    sentence into words, spaces and punctuation, so a merge never joins two words (a run of Chinese characters is
    one such word); its byte-to-character table (``BYTE_OF``) and decoder make ``decode(encode(s)) == s`` for
    every string (no prefix space; all 256 byte symbols in the base alphabet, so an unseen character is bytes)."""
    from tokenizers import decoders, pre_tokenizers

    tokenizer = train_library(texts, vocab_size, special_tokens,
                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                              pre_tokenizers.ByteLevel.alphabet())
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_library(texts: Iterable[str], vocab_size: int, special_tokens: Iterable[str], pre_tokenizer,
                  alphabet: list[str]):
    """The one place the library's BPE is trained: ``special_tokens`` first, then ``alphabet``, then merges inside
    the pieces ``pre_tokenizer`` cuts, no minimum frequency."""
    from tokenizers import Tokenizer, models, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                                  initial_alphabet=alphabet, show_progress=False, min_frequency=0)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def as_byte_chars(text: str) -> str:
    """``text``'s UTF-8 bytes, one ``byte_char`` each: how ``library_bpe`` hands the library bytes."""
    return "".join(byte_char(b) for b in text.encode())


def from_library(tokenizer) -> BPETokenizer:
    """A ``BPETokenizer`` holding the merges a ``library_bpe`` tokenizer learned (to compare, or to use)."""
    import json

    model = json.loads(tokenizer.to_str())["model"]
    ids = model["vocab"]
    result, merges = BPETokenizer(), {}
    for left, right in (merge_text.split(" ") if isinstance(merge_text, str) else merge_text
                        for merge_text in model["merges"]):
        pair = (ids[left], ids[right])
        new_id = ids[left + right]
        if new_id == len(result.vocab):
            result.vocab.append(result.vocab[pair[0]] + result.vocab[pair[1]])
        merges[pair] = new_id
    return result.learned(merges)

"""Vocabularies, padding, the phrase examples of notebooks 00-06, and the numeral task of notebook 07."""

from __future__ import annotations

import operator
import random
import warnings
from collections.abc import Iterable, Sequence

import torch

from ..i18n import _

PAD, SOS, EOS, UNK = "<pad>", "<sos>", "<eos>", "<unk>"
SPECIALS = (PAD, SOS, EOS, UNK)


class Vocab:
    """Tokens <-> ids. Ids 0..3 are always <pad> <sos> <eos> <unk>, so pad_id is 0 everywhere."""

    def __init__(self, tokens: Iterable[str]):
        self.itos = list(SPECIALS) + sorted(set(tokens) - set(SPECIALS))
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}

    pad_id, sos_id, eos_id, unk_id = range(4)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Tokens -> ids; an unknown token becomes <unk>, with a warning naming it."""
        unknown = sorted({t for t in tokens if t not in self.stoi})
        if unknown:
            warnings.warn(_("not in the vocabulary, read as {unk}: {tokens}").format(unk=UNK, tokens=" ".join(unknown)),
                          stacklevel=2)
        return [self.stoi.get(t, self.unk_id) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids -> tokens, dropping <sos> and <pad> and stopping at <eos>."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.sos_id):
                out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return out


def chinese_tokens(text: str) -> list[str]:
    """One token per character (spaces dropped): enough for these examples, no tokeniser needed."""
    return [ch for ch in text if not ch.isspace()]


def english_tokens(text: str) -> list[str]:
    return text.split()


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int = Vocab.pad_id) -> torch.Tensor:
    """Lists of ids of different lengths -> [B, L_max], short rows filled with pad_id on the right."""
    if not rows:
        raise ValueError(_("rows is empty: a batch needs at least one sentence"))
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int = Vocab.pad_id) -> torch.Tensor:
    """Prompts of different lengths -> ids [B, L_max], short rows filled with pad_id on the LEFT.

    Generation appends after the last column, so every prompt must end there: ``wt.greedy_decode`` takes
    left-padded prompts (``pad_batch`` pads on the right, for training and for the encoder's source).
    """
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError(_("rows must be one or more prompts of at least one id each: drop the empty ones"))
    pad_id = _token_id("pad_id", pad_id)
    rows = [[_token_id("rows", i) for i in r] for r in rows]
    width = max(len(r) for r in rows)
    return torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], dtype=torch.long)


def _token_id(name: str, value) -> int:
    """A whole number >= 0 (an int, or an integer one-number tensor read from ids): a float would be truncated."""
    is_bool = isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    try:
        whole = None if is_bool else operator.index(value)
    except TypeError:
        whole = None
    if whole is None:
        raise TypeError(_("{name} must hold whole-number token ids, got {value!r} ({type})").format(
            name=name, value=value, type=type(value).__name__))
    if whole < 0:
        raise ValueError(_("{name} must hold token ids >= 0, got {value}").format(name=name, value=whole))
    return whole


# The phrase examples: the source articles' 早上好 -> good morning, and one longer pair.
PHRASES = [("早上好", "good morning"), ("你爱我吗？", "do you love me ?")]


def phrase_vocabs() -> tuple[Vocab, Vocab]:
    """Source (characters) and target (words) vocabularies of ``PHRASES``."""
    return (Vocab(t for zh, _ in PHRASES for t in chinese_tokens(zh)),
            Vocab(t for _, en in PHRASES for t in english_tokens(en)))


# The numeral task: Chinese numerals -> English words, 0 .. 10^8.
# Chinese groups digits by 10^4 (万), English by 10^3 (thousand, million): the model must regroup.
_ZH_DIGITS = "零一二三四五六七八九"
_EN_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
            "fifteen sixteen seventeen eighteen nineteen").split()
_EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
MAX_NUMBER = 10**8


def _check_number(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_NUMBER:
        raise ValueError(_("n must be a whole number from 0 to {MAX_NUMBER:,}, got {n!r}").format(
            MAX_NUMBER=MAX_NUMBER, n=n))


def _zh_group(n: int) -> str:
    """1..9999 -> 千百十 form; zeros between digits read once as 零, trailing zeros silent."""
    out, zero_pending = "", False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = n // value % 10
        if digit == 0:
            zero_pending = zero_pending or bool(out)
            continue
        if zero_pending:
            out += "零"
            zero_pending = False
        out += _ZH_DIGITS[digit] + unit
    return out


def chinese_numeral(n: int) -> str:
    """305 -> 三百零五, 120000 -> 十二万, 10005 -> 一万零五, 10**8 -> 一亿."""
    _check_number(n)
    if n == 0:
        return "零"
    if n == MAX_NUMBER:
        return "一亿"
    high, low = divmod(n, 10_000)
    text = _zh_group(high) + "万" if high else ""
    if low:
        text += ("零" if high and low < 1000 else "") + _zh_group(low)
    return text[1:] if text.startswith("一十") else text  # 十二, not 一十二


def _en_below_thousand(n: int) -> list[str]:
    words = []
    if n >= 100:
        words += [_EN_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(_EN_TENS[n // 10])
        n %= 10
    if n:
        words.append(_EN_ONES[n])
    return words


def english_words(n: int) -> str:
    """305 -> three hundred five, 120000 -> one hundred twenty thousand (no 'and', no hyphens)."""
    _check_number(n)
    if n == 0:
        return "zero"
    words = []
    for value, name in ((10**6, "million"), (10**3, "thousand"), (1, "")):
        group = n // value % 1000 if value < 10**6 else n // value
        if group:
            words += _en_below_thousand(group) + ([name] if name else [])
    return " ".join(words)


def is_held_out(n: int) -> bool:
    """About 1 number in 20, picked by a fixed hash: training never samples these."""
    return (n * 2654435761) % 2**32 % 20 == 0


def sample_number(rng: random.Random) -> int:
    """Every digit count 1..8 equally likely, each lower digit 0 with chance 0.35 (so 零 rules get practice)."""
    digits = rng.randint(1, 8)
    n = rng.randint(1, 9)
    for _digit in range(digits - 1):
        n = n * 10 + (0 if rng.random() < 0.35 else rng.randint(1, 9))
    return n


def numeral_vocabs() -> tuple[Vocab, Vocab]:
    """Source: the 15 characters of Chinese numerals. Target: the 31 English number words."""
    return (Vocab(_ZH_DIGITS + "十百千万亿"),
            Vocab(_EN_ONES + _EN_TENS[2:] + ["hundred", "thousand", "million"]))


def numeral_pairs(count: int, seed: int, held_out: bool) -> list[tuple[str, str]]:
    """``count`` random (Chinese, English) pairs (repeats possible), from the held-out numbers or from the rest."""
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < count:
        n = sample_number(rng)
        if is_held_out(n) == held_out:
            pairs.append((chinese_numeral(n), english_words(n)))
    return pairs

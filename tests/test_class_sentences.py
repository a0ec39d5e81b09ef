"""The class set (what a class types into notebook 17's translator) and its checks, and the made pairs that teach
the translator numbers and names: each check is held to sentences whose answer is written here by hand."""

import re

import pytest

import walkthrough as wt
from walkthrough.tasks import class_sentences as cs


def test_the_class_set_is_our_own_and_covers_every_kind_with_two_references():
    rows = cs.class_set()
    assert len(rows) >= 150 and len({zh for _kind, zh, _refs, _names in rows}) == len(rows)
    assert {kind for kind, *_rest in rows} == set(cs.CATEGORIES)
    for kind, zh, refs, names in rows:
        assert len(refs) == 2 and refs[0] != refs[1] and all(refs), zh
        assert not re.search(r"[0-9A-Za-z]", zh), zh  # numbers in characters, as a class types them
        assert bool(names) == (kind == "names"), zh
        if kind == "long":
            assert 15 <= len(zh) <= 30, zh
    assert cs.found_elsewhere() == {"Tatoeba": 0, "HSK": 0}


def test_both_references_of_every_sentence_pass_its_kinds_check():
    for kind, zh, refs, names in cs.class_set():
        for en in refs:
            assert cs.category_checks(kind, zh, en, names) in (True, None), (zh, en)


@pytest.mark.parametrize("zh,numbers", [
    ("我今年十八岁。", ["18"]), ("四百五十页", ["450"]), ("一万零五", ["10005"]), ("十二万", ["120000"]),
    ("八零三号房间", ["803"]), ("二〇二四年", ["2024"]), ("我有两个哥哥。", ["2"]), ("三加四等于七。", ["3", "4", "7"]),
    ("一三八〇〇一二三四五六", ["13800123456"]), ("我一个人去。", []), ("下午三点半", ["3"]), ("30分钟", ["30"]),
])
def test_chinese_numbers_are_read_as_a_class_writes_them(zh, numbers):
    assert cs.chinese_numbers(zh) == numbers


@pytest.mark.parametrize("en,numbers", [
    ("I'm eighteen.", ["18"]), ("four hundred and fifty pages", ["450"]), ("It's 4:30.", ["4", "30"]),
    ("Room eight oh three", ["803"]), ("December 25th", ["12", "25"]), ("There are 8 million people.", ["8000000"]),
    ("It costs $1,000.", ["1000"]), ("twenty-five", ["25"]), ("at eight forty", ["8", "40"]), ("a cat", []),
    ("a hundred people", ["100"]),
])
def test_english_numbers_are_read_in_digits_and_in_words(en, numbers):
    assert cs.english_numbers(en) == numbers


@pytest.mark.parametrize("zh,en,carried", [
    ("我今年十八岁。", "I'm eight years old.", False),  # the translator's own mistake, issue 44
    ("我今年十八岁。", "I am 18.", True),
    ("三加四等于七。", "One four.", False),
    ("三加四等于七。", "Three plus four is 7.", True),
    ("我的电话是一三八一二三四五六七八。", "My number is 138-1234-5678.", True),
    ("四百五十页", "fifty hundred hundred pages", False),
])
def test_numbers_carried_needs_every_number_of_the_chinese(zh, en, carried):
    assert cs.numbers_carried(zh, en) is carried


def test_negations_and_names_are_found_as_words():
    assert cs.negation_kept("I don't drink coffee.") and cs.negation_kept("She is not a student.")
    assert not cs.negation_kept("I drink coffee.") and not cs.negation_kept("Nothingness? Notable.")
    assert cs.names_kept("Li Ming is here.", ("Li Ming",)) and not cs.names_kept("Liii is here.", ("Li Ming",))
    assert cs.category_checks("question", "你好吗？", "How are you?") is None


def test_made_pairs_are_the_same_every_time_and_come_from_the_train_split_only():
    made = cs.made_pairs(300, seed=1)
    assert made == cs.made_pairs(300, seed=1) and made != cs.made_pairs(300, seed=2) and len(made) == 300
    held_out = {text for split in ("validation", "test") for pair in wt.sentence_pairs(split) for text in pair}
    assert not held_out & {text for pair in made for text in pair}
    numbered, templated = made[0::3], made[1::3]
    assert all(cs.numbers_carried(zh, en) and cs.chinese_numbers(zh) for zh, en in numbered + templated)


def test_kinds_held_counts_what_a_model_has_seen_of_each_kind():
    pairs = [("我今年二十岁。", "I'm twenty."), ("我不饿。", "I'm not hungry."), ("你好吗？", "How are you?"),
             ("李明来了。", "Li Ming is here."),
             ("虽然今天下雨了，但是我们还是去公园散步了。", "It rained, but we walked.")]
    assert cs.kinds_held(pairs) == {"a number of 20 or more": 1, "a negation": 1, "a question": 1,
                                    "a name of the class set": 1, "15 to 30 characters": 1}

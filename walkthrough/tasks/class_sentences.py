"""What a class types into the translator (notebook 17): the class set, its checks, and sentences made to teach it.

The class set (``class_set.tsv`` beside ``text/sentences.py``) is this project's own work: Chinese sentences of
the kinds a class shouts out (numbers, negations, questions, names, longer sentences, everyday ones), two English
references each. Besides chrF and BLEU each kind has a check a student can read: every number of the Chinese is in
the English (as digits or words), a negation is kept, a name is kept.

Tatoeba holds few Chinese numbers of 20 or more and few Chinese names, so the shipped translator also trains on
made pairs (``made_pairs``): train pairs with their number or their name swapped for another on both sides, and
a few templates (sums, room and phone numbers, times, dates, prices). They teach by data; nothing edits an output.
"""

from __future__ import annotations

import random
import re
from functools import cache
from importlib import resources

from ..text.sentences import hsk_pairs, sentence_pairs
from .data import _EN_ONES, _EN_TENS, chinese_numeral, english_words

CATEGORIES = ("numbers", "negation", "question", "names", "long", "everyday")


@cache
def class_set() -> tuple[tuple[str, str, tuple[str, str], tuple[str, ...]], ...]:
    """Every row of the class set: (category, zh, (en, en_alt), names the English must keep)."""
    text = resources.files("walkthrough.text").joinpath("class_set.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")][1:]  # header
    return tuple((kind, zh, (en, alt), tuple(filter(None, names.split("|")))) for kind, zh, en, alt, names in rows)


def found_elsewhere() -> dict[str, int]:
    """How many class-set sentences are a Tatoeba sentence (any split) or an HSK sentence: the set is our own."""
    ours = {zh for _kind, zh, _refs, _names in class_set()}
    tatoeba = {zh for split in ("train", "validation", "test") for zh, _en in sentence_pairs(split)}
    return {"Tatoeba": len(ours & tatoeba), "HSK": len(ours & {zh for zh, _en in hsk_pairs()})}


# Numbers, as a check reads them: each as a string of digits, so a phone number keeps its leading zero.
_ZH_DIGIT = {c: str(i) for i, c in enumerate("零一二三四五六七八九")} | {"〇": "0", "两": "2"}
_ZH_UNIT = {"十": 10, "百": 100, "千": 1000, "万": 10**4, "亿": 10**8}
_ZH_NUMBER = re.compile(r"[0-9]+|[零〇一二两三四五六七八九十百千万亿]+")
_EN_VALUE = ({word: i for i, word in enumerate(_EN_ONES)} | {word: 10 * i for i, word in enumerate(_EN_TENS) if i > 1}
             | {"oh": 0, "a": 1, "noon": 12, "midnight": 12})
_EN_VALUE |= {word: i + 1 for i, word in enumerate("january february march april may june july august september "
                                                    "october november december".split())}
_EN_VALUE |= {re.sub("ve$", "f", re.sub("y$", "ie", word)) + "th": value for word, value in list(_EN_VALUE.items())
              if 3 < value < 100 and value not in (8, 9)} | {"first": 1, "second": 2, "third": 3, "eighth": 8,
                                                             "ninth": 9, "twelfth": 12}
_EN_SCALE = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}


def chinese_numbers(text: str) -> list[str]:
    """The numbers of a Chinese text: 十八 -> '18', 四百五十 -> '450', 八零三 (read digit by digit) -> '803'.
    A lone 一 is left out: 一个, 一起 and 一下 are rarely a number an English sentence must say."""
    found = []
    for run in _ZH_NUMBER.findall(text):
        if run.isdigit() or not any(c in _ZH_UNIT for c in run):
            found.append(run if run.isdigit() else "".join(_ZH_DIGIT[c] for c in run))
            continue
        total, section, digit = 0, 0, 0
        for c in run:
            if c in _ZH_DIGIT:
                digit = int(_ZH_DIGIT[c])
            elif _ZH_UNIT[c] >= 10**4:
                total, section, digit = total + (section + digit) * _ZH_UNIT[c], 0, 0
            else:
                section, digit = section + (digit or 1) * _ZH_UNIT[c], 0
        found.append(str(total + section + digit))
    return [n for n in found if n != "1"]


def english_numbers(text: str) -> list[str]:
    """The numbers of an English text, written as digits or as words: 'eighteen' -> '18', '4:30' -> '4', '30',
    'four hundred and fifty' -> '450', 'December' -> '12', 'eight oh three' (digit by digit) -> '803'."""
    found, words = [], []

    def flush() -> None:
        if len(words) > 1 and all(_EN_VALUE.get(w, 10) < 10 for w in words):
            found.append("".join(str(_EN_VALUE[w]) for w in words))  # read digit by digit
        elif words:
            total, current = 0, 0
            for w in words:
                if w in _EN_SCALE:
                    current = max(current, 1) * _EN_SCALE[w]
                    if _EN_SCALE[w] > 100:
                        total, current = total + current, 0
                else:
                    current += _EN_VALUE[w]
            found.append(str(total + current))
        words.clear()

    previous = " "
    for token in re.findall(r"[0-9][0-9,]*|[a-z]+", text.lower().replace("-", " ")):
        if words == ["a"] and token not in _EN_SCALE:  # "a" is a number only in "a hundred", "a thousand"
            words.clear()
        if token[0].isdigit():
            flush()
            found.append(token.replace(",", "").lstrip("0") or "0")
        elif token in _EN_SCALE and not words and previous[0].isdigit():  # "8 million"
            found[-1] = str(int(found[-1]) * _EN_SCALE[token])
        elif token in _EN_SCALE or token in _EN_VALUE:
            if token in _EN_VALUE and _EN_VALUE[token] >= 10 and words and words[-1] in _EN_VALUE:
                flush()  # "eight forty": two numbers; "twenty five" is one
            words.append(token)
        elif not (token == "and" and words and words[-1] in _EN_SCALE):  # "four hundred and fifty" is one number
            flush()
        previous = token
    flush()
    return [n for n in found if n != "1" or "1" in text]


def numbers_carried(zh: str, en: str) -> bool:
    """Every number of the Chinese is in the English (a phone number may be spaced or dashed)."""
    english, digits = set(english_numbers(en)), re.sub(r"[^0-9]", "", en)
    return all(n in english or (len(n) > 3 and n in digits) for n in chinese_numbers(zh))


NEGATION_EN = re.compile(r"\b(not|no|never|nothing|nobody|none|neither|nor|nowhere|without|cannot)\b|n't",
                         re.IGNORECASE)


def negation_kept(en: str) -> bool:
    return bool(NEGATION_EN.search(en))


def names_kept(en: str, names: tuple[str, ...]) -> bool:
    return all(re.search(rf"\b{re.escape(name)}\b", en, re.IGNORECASE) for name in names)


def category_checks(category: str, zh: str, en: str, names: tuple[str, ...] = ()) -> bool | None:
    """The check of one translation of a class-set sentence of ``category`` (None: the kind has none)."""
    return {"numbers": lambda: numbers_carried(zh, en), "negation": lambda: negation_kept(en),
            "names": lambda: names_kept(en, names)}.get(category, lambda: None)()


def kinds_held(pairs: list[tuple[str, str]]) -> dict[str, int]:
    """How many of ``pairs`` hold each kind a class types: what a model trained on them has seen of it."""
    names = {name for *_rest, kept in class_set() for name in kept}
    return {"a number of 20 or more": sum(any(int(n) >= 20 for n in chinese_numbers(zh)) for zh, _en in pairs),
            "a negation": sum(negation_kept(en) for _zh, en in pairs),
            "a question": sum(zh.endswith(("？", "?")) for zh, _en in pairs),
            "a name of the class set": sum(any(re.search(rf"\b{n}\b", en) for n in names) for _zh, en in pairs),
            "15 to 30 characters": sum(15 <= len(zh) <= 30 for zh, _en in pairs)}


# Made pairs. Names: a surname and one or two given characters, in pinyin as English writes them.
SURNAMES = dict(zip("李王张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯邓曹彭",
                    "Li Wang Zhang Liu Chen Yang Zhao Huang Zhou Wu Xu Sun Hu Zhu Gao Lin He Guo Ma Luo Liang Song "
                    "Zheng Xie Han Tang Feng Deng Cao Peng".split()))
GIVEN = dict(zip("明伟芳静磊洋勇艳杰娟涛超秀英华平刚兰军丽强敏鹏飞婷雪琳浩宇欣佳文斌红玲晨波辉梅小海",
                 "ming wei fang jing lei yang yong yan jie juan tao chao xiu ying hua ping gang lan jun li qiang min "
                 "peng fei ting xue lin hao yu xin jia wen bin hong ling chen bo hui mei xiao hai".split()))
WESTERN = {"约翰": "John", "杰克": "Jack", "露西": "Lucy", "安娜": "Anna", "大卫": "David", "彼得": "Peter",
           "艾米丽": "Emily", "迈克": "Mike", "莉莉": "Lily", "詹姆斯": "James", "凯特": "Kate", "保罗": "Paul",
           "琳达": "Linda", "萨拉": "Sarah", "乔治": "George", "艾玛": "Emma", "汤姆": "Tom", "玛丽": "Mary"}
MONTHS = "January February March April May June July August September October November December".split()
PRICED = 5  # the first five things have a price
THINGS = [("本", "书", "book", "books"), ("个", "苹果", "apple", "apples"), ("张", "桌子", "table", "tables"),
          ("辆", "车", "car", "cars"), ("杯", "茶", "cup of tea", "cups of tea"), ("只", "猫", "cat", "cats"),
          ("个", "学生", "student", "students"), ("个", "朋友", "friend", "friends")]


def _name(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.3:
        return rng.choice(list(WESTERN.items()))
    surname, given = rng.choice(list(SURNAMES)), "".join(rng.sample(list(GIVEN), rng.choice((1, 2))))
    return surname + given, f"{SURNAMES[surname]} {''.join(GIVEN[c] for c in given).capitalize()}"


def _number(rng: random.Random) -> int:
    """Mostly 20 to 999 (what Tatoeba lacks), some single digits and some thousands."""
    return rng.choice((rng.randint(3, 9), rng.randint(10, 99), rng.randint(20, 99), rng.randint(100, 999),
                       rng.randint(100, 9999), rng.randint(10**4, 10**6)))


def _english(n: int, rng: random.Random) -> str:
    """``n`` as an English sentence writes it: words (tens hyphenated) below 100 half the time, digits otherwise."""
    if n < 100 and rng.random() < 0.5:
        return re.sub(r"(ty) (\w)", r"\1-\2", english_words(n))
    return f"{n:,}" if n >= 10**4 else str(n)


def _zh(n: int) -> str:
    """A count or an hour in Chinese: 两 for 2 (两点, 两本书), the numeral otherwise."""
    return "两" if n == 2 else chinese_numeral(n)


def _digit_by_digit(digits: str, rng: random.Random) -> str:
    return "".join("零〇"[rng.random() < 0.5] if d == "0" else chinese_numeral(int(d)) for d in digits)


def _templated(rng: random.Random) -> tuple[str, str]:
    """One made pair of a kind Tatoeba has too few of: sums, rooms, phones, times, dates, prices, ages, counts."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    room = str(rng.randint(101, 1999))
    phone = "1" + "".join(str(rng.randint(0, 9)) for _ in range(10))
    hour, minute, month, day = rng.randint(2, 12), rng.randint(10, 59), rng.randint(1, 12), rng.randint(2, 31)
    count, (measure, thing, _one, things_en) = rng.randint(3, 999), rng.choice(THINGS)
    price, (price_measure, priced, priced_en, _) = _number(rng), rng.choice(THINGS[:PRICED])
    year = str(rng.randint(1950, 2030))
    zh, en = rng.choice([
        (f"{chinese_numeral(a)}加{chinese_numeral(b)}等于{chinese_numeral(a + b)}。",
         f"{_english(a, rng).capitalize()} plus {_english(b, rng)} equals {_english(a + b, rng)}."),
        (f"{chinese_numeral(a + b)}减{chinese_numeral(b)}等于{chinese_numeral(a)}。",
         f"{_english(a + b, rng).capitalize()} minus {_english(b, rng)} is {_english(a, rng)}."),
        (f"{chinese_numeral(a)}乘以{chinese_numeral(b)}等于{chinese_numeral(a * b)}。",
         f"{_english(a, rng).capitalize()} times {_english(b, rng)} is {_english(a * b, rng)}."),
        (f"我住在{_digit_by_digit(room, rng)}号房间。", f"I live in room {room}."),
        (f"{_digit_by_digit(room, rng)}号房间在哪儿？", f"Where is room {room}?"),
        (f"我的电话号码是{_digit_by_digit(phone, rng)}。", f"My phone number is {phone}."),
        (f"现在{_zh(hour)}点{chinese_numeral(minute)}分。", f"It's {hour}:{minute:02d}."),
        (f"我们{_zh(hour)}点半见面吧。", f"Let's meet at half past {_english(hour, rng)}."),
        (f"今天是{chinese_numeral(month)}月{chinese_numeral(day)}号。", f"Today is {MONTHS[month - 1]} {day}."),
        (f"他是{_digit_by_digit(year, rng)}年出生的。", f"He was born in {year}."),
        (f"这{price_measure}{priced}{chinese_numeral(price)}块钱。",
         f"This {priced_en} costs {_english(price, rng)} yuan."),
        (f"我今年{chinese_numeral(a)}岁。", f"I'm {_english(a, rng)} years old."),
        (f"我们有{_zh(count)}{measure}{thing}。", f"We have {_english(count, rng)} {things_en}."),
    ])
    return zh, en


def _swapped_number(pair: tuple[str, str], rng: random.Random) -> tuple[str, str] | None:
    """A train pair with one number of 2 or more on each side, that number swapped for another; else None."""
    zh, en = pair
    numbers = chinese_numbers(zh)
    if len(numbers) != 1 or english_numbers(en) != numbers or not 2 <= int(numbers[0]) < 10**6:
        return None
    number = numbers[0]
    run = next(r for r in _ZH_NUMBER.findall(zh) if chinese_numbers(r) == [number])
    words = re.sub(r"(ty) (\w)", r"\1-\2", english_words(int(number)))
    spelled = next((form for form in (f"{int(number):,}", number, words) if re.search(rf"\b{form}\b", en, re.I)),
                   None)
    if spelled is None:
        return None
    new = rng.randint(max(2, 10 ** (len(number) - 1)), 10 ** len(number) - 1)  # as many digits: 十一点, never 五千点
    new_en = (str(new) if spelled[0].isdigit() or new >= 1000
                else re.sub(r"(ty) (\w)", r"\1-\2", english_words(new)))  # as the pair wrote it
    if en[re.search(rf"\b{spelled}\b", en, re.I).start()].isupper():
        new_en = new_en.capitalize()
    new_zh = str(new) if run.isdigit() else chinese_numeral(new)
    return zh.replace(run, new_zh, 1), re.sub(rf"\b{spelled}\b", new_en, en, count=1, flags=re.I)


def made_pairs(count: int = 12000, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` made (zh, en) pairs from the train split (never another split): a third with a number swapped,
    a third templated, a third with Tom (汤姆) swapped for another name."""
    rng, train = random.Random(seed), sentence_pairs("train")
    numbered = [pair for pair in train if _ZH_NUMBER.search(pair[0]) and _swapped_number(pair, random.Random(0))]
    with_tom = [(zh, en) for zh, en in train if "汤姆" in zh and re.search(r"\bTom\b", en)]
    made = []
    while len(made) < count:
        kind = len(made) % 3
        if kind == 0:
            made.append(_swapped_number(rng.choice(numbered), rng))
        elif kind == 1:
            made.append(_templated(rng))
        else:
            (zh, en), (name_zh, name_en) = rng.choice(with_tom), _name(rng)
            made.append((zh.replace("汤姆", name_zh), re.sub(r"\bTom\b", name_en, en)))
    return made

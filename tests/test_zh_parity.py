"""The Chinese edition cannot drift: every notebooks/NN_x.ipynb has its twin notebooks/zh/NN_x.ipynb with the
same cells in the same order, code identical token for token (string literals and comments may be Chinese),
the same slides, every cell translated. tools/zh_sync.py repairs what these tests find (`make zh-sync`)."""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import zh_sync  # noqa: E402

ENGLISH = sorted((ROOT / "notebooks").glob("*.ipynb"))
FIX = "run `make zh-sync` (tools/zh_sync.py) and translate the cells it marks"


def markers(source: str) -> list[str]:
    """The tool instructions in a cell's comments (noqa): never translated or dropped. nbval's are cell tags
    (tools/nbval_tags.py), which the twin keeps as they are (zh_sync.SYNCED_METADATA)."""
    return [word for line in source.splitlines() if "#" in line
            for word in line.split("#", 1)[1].split() if word.startswith(zh_sync.MARKERS)]


def language(source: str) -> str | None:
    match = zh_sync.SET_LANGUAGE.search(source)
    return match.group(3) if match else None


def parity_problems(english: dict, twin: dict) -> list[str]:
    """Everything that keeps `twin` from being the Chinese twin of `english` (both notebooks as JSON dicts)."""
    e_cells, z_cells = english["cells"], twin["cells"]
    e_types, z_types = [c["cell_type"] for c in e_cells], [c["cell_type"] for c in z_cells]
    if e_types != z_types:
        first = next((i for i, (a, b) in enumerate(zip(e_types, z_types)) if a != b), min(len(e_types), len(z_types)))
        return [f"the cell sequence differs ({len(e_cells)} English cells, {len(z_cells)} in the twin; first "
                f"difference at cell {first}): {FIX}"]
    problems = []
    for index, (e, z) in enumerate(zip(e_cells, z_cells)):
        e_text, z_text = zh_sync.source_text(e), zh_sync.source_text(z)
        where = f"cell {index} ({e_text.strip().splitlines()[0][:50] if e_text.strip() else 'empty'!r})"
        if e["cell_type"] == "code":
            try:
                same = zh_sync.code_tokens(e_text) == zh_sync.code_tokens(z_text)
            except ValueError as error:
                problems.append(f"{where}: {error}")
                continue
            if not same:
                problems.append(f"{where}: the code differs from the English beyond strings and comments")
            if markers(e_text) != markers(z_text):
                problems.append(f"{where}: markers {markers(e_text)} in English, {markers(z_text)} in the twin")
        for key in zh_sync.SYNCED_METADATA:
            if e["metadata"].get(key) != z["metadata"].get(key):
                problems.append(f"{where}: {key} metadata {e['metadata'].get(key)} in English, "
                                f"{z['metadata'].get(key)} in the twin")
        if z["metadata"].get("translation") == zh_sync.NEEDED:
            problems.append(f"{where}: still marked \"translation\": \"needed\"")
        recorded = z["metadata"].get("en_sha1")
        if e["cell_type"] == "markdown" and recorded not in (None, zh_sync.sha1(e_text)):
            problems.append(f"{where}: the English text changed since it was translated: {FIX}")
    e_languages = [language(zh_sync.source_text(c)) for c in e_cells if c["cell_type"] == "code"]
    z_languages = [language(zh_sync.source_text(c)) for c in z_cells if c["cell_type"] == "code"]
    if "en" not in e_languages:
        problems.append('the English set-up cell must say wt.set_language("en")')
    if "zh" not in z_languages or "en" in z_languages:
        problems.append('the twin\'s set-up cell must say wt.set_language("zh") (and nothing "en")')
    return problems


def missing_twins(english_dir: Path, chinese_dir: Path) -> list[str]:
    return [p.name for p in sorted(english_dir.glob("*.ipynb")) if not (chinese_dir / p.name).exists()]


# --- the series -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ENGLISH, ids=[p.stem for p in ENGLISH])
def test_twin_matches_the_english(path):
    twin = zh_sync.CHINESE_DIR / path.name
    assert twin.exists(), f"notebooks/{path.name} has no Chinese twin notebooks/zh/{path.name}: {FIX}"
    problems = parity_problems(zh_sync.read_notebook(path), zh_sync.read_notebook(twin))
    assert not problems, f"zh/{path.name}:\n" + "\n".join(problems)


def test_no_twin_without_its_english_notebook():
    orphans = sorted({p.name for p in zh_sync.CHINESE_DIR.glob("*.ipynb")} - {p.name for p in ENGLISH})
    assert not orphans, f"twins whose English notebook is gone (rename or remove them too): {orphans}"


# --- the checks can fail: small synthetic notebooks ---------------------------------------------------------

def notebook(*cells) -> dict:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(text) if kind == "code" else nbformat.v4.new_markdown_cell(text)
        for kind, text in cells])
    for cell in nb.cells:
        cell.metadata["slideshow"] = {"slide_type": "slide"} if cell.source.startswith("#") else {}
        if not cell.metadata["slideshow"]:
            del cell.metadata["slideshow"]
    return json.loads(nbformat.writes(nb))


ENGLISH_SMALL = [
    ("markdown", "# 99 · Shapes\n\nA batch of tokens."),
    ("code", '%matplotlib inline\nimport walkthrough as wt\n\nwt.set_language("en")  # Chinese: "zh"\n'
             'cfg = wt.ModelConfig.tiny()'),
    ("markdown", "## Predict"),
    ("code", 'wt.ask_shape("Shape of the scores?", (2, 4, 3, 3))  # noqa: E501 predict first'),
    ("code", 'x = torch.zeros(2, 3)\nprint(f"x is {x.shape} and {x.dtype}", "ok")'),
    ("markdown", "## Recap"),
]
CHINESE_SMALL = [
    ("markdown", "# 99 · 形状\n\n一批词元（token）。"),
    ("code", '%matplotlib inline\nimport walkthrough as wt\n\nwt.set_language("zh")  # 英文版写 "en"\n'
             'cfg = wt.ModelConfig.tiny()'),
    ("markdown", "## 预测"),
    ("code", 'wt.ask_shape("注意力分数的形状？", (2, 4, 3, 3))  # noqa: E501 先预测'),
    ("code", 'x = torch.zeros(2, 3)\nprint(f"x 的类型是 {x.dtype}，形状是 {x.shape}",\n      "好")'),
    ("markdown", "## 小结"),
]


def edited(cells, index, text):
    cells = list(cells)
    cells[index] = (cells[index][0], text)
    return cells


def test_a_faithful_translation_passes():
    """Translated comments, prompts and labels (re-wrapped, f-string fields reordered) are not drift."""
    assert parity_problems(notebook(*ENGLISH_SMALL), notebook(*CHINESE_SMALL)) == []


@pytest.mark.parametrize("index, text, expected", [
    (4, 'x = torch.zeros(2, 4)\nprint(f"x 的类型是 {x.dtype}，形状是 {x.shape}", "好")', "beyond strings"),
    (4, 'x = torch.zeros(2, 3)\nprint(f"x 的类型是 {x.dtype}，形状是 {x.size()}", "好")', "beyond strings"),
    (1, '%matplotlib widget\nimport walkthrough as wt\n\nwt.set_language("zh")\ncfg = wt.ModelConfig.tiny()',
     "beyond strings"),
    (1, '%matplotlib inline\nimport walkthrough as wt\n\nwt.set_language("en")\ncfg = wt.ModelConfig.tiny()',
     'set_language("zh")'),
    (3, 'wt.ask_shape("注意力分数的形状？", (2, 4, 3, 3))  # 先预测', "markers"),
])
def test_a_changed_code_cell_fails(index, text, expected):
    problems = parity_problems(notebook(*ENGLISH_SMALL), notebook(*edited(CHINESE_SMALL, index, text)))
    assert any(expected in p for p in problems), problems


def test_a_dropped_nbval_tag_fails():
    """nbval reads its instructions from cell tags: a twin without the English cell's tag would be compared where
    the English is not (or the reverse)."""
    english, twin = notebook(*ENGLISH_SMALL), notebook(*CHINESE_SMALL)
    english["cells"][3]["metadata"]["tags"] = ["nbval-ignore-output"]
    assert any("tags metadata" in p for p in parity_problems(english, twin))
    twin["cells"][3]["metadata"]["tags"] = ["nbval-ignore-output"]
    assert parity_problems(english, twin) == []


def test_text_inside_an_f_string_field_is_text_and_its_expression_is_code():
    english = notebook(*edited(ENGLISH_SMALL, 4, 'print(f"{\'one step\':>12} {x.shape[0]:>4}")'))
    translated = notebook(*edited(CHINESE_SMALL, 4, 'print(f"{\'一步\':>12} {x.shape[0]:>4}")'))
    changed = notebook(*edited(CHINESE_SMALL, 4, 'print(f"{\'一步\':>12} {x.shape[1]:>4}")'))
    assert parity_problems(english, translated) == []
    assert any("beyond strings" in p for p in parity_problems(english, changed))


def test_a_reordered_or_missing_cell_fails():
    reordered = [CHINESE_SMALL[i] for i in (0, 1, 3, 2, 4, 5)]
    assert "cell sequence differs" in parity_problems(notebook(*ENGLISH_SMALL), notebook(*reordered))[0]
    assert "cell sequence differs" in parity_problems(notebook(*ENGLISH_SMALL), notebook(*CHINESE_SMALL[:-1]))[0]
    swapped_code = [CHINESE_SMALL[i] for i in (0, 1, 2, 4, 3, 5)]
    assert any("beyond strings" in p for p in parity_problems(notebook(*ENGLISH_SMALL), notebook(*swapped_code)))


def test_slide_metadata_and_pending_translations_fail():
    twin = notebook(*CHINESE_SMALL)
    del twin["cells"][2]["metadata"]["slideshow"]
    twin["cells"][5]["metadata"]["translation"] = "needed"
    problems = parity_problems(notebook(*ENGLISH_SMALL), twin)
    assert any("slideshow metadata" in p for p in problems) and any("still marked" in p for p in problems)


def test_a_missing_twin_is_found(tmp_path):
    (tmp_path / "zh").mkdir()
    for name in ("00_a.ipynb", "01_b.ipynb"):
        (tmp_path / name).write_text(nbformat.writes(nbformat.v4.new_notebook()))
    (tmp_path / "zh" / "00_a.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    assert missing_twins(tmp_path, tmp_path / "zh") == ["01_b.ipynb"]


# --- the sync tool repairs what the checks find, and leaves the Chinese prose alone -------------------------

def write(path: Path, nb: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(zh_sync.dumps(nb), encoding="utf-8")


def test_sync_creates_a_twin_marked_for_translation(tmp_path):
    write(tmp_path / "99_small.ipynb", notebook(*ENGLISH_SMALL))
    assert zh_sync.run([], check=True, english_dir=tmp_path, chinese_dir=tmp_path / "zh") == 1
    assert not (tmp_path / "zh").exists(), "--check writes nothing"
    assert zh_sync.run([], check=False, english_dir=tmp_path, chinese_dir=tmp_path / "zh") == 0
    twin = zh_sync.read_notebook(tmp_path / "zh" / "99_small.ipynb")
    assert 'wt.set_language("zh")' in zh_sync.source_text(twin["cells"][1])
    assert zh_sync.needed_cells(twin) == [0, 1, 2, 3, 4, 5]
    assert (tmp_path / "zh" / "99_small.ipynb").read_text(encoding="utf-8").endswith("}\n")
    problems = parity_problems(notebook(*ENGLISH_SMALL), twin)
    assert problems and all("still marked" in p for p in problems)


def test_sync_repairs_drift_and_keeps_the_chinese(tmp_path):
    english = notebook(*ENGLISH_SMALL[:4], ("markdown", "## A new idea"),
                       ("code", "y = x.transpose(0, 1)  # the new step"), *ENGLISH_SMALL[4:])
    english["cells"][4]["metadata"]["tags"] = ["new"]
    write(tmp_path / "99_small.ipynb", english)
    twin = notebook(*edited(CHINESE_SMALL, 4, 'x = torch.zeros(9)  # 旧的代码\nprint(f"{x.shape}", "好")'))
    for cell, (kind, text) in zip(twin["cells"], ENGLISH_SMALL):  # as the tool records them
        if kind == "markdown":
            cell["metadata"]["en_sha1"] = zh_sync.sha1(text)
    twin["cells"].insert(3, copy.deepcopy(twin["cells"][3]))  # a cell the English does not have
    twin["cells"][3]["source"] = ["z = 0  # 多余的一格\n"]
    write(tmp_path / "zh" / "99_small.ipynb", twin)
    assert parity_problems(english, twin)

    assert zh_sync.run([], check=False, english_dir=tmp_path, chinese_dir=tmp_path / "zh") == 0
    synced = zh_sync.read_notebook(tmp_path / "zh" / "99_small.ipynb")
    texts = [zh_sync.source_text(c) for c in synced["cells"]]
    assert texts[0] == CHINESE_SMALL[0][1] and texts[2] == "## 预测" and texts[3] == CHINESE_SMALL[3][1]
    assert texts[4] == "## A new idea" and texts[6] == ENGLISH_SMALL[4][1]
    assert "z = 0" not in "".join(texts)
    assert synced["cells"][4]["metadata"]["tags"] == ["new"]
    problems = parity_problems(english, synced)
    assert problems and all("still marked" in p for p in problems), problems
    assert zh_sync.needed_cells(synced) == [4, 5, 6]
    assert zh_sync.run([], check=True, english_dir=tmp_path, chinese_dir=tmp_path / "zh") == 0


def test_sync_keeps_prose_with_the_part_of_a_split_cell_it_translates():
    old_text = "Every row keeps `L_src` and its 512 features."
    twin = notebook(("markdown", "# 99 · 拆分"), ("code", "x = 1"),
                    ("markdown", "每一行都保留 `L_src` 和它的 512 个特征。"), ("code", "y = 2"))
    twin["cells"][2]["metadata"]["en_sha1"] = zh_sync.sha1(old_text)
    english = notebook(("markdown", "# 99 · Split"), ("code", "x = 1"), ("markdown", "## Side by side\n\nA new `B`."),
                       ("code", "z = 3"), ("markdown", f"## One length\n\n{old_text}"), ("code", "y = 2"))
    synced, _ = zh_sync.sync(english, twin)
    texts = [zh_sync.source_text(c) for c in synced["cells"]]
    assert texts[2] == "## Side by side\n\nA new `B`." and texts[3] == "z = 3"
    assert texts[4].startswith("每一行都保留"), "the Chinese stays with the English it translates"
    assert zh_sync.needed_cells(synced) == [2, 4], "new code with nothing to translate is not marked"


def test_sync_marks_prose_whose_english_changed(tmp_path):
    english = notebook(*ENGLISH_SMALL)
    twin = notebook(*CHINESE_SMALL)
    twin["cells"][2]["metadata"]["en_sha1"] = zh_sync.sha1("## Predict")
    english["cells"][2]["source"] = ["## Predict the shape"]
    synced, changes = zh_sync.sync(english, twin)
    assert zh_sync.source_text(synced["cells"][2]) == "## 预测", "the Chinese stays for its translator"
    assert zh_sync.needed_cells(synced) == [2] and "English changed" in changes[0]


def test_check_command_exits_1_on_drift_and_writes_nothing(tmp_path):
    write(tmp_path / "99_small.ipynb", notebook(*ENGLISH_SMALL))
    command = [sys.executable, str(ROOT / "tools" / "zh_sync.py"), "--english-dir", str(tmp_path),
               "--chinese-dir", str(tmp_path / "zh")]
    check = subprocess.run([*command, "--check", "99"], capture_output=True, text=True, timeout=None)
    assert check.returncode == 1 and "no twin yet" in check.stdout and not (tmp_path / "zh").exists()
    assert subprocess.run([*command, "99"], capture_output=True, text=True, timeout=None).returncode == 0
    again = subprocess.run([*command, "--check"], capture_output=True, text=True, timeout=None)
    assert again.returncode == 0 and "in step (6 cells marked for translation)" in again.stdout
    wrong = subprocess.run([*command, "98"], capture_output=True, text=True, timeout=None)
    assert wrong.returncode != 0 and "no English notebook '98'" in wrong.stderr


# --- the glossary (docs/glossary.md): its terms, introduced at first use in every Chinese notebook --------------

GLOSSARY = ROOT / "docs" / "glossary.md"
TWINS = sorted(zh_sync.CHINESE_DIR.glob("*.ipynb"))
CJK = r"\u3400-\u9fff"
BRACKETED = re.compile(rf"[{CJK}/、／ ·–—-]{{0,10}}[（(]([^）)]*)[）)]")


class Term(NamedTuple):
    english: tuple[str, ...]   # "feed-forward network (FFN)" -> ("feed-forward network", "FFN")
    chinese: tuple[str, ...]   # "查询 / 键 / 值" -> ("查询", "键", "值")
    where: str                 # the English notebook that first uses it ("—" if none)

    @property
    def checked(self) -> tuple[str, ...]:
        """The Chinese forms the first-use rule checks: not one character, not the English word itself."""
        return tuple(form for form in self.chinese if len(form) > 1 and form not in self.english)


def glossary(text: str | None = None) -> list[Term]:
    """The terms: the rows of the glossary's table with a "where first met" column (its 不用 column is
    tests/test_glossary.py's)."""
    table = re.search(r"(?m)^\| English \| 中文 \| where first met \|.*\n\|[-|]+\|\n((?:\|.*\n?)+)",
                      text or GLOSSARY.read_text(encoding="utf-8")).group(1)
    terms = []
    for line in table.splitlines():
        english, chinese, where = [cell.strip() for cell in line.strip().strip("|").split("|")][:3]
        named = re.match(r"(.*?)\s*\((.*)\)$", english)
        parts = named.groups() if named else (english,)
        terms.append(Term(tuple(form for part in parts for form in re.split(r"\s*[,/]\s*", part) if form),
                          tuple(chinese.split(" / ")), where))
    return terms


def prose(notebook: dict, titles: bool = True) -> str:
    """What a reader reads as text: markdown cells without code blocks, code spans, link targets or comments;
    without titles, also without headings and link texts (names of places, where the first-use rule waits for
    the sentence that follows)."""
    text = "\n".join(zh_sync.source_text(c) for c in notebook["cells"] if c["cell_type"] == "markdown")
    patterns = [r"(?s)```.*?```", r"`[^`\n]*`", r"(?s)<!--.*?-->"]
    patterns += [r"\]\([^)]*\)"] if titles else [r"(?m)^#+ .*$", r"\[[^\]]*\]\([^)]*\)"]
    for pattern in patterns:
        text = re.sub(pattern, " ", text)
    return text


def uses_english(text: str, term: Term) -> bool:
    return any(re.search(rf"(?<![A-Za-z-]){re.escape(form).replace(chr(92) + ' ', '[ -]')}(?:s|es)?(?![A-Za-z])",
                         text, re.I) for form in term.english)


def chinese_uses(text: str, terms: list[Term]) -> list[tuple[int, int, Term]]:
    """Every use of a checked Chinese form, longest form first where they overlap: (start, end, term)."""
    found = []
    for term in terms:
        for form in term.checked:
            pattern = re.escape(form).replace(re.escape(" "), r"\s?")
            found += [(m.start(), m.end(), term) for m in re.finditer(pattern, text)]
    uses, taken_until = [], -1
    for start, end, term in sorted(found, key=lambda use: (use[0], -(use[1] - use[0]))):
        if start >= taken_until:
            uses.append((start, end, term))
            taken_until = end
    return uses


def first_use_problems(text: str, terms: list[Term]) -> list[str]:
    """Each term whose first Chinese use is not followed by its English in brackets."""
    problems, seen = [], set()
    squash = lambda s: re.sub(r"[\s\-–]", "", s).lower()  # noqa: E731
    for start, end, term in chinese_uses(text, terms):
        if term in seen:
            continue
        seen.add(term)
        bracket = BRACKETED.match(text, end)
        if not (bracket and any(squash(form) in squash(bracket.group(1)) for form in term.english)):
            context = text[max(0, start - 15):end + 15].replace("\n", " ")
            problems.append(f"{text[start:end]} first used without its English: write "
                            f"{text[start:end]}（{term.english[0]}） here: …{context}…")
    return problems


def test_glossary_says_where_each_term_is_first_met():
    terms = glossary()
    assert len(terms) >= 50 and len({t.chinese for t in terms}) == len(terms), "one row per term"
    english_prose = [(p.name[:2], prose(zh_sync.read_notebook(p))) for p in ENGLISH]
    for term in terms:
        first = next((number for number, text in english_prose if uses_english(text, term)), "—")
        assert term.where == first, f"docs/glossary.md: {term.english[0]} is first met in {first}, not {term.where}"


@pytest.mark.parametrize("path", TWINS, ids=[p.stem for p in TWINS])
def test_twin_introduces_glossary_terms_at_first_use(path):
    notebook = zh_sync.read_notebook(path)
    problems = first_use_problems(prose(notebook, titles=False), glossary())
    used = {term for _, _, term in chinese_uses(prose(notebook), glossary())}
    problems += [f"{term.chinese[0]} ({term.english[0]}) is first met in this notebook, but its prose never says it"
                 for term in glossary() if term.where == path.name[:2] and term.checked and term not in used]
    assert not problems, f"zh/{path.name} (docs/glossary.md):\n" + "\n".join(problems)


def test_prose_drops_code_headings_and_link_texts_only():
    source = "## 掩码\n\n掩码（mask）`mask_词元`见 [词元](01_x.ipynb)。\n\n```python\n词表\n```\n最后一行的张量"
    cell = {"cell_type": "markdown", "metadata": {}, "source": source}
    assert prose({"cells": [cell]}, titles=False).split() == ["掩码（mask）", "见", "。", "最后一行的张量"]
    assert prose({"cells": [cell]}).split() == ["##", "掩码", "掩码（mask）", "见", "[词元", "。", "最后一行的张量"]


def test_first_use_rule_on_small_texts():
    terms = glossary()
    assert first_use_problems("每个词元（token）都有编号；词元再出现时不必加括号。", terms) == []
    assert first_use_problems("多个 token 叫作词元（Tokens）。", terms) == []
    late = first_use_problems("先说词元，再说词元（token）。", terms)
    assert len(late) == 1 and "词元（token）" in late[0]
    assert first_use_problems("前馈网络（feed-forward network，FFN）和掩码矩阵（mask）", terms) == []
    assert first_use_problems("因果掩码（causal mask）遮住未来", terms) == []
    assert first_use_problems("编码器–解码器（encoder–decoder）", terms) == []
    nested = first_use_problems("自注意力（self-attention）之后，注意力还会再出现。", terms)
    assert len(nested) == 1 and "注意力（attention）" in nested[0], "自注意力 does not introduce 注意力"
    assert first_use_problems("一批句子，键和值", terms) == [], "one-character forms are not checked"
    assert first_use_problems("在 meta设备（meta device）上", terms) == []
    assert first_use_problems("在 meta 设备上", terms)


# --- one word for one term: the glossary's Chinese is the only rendering -----------------------------------------
# The renderings the glossary's words replace are its 不用 column, checked by tests/test_glossary.py; here, a term's
# English standing in Chinese prose where its Chinese belongs, and a notebook named as anything but a section.

sys.path.insert(0, str(ROOT))
from tests.test_i18n import PO, output_texts, read_catalog  # noqa: E402

# a notebook is 第 07 节, this one 本节 or 这一节, the next 下一节 (the glossary's rule 5); 每本笔记本, 十九本笔记本 and
# 两个版本笔记本 speak of the files: 本笔记本 is "this notebook" after 这 or where no character comes before it.
# A notebook is no lesson either (本课, 第 09 课, 这一课, 这节课, 下一课) nor a volume (这一本);
# 上课 and 课堂 are the class.
NOTEBOOK_NAMED = (r"笔记本 ?\d|(?:这|(?<![\u4e00-\u9fff]))本笔记本|[下上这]一本"
                  r"|本课|第 ?\d+ ?课|这一?课|这节课|[上下]一课|[上下]一节课")
BRACKETS = re.compile(r"（[^（）]*）|\([^()]*\)")


def chinese_texts() -> dict[str, str]:
    """What a Chinese reader reads, by where: each twin's prose and outputs, README.zh.md, docs/*.zh.md, the
    catalog's Chinese. Code (blocks, spans) is left out: it is the same in both editions."""
    texts = {f"zh/{p.name} prose": prose(zh_sync.read_notebook(p)) for p in TWINS}
    texts |= {f"zh/{p.name} outputs": "\n".join(output_texts(nbformat.read(p, as_version=4))) for p in TWINS}
    for path in [ROOT / "README.zh.md", *sorted((ROOT / "docs").glob("*.zh.md"))]:
        text = re.sub(r"(?s)```.*?```", " ", path.read_text(encoding="utf-8"))
        texts[str(path.relative_to(ROOT))] = re.sub(r"`[^`\n]*`|\]\([^)]*\)", " ", text)
    texts[str(PO.relative_to(ROOT))] = "\n".join(re.sub(r"\{[^{}]*\}", " ", m.string) for m in read_catalog()
                                                if m.id and m.string)  # placeholders are code
    return texts


CODE_NEIGHBOURS = "/=%._∂*[]"  # `batch // world`, `∂loss`, `*Attention Is All You Need*`: code, math, a title


def english_words(terms: list[Term]) -> dict[str, str]:
    """A pattern for each glossary term's English words, by its English: the English a Chinese sentence must not
    use in the term's place. Abbreviations and names (FFN, LayerNorm, RoPE, FLOPs, Q/K/V) stay as they are."""
    words = lambda term: [form for form in term.english if form == form.lower()]  # noqa: E731
    return {term.english[0]: "|".join(re.escape(form).replace(r"\ ", "[ -]") for form in words(term))
            for term in terms if words(term) and not set(term.chinese) & set(term.english)}


def bare_english(text: str, terms: list[Term]) -> list[str]:
    """Each glossary term written in English words in running Chinese text (not beside code or math)."""
    found = []
    for english, pattern in english_words(terms).items():
        for match in re.finditer(rf"(?i)(?<![A-Za-z-])(?:{pattern})(?:s|es)?(?![A-Za-z-])", text):
            before, after = text[:match.start()].rstrip()[-1:], text[match.end():].lstrip()[:1]
            if not {before, after} & set(CODE_NEIGHBOURS):
                found.append(f"{english}: {match.group()}")
    return found


def variants_used(text: str, prose_words: bool = True) -> list[str]:
    """The notebooks named as anything but a section (笔记本 NN) in a text; with `prose_words`, also a glossary
    term's English standing where its Chinese belongs, its brackets' English glosses aside."""
    unglossed = BRACKETS.sub(lambda m: " " if re.search(r"[A-Za-z]", m.group()) else m.group(), text)
    found = bare_english(unglossed, glossary()) if prose_words else []
    return found + [f"notebook: {match.group()}" for match in re.finditer(NOTEBOOK_NAMED, text)]


def test_variants_used_finds_english_terms_and_notebooks_named_otherwise():
    assert variants_used("前置归一化（pre-norm）和后置归一化，见第 07 节") == []
    assert variants_used("前置归一化、堆叠，见笔记本 07") == ["notebook: 笔记本 0"]
    assert variants_used("这本笔记本讲掩码，下一本讲交叉注意力") == ["notebook: 这本笔记本", "notebook: 下一本"]
    assert variants_used("本节讲掩码，下一节讲交叉注意力；每本笔记本、两个版本笔记本都能放映") == []
    assert variants_used("本笔记本讲掩码") == ["notebook: 本笔记本"]
    assert variants_used("用 pre-norm 训练") == ["pre-norm: pre-norm"]
    assert variants_used("本课讲掩码，第 09 课讲 GPT；这一课、这节课、这一本、下一课") == [
        "notebook: 本课", "notebook: 第 09 课", "notebook: 这一课", "notebook: 这节课", "notebook: 这一本",
        "notebook: 下一课"]
    assert variants_used("上课时设 30 秒；课堂上调到 60；第 4 次课；课前检查") == []
    assert variants_used("把 logits 变成概率", prose_words=False) == []


def test_the_english_edition_glosses_the_source_articles_as_the_chinese_edition_names_them():
    english = {p.name: prose(zh_sync.read_notebook(p)) for p in ENGLISH}
    english |= {path.name: path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *sorted(
        (ROOT / "docs").glob("*.md"))] if not path.name.endswith(".zh.md") and path != GLOSSARY}
    replaced = re.search(r"(?m)^\| the source articles \| 源文章 \| (.+) \|$", GLOSSARY.read_text(encoding="utf-8"))
    found = {where: re.findall("|".join(replaced.group(1).split("、")), text) for where, text in english.items()}
    assert not {where: used for where, used in found.items() if used}, "the source articles are 源文章"


# An English edition's gloss: "the **logits** (对数几率)", "a query (查询, what it looks for)".
GLOSSED = re.compile(rf"([A-Za-z][A-Za-z -]*?)\**\s*\(([^()]*[{CJK}][^()]*)\)")


def english_glosses(text: str) -> list[tuple[str, str]]:
    """The (English, Chinese) pairs an English text gives: each gloss in brackets after its English, and each row
    of a table whose header names the 中文 column (cells split on commas, brackets' asides dropped)."""
    pairs = [(m.group(1), m.group(2)) for m in GLOSSED.finditer(text)]
    for table in re.findall(r"(?m)^\|[^\n]*\| 中文 \|[^\n]*\n(?:\|[^\n]*\n?)+", text):
        header, _, *rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
        english, chinese = header.index(next(h for h in header if h.startswith("English"))), header.index("中文")
        for row in rows:
            words = [re.sub(r"\s*\(.*?\)", "", cell).split(", ") for cell in (row[english], row[chinese])]
            pairs += zip(*words) if len(words[0]) == len(words[1]) else []
    return pairs


def gloss_problems(text: str, terms: list[Term]) -> list[str]:
    """Each gloss whose English ends in a glossary term (the longest that fits) but whose Chinese does not hold
    that term's 中文: the English edition teaches the Chinese word too, so it must teach the glossary's."""
    normal = lambda s: s.lower().replace("isation", "ization")  # noqa: E731
    problems = []
    for english, chinese in english_glosses(text):
        fits = [(len(form), term) for term in terms for form in term.english
                if re.search(rf"(?<![a-z]){re.escape(normal(form))}(?:s|es)?$", normal(english.strip()))]
        if fits:
            term = max(fits, key=lambda fit: fit[0])[1]
            if not any(form in chinese for form in term.chinese):
                problems.append(f"{english.strip()} ({chinese}): the glossary's word is {term.chinese[0]}")
    return problems


def test_gloss_problems_takes_the_longest_term_and_reads_tables():
    terms = glossary()
    assert gloss_problems("The output head (输出头) gives the **logits** (对数几率).", terms) == []
    assert gloss_problems("the output head (输出层) and the logits (逻辑值)", terms) == [
        "the output head (输出层): the glossary's word is 输出头",
        "and the logits (逻辑值): the glossary's word is 对数几率"]
    table = ("| English | 中文 | where |\n|---|---|---|\n"
             "| embedding, causal (look-ahead) mask | 词嵌入, 因果掩码 (前瞻) | 01 |\n")
    assert english_glosses(table) == [("embedding", "词嵌入"), ("causal mask", "因果掩码")]
    assert gloss_problems(table, terms) == []  # a table's cell holds the term's word: 词嵌入 holds 嵌入
    assert gloss_problems("| English | 中文 |\n|---|---|\n| layer normalisation | 归一化 |\n", terms)


def test_the_english_edition_glosses_each_term_with_the_glossarys_chinese():
    english = {f"{p.name}": prose(zh_sync.read_notebook(p)) for p in ENGLISH}
    english |= {str(path.relative_to(ROOT)): re.sub(r"(?s)```.*?```|`[^`\n]*`", " ", path.read_text(encoding="utf-8"))
                for path in
                [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
                if not path.name.endswith(".zh.md") and path != GLOSSARY}
    found = {where: problems for where, text in english.items() if (problems := gloss_problems(text, glossary()))}
    assert not found, "docs/glossary.md gives one Chinese word per term: " + "; ".join(
        f"{where}: {problems}" for where, problems in found.items())


def test_chinese_prose_writes_terms_in_chinese_and_names_notebooks_as_sections():
    # Outputs print code's own names (decoder.layers.0) and the catalog names arguments as the code does (`logits
    # must be [B, L, V]`), so only prose is held to the glossary's words; 笔记本 NN is found everywhere.
    found = {where: used for where, text in chinese_texts().items()
             if (used := variants_used(text, prose_words=not where.endswith(("outputs", ".po"))))}
    assert not found, ("docs/glossary.md gives one Chinese word per term; these use another (write the glossary's): "
                       + "; ".join(f"{where}: {sorted(set(used))}" for where, used in found.items()))

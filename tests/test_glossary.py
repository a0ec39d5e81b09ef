"""docs/glossary.md is the one list of the Chinese edition's words (issue 47): for each thing one Chinese word, and a
不用 column with the renderings it replaces. No 不用 entry may stand anywhere a Chinese reader reads: a Chinese
notebook's prose (its markdown, diagrams included) or outputs, README.zh.md, docs/*.zh.md, the catalog's msgstr
values; and the English edition's Chinese glosses use none either. How an entry is matched is the glossary's rule 4.
"""

import functools
import re
import sys
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.test_i18n import PO, output_texts, read_catalog  # noqa: E402
from tests.test_zh_parity import ENGLISH, GLOSSARY, TWINS, english_glosses, glossary, zh_sync  # noqa: E402

NONE = "—"
CODE_BEFORE, CODE_AFTER = set("._[(/`'\""), set("._[(=`'\"")  # ids[0], ids.long(), model(ids), 'ids': code
BRACKETS = re.compile(r"（[^（）]*）|\([^()]*\)")


class Row(NamedTuple):
    english: str
    chinese: tuple[str, ...]   # "最终层归一化 / 最终 RMSNorm" -> both
    variants: tuple[str, ...]  # the 不用 column, split on 、 ("—": none)


def rows(text: str | None = None) -> list[Row]:
    """Every row of the glossary's tables that have a 不用 column: the terms and the series' own words."""
    text = text if text is not None else GLOSSARY.read_text(encoding="utf-8")
    found = []
    for table in re.findall(r"(?m)^\| English \| 中文 \|(?:.*\|)? 不用 \|\n\|[-|]+\|\n((?:\|.*\n?)+)", text):
        for line in table.splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            variants = () if cells[-1] == NONE else tuple(cells[-1].split("、"))
            found.append(Row(cells[0], tuple(cells[1].split(" / ")), variants))
    return found


def is_english(variant: str) -> bool:
    return not re.search(r"[^\x00-\x7f]", variant)


def pattern(variant: str) -> re.Pattern:
    """An entry as a pattern: a space may be missing, a number stands for any number, an English entry is a word."""
    body = "".join(r"\s?" if piece == " " else r"\d+" if piece.isdigit() else re.escape(piece)
                   for piece in re.split(r"(\d+| )", variant) if piece)
    if is_english(variant):
        body = rf"(?<![A-Za-z0-9_]){body}(?![A-Za-z0-9_])"
    return re.compile(body, re.I if is_english(variant) else 0)


def glossary_spans(text: str, table: list[Row]) -> list[tuple[int, int]]:
    """Where the text uses a Chinese word of this list (词元编号, 类别编号): an entry inside one is no variant."""
    return [(m.start(), m.end()) for row in table for form in row.chinese
            for m in re.finditer(re.escape(form), text)]


def glossed(text: str, start: int, word: str, table: list[Row]) -> bool:
    """Whether the English word at text[start] is in brackets that gloss a Chinese word of this list whose English
    holds it: right after it (记忆（memory）, 类别编号（class id）, 词元编号（token id；…）) or beside it in the same
    brackets (FSDP（fully sharded data parallel，全分片数据并行）). 内存（memory） glosses no word of the list."""
    bracket = next((b for b in BRACKETS.finditer(text) if b.start() < start < b.end()), None)
    if bracket is None:
        return False
    stem = re.escape(" ".join(word.split()).removesuffix("s")).replace(r"\ ", r"\s?")
    word = re.compile(rf"(?<![A-Za-z]){stem}s?(?![A-Za-z])", re.I)
    for row in table:
        forms = "|".join(re.escape(form) for form in row.chinese)
        if word.search(row.english) and (re.search(rf"(?:{forms})[\u3400-\u9fff]{{0,10}}\s*$", text[:bracket.start()])
                                         or re.search(forms, bracket.group())):
            return True
    return False


def uses(text: str, kind: str = "prose", argument: str = "", table: list[Row] | None = None) -> list[tuple]:
    """Each 不用 entry the text uses, as (row, match). `kind` is "prose" (a notebook's markdown, a doc: brackets after
    the Chinese may gloss it in English) or "output" (a notebook's outputs, a msgstr: no glosses, but code's names
    stay); `argument` is the name a message is about (the word its msgid begins with)."""
    table = table if table is not None else rows()
    spans = glossary_spans(text, table)
    found = []
    for row in table:
        for variant in row.variants:
            for match in pattern(variant).finditer(text):
                start, end = match.span()
                if any(s <= start and end <= e and e - s > end - start for s, e in spans):
                    continue  # 编号 inside 词元编号
                if is_english(variant):
                    before, after = text[start - 1:start], text[end:end + 1]
                    if kind == "prose" and glossed(text, start, match.group(), table):
                        continue
                    if kind == "output" and (before in CODE_BEFORE or after in CODE_AFTER
                                             or match.group().lower() == argument.lower()):
                        continue
                found.append((row, match))
    return found


def variants_in(text: str, kind: str = "prose", argument: str = "", table: list[Row] | None = None) -> list[str]:
    """The 不用 entries the text uses, as "english: what it found"."""
    return [f"{row.english}: {match.group()}" for row, match in uses(text, kind, argument, table)]


def in_context(text: str, kind: str = "prose", argument: str = "") -> list[str]:
    """The 不用 entries the text uses, each with the words around it: what a failure shows."""
    return [f"{match.group()} (use {' / '.join(row.chinese)}) in …{text[max(0, match.start() - 12):match.end() + 12]}…"
            .replace("\n", " ") for row, match in uses(text, kind, argument)]


# --- what a Chinese reader reads ----------------------------------------------------------------------------------

def markdown(notebook: dict) -> str:
    """A notebook's markdown as a reader reads it: code spans, link targets and comments out; diagrams (fenced
    blocks: in the Chinese edition only diagrams) in."""
    text = "\n".join(zh_sync.source_text(c) for c in notebook["cells"] if c["cell_type"] == "markdown")
    for code in (r"```", r"`[^`\n]*`", r"(?s)<!--.*?-->", r"\]\([^)]*\)"):
        text = re.sub(code, " ", text)
    return text


def doc(path: Path) -> str:
    text = re.sub(r"(?s)```.*?```", " ", path.read_text(encoding="utf-8"))
    return re.sub(r"(?s)`[^`\n]*`|\]\([^)]*\)|<!--.*?-->", " ", text)


def catalog() -> list[tuple[str, str]]:
    """Each msgstr (placeholders, which are code, out) with the argument it is about: the name its msgid begins with
    as a sentence's subject ("ids must be …", not the label "memory (final LayerNorm)")."""
    messages = []
    for message in read_catalog():
        if message.id and message.string:
            msgid = message.id if isinstance(message.id, str) else message.id[0]
            strings = [message.string] if isinstance(message.string, str) else list(message.string)
            argument = re.match(r"[A-Za-z_]*(?= [a-z])|", msgid).group()
            messages += [(re.sub(r"\{[^{}]*\}", " ", string), argument) for string in strings]
    return messages


@functools.cache
def chinese_edition() -> dict[str, list[str]]:
    """What the Chinese edition uses, by where: the 不用 entries found in each place a Chinese reader reads, each
    in its context."""
    found = {}
    for path in TWINS:
        found[f"zh/{path.name} markdown"] = in_context(markdown(zh_sync.read_notebook(path)))
        outputs = output_texts(nbformat.read(path, as_version=4))
        found[f"zh/{path.name} outputs"] = [use for text in outputs for use in in_context(text, "output")]
    for path in [ROOT / "README.zh.md", *sorted((ROOT / "docs").glob("*.zh.md"))]:
        found[str(path.relative_to(ROOT))] = in_context(doc(path))
    found[str(PO.relative_to(ROOT))] = [use for text, name in catalog() for use in in_context(text, "output", name)]
    return found


PLACES = ([f"zh/{p.name} {part}" for p in TWINS for part in ("markdown", "outputs")]
          + [str(p.relative_to(ROOT)) for p in [ROOT / "README.zh.md", *sorted((ROOT / "docs").glob("*.zh.md"))]]
          + [str(PO.relative_to(ROOT))])


@pytest.mark.parametrize("where", PLACES)
def test_the_chinese_edition_uses_no_variant(where):
    used = chinese_edition()[where]
    assert not used, (f"{where} uses what docs/glossary.md's 不用 column replaces (write the 中文 column's word; an "
                      "output's words come from the catalog or the notebook's code, then re-execute it):\n"
                      + "\n".join(sorted(set(used))))


def test_the_english_editions_chinese_glosses_use_no_variant():
    texts = {p.name: markdown(zh_sync.read_notebook(p)) for p in ENGLISH}
    texts |= {path.name: doc(path) for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
              if not path.name.endswith(".zh.md") and path != GLOSSARY}
    found = {where: used for where, text in texts.items()
             if (used := [f"{row.english}: {match.group()}" for _, chinese in english_glosses(text)
                          for row, match in uses(chinese) if not is_english(match.group())])}
    assert not found, f"the English edition glosses with a word docs/glossary.md replaces: {found}"


def test_every_first_cell_says_run_all_in_the_glossarys_words():
    """The first cell's line on running a notebook, worded seven ways before issue 47: the glossary's one wording,
    and where the English has the series' usual line, the glossary's whole line."""
    text = GLOSSARY.read_text(encoding="utf-8")
    menu = next(row.chinese[0] for row in rows() if row.english.startswith("the first cell's line"))
    line = re.search(r"(?m)^(\*请先运行所有单元格.*\*)$", text).group(1)
    problems = []
    for path in TWINS:
        first = zh_sync.source_text(zh_sync.read_notebook(path)["cells"][0])
        english = zh_sync.source_text(zh_sync.read_notebook(ROOT / "notebooks" / path.name)["cells"][0])
        if menu not in first:
            problems.append(f"zh/{path.name}: its first cell does not name the menu as {menu}")
        elif "*Run the cells first (Run → Run All):" in english and line not in first:
            problems.append(f"zh/{path.name}: its first cell's line is not the glossary's {line}")
    assert not problems, "\n".join(problems)


# --- the check itself -------------------------------------------------------------------------------------------

def test_every_row_is_read_and_every_term_is_a_row():
    table = rows()
    text = GLOSSARY.read_text(encoding="utf-8")
    table_lines = re.findall(r"(?m)^\| (?!English \||---).*\|$", text)
    assert len(table) == len(table_lines) >= 75, "each row of both tables, its 不用 cell included"
    assert [row.english for row in table[:len(glossary())]] == [
        re.match(r"\| (.*?) \|", line).group(1) for line in table_lines[:len(glossary())]]
    assert {term.chinese for term in glossary()} <= {row.chinese for row in table}, "the terms are rows here too"


def test_every_entry_of_every_row_is_found_and_no_word_of_the_list_is():
    table = rows()
    for row in table:
        for variant in row.variants:
            for kind in ("prose", "output"):
                assert f"{row.english}: " in " ".join(variants_in(f"甲{variant}乙", kind)), (row, variant, kind)
    words = "，".join(form for row in table for form in row.chinese)
    assert variants_in(words) == [] and variants_in(words, "output") == []


# Every variant issue 47 names, as the edition had it: each must be found.
ISSUE_47 = [
    ("prose", "# 16 · 从文本到编号：手写字节对编码"),
    ("prose", "每个句对都保留它的 Tatoeba 编号。"),
    ("prose", " 源句 ids [B, L_src]                                目标句 ids [B, L_tgt]"),
    ("prose", "词表把每个词元映射成一个编号（id）"),
    ("output", "预测形状：第 0 步的批：源 id [64, 14]，解码器输入 [64, 12]"),
    ("output", "预测形状：ids 的形状是 [1, 3]，d_model = 512。"),
    ("output", "把 早上好 当作只有一个句子的批。它的 ids 形状 [B, L] 是多少？"),
    ("prose", "| token, token id | 词元, 词元编号 |\n| embedding | 词嵌入 |"),
    ("prose", "从词元编号到 memory"),
    ("prose", "Q 来自解码器的词元，K 和 V 来自 memory。"),
    ("output", "memory（经最终层归一化）  [32, 10, 512]"),
    ("prose", "最后的探索控件需要正在运行的内核。"),
    ("prose", "## 仓库自带的训练好的模型"),
    ("prose", "每个笔记本从上到下运行一遍（菜单 *Run → Run All Cells*，中文界面下是“运行”菜单里的同一条命令）"),
    ("prose", "*请先运行所有单元格（Run → Run All）：运行之前，滑块（slider）或问题只会显示成一行文字。*"),
    ("prose", "*请先运行全部单元格（菜单“运行 → 运行所有单元格”，英文界面为 Run → Run All）：运行之前*"),
    ("prose", "*请先运行全部单元格（Run → Run All）：运行之前，滑块（slider）和问题只会显示成一行文字*"),
    ("prose", "请先点菜单 *运行 → 运行所有单元格*（Run → Run All Cells）：提问和探索器都是实时的小部件。"),
    ("prose", "*请先运行所有单元格（运行 → 运行所有单元格，Run → Run All）：运行之前*"),
    ("prose", "*请先运行所有单元格（Run → Run All，运行 → 运行所有单元格）：运行之前*"),
    ("prose", "请先运行所有单元格（Run → Run All Cells）：最后的探索器需要正在运行的内核。"),
    ("prose", "用后归一化训练"),
    ("prose", "预归一化的梯度"),
    ("prose", "每个子层之后各有一次 Add & Norm"),
    ("output", "解码器输出（最后的层归一化）  [32, 4, 512]"),
    ("prose", "在 40 个留出的数上，beam 4 返回的正是贪心解码的翻译。"),
    ("prose", "数词任务把束搜索的用处藏起来了"),  # the glossary's word: found nothing (below)
    ("prose", "这一节在第 07 节的数字翻译任务上真正跑一遍"),
    ("prose", "第 09 节的中文数字模型，6 层"),
    ("output", "transpose 之后的 Q             [32, 8, 10, 64]"),
    ("output", "转置之后还是连续的（contiguous）吗？ False"),
    ("output", "前置归一化（pre-norm）：残差通路保持不动"),
]


@pytest.mark.parametrize("kind, text", ISSUE_47)
def test_each_variant_issue_47_names_is_found(kind, text):
    used = variants_in(text, kind)
    assert (used == []) if "数词任务" in text else used, text


def test_the_glossarys_words_code_and_first_use_glosses_are_not_variants():
    assert variants_in("词元编号（token id）、类别编号、句子编号和位置序号") == []
    assert variants_in("记忆（memory）；残差相加 & 层归一化（Add & Norm）；前置归一化（pre-norm）") == []
    assert variants_in("请先运行所有单元格（菜单“运行 → 运行所有单元格”，英文界面为 Run → Run All Cells）") == []
    code = "ids[0]、ids.long()、memory.to(x)、src_ids、beam_size=4、q @ k.transpose(-2, -1)"
    assert variants_in(code, "output") == []
    assert variants_in("ids 必须是 [B, t]；请检查 ids", "output", argument="ids") == []
    assert variants_in("请检查 ids", "output") == ["token id: ids"]
    assert variants_in("记忆（memory）", "output") == ["memory: memory"], "an output glosses nothing"
    assert variants_in("内存（memory）") == ["memory: memory"], "a gloss follows its own row's Chinese"
    assert variants_in("KV缓存和 beam 8") == ["KV cache: KV缓存", "beam width (beam size): beam 8"]

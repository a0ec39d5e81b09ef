"""Every solution in docs/solutions.md runs and its checks hold; teaching.md names every notebook. The Chinese
twins (docs/teaching.zh.md, docs/solutions.zh.md, README.zh.md) keep the English structure: the same sections,
the same notebooks, the same code (token for token: only comments and strings are Chinese), and each pair
links the other."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "tools"))
import zh_sync  # noqa: E402  (one home for "the same code, strings and comments aside")

SOLUTION_BLOCK = re.compile(r"^## (\d\d)\n\n```python\n(.*?)^```", re.S | re.M)
BLOCKS = SOLUTION_BLOCK.findall((DOCS / "solutions.md").read_text(encoding="utf-8"))
BLOCKS_ZH = SOLUTION_BLOCK.findall((DOCS / "solutions.zh.md").read_text(encoding="utf-8"))
NOTEBOOKS = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("*.ipynb"))
PAIRS = [(ROOT / "README.md", ROOT / "README.zh.md"), (DOCS / "teaching.md", DOCS / "teaching.zh.md"),
         (DOCS / "solutions.md", DOCS / "solutions.zh.md"), (DOCS / "real-models.md", DOCS / "real-models.zh.md")]


def sections(text: str) -> list[str]:
    return re.findall(r"^## .*$", text, re.M)


def code_spans(text: str) -> set[str]:
    return set(re.findall(r"`[^`\n]+`", text))


def test_every_notebook_has_exercises_and_a_solution():
    assert [number for number, _ in BLOCKS] == NOTEBOOKS
    for name in ("teaching.md", "teaching.zh.md"):
        teaching = (DOCS / name).read_text(encoding="utf-8")
        for number in NOTEBOOKS:
            assert f"**{number}.**" in teaching and re.search(rf"^\| {number} ", teaching, re.M), f"{name}: {number}"


@pytest.mark.parametrize("number,code", BLOCKS, ids=[number for number, _ in BLOCKS])
def test_solution_runs(number, code, capsys):
    exec(compile(code, f"solutions.md#{number}", "exec"), {"__name__": f"solution_{number}"})
    assert capsys.readouterr().out.strip(), "a solution should print its answer"


def test_chinese_solutions_are_the_english_code():
    """solutions.zh.md holds the same blocks in the same order, token for token (zh_sync.code_tokens): its
    comments and printed labels may be Chinese, its code may not differ."""
    assert [number for number, _ in BLOCKS_ZH] == [number for number, _ in BLOCKS]
    for (number, english), (_, chinese) in zip(BLOCKS, BLOCKS_ZH):
        assert zh_sync.code_tokens(chinese) == zh_sync.code_tokens(english), \
            f"solutions.zh.md ## {number}: the code differs from solutions.md beyond comments and strings"
        assert re.search(r"[\u4e00-\u9fff]", chinese) or not re.search(r"#|print\(", english), \
            f"solutions.zh.md ## {number}: its comments and labels are still English"


@pytest.mark.parametrize("number,code", BLOCKS_ZH, ids=[f"zh-{number}" for number, _ in BLOCKS_ZH])
def test_chinese_solution_runs(number, code, capsys):
    exec(compile(code, f"solutions.zh.md#{number}", "exec"), {"__name__": f"solution_zh_{number}"})
    assert re.search(r"[\u4e00-\u9fff]", capsys.readouterr().out), "a Chinese solution prints its answer in Chinese"


@pytest.mark.parametrize("english,chinese", PAIRS, ids=[p[1].name for p in PAIRS])
def test_chinese_doc_keeps_the_english_structure_and_links_it(english, chinese):
    """The same number of `## ` sections in the same places, every code span of the English (a command, a
    shape, a name) also in the Chinese, prose in Chinese, and a link each way at the top."""
    en, zh = english.read_text(encoding="utf-8"), chinese.read_text(encoding="utf-8")
    assert len(sections(zh)) == len(sections(en)), f"{chinese.name}: {sections(zh)} against {sections(en)}"
    missing = sorted(span for span in code_spans(en) - code_spans(zh)
                     if not span.startswith("`notebooks/"))  # the Chinese names the twins in notebooks/zh/ instead
    assert not missing, f"{chinese.name} lacks the English's {missing}"
    assert len(re.findall(r"[\u4e00-\u9fff]", zh)) > len(re.findall(r"[\u4e00-\u9fff]", en)) + 500, \
        f"{chinese.name} is not written in Chinese"
    assert f"]({chinese.name})" in "\n".join(en.splitlines()[:5]), f"{english.name} links {chinese.name} at the top"
    assert f"]({english.name})" in "\n".join(zh.splitlines()[:5]), f"{chinese.name} links {english.name} at the top"


def test_chinese_readme_opens_the_chinese_edition():
    """README.zh.md's table links every twin in notebooks/zh/, and its commands are the English README's (run by
    tests/test_commands.py), so they work as written."""
    readme = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\((notebooks/zh/[^)\s]+\.ipynb)\)", readme)
    assert sorted(set(Path(n).name[:2] for n in linked)) == NOTEBOOKS, "a row for each notebook's twin"
    for link in re.findall(r"\]\(([^)\s#:]+)\)", readme):
        assert (ROOT / link).exists(), f"README.zh.md links {link}: no such file"

    def commands(text):
        blocks = re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, re.S | re.M)
        return {re.sub(r"\s+#.*$", "", line).strip() for block in blocks for line in block.splitlines()} - {""}

    english = commands((ROOT / "README.md").read_text(encoding="utf-8") + (DOCS / "teaching.md").read_text())
    assert commands(readme) and commands(readme) <= english, \
        f"README.zh.md commands the English docs do not run: {sorted(commands(readme) - english)}"

"""The one-page shape sheet, in English and in Chinese: each committed HTML is what the tool makes from the traced model
now (so neither can drift), holds the source articles' shapes, and Chromium prints it on one A4 landscape page."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import shape_sheet  # noqa: E402

CHROMIUM = os.environ.get("WALKTHROUGH_CHROMIUM", "/usr/bin/chromium")
# The shapes the source articles derive (docs/architecture.md's table), written out here as the independent reference.
ARTICLE_SHAPES = ["[32, 10]", "[32, 4]", "[32, 10, 512]", "[32, 10, 8, 64]", "[32, 8, 10, 64]", "[32, 8, 10, 10]",
                  "[32, 10, 2048]", "[32, 8, 4, 4]", "[4, 4]", "[32, 8, 4, 64]", "[32, 8, 4, 10]", "[32, 4, 512]",
                  "[32, 4, 30000]", "[128, 30000]"]


CHINESE = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module", params=["en", "zh"])
def language(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def sheet(language) -> str:
    return shape_sheet.sheet_html(language)


def test_the_committed_sheet_is_what_the_tool_makes_now(sheet, language):
    path = shape_sheet.HTML_PATHS[language]
    assert path.read_text(encoding="utf-8") == sheet, f"{path.name} is out of date: run `make sheet` and commit it"


def test_the_sheet_holds_every_shape_the_source_articles_derive_with_named_dims(sheet):
    cells = re.findall(r"<td class='shape'>(.*?)</td><td class='dims'>(.*?)</td>", sheet)
    shapes = {shape for shape, _ in cells}
    assert set(ARTICLE_SHAPES) <= shapes
    for shape, dims in cells:  # every shape has one named dim per size
        assert len(dims.split()) == shape.count(",") + 1, (shape, dims)
    for size in ("B = 32", "L_src = 10", "L_tgt = 4", "D = 512", "H = 8", "d_k = 64", "d_ff = 2048", "V = 30000",
                 "N = 6"):
        assert size in sheet


def test_the_sheet_runs_from_the_embedding_to_the_loss_in_the_models_order():
    sheet = shape_sheet.sheet_html("en")
    steps = re.findall(r"<tr><td>(.*?)</td>", sheet)
    assert steps[0] == "ids" and steps[1] == "embedding"
    assert steps[-3:] == ["labels", "logits flattened", "labels flattened"]
    headings = re.findall(r"<h2>(.*?) <small>", sheet)
    assert headings.index("encoder layer: self-attention") < headings.index("decoder layer: cross-attention") \
        < headings.index("loss")


def test_the_chinese_sheet_has_the_english_ones_rows_in_chinese_and_they_link_to_each_other():
    english, chinese = shape_sheet.sheet_html("en"), shape_sheet.sheet_html("zh")
    row = r"<tr><td>(.*?)</td><td class='shape'>(.*?)</td><td class='dims'>(.*?)</td><td class='meaning'>(.*?)</td>"
    en_rows, zh_rows = re.findall(row, english), re.findall(row, chinese)
    assert [r[1:3] for r in zh_rows] == [r[1:3] for r in en_rows]  # the same shapes and dims, in the same order
    assert CHINESE.search(re.search(r"<h1>(.*?)</h1>", chinese)[1])
    headings = re.findall(r"<h2>(.*?) <small>", chinese)
    assert len(headings) == len(re.findall(r"<h2>(.*?) <small>", english)) and all(map(CHINESE.search, headings))
    for en_row, zh_row in zip(en_rows, zh_rows):  # a meaning is Chinese wherever the English sheet has one
        assert (zh_row[3] == en_row[3] == "") or CHINESE.search(zh_row[3]), (en_row, zh_row)
    assert sum(bool(CHINESE.search(r[0])) for r in zh_rows) > len(zh_rows) // 2  # labels (formulas stay as they are)
    assert "href='shape-sheet.zh.html'" in english and "href='shape-sheet.html'" in chinese
    assert "<html lang='zh-CN'>" in chinese


def test_the_pdf_is_one_a4_landscape_page(tmp_path, sheet, language):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make browser` installs it, or set WALKTHROUGH_CHROMIUM")
    html = tmp_path / "sheet.html"
    html.write_text(sheet, encoding="utf-8")
    pdf = shape_sheet.print_pdf(html, tmp_path / "sheet.pdf", CHROMIUM)
    reader = PdfReader(pdf)
    assert len(reader.pages) == 1
    box = reader.pages[0].mediabox
    assert (round(float(box.width)), round(float(box.height))) == (842, 595)  # A4 landscape in points
    text = reader.pages[0].extract_text()
    assert "[32, 8, 4, 10]" in text and "[32, 4, 30000]" in text
    if language == "zh":  # drawn with a Chinese font: the characters are in the page, not boxes
        assert "编码器" in text and "词元" in text


def test_make_sheet_and_make_api_are_targets():
    dry = subprocess.run(["make", "-n", "sheet", "api"], cwd=REPO, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "tools/shape_sheet.py --pdf" in dry.stdout and "pdoc" in dry.stdout

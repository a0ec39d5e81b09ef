"""Chinese drawn as glyphs, not boxes, where a Chinese reader looks first: the static site's index (every title), the
H1 of every Chinese site page, the menu bar of `make lab-zh`, and Chinese typed there into an explorer's text box.

Chromium runs with a fontconfig set-up that lists no font able to draw Chinese (FONTCONFIG_FILE), so whatever this
machine has installed, the only font that can draw a Chinese character is the one the project ships (the classroom
stylesheet's @font-face). A canvas probe cannot tell a glyph from a box here: the canvas draws with the font it is
given, while the page may lay out the missing-glyph box of another font. So each character's laid-out width (a
Range over it, in the page; for the value of an <input>, which no Range reaches, the input's scrollWidth) is compared
with its glyph's advance in the shipped font file (read by fontTools): a box is about 0.6 em wide in the fallback
fonts, a Noto Sans CJK glyph 1 em.
"""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from fontTools.ttLib import TTFont
from playwright.sync_api import sync_playwright

from .test_browser import CHINESE_UI, CHROMIUM, NOTEBOOK_DIR, PATIENCE_MS, ROOT, SCREEN, Notebook, serve_lab

sys.path.insert(0, str(ROOT / "tools"))
import build_site  # from tools/, which is not a package
import install_lab_settings

# The CJK blocks a character of the series' Chinese comes from; a font covering any of them is left out of the
# browser's fontconfig, so that no system font can stand in for the shipped one.
HAN = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
TOLERANCE_EM = 0.05  # rounding of the layout; a glyph and a box differ by 0.4 em

# For every element the selector matches, each Han character's laid-out width and its element's font size.
LAID_OUT = """selector => {
    const found = [];
    for (const element of document.querySelectorAll(selector)) {
        const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const style = getComputedStyle(node.parentElement);
            for (let i = 0; i < node.data.length; i++) {
                if (!/[\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff]/.test(node.data[i])) continue;
                const range = document.createRange();
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                const box = range.getBoundingClientRect();
                if (!box.height) continue;  // not rendered (a folded panel, a closed menu)
                found.push({character: node.data[i], width: box.width,
                            size: parseFloat(style.fontSize), weight: style.fontWeight, tag: element.tagName,
                            text: element.textContent.trim().slice(0, 40)});
            }
        }
    }
    return found;
}"""


def covers_han(charset: str) -> bool:
    """Whether a fontconfig charset ("20-7e a0-17f 192 ...", hex) holds any Han character."""
    for span in charset.split():
        low, _, high = span.partition("-")
        start, end = int(low, 16), int(high or low, 16)
        if any(start <= last and end >= first for first, last in HAN):
            return True
    return False


@pytest.fixture(scope="module")
def no_chinese_fonts(tmp_path_factory) -> Path:
    """A fontconfig file listing this machine's fonts except every one that has a Han character."""
    folder = tmp_path_factory.mktemp("fontconfig")
    (folder / "fonts").mkdir()
    listed = subprocess.run(["fc-list", "--format", "%{file}\t%{charset}\n"], capture_output=True, text=True,
                            check=True).stdout
    for number, line in enumerate(listed.splitlines()):
        file, _, charset = line.partition("\t")
        if file and not covers_han(charset):
            (folder / "fonts" / f"{number}-{Path(file).name}").symlink_to(file)
    config = folder / "fonts.conf"
    config.write_text(
        "<?xml version='1.0'?>\n<!DOCTYPE fontconfig SYSTEM 'fonts.dtd'>\n<fontconfig>\n"
        f"  <dir>{folder / 'fonts'}</dir>\n  <cachedir>{folder / 'cache'}</cachedir>\n"
        "  <include ignore_missing='yes'>/etc/fonts/conf.d</include>\n</fontconfig>\n")  # the usual family aliases
    han = subprocess.run(["fc-list", ":charset=4e2d"], capture_output=True, text=True, check=True,
                         env={**os.environ, "FONTCONFIG_FILE": str(config)}).stdout
    assert not han.strip(), f"the fontconfig set-up still lists a font with 中: {han}"
    return config


@pytest.fixture(scope="module")
def glyph_browser(tmp_path_factory, no_chinese_fonts):
    """Chromium at 1366x768 that sees no font with Chinese in it."""
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")), executable_path=CHROMIUM, headless=True, viewport=SCREEN,
            env={**os.environ, "FONTCONFIG_FILE": str(no_chinese_fonts)},
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        context.set_default_timeout(PATIENCE_MS)
        yield context
        context.close()


@pytest.fixture(scope="module")
def advance():
    """A Han character's advance in the shipped font, in em (fontTools reads the font file's own metrics)."""
    font = TTFont(str(install_lab_settings.cjk_font()), lazy=True)
    cmap, metrics, em = font.getBestCmap(), font["hmtx"], font["head"].unitsPerEm
    return lambda character: metrics[cmap[ord(character)]][0] / em


def boxes(page, selector: str, advance) -> tuple[list[dict], list[dict]]:
    """(every Han character the selector's elements lay out, those whose width is not their glyph's advance),
    once the page's fonts have loaded."""
    page.evaluate("() => document.fonts.ready.then(() => true)")
    found = page.evaluate(LAID_OUT, selector)
    for character in found:
        character["em"] = round(character["width"] / character["size"], 3)
        character["glyph_em"] = advance(character["character"])
    return found, [c for c in found if abs(c["em"] - c["glyph_em"]) > TOLERANCE_EM]


def test_the_fallback_fonts_draw_boxes_so_the_check_can_fail(glyph_browser, advance):
    """The reference the other checks rely on: in this browser, Chinese in the fonts it has (no web font) is laid
    out as boxes of another width than the glyph's, so a page that does not use the shipped font fails."""
    page = glyph_browser.new_page()
    page.set_content("<p style='font-family:sans-serif;font-size:40px'>中文</p>"
                     "<p style='font-family:serif;font-size:40px'>标题</p>")
    found, wrong = boxes(page, "p", advance)
    page.close()
    assert len(found) == 4 and wrong == found, f"a font in the browser draws Chinese by itself: {found}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build_site.build(out)
    return out


def test_the_chinese_site_draws_its_titles_and_headings_with_the_shipped_font(glyph_browser, site, advance):
    """_site/zh/index.html: the title, every notebook's title in the list and the language link (and the English
    index's link to it); each Chinese page: its H1 (and the other headings), all drawn as glyphs."""
    page = glyph_browser.new_page()
    page.goto((site / "index.html").as_uri())  # the English index: only its link to the Chinese edition
    found, wrong = boxes(page, "nav", advance)
    assert len(found) == 3 and not wrong, f"_site/index.html: its link 中文版 lays out as {found}"
    page.goto((site / "zh" / "index.html").as_uri())
    found, wrong = boxes(page, "h1, ol a, nav", advance)
    titles = page.locator("ol a").count()
    titled = {c["text"] for c in found if c["tag"] == "A"}
    assert titles == len(list((site / "zh").glob("[0-9]*.html"))) == len(titled), f"Chinese in {titled}"
    assert not wrong, f"_site/zh/index.html lays out {len(wrong)} of {len(found)} Chinese characters as boxes: " \
                      f"{wrong[:5]}"
    for html in sorted((site / "zh").glob("[0-9]*.html")):
        page.goto(html.as_uri())
        found, wrong = boxes(page, ".jp-RenderedMarkdown :is(h1, h2, h3)", advance)
        assert any(c["tag"] == "H1" for c in found), f"_site/zh/{html.name}: its H1 has no Chinese"
        assert not wrong, f"_site/zh/{html.name}: {len(wrong)} of {len(found)} Chinese characters in its " \
                          f"headings are boxes: {wrong[:5]}"
    page.close()


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory):
    """JupyterLab as `make lab-zh` opens it: the interface in Chinese, this checkout's classroom extension."""
    yield from serve_lab(tmp_path_factory, locale="zh_CN")


def test_the_chinese_jupyterlab_draws_its_menu_bar_with_the_shipped_font(glyph_browser, lab_zh, advance, tmp_path):
    """`make lab-zh`: every title of the menu bar (文件, 编辑, ...) and of a menu it opens, and the notebook's title,
    drawn as glyphs once the shipped font has loaded, with no reload and no click first."""
    notebook = Notebook(glyph_browser, lab_zh, "zh/00_overview.ipynb", tmp_path, CHINESE_UI)
    found, wrong = boxes(notebook.page, "#jp-MainMenu .lm-MenuBar-item", advance)
    titles = notebook.page.locator("#jp-MainMenu .lm-MenuBar-item").count()
    notebook.check(titles >= 8 and len(found) >= 2 * titles, f"the menu bar shows {titles} titles: {found}")
    notebook.check(not wrong, f"the menu bar lays out {len(wrong)} of {len(found)} Chinese characters as boxes: "
                              f"{wrong}")
    notebook.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=CHINESE_UI["File"]).click()
    found, wrong = boxes(notebook.page, ".lm-Menu .lm-Menu-itemLabel", advance)
    notebook.check(len(found) > 20 and not wrong, f"the File menu lays out Chinese as boxes: {wrong}")
    notebook.page.keyboard.press("Escape")
    # The notebook's own title: a heading at weight 500, as the site's headings that drew boxes behind system-ui.
    found, wrong = boxes(notebook.page, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown h1", advance)
    notebook.check(len(found) >= 2 and not wrong, f"the notebook's H1 lays out Chinese as boxes: {wrong or found}")
    notebook.page.close()


# The text of an <input> is laid out inside the control, where no Range reaches. Squeezed to no width, the input
# scrolls: its scrollWidth is its padding plus its value's laid-out width, and the same input emptied is the padding.
TYPED_WIDTH = """input => {
    const typed = input.value, kept = input.style.cssText;
    input.style.cssText += ';flex:none;width:0;min-width:0';
    const full = input.scrollWidth;
    input.value = '';
    const padding = input.scrollWidth;
    input.value = typed;
    input.style.cssText = kept;
    return {typed, width: full - padding, size: parseFloat(getComputedStyle(input).fontSize),
            family: getComputedStyle(input).fontFamily};
}"""
def open_explorer(glyph_browser, lab_zh, name: str, explorer: str, shots: Path) -> Notebook:
    """A Chinese notebook with only its set-up cell (its first code cell) and the cell making ``explorer`` run, the
    saved outputs cleared first: the explorer shown is the kernel's, not the one saved in the notebook."""
    cells = nbformat.read(NOTEBOOK_DIR / name, as_version=4).cells
    code = [index for index, cell in enumerate(cells) if cell.cell_type == "code"]
    notebook = Notebook(glyph_browser, lab_zh, name, shots, CHINESE_UI)
    notebook.menu("Edit", "editmenu:clear-all")
    notebook.run_cells([code[0], next(i for i in code if f"widgets.{explorer}(" in cells[i].source)])
    return notebook


def test_chinese_typed_into_an_explorers_text_box_is_drawn_with_the_shipped_font(glyph_browser, lab_zh, advance,
                                                                                 tmp_path):
    """Issue 39: 早上好 typed on the keyboard into zh/17's sentence box (a widgets.Text, as 16's phrase box) is laid
    out as wide as its glyphs in the shipped font: a form control does not inherit the page's font, and the
    browser's own (Arial) drew boxes. Issue 44: a sentence of 30 characters shows whole in it."""
    notebook = open_explorer(glyph_browser, lab_zh, "zh/17_real_translation.ipynb", "real_translation_explorer",
                             tmp_path)
    phrase, box = "早上好", notebook.notebook.locator(".widget-text input").first
    box.click()
    notebook.page.keyboard.press("Control+a")
    notebook.page.keyboard.type(phrase)
    notebook.page.evaluate("() => document.fonts.ready.then(() => true)")
    typed = notebook.page.evaluate(TYPED_WIDTH, box.element_handle())
    em, glyphs_em = round(typed["width"] / typed["size"], 3), sum(advance(c) for c in phrase)
    notebook.check(typed["typed"] == phrase, f"the box holds {typed['typed']!r} after typing {phrase}")
    notebook.check(abs(em - glyphs_em) <= TOLERANCE_EM * len(phrase),
                   f"{phrase} in the box lays out {em} em wide, its glyphs {glyphs_em} em: boxes ({typed})")
    # Issue 44: a 30-character sentence shows whole at 1366x768 (the box was 162 px: the last nine characters).
    sentence = "虽然今天下了一整天的大雨，但是我们全班还是一起去公园散步了。"
    box.click()
    notebook.page.keyboard.press("Control+a")
    notebook.page.keyboard.type(sentence)
    hidden = notebook.page.evaluate("input => input.scrollWidth - input.clientWidth", box.element_handle())
    notebook.check(len(sentence) == 30 and hidden <= 0, f"a 30-character sentence overflows its box by {hidden} px")
    notebook.page.close()

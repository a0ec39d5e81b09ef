"""Every slide reads from the back of the room, measured in Chromium on the deck walk (tests/test_slides_fit.py),
not only in the source (tests/test_notebooks.py: test_every_slide_shows_its_code_whole, tests/test_figure_sizes.py):
at most MAX_CODE_LINES lines of code on a slide, no code line cut at its cell's right edge or the screen's, and no
figure text under viz.MIN_TEXT_PX as the figure is shown on the 1366 px screen.

A probe registered in SLIDE_PROBES measures each slide once it has stopped moving, on the walk that the fit check
also uses: no deck is run or walked twice for it.
"""

import base64
import io

import nbformat
import pytest
from PIL import Image

from tests.test_browser import NOTEBOOKS, SCREEN, browser_context, open_notebook, shown_text_px  # noqa: F401
from tests.test_notebooks import MAX_CODE_LINES
from tests.test_slides_fit import (  # noqa: F401 (browser_context, lab, kernels_shut_down, open_notebook: fixtures)
    SLIDE_PROBES,
    TWINS,
    kernels_shut_down,
    lab,
    put_notebook,
    walk_deck,
    walked,
)
from walkthrough.classroom import viz

# A code line is cut when its text ends past its editor's right edge or the screen's. A figure
# is kept as the head of its PNG (its pHYs chunk, read in Python), its natural width and its width on the screen.
READABLE = """() => {
    const cells = [...document.querySelectorAll('.jp-NotebookPanel.jp-Deck .jp-Cell.jp-deck-mod-visible')];
    const code = cells.filter(cell => cell.classList.contains('jp-CodeCell'));
    const lines = code.flatMap(cell => [...cell.querySelectorAll('.jp-InputArea .cm-line')]);
    const cut = lines.filter(line => {
        const text = document.createRange();
        text.selectNodeContents(line);
        const edge = Math.min(line.closest('.cm-scroller').getBoundingClientRect().right, window.innerWidth);
        return text.getBoundingClientRect().right > edge + 1;
    }).map(line => line.textContent.slice(0, 60));
    const images = cells.flatMap(cell => [...cell.querySelectorAll('.jp-RenderedImage img')])
        .filter(img => img.offsetParent)
        .map(img => ({src: img.src.slice(0, 512), natural: img.naturalWidth,
                      shown: img.getBoundingClientRect().width}));
    return {lines: lines.length, cut, images};
}"""
SLIDE_PROBES["readable"] = (READABLE, None)


def unreadable(slides: list[dict]) -> dict[str, list[str]]:
    """What the probe found on the walked ``slides``: slides with too many code lines, cut code lines, small text."""
    found = {"long": [], "cut": [], "small": []}
    for number, slide in enumerate(slides, start=1):
        seen, first = slide["probes"]["readable"], slide["shown"][0]["first"][:40]
        if seen["lines"] > MAX_CODE_LINES:
            found["long"].append(f"slide {number} ({first!r}): {seen['lines']} lines")
        found["cut"] += [f"slide {number}: {line!r}" for line in seen["cut"]]
        found["small"] += [f"slide {number} ({first!r}): {px} px" for px in map(shown_text_px, seen["images"])
                           if px < viz.MIN_TEXT_PX]
    return found


@pytest.mark.parametrize("name", NOTEBOOKS + TWINS)
def test_every_slide_reads_from_the_back_of_the_room(request, name):
    """Code whole and figure text large enough on every slide of the deck, as Chromium draws it at 1366x768."""
    def open_deck(deck: str):  # only if no test in this process has walked it yet: a JupyterLab for this file
        request.getfixturevalue("kernels_shut_down")
        return request.getfixturevalue("open_notebook")(deck)
    found = unreadable(walked(open_deck, name))
    assert not found["long"], f"{name}: more than {MAX_CODE_LINES} lines of code on a slide: {found['long']}"
    assert not found["cut"], f"{name}: a code line is cut at the right edge of a {SCREEN['width']} px screen: " \
                             f"{found['cut']}"
    assert not found["small"], f"{name}: figure text under {viz.MIN_TEXT_PX} px as shown on the screen: " \
                               f"{found['small']}"


def png(width: int, dpi: int) -> str:
    image = io.BytesIO()
    Image.new("RGB", (width, 40), "white").save(image, format="PNG", dpi=(dpi, dpi))
    return base64.b64encode(image.getvalue()).decode()


def test_the_probe_finds_long_cut_and_small(kernels_shut_down, lab, open_notebook):  # noqa: F811
    """The check above can fail: on a deck of four slides (not run: the committed output is shown), it finds 16
    lines of code, a line of 200 characters, and a 72-dpi figure 2,000 px wide shown at the slide's width; a
    figure at viz's own size and dpi passes."""
    def slide(cell):
        cell.metadata["slideshow"] = {"slide_type": "slide"}
        return cell
    figure = {name: slide(nbformat.v4.new_code_cell("figure")) for name in ("small", "viz")}
    figure["small"].outputs = [nbformat.v4.new_output("display_data", {"image/png": png(2000, 72)})]
    size = viz.SCREEN_DPI * viz.SCREEN_WIDTH_IN
    figure["viz"].outputs = [nbformat.v4.new_output("display_data", {"image/png": png(round(size), viz.SCREEN_DPI)})]
    cells = [slide(nbformat.v4.new_markdown_cell("# Probe")),
             slide(nbformat.v4.new_code_cell("\n".join(f"x = {i}" for i in range(16)))),
             slide(nbformat.v4.new_code_cell("x = '" + "a" * 200 + "'")), figure["small"], figure["viz"]]
    name = put_notebook(lab, "readable_probe_check.ipynb", cells)
    notebook = open_notebook(name)
    notebook.start_deck()
    found = unreadable(walk_deck(notebook, last=4))
    assert [line.split(":")[0] for line in found["long"]] == ["slide 2 ('x = 0')"]
    assert [line.split(":")[0] for line in found["cut"]] == ["slide 3"]
    assert [line.split(" (")[0] for line in found["small"]] == ["slide 4"]

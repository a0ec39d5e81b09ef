"""Every slide of every notebook fits a 1366x768 projector, in Deck mode, with the shipped classroom settings.

For each notebook, as a teacher runs it: Run All, start Deck mode (jupyterlab-slideshow), and walk the deck
with the → key from the first slide to the last. The walk must show every cell, in order (no sub-slide that
only another key reaches), and every slide must fit the screen: its cells, from the top of the first to the
bottom of the last, no taller than 768 px. On a slide with a slider the slider is moved one step and the
slide measured again, so the explorer's answer stays on the screen after it redraws.

An exception needs a reason, in the notebook's metadata (there should be very few):
    "walkthrough": {"tall_slides": {"<the slide's first line>": "<why it may be taller than the screen>"}}

Reuses the JupyterLab server, browser and notebook helpers of tests/test_browser.py.
"""

import json
import urllib.request

import nbformat
import pytest

from tests.test_browser import NOTEBOOK_DIR, NOTEBOOKS, SCREEN, TOKEN, browser_context, lab, open_notebook  # noqa: F401

NEXT_SLIDE = "ArrowRight"

FIRST_SHOWN = """() => [...document.querySelectorAll('.jp-NotebookPanel.jp-Deck .jp-Notebook .jp-Cell')]
    .findIndex(cell => cell.classList.contains('jp-deck-mod-visible'))"""
CELLS_ON_SCREEN = """() => {
    const cells = [...document.querySelectorAll('.jp-NotebookPanel.jp-Deck .jp-Notebook .jp-Cell')];
    const shown = cells.map((cell, index) => [cell, index]).filter(([cell]) =>
        cell.classList.contains('jp-deck-mod-visible'));
    return {count: cells.length, shown: shown.map(([cell, index]) => {
        const box = cell.getBoundingClientRect();
        return {index, top: box.top, bottom: box.bottom, first: cell.innerText.trim().split('\\n')[0]};
    })};
}"""


@pytest.fixture
def kernels_shut_down(lab):  # noqa: F811 (the fixture)
    """A closed tab leaves its kernel running: shut this test's kernels down, so eleven notebooks do not pile up."""
    yield
    api = f"{lab}/api/kernels"
    with urllib.request.urlopen(f"{api}?token={TOKEN}") as response:
        kernels = json.load(response)
    for kernel in kernels:
        urllib.request.urlopen(urllib.request.Request(f"{api}/{kernel['id']}?token={TOKEN}", method="DELETE"))


def allowed_tall_slides(name: str) -> dict:
    notebook = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    return notebook.metadata.get("walkthrough", {}).get("tall_slides", {})


def settle(notebook) -> dict:
    """The cells on screen once the slide has stopped moving (the deck fades a slide in; outputs redraw), or
    after 30 looks if something on it keeps moving."""
    notebook.page.wait_for_timeout(300)
    previous = None
    for _ in range(30):
        now = notebook.page.evaluate(CELLS_ON_SCREEN)
        if now == previous:
            break
        previous = now
        notebook.page.wait_for_timeout(300)
    return now


def height(slide: dict) -> float:
    return max(c["bottom"] for c in slide["shown"]) - min(c["top"] for c in slide["shown"])


def move_a_slider(notebook) -> bool:
    """Move the first slider on the slide one step to the right (to the left at its end); False if none."""
    handles = notebook.page.locator(".jp-Deck .jp-deck-mod-visible .widget-slider .noUi-handle")
    if not handles.count():
        return False
    handle = handles.first
    outputs = notebook.page.locator(".jp-Deck .jp-deck-mod-visible .widget-output")
    shown = outputs.all_inner_texts()
    before = handle.get_attribute("aria-valuenow")
    handle.focus()
    handle.press("ArrowRight")
    if handle.get_attribute("aria-valuenow") == before:
        handle.press("ArrowLeft")
    for _ in range(40):  # the kernel redraws the explorer (Deck mode hides the status bar's Idle)
        notebook.page.wait_for_timeout(500)
        if outputs.all_inner_texts() != shown:
            break
    return True


def first_shown(notebook) -> int:
    return notebook.page.evaluate(FIRST_SHOWN)


def press_until_the_slide_changes(notebook, key: str, shown: int) -> None:
    """Press ``key`` until the deck shows another slide. A key pressed while the deck is still fading the
    last slide in can be lost, so it is pressed again after a while; 20 presses that move nothing fail."""
    for _ in range(20):
        notebook.page.keyboard.press(key)
        for _ in range(10):
            notebook.page.wait_for_timeout(200)
            if first_shown(notebook) != shown:
                return
    notebook.check(False, f"{key} does not leave the slide that starts at cell {shown}")


def walk_deck(notebook) -> list[dict]:
    """Every slide from the first to the last by the → key: its cells and its height, before and after a
    slider moves (where it has one)."""
    while (shown := first_shown(notebook)) != 0:  # the deck opens at the active cell: after Run All, the last
        press_until_the_slide_changes(notebook, "ArrowLeft", shown)
    slides = []
    while True:
        slide = settle(notebook)
        notebook.check(bool(slide["shown"]), f"slide {len(slides) + 1} shows no cell")
        slide["height"] = height(slide)
        if move_a_slider(notebook):
            slide["height"] = max(slide["height"], height(settle(notebook)))
            # leave the slider (Escape would leave the deck): the keys belong to the deck again
            notebook.page.locator(".jp-Deck .jp-Cell.jp-deck-mod-visible").first.click(position={"x": 4, "y": 4})
        slides.append(slide)
        print(f"slide {len(slides)}: cells {[c['index'] for c in slide['shown']]}, {slide['height']:.0f} px",
              flush=True)
        if slide["shown"][-1]["index"] == slide["count"] - 1:
            return slides
        press_until_the_slide_changes(notebook, NEXT_SLIDE, slide["shown"][0]["index"])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_slide_fits_the_screen_and_one_key_walks_every_cell(kernels_shut_down, open_notebook, name):  # noqa: F811
    notebook = open_notebook(name)
    notebook.run_all()
    notebook.start_deck()
    slides = walk_deck(notebook)

    walked = [c["index"] for slide in slides for c in slide["shown"]]
    notebook.check(walked == list(range(slides[0]["count"])),
                   f"the → key does not show every cell once, in order: {walked}")
    allowed = allowed_tall_slides(name)
    too_tall = [f"slide {number} ({slide['shown'][0]['first'][:50]!r}) is {slide['height']:.0f} px"
                for number, slide in enumerate(slides, start=1)
                if slide["height"] > SCREEN["height"] and slide["shown"][0]["first"] not in allowed]
    print(f"{name}: {len(slides)} slides, heights {[round(s['height']) for s in slides]} px")
    notebook.check(not too_tall, f"taller than the {SCREEN['height']} px screen: {too_tall} (split the slide "
                                 f"with a `## ` heading, or give a reason in the notebook's metadata)")

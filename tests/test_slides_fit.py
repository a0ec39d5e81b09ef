"""Every slide of every notebook fits a 1366x768 projector, in Deck mode, with the shipped classroom settings.

For each notebook (and each Chinese twin in notebooks/zh/ that exists), as a teacher shows it: the saved outputs
(nbval checks them against a fresh run top to bottom) with the set-up and the widgets run live (`live_cells`: an
explorer or a shape question needs a kernel; a second run of the whole notebook here would only repeat nbval's;
and a fresh kernel that runs the set-up and then the widgets is the restart a class makes, so each widget works
after one), Deck mode (jupyterlab-slideshow) from the title, and the deck walked with PageDown, the key a
presentation clicker sends, from the first cell to the last. The walk must show every cell, in order, and every
slide must fit the
screen: its cells, from the top of the first to the bottom of the last, no taller than 768 px. Nor may a slide hide
output in a box a clicker cannot scroll (issue 39: a table in a 520 px scroll box hid its last rows): no element of
its outputs, rendered markdown or explorer outputs may keep content out of its box by overflow (CLIPPED). On a slide
with a slider the slider is moved one step and the slide measured again once the explorer has redrawn, so its
answer stays on the screen, whole, after a move.

Every wait is on a condition (the active cell has moved, the slide has stopped moving, the explorer's output has
changed) with a ceiling that fails with its own message: the walk cannot hang, and a slow machine only makes it
slower. An exception needs a reason, in the notebook's metadata (there should be very few):
    "walkthrough": {"tall_slides": {"<the slide's first line>": "<why it may be taller than the screen>"}}

Each deck is opened, run and walked once per test process, for every check that needs it (`walked`): the live
run's own checks and slide 1's (tests/test_browser.py: check_run_all, check_first_slide), the fit here, and whatever a
sibling file measures on each slide. Such a file (a slide-density check, say) registers, when it is imported, a
JavaScript probe in SLIDE_PROBES (evaluated on every slide once it has stopped moving, its result kept on the slide
under the probe's name) and any kernel start-up module in DECK_KERNEL_STARTUP, then calls `walked(open_notebook,
name)` from a test named `test_every_slide...` parametrized by the deck's name: under `pytest -n 2` an edition's
deck tests of every such file then run in one worker (tests/nbval_patience.py, unit), and whichever comes first walks.

Reuses the JupyterLab server, browser and notebook helpers of tests/test_browser.py.
"""

import json
import re
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.test_browser import (  # noqa: F401 (browser_context, open_notebook: fixtures)
    KEY_CEILING_MS,
    NOTEBOOK_DIR,
    NOTEBOOKS,
    SCREEN,
    TOKEN,
    browser_context,
    check_first_slide,
    check_run_all,
    deck_cells,
    open_notebook,
    serve_lab,
)

WALK_KEY = "PageDown"
TWINS = sorted(f"zh/{p.name}" for p in (NOTEBOOK_DIR / "zh").glob("*.ipynb"))  # the Chinese edition, as it grows
# Ceilings, not expectations (a key's is tests/test_browser.py's). A slider waits for the kernel to redraw the explorer.
REDRAW_CEILING_MS = 600_000
STILL_LOOKS = 3  # the slide has stopped moving when three looks 100 ms apart find every cell where it was
# What other files measure on the same walk (see the docstring): probe name -> (JavaScript function, its argument);
# and modules every deck kernel installs at start-up (a file with an install(), as tests/offline.py).
SLIDE_PROBES: dict[str, tuple[str, object]] = {}
DECK_KERNEL_STARTUP: list[Path] = []
WALKS: dict[str, list[dict]] = {}  # deck name -> its walked slides, in this test process

SLIDE = """() => {
    const cells = [...document.querySelectorAll('.jp-NotebookPanel.jp-Deck .jp-Notebook .jp-Cell')];
    const shown = [];
    cells.forEach((cell, index) => {
        if (!cell.classList.contains('jp-deck-mod-visible')) return;
        const box = cell.getBoundingClientRect();
        shown.push({index, top: box.top, bottom: box.bottom, first: cell.innerText.trim().split('\\n')[0]});
    });
    return {count: cells.length, active: cells.findIndex(cell => cell.classList.contains('jp-mod-active')), shown};
}"""
# True once the slide has looked the same STILL_LOOKS times in a row (the deck fades a slide in; outputs and
# figures lay themselves out; a moved slider's explorer redraws)
STILL = f"""still => {{
    const now = JSON.stringify(({SLIDE})());
    window.__walkStill = now === window.__walkLast ? (window.__walkStill || 0) + 1 : 0;
    window.__walkLast = now;
    return window.__walkStill >= still;
}}"""
SLIDE_OUTPUTS = """() => [...document.querySelectorAll('.jp-Deck .jp-deck-mod-visible .widget-output')]
    .map(o => o.innerText + [...o.querySelectorAll('img')].map(img => img.src.length + img.src.slice(-64)).join())
    .join('\\n---\\n')"""
SLIDER_HANDLE = ".jp-Deck .jp-deck-mod-visible .widget-slider .noUi-handle"
# Output a reader loses: an element of what the slide's cells show (outputs, rendered markdown and HTML, an
# explorer's output boxes) whose computed overflow (auto, scroll, hidden or clip) keeps content out of its box, by
# more than CLIP_SLACK_PX (sub-pixel rounding, a border). A clicker cannot scroll a box. Not looked at: the code
# editors (CodeMirror scrolls its own lines: tests/test_slides_readable.py checks that no code line is cut), a
# widget's controls (a slider's track, a label's ellipsis), and an element drawn at no size or not at all.
CLIP_SLACK_PX = 2
CLIPPED = """slack => {
    const cells = [...document.querySelectorAll('.jp-NotebookPanel.jp-Deck .jp-Notebook .jp-Cell')];
    const shown = '.jp-NotebookPanel.jp-Deck .jp-Cell.jp-deck-mod-visible';
    const content = ['.jp-Cell-outputWrapper', '.jp-MarkdownOutput'].map(part => `${shown} ${part}`).join(', ');
    const controls = '.cm-editor, .jp-InputArea, .widget-slider, .widget-hslider, .widget-vslider, .widget-label, '
        + '.widget-readout, .widget-dropdown, .widget-select, .widget-toggle-buttons, .widget-text, .widget-checkbox, '
        + '.widget-button, .noUi-target';
    const scrolls = value => ['auto', 'scroll', 'hidden', 'clip'].includes(value);
    const describe = element => {
        const table = element.matches('table') ? element : element.querySelector('table');
        const where = element.closest('.widget-output') ? "an explorer's output"
            : element.closest('.jp-MarkdownOutput') ? 'markdown' : 'an output';
        const text = (table || element).innerText.trim().split('\\n')[0].replace(/\\s+/g, ' ').slice(0, 50);
        return `${table ? 'table' : 'text'} ${JSON.stringify(text)} in ${where}`;
    };
    const found = [];
    for (const area of document.querySelectorAll(content)) {
        for (const element of [area, ...area.querySelectorAll('*')]) {
            if (element.closest(controls) || !element.checkVisibility({visibilityProperty: true})) continue;
            if (!element.clientWidth || !element.clientHeight) continue;
            const style = getComputedStyle(element);
            const hidden = {y: scrolls(style.overflowY) ? element.scrollHeight - element.clientHeight : 0,
                            x: scrolls(style.overflowX) ? element.scrollWidth - element.clientWidth : 0};
            if (hidden.y <= slack && hidden.x <= slack) continue;
            found.push({cell: cells.indexOf(element.closest('.jp-Cell')), what: describe(element),
                        box: [element.clientWidth, element.clientHeight],
                        content: [element.scrollWidth, element.scrollHeight],
                        hidden: [hidden.x > slack ? hidden.x : 0, hidden.y > slack ? hidden.y : 0]});
        }
    }
    return found;
}"""
SLIDE_PROBES["clipped"] = (CLIPPED, CLIP_SLACK_PX)
# A control whose own text is cut (a button's label ends in an ellipsis: 18's option buttons once read "Lay…",
# "Swi…"; 16's phrase box showed "早上好 good mornin"): any button, label or text box on the slide whose text is
# wider than its box.
CUT_LABELS = """slack => [...document.querySelectorAll('.jp-NotebookPanel.jp-Deck .jp-Cell.jp-deck-mod-visible '
                                                      + ':is(button, label, .widget-label, .widget-label-basic, '
                                                      + '.widget-text input)')]
    .filter(e => e.checkVisibility({visibilityProperty: true}) && e.clientWidth > 0
                 && e.scrollWidth - e.clientWidth > slack)
    .map(e => ({text: (e.matches('input') ? e.value : e.innerText).trim(), box: e.clientWidth,
                content: e.scrollWidth}))"""
SLIDE_PROBES["cut_labels"] = (CUT_LABELS, CLIP_SLACK_PX)


def allowed_tall_slides(name: str) -> dict:
    notebook = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    return notebook.metadata.get("walkthrough", {}).get("tall_slides", {})


def settled(notebook) -> dict:
    """The cells on screen once the slide has stopped moving."""
    notebook.page.evaluate("() => { window.__walkLast = null; window.__walkStill = 0; }")
    notebook.wait_until(STILL, "the slide never stopped moving", arg=STILL_LOOKS, ceiling_ms=KEY_CEILING_MS,
                        polling=100)
    return notebook.page.evaluate(SLIDE)


def height(slide: dict) -> float:
    return max(c["bottom"] for c in slide["shown"]) - min(c["top"] for c in slide["shown"])


def move_a_slider(notebook) -> bool:
    """Move the first slider on the slide one step (right, or left at its end) and wait until the explorer has
    redrawn; False if the slide has no slider. Focus then goes back to the deck, whose keys it needs."""
    handles = notebook.page.locator(SLIDER_HANDLE)
    if not handles.count():
        return False
    before = notebook.page.evaluate(SLIDE_OUTPUTS)
    handle = handles.first
    value = handle.get_attribute("aria-valuenow")
    handle.focus()
    handle.press("ArrowRight")
    if handle.get_attribute("aria-valuenow") == value:  # at its end: step the other way
        handle.press("ArrowLeft")
    notebook.wait_until(f"before => ({SLIDE_OUTPUTS})() !== before", "the explorer did not redraw after its "
                        "slider moved", arg=before, ceiling_ms=REDRAW_CEILING_MS, polling=200)
    notebook.page.evaluate("() => document.querySelector('.jp-Deck .jp-Cell.jp-mod-active').focus()")
    return True


def next_cell(notebook, active: int) -> int:
    """Press PageDown until another cell is active and shown (a key pressed while the deck is still busy can be
    lost, so after a quiet 10 s it is pressed again); the new active cell."""
    moved = (f"before => ({SLIDE})().active !== before && "
             "document.querySelector('.jp-Deck .jp-Cell.jp-mod-active.jp-deck-mod-visible') !== null")
    deadline = time.monotonic() + KEY_CEILING_MS / 1000
    while time.monotonic() < deadline:
        notebook.page.keyboard.press(WALK_KEY)
        try:
            notebook.page.wait_for_function(moved, arg=active, timeout=10_000, polling=50)
            return notebook.page.evaluate(SLIDE)["active"]
        except Exception:  # Playwright's timeout: press again, until the ceiling
            continue
    notebook.check(False, f"{WALK_KEY} did not move the deck from cell {active} in {KEY_CEILING_MS // 1000} s")


def walk_deck(notebook, last: int) -> list[dict]:
    """Every slide from the first cell to ``last``, by PageDown: its cells and its height (the larger of before
    and after a slider moved, where it has one)."""
    slides = []
    active = notebook.page.evaluate(SLIDE)["active"]
    while True:
        slide = settled(notebook)  # a new slide: measured once it has stopped moving
        notebook.check(bool(slide["shown"]), f"cell {active} is active but the deck shows no cell")
        slide["height"] = height(slide)
        slide["probes"] = {name: notebook.page.evaluate(script, arg) for name, (script, arg) in SLIDE_PROBES.items()}
        if move_a_slider(notebook):
            slide["height"] = max(slide["height"], height(settled(notebook)))
            slide["clipped_after_a_move"] = notebook.page.evaluate(CLIPPED, CLIP_SLACK_PX)
        slides.append(slide)
        while True:  # PageDown through this slide's cells to the next slide's first
            if active == last:
                return slides
            active = next_cell(notebook, active)
            if notebook.page.evaluate(SLIDE)["shown"][0]["index"] != slide["shown"][0]["index"]:
                break


def too_tall(slides: list[dict], allowed: dict) -> list[str]:
    return [f"slide {number} ({slide['shown'][0]['first'][:50]!r}) is {slide['height']:.0f} px"
            for number, slide in enumerate(slides, start=1)
            if slide["height"] > SCREEN["height"] and slide["shown"][0]["first"] not in allowed]


def clipped(slides: list[dict]) -> list[str]:
    """What the slides' boxes hide (the CLIPPED probe, on the settled slide and again after a slider moved)."""
    found = []
    for number, slide in enumerate(slides, start=1):
        seen = slide["probes"]["clipped"] + slide.get("clipped_after_a_move", [])
        for box in {json.dumps(box, sort_keys=True): box for box in seen}.values():
            axes = " and ".join(f"{hidden:.0f} px of {content:.0f} {axis}" for axis, hidden, content in
                                zip(("wide", "tall"), box["hidden"], box["content"]) if hidden)
            found.append(f"slide {number} ({slide['shown'][0]['first'][:50]!r}), cell {box['cell']}: the "
                         f"{box['what']} hides {axes} in its {box['box'][0]:.0f}x{box['box'][1]:.0f} px box")
    return found


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """tests/test_browser.py's JupyterLab, whose kernels also install what DECK_KERNEL_STARTUP lists."""
    yield from serve_lab(tmp_path_factory, kernel_startup=tuple(DECK_KERNEL_STARTUP))


@pytest.fixture
def kernels_shut_down(lab):
    """A closed tab leaves its kernel running: shut this test's kernels down, so the decks do not pile up."""
    yield
    api = f"{lab}/api/kernels"
    with urllib.request.urlopen(f"{api}?token={TOKEN}") as response:
        kernels = json.load(response)
    for kernel in kernels:
        urllib.request.urlopen(urllib.request.Request(f"{api}/{kernel['id']}?token={TOKEN}", method="DELETE"))


def walked(open_notebook, name: str) -> list[dict]:  # noqa: F811 (the fixture, passed on)
    """The deck ``name`` as a class meets it, once per test process: open it, run its live cells (``live_cells``:
    the set-up and the explorers; the rest show their saved outputs) and check them (check_run_all), Deck mode from
    the title (check_first_slide), then PageDown from the first cell to the last (walk_deck, SLIDE_PROBES on every
    slide); the slides. A walk that fails a check is not kept: the next test to ask walks again."""
    if name not in WALKS:
        notebook = open_notebook(name)
        notebook.run_live()
        check_run_all(notebook)
        notebook.start_deck()
        check_first_slide(notebook)
        slides = walk_deck(notebook, deck_cells(name)[-1])
        cells = nbformat.read(NOTEBOOK_DIR / name, as_version=4).cells
        first_code = next(i for i, cell in enumerate(cells) if cell.cell_type == "code")
        notebook.check(len(slides) > 1 and slides[1]["shown"][0]["index"] == first_code,
                       "slide 2 does not start with the set-up code (Deck mode shows no cell whose slide_type is "
                       "RISE's '-': tools/slide_metadata.py)")
        WALKS[name] = slides
    return WALKS[name]


def put_notebook(url: str, name: str, cells: list) -> str:
    """Save a notebook of ``cells`` beside the served notebooks, through JupyterLab's contents API; its name."""
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}  # no kernel dialog
    content = {"type": "notebook", "format": "json", "content": nbformat.v4.new_notebook(cells=cells, metadata=kernel)}
    request = urllib.request.Request(f"{url}/api/contents/notebooks/{name}?token={TOKEN}", method="PUT",
                                     headers={"Content-Type": "application/json"}, data=json.dumps(content).encode())
    urllib.request.urlopen(request).close()
    return name


@pytest.mark.parametrize("name", NOTEBOOKS + TWINS)
def test_every_slide_fits_the_screen_and_one_key_walks_every_cell(kernels_shut_down, open_notebook, name):  # noqa: F811
    started = time.monotonic()
    slides = walked(open_notebook, name)
    print(f"\n{name}: {len(slides)} slides, tallest {max(s['height'] for s in slides):.0f} px, heights "
          f"{[round(s['height']) for s in slides]} px, {time.monotonic() - started:.0f} s")
    walked_cells = [c["index"] for slide in slides for c in slide["shown"]]
    assert walked_cells == deck_cells(name), f"{name}: {WALK_KEY} does not show every cell once, in order: " \
                                             f"{walked_cells}"
    tall = too_tall(slides, allowed_tall_slides(name))
    assert not tall, f"{name}: taller than the {SCREEN['height']} px screen: {tall} (split the slide with a `## ` " \
                     f"heading, or give a reason in the notebook's metadata)"
    hidden = clipped(slides)
    assert not hidden, f"{name}: a slide hides output in a box a clicker cannot scroll: {hidden} (split the slide " \
                       f"with a `## ` heading, or show the rows that matter: wt.shape_table(..., within=, steps=), " \
                       f"wt.shape_map(..., highlight=))"
    cut = cut_labels(slides)
    assert not cut, f"{name}: a control's label is cut: {cut} (give it room: button_width for buttons, " \
                    f"widgets.TEXT_BOX_WIDTH for a text box)"


def cut_labels(slides: list[dict]) -> list[str]:
    return [f"slide {number}: {label['text']!r} shows {label['box']} of its {label['content']} px"
            for number, slide in enumerate(slides, start=1) for label in slide["probes"]["cut_labels"]]


def test_the_walk_finds_a_cut_button_label(kernels_shut_down, lab, open_notebook):  # noqa: F811
    """The cut-label check can fail: option buttons 40 px wide cut "LayerNorm" and "SwiGLU" (18's were 74 px for
    labels of 104-114 px), and a text box 80 px wide cuts the phrase in it (16's cut its default); buttons as wide
    as their labels, a short one, and a text box wide enough are not cut."""
    cells = [nbformat.v4.new_markdown_cell("# Cut"), nbformat.v4.new_code_cell(
        "import ipywidgets as widgets\n"
        "widgets.VBox([widgets.ToggleButtons(options=['LayerNorm', 'SwiGLU'], style={'button_width': '40px'}),\n"
        "              widgets.ToggleButtons(options=['LayerNorm', 'SwiGLU'], style={'button_width': 'auto'}),\n"
        "              widgets.ToggleButtons(options=['on'], style={'button_width': '70px'}),\n"
        "              widgets.Text(value='早上好 good morning', layout=widgets.Layout(width='80px')),\n"
        "              widgets.Text(value='早上好', layout=widgets.Layout(width='44em'))])")]
    for cell in cells:
        cell.metadata["slideshow"] = {"slide_type": "slide"}
    notebook = open_notebook(put_notebook(lab, "cut_label_check.ipynb", cells))
    notebook.run_all()
    notebook.start_deck()
    slides = walk_deck(notebook, last=1)
    cut = slides[1]["probes"]["cut_labels"]
    assert sorted(label["text"] for label in cut) == ["LayerNorm", "SwiGLU", "早上好 good morning"], cut
    assert all(label["box"] < label["content"] for label in cut) and cut_labels(slides[:1]) == []


def test_the_walk_finds_a_slide_taller_than_the_screen(kernels_shut_down, lab, open_notebook):  # noqa: F811
    """The check above can fail: a deck whose second slide is a long list is measured taller than the screen,
    unless the notebook's metadata gives a reason."""
    lines = "\n".join(f"- line {i}" for i in range(60))
    cells = [nbformat.v4.new_markdown_cell("# Short"), nbformat.v4.new_markdown_cell(f"## Long\n\n{lines}"),
             nbformat.v4.new_markdown_cell("## Short again")]
    for cell in cells:
        cell.metadata["slideshow"] = {"slide_type": "slide"}
    notebook = open_notebook(put_notebook(lab, "tall_slide_check.ipynb", cells))
    notebook.start_deck()
    slides = walk_deck(notebook, last=2)
    assert [[c["index"] for c in s["shown"]] for s in slides] == [[0], [1], [2]]
    assert slides[1]["height"] > SCREEN["height"] >= max(slides[0]["height"], slides[2]["height"])
    assert too_tall(slides, {}) == [f"slide 2 ('Long') is {slides[1]['height']:.0f} px"]
    assert too_tall(slides, {"Long": "a reason"}) == []



OLD_TABLE_BOX = ".jp-Deck .jp-OutputArea-output:has(> table) { max-height: 520px; overflow: auto; }"


def test_the_walk_finds_output_hidden_in_a_box(kernels_shut_down, lab, open_notebook):  # noqa: F811
    """The clip check above can fail: on a deck that has run, it finds a 40-row table in the 520 px box the classroom
    CSS once gave a table on a slide (issue 39), a line cut by a box that hides its overflow, and an explorer's output
    that outgrows its scrolling box once its slider moves; not a long code line (its editor scrolls), the slider
    itself, a box its content fits, or a box that is not drawn."""
    def as_slide(cell):
        cell.metadata["slideshow"] = {"slide_type": "slide"}
        return cell
    code = nbformat.v4.new_code_cell
    cells = [as_slide(nbformat.v4.new_markdown_cell("# Clipped")),
             as_slide(code("from IPython.display import HTML\n"
                           "HTML('<table>' + ''.join(f'<tr><td>row {i}</td></tr>' for i in range(40)) + '</table>')")),
             as_slide(code("HTML(\"<div style='width:300px;overflow:hidden;white-space:nowrap'>\" + 'wide ' * 100 + "
                           "'</div>')")),
             as_slide(code("import ipywidgets as widgets\n"
                           "out = widgets.Output(layout=widgets.Layout(max_height='120px', overflow='auto'))\n"
                           "out.append_stdout('a short answer\\n')\n"
                           "n = widgets.IntSlider(description='n', continuous_update=False)\n"
                           "n.observe(lambda change: out.append_stdout('a longer one\\n' * 30), names='value')\n"
                           "widgets.VBox([n, out])")),
             as_slide(code(f"long = {'x' * 150!r}\n"
                           "HTML(\"<div style='height:60px;overflow:hidden'>fits</div>\"\n"
                           "     \"<div style='display:none;height:5px;overflow:auto'>\" + 'not drawn ' * 100 "
                           "+ '</div>')"))]
    notebook = open_notebook(put_notebook(lab, "clipped_output_check.ipynb", cells))
    notebook.page.add_style_tag(content=OLD_TABLE_BOX)
    notebook.run_all()
    notebook.start_deck()
    slides = walk_deck(notebook, last=4)
    assert [[c["index"] for c in s["shown"]] for s in slides] == [[0], [1], [2], [3], [4]]
    table, wide, grown = [slide["probes"]["clipped"] + slide.get("clipped_after_a_move", []) for slide in slides[1:4]]
    assert [(box["what"], box["box"][1]) for box in table] == [('table "row 0" in an output', 520)]
    assert table[0]["hidden"][0] == 0 and table[0]["hidden"][1] > 500
    assert [(box["what"].split('"')[0], box["box"][0]) for box in wide] == [("text ", 300)]
    assert wide[0]["hidden"][0] > 1000 and wide[0]["hidden"][1] == 0
    assert not slides[3]["probes"]["clipped"], "the short answer fits its box"
    assert [(box["what"], box["box"][1]) for box in grown] == [('text "a short answer" in an explorer\'s output', 120)]
    assert not slides[4]["probes"]["clipped"] and not slides[0]["probes"]["clipped"]
    messages = clipped(slides)
    assert [re.match(r"slide (\d+) \(.*\), cell (\d+): the ", m).groups() for m in messages] == [
        ("2", "1"), ("3", "2"), ("4", "3")], messages
    assert " tall in its 1205x520 px box" in messages[0], messages[0]

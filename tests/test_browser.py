"""The series as a class sees it: JupyterLab in headless Chromium on a 1366x768 screen, Run All, sliders,
Deck mode (slides), the shipped classroom settings and the Chinese font.

Serves a temporary copy of notebooks/ (the committed ones are never rewritten) with an empty user-settings
folder, so what the page shows comes from the settings this checkout ships (jupyterlab-settings/), installed into a
throwaway prefix as `make setup` installs them into the environment.
Waits are on conditions (Run All ends when no cell is queued; a slider's output has changed; a key has moved
the deck), never on time, with generous ceilings: on a shared, loaded machine a slow run is not a failure.
A wait that reaches its ceiling fails with its own message, and a failing check leaves a screenshot.
"""

import ast
import base64
import gettext
import inspect
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager
from matplotlib.figure import Figure
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from walkthrough import i18n
from walkthrough.classroom import viz

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import install_lab_settings  # from tools/, which is not a package

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
NOTEBOOKS_READ = ("checkpoints", "results")  # folders beside notebooks/ that the notebooks read (07 and 11)
CHROMIUM = os.environ.get("WALKTHROUGH_CHROMIUM", "/usr/bin/chromium")
TOKEN = "walkthrough-browser-test"
SCREEN = {"width": 1366, "height": 768}  # a classroom projector, a student's laptop
# Ceilings, not expectations: a kernel on a loaded 2-core machine can take minutes. Run All has none at all.
PATIENCE_MS = 600_000
# A key moves the deck in the page alone (no kernel), but a browser starved of CPU on a loaded machine once took over
# a minute: five are generous.
KEY_CEILING_MS = 300_000
RUN_ALL_CEILING_MS = 3_600_000  # 07 trained for 5 minutes on a loaded machine: an hour means a cell that never ends
CLASSROOM_CSS = ROOT / "jupyterlab-settings" / "classroom" / "static" / "classroom.css"
DECK_KEY = "Alt+r"
PRESENTING = "() => document.body.dataset.jpDeckMode === 'presenting'"
NOT_PRESENTING = "() => document.body.dataset.jpDeckMode !== 'presenting'"
PROJECTOR_PX = 17  # code, outputs, tables, widget labels: readable from the back of a room
FIGURE_TEXT_PX = 12  # the smallest text in a figure, as displayed on the 1366 px wide screen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a copy of the notebooks; yields its base URL."""
    yield from serve_lab(tmp_path_factory)


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory):
    """The same, with JupyterLab's own interface in Chinese, as `make lab-zh` sets it (its settings folder says
    zh_CN; the zh-CN language pack is installed by `make setup`)."""
    yield from serve_lab(tmp_path_factory, locale="zh_CN")


def serve_lab(tmp_path_factory, locale: str | None = None, kernel_startup: tuple[Path, ...] = ()):
    """Serve a copy of the notebooks. ``kernel_startup``: modules (each a file with an ``install()``) that every kernel
    the server starts imports and installs, after what every test kernel runs (tests/conftest.py's network guard)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium when run as root; "
                    f"otherwise install it or set WALKTHROUGH_CHROMIUM to its path")
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(NOTEBOOK_DIR, root / "notebooks")
    for folder in NOTEBOOKS_READ:  # as in the repository: notebook 07 loads ../checkpoints/numerals.pt
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, root / folder)
    (root / "settings").mkdir()  # no user settings: the shipped defaults apply
    if locale:
        install_lab_settings.write_locale(root / "settings", locale)
    # This checkout's defaults and extension, not the environment's copy (which may be another branch's): JupyterLab
    # takes the first extension of a name on JUPYTER_PATH, and the defaults from its app settings folder.
    prefix = root / "prefix"
    app_settings = install_lab_settings.install_overrides(prefix).parents[1]
    install_lab_settings.install_font_extension(prefix)
    ipython = Path(os.environ["IPYTHONDIR"])
    if kernel_startup:
        ipython = shutil.copytree(ipython, root / "ipython")
        for number, path in enumerate(kernel_startup, start=50):
            (ipython / "profile_default" / "startup" / f"{number}_{path.stem}.py").write_text(
                f"import sys\nsys.path.insert(0, {str(path.parent)!r})\nimport {path.stem}\n{path.stem}.install()\n")
    port = free_port()
    env = {**os.environ, "IPYTHONDIR": str(ipython), "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"),
           "JUPYTER_PATH": str(prefix / "share" / "jupyter"), "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"),
           "JUPYTER_CONFIG_DIR": str(root / "config")}
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", "--allow-root", f"--ServerApp.root_dir={root}",
         f"--LabApp.app_settings_dir={app_settings}",
         "--LabApp.expose_app_in_browser=True"],  # window.jupyterapp: wait on `restored`, not on time
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PATIENCE_MS / 1000
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start; see {root / 'server.log'}")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")), executable_path=CHROMIUM, headless=True, viewport=SCREEN,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        context.set_default_timeout(PATIENCE_MS)
        yield context
        context.close()


def cell_names(source: str) -> tuple[set[str], set[str]]:
    """The names a cell's code reads and the names it binds (its magics turned into Python first)."""
    read, bound = set(), set()
    for node in ast.walk(ast.parse(TransformerManager().transform_cell(source))):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return read, bound


def live_cells(name: str) -> list[int]:
    """The cells to run on a live kernel: the set-up (the first code cell), every cell that shows a widget (an
    explorer, a shape question: its saved output draws nothing without the kernel) and, for each of these, the
    latest earlier code cell binding a name it reads, and so on back. Every other cell shows its saved output,
    which nbval has checked against a run top to bottom: what a browser test needs of a notebook's kernel, without
    running it all a second time."""
    cells = nbformat.read(NOTEBOOK_DIR / name, as_version=4).cells
    code = [i for i, cell in enumerate(cells) if cell.cell_type == "code"]
    names = {i: cell_names(cells[i].source) for i in code}
    live = {code[0]} | {i for i in code if any(WIDGET_VIEW in output.get("data", {}) for output in cells[i].outputs)}
    todo = sorted(live)
    while todo:
        cell = todo.pop()
        for name_read in names[cell][0]:
            source = next((i for i in reversed(code) if i < cell and name_read in names[i][1]), None)
            if source is not None and source not in live:
                live.add(source)
                todo.append(source)
    return sorted(live)


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RUN_CELLS = """async cells => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    for (const index of cells) {
        notebook.activeCellIndex = index;
        await window.jupyterapp.commands.execute('notebook:run-cell');
    }
}"""


class Notebook:
    """One notebook open in JupyterLab, with the few actions a student or a teacher takes. ``words``: the interface's
    words (menu names, the kernel's "Idle") in its language, for the English ones."""

    def __init__(self, context, url: str, name: str, shots: Path, words: dict | None = None):
        self.page = context.new_page()
        self.url = url
        self.name = name
        self.shots = shots
        self.words = words or {}
        self.open()

    def open(self) -> None:
        self.page.goto(f"{self.url}/lab/tree/notebooks/{self.name}?reset&token={TOKEN}")  # reset: only this one
        self.notebook = self.page.locator(".jp-NotebookPanel:visible .jp-Notebook")
        self.notebook.locator(".jp-Cell").first.wait_for()
        self.page.wait_for_function("() => window.jupyterapp.restored.then(() => true)")
        self.wait_idle()

    def screenshot(self, label: str = "") -> Path:
        path = self.shots / f"{self.name}{label}.png"
        self.page.screenshot(path=str(path))
        return path

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            pytest.fail(f"{self.name}: {message} (screenshot: {self.screenshot()})")

    def wait_until(self, condition: str, message: str, arg=None, ceiling_ms: int = PATIENCE_MS,
                   polling: str | int = "raf"):
        """Wait for a JavaScript condition; at the (generous) ceiling, fail with ``message``, not a timeout."""
        try:
            return self.page.wait_for_function(condition, arg=arg, timeout=ceiling_ms, polling=polling).json_value()
        except PlaywrightTimeout:
            self.check(False, f"{message} (waited {ceiling_ms // 1000} s)")

    def wait_idle(self) -> None:
        status = "() => document.querySelector('#jp-main-statusbar')?.textContent || ''"
        try:
            self.page.wait_for_function(f"idle => ({status})().includes(idle)", arg=self.words.get("Idle", "Idle"))
        except PlaywrightTimeout:
            self.check(False, f"the kernel never became idle; the status bar says {self.page.evaluate(status)!r}")

    def menu(self, menu: str, command: str) -> None:
        self.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=self.words.get(menu, menu)).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def run_all(self) -> None:
        """Clear, Run All, and wait until no cell is queued or running (up to an hour: a ceiling, so a cell that
        never ends fails the test rather than hanging it)."""
        self.menu("Edit", "editmenu:clear-all")
        self.menu("Run", "runmenu:run-all")
        self.page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('[*]'))"
            " || document.querySelectorAll('.jp-OutputArea-output').length > 0")
        self.wait_until("() => ![...document.querySelectorAll('.jp-InputPrompt')]"
                        ".some(p => p.textContent.includes('[*]'))",
                        "Run All did not finish", ceiling_ms=RUN_ALL_CEILING_MS, polling=500)
        self.wait_idle()

    def run_cells(self, cells: list[int]) -> None:
        """Run these cells, in this order, on the notebook's kernel (the others keep their saved outputs), and
        wait until none is queued or running."""
        self.page.evaluate(RUN_CELLS, cells)
        self.wait_until("() => ![...document.querySelectorAll('.jp-InputPrompt')]"
                        ".some(p => p.textContent.includes('[*]'))",
                        "the cells did not finish", ceiling_ms=RUN_ALL_CEILING_MS, polling=500)
        self.wait_idle()

    def run_live(self) -> None:
        """Run the notebook's ``live_cells`` (its set-up, its widgets and what they read) and wait until every widget
        is drawn: a view renders after its cell has finished."""
        self.run_cells(live_cells(self.name))
        self.wait_until(f"() => [...document.querySelectorAll(`.jp-OutputArea-output[data-mime-type='{WIDGET_VIEW}']`)]"
                        ".every(output => output.querySelector('.jupyter-widgets'))", "a widget was not drawn")

    def text(self) -> str:
        return self.notebook.inner_text()

    def slider(self, name: str):
        return self.notebook.locator(".widget-slider:visible", has=self.page.locator("label", has_text=name)).first

    def widget_outputs(self) -> str:
        return self.page.evaluate(WIDGET_OUTPUTS)

    def set_slider(self, name: str, value: int) -> str:
        """Type ``value`` into the slider's readout; returns the explorer's output once it has redrawn."""
        before = self.widget_outputs()
        readout = self.slider(name).locator(".widget-readout")
        readout.fill(str(value))
        readout.press("Enter")
        return self.wait_until(f"before => {{ const now = ({WIDGET_OUTPUTS})(); return now !== before && now; }}",
                               f"the output did not change after {name} = {value}", arg=before)

    def explorer_output(self) -> str:
        """The explorers' output once they have drawn something (they draw when their cell runs)."""
        return self.wait_until(f"() => ({WIDGET_OUTPUTS})().trim()", "no explorer drew its output")

    def start_deck(self, from_title: bool = True) -> None:
        """Deck mode by its key from the title cell, as docs/teaching.md says (or from the active cell)."""
        if from_title:
            self.notebook.locator(".jp-Cell").first.click()
        self.page.evaluate("() => document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active').focus()")
        self.page.keyboard.press("Escape")  # command mode: the key belongs to the notebook, not an editor
        self.page.keyboard.press(DECK_KEY)
        self.wait_until(f"() => ({PRESENTING})() && document.querySelector("
                        "'.jp-NotebookPanel.jp-Deck .jp-Cell.jp-mod-active.jp-deck-mod-visible')",
                        "Deck mode did not start (or shows no active cell)")

    def stop_deck(self) -> None:
        if self.page.evaluate(PRESENTING):
            self.page.keyboard.press(DECK_KEY)
            self.wait_until(NOT_PRESENTING, "Alt+R did not leave Deck mode")

    def active_cell(self) -> int:
        return self.page.evaluate(ACTIVE_CELL)

    def press(self, key: str) -> int:
        """Press a deck key; returns the active cell's index once it has moved."""
        before = self.active_cell()
        self.page.keyboard.press(key)
        moved = f"before => {{ const now = ({ACTIVE_CELL})(); return now !== before && now + 1; }}"
        try:
            return self.page.wait_for_function(moved, arg=before, timeout=KEY_CEILING_MS).json_value() - 1
        except PlaywrightTimeout:
            self.check(False, f"{key} did not move the deck from cell {before} in {KEY_CEILING_MS // 1000} s; the "
                              f"focus is on {self.page.evaluate(FOCUSED)}")

    def walk_to_slider(self, name: str):
        """In Deck mode, the clicker's PageDown until a slide shows slider ``name`` (its label on screen); checks it
        is shown whole on the screen and returns it."""
        on_slide = self.page.locator(".jp-Deck .jp-deck-mod-visible .widget-slider",
                                     has=self.page.locator("label", has_text=name))
        last = deck_cells(self.name)[-1]
        while not on_slide.count() and self.active_cell() != last:
            self.press("PageDown")
        self.check(on_slide.count() == 1, f"no slide shows the {name} slider")
        on_slide.wait_for()  # shown once the deck has faded the slide in
        box = on_slide.bounding_box()
        self.check(0 <= box["y"] and box["y"] + box["height"] <= SCREEN["height"],
                   f"the {name} slider is off the slide")
        return on_slide

    def slide_cells(self) -> list[dict]:
        """The cells Deck mode shows now, with where they sit on the screen."""
        return self.page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel.jp-Deck .jp-Cell.jp-deck-mod-visible')].map(cell => {
              const box = cell.getBoundingClientRect();
              return {top: box.top, bottom: box.bottom, text: cell.innerText.slice(0, 80)};
            })""")


WIDGET_OUTPUTS = ("() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .widget-output')]"
                  ".filter(o => o.offsetParent).map(o => o.innerText).join('\\n---\\n')")
FOCUSED = ("() => { const e = document.activeElement; if (!e) return 'nothing';"
           " return `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`"
           " + (e.closest('.jp-Notebook') ? ' (in the notebook)' : ' (outside the notebook)'); }")
WIDGET_FIGURES = ("() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .widget-output img')]"
                  ".filter(i => i.offsetParent).map(i => i.src).join(' ')")  # the explorers' figures, as drawn
ACTIVE_CELL = ("() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')]"
               ".findIndex(cell => cell.classList.contains('jp-mod-active'))")


def notebooks_opened(url: str, browser_context, tmp_path, words: dict | None = None):
    opened = []

    def _open(name):
        notebook = Notebook(browser_context, url, name, tmp_path, words)
        opened.append(notebook)
        return notebook
    yield _open
    for notebook in opened:
        notebook.stop_deck()  # Deck mode is remembered in the settings: leave it off for the next test
        notebook.page.close()


@pytest.fixture
def open_notebook(lab, browser_context, tmp_path):
    yield from notebooks_opened(lab, browser_context, tmp_path)


CHINESE_UI = {"File": "文件", "Edit": "编辑", "Run": "运行", "Idle": "空闲"}  # the zh-CN language pack's words


@pytest.fixture
def open_notebook_zh(lab_zh, browser_context, tmp_path):
    yield from notebooks_opened(lab_zh, browser_context, tmp_path, CHINESE_UI)


def figure_text_sizes(notebook) -> list[dict]:
    """For every figure shown: the smallest text the package draws (viz.MIN_FONT_PT at the PNG's own dpi,
    read from its pHYs chunk) in screen pixels, as the browser scales the image to fit the output area."""
    images = notebook.page.evaluate("""() => [...document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedImage img')].filter(img => img.offsetParent).map(
        img => ({src: img.src, natural: img.naturalWidth, shown: img.getBoundingClientRect().width}))""")
    return [{"px": shown_text_px(image), "width": image["natural"], "shown": round(image["shown"])}
            for image in images]


def shown_text_px(image: dict) -> float:
    """The smallest text the package draws in a figure (viz.MIN_FONT_PT at the dpi of the PNG's pHYs chunk), in
    screen pixels as the image is shown. ``image``: ``src``, a data URL (its first 512 characters are enough),
    ``natural`` and ``shown``, its width in the PNG and on the screen."""
    head = image["src"].split(",", 1)[1]
    png = base64.b64decode(head[:len(head) // 4 * 4])
    at = png.find(b"pHYs")
    dpi = int.from_bytes(png[at + 4:at + 8], "big") * 0.0254 if at > 0 else 72.0  # no pHYs: browsers use 72
    return round(viz.MIN_FONT_PT * dpi / 72 * image["shown"] / image["natural"], 1)


# The shown notebook and slide 1 of every deck (both editions) are checked on the deck walk's own run, which opens
# each notebook once for all its browser checks, its set-up and explorers run live (tests/test_slides_fit.py, `walked`).
def check_run_all(notebook) -> None:
    """The notebook as shown: no traceback or error, a widget and a figure drawn, figure text readable on the
    screen."""
    text = notebook.text()
    notebook.check("Traceback" not in text, "a cell printed a traceback")
    notebook.check(notebook.notebook.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                   .filter(has_text="Error").count() == 0, "a cell shows an error")
    notebook.check(notebook.notebook.locator(".widget-slider, .widget-text").count() > 0, "no widget rendered")
    notebook.check(notebook.notebook.locator(".jp-RenderedImage img").count() > 0, "no figure rendered")
    small = [size for size in figure_text_sizes(notebook) if size["px"] < FIGURE_TEXT_PX]
    notebook.check(not small, f"figure text under {FIGURE_TEXT_PX} px on a {SCREEN['width']} px screen: {small} "
                              f"(size figures with walkthrough.classroom.viz: SCREEN_DPI, SCREEN_WIDTH_IN)")


def check_first_slide(notebook) -> None:
    """Deck mode's slide 1 (the title and its introduction) is whole on a 1366x768 screen and holds no code (the
    deck walk then finds the set-up code starting slide 2)."""
    cells = notebook.slide_cells()
    notebook.check(bool(cells), "Deck mode shows no cell")
    notebook.check(all(cell["top"] >= 0 and cell["bottom"] <= SCREEN["height"] for cell in cells),
                   f"slide 1 is cut off: its cells span {[(round(c['top']), round(c['bottom'])) for c in cells]} "
                   f"on a screen {SCREEN['height']} px high")
    notebook.check(notebook.page.locator(".jp-Deck .jp-CodeCell.jp-deck-mod-visible").count() == 0,
                   "slide 1 holds code: the set-up cell should start slide 2 (tools/slide_metadata.py)")


def deck_cells(name: str) -> list[int]:
    """The cells a deck shows, in order: all but those marked "skip" or "notes"."""
    cells = nbformat.read(NOTEBOOK_DIR / name, as_version=4).cells
    return [i for i, cell in enumerate(cells)
            if cell.metadata.get("slideshow", {}).get("slide_type") not in ("skip", "notes")]


def test_the_clickers_page_down_walks_every_cell_of_the_deck_in_order(open_notebook):
    """A presentation clicker sends PageDown and PageUp: from the first slide of 08, PageDown alone shows every
    slide and every cell on it, in order (sub-slides included, if any); PageUp, ← and → step too."""
    name = "08_kv_cache.ipynb"
    notebook = open_notebook(name)
    notebook.start_deck()
    expected = deck_cells(name)
    walked = [notebook.active_cell()]
    while len(walked) < len(expected):
        walked.append(notebook.press("PageDown"))
        notebook.check(walked == expected[:len(walked)], f"PageDown walked {walked}, not {expected[:len(walked)]}")
        notebook.check(notebook.page.locator(".jp-Deck .jp-Cell.jp-mod-active.jp-deck-mod-visible").count() == 1,
                       f"PageDown made cell {walked[-1]} active but the deck does not show it")
    notebook.check(notebook.press("PageUp") == expected[-2], "PageUp did not step back one cell")
    notebook.check(notebook.press("ArrowLeft") == expected[-3], "← did not step back one cell")
    notebook.check(notebook.press("ArrowRight") == expected[-2], "→ did not step on one cell")


def slide_starts(name: str) -> list[int]:
    """The first cell of each slide (and sub-slide) the deck shows."""
    cells = nbformat.read(NOTEBOOK_DIR / name, as_version=4).cells
    return [i for i in deck_cells(name)
            if i == 0 or cells[i].metadata.get("slideshow", {}).get("slide_type") in ("slide", "subslide")]


def test_down_and_up_skip_to_the_next_and_previous_slide(open_notebook):
    """One press per cell lets Shift+Enter run a slide cell by cell; a teacher who is late skips with ↓ (the next
    slide's first cell, from anywhere on a slide) and ↑ (back a slide), as docs/teaching.md says."""
    name = "08_kv_cache.ipynb"
    notebook = open_notebook(name)
    notebook.start_deck()
    starts = slide_starts(name)
    shown = ".jp-Deck .jp-Cell.jp-mod-active.jp-deck-mod-visible"
    for start in starts[1:4]:
        notebook.check(notebook.press("ArrowDown") == start, f"↓ did not go to the next slide, at cell {start}")
        notebook.check(notebook.page.locator(shown).count() == 1, f"↓ made cell {start} active but not shown")
    notebook.press("PageDown")  # inside the slide: ↓ still goes to the next slide's start, not the next cell
    notebook.check(notebook.press("ArrowDown") == starts[4], f"↓ from inside a slide did not reach cell {starts[4]}")
    notebook.check(notebook.press("ArrowUp") == starts[3], f"↑ did not go back to the slide at cell {starts[3]}")
    notebook.check(notebook.page.locator(shown).count() == 1, f"↑ made cell {starts[3]} active but not shown")
    notebook.check(notebook.press("PageDown") == starts[3] + 1, "PageDown after a skip did not walk on one cell")


def test_leaving_the_deck_works_from_a_widgets_text_box(open_notebook):
    """Alt+R and Esc leave Deck mode even while the cursor is in a widget's text box (a predict-the-shape
    answer), where JupyterLab ignores its own shortcuts."""
    notebook = open_notebook("01_embedding_positional_encoding.ipynb")
    notebook.run_live()
    notebook.wait_until("() => document.querySelector('.widget-text input')", "no predict-the-shape box rendered")
    box = notebook.notebook.locator(".widget-text input").first
    box.click()  # makes the question's cell the active one: the deck starts on its slide
    for key in (DECK_KEY, "Escape"):
        notebook.start_deck(from_title=False)
        box.click()
        box.type("[32, 1")
        notebook.page.keyboard.press(key)
        notebook.wait_until(NOT_PRESENTING, f"{key} in a widget's text box did not leave Deck mode")
        notebook.check(notebook.page.locator("#jp-MainMenu").is_visible(), f"no menus after {key} left the deck")


def test_a_notebook_closed_or_reloaded_while_presenting_opens_as_a_notebook(open_notebook):
    """Closing the presented notebook (Alt+W) leaves Deck mode; reopening it, or reloading JupyterLab while a deck
    was showing (its "active" flag is saved in the settings), shows the notebook with its menus."""
    name = "01_embedding_positional_encoding.ipynb"
    notebook = open_notebook(name)
    notebook.start_deck()
    notebook.page.keyboard.press("Alt+w")
    notebook.wait_until(f"() => ({NOT_PRESENTING})() && !document.querySelector('.jp-NotebookPanel')",
                        "closing the presented notebook did not leave Deck mode")
    notebook.open()
    notebook.check(not notebook.page.evaluate(PRESENTING), "the reopened notebook is in Deck mode")

    notebook.start_deck()
    notebook.wait_until(f"""async () => (await (await fetch(
        '/lab/api/settings/jupyterlab-slideshow:plugin?token={TOKEN}')).json()).settings.active === true""",
                        "Deck mode did not save its active flag (the test needs it saved)")
    notebook.open()  # a reload: the settings still say the deck is active
    notebook.wait_until(f"""async () => !document.body.dataset.jpDeckMode && (await (await fetch(
        '/lab/api/settings/jupyterlab-slideshow:plugin?token={TOKEN}')).json()).settings.active === false""",
                        "after a reload the notebook stayed in (or never left) Deck mode")
    notebook.check(notebook.page.locator("#jp-MainMenu").is_visible(), "the reloaded notebook has no menus")
    notebook.check(notebook.page.locator(".jp-NotebookPanel.jp-Deck").count() == 0, "the notebook is a deck")


def check_clicker_after_slider(notebook, name: str, figure: bool = False) -> None:
    """Right after a value was typed into slider ``name`` on the slide showing: the clicker's PageDown/PageUp walk the
    deck, not the slider; the slider keeps its arrow keys while it has the focus, yet PageUp/PageDown still walk the
    deck; once moved by the pointer, or after a click outside it, the slider gives the focus back (← and → walk
    the deck again), and ← and → walk it while the focus is on the page itself (a key pressed right after a click in
    the margin, before the focus is back). A key that walks the deck leaves the slider's value as it was.
    ``figure``: the explorer draws a figure, which each move of the slider (by key, by the pointer) redraws."""
    slider = notebook.slider(name)
    readout = slider.locator(".widget-readout").element_handle()
    value = lambda: readout.evaluate("e => e.textContent.trim()")  # noqa: E731 (read while its slide is hidden)

    def redrawn(figures: str, how: str) -> None:
        if figure:
            notebook.wait_until(f"before => ({WIDGET_FIGURES})() !== before",
                                f"{how} the {name} slider did not redraw its figure", arg=figures)

    def walks(key: str, back: str) -> None:
        before, here = value(), notebook.active_cell()
        forward = key in ("PageDown", "ArrowRight")
        moved = notebook.press(key)
        notebook.check(moved > here if forward else moved < here,
                       f"{key} moved the deck {'back' if forward else 'on'} ({here} -> {moved}) after {name} moved")
        notebook.check(value() == before, f"{key} moved the {name} slider ({before} -> {value()}), not only the deck")
        notebook.check(notebook.press(back) == here, f"{back} did not come back to the {name} slide")
        slider.wait_for()

    walks("PageDown", "PageUp")  # the readout took the typed value (Enter), then gave the focus back
    before, outputs, figures = value(), notebook.widget_outputs(), notebook.page.evaluate(WIDGET_FIGURES)
    slider.locator(".noUi-handle").focus()
    notebook.page.keyboard.press("ArrowLeft")
    notebook.wait_until(f"before => ({WIDGET_OUTPUTS})() !== before", f"← on the focused {name} slider did "
                        "not move it (a slider keeps its own arrow keys)", arg=outputs)
    notebook.check(value() != before, f"← on the focused {name} slider did not change its value")
    redrawn(figures, "← on")
    walks("PageUp", "PageDown")
    walks("PageDown", "PageUp")

    handle = slider.locator(".noUi-handle").bounding_box()
    before, outputs, figures = value(), notebook.widget_outputs(), notebook.page.evaluate(WIDGET_FIGURES)
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    notebook.page.mouse.move(x, y)
    notebook.page.mouse.down()
    notebook.page.mouse.move(x + 60, y, steps=5)
    notebook.page.mouse.up()
    notebook.wait_until(f"before => ({WIDGET_OUTPUTS})() !== before", f"dragging {name} did not redraw", arg=outputs)
    notebook.check(value() != before, f"dragging the {name} slider did not change its value")
    redrawn(figures, "dragging")
    walks("ArrowLeft", "ArrowRight")  # the drag gave the focus back

    slider.locator(".noUi-handle").focus()
    notebook.page.mouse.click(24, SCREEN["height"] // 2)  # the slide's left margin
    walks("ArrowLeft", "ArrowRight")
    notebook.page.evaluate("() => document.activeElement.blur()")  # the focus on the page itself, at once
    walks("ArrowLeft", "ArrowRight")


def test_heads_slider_works_on_a_slide(open_notebook):
    """Deck mode presents the live notebook: no ¶ by a heading, even under the pointer; on the Explore slide the
    heads slider re-splits the shapes, and the clicker still walks the deck after it moved."""
    notebook = open_notebook("02_qkv_multihead_split.ipynb")
    notebook.run_live()
    notebook.start_deck()
    title = notebook.page.locator(".jp-Deck .jp-deck-mod-visible .jp-RenderedMarkdown h1").first
    title.hover()  # where JupyterLab draws a heading's ¶ link
    anchors = title.locator(".jp-InternalAnchorLink")
    notebook.check(anchors.count() == 1 and not anchors.first.is_visible(), "the title slide draws a ¶ by its heading")
    notebook.walk_to_slider("heads")
    notebook.check("[32, 8, 10, 64]" in notebook.explorer_output(), "the split does not show 8 heads")
    shown = notebook.set_slider("heads", 4)
    notebook.check("[32, 4, 10, 128]" in shown and "[32, 8, 10, 64]" not in shown,
                   f"heads=4 did not re-split on the slide: {shown[:300]}")
    check_clicker_after_slider(notebook, "heads")
    notebook.screenshot("-slide")


# the two sliders teachers moved when it was reported, one in each edition (02's heads and zh 00's d_model are above):
# each case runs its notebook whole, so four would cost CI's time budget a minute more for the same keys
EXPLORER_SLIDERS = [("12_choosing_the_next_token.ipynb", "temperature", 4, "en"),  # the slide's question: 1 -> 4
                    ("13_flash_attention.ipynb", "L_q", 100, "zh")]


def control_label(name: str, edition: str) -> str:
    """An explorer control's label on screen in an edition ("en" or "zh"): the package's
    walkthrough.classroom.widgets.control_labels() read from its catalog, without switching this process's language."""
    if edition == "en":
        return name
    catalog = gettext.translation(i18n.DOMAIN, localedir=i18n.LOCALE_DIR, languages=[edition])
    return catalog.pgettext("control", name)


@pytest.mark.parametrize(("name", "control", "typed", "edition"), EXPLORER_SLIDERS, ids=["12-temperature", "zh-13-L_q"])
def test_clicker_walks_the_deck_after_an_explorer_slider(request, name, control, typed, edition):
    """Issue 29, on the explorers teachers moved when it was reported, in each edition (the Chinese one in a Chinese
    JupyterLab): in Deck mode at 1366x768, after the slider moved (typed, by ←, by a drag), each move redrawing the
    numbers and the figure, the clicker's PageDown walks the deck on and leaves the slider's value, PageUp comes back
    (check_clicker_after_slider)."""
    open_notebook = request.getfixturevalue("open_notebook" if edition == "en" else "open_notebook_zh")
    notebook = open_notebook(name if edition == "en" else f"zh/{name}")
    label = control_label(control, edition)
    notebook.run_all()  # as docs/teaching.md asks before presenting: the explorer's cell needs the cells above it
    notebook.start_deck()
    notebook.walk_to_slider(label)
    before, figures = notebook.explorer_output(), notebook.page.evaluate(WIDGET_FIGURES)
    notebook.check(bool(figures), f"the {label} explorer draws no figure")
    shown = notebook.set_slider(label, typed)
    notebook.check(shown != before, f"{label} = {typed} did not change the explorer's numbers")
    notebook.wait_until(f"before => ({WIDGET_FIGURES})() !== before",
                        f"{label} = {typed} did not redraw the explorer's figure", arg=figures)
    check_clicker_after_slider(notebook, label, figure=True)
    notebook.screenshot(f"-{control}-slide")


def test_a_class_leaves_the_teachers_copy_as_committed(open_notebook):
    """Autosave is off in the shipped settings: Run All and a slider moved in class leave the notebook on disk
    as it was (with autosave, `git status` showed 11 and 12 modified after a class). Ctrl+S still saves."""
    notebook = open_notebook("00_overview.ipynb")
    saved = notebook.page.evaluate(SAVED_AT, notebook.name)
    settings = notebook.page.evaluate(f"""async () => (await (await fetch(
        '/lab/api/settings/@jupyterlab/docmanager-extension:plugin?token={TOKEN}')).json())""")
    notebook.check(settings["schema"]["properties"]["autosave"]["default"] is False
                   and "autosave" not in settings["settings"], "autosave is not off in the shipped settings")
    notebook.run_all()
    notebook.set_slider("d_model", 256)
    notebook.check(notebook.page.evaluate(SAVED_AT, notebook.name) == saved, "the notebook on disk changed in class")
    notebook.check(notebook.page.locator(".jp-mod-dirty").count() > 0, "JupyterLab does not show the unsaved changes")


SAVED_AT = f"""async name => (await (await fetch(
    '/api/contents/notebooks/' + name + '?content=0&token={TOKEN}')).json()).last_modified"""


def test_heads_slider_resplits_and_explains_a_bad_head_count(open_notebook):
    notebook = open_notebook("02_qkv_multihead_split.ipynb")
    notebook.run_live()
    notebook.check("[32, 8, 10, 64]" in notebook.explorer_output(), "the split does not show 8 heads")
    shown = notebook.set_slider("heads", 4)
    notebook.check("[32, 4, 10, 128]" in shown, f"heads=4 did not re-split: {shown[:300]}")
    message = notebook.set_slider("heads", 7)
    notebook.check("d_model=512 is not divisible by num_heads=7" in message and "Traceback" not in message,
                   f"7 heads did not give the message: {message[:300]}")


def test_shape_explorer_follows_d_model(open_notebook):
    notebook = open_notebook("00_overview.ipynb")
    notebook.run_live()
    notebook.check("[32, 10, 512]" in notebook.explorer_output(), "the explorer does not show d_model = 512")
    shown = notebook.set_slider("d_model", 256)
    notebook.check("[32, 10, 256]" in shown, f"d_model=256 did not re-trace: {shown[:300]}")


def test_every_figure_is_sized_for_the_screen_by_viz():
    """The figure check above reads viz.MIN_FONT_PT: every figure viz draws goes through the step that enforces it
    (a text, a legend or a hand-set tick label under the floor is raised to it; the figure gets SCREEN_DPI and is
    no wider than SCREEN_WIDTH_IN), so a new figure cannot bring back 8 px text."""
    unsized = [name for name, function in inspect.getmembers(viz, inspect.isfunction)
               if function.__module__ == viz.__name__ and not name.startswith("_") and function is not viz.screen
               and inspect.signature(function).return_annotation == "Figure" and not hasattr(function, "__wrapped__")]
    # viz.screen is that step itself (for figures a notebook draws): every decorated figure goes through it
    assert not unsized, f"figures not sized for the screen (decorate them with @_cjk): {unsized}"

    @viz._cjk
    def tiny() -> Figure:
        figure = Figure(figsize=(16, 3), dpi=72)
        ax = figure.add_subplot()
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xticks([0, 1], ["早", "good"], fontsize=6)
        ax.tick_params(axis="y", labelsize=5)
        ax.set_title("title", fontsize=7)
        ax.text(0.5, 0.5, "note", fontsize=6)
        ax.legend(fontsize=6)
        return figure
    figure = tiny()
    texts = [*viz._texts(figure), *figure.axes[0].get_xticklabels(), *figure.axes[0].get_yticklabels()]
    assert min(text.get_fontsize() for text in texts) == viz.MIN_FONT_PT
    assert figure.dpi == viz.SCREEN_DPI and figure.get_figwidth() == viz.SCREEN_WIDTH_IN


def shipped_size(variable: str) -> float:
    return float(re.search(rf"--{variable}:\s*([\d.]+)px", CLASSROOM_CSS.read_text()).group(1))


def test_projector_type_for_code_outputs_tables_and_widget_labels(open_notebook):
    """At the back of a room: prose, code, printed output, tables and widget labels at 17 px or more."""
    notebook = open_notebook("00_overview.ipynb")
    notebook.run_all()  # the explorer near the end scrolled into view, its slider drawn
    sizes = notebook.page.evaluate("""() => {
        const size = selector => {
            const found = [...document.querySelectorAll(selector)].find(e => e.textContent.trim());
            return found ? parseFloat(getComputedStyle(found).fontSize) : null;
        };
        return {prose: size('.jp-RenderedMarkdown p'), code: size('.jp-CodeCell .cm-content'),
                output: size('.jp-OutputArea-output pre'), table: size('.jp-RenderedMarkdown td'),
                "widget label": size('.widget-slider .widget-label, .widget-slider label')};
    }""")
    print(f"projector type sizes (px): {sizes}")
    notebook.check(sizes["prose"] == shipped_size("jp-content-font-size1"), f"prose is {sizes['prose']} px, not "
                                                                            "the shipped size (run `make setup`)")
    small = {part: px for part, px in sizes.items() if px is None or px < PROJECTOR_PX}
    notebook.check(not small, f"smaller than {PROJECTOR_PX} px on a projector: {small}")


def test_projector_settings_apply_without_user_settings(open_notebook):
    """The environment's defaults: no news pop-up, the file browser folded away."""
    notebook = open_notebook("02_qkv_multihead_split.ipynb")
    notebook.wait_until("() => !document.querySelector('#jp-left-stack')?.checkVisibility()",
                        "the file browser was not folded away once JupyterLab had opened")
    settings = notebook.page.evaluate(f"""async () => await (await fetch(
        '/lab/api/settings/@jupyterlab/apputils-extension:notification?token={TOKEN}')).json()""")
    notebook.check(settings["schema"]["properties"]["fetchNews"]["default"] == "false"
                   and "fetchNews" not in settings["settings"],
                   "fetchNews is not off in the shipped settings: JupyterLab would ask about news")
    # JupyterLab asks about news once restored, after reading that setting; it is read and restored by now.
    news = notebook.page.locator(".Toastify__toast", has_text="news")
    notebook.check(news.count() == 0, "the Jupyter news pop-up is showing")
    notebook.check(notebook.notebook.bounding_box()["width"] > 0.9 * SCREEN["width"],
                   "the notebook does not get the screen's width")


# A glyph probe for the page: draws two Chinese characters of an element's font on a canvas, beside a code point no
# font has (which draws the missing-glyph box), so check_chinese_glyphs can tell glyphs from boxes.
GLYPH_PROBE = """
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = 64;
    const context = canvas.getContext('2d', {willReadFrequently: true});
    const draw = (font, text) => {
        context.clearRect(0, 0, 64, 64);
        context.font = font;
        context.fillText(text, 4, 44);
        return {width: context.measureText(text).width, pixels: context.getImageData(0, 0, 64, 64).data.join()};
    };
    const probe = async (element, first, second, text) => {
        const font = getComputedStyle(element).font;
        await document.fonts.load(font, first + second);
        const a = draw(font, first), b = draw(font, second);
        const box = draw(font, '\\u0378'), otherBox = draw(font, '\\u0379');
        return {text, tag: element.tagName, font, width: a.width, boxWidth: box.width,
                inked: /[1-9]/.test(a.pixels), differ: a.pixels !== b.pixels,
                notBoxes: a.pixels !== box.pixels && b.pixels !== box.pixels,
                boxesAlike: box.pixels === otherBox.pixels};
    };
"""
CHINESE_GLYPHS = """async arg => {
    // arg: a selector (the glossary's cells), or [selector, [[text, first, second], ...]] for other samples
    const [selector, samples] = Array.isArray(arg) ? arg : [arg, [['嵌入', '嵌', '入'], ['中文', '中', '文']]];
""" + GLYPH_PROBE + """
    const cells = [...document.querySelectorAll(selector)];
    const results = [];
    for (const [text, first, second] of samples) {
        results.push(await probe(cells.find(c => c.textContent.trim() === text), first, second, text));
    }
    return results;
}"""


def check_chinese_glyphs(drawn: list[dict], check) -> None:
    """Each character's pixels differ from another character's and from a code point no font has (which draws
    the missing-glyph box), and it is wider than that box."""
    for found in drawn:
        check(found["boxesAlike"], f"the missing-glyph reference is not one box: {found}")
        check(found["inked"] and found["width"] > found["boxWidth"], f"no glyph drawn: {found}")
        check(found["differ"] and found["notBoxes"], f"Chinese draws as missing-glyph boxes: {found}")


def test_chinese_renders_as_glyphs_not_boxes(open_notebook):
    """On a machine with no CJK font, 00's glossary must still draw Chinese, in its plain cells and its bold
    header."""
    notebook = open_notebook("00_overview.ipynb")
    notebook.notebook.locator(".jp-RenderedMarkdown td", has_text="嵌入").first.scroll_into_view_if_needed()
    drawn = notebook.page.evaluate(CHINESE_GLYPHS, ".jp-RenderedMarkdown td, .jp-RenderedMarkdown th")
    check_chinese_glyphs(drawn, notebook.check)


def test_static_site_draws_chinese_with_its_own_font(browser_context, tmp_path):
    """`make html`'s site, opened from disk with no network and no CJK font on the machine, draws the glossary's
    Chinese from the font it ships (a relative @font-face), as JupyterLab does."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_site

    build_site.build(tmp_path / "site")
    page = browser_context.new_page()
    page.goto((tmp_path / "site" / "00_overview.html").as_uri())
    drawn = page.evaluate(CHINESE_GLYPHS, ".jp-RenderedMarkdown td, .jp-RenderedMarkdown th")

    def check(condition: bool, message: str) -> None:
        assert condition, f"_site/00_overview.html: {message}"
    check_chinese_glyphs(drawn, check)
    # The Chinese edition's page (its twin, zh/), reached by the page's own language link, draws Chinese too.
    page.click("nav.edition-switch a")
    page.wait_for_url("**/zh/00_overview.html")
    drawn = page.evaluate(CHINESE_GLYPHS, ["nav.edition-switch b", [["中文版", "中", "版"]]])
    title = page.locator(".jp-RenderedMarkdown h1").first.inner_text()
    page.close()

    def check_zh(condition: bool, message: str) -> None:
        assert condition, f"_site/zh/00_overview.html: {message}"
    check_zh(title.startswith("00 · "), f"the Chinese page's title is {title!r}")
    check_chinese_glyphs(drawn, check_zh)


HEADING_GLYPHS = """async selector => {""" + GLYPH_PROBE + """
    const heading = [...document.querySelectorAll(selector)].find(h => h.offsetParent
        && new Set(h.textContent.match(/[\\u4e00-\\u9fff]/g) || []).size >= 2);
    if (!heading) return [];
    const [first, second] = [...new Set(heading.textContent.match(/[\\u4e00-\\u9fff]/g))];
    return [await probe(heading, first, second, heading.textContent.trim().slice(0, 40))];
}"""
CHINESE_EDITION = sorted(p.name for p in (NOTEBOOK_DIR / "zh").glob("00_*.ipynb"))


@pytest.mark.parametrize("name", [f"zh/{n}" for n in CHINESE_EDITION])
def test_chinese_edition_on_a_slide_in_a_chinese_jupyterlab(open_notebook_zh, name):
    """The Chinese edition as `make lab-zh` opens it, at 1366x768: JupyterLab's menus in Chinese, the title slide's
    Chinese heading drawn as glyphs (not boxes) in Deck mode, and on the explorer's slide the d_model slider
    re-traces the shapes, and the clicker still walks the deck after it moved."""
    notebook = open_notebook_zh(name)
    menus = notebook.page.locator("#jp-MainMenu .lm-MenuBar-item").all_inner_texts()
    notebook.check({"文件", "编辑", "运行"} <= {m.strip() for m in menus}, f"the menus are not in Chinese: {menus}")
    notebook.run_live()
    notebook.start_deck()
    drawn = notebook.page.evaluate(HEADING_GLYPHS, ".jp-Deck .jp-deck-mod-visible .jp-RenderedMarkdown :is(h1, h2)")
    notebook.check(len(drawn) == 1, "the title slide shows no Chinese heading")
    check_chinese_glyphs(drawn, notebook.check)
    notebook.walk_to_slider("d_model")
    notebook.check("[32, 10, 512]" in notebook.explorer_output(), "the explorer does not show d_model = 512")
    shown = notebook.set_slider("d_model", 256)
    notebook.check("[32, 10, 256]" in shown and "[32, 10, 512]" not in shown,
                   f"d_model = 256 did not re-trace the shapes on the slide: {shown[:300]}")
    check_clicker_after_slider(notebook, "d_model")
    notebook.screenshot("-zh-slide")

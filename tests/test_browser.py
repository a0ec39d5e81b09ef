"""The series as a class sees it: JupyterLab in headless Chromium on a 1366x768 screen, Run All, sliders,
Deck mode (slides), the shipped classroom settings and the Chinese font.

Serves a temporary copy of notebooks/ (the committed ones are never rewritten) with an empty user-settings
folder, so what the page shows comes from the settings installed into the environment (`make setup`).
Waits are bounded by work (Run All ends when no cell is queued) with generous ceilings, never tight ones:
on a shared, loaded machine a slow run is not a failure. A failing check leaves a screenshot and names it.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
NOTEBOOKS_READ = ("checkpoints",)  # folders beside notebooks/ that the notebooks read
CHROMIUM = os.environ.get("WALKTHROUGH_CHROMIUM", "/usr/bin/chromium")
TOKEN = "walkthrough-browser-test"
SCREEN = {"width": 1366, "height": 768}  # a classroom projector, a student's laptop
# Ceilings, not expectations: a kernel on a loaded 2-core machine can take minutes. Run All has none at all.
PATIENCE_MS = 600_000
CLASSROOM_CSS = ROOT / "jupyterlab-settings" / "classroom" / "static" / "classroom.css"
DECK_KEY = "Alt+r"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a copy of the notebooks; yields its base URL."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium when run as root; "
                    f"otherwise install it or set WALKTHROUGH_CHROMIUM to its path")
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(NOTEBOOK_DIR, root / "notebooks")
    for folder in NOTEBOOKS_READ:  # as in the repository: notebook 07 loads ../checkpoints/numerals.pt
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, root / folder)
    (root / "settings").mkdir()  # no user settings: the environment's shipped defaults apply
    port = free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"), "JUPYTER_CONFIG_DIR": str(root / "config")}
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", "--allow-root", f"--ServerApp.root_dir={root}"],
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


class Notebook:
    """One notebook open in JupyterLab, with the few actions a student or a teacher takes."""

    def __init__(self, context, url: str, name: str, shots: Path):
        self.page = context.new_page()
        self.name = name
        self.shots = shots
        self.page.goto(f"{url}/lab/tree/notebooks/{name}?reset&token={TOKEN}")  # reset: only this notebook open
        self.notebook = self.page.locator(".jp-NotebookPanel:visible .jp-Notebook")
        self.notebook.locator(".jp-Cell").first.wait_for()
        self.wait_idle()

    def screenshot(self, label: str = "") -> Path:
        path = self.shots / f"{self.name}{label}.png"
        self.page.screenshot(path=str(path))
        return path

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            pytest.fail(f"{self.name}: {message} (screenshot: {self.screenshot()})")

    def wait_idle(self) -> None:
        self.page.wait_for_function(
            "() => /Idle/.test(document.querySelector('#jp-main-statusbar')?.textContent || '')")

    def menu(self, menu: str, command: str) -> None:
        self.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=menu).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def run_all(self) -> None:
        """Clear, Run All, and wait until no cell is queued or running, however long that takes."""
        self.menu("Edit", "editmenu:clear-all")
        self.menu("Run", "runmenu:run-all")
        self.page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('[*]'))"
            " || document.querySelectorAll('.jp-OutputArea-output').length > 0")
        self.page.wait_for_function(
            "() => ![...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('[*]'))",
            timeout=0)
        self.wait_idle()

    def text(self) -> str:
        return self.notebook.inner_text()

    def slider(self, name: str):
        return self.notebook.locator(".widget-slider:visible", has=self.page.locator("label", has_text=name)).first

    def set_slider(self, name: str, value: int) -> None:
        readout = self.slider(name).locator(".widget-readout")
        readout.fill(str(value))
        readout.press("Enter")

    def widget_output(self, containing: str) -> str:
        output = self.notebook.locator(".widget-output:visible", has_text=containing).first
        output.wait_for()
        return output.inner_text()

    def start_deck(self) -> None:
        """Deck mode from the title cell, by its key, as docs/teaching.md tells a teacher."""
        self.notebook.locator(".jp-Cell").first.click()
        self.page.keyboard.press("Escape")  # command mode: the key belongs to the notebook, not an editor
        self.page.keyboard.press(DECK_KEY)
        self.page.locator(".jp-NotebookPanel.jp-Deck").wait_for()
        self.page.wait_for_timeout(500)  # the deck fades the slide in (0.1 s)

    def stop_deck(self) -> None:
        deck = self.page.locator(".jp-NotebookPanel.jp-Deck")
        if deck.count():
            self.page.keyboard.press(DECK_KEY)
            deck.wait_for(state="detached")

    def slide_cells(self) -> list[dict]:
        """The cells Deck mode shows now, with where they sit on the screen."""
        return self.page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel.jp-Deck .jp-Cell.jp-deck-mod-visible')].map(cell => {
              const box = cell.getBoundingClientRect();
              return {top: box.top, bottom: box.bottom, text: cell.innerText.slice(0, 80)};
            })""")


@pytest.fixture
def open_notebook(lab, browser_context, tmp_path):
    opened = []

    def _open(name):
        notebook = Notebook(browser_context, lab, name, tmp_path)
        opened.append(notebook)
        return notebook
    yield _open
    for notebook in opened:
        notebook.stop_deck()  # Deck mode is remembered in the settings: leave it off for the next test
        notebook.page.close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab_without_a_traceback(open_notebook, name):
    notebook = open_notebook(name)
    notebook.run_all()
    text = notebook.text()
    notebook.check("Traceback" not in text, "a cell printed a traceback")
    notebook.check(notebook.notebook.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                   .filter(has_text="Error").count() == 0, "a cell shows an error")
    notebook.check(notebook.notebook.locator(".widget-slider, .widget-text").count() > 0, "no widget rendered")
    notebook.check(notebook.notebook.locator(".jp-RenderedImage img").count() > 0, "no figure rendered")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_first_slide_fits_the_screen(open_notebook, name):
    """Deck mode's slide 1 (the title and its introduction) is whole on a 1366x768 screen."""
    notebook = open_notebook(name)
    notebook.start_deck()
    cells = notebook.slide_cells()
    notebook.check(bool(cells), "Deck mode shows no cell")
    notebook.check(all(cell["top"] >= 0 and cell["bottom"] <= SCREEN["height"] for cell in cells),
                   f"slide 1 is cut off: its cells span {[(round(c['top']), round(c['bottom'])) for c in cells]} "
                   f"on a screen {SCREEN['height']} px high")
    code_shown = notebook.notebook.locator(".jp-CodeCell.jp-deck-mod-visible")
    notebook.check(code_shown.count() == 0,
                   "slide 1 holds code: the set-up cell should start slide 2 (tools/slide_metadata.py)")
    notebook.page.keyboard.press("ArrowRight")
    notebook.page.wait_for_timeout(500)
    notebook.check(code_shown.count() > 0, "slide 2 does not show the set-up code (Deck mode shows no cell "
                                           "whose slide_type is RISE's '-': tools/slide_metadata.py)")


def test_heads_slider_works_on_a_slide(open_notebook):
    """Deck mode presents the live notebook: on the Explore slide the heads slider re-splits the shapes."""
    notebook = open_notebook("02_qkv_multihead_split.ipynb")
    notebook.run_all()
    notebook.start_deck()
    for _ in notebook.notebook.locator(".jp-Cell").all():  # at most one step per cell
        if notebook.slider("heads").count():
            break
        notebook.page.keyboard.press("ArrowRight")
        notebook.page.wait_for_timeout(200)
    notebook.check(notebook.slider("heads").count() == 1, "no slide shows the heads slider")
    box = notebook.slider("heads").bounding_box()
    notebook.check(0 <= box["y"] and box["y"] + box["height"] <= SCREEN["height"], "the slider is off the slide")
    notebook.check("[32, 8, 10, 64]" in notebook.widget_output("Q transpose"), "the split does not show 8 heads")
    notebook.set_slider("heads", 4)
    shown = notebook.widget_output("[32, 4, 10, 128]")
    notebook.check("[32, 8, 10, 64]" not in shown, "heads=4 did not re-split on the slide")
    notebook.screenshot("-slide")


def test_heads_slider_resplits_and_explains_a_bad_head_count(open_notebook):
    notebook = open_notebook("02_qkv_multihead_split.ipynb")
    notebook.run_all()
    notebook.check("[32, 8, 10, 64]" in notebook.widget_output("Q transpose"), "the split does not show 8 heads")
    notebook.set_slider("heads", 4)
    notebook.check("[32, 4, 10, 128]" in notebook.widget_output("[32, 4, 10, 128]"), "heads=4 did not re-split")
    notebook.set_slider("heads", 7)
    message = notebook.widget_output("not divisible")
    notebook.check("d_model=512 is not divisible by num_heads=7" in message and "Traceback" not in message,
                   "7 heads did not give the message")


def test_shape_explorer_follows_d_model(open_notebook):
    notebook = open_notebook("00_overview.ipynb")
    notebook.run_all()
    notebook.widget_output("[32, 10, 512]")
    notebook.set_slider("d_model", 256)
    notebook.check("[32, 10, 256]" in notebook.widget_output("[32, 10, 256]"), "d_model=256 did not re-trace")


def shipped_size(variable: str) -> float:
    return float(re.search(rf"--{variable}:\s*([\d.]+)px", CLASSROOM_CSS.read_text()).group(1))


def test_projector_settings_apply_without_user_settings(open_notebook):
    """The environment's defaults: projector type sizes, no news pop-up, the file browser folded away."""
    notebook = open_notebook("02_qkv_multihead_split.ipynb")
    notebook.page.wait_for_timeout(3000)  # the news question, when asked, pops up within the first seconds
    sizes = notebook.page.evaluate("""() => ({
        text: parseFloat(getComputedStyle(document.querySelector('.jp-RenderedMarkdown p')).fontSize),
        code: parseFloat(getComputedStyle(document.querySelector('.jp-CodeCell .cm-content')).fontSize)})""")
    notebook.check(sizes["text"] == shipped_size("jp-content-font-size1") >= 16,
                   f"markdown is {sizes['text']} px, not the shipped projector size (run `make setup`)")
    notebook.check(sizes["code"] == shipped_size("jp-code-font-size") >= 14, f"code is {sizes['code']} px")
    news = notebook.page.locator(".Toastify__toast", has_text="news")
    notebook.check(news.count() == 0, "the Jupyter news pop-up is showing")
    notebook.check(not notebook.page.locator("#jp-left-stack").is_visible(), "the file browser is open")
    notebook.check(notebook.notebook.bounding_box()["width"] > 0.9 * SCREEN["width"],
                   "the notebook does not get the screen's width")
    settings = notebook.page.evaluate(f"""async () => (await (await fetch(
        '/lab/api/settings/@jupyterlab/apputils-extension:notification?token={TOKEN}')).json()).schema.properties""")
    notebook.check(settings["fetchNews"]["default"] == "false", "fetchNews is not off in the shipped settings")


def test_chinese_renders_as_glyphs_not_boxes(open_notebook):
    """On a machine with no CJK font, 00's glossary must still draw Chinese, in its plain cells and its bold
    header: each character's pixels differ from another character's and from a code point no font has (which
    draws the missing-glyph box), and it is wider than that box."""
    notebook = open_notebook("00_overview.ipynb")
    notebook.notebook.locator(".jp-RenderedMarkdown td", has_text="词嵌入").first.scroll_into_view_if_needed()
    drawn = notebook.page.evaluate("""async () => {
        const canvas = document.createElement('canvas');
        canvas.width = canvas.height = 64;
        const context = canvas.getContext('2d', {willReadFrequently: true});
        const draw = (font, text) => {
            context.clearRect(0, 0, 64, 64);
            context.font = font;
            context.fillText(text, 4, 44);
            return {width: context.measureText(text).width, pixels: context.getImageData(0, 0, 64, 64).data.join()};
        };
        const cells = [...document.querySelectorAll('.jp-RenderedMarkdown td, .jp-RenderedMarkdown th')];
        const results = [];
        for (const [text, first, second] of [['词嵌入', '词', '嵌'], ['中文', '中', '文']]) {
            const cell = cells.find(c => c.textContent.trim() === text);
            const font = getComputedStyle(cell).font;
            await document.fonts.load(font, first + second);
            const a = draw(font, first), b = draw(font, second);
            const box = draw(font, '\\u0378'), otherBox = draw(font, '\\u0379');
            results.push({text, tag: cell.tagName, font, width: a.width, boxWidth: box.width,
                          inked: /[1-9]/.test(a.pixels), differ: a.pixels !== b.pixels,
                          notBoxes: a.pixels !== box.pixels && b.pixels !== box.pixels,
                          boxesAlike: box.pixels === otherBox.pixels});
        }
        return results;
    }""")
    for found in drawn:
        notebook.check(found["boxesAlike"], f"the missing-glyph reference is not one box: {found}")
        notebook.check(found["inked"] and found["width"] > found["boxWidth"], f"no glyph drawn: {found}")
        notebook.check(found["differ"] and found["notBoxes"], f"Chinese draws as missing-glyph boxes: {found}")

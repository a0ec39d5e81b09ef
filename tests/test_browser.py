"""The series as a student uses it: JupyterLab in headless Chromium, Run All, sliders.

Serves a temporary copy of notebooks/ (the committed ones are never rewritten), with autosave off.
A failing check leaves a screenshot in the pytest temp folder and names it.
"""

import json
import os
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
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
CHROMIUM = os.environ.get("WALKTHROUGH_CHROMIUM", "/usr/bin/chromium")
TOKEN = "walkthrough-browser-test"
RUN_TIMEOUT_MS = 180_000


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
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    settings = root / "settings"
    for plugin, value in (("docmanager-extension/plugin", {"autosave": False}),
                          ("apputils-extension/notification", {"fetchNews": "false"})):
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    port = free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_CONFIG_DIR": str(root / "config")}
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", "--allow-root", f"--ServerApp.root_dir={root}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not start; see {root / 'server.log'}")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")), executable_path=CHROMIUM, headless=True,
            viewport={"width": 1400, "height": 1000},
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield context
        context.close()


class Notebook:
    """One notebook open in JupyterLab, with the few actions a student takes."""

    def __init__(self, context, url: str, name: str, shots: Path):
        self.page = context.new_page()
        self.name = name
        self.shots = shots
        self.page.goto(f"{url}/lab/tree/notebooks/{name}?reset&token={TOKEN}")  # reset: only this notebook open
        self.notebook = self.page.locator(".jp-NotebookPanel:visible .jp-Notebook")
        self.notebook.locator(".jp-Cell").first.wait_for(timeout=60_000)
        self.wait_idle()

    def screenshot(self) -> Path:
        path = self.shots / f"{self.name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            pytest.fail(f"{self.name}: {message} (screenshot: {self.screenshot()})")

    def wait_idle(self, timeout_ms: int = 60_000) -> None:
        self.page.wait_for_function(
            "() => /Idle/.test(document.querySelector('#jp-main-statusbar')?.textContent || '')",
            timeout=timeout_ms)

    def menu(self, menu: str, command: str) -> None:
        self.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=menu).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def run_all(self) -> None:
        self.menu("Edit", "editmenu:clear-all")
        self.menu("Run", "runmenu:run-all")
        self.page.wait_for_timeout(500)
        self.page.wait_for_function(
            "() => ![...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('[*]'))",
            timeout=RUN_TIMEOUT_MS)
        self.wait_idle()

    def text(self) -> str:
        return self.notebook.inner_text()

    def slider(self, name: str):
        return self.notebook.locator(".widget-slider", has=self.page.locator("label", has_text=name)).first

    def set_slider(self, name: str, value: int) -> None:
        readout = self.slider(name).locator(".widget-readout")
        readout.fill(str(value))
        readout.press("Enter")

    def widget_output(self, containing: str, timeout_ms: int = 20_000) -> str:
        output = self.notebook.locator(".widget-output", has_text=containing).first
        output.wait_for(timeout=timeout_ms)
        return output.inner_text()


@pytest.fixture
def open_notebook(lab, browser_context, tmp_path):
    opened = []

    def _open(name):
        notebook = Notebook(browser_context, lab, name, tmp_path)
        opened.append(notebook)
        return notebook
    yield _open
    for notebook in opened:
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


def test_notebook_presents_as_reveal_slides(lab, browser_context, tmp_path):
    page = browser_context.new_page()
    try:
        page.goto(f"{lab}/rise/notebooks/02_qkv_multihead_split.ipynb?token={TOKEN}")
        page.wait_for_selector(".reveal .slides section", timeout=60_000)
        slides = page.locator(".reveal .slides > section").count()
        if slides < 8:
            page.screenshot(path=str(tmp_path / "rise.png"))
            pytest.fail(f"only {slides} slides rendered (screenshot: {tmp_path / 'rise.png'})")
    finally:
        page.close()

"""What nbval does not check: slides, the conventions every notebook keeps, widgets out of order, the static site."""

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
PATHS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
sys.path.insert(0, str(ROOT / "tools"))
import build_site  # noqa: E402


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(notebook):
    return [c for c in notebook.cells if c.cell_type == "code"]


def widget_cells(notebook):
    return [c for c in code_cells(notebook) if "wt.widgets." in c.source]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_presents_as_slides(path):
    notebook = read(path)
    first = notebook.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert first.metadata["slideshow"]["slide_type"] == "slide", "the title is a slide of its own"
    for cell in notebook.cells:
        slide_type = cell.metadata.get("slideshow", {}).get("slide_type")
        assert slide_type in ("slide", "subslide", "fragment", "-"), cell.source[:60]
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            assert slide_type == "slide", f"each idea gets a slide: {cell.source.splitlines()[0]}"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_keeps_the_conventions(path):
    notebook = read(path)
    cells = code_cells(notebook)
    assert "import walkthrough as wt" in cells[0].source, "the first code cell sets everything up"
    assert all(c.execution_count is not None for c in cells), "committed executed"
    outputs = [o for c in cells for o in c.outputs]
    assert not any(o.output_type == "error" for o in outputs)
    assert any("image/png" in o.get("data", {}) for o in outputs), "a heatmap or plot"
    assert widget_cells(notebook), "a widget"
    for cell in widget_cells(notebook):
        assert cell.source.startswith("# NBVAL_IGNORE_OUTPUT"), "widget output varies: not compared by nbval"
        assert any(WIDGET_VIEW in o.get("data", {}) for o in cell.outputs)
    assert re.search(r"## Recap", "".join(c.source for c in notebook.cells)), "a recap"
    assert any(c.cell_type == "markdown" and re.search(r"[\u4e00-\u9fff]", c.source) for c in notebook.cells), \
        "the Chinese term beside a key term"


@pytest.mark.parametrize("path", [p for p in PATHS if not p.name.startswith("07")], ids=lambda p: p.stem)
def test_widgets_work_after_a_restart_run_out_of_order(path):
    """A fresh kernel that runs only the first code cell and then the widget cell gets a live widget."""
    notebook = read(path)
    notebook.cells = [code_cells(notebook)[0], *widget_cells(notebook)]
    for cell in notebook.cells:
        cell.outputs = []
    NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    assert any(WIDGET_VIEW in o.get("data", {}) for o in notebook.cells[-1].outputs)


def test_static_site_builds_offline(tmp_path):
    pages = build_site.build(tmp_path)
    assert [p.stem for p in pages] == [p.stem for p in PATHS]
    index = (tmp_path / "index.html").read_text()
    for page in pages:
        text = page.read_text()
        assert f"href='{page.name}'" in index
        assert "data:image/png;base64" in text, "figures are embedded"
        assert not re.search(r"<script\b[^>]*\bsrc=[\"']https?://", text), "no CDN script"
        assert not any(re.search(r"https?://", s) for s in re.findall(r"<script\b.*?</script>", text, re.S))
        assert "Interactive widget" in text

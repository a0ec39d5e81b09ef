"""Render the executed notebooks to a static, offline site (``make html``): _site/index.html + one page each.

Widgets need a kernel, so their outputs become a note saying so; scripts that would load from a
CDN (require.js, MathJax, mermaid, the widget manager) are dropped, as the pages need none of them.

    python tools/build_site.py [OUT_DIR]
"""

import html
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("<p style='border:1px dashed #999;padding:6px'><em>Interactive widget: open this notebook in "
               "JupyterLab (<code>make lab</code>) or on Binder to use it.</em></p>")
SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S)


def without_widgets(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                output["data"] = {"text/html": WIDGET_NOTE}
    return notebook


def offline(page: str) -> str:
    """Drop every script that loads or imports from another host."""
    return SCRIPT.sub(lambda m: "" if re.search(r"https?://", m.group(0)) else m.group(0), page)


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    pages = []
    index = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook = without_widgets(nbformat.read(path, as_version=4))
        title = next(c.source.splitlines()[0].lstrip("# ") for c in notebook.cells if c.cell_type == "markdown")
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
        page = out / f"{path.stem}.html"
        page.write_text(offline(body), encoding="utf-8")
        pages.append(page)
        index.append(f"<li><a href='{page.name}'>{html.escape(title)}</a></li>")
    (out / "index.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>Transformer, by hand</title>"
        "<h1>Transformer, by hand</h1><p>The executed notebooks, readable without Jupyter. "
        "Sliders need a live kernel: run <code>make lab</code> for those.</p><ol>" + "".join(index) + "</ol>",
        encoding="utf-8")
    return pages


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_site"
    print(f"wrote {len(build(target))} pages and index.html to {target}")

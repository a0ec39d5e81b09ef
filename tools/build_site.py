"""Render the executed notebooks to a static, offline site (``make html``): _site/index.html + one page each.

The pages show the committed notebooks (``git show HEAD:notebooks/X.ipynb``), not the working copies:
JupyterLab autosaves those while a teacher works, so they may be half-run. ``--working-copy`` renders
the files on disk instead (for a checkout that is not a git repository, or to preview an edit).

Chinese shows everywhere, also on a machine with no CJK font: the pages link the classroom stylesheet
(jupyterlab-settings/classroom/static/classroom.css, the one JupyterLab gets), whose relative @font-face
names NotoSansCJKsc-Regular.otf; the site ships that font cut down to the characters its pages use (a few
kilobytes instead of 16 MB), so it needs no network and no system font.

Widgets need a kernel. An output that also carries its own HTML (a predict-the-shape question: its prompt
and a "show answer" fold) shows that HTML; any other widget becomes a note saying so. Scripts that would
load from a CDN (require.js, MathJax, mermaid, the widget manager) are dropped, as the pages need none.

    python tools/build_site.py [OUT_DIR] [--working-copy]
"""

import html
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from fontTools import subset
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
CLASSROOM_CSS = ROOT / "jupyterlab-settings" / "classroom" / "static" / "classroom.css"
STYLESHEET = "<link rel='stylesheet' href='classroom.css'>"
CJK = re.compile(r"[\u2e80-\u2fdf\u3000-\u303f\u3200-\u33ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f"
                 r"\uff00-\uffef]")  # the unicode-range of classroom.css's @font-face
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("<p style='border:1px dashed #999;padding:6px'><em>Interactive widget: open this notebook in "
               "JupyterLab (<code>make lab</code>) or on Binder to use it.</em></p>")
SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S)


def without_widgets(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                output["data"] = {"text/html": data.get("text/html", WIDGET_NOTE)}
    return notebook


def offline(page: str) -> str:
    """Drop every script that loads or imports from another host."""
    return SCRIPT.sub(lambda m: "" if re.search(r"https?://", m.group(0)) else m.group(0), page)


def git(root: Path, *arguments: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(arguments)} failed in {root}: {done.stderr.strip()}\n"
                         f"(not a git checkout? build from the files on disk with --working-copy)")
    return done.stdout


def committed_notebooks(root: Path) -> list[tuple[str, nbformat.NotebookNode]]:
    """(stem, notebook) for every notebooks/*.ipynb in git HEAD, as committed."""
    names = sorted(n for n in git(root, "ls-tree", "--name-only", "HEAD", "notebooks/").split()
                   if n.endswith(".ipynb"))
    return [(Path(n).stem, nbformat.reads(git(root, "show", f"HEAD:{n}"), as_version=4)) for n in names]


def working_copy_notebooks(root: Path) -> list[tuple[str, nbformat.NotebookNode]]:
    return [(p.stem, nbformat.read(p, as_version=4)) for p in sorted((root / "notebooks").glob("*.ipynb"))]


def with_stylesheet(page: str) -> str:
    return page.replace("</head>", f"{STYLESHEET}\n</head>", 1)


def ship_cjk_font(out: Path, pages: list[str]) -> Path:
    """classroom.css and the CJK font it names, cut down to the Chinese characters the pages show."""
    sys.path.insert(0, str(ROOT / "tools"))
    from install_lab_settings import FONT_FILE, cjk_font  # one home for where the font comes from

    (out / CLASSROOM_CSS.name).write_text(CLASSROOM_CSS.read_text(), encoding="utf-8")
    characters = sorted(set(CJK.findall("".join(pages))))
    options = subset.Options()
    options.name_IDs = ["*"]  # keep the font's names and licence
    font = subset.load_font(str(cjk_font()), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(text="".join(characters))
    subsetter.subset(font)
    subset.save_font(font, str(out / FONT_FILE), options)
    return out / FONT_FILE


def build(out: Path, root: Path = ROOT, working_copy: bool = False) -> list[Path]:
    notebooks = working_copy_notebooks(root) if working_copy else committed_notebooks(root)
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    pages = []
    index = []
    for stem, notebook in notebooks:
        notebook = without_widgets(notebook)
        title = next(c.source.splitlines()[0].lstrip("# ") for c in notebook.cells if c.cell_type == "markdown")
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
        page = out / f"{stem}.html"
        page.write_text(with_stylesheet(offline(body)), encoding="utf-8")
        pages.append(page)
        index.append(f"<li><a href='{page.name}'>{html.escape(title)}</a></li>")
    source = "the notebooks on disk" if working_copy else "the notebooks as committed"
    (out / "index.html").write_text(
        f"<!doctype html><meta charset='utf-8'><title>Transformer, by hand</title>{STYLESHEET}"
        f"<h1>Transformer, by hand</h1><p>The executed notebooks ({source}), readable without Jupyter. "
        "Sliders need a live kernel: run <code>make lab</code> for those.</p><ol>" + "".join(index) + "</ol>",
        encoding="utf-8")
    ship_cjk_font(out, [page.read_text(encoding="utf-8") for page in pages] + [(out / "index.html").read_text()])
    return pages


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--working-copy"]
    target = Path(arguments[0]) if arguments else ROOT / "_site"
    pages = build(target, working_copy="--working-copy" in sys.argv[1:])
    print(f"wrote {len(pages)} pages and index.html to {target}")

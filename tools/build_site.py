"""Render the executed notebooks to a static, offline site (``make html``): _site/index.html + one page each,
and the Chinese edition beside it, _site/zh/index.html + one page per twin (notebooks/zh/). Each page links its
twin in the other language at the top, so a reader switches language on the page they are reading.

The pages show the committed notebooks (``git show HEAD:notebooks/X.ipynb``), not the working copies:
JupyterLab autosaves those while a teacher works, so they may be half-run. ``--working-copy`` renders
the files on disk instead (for a checkout that is not a git repository, or to preview an edit).

Chinese shows everywhere, also on a machine with no CJK font: the pages link the classroom stylesheet
(jupyterlab-settings/classroom/static/classroom.css, the one JupyterLab gets), whose relative @font-face
names NotoSansCJKsc-Regular.otf; the site ships that font cut down to the characters its pages use (a few
kilobytes instead of 16 MB), so it needs no network and no system font. Every page draws its text, headings and
titles included, in that stylesheet's font stack (the index too: a browser's default serif has no Chinese).

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
# The editions: where their notebooks are, where their pages go, what a page says in each language, and
# "switch", the text of the link that opens that edition from the other one.
EDITIONS = {
    "en": {"notebooks": "notebooks", "pages": ".", "html_lang": "en", "other": "zh", "switch": "English",
           "widget_note": WIDGET_NOTE, "title": "Transformer, by hand",
           "intro": "The executed notebooks ({source}), readable without Jupyter. Sliders need a live kernel: "
                    "run <code>make lab</code> for those."},
    "zh": {"notebooks": "notebooks/zh", "pages": "zh", "html_lang": "zh-Hans", "other": "en", "switch": "中文版",
           "widget_note": "<p style='border:1px dashed #999;padding:6px'><em>交互控件：在 JupyterLab（"
                          "<code>make lab</code>）或 Binder 中打开这个笔记本才能使用。</em></p>",
           "title": "手推 Transformer（中文版）",
           "intro": "已运行的笔记本（{source}），不装 Jupyter 也能阅读。滑块需要运行中的内核：请用 "
                    "<code>make lab</code>。"},
}
SOURCES = {"en": ("the notebooks as committed", "the notebooks on disk"), "zh": ("已提交的版本", "磁盘上的文件")}
SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S)


def without_widgets(notebook: nbformat.NotebookNode, note: str = WIDGET_NOTE) -> nbformat.NotebookNode:
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                output["data"] = {"text/html": data.get("text/html", note)}
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


def committed_notebooks(root: Path, folder: str = "notebooks") -> list[tuple[str, nbformat.NotebookNode]]:
    """(stem, notebook) for every FOLDER/*.ipynb in git HEAD, as committed."""
    names = sorted(n for n in git(root, "ls-tree", "--name-only", "HEAD", f"{folder}/").split()
                   if n.endswith(".ipynb"))
    return [(Path(n).stem, nbformat.reads(git(root, "show", f"HEAD:{n}"), as_version=4)) for n in names]


def working_copy_notebooks(root: Path, folder: str = "notebooks") -> list[tuple[str, nbformat.NotebookNode]]:
    return [(p.stem, nbformat.read(p, as_version=4)) for p in sorted((root / folder).glob("*.ipynb"))]


def with_stylesheet(page: str, up: str = "") -> str:
    return page.replace("</head>", f"{STYLESHEET.replace('classroom.css', up + 'classroom.css')}\n</head>", 1)


def switch_link(edition: str, href: str | None) -> str:
    """The bar at the top of a page: its own language in bold, and a link that opens the same page in the
    other language (no bar if the page has no twin)."""
    if href is None:
        return ""
    this, other = EDITIONS[edition], EDITIONS[EDITIONS[edition]["other"]]
    return (f"<nav class='edition-switch' style='text-align:right;padding:4px 12px;"
            f"font-family:var(--jp-content-font-family)'><b>{this['switch']}</b> · "
            f"<a href='{href}' hreflang='{other['html_lang']}' lang='{other['html_lang']}'>{other['switch']}</a>"
            f"</nav>")


def with_language(page: str, edition: str, switch: str) -> str:
    """The page's language (a browser picks the CJK font for zh-Hans) and the link to its twin."""
    page = re.sub(r"<html\b[^>]*>", f"<html lang=\"{EDITIONS[edition]['html_lang']}\">", page, count=1)
    return re.sub(r"(<body\b[^>]*>)", lambda m: m.group(1) + switch, page, count=1)


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
    """Both editions' pages (English first, then out/zh/) and an index for each; returns the notebook pages."""
    read = working_copy_notebooks if working_copy else committed_notebooks
    notebooks = {edition: read(root, spec["notebooks"]) for edition, spec in EDITIONS.items()}
    stems = {edition: {stem for stem, _ in found} for edition, found in notebooks.items()}
    exporter = HTMLExporter(template_name="lab")
    pages, texts = [], []
    for edition, spec in EDITIONS.items():
        if not notebooks[edition]:
            continue
        folder, up = out / spec["pages"], "../" if spec["pages"] != "." else ""
        twin_folder = "" if EDITIONS[spec["other"]]["pages"] == "." else EDITIONS[spec["other"]]["pages"] + "/"
        folder.mkdir(parents=True, exist_ok=True)
        index = []
        for stem, notebook in notebooks[edition]:
            notebook = without_widgets(notebook, spec["widget_note"])
            title = next(c.source.splitlines()[0].lstrip("# ") for c in notebook.cells if c.cell_type == "markdown")
            body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
            twin = f"{up}{twin_folder}{stem}.html" if stem in stems[spec["other"]] else None
            page = folder / f"{stem}.html"
            page.write_text(with_language(with_stylesheet(offline(body), up), edition, switch_link(edition, twin)),
                            encoding="utf-8")
            pages.append(page)
            index.append(f"<li><a href='{page.name}'>{html.escape(title)}</a></li>")
        intro = spec["intro"].format(source=SOURCES[edition][working_copy])
        other_index = f"{up}{twin_folder}index.html" if notebooks[spec["other"]] else None
        (folder / "index.html").write_text(
            f"<!doctype html><html lang='{spec['html_lang']}'><meta charset='utf-8'><title>{spec['title']}</title>"
            f"{STYLESHEET.replace('classroom.css', up + 'classroom.css')}"
            f"<body style='font-family:var(--jp-content-font-family)'>{switch_link(edition, other_index)}"
            f"<h1>{spec['title']}</h1><p>{intro}</p><ol>" + "".join(index) + "</ol></body></html>",
            encoding="utf-8")
        texts.append((folder / "index.html").read_text(encoding="utf-8"))
    ship_cjk_font(out, [page.read_text(encoding="utf-8") for page in pages] + texts)
    return pages


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--working-copy"]
    target = Path(arguments[0]) if arguments else ROOT / "_site"
    pages = build(target, working_copy="--working-copy" in sys.argv[1:])
    chinese = sum(page.parent.name == "zh" for page in pages)
    print(f"wrote {len(pages) - chinese} English and {chinese} Chinese pages (zh/) with an index each to {target}")

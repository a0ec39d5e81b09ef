"""What a class sees in the committed notebooks (issue 29): no figure a notebook stored has a label cut at its edge
or drawn past its own canvas, and the Chinese edition's figures and printed lines carry no English words of their
own.

Cut labels. A notebook's figure is stored as JupyterLab showed it: a PNG that IPython's inline backend cropped to
what was drawn (bbox_inches="tight", savefig.pad_inches around it). Two things betray a label that did not fit:
ink in the PNG's outermost rows or columns (a figure saved at its own size, a label cut off there), and a PNG
larger than the figure's canvas plus that padding (the figure says "<Figure size 900x340 ...>"; its texts reached
past the canvas, as titles wider than their panels or a colour bar's label longer than its bar do: the layout
engine gave up, and the same figure drawn at its own size, in an explorer or by savefig, cuts them). Labels that
overlap inside the canvas are not seen here (tests/test_figure_sizes.py checks the package's figures for that).

English in the Chinese edition. The strings a Chinese notebook's own code prints or draws (arguments of print,
ask_shape, print_shape, set_title, text, ..., a figure function's (lines_figure's series names), and title=,
xlabel=, ylabel=, colorbar_label=, label=) hold no
lowercase English word unless it is a code name of that notebook (a variable, attribute or keyword: `logits`,
`src`), English in brackets after its Chinese (键（key）), a glossary term whose Chinese is the English word
(softmax, rank), or a word of the English sentences the models translate. Capitalised names (PyTorch, Adam,
LayerNorm) pass. Strings that reach a figure through a variable (a dict built first, then passed) are not traced.
"""

import ast
import base64
import io
import json
import keyword
import re
import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import zh_sync  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
TWINS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
INK = 60          # a pixel this far (0-255, any channel) from white is ink: antialiasing's faint fringe is not
PAD_INCHES = 0.1  # matplotlib's savefig.pad_inches, which the inline backend's tight crop adds on each side
SLACK_PX = 2      # rounding of the crop


def notebook_id(path: Path) -> str:
    return str(path.relative_to(ROOT / "notebooks"))


# --- the checks ---------------------------------------------------------------------------------------------

def ink(png: bytes):
    """The PNG as a boolean array [rows, columns]: True where something is drawn (over a white background)."""
    import numpy as np
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(float)
    alpha = pixels[..., 3:] / 255
    over_white = pixels[..., :3] * alpha + 255 * (1 - alpha)
    return np.abs(over_white - 255).max(-1) > INK


def edges_with_ink(png: bytes) -> list[str]:
    """The sides of the PNG whose outermost row or column holds ink: something drawn there was cut."""
    drawn = ink(png)
    sides = {"top": drawn[0], "bottom": drawn[-1], "left": drawn[:, 0], "right": drawn[:, -1]}
    return [f"{side} ({int(row.sum())} px)" for side, row in sides.items() if row.any()]


def beyond_canvas(png: bytes, plain: str) -> list[str]:
    """How far the stored PNG is larger than its figure's canvas (read from the figure's text repr) plus the crop's
    padding: the drawing reached past the canvas by that much. Empty when it fits, or when no size is known."""
    size = re.search(r"<Figure size (\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)", plain)
    if not size:
        return []
    image = Image.open(io.BytesIO(png))
    dpi = image.info.get("dpi", (100, 100))[0]
    limit = [float(s) + 2 * PAD_INCHES * dpi + SLACK_PX for s in size.groups()]
    return [f"{what} {got} px, canvas and padding {limit_px:.0f} px" for what, got, limit_px in
            zip(("width", "height"), image.size, limit) if got > limit_px]


def stored_figures(path: Path):
    """(cell index, PNG bytes, the figure's text repr) for each PNG a notebook stores."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                yield index, base64.b64decode(data["image/png"]), "".join(data.get("text/plain", ""))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=notebook_id)
def test_no_stored_figure_has_a_cut_label(path):
    problems = []
    for index, png, plain in stored_figures(path):
        problems += [f"cell {index}: ink on the {side} edge" for side in edges_with_ink(png)]
        problems += [f"cell {index}: drawn past its canvas: {what}" for what in beyond_canvas(png, plain)]
    assert not problems, (f"{notebook_id(path)} (shorter or wrapped titles and labels, or a larger figure; then "
                          "re-run the notebook):\n" + "\n".join(problems))


# --- the checks can fail: figures drawn here, stored as the inline backend stores them ---------------------------

def as_stored(figure: Figure, tight: bool = True) -> tuple[bytes, str]:
    """The PNG and text repr a notebook would store for `figure` (IPython's inline backend crops it tight)."""
    from IPython.core.pylabtools import print_figure
    png = print_figure(figure, "png", **({"bbox_inches": "tight"} if tight else {"bbox_inches": None}))
    return png, repr(figure)


def panels(titles, size=(9, 3)) -> Figure:
    figure = Figure(figsize=size, layout="constrained")
    for ax, title in zip(figure.subplots(1, len(titles)), titles):
        ax.plot([0, 1], [0, 1])
        ax.set(title=title, xlabel="key", ylabel="query")
    return figure


def test_a_figure_that_fits_passes():
    png, plain = as_stored(panels(["encoder self-attention\n[L_src, L_src]", "cross-attention\n[L_tgt, L_src]"]))
    assert edges_with_ink(png) == [] and beyond_canvas(png, plain) == []


def test_titles_wider_than_their_panels_are_found():
    """The defect of notebook 00's three attention maps: titles wider than their panels collide and reach past the
    figure; the tight crop hides the cut, not the overflow."""
    long = ["encoder self-attention [L_src, L_src] of layer 0", "decoder masked self-attention [L_tgt, L_tgt]",
            "cross-attention [L_tgt, L_src] of the last layer"]
    png, plain = as_stored(panels(long))
    assert edges_with_ink(png) == []
    assert any(problem.startswith("width") for problem in beyond_canvas(png, plain))


def test_a_label_cut_at_the_edge_is_found():
    """A figure saved at its own size (an explorer's, or savefig without a tight box) whose y label lies left of
    the canvas: what remains of it touches the edge."""
    figure = Figure(figsize=(3, 2))
    ax = figure.add_axes((0.1, 0.2, 0.8, 0.7))  # 30 px left of the axes: the tick labels fit, the label not
    ax.plot([0, 1], [0, 1])
    ax.set_ylabel("probability (attention weight)")
    png, plain = as_stored(figure, tight=False)
    assert "left" in " ".join(edges_with_ink(png))
    png, plain = as_stored(figure)
    assert beyond_canvas(png, plain), "the same figure cropped tight is larger than its canvas"


def test_a_colour_bar_label_longer_than_its_bar_is_found():
    """Notebook 04's small map: a long vertical colour-bar label reached past a 2.7 x 2.55 in figure."""
    figure = Figure(figsize=(2.7, 2.55), layout="constrained")
    ax = figure.add_subplot()
    image = ax.imshow([[0.1, 0.9], [0.3, 0.7], [0.5, 0.5]], cmap="Blues")
    figure.colorbar(image, ax=ax).set_label("probability (attention weight), this long")
    ax.set_title("zh → chinese person (trained, last layer)")
    png, plain = as_stored(figure)
    assert beyond_canvas(png, plain)


# --- the Chinese edition's own strings --------------------------------------------------------------------------

SHOWN_CALLS = {"print", "ask_shape", "print_shape", "suptitle", "set_title", "set_xlabel", "set_ylabel", "text",
               "annotate", "legend"}
SHOWN_KEYWORDS = {"title", "xlabel", "ylabel", "colorbar_label", "label"}
# Words of the English sentences the models translate (data, not the notebook's voice), and words Chinese writing
# on machine learning keeps as they are where the glossary has no row for them alone
DATA_WORDS = {"chinese", "person", "good", "morning"}
KEPT = {"id", "one-hot"}
WORD = re.compile(r"(?<![\w./<'-])[a-z][a-z]+(?:-[a-z]+)*(?![\w(./>'-])")
BRACKETED = re.compile(r"（[^（）]*）")


def shown_texts(node: ast.AST):
    """The literal text of an expression that ends up shown: string constants, an f-string's text (its fields are
    code), through `+`, conditionals, tuples, lists and dicts; not a string used as a subscript or call argument."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        yield "".join(part.value if isinstance(part, ast.Constant) else " " for part in node.values)
    elif isinstance(node, ast.BinOp):
        yield from shown_texts(node.left)
        yield from shown_texts(node.right)
    elif isinstance(node, ast.IfExp):
        yield from shown_texts(node.body)
        yield from shown_texts(node.orelse)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from shown_texts(element)
    elif isinstance(node, ast.Dict):
        for part in [*node.keys, *node.values]:
            if part is not None:
                yield from shown_texts(part)


def python(cell: dict) -> ast.Module:
    """A code cell's source as Python, its IPython magic lines (%matplotlib, !ls) commented out."""
    lines = zh_sync.source_text(cell).splitlines()
    return ast.parse("\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line for line in lines))


def code_names(trees: list[ast.Module]) -> set[str]:
    """Every name a notebook's code uses: variables, attributes, keyword arguments, parameters, imports, and the
    dimension names it gives (dims="tiles b_q b_k")."""
    names = set(keyword.kwlist)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "dims" and isinstance(node.value, ast.Constant):
                names |= set(str(node.value.value).split())
            names |= {getattr(node, field) for field in ("id", "attr", "arg", "name")
                      if isinstance(getattr(node, field, None), str)}
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {part for alias in node.names for part in alias.name.split(".")}
    return names


def english_as_chinese() -> set[str]:
    """Glossary rows whose 中文 is the English word (rule 3): softmax, rank."""
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (?!English |---)(.+?) \| (.+?) \| .+? \|$", glossary, re.M)
    return {chinese.lower() for english, chinese in rows if chinese == english}


def untranslated(notebook: dict) -> list[str]:
    """Each shown string of a Chinese notebook's code with a lowercase English word that is not allowed."""
    cells = [(index, python(cell)) for index, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"]
    allowed = code_names([tree for _, tree in cells]) | english_as_chinese() | DATA_WORDS | KEPT
    problems = []
    for index, tree in cells:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            shown = [*node.args] if name in SHOWN_CALLS or name.endswith("_figure") else []
            shown += [k.value for k in node.keywords if k.arg in SHOWN_KEYWORDS]
            for text in (t for argument in shown for t in shown_texts(argument)):
                words = [w for w in WORD.findall(BRACKETED.sub(" ", text)) if w not in allowed]
                if words:
                    problems.append(f"cell {index}: {text.strip()!r} has {words}")
    return problems


@pytest.mark.parametrize("path", TWINS, ids=notebook_id)
def test_chinese_notebooks_print_and_draw_no_english_of_their_own(path):
    problems = untranslated(zh_sync.read_notebook(path))
    assert not problems, (f"{notebook_id(path)}: write these in Chinese, with docs/glossary.md's words (code names "
                          "may stay):\n" + "\n".join(problems))


def small_notebook(*sources: str) -> dict:
    return {"cells": [{"cell_type": "code", "metadata": {}, "source": source, "outputs": []} for source in sources]}


def test_untranslated_finds_english_labels_and_lets_code_names_be():
    good = small_notebook('logits = model(src)\nprint(f"logits 的形状是 {list(logits.shape)}")',
                          'wt.viz.heatmap(w, xlabel="键（key）", title="softmax 之后", ylabel="rank 数")')
    assert untranslated(good) == []
    bad = small_notebook('wt.viz.lines_figure(x, {"recompute: the whole prefix": a, "缓存": b}, xlabel="步")',
                         'ax.set_title("解码器第 0 层改成 pre-norm")', 'print(f"map {list(w.shape)}")')
    found = untranslated(bad)
    assert len(found) == 3 and "['recompute', 'the', 'whole', 'prefix']" in found[0], found
    assert "pre-norm" in found[1] and "map" in found[2]

"""Set every notebook's slide metadata to the series' rule, for Deck mode (jupyterlab-slideshow).

The rule (tests/test_notebooks.py checks it):
- slide 1 is the title and its introduction only: the leading markdown cells, up to the first code cell
  or the first `## ` heading, so it fits on a 1366x768 screen;
- the first cell after slide 1 (the set-up code, usually) starts a new slide, and so does every `## ` heading
  and every explorer (a cell that calls `wt.widgets.`), which needs the screen to itself;
- a cell an author chose to start a slide (slide_type "slide", to split a slide too tall for the screen)
  keeps it, and so does the cell an author marked "subslide" or "fragment": those become slides, because
  the → key and a clicker's PageDown skip sub-slides, and one key must walk every cell of the deck;
- every other cell continues the slide above it, which Deck mode reads from a cell without
  `slideshow.slide_type` (Deck does not read RISE's "-": it shows such a cell on no slide at all, so
  the code under a heading disappears). RISE and nbconvert read a missing slide_type as "-" too;
  "skip" and "notes" (shown on no slide) are removed the same way, so every cell is on a slide.

Only cell metadata changes: sources, outputs and execution counts are left exactly as they were, and a
notebook that already follows the rule is not rewritten (running the script twice changes nothing).

    python tools/slide_metadata.py [NOTEBOOK_OR_FOLDER ...]     (default: notebooks/)
"""

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BECOME_SLIDES = ("slide", "subslide", "fragment")  # an author's choice to start a new slide here


def title_slide_length(cells) -> int:
    """How many leading cells make slide 1: the title cell and the markdown that introduces it."""
    length = 1
    while (length < len(cells) and cells[length].cell_type == "markdown"
           and not cells[length].source.startswith("## ")):
        length += 1
    return length


def wanted_slide_type(index: int, cell, first_after_title: int) -> str | None:
    """The slide_type a cell should carry under the rule, or None for "continues the slide above"."""
    current = cell.metadata.get("slideshow", {}).get("slide_type")
    if index == 0 or index == first_after_title or (cell.cell_type == "markdown" and cell.source.startswith("## ")):
        return "slide"
    if cell.cell_type == "code" and "wt.widgets." in cell.source:
        return "slide"  # an explorer gets the screen to itself, its question on the slide before
    if current in BECOME_SLIDES and index > first_after_title:
        return "slide"
    return None


def apply_rule(notebook: nbformat.NotebookNode) -> bool:
    """Rewrite the cells' slide metadata in place; True when anything changed."""
    first_after_title = title_slide_length(notebook.cells)
    changed = False
    for index, cell in enumerate(notebook.cells):
        wanted = wanted_slide_type(index, cell, first_after_title)
        slideshow = cell.metadata.get("slideshow", {})
        if slideshow.get("slide_type") == wanted:
            continue
        changed = True
        if wanted is None:
            slideshow.pop("slide_type", None)
            if slideshow:
                cell.metadata["slideshow"] = slideshow
            else:
                cell.metadata.pop("slideshow", None)
        else:
            cell.metadata["slideshow"] = {**slideshow, "slide_type": wanted}
    return changed


def notebook_paths(arguments: list[str]) -> list[Path]:
    targets = [Path(a) for a in arguments] or [ROOT / "notebooks"]
    paths = []
    for target in targets:
        paths.extend(sorted(target.glob("*.ipynb")) if target.is_dir() else [target])
    return paths


def main(arguments: list[str]) -> None:
    for path in notebook_paths(arguments):
        notebook = nbformat.read(path, as_version=4)
        if apply_rule(notebook):
            nbformat.write(notebook, path)
            print(f"updated {path}")
        else:
            print(f"unchanged {path}")


if __name__ == "__main__":
    main(sys.argv[1:])

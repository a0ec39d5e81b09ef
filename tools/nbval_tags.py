"""Move nbval's comment markers (`# NBVAL_IGNORE_OUTPUT`, ...) out of the code and into cell tags.

A marker is an instruction to the test runner, not to a student, yet as a comment it is drawn on every slide
and every page that shows the cell. nbval 0.11 reads the same instructions from cell tags (its plugin.py:
`metadata_tags`, each comment marker lower-cased with `_` as `-`, plus `raises-exception`), which no slide shows:

    # NBVAL_IGNORE_OUTPUT     -> nbval-ignore-output
    # NBVAL_CHECK_OUTPUT      -> nbval-check-output
    # NBVAL_SKIP              -> nbval-skip
    # NBVAL_RAISES_EXCEPTION  -> raises-exception

A marker line is what nbval itself reads as one: a line that is only `#`s and the marker. The line goes, the tag is
added once (a cell's other tags are kept, in order). Outputs, execution counts and every other cell are left as
they were, and a notebook with no marker is not rewritten: running the tool twice changes nothing.

    python tools/nbval_tags.py [NOTEBOOK_OR_FOLDER ...]     (default: notebooks/ and notebooks/zh/)
"""

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FOLDERS = (ROOT / "notebooks", ROOT / "notebooks" / "zh")
TAGS = {
    "NBVAL_IGNORE_OUTPUT": "nbval-ignore-output",
    "NBVAL_CHECK_OUTPUT": "nbval-check-output",
    "NBVAL_SKIP": "nbval-skip",
    "NBVAL_RAISES_EXCEPTION": "raises-exception",
}
IGNORE_OUTPUT = TAGS["NBVAL_IGNORE_OUTPUT"]


def marker(line: str) -> str | None:
    """The nbval marker ``line`` is, read as nbval reads it (plugin.py, find_comment_markers), or None."""
    stripped = line.strip()
    if not stripped.startswith("#"):
        return None
    word = stripped.lstrip("#").strip()
    return word if word in TAGS else None


def comment_markers(source: str) -> list[str]:
    return [found for line in source.splitlines() if (found := marker(line))]


def retag(cell) -> bool:
    """Move ``cell``'s marker lines into its tags; True if the cell changed."""
    if cell.cell_type != "code":
        return False
    lines = cell.source.splitlines(keepends=True)
    found = [marker(line) for line in lines]
    if not any(found):
        return False
    cell.source = "".join(line for line, word in zip(lines, found) if not word).rstrip("\n")
    tags = cell.metadata.setdefault("tags", [])
    for word in found:
        if word and TAGS[word] not in tags:
            tags.append(TAGS[word])
    return True


def convert(path: Path) -> bool:
    """Rewrite the notebook at ``path`` with tags for markers; True if it had any."""
    notebook = nbformat.read(path, as_version=4)
    changed = [retag(cell) for cell in notebook.cells]
    if any(changed):
        nbformat.write(notebook, path)
    return any(changed)


def notebooks(arguments: list[str]) -> list[Path]:
    places = [Path(a) for a in arguments] or list(DEFAULT_FOLDERS)
    return sorted(p for place in places for p in (place.glob("*.ipynb") if place.is_dir() else [place]))


def main(arguments: list[str]) -> None:
    for path in notebooks(arguments):
        if convert(path):
            print(f"markers moved to tags: {path}")


if __name__ == "__main__":
    main(sys.argv[1:])

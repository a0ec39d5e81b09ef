"""Notebook 00's map links every other notebook, 08-10 included, and every link opens a notebook that exists."""

import re
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_overview_links_every_notebook_and_only_existing_ones():
    overview = nbformat.read(NOTEBOOKS / "00_overview.ipynb", as_version=4)
    text = "".join(cell.source for cell in overview.cells if cell.cell_type == "markdown")
    linked = re.findall(r"\]\(([^)\s]+\.ipynb)\)", text)
    missing = [name for name in linked if not (NOTEBOOKS / name).is_file()]
    assert not missing, f"notebook 00 links to notebooks that do not exist: {missing}"
    others = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if not p.name.startswith("00_"))
    assert sorted(set(linked)) == others, "notebook 00's route names every other notebook once"

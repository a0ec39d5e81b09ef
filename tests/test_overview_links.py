"""Notebook 00's map links every other notebook, 08-10 included, and every link opens a notebook that exists; the
Chinese 00 (notebooks/zh/) links the Chinese twins, which sit beside it under the same names."""

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EDITIONS = [NOTEBOOKS, NOTEBOOKS / "zh"]


@pytest.mark.parametrize("folder", EDITIONS, ids=["en", "zh"])
def test_overview_links_every_notebook_and_only_existing_ones(folder):
    overview = nbformat.read(folder / "00_overview.ipynb", as_version=4)
    text = "".join(cell.source for cell in overview.cells if cell.cell_type == "markdown")
    linked = re.findall(r"\]\(([^)\s]+\.ipynb)\)", text)
    missing = [name for name in linked if not (folder / name).is_file()]
    assert not missing, f"notebook 00 links to notebooks that do not exist beside it: {missing}"
    others = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if not p.name.startswith("00_"))
    assert sorted(set(linked)) == others, "notebook 00's route names every other notebook once"


@pytest.mark.parametrize("folder", EDITIONS, ids=["en", "zh"])
def test_links_to_the_docs_and_readme_resolve_in_each_edition(folder):
    """A link from a notebook to docs/ or the README resolves from its own folder (the twins sit one level
    deeper: ../../docs/teaching.zh.md), and the Chinese edition links the Chinese pages where they exist."""
    broken, english_pages = [], []
    for path in sorted(folder.glob("*.ipynb")):
        text = "".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        for target in re.findall(r"\]\(([^)\s#]+\.(?:md|html|pdf))(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            if not (folder / target).resolve().is_file():
                broken.append(f"{path.name}: {target}")
            chinese = (folder / target).resolve().with_suffix(".zh" + Path(target).suffix)
            if folder.name == "zh" and ".zh." not in target and chinese.is_file():
                english_pages.append(f"{path.name}: {target} (link {chinese.name})")
    assert not broken, f"links that open nothing: {broken}"
    assert not english_pages, f"the Chinese edition links English pages that have a Chinese twin: {english_pages}"

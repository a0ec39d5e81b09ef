"""Every notebook but 07 holds whatever order a class re-runs its cells in (07 has its own orders, in
test_notebook07.py: its training cells are meant to refuse some of them).

After one run top to bottom (so every name exists), every code cell runs again, twice, in a scrambled order
on the same kernel: a cell that asserts must compare what it computes itself, never a value an earlier cell
left behind from other data.
"""

import random
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = [path for path in sorted(NOTEBOOKS.glob("*.ipynb")) if not path.name.startswith("07")]


def run(path: Path, sources: list[str]) -> None:
    """Run the sources in the order given on one fresh kernel; a failing cell raises CellExecutionError."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    client = NotebookClient(notebook, timeout=None, startup_timeout=600,
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_cell_holds_when_all_are_re_run_out_of_order(path):
    sources = [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    scrambled = []
    for seed in (0, 1):
        order = sources[1:]
        random.Random(seed).shuffle(order)
        scrambled += order
    run(path, [*sources, *scrambled])

"""Every notebook but 07 holds whatever order a class re-runs its cells in (07 has its own orders, in
test_notebook07.py: its training cells are meant to refuse some of them).

After one run top to bottom (so every name exists), every code cell runs again in a scrambled order on the same
kernel: a cell that asserts must compare what it computes itself, never a value an earlier cell left behind from
other data. One order, not two: a second order found nothing the first did not (issue 45), and cost a re-run of
every notebook.

The run top to bottom is nbval's (tests/nbval_patience.py adds a `re-run out of order` item after each English
notebook's last cell, on nbval's kernel; the Chinese twins' code is the same); `make test` runs it. The tests here
check that item: a notebook whose cell relies on what an earlier one left behind fails, one that does not passes.
"""

import random
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tests.test_kernel_memory import run_plugin_on

ROOT = Path(__file__).resolve().parents[1]


def re_runs(path: Path) -> bool:
    """Whether the notebook gets the scrambled re-runs: all but 07."""
    return not path.name.startswith("07")


def scrambled(sources: list[str]) -> list[str]:
    """Every code cell but the set-up (the first), once, in a fixed random order."""
    order = sources[1:]
    random.Random(0).shuffle(order)
    return order


def run(path: Path, sources: list[str]) -> None:
    """Run the sources in the order given on one fresh kernel; a failing cell raises CellExecutionError."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    client = NotebookClient(notebook, timeout=None, startup_timeout=600,
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)


def test_the_scrambled_order_re_runs_every_cell_but_the_set_up():
    sources = [f"cell {i}" for i in range(8)]
    order = scrambled(sources)
    assert sorted(order) == sources[1:] and order != sources[1:], "every cell but the first, shuffled"
    assert order == scrambled(sources), "the same order on every run"


def test_nbvals_run_fails_a_cell_that_relies_on_what_an_earlier_one_left_behind(tmp_path):
    """The plugin's `re-run out of order` item, on nbval's own run: `total += 1` then `assert total == 1` holds top
    to bottom and fails re-run; the same notebook computing its own total passes."""
    sources = {name: ["total = 0", counted, "assert total == 1, total", "print('done')"]
               for name, counted in (("leans", "total += 1"), ("computes", "total = 0\ntotal += 1"))}
    report = run_plugin_on(tmp_path, sources, outputs={name: {3: "done\n"} for name in sources})
    assert "FAILED" in report and "leans.ipynb::re-run out of order" in report, report
    assert "PASSED" in report and "computes.ipynb::re-run out of order" in report, report
    assert "this cell raised AssertionError" in report and "assert total == 1" in report, report
    assert "1 failed" in report, report

"""Notebook 06 holds whatever order a class re-runs its cells in: every cell that asserts compares what it computes.

The failure this guards against: run the model cells (built, then run), the labels cell, the model cells again,
then the one-hot cell. The one-hot loss then came from the new logits while the class-id loss it was compared with
came from the old ones (10.505 against 10.422). Scrambled re-runs of every cell: tests/test_rerun_out_of_order.py.
"""

from pathlib import Path

import nbformat

from tests.test_rerun_out_of_order import run

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_output_head.ipynb"


def code_cells() -> list[nbformat.NotebookNode]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def cell_with(cells, text: str) -> nbformat.NotebookNode:
    hits = [cell for cell in cells if text in cell.source]
    assert len(hits) == 1, f"one code cell of notebook 06 should contain {text!r}, found {len(hits)}"
    return hits[0]


def test_one_hot_and_smoothing_hold_after_the_model_cell_is_re_run():
    cells = code_cells()
    setup = cells[0]
    build = cell_with(cells, "model = wt.Transformer(trimmed)")
    forward = cell_with(cells, "logits = model.output_head(h)")
    labels = cell_with(cells, "labels = torch.randint")
    one_hot, smoothing = cell_with(cells, "F.one_hot(labels"), cell_with(cells, "smoothing=eps")
    run(NOTEBOOK, [cell.source for cell in (setup, build, forward, labels, build, forward, one_hot, smoothing,
                                           labels, smoothing, one_hot)])


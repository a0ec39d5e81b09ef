"""Notebook 07 run the way a class runs it: cells re-run, run twice, out of order, training interrupted.

Each scenario executes copies of the committed cells in a given order with nbclient, then checks that
every cell nbval checks still prints exactly what the committed notebook claims. The live-training
cell's budget is cut from 5 s to 0.5 s here: it stops after the first step past the budget either way.
"""

import copy
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_training.ipynb"


@pytest.fixture(scope="module")
def cells():
    return [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]


def find(cells, marker: str):
    found = [c for c in cells if marker in c.source]
    assert len(found) == 1, f"{len(found)} code cells hold {marker!r}"
    return found[0]


def injected(source: str, raises: bool = False):
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["raises-exception"] if raises else []})


def execute(order: list) -> list:
    """Run fresh copies of ``order``'s cells in one kernel; returns the executed copies, in order."""
    runs = []
    for number, cell in enumerate(order):
        run = copy.deepcopy(cell)
        run.id, run.outputs, run.execution_count = f"run-{number}", [], None
        run.source = run.source.replace("SECONDS = 5 ", "SECONDS = 0.5 ")
        runs.append(run)
    notebook = nbformat.v4.new_notebook(cells=runs, metadata=nbformat.read(NOTEBOOK, as_version=4).metadata)
    NotebookClient(notebook, timeout=None, startup_timeout=600,
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return runs


def shown(cell) -> str:
    """What nbval compares: printed text and plain-text results (figures by their repr), streams joined."""
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream" and output.name == "stdout":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.data.get("text/plain", ""))
    return "".join(parts)


def assert_claims_hold(order: list, runs: list) -> None:
    for committed, run in zip(order, runs):
        if "tags" in committed.metadata:  # nbval-ignore-output (not compared), or injected
            continue
        assert shown(run) == shown(committed), f"after re-running, this cell claims otherwise:\n{committed.source}"


def test_reruns_twice_and_a_continued_or_interrupted_live_run_keep_every_claim(cells):
    live, history = find(cells, "SECONDS = "), find(cells, "steps taken = losses")
    resume = find(cells, "stop_at_step_7")
    bad_files, trained = find(cells, "broken.write_bytes"), find(cells, "trained = wt.load_checkpoint")
    continued = injected(
        "first = live.run(seconds=0.5, progress=False)\n"
        "second = live.run(seconds=0.5, progress=False)\n"
        "print('continued:', first.end_step == second.start_step > 0, second.end_step == live.step)")
    interrupted = injected(
        "live = wt.Trainer(settings)\n"
        "def stop_at_step_3(trainer):\n"
        "    if trainer.step == 3:\n"
        "        raise KeyboardInterrupt\n"
        "live.run(seconds=600, on_step=stop_at_step_3)", raises=True)
    reloaded = injected(
        "wt.save_checkpoint(live, checkpoints / 'live.pt')\n"
        "again = wt.load_checkpoint(checkpoints / 'live.pt')\n"
        "print('reloaded:', again.step, len(again.losses), len(again.lrs), again.losses == live.losses)\n"
        "print('resumes at step', again.run(2, progress=False).start_step)")
    order = [*cells,                                   # Run All
             live, live, history, resume, bad_files,   # the training cell twice, then what follows it
             live, continued, history,                 # continue the same model in a cell of its own
             interrupted, history, reloaded,           # the stop button in the middle of a run
             trained, resume, *cells]                  # and Run All once more
    runs = execute(order)
    assert_claims_hold(order, runs)
    assert "continued: True True" in shown(runs[order.index(continued)])
    assert "KeyboardInterrupt" in str(runs[order.index(interrupted)].outputs)
    assert shown(runs[order.index(reloaded)]) == "reloaded: 3 3 3 True\nresumes at step 3\n"


def test_a_restarted_kernel_that_jumps_ahead_keeps_every_claim(cells):
    """Setup, then straight to the shipped model's sections, skipping the live run; the floor cell twice."""
    setup, held_out = find(cells, "settings = wt.TrainSettings()"), find(cells, "held_out = wt.held_out_pairs")
    trained, question, floor = (find(cells, "trained = wt.load_checkpoint"), find(cells, "first_batch = trained"),
                                find(cells, "smoothing_floor"))
    order = [setup, find(cells, "def stop_at_step_7"), held_out, trained, question, floor, floor,
             find(cells, "untrained = wt.Trainer"), find(cells, "one colour scale"), find(cells, "def my_teacher"),
             find(cells, "check_exercise")]
    runs = execute(order)
    assert_claims_hold(order, runs)
    assert re.search(r"floor = .* = 0\.661\d", shown(runs[order.index(floor)]))

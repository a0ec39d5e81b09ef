"""`make test` on two workers keeps together what shares a process (tests/nbval_patience.py: unit, the scheduler)."""

import subprocess
from pathlib import Path

from tests.nbval_patience import unit

ROOT = Path(__file__).resolve().parents[1]
FIT = "tests/test_slides_fit.py::test_every_slide_fits_the_screen_and_one_key_walks_every_cell"


def test_a_notebooks_cells_and_the_checks_on_its_kernel_are_one_unit_per_notebook():
    cells = [f"notebooks/06_output_head.ipynb::{name}"
             for name in ("Cell 0", "Cell 13", "kernel peak memory", "re-run out of order")]
    assert {unit(nodeid) for nodeid in cells} == {"notebook:notebooks/06_output_head.ipynb"}
    assert unit("notebooks/zh/06_output_head.ipynb::Cell 0") == "notebook:notebooks/zh/06_output_head.ipynb"


def test_each_editions_deck_walks_are_one_unit_across_the_files_that_share_them():
    assert unit(f"{FIT}[06_output_head.ipynb]") == unit(f"{FIT}[18_modern_block.ipynb]") == "decks:en"
    assert unit("tests/test_slides_dense.py::test_every_slide_is_readable[06_output_head.ipynb]") == "decks:en"
    assert unit(f"{FIT}[zh/06_output_head.ipynb]") == "decks:zh"


def test_any_other_test_is_a_unit_of_its_own():
    for nodeid in ("tests/test_slides_fit.py::test_the_walk_finds_a_slide_taller_than_the_screen",
                   "tests/test_browser.py::test_heads_slider_works_on_a_slide",
                   "tests/test_train.py::test_schedule_rises_then_falls_to_zero",
                   "tests/test_notebooks.py::test_notebook_keeps_the_conventions[06_output_head]"):
        assert unit(nodeid) == nodeid


def test_make_test_runs_every_tier_and_nbval_with_the_plugin_on_two_workers():
    dry = subprocess.run(["make", "-n", "-o", "setup", "-o", "browser", "test"], cwd=ROOT, capture_output=True,
                         text=True)
    assert dry.returncode == 0, dry.stderr
    command = dry.stdout.replace("\\\n", " ")
    assert "ruff check ." in command and "-m \"" not in command, "every tier: no marker filter"
    for part in ("-n 2", "-p tests.nbval_patience", "--nbval ", "--nbval-current-env", " tests notebooks"):
        assert part in command, part
    one = subprocess.run(["make", "-n", "-o", "setup", "-o", "browser", "test", "JOBS=1"], cwd=ROOT,
                         capture_output=True, text=True).stdout
    assert "-n " not in one, "JOBS=1: one process"

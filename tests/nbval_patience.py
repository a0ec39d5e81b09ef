"""A pytest plugin for `make test`: nbval runs each notebook once, and the checks that need a whole run share it.

    python -m pytest -p tests.nbval_patience --nbval --nbval-current-env ... notebooks

Patience. nbval gives a cell a hard-coded 5 s to deliver its output after the kernel replies. On a shared, loaded
server (a class on one JupyterHub, CI beside other jobs) the output can come later, and the cell then fails with
"Timeout of 5 seconds exceeded waiting for output" although nothing is wrong. The wait is bounded by the cell's
own timeout (--nbval-cell-timeout, 2000 s by default) instead.

One execution. nbval runs a notebook top to bottom in a fresh kernel and compares every cell's output with the
committed one (its own sanitizers and cell tags, unchanged). That run is also the one the class-budget checks
need, so each notebook gets more items after its last cell, on the same kernel, before nbval shuts it down:

- `kernel peak memory` (both editions): the kernel's own high-water mark (VmHWM) against the class budget
  (tests/test_kernel_memory.py), read after the last cell, so a model built and freed in the middle counts;
  another process's load cannot change it. It is recorded in build/kernel-peaks/en/ or zh/ and held to the
  edition's row of the peaks docs/teaching.md states (tools/kernel_peaks.py writes the recorded peaks there);
- `re-run out of order` (English, all but 07; the Chinese twins' code is token-identical, tests/
  test_zh_parity.py): every code cell again, in a scrambled order (tests/test_rerun_out_of_order.py).

Both fail rather than measure a partial run when nbval did not run every cell (`-k`, a cell that was skipped).
The cells run with history on (store_history), as JupyterLab runs them: a result kept only in `Out[n]` stays
resident there in class, so it counts here. Under `pytest -n 2` one worker runs a notebook's items, in order, on
one kernel (`unit`, TogetherScheduling).
"""

import re
from pathlib import Path

import pytest
from nbval.kernel import RunningKernel
from nbval.plugin import IPyNbCell

from tests.test_kernel_memory import (
    LIMIT_MB,
    RECORDED,
    TEACHING_DOCS,
    drift,
    over_budget,
    peak_resident_mb,
    stated_peaks,
)
from tests.test_rerun_out_of_order import re_runs, scrambled

ENGLISH = Path(__file__).resolve().parents[1] / "notebooks"
EDITION_FOLDERS = {ENGLISH: "en", ENGLISH / "zh": "zh"}  # the series' notebooks, whose peaks the docs state


def pytest_addoption(parser):
    parser.addoption("--whole-run-checks-in", default=str(ENGLISH), metavar="FOLDER",
                     help="the folder whose notebooks get the kernel peak memory and re-run checks after nbval's "
                          "run (default: the English edition, notebooks/)")


def _execute_with_history(self, cell_input, allow_stdin=None):
    return self.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False)


def pytest_configure(config):
    RunningKernel.execute_cell_input = _execute_with_history  # nbval's own passes store_history=False


def pytest_collection_modifyitems(config, items):
    whole_run = Path(config.getoption("--whole-run-checks-in")).resolve()
    files, ordered = {}, []
    for item in items:
        if isinstance(item, IPyNbCell):
            item.output_timeout = float(config.option.nbval_cell_timeout)
            files.setdefault(item.parent, []).append(item)
    for item in items:
        ordered.append(item)
        notebook = item.parent
        folder = notebook.path.parent.resolve()
        if isinstance(item, IPyNbCell) and item is files[notebook][-1] and folder in (whole_run, whole_run / "zh"):
            ordered.append(KernelPeak.from_parent(notebook, name="kernel peak memory"))
            if folder == whole_run and re_runs(notebook.path):
                ordered.append(ReRunOutOfOrder.from_parent(notebook, name="re-run out of order"))
    # The longest units first, so that two workers finish together: the decks, then the notebooks, then the rest, each
    # in its own order (the sort is stable).
    items[:] = sorted(ordered, key=lambda item: {"decks": 0, "notebook": 1}.get(unit(item.nodeid).split(":")[0], 2))


def unit(nodeid: str) -> str:
    """What must run in one worker process, in collection order: a notebook's nbval cells and the checks on their
    kernel; one edition's deck walks, which the slide checks of several files share (tests/test_slides_fit.py:
    walked); any other test on its own."""
    path, _, rest = nodeid.partition("::")
    if path.endswith(".ipynb"):
        return f"notebook:{path}"
    deck = re.fullmatch(r"test_every_slide\w*\[((zh/)?\w+\.ipynb)\]", rest)
    if path.startswith("tests/test_slides_") and deck:
        return "decks:zh" if deck.group(2) else "decks:en"
    return nodeid


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # pytest-xdist's hook, before its own answer
def pytest_xdist_make_scheduler(config, log):
    """`pytest -n N` (xdist's default `--dist load`) schedules by `unit`; another --dist is left alone."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TogetherScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with this suite's units (xdist's own `--dist loadgroup` renames node ids, which
        pytest 9 no longer lets a plugin do)."""

        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return TogetherScheduling(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After each of nbval's cells: that it ran, and the kernel's high-water mark by then."""
    try:
        return (yield)
    finally:
        kernel = item.parent.kernel if isinstance(item, IPyNbCell) else None
        if kernel is not None and kernel.is_alive() and not item.options["skip"]:
            ran = item.parent.stash.setdefault(RAN, {})
            ran[item.cell_num] = peak_resident_mb(kernel.km.provisioner.pid)


RAN = pytest.StashKey[dict]()  # an IPyNbFile's cells that ran: cell number -> the kernel's VmHWM (MB) after it


class WholeRunCheck(pytest.Item):
    """A check on the kernel nbval has just run the whole notebook in."""

    def whole_run(self) -> dict:
        notebook = self.parent
        cells = sum(1 for cell in notebook.nb.cells if cell.cell_type == "code")
        ran = notebook.stash.get(RAN, {})
        if len(ran) != cells or notebook.kernel is None or not notebook.kernel.is_alive():
            pytest.fail(f"{notebook.path.name}: nbval ran {len(ran)} of its {cells} code cells on a live kernel; "
                        f"this check needs the whole notebook run top to bottom (no -k, no skipped cell)")
        return ran

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


class KernelPeak(WholeRunCheck):
    def runtest(self):
        after_each = self.whole_run()
        peak = peak_resident_mb(self.parent.kernel.km.provisioner.pid)
        self.user_properties.append(("kernel_peak_mb", round(peak)))
        number = self.path.stem[:2]
        print(f"| {number} | {peak:.0f} MB |")
        if peak >= LIMIT_MB:
            pytest.fail(over_budget(self.path, peak, after_each))
        edition = EDITION_FOLDERS.get(self.path.parent.resolve())
        if edition:  # the series' own notebooks: the docs state their peaks
            (RECORDED / edition).mkdir(parents=True, exist_ok=True)
            (RECORDED / edition / f"{number}.txt").write_text(f"{peak:.0f}\n")
            if problem := drift(edition, number, peak, stated_peaks(TEACHING_DOCS[0].read_text(encoding="utf-8"))):
                pytest.fail(problem)


class ReRunOutOfOrder(WholeRunCheck):
    def runtest(self):
        self.whole_run()
        sources = [cell.source for cell in self.parent.nb.cells if cell.cell_type == "code"]
        client = self.parent.kernel.kc
        for source in scrambled(sources):
            reply = client.execute_interactive(source, store_history=True, allow_stdin=False, timeout=None,
                                               output_hook=lambda message: None)  # outputs are not compared here
            if reply["content"]["status"] != "ok":
                content = reply["content"]
                pytest.fail(f"{self.path.name}: after a run top to bottom, re-running its cells out of order, this "
                            f"cell raised {content.get('ename')}: {content.get('evalue')}\n{source}\n"
                            + "\n".join(content.get("traceback", [])), pytrace=False)


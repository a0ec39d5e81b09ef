"""A class shares one server: every notebook, run top to bottom in a fresh kernel, keeps that kernel's peak
resident memory under 700 MB, so thirty students fit in about 21 GB.

The peak is the kernel process's own high-water mark (VmHWM in /proc/<pid>/status: Linux, where the tests
run), read after the last cell, so a large model built and freed in the middle still counts, and other processes'
load (a parallel test run, a busy server) cannot change it. A kernel with torch, matplotlib and ipywidgets loaded
is about 350-450 MB; the rest is what a notebook builds.

The notebooks are measured on the run nbval makes of them (tests/nbval_patience.py adds a `kernel peak memory`
item after each English notebook's last cell); `make test` runs it. One notebook, its peak printed (the table
docs/teaching.md states):

    python -m pytest -p tests.nbval_patience --nbval --nbval-current-env -s notebooks/06_output_head.ipynb

The tests here check that measurement: it catches a peak that was freed again, and a notebook over the budget
fails while one under it passes.
"""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MB = 700
# docs/teaching.md's table of each notebook's peak, a row per edition (and its twin in teaching.zh.md), is the
# measurement: nbval's run records each peak in build/kernel-peaks/<edition>/ and fails a notebook whose stated peak
# is more than DRIFT_MB from it; tools/kernel_peaks.py writes the recorded peaks into both tables.
TEACHING_DOCS = (ROOT / "docs" / "teaching.md", ROOT / "docs" / "teaching.zh.md")
RECORDED = ROOT / "build" / "kernel-peaks"
EDITIONS = ("en", "zh")  # the table's rows after the header, in this order: notebooks/ and notebooks/zh/
DRIFT_MB = 100
PEAKS_TABLE = re.compile(r"( *)<!-- kernel peaks[^>]*-->\n((?:\1\|[^\n]*\|\n)+\1\|[^\n]*\|)")  # indented in a list


def stated_peaks(text: str) -> dict[str, dict[str, int]]:
    """The table's peaks by edition, then notebook number: its first row names the notebooks, each row after the
    separator gives one edition's MB (EDITIONS' order)."""
    match = PEAKS_TABLE.search(text)
    if not match:
        return {}
    numbers, _, *peaks = [[cell.strip() for cell in row.strip(" |").split("|")[1:]]
                          for row in match.group(2).splitlines()]
    return {edition: dict(zip(numbers, map(int, row))) for edition, row in zip(EDITIONS, peaks)}


def peaks_table(peaks: dict[str, dict[str, int]], header: tuple[str, ...], indent: str = "") -> str:
    """The table: ``header`` is the first column's cells, the numbers' row then one per edition."""
    numbers = sorted(set().union(*peaks.values()))
    rows = [f"| {header[0]} | " + " | ".join(numbers) + " |", "|---" * (len(numbers) + 1) + "|"]
    rows += [f"| {label} | " + " | ".join(str(peaks[edition].get(n, "")) for n in numbers) + " |"
             for label, edition in zip(header[1:], EDITIONS) if edition in peaks]
    return "\n".join(indent + row for row in rows)


def drift(edition: str, number: str, measured: float, stated: dict[str, dict[str, int]]) -> str | None:
    """What is wrong with the stated peak of ``edition``'s notebook ``number`` against this run's measurement."""
    fix = "run tools/kernel_peaks.py after `make test` (it writes the peaks nbval's run recorded)"
    which = {"en": "notebook", "zh": "the Chinese edition's notebook"}[edition]
    said = stated.get(edition, {})
    if number not in said:
        return f"docs/teaching.md's table of kernel peaks has no {number} for {edition}: {fix}"
    if abs(measured - said[number]) > DRIFT_MB:
        return (f"docs/teaching.md says {which} {number}'s kernel peaks at {said[number]} MB; nbval's run "
                f"measured {measured:.0f} MB, more than {DRIFT_MB} MB apart: {fix}")
    return None


def peak_resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kilobytes = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return kilobytes / 1024


def over_budget(path: Path, peak: float, after_each: dict[int, float]) -> str:
    """The failure: the peak, and the first code cell after which the kernel had passed the budget."""
    first = next((cell for cell, mb in sorted(after_each.items()) if mb >= LIMIT_MB), None)
    where = f" (first past it after code cell {first})" if first is not None else ""
    return (f"{path.name}: the kernel peaked at {peak:.0f} MB{where}, over the {LIMIT_MB} MB a class can give each "
            f"student (free large models after use; build shape-only models on the meta device)")


def test_the_peak_counts_memory_that_was_freed_again():
    """What a kernel builds and drops in the middle of a notebook still counts: VmHWM, not the resident set now."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "block = b'x' * (300 * 2**20)\ndel block")])  # written byte by byte, so resident, then freed
    client = NotebookClient(notebook, timeout=None, startup_timeout=600)
    with client.setup_kernel():
        before = peak_resident_mb(client.km.provisioner.pid)
        client.execute_cell(notebook.cells[0], 0)
        after = peak_resident_mb(client.km.provisioner.pid)
        now = next(int(line.split()[1]) for line in Path(f"/proc/{client.km.provisioner.pid}/status")
                   .read_text().splitlines() if line.startswith("VmRSS:")) / 1024
    assert after - before >= 290 and after - now >= 290


def test_nbvals_run_fails_a_notebook_over_the_budget_and_passes_one_under_it(tmp_path):
    """The plugin's `kernel peak memory` item, on nbval's own run of two small notebooks: 800 MB built and freed
    in a middle cell fails (naming that cell), a notebook that builds nothing passes."""
    report = run_plugin_on(tmp_path, {"big": ["x = 1", "block = b'x' * (800 * 2**20)\ndel block", "y = 2"],
                                      "small": ["x = 1", "block = b'x' * 2**20", "y = 2"]})
    assert "FAILED" in report and "big.ipynb::kernel peak memory" in report, report
    assert "PASSED" in report and "small.ipynb::kernel peak memory" in report, report
    assert "big.ipynb: the kernel peaked at" in report and "first past it after code cell 1" in report, report
    assert report.count("FAILED") == 1 and "1 failed" in report, report


def run_plugin_on(folder, notebooks: dict[str, list[str]], outputs: dict[str, dict[int, str]] | None = None) -> str:
    """For the plugin's own tests: write each notebook (name -> its code cells; ``outputs`` name -> {cell: stdout}),
    run nbval with this plugin on them in a fresh pytest, and return its report."""
    folder = Path(folder)
    for name, sources in notebooks.items():
        cells = [nbformat.v4.new_code_cell(source, execution_count=i, outputs=[])
                 for i, source in enumerate(sources, 1)]
        for index, text in (outputs or {}).get(name, {}).items():
            cells[index].outputs = [nbformat.v4.new_output("stream", text=text)]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / f"{name}.ipynb")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.nbval_patience", "--nbval", "--nbval-current-env",
         f"--whole-run-checks-in={folder}", "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(folder),
         *(str(folder / f"{name}.ipynb") for name in notebooks)],
        cwd=ROOT, capture_output=True, text=True, timeout=None)
    return result.stdout


def test_the_docs_state_a_peak_for_every_notebook_under_the_budget_in_both_languages():
    numbers = {path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    english, chinese = (stated_peaks(path.read_text(encoding="utf-8")) for path in TEACHING_DOCS)
    assert set(english) == set(EDITIONS), f"docs/teaching.md's kernel peaks: a row for each of {EDITIONS}"
    for edition, peaks in english.items():
        assert set(peaks) == numbers, f"docs/teaching.md's {edition} kernel peaks: {sorted(numbers ^ set(peaks))}"
        assert max(peaks.values()) < LIMIT_MB
    assert chinese == english, "docs/teaching.zh.md states other peaks than docs/teaching.md"


def test_a_stated_peak_is_held_to_the_measurement():
    peaks = {"en": {"06": 600, "07": 450}, "zh": {"06": 610, "07": 455}}
    table = peaks_table(peaks, ("notebook", "English, MB", "Chinese, MB"), indent="  ")
    stated = stated_peaks(f"- a list item:\n  <!-- kernel peaks -->\n{table}\n\nMore text | with a bar |\n")
    assert stated == peaks
    assert drift("en", "06", 640, stated) is None and drift("en", "07", 450 - DRIFT_MB, stated) is None
    assert "says notebook 06's kernel peaks at 600 MB; nbval's run measured 701 MB" in drift("en", "06", 701, stated)
    assert "measured 349 MB" in drift("en", "07", 349, stated)
    assert "the Chinese edition's notebook 06's kernel peaks at 610 MB" in drift("zh", "06", 711, stated)
    assert drift("zh", "06", 711 - 2, stated) is None
    assert "has no 08 for en" in drift("en", "08", 400, stated)

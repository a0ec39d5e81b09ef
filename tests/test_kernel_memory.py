"""A class shares one server: every notebook, run top to bottom in a fresh kernel, keeps that kernel's peak
resident memory under 700 MB, so thirty students fit in about 21 GB.

The peak is the kernel process's own high-water mark (VmHWM in /proc/<pid>/status: Linux, where the tests
run), read after the last cell, so a large model built and freed in the middle still counts. A kernel with
torch, matplotlib and ipywidgets loaded is about 350-450 MB; the rest is what a notebook builds.
docs/teaching.md states the measured table (run with -s to print it).
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
LIMIT_MB = 700


def peak_resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kilobytes = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return kilobytes / 1024


def run_and_measure(path: Path) -> float:
    """Run the notebook top to bottom on a fresh kernel; the kernel's peak resident set in MB."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=None, startup_timeout=600,
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        return peak_resident_mb(client.km.provisioner.pid)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_kernel_peak_memory_stays_under_the_class_budget(path):
    peak = run_and_measure(path)
    print(f"| {path.stem[:2]} | {peak:.0f} MB |")
    assert peak < LIMIT_MB, (f"{path.name}: the kernel peaked at {peak:.0f} MB, over the {LIMIT_MB} MB a class "
                             f"can give each student (free large models after use; build shape-only models on the "
                             f"meta device)")

"""What a fresh Run All costs a class's server: each notebook in a new kernel on one thread (as `make lab` runs
them), its CPU seconds counted by the kernel itself at the end (user + system, kernel start, imports and the
processes it starts included).
Goals: every notebook at most 20 CPU-seconds (issue 45), notebook 17 at most 15 (issue 44). CPU time, not wall
time: on a loaded machine a kernel waits longer but spends about the same.

    .venv/bin/python benchmarks/bench_notebooks.py [17 zh/17 ...]    # default: every notebook of both editions
"""

import argparse
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"17_real_translation": 15.0}
GOAL = 20.0
CPU_SECONDS = ("import resource as _r; print(sum(u.ru_utime + u.ru_stime for u in "
               "(_r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN))))")  # torchrun's processes too


def cpu_seconds(path: Path) -> float:
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(CPU_SECONDS))
    os.environ["OMP_NUM_THREADS"] = "1"
    NotebookClient(notebook, timeout=900, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return float(notebook.cells[-1].outputs[0]["text"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("notebooks", nargs="*", help="e.g. 17 or zh/17 (default: all)")
    args = parser.parse_args()
    every = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")) + sorted((ROOT / "notebooks" / "zh").glob("[0-9]*.ipynb"))
    chosen = [p for p in every if not args.notebooks or any(
        str(p.relative_to(ROOT / "notebooks")).startswith(name) for name in args.notebooks)]
    print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for path in chosen:
        goal = GOALS.get(path.stem, GOAL)
        spent = cpu_seconds(path)
        print(f"{path.relative_to(ROOT)!s:<48} {spent:6.1f} CPU-s (goal <= {goal:.0f}) "
              f"{'met' if spent <= goal else 'NOT MET'}", flush=True)


if __name__ == "__main__":
    main()

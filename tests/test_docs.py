"""Every solution in docs/solutions.md runs and its checks hold; teaching.md names every notebook."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCKS = re.findall(r"^## (\d\d)\n\n```python\n(.*?)^```", (DOCS / "solutions.md").read_text(), re.S | re.M)


def test_every_notebook_has_exercises_and_a_solution():
    notebooks = sorted(p.name[:2] for p in (DOCS.parent / "notebooks").glob("*.ipynb"))
    assert [number for number, _ in BLOCKS] == notebooks
    teaching = (DOCS / "teaching.md").read_text()
    for number in notebooks:
        assert f"**{number}.**" in teaching and re.search(rf"^\| {number} ", teaching, re.M)


@pytest.mark.parametrize("number,code", BLOCKS, ids=[number for number, _ in BLOCKS])
def test_solution_runs(number, code, capsys):
    exec(compile(code, f"solutions.md#{number}", "exec"), {"__name__": f"solution_{number}"})
    assert capsys.readouterr().out.strip(), "a solution should print its answer"

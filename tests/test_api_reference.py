"""`make api`: pdoc builds the API reference from the docstrings into a git-ignored folder, and it names the
entry points a teacher writing a notebook looks for."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENTRY_POINTS = ("Transformer", "ModelConfig", "trace_shapes", "load_checkpoint", "check_model", "check_exercise",
                "ask_shape", "MultiHeadAttention", "greedy_decode")


def test_the_api_reference_builds_and_names_the_entry_points(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pdoc", "walkthrough", "-o", str(tmp_path)], cwd=REPO,
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    page = (tmp_path / "walkthrough.html").read_text(encoding="utf-8")
    for name in ENTRY_POINTS:
        assert f'id="{name}"' in page, f"{name} is missing from the API reference's front page"
    assert "the first block that differs" in page, "an entry point's docstring is on its page"


def test_make_api_writes_into_a_folder_git_ignores():
    dry = subprocess.run(["make", "-n", "api"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    folder = dry.split(" -o ")[1].split()[0]
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{folder}/walkthrough.html"], cwd=REPO)
    assert ignored.returncode == 0, f"{folder}/ must be in .gitignore: it is built, never committed"

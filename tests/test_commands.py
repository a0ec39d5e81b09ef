"""The docs' commands work as written: every line of every fenced ```bash block in README.md and
docs/teaching.md runs from the repository folder, with no activated environment, and succeeds.

Three are not run here, for a reason each:
- `make lab` starts a server that runs until stopped: tests/test_packaging.py starts it, asks it for a notebook
  and its settings, and stops it;
- `make lab-zh` (the Chinese edition) likewise: the last test here starts it and asks it for its language;
- `make test` is the whole suite, this test included;
- `make check` is this suite's package tier: test_make_check_is_the_package_tier reads what it runs.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from . import lab_server

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "docs" / "teaching.md")
NOT_RUN_HERE = {"make lab": "runs until stopped (tests/test_packaging.py starts and stops it)",
                "make lab-zh": "runs until stopped (test_make_lab_zh_opens_the_chinese_edition_in_chinese)",
                "make test": "the whole suite, this test included",
                "make check": "the package tier of this very suite (test_make_check_is_the_package_tier)"}
# What a command's output must show, where the docs promise something beyond "it works".
PROMISED = {".venv/bin/python -m walkthrough trace": "[32, 10, 512]",
            ".venv/bin/jupyter labextension list": "walkthrough-classroom",
            ".venv/bin/python -m walkthrough train": "held-out"}


def documented_commands() -> list[tuple[str, str]]:
    """(file, command) for each line of a fenced bash block, its trailing comment removed."""
    found = []
    for path in DOCS:
        for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", path.read_text(), re.S | re.M):
            for line in block.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command and not command.startswith("#"):
                    found.append((path.name, command))
    return found


COMMANDS = documented_commands()


def test_the_docs_have_commands_and_every_one_is_run_or_excluded_by_name():
    commands = [command for _, command in COMMANDS]
    assert len(commands) >= 5, commands
    assert set(NOT_RUN_HERE) <= set(commands), "an exclusion names a command the docs no longer give"
    assert not any(re.match(r"(source|\.)\s+\.venv|conda activate", c) for c in commands), "no activation"


@pytest.mark.parametrize("doc,command", [c for c in COMMANDS if c[1] not in NOT_RUN_HERE],
                         ids=[c[1][:60] for c in COMMANDS if c[1] not in NOT_RUN_HERE])
def test_documented_command_works_as_written(doc, command):
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(str(ROOT / ".venv")))  # as in a fresh terminal
    done = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{doc}: `{command}` failed ({done.returncode}):\n{output[-2000:]}"
    for prefix, promise in PROMISED.items():
        if command.startswith(prefix):
            assert promise in output, f"{doc}: `{command}` does not show {promise!r}:\n{output[-2000:]}"


def test_make_lab_zh_opens_the_chinese_edition_in_chinese(tmp_path):
    """`make lab-zh` serves notebooks/zh/ with JupyterLab's own interface in Chinese (the zh-CN language pack, chosen
    in the edition's own project-local settings), and writes nothing into the user's ~/.jupyter."""
    with lab_server.started("lab-zh", tmp_path) as lab:
        chinese = sorted(p.name for p in (ROOT / "notebooks" / "zh").glob("*.ipynb"))
        assert chinese and lab.get(f"/api/contents/{chinese[0]}")["path"] == chinese[0]  # it serves notebooks/zh/
        assert lab.get("/lab/api/settings/@jupyterlab/translation-extension:plugin")["settings"]["locale"] == "zh_CN"
        menus = lab.get("/lab/api/translations/zh_CN")["data"]["jupyterlab"]  # the language pack's catalogue
        assert menus["Edit"] == ["编辑"], "the zh-CN language pack is not installed: run `make setup`"
        assert (lab.state / "zh" / "settings").is_dir() and not (lab.state / "settings").exists()
        assert not (lab.home / ".jupyter" / "lab").exists(), "make lab-zh wrote into the user's own ~/.jupyter"


def test_make_check_is_the_package_tier():
    """`make check` runs ruff and every test outside the classroom tier (tests/conftest.py), and nothing else."""
    dry = subprocess.run(["make", "-n", "-o", "setup", "check"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "ruff check ." in dry.stdout
    assert '-m "not classroom" tests' in dry.stdout and "--nbval" not in dry.stdout

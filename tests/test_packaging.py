"""environment.yml, binder/ and pyproject.toml must agree, so conda, Binder and pip users get the same series."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch-cpu"}  # the CPU build's conda-forge name


def requirement(line: str) -> tuple[str, str]:
    name, spec = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", line.strip()).groups()
    return name.lower(), spec.replace(" ", "")


def conda_requirements(path: Path) -> dict[str, str]:
    found = {}
    for entry in yaml.safe_load(path.read_text())["dependencies"]:
        for line in entry["pip"] if isinstance(entry, dict) else [entry]:
            if not line.startswith("-e"):
                name, spec = requirement(line.replace("=", "==", 1) if re.match(r"^[\w.-]+=[^=<>]", line) else line)
                found[name] = spec
    return found


def test_every_runtime_dependency_is_in_both_conda_files_with_the_same_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = dict(requirement(line) for line in project["dependencies"])
    for path in (ROOT / "environment.yml", ROOT / "binder" / "environment.yml"):
        conda = conda_requirements(path)
        for name, spec in runtime.items():
            conda_name = CONDA_NAMES.get(name, name)
            found = conda.get(conda_name)
            assert found == spec, f"{path.name}: {conda_name} should be '{spec}', is {found!r}"


def test_no_cuda_build_and_the_package_is_installed_everywhere():
    for path in (ROOT / "environment.yml", ROOT / "binder" / "environment.yml"):
        text = path.read_text()
        assert "pytorch-cpu" in text and "pytorch-cuda" not in text and "\n  - pytorch\n" not in text
    assert "- -e ." in (ROOT / "environment.yml").read_text()
    assert "pip install --no-deps -e ." in (ROOT / "binder" / "postBuild").read_text()
    assert "fonts-noto-cjk" in (ROOT / "binder" / "apt.txt").read_text().split()


def test_slides_extension_is_in_every_environment_that_opens_jupyterlab():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(line.startswith("jupyterlab-rise") for line in extras["dev"])
    for path in (ROOT / "environment.yml", ROOT / "binder" / "environment.yml"):
        assert "jupyterlab-rise" in conda_requirements(path)


def test_readme_badge_and_links_open_the_notebooks():
    readme = (ROOT / "README.md").read_text()
    assert "urlpath=lab/tree/notebooks/00_overview.ipynb" in readme
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"notebooks/{notebook.name}" in readme, f"README does not link {notebook.name}"


def test_make_lab_starts_jupyterlab_on_the_notebooks(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        lab = subprocess.Popen(["make", "lab", f"LAB_ARGS=--no-browser --ip=127.0.0.1 --port={port}"], cwd=ROOT,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "is running at" not in log.read_text() and time.monotonic() < deadline and lab.poll() is None:
            time.sleep(0.5)
        text = log.read_text()
        assert "is running at" in text, text[-2000:]
        token = re.search(r"token=([0-9a-f]+)", text).group(1)
        url = f"http://127.0.0.1:{port}/api/contents/00_overview.ipynb?content=0&token={token}"
        with urllib.request.urlopen(url, timeout=5) as answer:  # 200: it serves notebooks/ itself
            assert json.load(answer)["name"] == "00_overview.ipynb"
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=30)

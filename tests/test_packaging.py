"""environment.yml, binder/ and pyproject.toml must agree, so conda, Binder and pip users get the same series."""

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from . import lab_server

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "jupyterlab-settings"
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


def test_deck_slides_are_in_every_environment_that_opens_jupyterlab():
    """jupyterlab-slideshow presents the live notebook, so widgets work on slides; jupyterlab-rise renders a
    copy in which every ipywidget is its text repr (upstream rise #119, #126), and would take Alt+R."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(line.startswith("jupyterlab-slideshow") for line in extras["lab"])
    assert "walkthrough[lab]" in extras["test"], "make test drives the same JupyterLab as make lab"
    assert not any(line.startswith("jupyterlab-rise") for lines in extras.values() for line in lines)
    for path in (ROOT / "environment.yml", ROOT / "binder" / "environment.yml"):
        conda = conda_requirements(path)
        assert "jupyterlab-slideshow" in conda and "jupyterlab-rise" not in conda, path


def lab_schema(plugin: str) -> dict:
    """The settings schema of a JupyterLab plugin id ("package:plugin"), from this environment."""
    package, name = plugin.split(":")
    for folder in (Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas",
                   *(Path(sys.prefix) / "share" / "jupyter" / "labextensions").glob("**/schemas")):
        path = folder / package / f"{name}.json"
        if path.exists():
            return json.loads(path.read_text())
    raise AssertionError(f"no plugin {plugin} in this JupyterLab")


def test_shipped_settings_name_real_plugins_settings_and_commands():
    """A typo in overrides.json is ignored by JupyterLab without a word: check every key against its schema."""
    overrides = json.loads((SETTINGS / "overrides.json").read_text())
    for plugin, values in overrides.items():
        properties = lab_schema(plugin)["properties"]
        for key in values:
            assert key in properties, f"{plugin} has no setting {key!r}"
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    deck_keys = [s for s in overrides["@jupyterlab/shortcuts-extension:shortcuts"]["shortcuts"]
                 if s["command"] == "deck:toggle"]
    assert [s["keys"] for s in deck_keys] == [["Alt R"]]
    shortcuts = overrides["@jupyterlab/shortcuts-extension:shortcuts"]["shortcuts"]
    clicker = {s["keys"][0]: (s["args"]["direction"], s["args"]["alternate"])
               for s in shortcuts if s["command"] == "deck:go"}
    assert clicker == {"PageDown": ("down", "forward"), "ArrowRight": ("down", "forward"),
                       "PageUp": ("up", "back"), "ArrowLeft": ("up", "back")}, "one key walks every cell"
    slideshow = (Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jupyterlab-slideshow" / "static")
    assert any('toggle="deck:toggle"' in p.read_text() for p in slideshow.glob("*.js")), "the command exists"


def test_lab_settings_install_into_a_prefix_and_a_second_run_changes_nothing(tmp_path):
    command = [sys.executable, str(ROOT / "tools" / "install_lab_settings.py"), str(tmp_path)]
    subprocess.run(command, check=True, capture_output=True)
    overrides = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "walkthrough.json"
    extension = tmp_path / "share" / "jupyter" / "labextensions" / "walkthrough-classroom"
    assert overrides.read_text() == (SETTINGS / "overrides.json").read_text()
    font = extension / "static" / "NotoSansCJKsc-Regular.otf"
    assert font.read_bytes()[:4] == b"OTTO", "an OpenType (CFF) font"
    assert f'url("{font.name}")' in (extension / "static" / "classroom.css").read_text()
    package = json.loads((extension / "package.json").read_text())
    assert package["name"] == "walkthrough-classroom"
    assert (extension / package["jupyterlab"]["_build"]["load"]).exists()
    server = json.loads((tmp_path / "etc" / "jupyter" / "jupyter_server_config.json").read_text())
    assert server == json.loads((SETTINGS / "jupyter_server_config.json").read_text())
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    subprocess.run(command, check=True, capture_output=True)
    assert stamps == {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}


def test_idle_kernels_are_culled_by_the_installed_server_settings(tmp_path):
    """A closed tab's kernel is shut down after 15 minutes idle: the server make lab and Binder start reads it."""
    shipped = json.loads((SETTINGS / "jupyter_server_config.json").read_text())["MappingKernelManager"]
    assert shipped == {"cull_idle_timeout": 900, "cull_interval": 60}
    assert "15 minutes" in (ROOT / "docs" / "teaching.md").read_text() and "cull_idle_timeout = 900" in (
        ROOT / "docs" / "teaching.md").read_text()
    probe = ("from jupyter_server.serverapp import ServerApp\n"
             "app = ServerApp()\n"
             "app.initialize(argv=['--ServerApp.port=0', '--allow-root', '--ServerApp.open_browser=False'],"
             " new_httpserver=False)\n"
             "print(app.kernel_manager.cull_idle_timeout, app.kernel_manager.cull_interval)\n")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "user-config")}  # the user's own: empty
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=True)
    assert done.stdout.split()[-2:] == ["900", "60"], done.stdout + done.stderr


def test_binder_links_come_from_one_setting():
    sys.path.insert(0, str(ROOT / "tools"))
    import binder_links

    repo = binder_links.repository()
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo), repo
    readme = (ROOT / "README.md").read_text()
    links = binder_links.BINDER_URL.findall(readme)
    assert links and set(links) == {repo}, f"README's Binder links should all open {repo}: run make binder-links"
    assert "binder/repository" in readme and "make binder-links" in readme
    assert binder_links.with_links(readme, "someone/else").count("v2/gh/someone/else/HEAD") == len(links)
    for remote in ("https://github.com/someone/else.git", "git@github.com:someone/else.git"):
        assert binder_links.GITHUB_REMOTE.search(remote).group(1) == "someone/else"


def test_make_setup_and_binder_install_the_lab_settings_into_the_environment():
    assert "tools/install_lab_settings.py" in (ROOT / "Makefile").read_text()
    assert "python tools/install_lab_settings.py" in (ROOT / "binder" / "postBuild").read_text()
    installed = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "walkthrough.json"
    assert installed.read_text() == (SETTINGS / "overrides.json").read_text(), "run `make setup`"
    listing = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                             text=True, check=True)
    line = next(line for line in (listing.stdout + listing.stderr).splitlines() if "walkthrough-classroom" in line)
    assert "enabled" in line and "OK" in line, line


def test_readme_badge_and_links_open_the_notebooks():
    readme = (ROOT / "README.md").read_text()
    assert "urlpath=lab/tree/notebooks/00_overview.ipynb" in readme
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"notebooks/{notebook.name}" in readme, f"README does not link {notebook.name}"


def test_make_lab_starts_jupyterlab_on_the_notebooks(tmp_path):
    with lab_server.started("lab", tmp_path) as lab:
        assert lab.get("/api/contents/00_overview.ipynb")["name"] == "00_overview.ipynb"  # it serves notebooks/
        notification = lab.get("/lab/api/settings/@jupyterlab/apputils-extension:notification")
        assert notification["schema"]["properties"]["fetchNews"]["default"] == "false"  # the shipped defaults
        # What Deck mode saves when a teacher presents lands in the project's folder, not the user's own.
        lab.put("/lab/api/settings/jupyterlab-slideshow:plugin", {"raw": '{"active": true}'})
        assert '"active": true' in (lab.state / "settings" / "jupyterlab-slideshow" / "plugin.jupyterlab-settings"
                                    ).read_text()
        assert not (lab.home / ".jupyter" / "lab").exists(), "make lab wrote into the user's own ~/.jupyter"

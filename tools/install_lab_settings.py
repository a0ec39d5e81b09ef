"""Install the project's JupyterLab settings into this Python environment (``make setup``, binder/postBuild).

Three things go into ``sys.prefix`` (the venv or the conda env), never into the user's own settings:

- ``share/jupyter/lab/settings/overrides.d/walkthrough.json``: the defaults in jupyterlab-settings/overrides.json
  (no news pop-up; autosave off, so a class leaves the notebooks on disk as committed, Ctrl+S still saving;
  Deck-mode keys: Alt+R, and PageDown/PageUp/→/← for a clicker that walk every cell).
  They are defaults: a user's own settings, and an environment-wide overrides.json, still win.
- ``share/jupyter/labextensions/walkthrough-classroom/``: a small extension written by hand (no build) that
  sets projector type sizes, makes the browser draw Chinese with Noto Sans CJK SC (the font mplfonts
  already installs) on machines that have no CJK font, folds the file browser away, makes Deck mode
  always leavable from the keyboard, keeps the clicker's PageDown/PageUp walking the deck after a slider has
  moved, and hides the ¶ beside a slide's headings.
- ``etc/jupyter/jupyter_server_config.json``: the server settings in jupyterlab-settings/jupyter_server_config.json
  (idle kernels culled: a closed tab's kernel is shut down), merged into the file if the environment has one
  (Jupyter reads no ``.d`` folder for these).

Running it again changes nothing.

    python tools/install_lab_settings.py [PREFIX]      (default: sys.prefix)

With ``--locale``, it writes instead JupyterLab's interface language into one settings folder (``make lab-zh``:
the Chinese edition's own project-local folder, so the English edition and the user's own JupyterLab keep theirs):

    python tools/install_lab_settings.py --locale zh_CN SETTINGS_DIR
"""

import filecmp
import importlib.util
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "jupyterlab-settings"
FONT_FILE = "NotoSansCJKsc-Regular.otf"
EXTENSION = "walkthrough-classroom"


def cjk_font() -> Path:
    spec = importlib.util.find_spec("mplfonts")
    if spec is None or spec.origin is None:
        raise SystemExit("mplfonts is not installed in this environment: run `make setup` (pip install mplfonts)")
    font = Path(spec.origin).parent / "fonts" / FONT_FILE
    if not font.is_file():
        raise SystemExit(f"{font} is missing: reinstall mplfonts (pip install --force-reinstall mplfonts)")
    return font


def copy_if_changed(source: Path, target: Path) -> None:
    if target.exists() and filecmp.cmp(source, target, shallow=False):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def install_overrides(prefix: Path) -> Path:
    source = SETTINGS / "overrides.json"
    json.loads(source.read_text())  # a typo would otherwise be ignored by JupyterLab without a word
    target = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "walkthrough.json"
    copy_if_changed(source, target)
    return target


def install_font_extension(prefix: Path) -> Path:
    target = prefix / "share" / "jupyter" / "labextensions" / EXTENSION
    source = SETTINGS / "classroom"
    for path in sorted(source.rglob("*")):
        if path.is_file():
            copy_if_changed(path, target / path.relative_to(source))
    copy_if_changed(cjk_font(), target / "static" / FONT_FILE)
    return target


def install_server_config(prefix: Path) -> Path:
    target = prefix / "etc" / "jupyter" / "jupyter_server_config.json"
    config = json.loads(target.read_text()) if target.exists() else {}
    merged = {**config}
    for section, values in json.loads((SETTINGS / "jupyter_server_config.json").read_text()).items():
        merged[section] = {**config.get(section, {}), **values}
    if merged != config or not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(merged, indent=2) + "\n")
    return target


def write_locale(settings_dir: Path, locale: str) -> Path:
    """JupyterLab's interface in ``locale`` (a language pack's name, such as zh_CN) for the JupyterLab that reads
    ``settings_dir`` (its JUPYTERLAB_SETTINGS_DIR); the folder's other translation settings are kept."""
    target = Path(settings_dir) / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
    try:
        settings = json.loads(target.read_text())
    except (OSError, ValueError):  # none yet, or a file with comments JupyterLab itself wrote: start afresh
        settings = {}
    settings["locale"] = locale
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(settings, indent=2) + "\n")
    return target


def main(arguments: list[str]) -> None:
    if arguments[:1] == ["--locale"]:
        if len(arguments) != 3:
            raise SystemExit("usage: python tools/install_lab_settings.py --locale LOCALE SETTINGS_DIR")
        print(f"JupyterLab in {arguments[1]}: {write_locale(Path(arguments[2]), arguments[1])}")
        return
    prefix = Path(arguments[0]) if arguments else Path(sys.prefix)
    print(f"JupyterLab defaults: {install_overrides(prefix)}")
    print(f"Classroom extension (type sizes, CJK font, Deck keys): {install_font_extension(prefix)}")
    print(f"Server settings (idle kernels culled): {install_server_config(prefix)}")


if __name__ == "__main__":
    main(sys.argv[1:])

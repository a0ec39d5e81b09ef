"""docs/architecture.md and the README's Layout are true: every module, on its layer, and every folder, tool and
script named (issue 30: the Layout had named 19 of 34 modules)."""

import re
import subprocess
from pathlib import Path

from .test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(path.stem for path in (ROOT / "walkthrough").glob("*.py"))


def tracked(folder: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def layout_block(readme: Path) -> str:
    section = readme.read_text(encoding="utf-8").split("\n## ")
    text = next(part for part in section if part.startswith(("Layout", "目录结构")))
    return re.search(r"```\n(.*?)```", text, re.S).group(1)


def test_architecture_places_every_module_on_its_layer():
    rows = dict((module, int(layer)) for layer, module in
                re.findall(r"^\| (-?\d+) \| `(\w+)` \|", (ROOT / "docs" / "architecture.md").read_text(), re.M))
    assert sorted(rows) == MODULES, "docs/architecture.md's table and walkthrough/ differ: " \
        f"missing {sorted(set(MODULES) - set(rows))}, gone {sorted(set(rows) - set(MODULES))}"
    wrong = {module: (layer, LAYERS[module]) for module, layer in rows.items() if LAYERS[module] != layer}
    assert not wrong, f"(architecture.md, test_layers.py) disagree on the layer of: {wrong}"


def test_code_cites_only_docs_that_exist():
    cited = {(path.name, name) for path in [*ROOT.glob("walkthrough/*.py"), *ROOT.glob("tests/*.py")]
             for name in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", path.read_text(encoding="utf-8"))}
    missing = {(where, name) for where, name in cited
               if not (ROOT / name).exists() and not (ROOT / "docs" / name).exists()}
    assert not missing, f"cited but not in the repository: {sorted(missing)}"


def test_readme_layout_names_every_module_folder_tool_and_script():
    for readme in (ROOT / "README.md", ROOT / "README.zh.md"):
        block = layout_block(readme)
        top = sorted({path.split("/")[0] for path in tracked(".") if "/" in path})
        named = {
            "folder": [f"{folder}/" for folder in top],
            "module": [m for m in MODULES if m != "__init__"],
            "tool": sorted({path.split("/")[1].removesuffix(".py") for path in tracked("tools")}),
            "script": [Path(path).name for path in tracked("scripts")],
            "doc": [Path(path).name for path in tracked("docs") if path.endswith(".md") and ".zh." not in path],
        }
        missing = {kind: [name for name in names if not re.search(rf"(?<![\w-]){re.escape(name)}", block)]
                   for kind, names in named.items()}
        assert not any(missing.values()), f"{readme.name}'s Layout does not name: " \
            f"{ {kind: names for kind, names in missing.items() if names} }"

"""docs/architecture.md and the README's Layout are true: every module, on its layer, and every folder, tool and
script named (issue 30: the Layout had named 19 of 34 modules)."""

import ast
import re
import subprocess
from pathlib import Path

from .test_layers import FOLDERS, PACKAGE, graph

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(module for module in graph() if module not in {"__init__", "__main__"})


def tracked(folder: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def layout_block(readme: Path) -> str:
    section = readme.read_text(encoding="utf-8").split("\n## ")
    text = next(part for part in section if part.startswith(("Layout", "目录结构")))
    return re.search(r"```\n(.*?)```", text, re.S).group(1)


def test_architecture_names_every_module_and_each_folders_own_rule():
    """The table is checked against the code, not against another table: every module of the package (its path in
    the package, "model.attention") once, and each folder's two lines as its ``__init__.py`` says them."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `([\w.]+)` \|", text, re.M)
    assert sorted(rows) == MODULES and len(rows) == len(set(rows)), "docs/architecture.md's table and walkthrough/ " \
        f"differ: missing {sorted(set(MODULES) - set(rows))}, gone {sorted(set(rows) - set(MODULES))}"
    for folder in FOLDERS:
        said = " ".join(ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text())).split())
        assert f"**`{folder}/`**: {said}" in " ".join(text.split()), f"docs/architecture.md: say {folder}/ as its " \
            f"__init__.py does: {said}"


def test_code_cites_only_docs_that_exist():
    cited = {(path.name, name) for path in [*ROOT.glob("walkthrough/**/*.py"), *ROOT.glob("tests/*.py")]
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
            "module": [m.split(".")[-1] for m in MODULES] + [f"{folder}/" for folder in FOLDERS],
            "tool": sorted({path.split("/")[1].removesuffix(".py") for path in tracked("tools")}),
            "script": [Path(path).name for path in tracked("scripts")],
            "doc": [Path(path).name for path in tracked("docs") if path.endswith(".md") and ".zh." not in path],
        }
        missing = {kind: [name for name in names if not re.search(rf"(?<![\w-]){re.escape(name)}", block)]
                   for kind, names in named.items()}
        assert not any(missing.values()), f"{readme.name}'s Layout does not name: " \
            f"{ {kind: names for kind, names in missing.items() if names} }"

"""The package's modules depend one way, bottom to top, and ``import walkthrough`` stays light.

Imports are read from the source with ``ast`` (inside functions too), so a lazy import that only
dodges a cycle still counts.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "walkthrough"

# Each module's layer, bottom to top: a module may import only modules on a strictly lower layer. A module is named by
# its path in the package ("model.attention"); the folders are the layers' groups (docs/architecture.md).
LAYERS = {
    "i18n": -1,                                  # the reader's language: every layer's messages go through it
    "checks": 0, "steps": 0,                     # the shared validators and the table of steps: import nothing
    "trace.hooks": 0,                            # which module is running, for the tools that tag by module
    "model.config": 1,                           # the sizes, checked by the validators
    "recording": 1,                              # the hook model code reports steps through (reads the table)
    "model.masks": 2, "model.embedding": 2, "model.loss": 2, "model.rope": 2,  # parts that need only the bottom
    "model.cache": 3,                            # what a decoder keeps between steps
    "model.memory_guard": 3,                     # refuse a model this process cannot build, before building it
    "model.attention": 4, "model.flash": 4,      # flash: attention in tiles, beside it (imports neither way)
    "model.backward": 4,                         # the backward of each step by hand, beside attention
    "model.layers": 5,                           # sublayers, layers, the decoder stack, the output head
    "model.transformer": 6,                      # the encoder-decoder
    "model.gpt": 7,                              # the decoder-only model, built from the same parts
    "model.decoding": 8,                         # greedy, sampling and beam decoding of both models
    "interop.pytorch": 8, "interop.hf": 8,       # PyTorch's weights copied in; transformers models read into ours
    "trace.meta": 8,                             # our models on the meta device, one per config, for the tools
    "trace.op_tap": 8,                           # PyTorch's private op interception, for the trace alone
    "trace.tracer": 9, "trace.cost": 9,          # tools that run the model
    "trace.memory": 9, "trace.gradients": 9,     # what training saves; the gradient shapes (beside the tracer)
    "trace.tables": 10,                          # traced rows read: printed, asserted, summarised, tabled
    "tasks.data": 10, "tasks.checkpoints": 10,   # learning, beside the tools (neither imports the other)
    "text.corpus": 10,                           # the real phrases (CC-CEDICT), beside the numeral task
    "text.sentences": 10,                        # the real sentences (Tatoeba) notebook 17 translates
    "text.bpe": 11,                              # text to ids: byte-pair encoding by hand, on the corpus (16)
    "tasks.training": 11, "tasks.numerals": 12, "tasks.language_model": 13,
    "tasks.class_sentences": 12,                 # what a class types: the class set, its checks, the made pairs
    "tasks.translator": 13,                      # the Tatoeba translator (notebook 17), beside the language model
    "tasks.distributed": 12,                     # any training loop, its batch split across torchrun's processes
    "classroom.viz": 14, "classroom.quiz": 14,   # teaching
    "classroom.student": 14,                     # running a student's code, for the self-checks above it
    "classroom.exercises": 15, "classroom.model_check": 15,  # the self-checks: one function, the whole model
    "classroom.widgets": 16,
    "__init__": 17,
    "__main__": 18,                              # the command line on top
}
FLAT = {"i18n", "checks", "steps", "recording", "__init__", "__main__"}
FOLDERS = ("model", "interop", "trace", "text", "tasks", "classroom")


def module_name(path: Path) -> str:
    """A module's path in the package: walkthrough/model/attention.py is "model.attention"."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def imports_of(source: str, module: str) -> set[str]:
    """The package modules that ``module``'s ``source`` imports anywhere (module level or in functions), by their
    path in the package ("model.attention"); a folder, where an import names the folder itself."""
    package = module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif (node.module or "").split(".")[0] == "walkthrough":
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:  # "from .model import attention" names a module; "import X" a name in one
                candidate = ".".join([*target, alias.name])
                found.add(candidate if candidate in LAYERS or candidate in FOLDERS else ".".join(target))
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("walkthrough.") for alias in node.names
                         if alias.name.startswith("walkthrough."))
    return {name for name in found if name}


def graph() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path.read_text(), module_name(path)) for path in sorted(PACKAGE.rglob("*.py"))
            if path.name != "__init__.py" or path.parent == PACKAGE}


def test_every_module_has_a_layer():
    missing = sorted(set(graph()) - set(LAYERS))
    assert not missing, f"place {missing} in LAYERS (tests/test_layers.py): which layer does it belong to?"


def test_imports_go_only_downward():
    upward = [f"{module} (layer {LAYERS[module]}) imports {target} (layer {LAYERS[target]})"
              for module, targets in graph().items() if module in LAYERS
              for target in sorted(targets) if target in LAYERS and LAYERS[target] >= LAYERS[module]]
    assert not upward, "imports that go up or sideways:\n" + "\n".join(upward)


def allowed_by(folder: str) -> set[str]:
    """What a folder's ``__init__`` says its modules may import: "the flat modules", and each "name/" it lists
    outside a "(never ...)" aside; its own folder always."""
    rule = next(line for line in ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
                .splitlines() if line.startswith("May import:"))
    rule = re.sub(r"\(never [^)]*\)", "", rule)
    return {folder, *re.findall(r"\b(\w+)/", rule)} | ({"flat"} if "flat modules" in rule else set())


def test_each_folder_imports_only_what_its_init_allows():
    """The folders' own words are the rule: model/ the bottom, the tools (trace/) beside learning (tasks/, text/)."""
    outside = []
    for module, targets in graph().items():
        folder = module.split(".")[0]
        if folder not in FOLDERS:
            continue
        allowed = allowed_by(folder)
        for target in sorted(targets):
            kind = target.split(".")[0] if target.split(".")[0] in FOLDERS else "flat"
            if kind not in allowed:
                outside.append(f"{module} imports {target}: walkthrough/{folder}/__init__.py allows {sorted(allowed)}")
    assert not outside, "\n".join(outside)


def test_the_folder_rule_can_fail():
    assert allowed_by("trace") == {"trace", "model", "flat"}  # its "(never tasks/ or text/ ...)" is not a permission
    assert allowed_by("text") == {"text", "flat"}


def test_at_most_four_modules_lie_flat_beside_init_and_main():
    flat = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem not in {"__init__", "__main__"})
    assert len(flat) <= 4 and set(flat) <= FLAT, flat


def test_no_import_cycles():
    edges = graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = path[path.index(module):] + [module]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        for target in sorted(edges.get(module, ())):
            visit(target, path + [module])
        done.add(module)

    for module in edges:
        visit(module, [])


def test_the_import_reader_sees_every_form():
    source = ("from .. import checks\nfrom ..model import attention, config\nfrom .tables import shape_table\n"
              "import walkthrough.tasks.data\nfrom walkthrough.text.bpe import BPETokenizer\nimport torch\n\n"
              "def later():\n    from ..classroom.widgets import explorer\n    from . import cost\n")
    assert imports_of(source, "trace.sample") == {"checks", "model.attention", "model.config", "trace.tables",
                                                  "tasks.data", "text.bpe", "classroom.widgets", "trace.cost"}


def test_import_walkthrough_loads_neither_matplotlib_nor_ipywidgets():
    code = ("import sys\nimport walkthrough as wt\n"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))\n"
            "wt.widgets\n"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines() == ["[]", "['ipywidgets', 'matplotlib']"]  # loaded on first use, then present

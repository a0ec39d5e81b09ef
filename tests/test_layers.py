"""The package's modules depend one way, bottom to top, and ``import walkthrough`` stays light.

Imports are read from the source with ``ast`` (inside functions too), so a lazy import that only
dodges a cycle still counts.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "walkthrough"

# Each module's layer, bottom to top: a module may import only modules on a strictly lower layer.
LAYERS = {
    "i18n": -1,                                  # the reader's language: every layer's messages go through it
    "checks": 0, "steps": 0,                     # the shared validators and the table of steps: import nothing
    "hooks": 0,                                  # which module is running, for the tools that tag by module
    "config": 1,                                 # the sizes, checked by the validators
    "recording": 1,                              # the hook model code reports steps through (reads the table)
    "masks": 2, "embedding": 2, "loss": 2, "rope": 2,  # model parts that need only the bottom
    "cache": 3,                                  # what a decoder keeps between steps
    "memory_guard": 3,                           # refuse a model this process cannot build, before building it
    "attention": 4, "flash": 4,                  # flash: attention in tiles, beside it (imports neither way)
    "backward": 4,                               # the backward of each step by hand, beside attention
    "layers": 5,                                 # sublayers, layers, the decoder stack, the output head
    "model": 6,                                  # the encoder-decoder
    "gpt": 7,                                    # the decoder-only model, built from the same parts
    "decoding": 8, "pytorch": 8,                 # greedy decoding of both models; PyTorch's weights copied in
    "hf": 8,                                     # transformers models read into ours (config and weights)
    "meta": 8,                                   # our models on the meta device, one per config, for the tools
    "op_tap": 8,                                 # PyTorch's private op interception, for the trace alone
    "trace": 9, "cost": 9,                       # tools that run the model
    "memory": 9, "gradients": 9,                 # what training saves; the gradient shapes (beside trace)
    "tables": 10,                                # traced rows read: printed, asserted, summarised, tabled
    "data": 10, "checkpoints": 10,               # learning, beside the tools (neither imports the other)
    "corpus": 10,                                # the real phrases (CC-CEDICT), beside the numeral task
    "sentences": 10,                             # the real sentences (Tatoeba) notebook 17 translates
    "bpe": 11,                                   # text to ids: byte-pair encoding by hand, on the corpus (16)
    "training": 11, "numeral_task": 12, "language_model": 13,
    "translator": 13,                            # the CC-CEDICT translator (notebook 17), beside the language model
    "distributed": 12,                           # any training loop, its batch split across torchrun's processes
    "viz": 14, "quiz": 14,                       # teaching
    "student": 14,                               # running a student's code, for the self-checks above it
    "exercises": 15, "model_check": 15,          # the self-checks: one function, the whole model
    "widgets": 16,
    "__init__": 17,
    "__main__": 18,                              # the command line on top
}
TOOLS = {"op_tap", "trace", "tables", "cost", "memory", "gradients"}
LEARNING = {"data", "corpus", "sentences", "numeral_task", "language_model", "translator"}


def imports_of(path: Path) -> set[str]:
    """The package modules that ``path`` imports anywhere in its source (module level or in functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 or base.split(".")[0] == "walkthrough":
                inside = base.removeprefix("walkthrough").lstrip(".")
                if inside:
                    found.add(inside.split(".")[0])
                else:  # from . import cost, viz
                    found.update(alias.name for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[1] for alias in node.names
                         if alias.name.startswith("walkthrough."))
    return found


def graph() -> dict[str, set[str]]:
    return {path.stem: imports_of(path) for path in sorted(PACKAGE.glob("*.py"))}


def test_every_module_has_a_layer():
    missing = sorted(set(graph()) - set(LAYERS))
    assert not missing, f"place {missing} in LAYERS (tests/test_layers.py): which layer does it belong to?"


def test_imports_go_only_downward():
    upward = [f"{module} (layer {LAYERS[module]}) imports {target} (layer {LAYERS[target]})"
              for module, targets in graph().items() if module in LAYERS
              for target in sorted(targets) if target in LAYERS and LAYERS[target] >= LAYERS[module]]
    assert not upward, "imports that go up or sideways:\n" + "\n".join(upward)


def test_learning_and_tools_sit_beside_each_other():
    crossing = [f"{module} imports {target}" for module, targets in graph().items() for target in targets
                if {module, target} & TOOLS and {module, target} & LEARNING]
    assert not crossing, crossing


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


def test_the_import_reader_sees_every_form(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text("from . import cost, viz\nfrom .model import Transformer\nimport walkthrough.trace\n"
                      "from walkthrough.data import Vocab\nimport torch\n\n"
                      "def later():\n    from .widgets import explorer\n")
    assert imports_of(source) == {"cost", "viz", "model", "trace", "data", "widgets"}


def test_import_walkthrough_loads_neither_matplotlib_nor_ipywidgets():
    code = ("import sys\nimport walkthrough as wt\n"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))\n"
            "wt.widgets\n"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines() == ["[]", "['ipywidgets', 'matplotlib']"]  # loaded on first use, then present

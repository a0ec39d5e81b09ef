"""The public API: every exported name resolves, ``import *`` stays light, notebooks reach names one way, old
checkpoints keep loading, and inputs are checked once per public call."""

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import walkthrough as wt
from walkthrough.model import embedding
from walkthrough.tasks import checkpoints

ROOT = Path(__file__).resolve().parents[1]
# modules reached as wt.viz.heatmap, loaded on first use or not
NAMESPACES = {"viz", "widgets", "cost", "backward", "gradients", "memory", "distributed", "bpe", "i18n",
              "translator", "sentences", "class_sentences", "config", "rope"}


def imported_names() -> set[str]:
    """The public names ``walkthrough/__init__.py`` binds by its own imports (``from .x import name``): the API, listed
    once, in the docstring (not ``importlib`` or ``sys``, which it imports for itself)."""
    tree = ast.parse(Path(wt.__file__).read_text(encoding="utf-8"))
    return {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.level
            for alias in node.names if not (alias.asname or alias.name).startswith("_")}


def test_import_star_takes_the_names_the_docstring_lists():
    assert sorted(wt.__all__) == sorted(imported_names()), "__all__ is read from the docstring, never written out"


@pytest.mark.parametrize("statement,new", [
    ("import walkthrough.widgets", "walkthrough.classroom.widgets"),
    ("from walkthrough.model import Transformer", "walkthrough.model.transformer"),
    ("from walkthrough import checkpoints", "walkthrough.tasks.checkpoints"),
    ("from walkthrough.numeral_task import Trainer", "walkthrough.tasks.numerals"),
])
def test_an_import_path_of_before_the_folders_names_its_new_path(statement, new):
    """Issue 46: a notebook saved before the package was put in folders got a bare ModuleNotFoundError."""
    with pytest.raises(ImportError, match=rf"is now {re.escape(new)} \(the package was put in folders\)"):
        exec(statement, {})
    with pytest.raises(ImportError, match=r"cannot import name 'GPT' from 'walkthrough\.model'"):
        exec("from walkthrough.model import GPT", {})  # never in the old walkthrough/model.py: no hint
    assert all(importlib.import_module(f"walkthrough.{path}") for path in wt._MOVED.values())


def test_import_star_is_as_light_as_import():
    code = ("import sys\nfrom walkthrough import *\n"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'IPython') if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert run.stdout.split() == ["[]"]


def notebook_code(numbers=range(100)):
    """(name, source) of every code cell in both editions: notebooks/ and the Chinese twins in notebooks/zh/."""
    for folder in (ROOT / "notebooks", ROOT / "notebooks" / "zh"):
        for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
            if int(path.name[:2]) in numbers:
                for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
                    if cell["cell_type"] == "code":
                        yield str(path.relative_to(ROOT / "notebooks")), "".join(cell["source"])


def test_notebooks_reach_the_package_one_way_through_public_names():
    """Every notebook imports ``walkthrough as wt`` and use ``wt.NAME`` for an exported name, or
    ``wt.viz.X`` / ``wt.widgets.X`` / ``wt.cost.X`` for a module's public function; never a private name."""
    wrong, public = [], imported_names()
    for name, source in notebook_code():
        for line in re.findall(r"^\s*(?:from walkthrough\S* import .*|import walkthrough\S*.*)$", source, re.M):
            if line.strip() != "import walkthrough as wt":
                wrong.append(f"{name}: {line.strip()}")
        for first, second in re.findall(r"\bwt\.(\w+)(?:\.(\w+))?", source):
            if first in NAMESPACES:
                if second and (second.startswith("_") or not hasattr(getattr(wt, first), second)):
                    wrong.append(f"{name}: wt.{first}.{second}")
            elif first not in public:
                wrong.append(f"{name}: wt.{first}" + (f".{second}" if second else ""))
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_no_notebook_uses_a_private_name_of_the_package():
    private = [f"{name}: {m}" for name, source in notebook_code(range(100))
               for m in re.findall(r"\bwt(?:\.\w+)*\._\w+", source)]
    assert not private, private


def test_notebooks_find_shipped_files_from_either_edition():
    """A file shipped with the series is reached as wt.shipped_file("checkpoints", ...), which works from
    notebooks/ and notebooks/zh/ alike; a path climbing out of the notebook's folder works from one only."""
    climbing = [f"{name}: {line.strip()}" for name, source in notebook_code() for line in source.splitlines()
                if re.search(r"""Path\(\s*["']\.\.|["']\.\./""", line)]
    assert not climbing, "use wt.shipped_file(...) instead:\n" + "\n".join(climbing)
    names = {name for name, _ in notebook_code()}
    assert any(name.startswith("zh/") for name in names), "the Chinese edition's code is checked too"


def test_a_notebook_sets_its_editions_language_once_in_its_set_up_cell():
    """The English notebook says wt.set_language("en") in its first code cell, its twin "zh"; no other cell
    changes the language (a student re-running one cell must not switch the package's language)."""
    wrong, first_cells = [], {}
    for name, source in notebook_code():
        said = re.findall(r"""\bwt\.set_language\(\s*["'](\w+)["']\s*\)""", source)
        expected = "zh" if name.startswith("zh/") else "en"
        if name not in first_cells:
            first_cells[name] = said
            if said != [expected]:
                wrong.append(f"{name}: the set-up cell says {said}, not [{expected!r}]")
        elif said:
            wrong.append(f"{name}: set_language{said} outside the set-up cell")
    assert not wrong, "\n".join(wrong)


def test_the_package_docstring_lists_every_flat_name_once_by_group():
    """The rule and the groups ``make api`` shows on its front page are the package's docstring: it must name
    every flat public name once, and nothing that is not one (the namespaces are named in the rule above it)."""
    groups = re.findall(r"^- \*\*(.+?)\*\*[^:]*:(.*(?:\n  .*)*)", wt.__doc__, re.MULTILINE)
    listed = [name for _title, names in groups for name in re.findall(r"``(\w+)``", names)]
    imported = imported_names()
    namespaces = {name for name in imported if inspect.ismodule(getattr(wt, name))}
    assert len(groups) >= 5 and sorted(listed) == sorted(imported - namespaces)
    rule = re.search(r"The namespaces:(.*?)which load on first use", wt.__doc__, re.DOTALL).group(1)
    assert set(re.findall(r"``wt\.(\w+)``", rule)) == namespaces | {"viz", "widgets"}


@pytest.mark.parametrize("path", ["numerals.pt", "gpt_numerals.pt", "tatoeba.pt"])
def test_shipped_checkpoints_load_into_the_renamed_output_head(path):
    shipped = wt.shipped_file("checkpoints", path)
    loaded = wt.load_checkpoint(shipped)
    head = loaded.model.output_head.proj.weight
    raw = torch.load(shipped, map_location="cpu", weights_only=False)
    stored = raw["model"].get("generator.proj.weight", raw["model"].get("output_head.proj.weight"))
    torch.testing.assert_close(head, stored)


@pytest.mark.parametrize("make", [
    lambda: wt.Transformer(wt.ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32,
                                          num_layers=1)),
    lambda: wt.GPT(wt.GPTConfig(vocab_size=20, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=8)),
])
def test_only_the_checkpoint_reader_knows_the_old_names(make):
    """The models carry no old names (no ``.generator``, no key hook); ``checkpoints.current_names`` maps a state
    saved under them, as reading a checkpoint file does."""
    torch.manual_seed(0)
    saved = {k.replace("output_head.", "generator."): v for k, v in make().state_dict().items()}
    assert any(k.startswith("generator.") for k in saved)
    model = make()
    assert not hasattr(model, "generator")
    with pytest.raises(RuntimeError, match=r"generator\.proj\.weight"):
        model.load_state_dict(saved)
    model.load_state_dict(checkpoints.current_names(saved))  # strict: every old key found its new place
    torch.testing.assert_close(model.output_head.proj.weight, saved["generator.proj.weight"])


def test_ids_are_checked_once_per_model_call_and_a_layer_called_alone_checks_its_inputs(monkeypatch):
    calls = []
    checked = embedding.check_ids

    def counting(ids, vocab_size, name, *positions):
        calls.append(name)
        return checked(ids, vocab_size, name, *positions)

    for module in (embedding, sys.modules["walkthrough.model.transformer"], sys.modules["walkthrough.model.cache"]):
        monkeypatch.setattr(module, "check_ids", counting)
    model = wt.Transformer(wt.ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32,
                                          num_layers=2))
    model(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.long))
    assert calls == ["src", "tgt"]  # by the model; neither embedding checks again
    calls.clear()
    model.src_embed(torch.ones(2, 3, dtype=torch.long))
    assert calls == ["ids"]  # an embedding called on its own checks
    with pytest.raises(ValueError, match="query must be a"):
        model.encoder.layers[0].self_attn(torch.ones(3, 16), torch.ones(3, 16), torch.ones(3, 16))
    with pytest.raises(ValueError, match="src holds token id 20"):
        model(torch.full((2, 3), 20), torch.ones(2, 4, dtype=torch.long))


def test_a_step_is_named_once_and_an_unknown_id_is_an_error():
    from walkthrough.recording import record

    with pytest.raises(KeyError, match=r"no step 'Q transpose'.*q_transpose"):
        record("Q transpose", torch.zeros(1))  # a label is not an id, even with no trace listening
    with pytest.raises(KeyError, match="no step 'scorse'"):
        wt.STEPS["scorse"]
    rows = wt.by_step(wt.trace_shapes(wt.ModelConfig(), batch=32, src_len=10, tgt_len=4))
    scores = rows["decoder.layers.0.cross_attn", "scores"]  # by id ...
    assert scores is rows["decoder.layers.0.cross_attn", wt.STEPS["scores"].label]  # ... or by its label
    assert (scores.shape, scores.dims, scores.meaning) == ((32, 8, 4, 10), "B H L_q L_k", wt.STEPS["scores"].meaning)
    assert rows["encoder.layers.0.self_attn", "k_transpose"].dims == "B H L d_k"  # the Transformer's H_kv is H
    with pytest.raises(KeyError, match=r"not traced in 'encoder'.*output_head"):
        rows["encoder", "logits"]

"""The package speaks the reader's language (issue 20): every message has Chinese, and the Chinese notebooks show it.

The catalog is checked against the source itself (Babel extracts every ``_("...")`` and ``N_("...")`` as
``make messages`` does), so a message added without a translation fails here; then what a Chinese reader
meets is checked in Chinese: a shape table, an explorer, quiz and exercise feedback, a figure, an error.
"""

import ast
import html
import io
import os
import re
import string
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import torch
from babel.messages.extract import extract, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

import walkthrough as wt
from walkthrough import i18n

ROOT = Path(__file__).resolve().parent.parent
PO = ROOT / "walkthrough" / "locale" / "zh" / "LC_MESSAGES" / "walkthrough.po"
MO = PO.with_suffix(".mo")
CHINESE = re.compile(r"[\u4e00-\u9fff]")
SHORTEST_PIECE = 16  # shorter English pieces ("key", "where") also occur in code, names and data


def read_catalog():
    with PO.open("rb") as f:
        return read_po(f)


def extracted_ids() -> set[str]:
    """Every message id in walkthrough/ and the shape sheet's tool, found as `make messages` finds them (babel.cfg's
    map)."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    found = [message for _, _, message, _, _ in extract_from_dir(ROOT / "walkthrough", method_map, options_map)]
    with (ROOT / "tools" / "shape_sheet.py").open("rb") as f:
        found += [message for _, message, _, _ in extract("python", f)]
    return {message if isinstance(message, str) else message[0] for message in found}


@pytest.fixture
def chinese():
    wt.set_language("zh")
    yield
    wt.set_language("en")


def test_every_message_in_the_source_has_chinese_and_the_catalog_has_no_lost_message():
    catalog = read_catalog()
    in_source = extracted_ids()
    assert len(in_source) > 300  # the package's messages, not a stray few
    untranslated = sorted(m.id for m in catalog if m.id and (not m.string or m.fuzzy))
    missing = sorted(in_source - {m.id for m in catalog if m.id})
    lost = sorted({m.id for m in catalog if m.id} - in_source)
    assert not missing, f"messages with no catalog entry (run `make messages`, then translate): {missing[:10]}"
    assert not untranslated, f"messages without a (non-fuzzy) Chinese translation: {untranslated[:10]}"
    assert not lost, f"catalog entries the source no longer has (run `make messages`): {lost[:10]}"


def test_every_marked_message_is_one_babel_extracts():
    """A literal in _() inside an f-string is invisible to Babel (it would stay English in every language), and an
    f-string in _() is a different message each time: both are found in the source itself."""
    in_source = extracted_ids()
    hidden, formatted = [], []
    for path in [*sorted((ROOT / "walkthrough").rglob("*.py")), ROOT / "tools" / "shape_sheet.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "N_")
                    and node.args):
                continue
            message = node.args[0]
            where = f"{path.name}:{node.lineno}"
            if isinstance(message, ast.JoinedStr):
                formatted.append(where)
            elif isinstance(message, ast.Constant) and message.value not in in_source:
                hidden.append(f"{where} {message.value!r}")
    assert not formatted, f"an f-string inside _(): write _('... {{name}} ...').format(name=...): {formatted}"
    assert not hidden, f"messages Babel does not extract (a _() inside an f-string? move it out): {hidden}"


def test_make_messages_extracts_updates_and_compiles_the_catalog():
    dry = subprocess.run(["make", "-n", "-o", "setup", "messages"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    steps = [line for line in dry.stdout.splitlines() if "pybabel" in line]
    assert [next(w for w in ("extract", "update", "compile") if w in line) for line in steps] == \
        ["extract", "update", "compile"]
    assert "-F babel.cfg" in dry.stdout and "tools/shape_sheet.py" in dry.stdout and "-l zh" in dry.stdout


def test_the_committed_mo_is_the_compiled_po():
    compiled = io.BytesIO()
    write_mo(compiled, read_catalog())
    assert MO.read_bytes() == compiled.getvalue(), "walkthrough.mo is stale: run `make messages`"


def fields(text: str) -> Counter:
    """The placeholders of a str.format text, with their conversion and format spec: {name!r}, {count:,}."""
    return Counter((name, conversion, spec) for _, name, spec, conversion in string.Formatter().parse(text)
                   if name is not None)


def test_the_wheel_ships_the_compiled_catalog(tmp_path):
    """An installed package (pip install ., Binder, a hub) finds its Chinese: the .mo is package data."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("walkthrough-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("walkthrough/locale/zh/LC_MESSAGES/walkthrough.mo") == MO.read_bytes()


def test_every_translation_keeps_the_placeholders_of_its_english():
    broken = [(m.id, m.string) for m in read_catalog() if m.id and fields(m.id) != fields(m.string)]
    assert not broken, broken[:5]


def test_fields_sees_a_dropped_or_renamed_placeholder():
    assert fields("{a} of {b:,}") == fields("{b:,} 中的 {a}")
    assert fields("{a} of {b:,}") != fields("{a} 中的 {b}")
    assert fields("{a!r}") != fields("{c!r}")


def test_a_shape_tables_meanings_and_headers_are_chinese_and_english_comes_back(chinese):
    rows = wt.trace_shapes(wt.ModelConfig(num_layers=1))
    table = wt.shape_table(rows, within="encoder.layers.0.self_attn", steps=("scores", "weights"))
    scores = wt.STEPS["scores"]
    shown = repr(table)
    assert i18n._(scores.meaning) in shown and CHINESE.search(i18n._(scores.meaning))
    assert scores.meaning not in shown and "meaning" not in shown
    assert CHINESE.search(table._repr_html_().split("</thead>")[0])  # the headers
    assert all(row.meaning == wt.STEPS[step].meaning for row, step in zip(table.rows, ("scores", "weights")))
    wt.set_language("en")
    assert scores.meaning in repr(table) and not CHINESE.search(repr(table))


def test_an_explorer_asks_and_answers_in_chinese(chinese):
    widgets = pytest.importorskip("walkthrough.classroom.widgets")
    explorer = widgets.mask_explorer()
    prompt = explorer.children[0].value
    assert "先预测" in prompt and "Predict first" not in prompt
    explorer.control("len_1").value = 1
    explorer.control("tgt_len").value = 1
    explorer.control("len_2").value = 4  # longer than tgt_len: the explorer's own message, in Chinese
    assert CHINESE.search(explorer.text()) and "does not fit" not in explorer.text()


def test_quiz_feedback_is_chinese(chinese):
    correct, feedback = wt.check_shape_answer("[32, 64, 10]", (32, 8, 10), "B H L")
    assert not correct and CHINESE.search(feedback) and "dim" not in feedback
    correct, feedback = wt.check_shape_answer("[32, 8, 10]", (32, 8, 10), "B H L")
    assert correct and feedback.startswith("正确")


def test_an_exercise_verdict_is_chinese(chinese, capsys):
    def swapped(x, num_heads):  # the straight view: the exercise's first typical mistake
        batch, length, d_model = x.shape
        return x.view(batch, num_heads, length, d_model // num_heads)

    result = wt.check_exercise("split_heads", swapped)
    assert not result and CHINESE.search(result.message) and "cuts across tokens" not in result.message
    assert capsys.readouterr().out.strip() == result.message
    assert "还没有完成" in wt.check_exercise("split_heads", lambda x, num_heads: None).message


def test_a_figures_title_and_labels_are_chinese(chinese):
    viz = pytest.importorskip("walkthrough.classroom.viz")
    figure = viz.pe_figure(20, 16)
    table_axes = figure.axes[0]
    assert CHINESE.search(table_axes.get_title()) and CHINESE.search(table_axes.get_xlabel())
    font = table_axes.title.get_fontfamily()
    assert viz.use_cjk_font() in font  # the title can draw its Chinese characters


def test_an_error_a_notebook_can_trigger_is_chinese_and_english_after_switching_back(chinese):
    with pytest.raises(ValueError, match="超过了 max_len"):
        wt.trace_shapes(wt.ModelConfig(max_len=16), src_len=20)
    with pytest.raises(TypeError, match="必须是形状"):
        wt.check_shape_answer("[1]", torch.zeros(1))
    wt.set_language("en")
    with pytest.raises(ValueError, match="is longer than max_len"):
        wt.trace_shapes(wt.ModelConfig(max_len=16), src_len=20)


def test_a_process_the_package_starts_inherits_the_language():
    """torchrun's processes (wt.distributed.launch) print in the notebook's language: they read it from the
    environment the launch passes on."""
    code = "import walkthrough as wt; print(wt.get_language(), wt.check_shape_answer('[2]', (3,))[1])"
    for language, word in (("zh", "第 0 维"), ("en", "Dim 0")):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env=os.environ | {i18n.ENVIRONMENT: language})
        assert done.stdout.startswith(language) and word in done.stdout, done.stdout


def test_a_language_the_package_does_not_speak_is_a_clear_error():
    with pytest.raises(ValueError, match=r"language must be one of \('en', 'zh'\), got 'fr'"):
        wt.set_language("fr")
    assert wt.get_language() == "en"


# ---------------------------------------------------------------------------------------------------
# The Chinese notebooks' outputs hold no English message of the package.

def english_pieces(catalog) -> dict[str, str]:
    """Pieces of English that only an untranslated message would show: each translated message's text between
    its placeholders, of a useful length, and found neither in its own translation nor in any other.

    Step labels are left out: they are also the keys code finds traced rows by (``shape_of["model", "causal
    mask"]``), so a notebook's own code may print them as they are; a table shows them translated.
    """
    translations = [m.string for m in catalog if m.id and m.string]
    labels = {step.label for step in wt.STEPS.values()}
    pieces = {}
    for message in catalog:
        if not message.id or message.string == message.id or message.id in labels:
            continue  # a message that reads the same in Chinese (a formula such as "Q = X·W_q"), or a key
        for piece in re.split(r"\{[^{}]*\}", message.id):
            piece = piece.strip(" .,;:()\n")
            if (len(piece) >= SHORTEST_PIECE and re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", piece)
                    and not any(piece in t for t in translations)):
                pieces[piece] = message.id
    return pieces


def output_texts(notebook) -> list[str]:
    """What a notebook's outputs show as text: streams, plain text, HTML (entities decoded, tags dropped), errors."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts.append(output.get("evalue", ""))
            data = output.get("data", {})
            texts.append(data.get("text/plain", ""))
            texts.append(html.unescape(re.sub(r"<[^>]+>", " ", data.get("text/html", ""))))
    return [t if isinstance(t, str) else "".join(t) for t in texts if t]


def untranslated(notebook, pieces: dict[str, str]) -> list[str]:
    """The English messages whose pieces show in the notebook's outputs."""
    shown = "\n".join(output_texts(notebook))
    return sorted({message for piece, message in pieces.items() if piece in shown})


def test_the_scanner_finds_an_untranslated_message_planted_in_an_output():
    pieces = english_pieces(read_catalog())
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    cell = notebook.cells[0]
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<p>先预测。</p>"})]
    assert untranslated(notebook, pieces) == []
    english = wt.STEPS["scores"].meaning
    cell.outputs.append(nbformat.v4.new_output(
        "display_data", data={"text/html": f"<td style='x'>{html.escape(english)}</td>"}))
    assert untranslated(notebook, pieces) == [english]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text="✗ split_heads: x 为 [2, 3, 4]，your function raised TypeError: no")]
    assert untranslated(notebook, pieces) == ["your function raised {type}: {error}"]


CHINESE_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))


@pytest.mark.parametrize("path", CHINESE_NOTEBOOKS, ids=[p.name for p in CHINESE_NOTEBOOKS])
def test_a_chinese_notebooks_outputs_hold_no_untranslated_message(path):
    notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    found = untranslated(notebook, english_pieces(read_catalog()))
    assert not found, (f"{path.name} shows package messages in English (re-execute it after `make messages`, "
                       f"or translate them): {found[:5]}")



# ---------------------------------------------------------------------------------------------------
# What the package draws and labels for a Chinese reader: a figure's text cannot be read back from a PNG, so the
# figures are made under the zh locale and every string matplotlib was given is read from its Text artists.

ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")
# Words that stay English in the Chinese edition: names (docs/glossary.md's rows whose 中文 is the English word,
# models, libraries, units) and the symbols of the formulas (d_model, L_src).
KEPT_WORDS = {"softmax", "FlashAttention", "RoPE", "SwiGLU", "RMSNorm", "LayerNorm", "ReLU", "GELU", "SiLU", "GPT",
              "Adam", "FFN", "DDP", "FSDP", "ZeRO", "SDPA", "KiB", "MiB", "GiB", "GFLOPs", "FLOPs", "nats", "PAD",
              "sos", "eos", "sep", "pad", "unk",
              "view", "transpose", "exp", "max"}  # the last four: PyTorch's ops, as the code beside them writes them
SYMBOL = re.compile(r"^[A-Za-z](?:_[A-Za-z0-9]+)?$|^d_[a-z]+$")


def english_left(text: str) -> list[str]:
    """The English words of a label a Chinese reader sees, beyond names and symbols."""
    glossed = re.sub(r"（[^）]*）", " ", text)  # 键（key）: the English of a term, as the glossary's rule gives it
    return [w for w in ENGLISH_WORD.findall(re.sub(r"\b[A-Za-z]+_[A-Za-z0-9]+\b", " ", glossed)) if w not in KEPT_WORDS]


def drawn_texts(figure) -> list[str]:
    """Every string a figure draws, tick labels aside (they are the caller's tokens and numbers)."""
    viz = pytest.importorskip("walkthrough.classroom.viz")
    return [t.get_text() for t in viz._texts(figure) if t.get_text().strip()]


def test_english_left_sees_a_word_and_lets_names_and_symbols_be():
    assert english_left("位置 position") == ["position"]
    assert english_left("layer 0") == ["layer"]
    assert english_left("softmax 之后的 d_model，L_src 与 GFLOPs，键（key）") == []


def figure_calls():
    """One call of each figure the package draws, with the caller's own words in Chinese: any English is the
    package's."""
    viz = pytest.importorskip("walkthrough.classroom.viz")
    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(2, 3, 3), -1)  # [H, L_q, L_k]
    series = {"训练损失": [3.0, 2.0, 1.5]}
    return {
        "attention_heads": lambda: viz.attention_heads(weights, ["一", "二", "三"], ["甲", "乙", "丙"]),
        "mask_figure": lambda: viz.mask_figure({"因果掩码": wt.causal_mask(3)}, ["一", "二", "三"]),
        "pe_figure": lambda: viz.pe_figure(20, 16),
        "curve_figure": lambda: viz.curve_figure(series, title="训练"),
        "lines_figure": lambda: viz.lines_figure([1, 2, 3], series, "步", "损失", title="训练"),
        "bar_figure": lambda: viz.bar_figure(["一", "二"], [0.7, 0.3], title="候选"),
        "split_chain_figure": lambda: viz.split_chain_figure(2, 4, 16, 2),
        "head_slices_figure": lambda: viz.head_slices_figure(4, 16, 2),
        "softmax_scale_figure": lambda: viz.softmax_scale_figure(64),
        "sharing_figure": lambda: viz.sharing_figure(wt.cost.kv_sharing(8, 2)),
        "cache_figure": lambda: viz.cache_figure(2, 3, 5),
        "tile_grid_figure": lambda: viz.tile_grid_figure(32, 32, 16, 16, True),
        "online_softmax_figure": lambda: viz.online_softmax_figure(torch.randn(32), 8),
        "block_gaps_figure": lambda: viz.block_gaps_figure({"编码器": 1e-6, "解码器": 1e-5}, title="差距"),
        "gradient_norms_figure": lambda: viz.gradient_norms_figure({"6 层": {"后归一化": [1.0, 2.0]}}),
        "loss_runs_figure": lambda: viz.loss_runs_figure({"无预热": {"后归一化": [3.0, 2.0, 1.0] * 10}}, smooth=2),
        "memory_figure": lambda: viz.memory_figure([10, 20], [1e6, 4e6], 2e6, 10, 32),
        "memory_bars_figure": lambda: viz.memory_bars_figure({"权重": 1e6, "梯度": 1e6}, title="一步"),
        "beam_tree_figure": lambda: viz.beam_tree_figure([([["三"], ["二"]], [-0.1, -0.5]),
                                                          ([["三", "百"], ["二", "百"]], [-0.2, -0.9])]),
        "next_token_figure": lambda: viz.next_token_figure(torch.tensor([0.6, 0.3, 0.1]),
                                                           torch.tensor([0.7, 0.3, 0.0]), ["三", "百", "零"]),
        "translation_figure": lambda: viz.translation_figure(torch.rand(2, 3), ["三", "百"], ["三", "百", "零"],
                                                             "source (key)"),
    }


def test_every_figure_of_the_package_is_checked():
    viz = pytest.importorskip("walkthrough.classroom.viz")
    drawn = {name for name in dir(viz) if name.endswith("_figure") and callable(getattr(viz, name))}
    assert drawn | {"attention_heads"} == set(figure_calls()), "viz.heatmap draws only the caller's words"


@pytest.mark.parametrize("name", sorted(figure_calls()))
def test_a_figures_text_is_chinese(chinese, name):
    texts = drawn_texts(figure_calls()[name]())
    assert texts, f"{name} draws no text to check"
    left = {text: english_left(text) for text in texts if english_left(text)}
    assert not left, f"viz.{name} draws English under the zh locale (wrap it in _(), then `make messages`): {left}"


def test_an_explorers_controls_and_figures_are_chinese(chinese, monkeypatch):
    """Every control's label and every option a control offers, and every figure an explorer draws as it first
    renders, read by a Chinese student: all the explorers, those that take a model included."""
    widgets = pytest.importorskip("walkthrough.classroom.widgets")
    figures = []
    monkeypatch.setattr(widgets, "_output", lambda part, real=widgets._output: (
        figures.append(part) if hasattr(part, "savefig") else None, real(part))[1])
    made = widgets.every_explorer()
    assert len(made) >= 18
    for name, make in made.items():
        explorer = make()
        labels = [c.description for c in explorer.controls]
        english = [label for label in labels if not (CHINESE.search(label) or SYMBOL.match(label))]
        assert not english, f"{name}: controls labelled in English (widgets.control_labels): {english}"
        assert [explorer.control(c.keyword) for c in explorer.controls] == explorer.controls
        options = [label for c in explorer.controls for label in getattr(c, "_options_labels", ())]
        left = [label for label in options if english_left(label)]
        assert not left, f"{name}: options shown in English (label them, as modern_block_explorer does): {left}"
    texts = [text for figure in figures for text in drawn_texts(figure)]
    assert texts
    left = sorted({text for text in texts if english_left(text)})
    assert not left, f"explorer figures draw English under the zh locale: {left}"

"""Explorers and figures: a slider move re-renders; a bad combination shows a message, never a traceback;
figures say what their axes and colours mean, and draw what the code does."""

import base64
import dataclasses
import gc
import io
import re
import warnings

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import walkthrough as wt
from walkthrough import steps
from walkthrough.classroom import viz, widgets
from walkthrough.trace import tracer as trace

EXPLORERS = [widgets.shape_explorer, widgets.pe_explorer, widgets.split_explorer, widgets.scale_explorer,
             widgets.mask_explorer, widgets.cross_explorer, widgets.ffn_explorer, widgets.output_head_explorer,
             widgets.cache_explorer, widgets.gqa_explorer, widgets.torch_transformer_explorer]


@pytest.fixture(scope="module")
def trainer():
    return wt.Trainer(wt.TrainSettings(d_model=16, d_ff=32, num_layers=1, steps=2, warmup=1))


def images(explorer) -> list[bytes]:
    return [base64.b64decode(item["data"]["image/png"]) for out in explorer.outputs for item in out.outputs
            if "image/png" in item["data"]]


def colour_at(fig: Figure, ax):
    """Draws ``fig`` once; returns a function giving the RGB colour drawn at data point (x, y) of ``ax``."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())

    def colour(x: float, y: float) -> np.ndarray:
        column, row = ax.transData.transform((x, y))
        return rgba[rgba.shape[0] - int(row + 0.5), int(column + 0.5), :3].astype(int)
    return colour


# --- every explorer ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", EXPLORERS)
def test_every_explorer_renders_and_asks_first(make):
    explorer = make()
    assert explorer.text() and "⚠" not in explorer.text()
    question = explorer.children[0].value
    assert "Predict first." in question and "Before you" in question
    body = explorer.children[1]
    assert body.children[0].children == tuple(explorer.controls), "controls in a column beside the output"


def test_every_explorer_names_them_all_and_refuses_one_it_cannot_make(monkeypatch):
    made = widgets.every_explorer()
    assert {make.__name__ for make in EXPLORERS} | {"translation_explorer", "sampling_explorer"} <= set(made)
    assert widgets.every_explorer()["sampling_explorer"]().controls, "12's explorer made with the shipped GPT"
    monkeypatch.setattr(widgets, "corpus_explorer", lambda corpus: None, raising=False)
    with pytest.raises(ValueError, match="corpus_explorer needs corpus: give it arguments"):
        widgets.every_explorer()


@pytest.mark.parametrize("make", EXPLORERS)
def test_every_slider_move_re_renders(make):
    explorer = make()
    for control in explorer.controls:
        before = explorer.text(), images(explorer)
        choices = list(control.options) if hasattr(control, "options") else [control.min, control.max]
        control.value = next(v for v in choices if v != control.value)
        assert (explorer.text(), images(explorer)) != before, f"moving {control.description} changed nothing"


@pytest.mark.parametrize("make", EXPLORERS)
def test_an_error_in_render_or_drawing_becomes_one_line(make, monkeypatch):
    explorer = make()

    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed\n  on two lines")
    monkeypatch.setattr(widgets, "_output", lambda part, real=widgets._output: (
        real(part) if isinstance(part, widgets._Message) else broken()))
    control = explorer.controls[0]
    choices = list(control.options) if hasattr(control, "options") else [control.max, control.min]
    control.value = next(v for v in choices if v != control.value)
    assert explorer.text().count("⚠ drawing failed on two lines") == 2  # HTML and text forms, one line each
    assert "Traceback" not in explorer.text() and len(explorer.outputs[0].outputs) == 1
    assert all(not out.outputs for out in explorer.outputs[1:]), "stale parts stay shown"


def test_moves_leave_no_garbage_and_the_collector_and_threads_as_they_found_them():
    threads = torch.get_num_threads()
    explorer = widgets.mask_explorer()
    control = explorer.control("tgt_len")
    for value in (9, 10) * 3:
        control.value = value
    gc.collect()
    before = len(gc.get_objects())
    for value in (9, 10) * 10:
        control.value = value
    assert gc.isenabled() and torch.get_num_threads() == threads
    assert len(gc.get_objects()) - before < 100, "each figure drawn should be freed without a full collection"
    gc.disable()
    try:
        control.value = 9
        assert not gc.isenabled(), "a student's gc.disable() was undone"
    finally:
        gc.enable()


def test_defaults_come_from_the_model_config_and_trace(monkeypatch):
    monkeypatch.setattr(widgets, "BASE", wt.ModelConfig(d_model=256, num_heads=4, d_ff=1024))
    monkeypatch.setattr(widgets, "SIZES", {"batch": 3, "src_len": 7, "tgt_len": 2})
    explorer = widgets.split_explorer()
    values = {c.description: c.value for c in explorer.controls}
    assert values == {"batch": 3, "src_len": 7, "d_model": 256, "heads": 4}
    assert "[3, 4, 7, 64]" in explorer.text()
    assert widgets.scale_explorer().control("d_k").value == 64


def test_base_sizes_are_the_papers_and_the_traces():
    assert widgets.SIZES == wt.SOURCE_SIZES
    assert wt.trace_shapes(widgets.BASE) == wt.trace_shapes(widgets.BASE, **wt.SOURCE_SIZES), "the traces' defaults"
    assert widgets.BASE == wt.ModelConfig(src_vocab_size=30000, tgt_vocab_size=30000, d_model=512, num_heads=8,
                                          d_ff=2048, num_layers=6, max_len=5000, dropout=0.1, pad_id=0)
    assert widgets.SIZES == {"batch": 32, "src_len": 10, "tgt_len": 4}


def test_control_lookup_names_the_controls():
    with pytest.raises(KeyError, match="the controls are"):
        widgets.split_explorer().control("nope")


# --- one explorer each ------------------------------------------------------------------------------------

def test_split_explorer_follows_heads_and_explains_a_bad_count():
    explorer = widgets.split_explorer()
    first_picture = images(explorer)
    assert "[32, 8, 10, 64]" in explorer.text() and len(first_picture) == 1
    explorer.control("heads").value = 4
    assert "[32, 4, 10, 128]" in explorer.text() and "[32, 8, 10, 64]" not in explorer.text()
    assert images(explorer) != first_picture, "the split picture is redrawn"
    explorer.control("heads").value = 7
    text = explorer.text()
    assert "d_model=512 is not divisible by num_heads=7" in text and "Traceback" not in text
    assert not images(explorer), "a message replaces the picture too"


def test_split_picture_follows_d_model():
    explorer = widgets.split_explorer()
    before = images(explorer)
    explorer.control("d_model").value = 256
    assert "[32, 8, 10, 32]" in explorer.text() and images(explorer) != before


def test_shape_explorer_follows_d_model():
    explorer = widgets.shape_explorer()
    assert "[32, 10, 512]" in explorer.text()
    explorer.control("d_model").value = 256
    assert "[32, 10, 256]" in explorer.text() and "[32, 10, 512]" not in explorer.text()


def test_mask_explorer_explains_a_sentence_longer_than_the_batch():
    explorer = widgets.mask_explorer()
    explorer.control("tgt_len").value = 2
    assert "does not fit in tgt_len=2" in explorer.text()


def test_cross_explorer_keeps_the_students_random_state_and_draws_the_rectangle():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    explorer = widgets.cross_explorer()
    before = images(explorer)
    explorer.control("src_len").value = 15
    assert torch.equal(torch.rand(3), expected), "the explorer reseeded the global generator"
    assert "[32, 8, 4, 15]" in explorer.text() and images(explorer) != before


def test_ffn_explorer_counts_ffn_parameters():
    explorer = widgets.ffn_explorer()
    assert f"{2 * 512 * 2048 + 2048 + 512:,}" in explorer.text()


def saturation_shown(explorer) -> dict[str, tuple[float, float]]:
    """The scale explorer's numbers as shown: row name -> (without ÷√d_k, with it)."""
    text = explorer.text()
    rows = {"std": r"score std\s+([\d.]+)\s+([\d.]+)", "top": r"largest weight per row \(mean\)\s+([\d.]+)\s+([\d.]+)",
            "one_hot": r"rows near one-hot \(> [\d.]+\)\s+(\d+)\s+(\d+)"}
    return {name: tuple(float(v) for v in re.search(pattern, text).groups()) for name, pattern in rows.items()}


def test_scale_explorer_shows_saturation_growing_with_d_k():
    explorer = widgets.scale_explorer()
    assert "d_k = 64" in explorer.text() and len(images(explorer)) == 1
    shown = {64: saturation_shown(explorer)}
    picture = images(explorer)
    for d_k in (256, 16):
        explorer.control("d_k").value = d_k
        assert f"d_k = {d_k}" in explorer.text() and images(explorer) != picture
        shown[d_k] = saturation_shown(explorer)
    small, base, large = shown[16], shown[64], shown[256]
    for unscaled_grows in ("std", "top", "one_hot"):
        assert small[unscaled_grows][0] < base[unscaled_grows][0] < large[unscaled_grows][0], unscaled_grows
    assert 1.6 < large["std"][0] / base["std"][0] < 2.5 and 1.6 < base["std"][0] / small["std"][0] < 2.5  # ∝ √d_k
    assert max(s["std"][1] for s in shown.values()) - min(s["std"][1] for s in shown.values()) < 0.3  # stays ≈ 1
    assert large["one_hot"][0] > large["one_hot"][1], "at d_k 256 the scale is what keeps rows from one-hot"


@pytest.fixture
def fresh_traces():
    """Traces are remembered per arguments: forget them around a test that changes the table of steps."""
    def forget():
        for remembered in (trace._trace_pair, trace._trace_pair_step, trace._trace_gpt, trace._trace_gpt_step):
            remembered.cache_clear()
    forget()
    yield
    forget()


def test_explorer_tables_pick_steps_by_id_so_a_renamed_step_still_shows(monkeypatch, fresh_traces):
    renamed = (("k_cached", "K kept"), ("k_transpose", "K, heads first"), ("logits", "scores per word"))
    for step_id, new_label in renamed:
        monkeypatch.setitem(steps.STEPS, step_id, dataclasses.replace(steps.STEPS[step_id], label=new_label))
    for make, label in ((widgets.cache_explorer, "K kept"), (widgets.gqa_explorer, "K, heads first"),
                        (widgets.output_head_explorer, "scores per word")):
        text = make().text()
        assert label in text and "⚠" not in text, make.__name__


@pytest.mark.parametrize("make,step_id", [(widgets.cache_explorer, "k_cached"), (widgets.gqa_explorer, "k_transpose"),
                                          (widgets.output_head_explorer, "logits")])
def test_an_explorer_whose_step_was_not_traced_says_so_instead_of_an_empty_table(make, step_id, monkeypatch):
    label = steps.STEPS[step_id].label
    real = widgets.trace_shapes
    monkeypatch.setattr(widgets, "trace_shapes", lambda *a, **k: tuple(r for r in real(*a, **k) if r.step != label))
    text = make().text()
    assert f"⚠ steps: '{step_id}' ('{label}') not traced" in text and "<table" not in text


def test_gqa_explorer_shows_the_shared_k_v_only_when_heads_share_them():
    explorer = widgets.gqa_explorer()
    assert "K shared by a group" not in explorer.text() and "⚠" not in explorer.text()  # 8 K/V heads for 8 heads
    explorer.control("kv_heads").value = 2
    assert "K shared by a group" in explorer.text() and "[32, 8, 14, 64]" in explorer.text()


def test_cache_explorer_at_step_one_shows_the_first_cached_key():
    explorer = widgets.cache_explorer()
    explorer.control("step").value = 1
    assert "[32, 8, 1, 64]" in explorer.text() and "⚠" not in explorer.text()


def test_cache_explorer_bytes_are_what_a_real_cache_holds():
    """The explorer traces one layer and multiplies; a real model decoding 5 steps holds exactly those bytes."""
    sizes = {"d_model": 16, "heads": 2, "layers": 3, "batch": 2, "src_len": 4, "step": 5}
    explorer = widgets.cache_explorer()
    for name, value in sizes.items():
        explorer.control(name).value = value
    model = wt.Transformer(dataclasses.replace(widgets.BASE, d_model=16, num_heads=2, num_layers=3, dropout=0.0))
    src = torch.randint(4, 100, (2, 4))
    cache = model.eval().new_cache(src)
    with torch.no_grad():
        memory = model.encode(src)
        for _ in range(sizes["step"]):
            model.decode(torch.randint(4, 100, (2, 1)), memory, src, cache)
    for kind in ("self", "cross"):
        held = sum(t.numel() * t.element_size() for layer in cache.layers
                   for t in (getattr(layer, f"{kind}_attn").k, getattr(layer, f"{kind}_attn").v))
        assert re.search(rf"{kind} cache .* = {held:,} bytes", explorer.text()), (kind, held)


def test_translation_explorer_shows_the_numeral_and_the_models_answer(trainer):
    explorer = widgets.translation_explorer(trainer)
    assert "3,056,070   三百零五万六千零七十" in explorer.text()
    assert "model:" in explorer.text() and images(explorer)
    explorer.control("number").value = 12
    assert "十二" in explorer.text()


# --- figures ----------------------------------------------------------------------------------------------

def test_attention_heads_share_one_colour_scale_from_zero():
    weights = torch.stack([torch.full((3, 3), 1 / 3), torch.eye(3) * 0.9 + 0.05])  # flat head, sharp head
    fig = viz.attention_heads(weights, list("abc"), list("abc"))
    limits = [ax.images[0].get_clim() for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert limits == [(0.0, pytest.approx(0.95))] * 2
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1
    assert "probability" in fig.axes[-1].get_ylabel()


@pytest.mark.parametrize("draw", [
    lambda: viz.attention_heads(torch.softmax(torch.randn(2, 3, 3), -1), list("abc"), list("abc")),
    lambda: viz.heatmap(torch.rand(3, 4), list("abc"), list("wxyz"), xlabel="key", ylabel="query"),
    lambda: viz.softmax_scale_figure(16),
    lambda: viz.bar_figure(["a", "b"], [0.7, 0.3]),
    lambda: viz.mask_figure({"causal": wt.causal_mask(3)}, list("abc")),
])
def test_every_attention_panel_names_its_axes(draw):
    fig = draw()
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert panels
    for ax in panels:
        assert ax.get_xlabel() and ax.get_ylabel(), f"unnamed axis on {ax.get_title()!r}"
    names = " ".join(ax.get_xlabel() + ax.get_ylabel() for ax in fig.axes)
    assert ("query" in names and "key" in names) or "probability" in names


def test_a_masked_cell_looks_different_from_a_low_score():
    scores = torch.tensor([[0.0, 0.0], [0.0, 1.0]])  # the top-right cell: masked, but its score is the lowest too
    allowed = torch.tensor([[True, False], [True, True]])
    fig = viz.heatmap(scores, list("ab"), list("ab"), cmap="Blues", mask=allowed, xlabel="key", ylabel="query")
    colour = colour_at(fig, fig.axes[0])
    masked, low = colour(1, 0), colour(0, 0)
    assert np.abs(masked - low).sum() > 60, f"masked {masked} looks like a low score {low}"
    assert "masked" in fig.axes[-1].get_ylabel()


def test_nan_cells_are_drawn_as_masked_and_heads_take_a_mask():
    fig = viz.heatmap(torch.tensor([[0.0, float("nan")]]), cmap="Blues")
    assert "masked" in fig.axes[-1].get_ylabel()
    weights = torch.softmax(torch.randn(2, 3, 3).masked_fill(~wt.causal_mask(3), -1e9), -1)
    fig = viz.attention_heads(weights, list("abc"), list("abc"), mask=wt.causal_mask(3))
    assert "masked" in fig.get_suptitle()
    colour = colour_at(fig, fig.axes[0])
    assert np.abs(colour(2, 0) - colour(0, 0)).sum() > 60


def test_heatmap_refuses_a_mask_that_does_not_fit():
    with pytest.raises(ValueError, match="does not fit the matrix"):
        viz.heatmap(torch.rand(3, 3), mask=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be bool"):
        viz.heatmap(torch.rand(3, 3), mask=torch.ones(3, 3))


def test_pe_axis_does_not_reuse_the_formulas_i():
    fig = viz.pe_figure(20, 32)
    xlabel = fig.axes[0].get_xlabel()
    assert xlabel != "feature i" and "2i, 2i+1" in xlabel
    assert all("(i = " in text.get_text() for text in fig.axes[1].get_legend().get_texts())


def test_head_slices_show_which_tokens_head_0_gets():
    fig = viz.head_slices_figure(length=10, d_model=512, heads=8)
    right, wrong = (ax.get_title() for ax in fig.axes[:2])
    assert "head 0 gets every token, features 0–63" in right
    assert "token 0: features 0–511; token 1: features 0–127" in wrong  # 640 = L·d_k values, in memory order
    with pytest.raises(ValueError, match="not divisible"):
        viz.head_slices_figure(10, 512, 7)


def test_head_slices_colour_matches_the_real_split():
    """Head 0's cells in the picture are exactly the features the model's split_heads gives head 0."""
    length, d_model, heads = 4, 8, 2
    x = torch.arange(length * d_model, dtype=torch.float32).view(1, length, d_model)  # [1, L, D]
    head_0 = wt.MultiHeadAttention(d_model, heads).split_heads(x)[0, 0]  # [L, d_k]
    fig = viz.head_slices_figure(length, d_model, heads)
    colour = colour_at(fig, fig.axes[0])
    first_head = {int(v) for v in head_0.flatten()}
    for token in range(length):
        for feature in range(d_model):
            is_head_0 = np.abs(colour(feature, token - 0.2) - colour(0, 0)).sum() < 30  # -0.2: off the white line
            assert is_head_0 == (token * d_model + feature in first_head), (token, feature)


def test_split_chain_titles_come_from_running_the_split():
    fig = viz.split_chain_figure(batch=32, length=10, d_model=512, heads=8)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["x  [B, L, D]\n[32, 10, 512]", "view  [B, L, H, d_k]\n[32, 10, 8, 64]",
                      "transpose(1, 2)  [B, H, L, d_k]\n[32, 8, 10, 64]"]
    labels = " ".join(ax.get_xlabel() + " " + ax.get_ylabel() for ax in fig.axes)
    for side in ("D = 512", "L = 10", "H = 8", "d_k = 64"):
        assert side in labels
    assert "B = 32" in fig.get_supxlabel()
    with pytest.raises(ValueError, match="batch must be at least 1"):
        viz.split_chain_figure(0, 10, 512, 8)


def test_softmax_saturation_numbers_match_a_direct_computation():
    numbers = viz.softmax_saturation(64, queries=300, keys=10, seed=1)
    generator = torch.Generator().manual_seed(1)
    q, k = torch.randn(300, 64, generator=generator), torch.randn(10, 64, generator=generator)
    raw = q @ k.T
    assert numbers.std_unscaled == pytest.approx(raw.std().item())
    assert numbers.std_scaled == pytest.approx(raw.std().item() / 8)
    assert numbers.one_hot_unscaled == int((raw.softmax(-1).max(-1).values > viz.NEAR_ONE_HOT).sum())
    assert 6.5 < numbers.std_unscaled < 9.5 and 0.8 < numbers.std_scaled < 1.2  # √64 = 8 vs 1
    assert numbers.one_hot_unscaled > 100 > numbers.one_hot_scaled
    assert numbers.top_unscaled > numbers.top_scaled
    assert "rows near one-hot" in repr(numbers)


def test_softmax_saturates_more_as_d_k_grows():
    small, large = viz.softmax_saturation(4), viz.softmax_saturation(512)
    assert large.one_hot_unscaled > small.one_hot_unscaled
    assert abs(large.std_scaled - small.std_scaled) < 0.3  # the scale keeps the std near 1 at any d_k


def test_chinese_labels_render_without_missing_glyphs():
    assert viz.use_cjk_font() is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font" would fail here
        fig = viz.heatmap(wt.causal_mask(3).float(), list("早上好"), list("早上好"))
        fig.savefig(io.BytesIO(), format="png")  # draws every label with Agg
        own = Figure()  # a notebook's own figure, drawn into by viz, gets the font too
        viz.heatmap(wt.causal_mask(3).float(), list("早上好"), list("早上好"), ax=own.add_subplot())
        own.savefig(io.BytesIO(), format="png")
        viz.head_slices_figure(3, 8, 2, tokens=list("早上好")).savefig(io.BytesIO(), format="png")
    assert any("CJK" in f.name for f in font_manager.fontManager.ttflist)


def test_drawing_leaves_the_users_matplotlib_settings_alone():
    before = dict(matplotlib.rcParams)
    viz.heatmap(wt.causal_mask(3).float(), list("早上好"), list("早上好")).savefig(io.BytesIO(), format="png")
    viz.split_chain_figure(2, 3, 8, 2).savefig(io.BytesIO(), format="png")
    widgets.scale_explorer()
    assert dict(matplotlib.rcParams) == before


def test_torch_transformer_explorer_retraces_pytorchs_model():
    explorer = widgets.torch_transformer_explorer()
    assert "[32, 8, 10, 64]" in explorer.text()  # PyTorch's fused attention, [B, H, L, d_k]
    explorer.control("heads").value = 4
    assert "[32, 4, 10, 128]" in explorer.text()
    explorer.control("heads").value = 7
    assert "⚠" in explorer.text() and "Traceback" not in explorer.text()


def test_cache_figure_draws_one_row_per_layer_and_a_cell_per_position():
    figure = viz.cache_figure(layers=3, step=5, src_len=7)
    grow, fixed = figure.axes
    assert grow.images[0].get_array().shape[:2] == (3, 5) and fixed.images[0].get_array().shape[:2] == (3, 7)


@pytest.mark.parametrize("sizes", [(64, 4, 1, 3), (512, 8, 2, 10)])
def test_the_torch_transformer_explorer_traces_what_trace_module_traces(sizes):
    """The explorer traces nn.Transformer on plain meta tensors (no FakeTensor mode): the same rows as trace_module."""
    d_model, heads, layers, src_len = sizes
    with torch.device("meta"):
        model = torch.nn.Transformer(d_model, heads, layers, layers, 4 * d_model, batch_first=True).eval()
    expected = wt.trace_module(model, (32, src_len, d_model), (32, 4, d_model))
    assert widgets.torch_transformer_rows(*sizes) == expected

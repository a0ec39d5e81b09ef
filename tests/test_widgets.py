"""Explorers: a slider move re-renders; a bad combination shows a message, never a traceback."""

import io
import warnings

import matplotlib
import pytest
from matplotlib import font_manager
from matplotlib.figure import Figure

import walkthrough as wt
from walkthrough import viz, widgets


def shown(explorer):
    """Text of what the explorer's output area currently shows."""
    out = explorer.children[-1]
    parts = []
    for item in out.outputs:
        data = item.get("data", {})
        parts.append(data.get("text/html", "") + data.get("text/plain", "") + item.get("text", ""))
    return "\n".join(parts)


def slider(explorer, name):
    return next(w for box in explorer.children[:-1] for w in box.children if w.description == name)


def test_split_explorer_follows_heads_and_explains_a_bad_count():
    explorer = widgets.split_explorer()
    assert "[32, 8, 10, 64]" in shown(explorer)
    slider(explorer, "heads").value = 4
    assert "[32, 4, 10, 128]" in shown(explorer) and "[32, 8, 10, 64]" not in shown(explorer)
    slider(explorer, "heads").value = 7
    text = shown(explorer)
    assert "d_model=512 is not divisible by num_heads=7" in text and "Traceback" not in text


def test_shape_explorer_follows_d_model():
    explorer = widgets.shape_explorer()
    assert "[32, 10, 512]" in shown(explorer)
    slider(explorer, "d_model").value = 256
    assert "[32, 10, 256]" in shown(explorer) and "[32, 10, 512]" not in shown(explorer)


@pytest.mark.parametrize("make", [widgets.pe_explorer, widgets.mask_explorer, widgets.cross_explorer,
                                  widgets.ffn_explorer, widgets.head_explorer])
def test_every_explorer_renders(make):
    explorer = make()
    assert explorer.children[-1].outputs, "nothing shown"
    assert "⚠" not in shown(explorer)


def test_mask_explorer_explains_a_sentence_longer_than_the_batch():
    explorer = widgets.mask_explorer()
    slider(explorer, "tgt_len").value = 2
    assert "does not fit in tgt_len=2" in shown(explorer)


def test_ffn_explorer_counts_ffn_parameters():
    explorer = widgets.ffn_explorer()
    assert f"{2 * 512 * 2048 + 2048 + 512:,}" in shown(explorer)


def test_translation_explorer_shows_the_numeral_and_the_models_answer():
    trainer = wt.Trainer(wt.TrainSettings(d_model=16, d_ff=32, num_layers=1, steps=2))
    explorer = widgets.translation_explorer(trainer)
    assert "3,056,070   三百零五万六千零七十" in shown(explorer)
    assert "model:" in shown(explorer) and "image/png" in str(explorer.children[-1].outputs)
    slider(explorer, "number").value = 12
    assert "十二" in shown(explorer)


def test_chinese_labels_render_without_missing_glyphs():
    assert viz.use_cjk_font() is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font" would fail here
        fig = viz.heatmap(wt.causal_mask(3).float(), list("早上好"), list("早上好"))
        fig.savefig(io.BytesIO(), format="png")  # draws every label with Agg
        own = Figure()  # a notebook's own figure, drawn into by viz, gets the font too
        viz.heatmap(wt.causal_mask(3).float(), list("早上好"), list("早上好"), ax=own.add_subplot())
        own.savefig(io.BytesIO(), format="png")
    assert any("CJK" in f.name for f in font_manager.fontManager.ttflist)


def test_drawing_leaves_the_users_matplotlib_settings_alone():
    before = dict(matplotlib.rcParams)
    viz.heatmap(wt.causal_mask(3).float(), list("早上好"), list("早上好")).savefig(io.BytesIO(), format="png")
    assert dict(matplotlib.rcParams) == before

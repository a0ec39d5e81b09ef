"""Figure text a class can read on a 1366x768 projector: every text a figure function draws shows at least
viz.MIN_TEXT_PX tall where the notebook shows it, and the explorers' figures (fixed margins, redrawn in place)
clip no label and overlap no two tick labels.

The reference is the PNG itself: its pixel width and dpi as encoded, the browser's scaling to the narrowest place a
figure is shown (viz.EXPLORER_WIDTH_PX, measured in Chromium in Deck mode at 1366 px), and each text's size in
points: px = points / 72 * dpi * min(1, shown width / PNG width)."""

import io

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

import walkthrough as wt
from walkthrough.classroom import viz
from walkthrough.trace.cost import kv_sharing

LABELS = ["three", "seven", "hundred", "thousand", "million", "five", "<eos>", "eleven", "twenty", "and", "nine",
          "zero", "one", "two"]


def masks(length: int, lengths=(4, 3, 1)) -> dict:
    ids = torch.tensor([[1] * n + [0] * (length - n) for n in lengths])
    combined = wt.padding_mask(ids, 0) & wt.causal_mask(length)
    return {f"sentence {b + 1} (length {n})": combined[b, 0] for b, n in enumerate(lengths)}


# the explorers' calls (layout=None, their sizes), at their sliders' ends
EXPLORER_FIGURES = {
    "pe 50x512": lambda: viz.pe_figure(50, 512, layout=None),
    "pe 200x1024": lambda: viz.pe_figure(200, 1024, layout=None),
    "pe 2x4": lambda: viz.pe_figure(2, 4, layout=None),
    "mask 10": lambda: viz.mask_figure(masks(10), [f"t{i}" for i in range(10)], annotate=False, layout=None),
    "mask 1": lambda: viz.mask_figure(masks(1, (1, 1, 1)), ["t0"], annotate=False, layout=None),
    **{f"split heads {h}": lambda h=h: viz.split_chain_figure(32, 10, 512, h, layout=None, size=(9, 2.7))
       for h in (1, 4, 8, 16)},
    "split 64x32 d_model 16": lambda: viz.split_chain_figure(64, 32, 16, 16, layout=None, size=(9, 2.7)),
    "next token": lambda: viz.next_token_figure(torch.linspace(1, 0, len(LABELS)).softmax(0),
                                                torch.linspace(1, 0, len(LABELS)).softmax(0), LABELS, layout=None),
    "tiles 200x64": lambda: viz.tile_grid_figure(200, 64, 16, 5, True, layout=None, size=(3.6, 3.3)),
    "tiles 256 blocks 1": lambda: viz.tile_grid_figure(256, 256, 1, 64, True, layout=None, size=(3.6, 3.3)),
    "tiles 1x1": lambda: viz.tile_grid_figure(1, 1, 1, 1, False, layout=None, size=(3.6, 3.3)),
    "online softmax 256 by 1": lambda: viz.online_softmax_figure(torch.randn(256), 1, layout=None, size=(5.2, 3.3)),
    "online softmax 1": lambda: viz.online_softmax_figure(torch.randn(1), 64, layout=None, size=(5.2, 3.3)),
    "softmax scale 4": lambda: viz.softmax_scale_figure(4, layout=None),
    "softmax scale 512": lambda: viz.softmax_scale_figure(512, layout=None),
    **{f"sharing {h} by {kv}": lambda h=h, kv=kv: viz.sharing_figure(kv_sharing(h, kv), layout=None)
       for h, kv in ((1, 1), (16, 1), (16, 16), (12, 4))},
    # notebook 07's (words up to "seventeen", a number's characters) and 17's (BPE tokens), shortest and longest
    "translation 1x1": lambda: viz.translation_figure(torch.ones(1, 1), ["<eos>"], ["三"], "source (key)"),
    "translation numerals": lambda: viz.translation_figure(
        torch.rand(14, 12), ["seventeen", "thousand", *LABELS[:12]], list("九千九百九十九万九千九百"), "source (key)"),
    "translation phrase": lambda: viz.translation_figure(
        torch.rand(6, 9), ["▁congratulations", "▁good", "▁morning", "▁to", "▁you", "<eos>"],
        ["▁早上", "好", "▁世界", "和平", "万岁", "▁中华", "人民", "共和国", "<eos>"], "source token (key)",
        key_width=0.5),
}
# figures the notebooks show once (constrained layout)
NOTEBOOK_FIGURES = {
    "attention heads": lambda: viz.attention_heads(torch.softmax(torch.randn(8, 10, 10), -1), [f"w{i}" for i in
                                                   range(10)], [f"w{i}" for i in range(10)]),
    "softmax scale": lambda: viz.softmax_scale_figure(64),
    "sharing": lambda: viz.sharing_figure(kv_sharing(8, 2)),
    "cache": lambda: viz.cache_figure(6, 5, 10),
    "memory": lambda: viz.memory_figure([8, 16, 32], [1e6, 4e6, 16e6], 2e6, 16, 32),
    "block gaps": lambda: viz.block_gaps_figure({f"block {i}": 10.0 ** -i for i in range(12)}),
    "head slices": lambda: viz.head_slices_figure(10, 512, 8),
    "beam tree": lambda: viz.beam_tree_figure([([["three"], ["two"]], [-0.1, -2.0]),
                                               ([["three", "hundred"], ["two", "hundred"]], [-0.2, -2.1])]),
    "mask annotated": lambda: viz.mask_figure({"causal": wt.causal_mask(4)}, list("abcd")),
    "pe": lambda: viz.pe_figure(50, 128),
}


def drawn(figure):
    """The figure drawn once with Agg (so its ticks exist): its PNG's width in pixels and dpi, and its canvas."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    image = Image.open(buffer)
    return image.size[0], image.info["dpi"][0], canvas


def shown_texts(figure):
    """Every text drawn with something in it: titles, labels, legends, annotations and the tick labels in view."""
    texts = [t for t in viz._texts(figure) if t.get_visible() and t.get_text().strip()]
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for location, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels()):
                if low - 1e-9 <= location <= high + 1e-9 and label.get_visible() and label.get_text().strip():
                    texts.append(label)
    return texts


@pytest.mark.parametrize("name", [*EXPLORER_FIGURES, *NOTEBOOK_FIGURES])
def test_every_text_shows_at_least_14_px_at_1366(name):
    figure = {**EXPLORER_FIGURES, **NOTEBOOK_FIGURES}[name]()
    width_px, dpi, _canvas = drawn(figure)
    scale = min(1.0, viz.EXPLORER_WIDTH_PX / width_px)
    sizes = {t.get_text(): t.get_fontsize() / 72 * dpi * scale for t in shown_texts(figure)}
    assert sizes, "no text found"
    small = {text: round(px, 1) for text, px in sizes.items() if px < viz.MIN_TEXT_PX}
    assert not small, f"{name}: text under {viz.MIN_TEXT_PX} px on a 1366 px screen: {small}"


@pytest.fixture(params=["en", "zh"])
def language(request):
    """Each edition's labels (Chinese draws taller and in other widths), English again afterwards."""
    wt.set_language(request.param)
    yield request.param
    wt.set_language("en")


@pytest.mark.parametrize("name", EXPLORER_FIGURES)
def test_explorer_figures_clip_no_text_and_overlap_no_tick_labels(name, language):
    figure = EXPLORER_FIGURES[name]()
    _width, _dpi, canvas = drawn(figure)
    renderer = canvas.get_renderer()
    width, height = canvas.get_width_height()
    for text in shown_texts(figure):
        box = text.get_window_extent(renderer)
        assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, (
            f"{name}: {text.get_text()!r} is cut at the figure's edge: {box.bounds} in {width}x{height}")
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in shown_texts(figure) if t in axis.get_majorticklabels()]
            boxes = [t.get_window_extent(renderer) for t in labels]
            for label, a, b in zip(labels, boxes, boxes[1:]):
                if label.get_rotation() % 180:  # slanted: apart if their baselines are a line's height apart
                    apart = abs(b.x1 - a.x1) * np.sin(np.radians(label.get_rotation()))
                    assert apart >= label.get_fontsize() / 72 * figure.dpi, f"{name}: slanted labels overlap"
                else:
                    assert not a.overlaps(b), f"{name}: tick labels overlap: {a.bounds} and {b.bounds}"


@pytest.mark.parametrize("name", [*EXPLORER_FIGURES, *NOTEBOOK_FIGURES])
def test_no_two_texts_overlap(name, language):
    """Titles, axis and colour-bar labels, tick labels and annotations: no two upright texts share a pixel (slanted
    tick labels lean over each other's boxes by design; the test above holds them a line apart)."""
    figure = {**EXPLORER_FIGURES, **NOTEBOOK_FIGURES}[name]()
    _width, _dpi, canvas = drawn(figure)
    boxes = [(text, text.get_window_extent(canvas.get_renderer())) for text in shown_texts(figure)]
    touching = [(a.get_text(), b.get_text()) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
                if box_a.overlaps(box_b) and not (a.get_rotation() % 180 and b.get_rotation() % 180)]
    assert not touching, f"{name}: texts drawn over each other: {touching}"


def test_the_split_pictures_head_labels_stay_apart():
    for heads in (8, 16):
        figure = viz.split_chain_figure(32, 10, 512, heads, layout=None, size=(9, 2.7))
        _width, _dpi, canvas = drawn(figure)
        boxes = [t.get_window_extent(canvas.get_renderer()) for t in figure.axes[2].texts]
        assert len(boxes) == heads
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), heads


def test_a_figure_drawn_again_in_place_looks_as_one_drawn_from_nothing():
    """An explorer's move draws into its last figure: the picture must be the one a new figure would show."""
    for first, second in (((10, 256), (50, 512)), ((200, 1024), (2, 4))):
        reused = viz.pe_figure(*first, layout=None)
        reused = viz.pe_figure(*second, layout=None, into=reused)
        fresh = viz.pe_figure(*second, layout=None)
        assert reused is not fresh
        assert np.array_equal(png_pixels(reused), png_pixels(fresh)), (first, second)
    reused = viz.mask_figure(masks(10), [f"t{i}" for i in range(10)], annotate=False, layout=None)
    reused = viz.mask_figure(masks(4, (2, 4, 1)), [f"t{i}" for i in range(4)], annotate=False, layout=None,
                             into=reused)
    fresh = viz.mask_figure(masks(4, (2, 4, 1)), [f"t{i}" for i in range(4)], annotate=False, layout=None)
    assert np.array_equal(png_pixels(reused), png_pixels(fresh))
    for args in ((64, 64, 16, 16, True), (200, 30, 7, 5, False)):
        reused = viz.tile_grid_figure(100, 100, 8, 8, True, layout=None, size=(3.6, 3.3))
        reused = viz.tile_grid_figure(*args, layout=None, size=(3.6, 3.3), into=reused)
        fresh = viz.tile_grid_figure(*args, layout=None, size=(3.6, 3.3))
        assert np.array_equal(png_pixels(reused), png_pixels(fresh)), args
    row = torch.randn(64, generator=torch.Generator().manual_seed(0))
    reused = viz.online_softmax_figure(row, 4, layout=None, size=(5.2, 3.3))
    reused = viz.online_softmax_figure(row[:20], 16, layout=None, size=(5.2, 3.3), into=reused)
    fresh = viz.online_softmax_figure(row[:20], 16, layout=None, size=(5.2, 3.3))
    assert np.array_equal(png_pixels(reused), png_pixels(fresh))
    lengths = list(range(8, 513, 8))
    curve = [1e6 * n * n for n in lengths]
    reused = viz.memory_figure(lengths, curve, 5e8, 64, 32, layout=None)
    reused = viz.memory_figure(lengths, [10 * c for c in curve], 2e9, 256, 64, layout=None, into=reused)
    fresh = viz.memory_figure(lengths, [10 * c for c in curve], 2e9, 256, 64, layout=None)
    assert np.array_equal(png_pixels(reused), png_pixels(fresh))
    reused = viz.cache_figure(6, 30, 20)
    reused = viz.cache_figure(6, 5, 3, into=reused)
    assert np.array_equal(png_pixels(reused), png_pixels(viz.cache_figure(6, 5, 3)))
    for first, second in ((16, 16), (1, 1)), ((1, 1), (16, 4)):
        reused = viz.sharing_figure(kv_sharing(*first), layout=None)
        reused = viz.sharing_figure(kv_sharing(*second), layout=None, into=reused)
        assert np.array_equal(png_pixels(reused), png_pixels(viz.sharing_figure(kv_sharing(*second), layout=None)))
    reused = viz.softmax_scale_figure(512, layout=None)
    reused = viz.softmax_scale_figure(4, layout=None, into=reused)
    assert np.array_equal(png_pixels(reused), png_pixels(viz.softmax_scale_figure(4, layout=None)))
    for first, second in (((32, 10, 512, 8), (1, 32, 1024, 16)), ((64, 1, 16, 1), (32, 10, 512, 8))):
        reused = viz.split_chain_figure(*first, layout=None, size=(9, 2.7))
        reused = viz.split_chain_figure(*second, layout=None, size=(9, 2.7), into=reused)
        fresh = viz.split_chain_figure(*second, layout=None, size=(9, 2.7))
        assert np.array_equal(png_pixels(reused), png_pixels(fresh)), (first, second)
    weights = torch.rand(21, 10, generator=torch.Generator().manual_seed(0))
    long = (weights, [f"w{i}" for i in range(20)] + ["<eos>"], list("三百万零五千六七十八"))
    short = (weights[:3, :1], ["thousand", "zero", "<eos>"], ["零"])
    for first, second in ((long, short), (short, long)):  # the size, the slant of the keys and the margin change
        reused = viz.translation_figure(*first, "source (key)")
        reused = viz.translation_figure(*second, "source (key)", into=reused)
        assert np.array_equal(png_pixels(reused), png_pixels(viz.translation_figure(*second, "source (key)")))


def png_pixels(figure) -> np.ndarray:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    return np.asarray(Image.open(buffer))


DOLLAR_TOKENS = ["$x^2$", r"$\frac$", "a$b", "$"]


@pytest.mark.parametrize("draw,texts", [
    (lambda: viz.heatmap(torch.rand(4, 4), DOLLAR_TOKENS, DOLLAR_TOKENS), lambda fig: fig.axes[0].get_xticklabels()),
    (lambda: viz.bar_figure(DOLLAR_TOKENS, [0.4, 0.3, 0.2, 0.1]), lambda fig: fig.axes[0].get_yticklabels()),
    (lambda: viz.next_token_figure(torch.tensor([0.4, 0.3, 0.2, 0.1]), torch.tensor([0.5, 0.5, 0.0, 0.0]),
                                   DOLLAR_TOKENS), lambda fig: fig.axes[0].get_xticklabels()),
    (lambda: viz.beam_tree_figure([([[token] for token in DOLLAR_TOKENS], [-1.0, -2.0, -3.0, -4.0])]),
     lambda fig: fig.axes[0].texts),
    (lambda: viz.head_slices_figure(4, 8, 2, DOLLAR_TOKENS), lambda fig: fig.axes[0].get_yticklabels()),
], ids=["heatmap", "bar_figure", "next_token_figure", "beam_tree_figure", "head_slices_figure"])
def test_a_token_label_with_dollars_is_drawn_as_plain_text(draw, texts):
    """Issue #40: a ``$`` in a token label was read as mathtext: ``$x^2$`` drew as x², and ``$\\frac$`` raised a
    ValueError when the figure was drawn. Each label now draws as its own characters, as plain text does."""
    figure = draw()
    FigureCanvasAgg(figure).draw()  # raised ValueError (mathtext cannot parse \frac) before the fix
    renderer = figure.canvas.get_renderer()
    drawn = [text for text in texts(figure) if text.get_text()]
    assert len(drawn) == len(DOLLAR_TOKENS)
    for text, token in zip(sorted(drawn, key=lambda t: DOLLAR_TOKENS.index(
            t.get_text().split("\n")[0].replace(r"\$", "$"))), DOLLAR_TOKENS):
        shown = text.get_text().split("\n")[0]
        as_plain = figure.text(0, 0, token, parse_math=False, fontproperties=text.get_fontproperties())
        plain_width = as_plain.get_window_extent(renderer).width
        label = figure.text(0, 0, shown, fontproperties=text.get_fontproperties())
        assert label.get_window_extent(renderer).width == pytest.approx(plain_width), token

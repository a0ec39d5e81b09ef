"""Figures for the notebooks: heatmaps with token labels (Chinese included), PE plots, curves, and
pictures of the head split and of softmax without its scale.

Every function returns a matplotlib ``Figure`` built without pyplot, so nothing is drawn twice
and nothing leaks between cells; a notebook shows it by leaving it as the cell's last value.

``layout``: a figure a notebook shows once uses matplotlib's constrained layout (no label is ever
clipped); the explorers redraw on every slider move and pass ``layout=None`` (fixed margins, about
twice as fast to draw).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import torch
from matplotlib import colormaps, font_manager, rcParams
from matplotlib.axis import Axis
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize, to_rgb
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FixedLocator, LogFormatter, MaxNLocator, NullFormatter, ScalarFormatter

from ..checks import check_positive_int
from ..i18n import N_, _, ljust, width
from ..model.config import ModelConfig
from ..model.embedding import sinusoidal_table
from ..model.flash import flash_tiles, online_softmax_step

_SYSTEM_CJK_FONTS = ("Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC",
                     "Heiti SC", "Source Han Sans SC")
MASKED_COLOUR = "#c8c8c8"  # blocked cells: grey and hatched, so a masked cell never passes for a low score
PROBABILITY = N_("probability (attention weight)")
NEAR_ONE_HOT = 0.9  # a softmax row whose largest weight is above this attends to one key only
# Figures are sized for the screen they are taught on, a 1366x768 projector, not for print: a PNG of SCREEN_DPI
# pixels per inch no wider than SCREEN_WIDTH_IN fits unscaled where a notebook shows it on that screen (measured in
# Chromium with the shipped settings: a cell's output area is 1186 px wide, 1205 in Deck mode; an explorer's figures,
# beside its controls, get 932 and 951: EXPLORER_WIDTH_PX is the narrower), so text of MIN_FONT_PT points shows at
# MIN_FONT_PT * SCREEN_DPI / 72 = 14.6 px, what the back of a room can read (tests/test_figure_sizes.py measures
# every figure).
SCREEN_DPI = 100
SCREEN_WIDTH_IN = 9.0
EXPLORER_WIDTH_PX = 932
MIN_FONT_PT = 10.5
MIN_TEXT_PX = 14  # the smallest text a figure may show on the projector


@functools.cache
def use_cjk_font() -> str | None:
    """The name of a font that draws Chinese: the one bundled with ``mplfonts`` if installed, else a system one.

    Registers the bundled font with matplotlib (once) but changes no global setting: each figure
    this module draws names the font itself (see ``_cjk``). Warns once, and returns None, when no
    CJK font is available.
    """
    spec = find_spec("mplfonts")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "fonts" / "NotoSansCJKsc-Regular.otf"
        if bundled.exists():
            font_manager.fontManager.addfont(str(bundled))
    installed = {f.name for f in font_manager.fontManager.ttflist}
    name = next((n for n in _SYSTEM_CJK_FONTS if n in installed), None)
    if name is None:
        warnings.warn(_("no Chinese font found, so Chinese labels will show as boxes: "
                        "pip install mplfonts (or install fonts-noto-cjk)"), stacklevel=2)
    return name


def _cjk(draw):
    """Give every text of the figure ``draw`` returns that needs one a CJK fallback font (that figure only, no
    global setting), and size the figure for the screen (``_fit_screen``).

    Only texts with a character DejaVu Sans lacks get the fallback: laying out a text with a fallback font costs
    several milliseconds more when it is drawn, which an explorer pays for every label on every move. Tick labels
    are made when the figure is drawn, so their font goes through ``tick_params``, for an axis whose labels were
    given (numbers need no fallback).
    """
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        return screen(draw(*args, **kwargs))
    return wrapper


def screen(figure: Figure) -> Figure:
    """``figure`` (one a notebook drew itself) made ready as every figure of this module is: each text that has a
    character DejaVu Sans lacks gets a CJK fallback font, so Chinese labels draw (in that figure only), and the
    figure is sized for the screen (``_fit_screen``)."""
    name = use_cjk_font()
    if name is not None:
        family = ["DejaVu Sans", name]  # a list: each glyph comes from the first font that has it
        for text in _texts(figure):
            if _needs_fallback(text.get_text()):
                text.set_fontfamily(family)
        for ax in figure.axes:
            for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
                if _labels_need_fallback(axis):
                    ax.tick_params(axis=which, labelfontfamily=family)
    _fit_screen(figure)
    return figure


@functools.cache
def _latin_glyphs() -> frozenset[int]:
    """The characters DejaVu Sans (matplotlib's own font) draws."""
    return frozenset(font_manager.get_font(font_manager.findfont("DejaVu Sans")).get_charmap())


def _needs_fallback(text: str) -> bool:
    glyphs = _latin_glyphs()
    return any(ord(character) not in glyphs for character in text if not character.isspace())


def _labels_need_fallback(axis: Axis) -> bool:
    """Whether an axis's tick labels may need the CJK font: labels given by hand that have a character DejaVu Sans
    lacks; numbers drawn by a numeric formatter never do, and any other formatter is assumed to."""
    formatter = axis.get_major_formatter()
    if isinstance(formatter, (ScalarFormatter, LogFormatter, NullFormatter)):
        return False
    labels = formatter.seq if isinstance(formatter, FixedFormatter) else None
    given = getattr(formatter, "func", None)  # set_ticklabels keeps its labels as {tick: label} in a partial
    if isinstance(given, functools.partial) and given.args and isinstance(given.args[0], dict):
        labels = given.args[0].values()
    return labels is None or any(_needs_fallback(str(label)) for label in labels)


def _fit_screen(figure: Figure) -> None:
    """SCREEN_DPI pixels per inch, at most SCREEN_WIDTH_IN wide, no text smaller than MIN_FONT_PT (tick labels
    included), so the figure shows unscaled in a notebook on a 1366 px screen with every word readable."""
    figure.set_dpi(SCREEN_DPI)
    width, height = figure.get_size_inches()
    if width > SCREEN_WIDTH_IN:
        figure.set_size_inches(SCREEN_WIDTH_IN, height)
    for text in _texts(figure):
        if text.get_fontsize() < MIN_FONT_PT:
            text.set_fontsize(MIN_FONT_PT)
    for ax in figure.axes:
        for axis, name in ((ax.xaxis, "xtick"), (ax.yaxis, "ytick")):
            size = axis.get_tick_params().get("labelsize", rcParams[f"{name}.labelsize"])  # "medium": rc's default
            if FontProperties(size=size).get_size_in_points() < MIN_FONT_PT:
                axis.set_tick_params(labelsize=MIN_FONT_PT)
            if isinstance(axis.get_major_locator(), FixedLocator):  # labels given by hand: their ticks exist
                for label in axis.get_ticklabels():
                    if label.get_fontsize() < MIN_FONT_PT:
                        label.set_fontsize(MIN_FONT_PT)


def _texts(artist):
    """Every Text under ``artist`` except tick labels. An axis is not walked into: listing its ticks would
    make all of them (matplotlib makes ticks lazily, and making them is most of the cost of a figure)."""
    for child in artist.get_children():
        if isinstance(child, Axis):
            yield from (child.label, child.offsetText)
            continue
        if isinstance(child, Text):
            yield child
        yield from _texts(child)


def _as_numpy(matrix) -> np.ndarray:
    """A 2-D tensor or array as a float numpy array (a copy, so it can be edited)."""
    if isinstance(matrix, torch.Tensor):
        if matrix.dim() != 2:
            raise ValueError(_("matrix must be 2-D to draw, got shape {matrix_shape}; pick one head/sentence").format(
                matrix_shape=list(matrix.shape)))
        return matrix.detach().float().cpu().numpy().copy()
    return np.array(matrix, dtype=float)


def _allowed(mask, shape: tuple[int, ...]) -> np.ndarray:
    """A mask (True = may attend) as a bool array of ``shape``, or a clear error."""
    allowed = mask.detach().cpu().numpy() if isinstance(mask, torch.Tensor) else np.asarray(mask)
    if allowed.dtype != bool:
        raise TypeError(_("mask must be bool (True = may attend), got {dtype}; for a 0/1 mask use mask.bool()").format(
            dtype=allowed.dtype))
    try:
        return np.broadcast_to(allowed, shape)
    except ValueError:
        raise ValueError(_("mask shape {allowed_shape} does not fit the matrix {list_shape}: "
                         "give one True/False per cell, [L_q, L_k]").format(
                             allowed_shape=list(allowed.shape), list_shape=list(shape))) from None


def _palette(count: int) -> np.ndarray:
    """``count`` distinct colours as RGB rows [count, 3]: one per head."""
    cmap = colormaps["tab10" if count <= 10 else "tab20"]
    return np.array([to_rgb(cmap(i % cmap.N)) for i in range(count)])


@_cjk
def heatmap(matrix, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None, title: str = "",
            ax=None, cmap: str = "viridis", annotate: bool = False, fmt: str = "{:.2f}", xlabel: str = "",
            ylabel: str = "", vmin: float | None = None, vmax: float | None = None, mask=None,
            colorbar: bool = True, colorbar_label: str = "", layout: str | None = "constrained"):
    """Draw a 2-D tensor [rows, cols] with row and column labels. Returns the Figure (new, unless ``ax`` is given).

    ``mask`` (bool [rows, cols] or broadcastable, True = may attend as everywhere in this package):
    blocked cells, and NaN cells, are drawn grey and hatched, so a masked cell never looks like a low
    score. ``colorbar_label`` names what the colour means (for attention: ``viz.PROBABILITY``). Title and labels
    are shown through ``_``: the package's own (marked ``N_``) in the language ``wt.set_language`` chose.
    Drawing into an ``ax`` that ``heatmap`` drew before updates that picture in place (an explorer's move: its
    image, ticks and colour bar are reused, none made again).
    """
    data = _as_numpy(matrix)
    blocked = np.isnan(data)
    if mask is not None:
        blocked |= ~_allowed(mask, data.shape)
        data[blocked] = np.nan
    if blocked.all() and vmin is None and vmax is None:
        vmin, vmax = 0.0, 1.0  # nothing left to scale by
    n_rows, n_cols = data.shape
    if ax is None:
        fig = Figure(figsize=(min(1.6 + 0.55 * n_cols, SCREEN_WIDTH_IN), min(1.2 + 0.45 * n_rows, 9)), layout=layout)
        ax = fig.add_subplot()
    drawn = getattr(ax, "_walkthrough_heatmap", None)
    if drawn is None:  # the sheet under the image shows through NaN cells, which the image leaves transparent
        sheet = ax.add_patch(Rectangle((-0.5, -0.5), n_cols, n_rows, facecolor=MASKED_COLOUR, edgecolor="#808080",
                                       hatch="//", linewidth=0, zorder=0))
        image = ax.imshow(data, cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax, interpolation="nearest", zorder=1)
        drawn = ax._walkthrough_heatmap = _Heatmap(image, sheet)
    else:  # drawn here before (an explorer's move): the same artists take the new data, nothing is made again
        drawn.image.set_data(data)
        drawn.image.set_cmap(cmap)
        drawn.image.set_clim(np.nanmin(data) if vmin is None else vmin, np.nanmax(data) if vmax is None else vmax)
        drawn.image.set_extent((-0.5, n_cols - 0.5, n_rows - 0.5, -0.5))
        drawn.sheet.set_bounds(-0.5, -0.5, n_cols, n_rows)
        for text in drawn.annotations:
            text.remove()
        drawn.annotations.clear()
    image = drawn.image
    drawn.sheet.set_visible(bool(blocked.any()))
    for labels, axis, size in ((rows, ax.yaxis, n_rows), (cols, ax.xaxis, n_cols)):
        if labels is not None:
            if len(labels) != size:
                raise ValueError(_("{count} labels for {size} rows/columns: give one label each").format(
                    count=len(labels), size=size))
            slanted = axis is ax.xaxis and max(len(label) for label in labels) > 3  # long words would overlap
            every = _label_step(ax, axis is ax.xaxis, slanted, size, labels)
            axis.set_ticks(range(0, size, every))
            shown = [plain(label) for label in list(labels)[::every]]
            axis.set_ticklabels(shown, **({"rotation": 45, "ha": "right"} if slanted else
                                          {"rotation": 0, "ha": "center" if axis is ax.xaxis else "right"}))
    if annotate:
        for i, j in zip(*np.nonzero(~np.isnan(data))):
            red, green, blue, _alpha = image.cmap(image.norm(data[i, j]))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # perceived brightness of the cell
            drawn.annotations.append(ax.text(j, i, fmt.format(data[i, j]), ha="center", va="center",
                                             fontsize=MIN_FONT_PT, color="white" if dark else "black"))
    ax.set_title(_(title), y=1.0)  # a fixed place: finding one clear of the ticks costs more than the picture
    ax.set_xlabel(_(xlabel))
    ax.set_ylabel(_(ylabel))
    if colorbar:
        note = _("hatched = masked") if blocked.any() else ""
        label = "\n".join(part for part in (_(colorbar_label), note) if part)
        if drawn.colorbar is None:
            drawn.colorbar = ax.figure.colorbar(image, ax=ax, shrink=0.8, label=label)
        else:
            drawn.colorbar.set_label(label)
    return ax.figure


def _label_step(ax, x: bool, slanted: bool, count: int, labels: Sequence[str]) -> int:
    """Label every cell, or every 2nd, 3rd, ... where ``count`` labels at the projector's size would overlap along
    the axis: an upright label along x takes its text's width, a label on y a line's height, a slanted one a line's
    height times √2."""
    box = ax.get_position()
    length_in = box.width * ax.figure.get_figwidth() if x else box.height * ax.figure.get_figheight()
    if x and not slanted:
        needed = max(_text_width_in(str(label), MIN_FONT_PT) for label in labels) + 0.08
    else:
        needed = 1.25 * MIN_FONT_PT / 72 * (math.sqrt(2) if slanted else 1)
    return max(1, math.ceil(needed * count / length_in)) if length_in > 0 else 1


@dataclass
class _Heatmap:
    """What ``heatmap`` drew into an axes, kept on it so that drawing into it again updates these in place."""

    image: object
    sheet: Rectangle
    colorbar: object = None
    annotations: list = field(default_factory=list)


@_cjk
def attention_heads(weights: torch.Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str],
                    title: str = N_("attention weights"), columns: int = 4, mask=None,
                    layout: str | None = "constrained") -> Figure:
    """weights [H, L_q, L_k] -> one heatmap per head, queries down, keys across, on one colour scale.

    Every panel runs from 0 to the largest weight of any head, so a head that looks sharper is
    sharper. ``mask`` (bool, True = may attend, broadcastable to [H, L_q, L_k]: [L_q, L_k] for a
    causal mask, [1, 1, L_k] for padding) draws blocked cells grey and hatched.
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 3:
        shape = list(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(_("weights must be [H, L_q, L_k] (one sentence), got {shape}; index the batch first, e.g. "
                           "weights[0]").format(shape=shape))
    allowed = None if mask is None else _allowed(mask, tuple(weights.shape))
    shown = weights.detach().float()
    top = shown[torch.from_numpy(allowed.copy())] if allowed is not None else shown
    vmax = float(top.max()) if top.numel() else 1.0
    heads = weights.size(0)
    columns = min(columns, heads)
    grid_rows = -(-heads // columns)
    # 2.2 in a row of heads: two rows fit a 768 px slide with the code that draws them
    fig = Figure(figsize=(3.1 * columns + 0.8, 2.2 * grid_rows), layout=layout)  # + the shared colorbar
    axes = list(fig.subplots(grid_rows, columns, squeeze=False).flat)
    for h, ax in enumerate(axes):
        if h >= heads:
            ax.axis("off")
            continue
        heatmap(shown[h], query_tokens, key_tokens, title=_("head {head}").format(head=h), ax=ax, cmap="Blues",
                vmin=0.0, vmax=vmax, mask=None if allowed is None else allowed[h], colorbar=False,
                xlabel=N_("key"), ylabel=N_("query"))
    note = _(" (hatched = masked)") if allowed is not None and not allowed.all() else ""
    fig.colorbar(axes[0].images[0], ax=axes[:heads], shrink=0.8, label=_(PROBABILITY))
    fig.suptitle(_("{title}: one colour scale for all heads{note}").format(title=_(title), note=note))
    return fig


def _reused(into: Figure | None, kind: str, shape) -> Figure | None:
    """``into`` if it is a figure the function ``kind`` drew with panels of this ``shape``, so it can be drawn again
    in place (an explorer's move); else None, and the caller makes a new figure."""
    return into if into is not None and getattr(into, "_walkthrough_drawn", None) == (kind, shape) else None


def _mark(figure: Figure, kind: str, shape) -> Figure:
    figure._walkthrough_drawn = (kind, shape)
    return figure


@_cjk
def mask_figure(masks: dict[str, torch.Tensor], tokens: Sequence[str], key_tokens: Sequence[str] | None = None,
                annotate: bool = True, layout: str | None = "constrained", into: Figure | None = None) -> Figure:
    """Several [L_q, L_k] masks side by side: dark = 1, light = 0, each cell printed as 1/0 when ``annotate``
    so the convention is explicit (the titles say which convention each mask follows).

    ``into``: a figure this function drew before with as many masks, drawn again in place (an explorer's move)."""
    fig = _reused(into, "mask", (len(masks), annotate, layout))
    if fig is None:
        fig = _mark(Figure(figsize=(3.4 * len(masks), 3.2), layout=layout), "mask", (len(masks), annotate, layout))
        fig.subplots(1, len(masks), squeeze=False)
        if layout is None:
            fig.subplots_adjust(left=0.08, right=0.98, bottom=0.2, top=0.84, wspace=0.35)
        if not annotate:
            fig.suptitle(_("dark = 1, light = 0"), fontsize=9)
    for ax, (title, mask) in zip(fig.axes, masks.items()):
        heatmap(mask.int(), tokens, key_tokens or tokens, title=title, ax=ax, cmap="Greys", annotate=annotate,
                fmt="{:.0f}", xlabel=N_("key (attended to)"), ylabel=N_("query"), vmin=0, vmax=1.6, colorbar=False)
    return fig


@_cjk
def pe_figure(length: int, d_model: int, layout: str | None = "constrained", into: Figure | None = None) -> Figure:
    """The PE table [length, d_model] as a heatmap, and four of its sine columns (from 0 to D/2) as curves.

    Columns 2i and 2i+1 share the frequency 1 / 10000^(2i/D): the curves name both the column and i.
    ``into``: a figure this function drew before, drawn again in place (an explorer's move).
    """
    check_positive_int("length", length)
    check_positive_int("d_model", d_model)
    columns = sorted({2 * (d_model * share // 16) for share in (0, 1, 2, 4)})
    table = sinusoidal_table(length, d_model)  # [L, D]
    fig = _reused(into, "pe", layout)
    if fig is None:
        fig = _mark(Figure(figsize=(11, 3.6), layout=layout), "pe", layout)
        fig.subplots(1, 2, width_ratios=(1.15, 1))  # the right panel as wide as its title
        if layout is None:
            fig.subplots_adjust(left=0.09, right=0.98, bottom=0.15, top=0.9, wspace=0.3)
        elif layout == "constrained":  # the colour bar's "PE value" and the curves' apart, the right title inside
            fig.get_layout_engine().set(wspace=0.08, w_pad=0.15)
    left, right = fig.axes[:2]
    heatmap(table, title=_("PE table [{length}, {d_model}]").format(length=length, d_model=d_model), ax=left,
            cmap="RdBu", vmin=-1, vmax=1, xlabel=N_("feature index (columns 2i, 2i+1 share a frequency)"),
            ylabel=N_("position"), colorbar_label=N_("PE value"))
    for line in list(right.lines):  # the curves of a move before: a line is cheap, the axes and ticks are kept
        line.remove()
    right.set_prop_cycle(None)  # the same colours as a figure drawn from nothing
    for column in columns:
        if column < d_model:
            right.plot(table[:, column].numpy(), label=_("column {column} (i = {i})").format(column=column,
                                                                                              i=column // 2))
    right.relim()
    right.autoscale_view()
    right.set_yticks([-1, 0, 1])  # a sine's range: three labels say it, nine cost a move three times the drawing
    right.set_xlabel(_("position"))
    right.set_ylabel(_("PE value"))
    right.set_title(_("low columns wiggle fast, high ones slowly"), y=1.0, pad=10)  # clear of the tick 1's top
    right.legend(fontsize=MIN_FONT_PT, loc="lower left")
    return fig


@_cjk
def curve_figure(series: dict[str, Sequence[float]], xlabel: str = N_("step"), title: str = "",
                 logy: bool = False) -> Figure:
    """One line per named series (loss, learning rate, ...), each in its own panel, named on its y-axis."""
    fig = Figure(figsize=(5 * len(series), 3.2), layout="constrained")
    for ax, (name, values) in zip(fig.subplots(1, len(series), squeeze=False).flat, series.items()):
        ax.plot(list(values))
        ax.set_title(_(name))
        ax.set_xlabel(_(xlabel))
        ax.set_ylabel(_(name))
        if logy:
            ax.set_yscale("log")
    if title:
        fig.suptitle(title)
    return fig


@_cjk
def lines_figure(x: Sequence[float], series: dict[str, Sequence[float]], xlabel: str, ylabel: str,
                 title: str = "", log: bool = False) -> Figure:
    """Several named series over the same x, on one set of axes (log-log when ``log``)."""
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for name, values in series.items():
        ax.plot(list(x), list(values), marker="o", label=name)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=MIN_FONT_PT)
    return fig


@_cjk
def bar_figure(labels: Sequence[str], values: Sequence[float], title: str = "", ax=None,
               xlabel: str = N_("probability"), ylabel: str = N_("token")):
    """Horizontal bars, largest on top: the top candidates of one decoding step."""
    if ax is None:
        fig = Figure(figsize=(4, 0.35 * len(labels) + 1.3), layout="constrained")
        ax = fig.add_subplot()
    ax.barh([plain(label) for label in labels][::-1], list(values)[::-1])
    ax.set_title(title, fontsize=9)
    ax.set_xlim(0, 1)
    ax.set_xlabel(_(xlabel))
    ax.set_ylabel(_(ylabel))
    return ax.figure


# --- the head split: where each feature goes ---------------------------------------------------------------

def _check_split(length: int, d_model: int, heads: int) -> int:
    """d_k for a valid split, or the error every other part of the package gives."""
    check_positive_int("length", length)
    return ModelConfig(d_model=d_model, num_heads=heads).d_k


def _rows_apart(owner: np.ndarray, colours: np.ndarray, row_px: int = 4) -> np.ndarray:
    """owner [L, W] (head index per cell, -1 = gap) -> RGB image, each token ``row_px`` tall with a white line
    under it, so the rows (tokens) can be counted."""
    rgb = np.ones((*owner.shape, 3))
    rgb[owner >= 0] = colours[owner[owner >= 0]]
    tall = np.repeat(rgb, row_px, axis=0)
    tall[row_px - 1::row_px] = 1.0
    return tall


def _side_by_side(blocks: list[np.ndarray], gap: int, axis: int) -> np.ndarray:
    """Owner blocks joined along ``axis`` with ``gap`` empty (-1) cells between them."""
    pieces = []
    for i, block in enumerate(blocks):
        if i:
            shape = list(block.shape)
            shape[axis] = gap
            pieces.append(np.full(shape, -1))
        pieces.append(block)
    return np.concatenate(pieces, axis=axis)


def _grid(blocks: list[np.ndarray], columns: int, row_gap: int, column_gap: int) -> np.ndarray:
    """Equal owner blocks laid out ``columns`` to a row, with empty cells between them (the last row padded)."""
    blank = np.full_like(blocks[0], -1)
    padded = blocks + [blank] * (-len(blocks) % columns)
    rows = [_side_by_side(padded[i:i + columns], column_gap, axis=1) for i in range(0, len(padded), columns)]
    return _side_by_side(rows, row_gap, axis=0)


@_cjk
def split_chain_figure(batch: int, length: int, d_model: int, heads: int,
                       layout: str | None = "constrained", size: tuple[float, float] = (10, 3.3),
                       into: Figure | None = None) -> Figure:
    """The split chain as blocks with labelled sides, one colour per head, for one of the B sentences:

    x [B, L, D] -> view [B, L, H, d_k] (each token's row cut into H pieces) -> transpose(1, 2)
    [B, H, L, d_k] (H separate [L, d_k] matrices, one per head, each holding every token).

    Which head each feature lands in is read off the real ``view`` and ``transpose`` applied to a
    tensor of head numbers, and the shapes in the titles come from running them on the meta device.
    ``size``: width and height in inches (an explorer draws it lower, under its table); ``into``: a figure this
    function drew before at that size, drawn again in place (an explorer's move).
    """
    check_positive_int("batch", batch)
    d_k = _check_split(length, d_model, heads)
    x = torch.empty(batch, length, d_model, device="meta")
    viewed = x.view(batch, length, heads, d_k)  # [B, L, H, d_k]
    moved = viewed.transpose(1, 2)  # [B, H, L, d_k]
    owner = torch.empty(length, d_model, dtype=torch.long)  # [L, D]: which head each feature of a token joins
    for h in range(heads):
        owner.view(length, heads, d_k).transpose(0, 1)[h] = h
    per_head = list(owner.view(length, heads, d_k).transpose(0, 1).numpy())  # H x [L, d_k]
    colours = _palette(heads)
    columns, row_gap, column_gap = min(heads, 4), max(1, length // 3), max(1, d_k // 4)
    images = (_rows_apart(owner.numpy(), colours),
              _rows_apart(_side_by_side(per_head, max(1, d_model // (heads * 6)), axis=1), colours),
              _rows_apart(_grid(per_head, columns, row_gap, column_gap), colours))
    fig = _reused(into, "split", (layout, tuple(size)))
    if fig is None:  # drawn the first time: the panels, and the sheets behind each that stand for the other B - 1
        fig = _mark(Figure(figsize=size, layout=layout), "split", (layout, tuple(size)))
        for ax in fig.subplots(1, 3, width_ratios=(1.1, 1.2, 1)):
            ax.imshow(np.zeros((1, 1, 3)), aspect="auto", interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            for step in (1, 2):
                ax.add_patch(Rectangle((0.02 * step, 0.03 * step), 1, 1, transform=ax.transAxes, clip_on=False,
                                       facecolor="#eeeeee", edgecolor="#999999", zorder=-step))
    axes = fig.axes
    for label in list(axes[2].texts):  # the head labels of the last move
        label.remove()
    titles = (f"x  [B, L, D]\n{list(x.shape)}", f"view  [B, L, H, d_k]\n{list(viewed.shape)}",
              f"transpose(1, 2)  [B, H, L, d_k]\n{list(moved.shape)}")
    sides = ((f"D = {d_model}", f"L = {length}"),
             (_("H = {heads} pieces of d_k = {d_k}").format(heads=heads, d_k=d_k), f"L = {length}"),
             (_("H = {heads} heads,\neach [L, d_k] = [{length}, {d_k}]").format(heads=heads, length=length, d_k=d_k),
              ""))
    for ax, image, title, (across, down) in zip(axes, images, titles, sides):
        height, width = image.shape[:2]
        ax.images[0].set_data(image)
        ax.images[0].set_extent((-0.5, width - 0.5, height - 0.5, -0.5))
        ax.set_xlim(-0.5, width - 0.5)
        ax.set_ylim(height - 0.5, -0.5)
        ax.set_title(title, fontsize=9, y=1.0)
        ax.set_xlabel(across, fontsize=9)
        ax.set_ylabel(down, fontsize=9)
    # a head's block is d_k of the grid's columns: "head 10" where it fits in one, else the number alone
    block_in = size[0] * 0.95 * 1 / 3.3 * d_k / images[2].shape[1]  # the third panel's share of the width, roughly
    named = all(_text_width_in(_("head {head}").format(head=h), MIN_FONT_PT) < 0.9 * block_in for h in range(heads))
    for h in range(heads):  # the grid's pixels: each token row is 4 tall (see _rows_apart)
        row, col = divmod(h, columns)
        axes[2].text(col * (d_k + column_gap) + d_k / 2 - 0.5, 4 * (row * (length + row_gap) + length / 2) - 0.5,
                     _("head {head}").format(head=h) if named else str(h), ha="center", va="center",
                     fontsize=MIN_FONT_PT, color="white", bbox={"facecolor": "black", "alpha": 0.55, "linewidth": 0,
                                                                 "pad": 1})
    fig.supxlabel(_("one of the B = {batch} sentences drawn; the sheets behind it stand for the others").format(
        batch=batch),
                  fontsize=MIN_FONT_PT)
    if layout is None:  # margins in inches: the two-line labels under the panels, the two-line titles above
        fig.subplots_adjust(left=0.3 / size[0], right=1 - 0.15 / size[0], bottom=0.85 / size[1],
                            top=1 - 0.5 / size[1], wspace=0.15)
    return fig


def plain(label) -> str:
    """A token label drawn as plain text: each ``$`` escaped, so matplotlib never reads a token as mathtext (a
    token ``$x^2$`` drew as x², and ``$\\frac$`` raised a parse error in the middle of a figure)."""
    return str(label).replace("$", r"\$")


def _text_width_in(text: str, font_pt: float) -> float:
    """About how wide ``text`` draws at ``font_pt`` points, in inches: DejaVu Sans's letters and digits average
    0.62 em, a Chinese character is 1 em."""
    return sum(1.0 if _needs_fallback(character) else 0.62 for character in text) * font_pt / 72


def _head_zero(owner: np.ndarray) -> str:
    """Which tokens' features sit in head 0, in words: 'every token, features 0–63' or per token."""
    spans = []
    for token, row in enumerate(owner):
        columns = np.flatnonzero(row == 0)
        if columns.size:
            spans.append((token, int(columns[0]), int(columns[-1])))
    if len({(first, last) for _head, first, last in spans}) == 1 and len(spans) == owner.shape[0]:
        return _("every token, features {first}–{last}").format(first=spans[0][1], last=spans[0][2])
    words = [_("token {token}: features {first}–{last}").format(token=t, first=first, last=last)
             for t, first, last in spans[:3]]
    return "; ".join(words) + ("; …" if len(spans) > 3 else "")


@_cjk
def head_slices_figure(length: int, d_model: int, heads: int, tokens: Sequence[str] | None = None,
                       layout: str | None = "constrained") -> Figure:
    """One sentence's [L, D] matrix, each cell coloured by the head it lands in, for the right split
    (view [L, H, d_k] then transpose) and the wrong one (view [H, L, d_k] directly); head 0 outlined.

    Both give heads of the same shape [H, L, d_k]; only the right one gives every head every token.
    """
    d_k = _check_split(length, d_model, heads)
    if tokens is not None and len(tokens) != length:
        raise ValueError(_("{len_tokens} tokens for length={length}: give one token per position").format(
            len_tokens=len(tokens), length=length))
    right = torch.empty(length, d_model, dtype=torch.long)  # [L, D]: head of each feature, right split
    wrong = torch.empty(length, d_model, dtype=torch.long)  # [L, D]: the same, wrong split
    for h in range(heads):
        right.view(length, heads, d_k).transpose(0, 1)[h] = h  # [H, L, d_k] via view + transpose
        wrong.view(heads, length, d_k)[h] = h  # [H, L, d_k] via one view: the memory order is [L, D]
    colours = _palette(heads)
    colours[1:] = 0.55 * colours[1:] + 0.45  # the other heads paler, so head 0 stands out
    fig = Figure(figsize=(11, 3.6), layout=layout)
    panels = fig.subplots(1, 2)
    row_px = 4
    for ax, owner, name in ((panels[0], right, _("right: view [L, H, d_k], then transpose")),
                            (panels[1], wrong, _("wrong: view [H, L, d_k] directly"))):
        owner = owner.numpy()
        ax.imshow(_rows_apart(owner, colours, row_px), aspect="auto", interpolation="nearest",
                  extent=(-0.5, d_model - 0.5, length - 0.5, -0.5))
        ax.contour(np.arange(d_model), np.arange(length), (owner == 0).astype(float), levels=[0.5],
                   colors="black", linewidths=1.5)
        ax.set_title(name + "\n" + _("head 0 gets {features}").format(features=_head_zero(owner)), fontsize=9, y=1.0)
        ax.set_xlabel(_("feature (column of D = {d_model}; d_k = {d_k} per head)").format(d_model=d_model, d_k=d_k))
        ax.set_ylabel(_("token (row of L)"))
        ax.set_xticks(range(0, d_model, d_k) if heads <= 16 else range(0, d_model, d_k * 2))
        ax.set_yticks(range(length), [plain(token) for token in tokens] if tokens is not None else range(length))
    handles = [Rectangle((0, 0), 1, 1, facecolor=colours[h]) for h in range(heads)]
    fig.legend(handles, [_("head {head}").format(head=h) for h in range(heads)],
               loc="outside right center" if layout else "right", fontsize=MIN_FONT_PT, title=_("lands in"))
    if layout is None:
        fig.subplots_adjust(left=0.06, right=0.88, bottom=0.15, top=0.82, wspace=0.2)
    return fig


# --- softmax without ÷√d_k ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Saturation:
    """What ÷√d_k does to softmax, measured on random unit-variance queries and keys (fixed seed).

    ``weights_*`` are [queries, keys]: each row one query's softmax over the keys.
    """

    d_k: int
    queries: int
    keys: int
    std_unscaled: float
    std_scaled: float
    top_unscaled: float  # the largest weight in a row, averaged over the rows
    top_scaled: float
    one_hot_unscaled: int  # rows whose largest weight exceeds NEAR_ONE_HOT
    one_hot_scaled: int
    weights_unscaled: torch.Tensor
    weights_scaled: torch.Tensor

    def __repr__(self) -> str:
        std, top = ljust(_("score std"), 32), ljust(_("largest weight per row (mean)"), 32)
        one_hot = ljust(_("rows near one-hot (> {threshold})").format(threshold=NEAR_ONE_HOT), 32)
        lines = [_("d_k = {d_k}: {queries} random queries, each over {keys} keys").format(
                     d_k=self.d_k, queries=self.queries, keys=self.keys),
                 f"{'':32}{'q·k':>10}{'q·k / √d_k':>14}",
                 f"{std}{self.std_unscaled:10.2f}{self.std_scaled:14.2f}",
                 f"{top}{self.top_unscaled:10.2f}{self.top_scaled:14.2f}",
                 f"{one_hot}{self.one_hot_unscaled:10d}{self.one_hot_scaled:14d}"]
        return "\n".join(lines)


def softmax_saturation(d_k: int, queries: int = 256, keys: int = 10, seed: int = 0) -> Saturation:
    """Scores q·kᵀ with and without ÷√d_k for random q [queries, d_k] and k [keys, d_k] (entries N(0, 1)).

    Without the scale the score std grows as √d_k, so softmax puts nearly all weight on one key.
    """
    for name, value in (("d_k", d_k), ("queries", queries), ("keys", keys)):
        check_positive_int(name, value)
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(queries, d_k, generator=generator)  # [queries, d_k]
    k = torch.randn(keys, d_k, generator=generator)  # [keys, d_k]
    scores = q @ k.T  # [queries, keys]
    unscaled, scaled = scores.softmax(-1), (scores / math.sqrt(d_k)).softmax(-1)
    return Saturation(
        d_k, queries, keys, scores.std().item(), (scores / math.sqrt(d_k)).std().item(),
        unscaled.max(-1).values.mean().item(), scaled.max(-1).values.mean().item(),
        int((unscaled.max(-1).values > NEAR_ONE_HOT).sum()), int((scaled.max(-1).values > NEAR_ONE_HOT).sum()),
        unscaled, scaled)


@_cjk
def softmax_scale_figure(d_k: int, shown: int = 8, layout: str | None = "constrained",
                         into: Figure | None = None) -> Figure:
    """The softmax weights of the first ``shown`` queries of ``softmax_saturation(d_k)``, without and with
    ÷√d_k, on one colour scale (0 to 1): without the scale most rows are one dark cell.

    ``into``: a figure this function drew before with as many queries, drawn again in place (an explorer's move)."""
    check_positive_int("shown", shown)
    numbers = softmax_saturation(d_k)
    if shown > numbers.queries:
        raise ValueError(_("shown={shown} is more than the {queries} queries measured; show fewer").format(
            shown=shown, queries=numbers.queries))
    fig = _reused(into, "scale", (shown, layout))
    if fig is None:  # the panels placed and the colour bar made first: the tick labels are spaced for their room
        fig = _mark(Figure(figsize=(8, 2.9), layout=layout), "scale", (shown, layout))
        panels = fig.subplots(1, 2)
        if layout is None:
            fig.subplots_adjust(left=0.07, right=0.98, bottom=0.17, top=0.88, wspace=0.3)
        fig.colorbar(ScalarMappable(Normalize(0, 1), "Blues"), ax=list(panels), shrink=0.85, label=_("probability"))
    panels = fig.axes[:2]  # the colour bar's axes are third
    key_names = [f"k{j}" for j in range(numbers.keys)]
    query_names = [f"q{i}" for i in range(shown)]
    for ax, weights, title in ((panels[0], numbers.weights_unscaled,
                                _("softmax(q·k), std {std:.1f}").format(std=numbers.std_unscaled)),
                               (panels[1], numbers.weights_scaled,
                                _("softmax(q·k / √{d_k}), std {std:.1f}").format(d_k=d_k, std=numbers.std_scaled))):
        heatmap(weights[:shown], query_names, key_names, title=title, ax=ax, cmap="Blues", vmin=0, vmax=1,
                colorbar=False, xlabel=N_("key"), ylabel=N_("query"))
    return fig


@_cjk
def sharing_figure(sharing: torch.Tensor, layout: str | None = "constrained", into: Figure | None = None) -> Figure:
    """sharing [H, H_kv] (``cost.kv_sharing``): one row per query head, a dark cell at the K/V head it reads.

    ``into``: a figure this function drew before, resized and drawn again in place (an explorer's move). With
    ``layout=None`` the margins are fixed in inches, wide enough for the labels of up to 99 heads."""
    heads, kv_heads = sharing.shape
    title = _("{heads} query heads, {kv_heads} K/V head(s)").format(heads=heads, kv_heads=kv_heads)
    if layout is None:  # margins in inches, the cells' room beside them: as wide as the title at least
        cells = max(0.4 * kv_heads + 0.3, _text_width_in(title, 12) + 0.2)  # the title: rc's "large", 12 pt
        wide, high = 1.35 + cells, 1.07 + 0.22 * heads
    else:  # 8 heads: 256 px high; at least 3.4 in wide, so the title is whole even for one K/V head
        wide, high = max(3.4, 1.6 + 0.4 * kv_heads), 0.8 + 0.22 * heads
    figure = _reused(into, "sharing", layout)
    if figure is None:
        figure = _mark(Figure(figsize=(wide, high), layout=layout), "sharing", layout)
        figure.add_subplot()
    figure.set_size_inches(wide, high)
    if layout is None:
        figure.subplots_adjust(left=1.2 / wide, right=1 - 0.15 / wide, bottom=0.78 / high, top=1 - 0.35 / high)
    heatmap(sharing, [_("Q head {head}").format(head=h) for h in range(heads)], [f"KV {j}" for j in range(kv_heads)],
            ax=figure.axes[0], cmap="Blues", vmin=0, vmax=1, colorbar=False, title=title,
            xlabel=N_("K/V head read"), ylabel=N_("query head"))
    return figure


@_cjk
def translation_figure(weights, predicted: Sequence[str], source: Sequence[str], xlabel: str,
                       key_width: float = 0.4, into: Figure | None = None) -> Figure:
    """A translation explorer's picture: the last decoder layer's cross-attention [predicted, source], mean over
    heads, one column ``key_width`` inches wide. Margins fixed in inches (an explorer redraws it on every move;
    constrained layout cost half of a move); the left one grows with the longest predicted token.

    ``into``: a figure this function drew before, resized and drawn again in place (an explorer's move: its axes,
    ticks and colour bar are not made again)."""
    wide = min(max(5.5, 2 + key_width * len(source)), 8)
    along = _text_width_in(_("predicting (query)"), MIN_FONT_PT)  # the y label stands along the map: as tall
    high = min(max(1.6 + 0.3 * len(predicted), 1.4 + along), 4.5)
    left = 0.6 + 0.12 * max(width(token) for token in predicted)  # inches: the axis label, then the longest word
    figure = _reused(into, "translation", ())
    if figure is None:
        figure = _mark(Figure(figsize=(wide, high)), "translation", ())
        figure.add_subplot()
    figure.set_size_inches(wide, high)
    figure.subplots_adjust(left=left / wide, right=1 - 1.1 / wide, bottom=0.85 / high, top=1 - 0.45 / high)
    heatmap(weights, predicted, source, ax=figure.axes[0], cmap="Blues", vmin=0, xlabel=xlabel,
            ylabel=N_("predicting (query)"), colorbar_label=N_("probability"),
            title=N_("last decoder layer's cross-attention, mean over heads"))
    return figure


@_cjk
def cache_figure(layers: int, step: int, src_len: int, max_step: int = 64, max_src: int = 32,
                 into: Figure | None = None) -> Figure:
    """The two caches of decoding step ``step``, one row per layer: self-attention K/V (a cell per position,
    this step's in orange) beside cross-attention K/V (L_src cells, never changing). The x axes span the
    explorer's slider ranges, so the growth shows as the slider moves.

    ``into``: a figure this function drew before with as many layers, drawn again in place (an explorer's move)."""
    height = 0.9 + 0.2 * layers  # inches: 6 layers draw 210 px high, under the explorer's table
    spans = (max_step, max_src)
    figure = _reused(into, "cache", (layers, spans))
    if figure is None:
        figure = _mark(Figure(figsize=(8, height)), "cache", (layers, spans))
        axes = figure.subplots(1, 2, width_ratios=[2, 1])  # x axes fixed to the sliders' ranges: growth shows
        for ax, span in zip(axes, spans):
            ax.set_xticks(range(0, span + 1, span // 4))
            ax.set_yticks([i + 0.5 for i in range(layers)],
                          [_("layer {index}").format(index=i) for i in range(layers)], fontsize=MIN_FONT_PT)
            ax.set_xlabel(_("position"))
        axes[1].set_yticks([])
        figure.subplots_adjust(left=0.09, right=0.98, bottom=0.55 / height, top=1 - 0.3 / height, wspace=0.05)
    grow, fixed = figure.axes
    earlier, new, memory = torch.tensor([0.62, 0.79, 0.88]), torch.tensor([0.95, 0.41, 0.07]), \
        torch.tensor([0.63, 0.85, 0.61])  # RGB: blue, orange, green
    cells = earlier.expand(layers, step, 3).clone()  # [layers, t, RGB]: cached at earlier steps
    cells[:, -1] = new  # this step's key/value
    for ax, picture, span, title in (
            (grow, cells, max_step, _("self-attention K, V: t = {step} (this step's in orange)").format(step=step)),
            (fixed, memory.expand(layers, src_len, 3), max_src,
             _("cross-attention K, V: L_src = {src_len}, fixed").format(src_len=src_len))):
        for image in list(ax.images):  # the picture of a move before: the axes and ticks are kept
            image.remove()
        ax.imshow(picture.numpy(), aspect="auto", extent=(0, picture.size(1), layers, 0))
        ax.set_xlim(0, span)
        ax.set_xticks(range(picture.size(1)), minor=True)
        ax.grid(which="minor", axis="x", color="white", linewidth=0.5)
        ax.set_title(title, fontsize=9)
    return figure


# --- FlashAttention: the tile grid and the online softmax (notebook 13) -------------------------------------

TILE_KINDS = (N_("skipped"), N_("computed"), N_("partly masked"))
TILE_COLOURS = (MASKED_COLOUR, "#4c72b0", "#dd8452")
PROJECTOR_TEXT = 12  # points: 16.7 px at SCREEN_DPI, for the explorers' figures that are shown beside controls


def tile_kinds(L_q: int, L_k: int, block_q: int, block_k: int, causal: bool) -> np.ndarray:
    """[query blocks, key blocks]: 0 skipped, 1 computed, 2 computed with the causal mask inside (from flash_tiles)."""
    tiles = flash_tiles(L_q, L_k, block_q, block_k, causal)
    kinds = np.zeros((math.ceil(L_q / block_q), math.ceil(L_k / block_k)), dtype=int)
    for tile in tiles:
        kinds[tile.queries.start // block_q, tile.keys.start // block_k] = 2 if tile.diagonal else 1
    return kinds


@_cjk
def tile_grid_figure(L_q: int, L_k: int, block_q: int = 16, block_k: int = 16, causal: bool = True,
                     layout: str | None = "constrained", size: tuple[float, float] = (4.4, 4.0),
                     into: Figure | None = None) -> Figure:
    """The [L_q, L_k] score matrix cut into block_q × block_k tiles, each coloured by what flash_attention does
    with it: computed, computed with the causal mask inside (the diagonal crosses it), or skipped.
    ``size``: the figure's (width, height) in inches; ``into``: a figure this function drew before at that size,
    drawn again in place (an explorer's move: the axes and ticks are kept, the tiles and the legend made anew)."""
    kinds = tile_kinds(L_q, L_k, block_q, block_k, causal)
    fig = _reused(into, "tiles", (layout, tuple(size)))
    if fig is None:
        fig = _mark(Figure(figsize=size, layout=layout), "tiles", (layout, tuple(size)))
        fig.add_subplot().tick_params(labelsize=PROJECTOR_TEXT)
    ax = fig.axes[0]
    for artist in [*ax.collections, *ax.lines]:  # the tiles and the diagonal of a move before
        artist.remove()
    ax.pcolormesh([*range(0, L_k, block_k), L_k], [*range(0, L_q, block_q), L_q], kinds,
                  cmap=ListedColormap(TILE_COLOURS), vmin=-0.5, vmax=2.5, edgecolors="white",
                  linewidth=1.5 if kinds.size <= 400 else 0.3)
    if causal:  # query i sees keys up to i + L_k - L_q: the allowed cells end on this line
        offset = L_k - L_q
        ax.plot([offset + 1, offset + 1 + L_q], [0, L_q], color="black", linewidth=1.5)
    ax.set_xlim(0, L_k)
    ax.set_ylim(L_q, 0)  # query 0 on top, as in every attention heatmap
    for axis in (ax.xaxis, ax.yaxis):  # positions are whole: "0" and "1" at a corner, not "0.0" over "1.0"
        axis.set_major_locator(MaxNLocator(nbins="auto", integer=True))
    computed = int((kinds > 0).sum())
    skipped = _(", {count} skipped").format(count=kinds.size - computed) if causal else ""
    title = _("{computed} of {total} tiles computed{skipped}").format(computed=computed, total=kinds.size,
                                                                      skipped=skipped)
    if _text_width_in(title, PROJECTOR_TEXT) > size[0] - 0.6:  # wider than centred over the axes fits: 2 lines
        title = _("{computed} of {total} tiles computed{skipped}").format(
            computed=computed, total=kinds.size, skipped="") + "\n" + skipped.lstrip(",， ")
    ax.set_title(title, fontsize=PROJECTOR_TEXT)
    ax.set_xlabel(_("key (L_k = {L_k}, blocks of {block_k})").format(L_k=L_k, block_k=block_k), fontsize=PROJECTOR_TEXT)
    ax.set_ylabel(_("query\n(L_q = {L_q}, blocks of {block_q})").format(L_q=L_q, block_q=block_q),
                  fontsize=PROJECTOR_TEXT)
    shown = [kind for kind in range(3) if (kinds == kind).any()]
    columns = len(shown) if size[0] >= 4.2 else 2  # the three names need about 4 inches side by side
    legend_rows = math.ceil(len(shown) / columns)
    top, bottom = (0.3 + 0.2 * title.count("\n")), 0.75 + 0.25 * legend_rows  # margins in inches
    ax.legend([Rectangle((0, 0), 1, 1, facecolor=TILE_COLOURS[kind]) for kind in shown],
              [_(TILE_KINDS[kind]) for kind in shown], loc="upper center",
              bbox_to_anchor=(0.5, -0.58 / (size[1] - top - bottom)),  # 0.58 in under the axes: below the key label
              ncols=columns, fontsize=MIN_FONT_PT, frameon=False, handlelength=1, columnspacing=1)
    if layout is None:  # margins in inches, so any size keeps its labels and legend
        fig.subplots_adjust(left=0.95 / size[0], right=1 - 0.15 / size[0], top=1 - top / size[1],
                            bottom=(bottom + 0.1) / size[1])
    return fig


def running_softmax(scores: torch.Tensor, block_k: int) -> list[tuple[int, float, float]]:
    """One row's scores [L_k] taken block by block with ``flash.online_softmax_step``: (keys seen, m, l) after each."""
    if not isinstance(scores, torch.Tensor) or scores.dim() != 1 or not scores.is_floating_point():
        got = list(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(_("scores must be one row of float scores [L_k], got {got}; pick a row, e.g. scores[0, 0, 0]")
            .format(got=got))
    check_positive_int("block_k", block_k)
    m = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)  # []: one row
    total, acc = torch.zeros((), dtype=scores.dtype), torch.zeros(1, dtype=scores.dtype)  # l [], acc [1]
    values = torch.ones(len(scores), 1, dtype=scores.dtype)  # [L_k, 1]: all ones, so acc ends equal to l
    history = []
    for start in range(0, len(scores), block_k):
        block = scores[start:start + block_k]  # [b_k]
        m, total, acc = online_softmax_step(m, total, acc, block, values[start:start + block_k])
        history.append((start + len(block), m.item(), total.item()))
    return history


@_cjk
def online_softmax_figure(scores: torch.Tensor, block_k: int, layout: str | None = "constrained",
                          size: tuple[float, float] = (8.4, 3.8), into: Figure | None = None) -> Figure:
    """One query row's scores [L_k] arriving in blocks of ``block_k`` keys: the running max m over the scores
    (left), the running sum l = Σ exp(score - m) after each block (right), next to the exact values they end at.
    ``size``: the figure's (width, height) in inches; ``into``: a figure this function drew before at that size,
    drawn again in place (an explorer's move: the axes and ticks are kept, the lines and legends made anew)."""
    history = running_softmax(scores, block_k)
    ends, maxima, sums = zip(*history)
    fig = _reused(into, "online softmax", (layout, tuple(size)))
    if fig is None:
        fig = _mark(Figure(figsize=size, layout=layout), "online softmax", (layout, tuple(size)))
        for ax in fig.subplots(1, 2):
            ax.tick_params(labelsize=PROJECTOR_TEXT)
        if layout is None:  # margins in inches, so any size keeps its labels and legends
            fig.subplots_adjust(left=0.55 / size[0], right=1 - 0.1 / size[0], bottom=1.35 / size[1],
                                top=1 - 0.3 / size[1], wspace=0.3)
    left, right = fig.axes[:2]
    for ax in (left, right):  # the lines of a move before
        for line in [*ax.lines, *ax.collections]:
            line.remove()
    left.plot(range(len(scores)), scores.numpy(), "o", color="#8c8c8c", markersize=4, label=_("score"))
    left.step([-0.5, *(end - 0.5 for end in ends)], [maxima[0], *maxima], where="pre", color="#c44e52", linewidth=2,
              label=_("running max m"))
    # the blocks' edges, top to bottom of the axes: one collection (256 blocks of 1 drew 255 lines, most of a move)
    left.vlines([end - 0.5 for end in ends[:-1]], 0, 1, transform=left.get_xaxis_transform(), color="#bbbbbb",
                linewidth=0.8)
    left.set_xlabel(_("key (blocks of {block_k})").format(block_k=block_k), fontsize=PROJECTOR_TEXT)
    left.set_title(_("scores and running max m"), fontsize=PROJECTOR_TEXT)
    # under each panel, at the smallest projector size: "exact Σ exp(s − max)" fits under its half of the figure
    below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.5 / max(size[1] - 1.65, 0.5)),  # 0.5 in under the axes
             "fontsize": MIN_FONT_PT, "frameon": False, "handlelength": 1.2, "labelspacing": 0.2}
    exact = torch.exp(scores - scores.max()).sum().item()
    right.plot(range(1, len(sums) + 1), sums, "o-", color="#4c72b0", label=_("running sum l"))
    right.axhline(exact, color="black", linestyle="--", linewidth=1, label=_("exact Σ exp(s − max)"))
    grew = [i for i in range(1, len(maxima)) if maxima[i] > maxima[i - 1]]
    right.plot([i + 1 for i in grew], [sums[i] for i in grew], "v", color="#c44e52", markersize=9,
               label=_("max grew: l rescaled"))
    right.set_xlabel(_("blocks seen"), fontsize=PROJECTOR_TEXT)
    right.set_title(_("running sum l"), fontsize=PROJECTOR_TEXT)
    for ax in (left, right):
        ax.relim()
        ax.autoscale_view()
        ax.legend(**below)
    return fig


@_cjk
def block_gaps_figure(gaps: dict[str, float], title: str = "", tolerance: float = 1e-4,
                      layout: str | None = "constrained") -> Figure:
    """One bar per block, in the order the blocks finish: the largest gap between two models' outputs (log scale).
    Blocks within ``tolerance`` are green, the others red; a gap of exactly 0 shows as a short green bar."""
    if not gaps:
        raise ValueError(_("gaps is empty: pass what wt.block_gaps(reference, other, *inputs) returns"))
    names, values = list(gaps), [float(v) for v in gaps.values()]
    floor = 1e-9
    top = max([v for v in values if math.isfinite(v)] + [1.0]) * 10
    fig = Figure(figsize=(10, 3.0), layout=layout)  # with its slide's code, within a 768 px screen
    ax = fig.add_subplot()
    heights = [min(max(v, 10 * floor), top) for v in values]  # an exact 0 still shows, as a stub of a bar
    ax.bar(range(len(names)), heights, color=["#2ca02c" if v <= tolerance else "#d62728" for v in values])
    ax.axhline(tolerance, color="grey", linestyle="--", linewidth=0.8)
    ax.text(-0.5, tolerance, " " + _("tolerance"), ha="left", va="bottom", fontsize=7, color="grey")
    ax.set_yscale("log")
    ax.set_ylim(floor, top)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_ylabel(_("max |diff|"))  # short: it stands along bars that the names below leave little height
    ax.set_title(title, fontsize=9)
    return fig


# --- the backward pass and what training keeps (notebook 11) ------------------------------------------------

@_cjk
def gradient_norms_figure(norms: dict[str, dict[str, Sequence[float]]], layout: str | None = "constrained") -> Figure:
    """Per-layer gradient norms at initialisation: one panel per stack depth (``{"6 layers": {"post-norm": [...],
    "pre-norm": [...]}, ...}``), layer 1 (next to the input) on the left, the last layer (next to the output) on
    the right."""
    fig = Figure(figsize=(5 * len(norms), 3.2), layout=layout)
    for ax, (title, series) in zip(fig.subplots(1, len(norms), squeeze=False).flat, norms.items()):
        for name, values in series.items():
            ax.plot(range(1, len(values) + 1), list(values), marker="o", label=name)
        ax.set_title(title, fontsize=PROJECTOR_TEXT)
        ax.set_xlabel(_("layer (1 = next to the input)"), fontsize=PROJECTOR_TEXT)
        ax.set_ylabel(_("‖gradient of the layer's weights‖"), fontsize=PROJECTOR_TEXT)
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=PROJECTOR_TEXT)
        ax.legend(fontsize=PROJECTOR_TEXT)
    return fig


# The runs notebook 11 compares go by these names (results/norm_runs.json), which the catalog translates
NORM_PLACEMENTS = (N_("post-norm"), N_("pre-norm"))


@_cjk
def loss_runs_figure(runs: dict[str, dict[str, Sequence[float]]], smooth: int = 20,
                     layout: str | None = "constrained") -> Figure:
    """Training losses of several runs, one panel per group (``{"no warm-up": {"post-norm": losses, ...}, ...}``),
    each curve a running mean over ``smooth`` steps, on one log scale for every panel."""
    check_positive_int("smooth", smooth)
    fig = Figure(figsize=(5 * len(runs), 3.2), layout=layout)
    axes = fig.subplots(1, len(runs), squeeze=False, sharey=True).flat
    for ax, (title, series) in zip(axes, runs.items()):
        for name, losses in series.items():
            values = np.asarray(losses, dtype=float)
            width = min(smooth, len(values))
            mean = np.convolve(values, np.ones(width) / width, mode="valid")
            ax.plot(np.arange(width, len(values) + 1), mean, label=_(name))  # NORM_PLACEMENTS in the reader's words
        ax.set_yscale("log")
        ax.set_title(title, fontsize=PROJECTOR_TEXT)
        ax.set_xlabel(_("step"), fontsize=PROJECTOR_TEXT)
        ax.tick_params(labelsize=PROJECTOR_TEXT)
        ax.legend(fontsize=PROJECTOR_TEXT)
    fig.axes[0].set_ylabel(_("loss (mean of {smooth} steps)").format(smooth=smooth), fontsize=PROJECTOR_TEXT)
    return fig


@_cjk
def memory_figure(lengths: Sequence[int], activations: Sequence[float], weights_and_adam: float, marked: int,
                  batch: int, layout: str | None = "constrained", into: Figure | None = None) -> Figure:
    """Saved activations (MB) over the sentence length L (source and target both L), against the flat line of
    the parameters plus Adam's state; ``marked`` is the L chosen, drawn as a dot.

    ``into``: a figure this function drew before, drawn again in place (an explorer's move)."""
    megabytes = np.asarray(activations, dtype=float) / 1e6
    fig = _reused(into, "memory", layout)
    if fig is None:
        fig = _mark(Figure(figsize=(6.0, 3.2), layout=layout), "memory", layout)
        ax = fig.add_subplot()
        ax.set_xlabel(_("L (source and target length)"), fontsize=PROJECTOR_TEXT)
        ax.set_ylabel("MB", fontsize=PROJECTOR_TEXT)
        ax.set_yscale("log")
        ax.tick_params(labelsize=PROJECTOR_TEXT)
        if layout is None:  # fixed margins (an explorer redraws it): room for the labels
            fig.subplots_adjust(left=0.15, right=0.97, bottom=0.22, top=0.96)
    ax = fig.axes[0]
    for line in list(ax.lines):  # the lines of a move before: the axes and ticks are kept
        line.remove()
    ax.plot(list(lengths), megabytes, color="C0", label=_("saved activations, B = {batch}").format(batch=batch))
    ax.axhline(weights_and_adam / 1e6, color="C3", linestyle="--", label=_("parameters + Adam state"))
    index = list(lengths).index(marked)
    ax.plot([marked], [megabytes[index]], "o", color="C0", markersize=9)
    ax.relim()
    ax.autoscale_view()
    ax.legend(fontsize=PROJECTOR_TEXT, loc="lower right")
    return fig


@_cjk
def memory_bars_figure(parts: dict[str, float], title: str = "", layout: str | None = "constrained") -> Figure:
    """Horizontal bars of bytes (drawn in MB), largest on top: what one training step keeps, part by part."""
    names = sorted(parts, key=parts.get)
    fig = Figure(figsize=(9, 0.3 * len(parts) + 1.0), layout=layout)
    ax = fig.add_subplot()
    bars = ax.barh([_(n) for n in names], [parts[n] / 1e6 for n in names], color="C0")  # memory's terms, shown
    ax.bar_label(bars, [f"{parts[n] / 1e6:,.1f}" for n in names], padding=3, fontsize=PROJECTOR_TEXT)
    ax.set_xscale("log")
    ax.set_xlabel(_("MB (log scale)"), fontsize=PROJECTOR_TEXT)
    ax.tick_params(labelsize=PROJECTOR_TEXT)
    ax.set_title(title, fontsize=PROJECTOR_TEXT)
    return fig


# ---------------------------------------------------------------------------------------------------
# Notebook 12: choosing the next token.

@_cjk
def beam_tree_figure(steps: Sequence[tuple[Sequence[Sequence[str]], Sequence[float]]],
                     layout: str | None = "constrained") -> Figure:
    """The beams that survive each step, best on top: ``steps[t]`` = (each beam's words so far, their scores).

    A node is a beam's newest word with its score; a line joins it to the beam it grew from (the one whose
    words are its prefix). A beam that finished earlier (fewer words than the step) is carried on, in grey.
    """
    width = len(steps)
    beams = max(len(words) for words, _ in steps)
    fig = Figure(figsize=(min(1.6 * width + 1, 13), 0.55 * beams + 0.8), layout=layout)
    ax = fig.add_subplot()
    for t, (words, scores) in enumerate(steps):
        for rank, (beam, score) in enumerate(zip(words, scores)):
            carried = len(beam) < t + 1  # finished at an earlier step: the same beam again
            colour = "0.6" if carried else "C0"
            ax.text(t, -rank, f"{plain(beam[-1])}\n{score:.2f}", ha="center", va="center",
                    fontsize=PROJECTOR_TEXT - 1, color="0.4" if carried else "black",
                    bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": colour})
            if t:
                prefix = list(beam) if carried else list(beam[:t])
                parents = [r for r, b in enumerate(steps[t - 1][0]) if list(b) == prefix]
                if parents:
                    ax.plot([t - 1 + 0.3, t - 0.3], [-parents[0], -rank], color=colour, lw=1.2)
    ax.set_xlim(-0.6, width - 0.4)
    ax.set_ylim(-beams + 0.4, 0.6)
    ax.set_xticks(range(width), [_("step {number}").format(number=t + 1) for t in range(width)],
                  fontsize=PROJECTOR_TEXT)
    ax.set_yticks([])
    ax.set_title(_("surviving beams per step (word, score = sum of log-probabilities)"), fontsize=PROJECTOR_TEXT)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return fig


@_cjk
def next_token_figure(probs: torch.Tensor, kept: torch.Tensor, labels: Sequence[str], shown: int = 12,
                      layout: str | None = "constrained") -> Figure:
    """The ``shown`` most likely next tokens: the model's probabilities [V] (grey) beside the distribution
    actually sampled from after temperature and filtering [V] (blue; 0 for a token filtered out)."""
    order = probs.argsort(descending=True, stable=True)[:shown].tolist()
    fig = Figure(figsize=(7, 2.8), layout=layout)
    ax = fig.add_subplot()
    x = np.arange(len(order))
    ax.bar(x - 0.2, [float(probs[i]) for i in order], 0.4, color="0.7", label=_("model (temperature 1)"))
    ax.bar(x + 0.2, [float(kept[i]) for i in order], 0.4, color="C0", label=_("sampled from"))
    ax.set_xticks(x, [plain(labels[i]) for i in order], rotation=45, ha="right", fontsize=PROJECTOR_TEXT - 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel(_("probability"), fontsize=PROJECTOR_TEXT)
    ax.legend(fontsize=PROJECTOR_TEXT - 1, frameon=False)
    ax.tick_params(labelsize=PROJECTOR_TEXT - 1)
    if layout is None:  # an explorer's fixed margins, in inches: room under the axis for the longest slanted word
        longest = max((_text_width_in(labels[i], PROJECTOR_TEXT - 1) for i in order), default=0.0)
        fig.subplots_adjust(left=0.75 / 7, right=1 - 0.1 / 7, top=1 - 0.1 / 2.8,
                            bottom=min(0.5, (0.35 + 0.72 * longest) / 2.8))
    return fig

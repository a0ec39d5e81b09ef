"""Figures for the notebooks: heatmaps with token labels (Chinese included), PE plots, curves.

Every function returns a matplotlib ``Figure`` built without pyplot, so nothing is drawn twice
and nothing leaks between cells; a notebook shows it by leaving it as the cell's last value.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

import torch
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.text import Text

from .embedding import sinusoidal_table

_SYSTEM_CJK_FONTS = ("Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC",
                     "Heiti SC", "Source Han Sans SC")


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
        warnings.warn("no Chinese font found, so Chinese labels will show as boxes: "
                      "pip install mplfonts (or install fonts-noto-cjk)", stacklevel=2)
    return name


def _cjk(draw):
    """Give every text of the figure ``draw`` returns a CJK fallback font: that figure only, no global setting.

    Tick labels are made when the figure is drawn, so their font goes through ``tick_params``.
    """
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        figure = draw(*args, **kwargs)
        name = use_cjk_font()
        if name is not None:
            family = ["DejaVu Sans", name]  # a list: each glyph comes from the first font that has it
            for text in figure.findobj(Text):
                text.set_fontfamily(family)
            for ax in figure.axes:
                ax.tick_params(labelfontfamily=family)
        return figure
    return wrapper


def _as_numpy(matrix):
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().float().cpu()
        if matrix.dim() != 2:
            raise ValueError(f"matrix must be 2-D to draw, got shape {list(matrix.shape)}; pick one head/sentence")
        return matrix.numpy()
    return matrix


@_cjk
def heatmap(matrix, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None, title: str = "",
            ax=None, cmap: str = "viridis", annotate: bool = False, fmt: str = "{:.2f}", xlabel: str = "",
            ylabel: str = "", vmin: float | None = None, vmax: float | None = None):
    """Draw a 2-D tensor with row and column labels. Returns the Figure (new, unless ``ax`` is given)."""
    data = _as_numpy(matrix)
    if ax is None:
        n_rows, n_cols = data.shape
        fig = Figure(figsize=(min(1.6 + 0.55 * n_cols, 12), min(1.2 + 0.45 * n_rows, 9)), layout="constrained")
        ax = fig.add_subplot()
    image = ax.imshow(data, cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax)
    for labels, axis, size in ((rows, ax.yaxis, data.shape[0]), (cols, ax.xaxis, data.shape[1])):
        if labels is not None:
            if len(labels) != size:
                raise ValueError(f"{len(labels)} labels for {size} rows/columns: give one label each")
            axis.set_ticks(range(size))
            slanted = axis is ax.xaxis and max(len(label) for label in labels) > 3  # long words would overlap
            axis.set_ticklabels(list(labels), **({"rotation": 45, "ha": "right"} if slanted else {}))
    if annotate:
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if math.isnan(data[i, j]):
                    continue
                red, green, blue, _ = image.cmap(image.norm(data[i, j]))
                dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # perceived brightness of the cell
                ax.text(j, i, fmt.format(data[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax.figure


@_cjk
def attention_heads(weights: torch.Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str],
                    title: str = "attention weights", columns: int = 4) -> Figure:
    """weights [H, L_q, L_k] -> one heatmap per head, queries down, keys across."""
    if weights.dim() != 3:
        raise ValueError(f"weights must be [H, L_q, L_k] (one sentence), got {list(weights.shape)}; "
                         f"index the batch first, e.g. weights[0]")
    heads = weights.size(0)
    columns = min(columns, heads)
    grid_rows = -(-heads // columns)
    fig = Figure(figsize=(3.2 * columns, 2.8 * grid_rows), layout="constrained")
    for h, ax in enumerate(fig.subplots(grid_rows, columns, squeeze=False).flat):
        if h >= heads:
            ax.axis("off")
            continue
        heatmap(weights[h], query_tokens, key_tokens, title=f"head {h}", ax=ax, cmap="Blues")
    fig.suptitle(title)
    return fig


@_cjk
def mask_figure(masks: dict[str, torch.Tensor], tokens: Sequence[str],
                key_tokens: Sequence[str] | None = None) -> Figure:
    """Several [L_q, L_k] masks side by side, each cell printed as 1/0 so the convention is explicit."""
    fig = Figure(figsize=(3.4 * len(masks), 3.2), layout="constrained")
    for ax, (title, mask) in zip(fig.subplots(1, len(masks), squeeze=False).flat, masks.items()):
        heatmap(mask.int(), tokens, key_tokens or tokens, title=title, ax=ax, cmap="Greys", annotate=True,
                fmt="{:.0f}", xlabel="key (attended to)", ylabel="query")
    return fig


@_cjk
def pe_figure(length: int, d_model: int) -> Figure:
    """The PE table [length, d_model] as a heatmap, and four of its sine columns (from 0 to D/2) as curves."""
    curves = sorted({2 * (d_model * share // 16) for share in (0, 1, 2, 4)})
    table = sinusoidal_table(length, d_model)  # [L, D]
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1.4, 1))
    heatmap(table, title=f"PE table [{length}, {d_model}]", ax=left, cmap="RdBu", xlabel="feature i",
            ylabel="position")
    for i in curves:
        if i < d_model:
            right.plot(table[:, i].numpy(), label=f"dim {i}")
    right.set_xlabel("position")
    right.set_title("a few columns: low dims wiggle fast, high dims slowly")
    right.legend(fontsize=8)
    return fig


@_cjk
def curve_figure(series: dict[str, Sequence[float]], xlabel: str = "step", title: str = "",
                 logy: bool = False) -> Figure:
    """One line per named series (loss, learning rate, ...), each in its own panel."""
    fig = Figure(figsize=(5 * len(series), 3.2), layout="constrained")
    for ax, (name, values) in zip(fig.subplots(1, len(series), squeeze=False).flat, series.items()):
        ax.plot(list(values))
        ax.set_title(name)
        ax.set_xlabel(xlabel)
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
    ax.legend(fontsize=8)
    return fig


@_cjk
def bar_figure(labels: Sequence[str], values: Sequence[float], title: str = "", ax=None):
    """Horizontal bars, largest on top: the top candidates of one decoding step."""
    if ax is None:
        fig = Figure(figsize=(4, 0.35 * len(labels) + 1), layout="constrained")
        ax = fig.add_subplot()
    ax.barh(list(labels)[::-1], list(values)[::-1])
    ax.set_title(title, fontsize=9)
    ax.set_xlim(0, 1)
    return ax.figure

"""Run at a kernel's start-up by tests/test_slides_dense.py (an IPython start-up file imports it): every PNG a
figure is printed to carries, in a tEXt chunk named ``walkthrough-figure``, what its text really is: the smallest
font size drawn (points, tick labels included), the pairs of labels that overlap, and the labels cut by the
image's edge or their clip box. The pixels are untouched; the browser check reads the chunk beside the PNG's dpi
(pHYs) and the width the slide shows it at.

Every PNG goes through FigureCanvasBase.print_figure: IPython's inline display of a Figure and the explorers'
``savefig`` alike, so nothing drawn reaches a slide unmeasured.
"""

import io
import json
import struct
import zlib

from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure
from matplotlib.text import Text

KEY = b"walkthrough-figure"
_draw = Figure.draw
_print_figure = FigureCanvasBase.print_figure


def _drawn_texts(figure: Figure) -> list[Text]:
    """The texts the last draw put on the image: non-empty, visible, and of the ticks only those in view."""
    ticks, drawn = set(), []
    for ax in figure.axes:
        for axis in ax._axis_map.values():
            for tick in [*axis.majorTicks, *axis.minorTicks]:
                ticks.update((tick.label1, tick.label2))
            for tick in axis._update_ticks():  # the ticks the axis draws (those in its view interval)
                drawn += [label for label in (tick.label1, tick.label2) if label.get_visible()]
    drawn += [t for t in figure.findobj(Text) if t not in ticks and t.get_visible()]
    return [t for t in drawn if t.get_text().strip() and t.get_figure(root=True) is figure]


def _measure(figure: Figure, renderer) -> dict:
    """During the draw the figure's bbox is the image's (with bbox_inches="tight", the cropped one)."""
    texts = _drawn_texts(figure)
    boxes = [t.get_window_extent(renderer) for t in texts]
    width, height = figure.bbox.width, figure.bbox.height
    clipped = []
    for text, box in zip(texts, boxes):
        clip = text.get_clip_box() if text.get_clip_on() else None
        outside_clip = clip is not None and (box.x0 < clip.x0 - 1 or box.x1 > clip.x1 + 1
                                             or box.y0 < clip.y0 - 1 or box.y1 > clip.y1 + 1)
        outside_image = box.x0 < -1 or box.x1 > width + 1 or box.y0 < -1 or box.y1 > height + 1
        clipped.append(outside_clip or outside_image)
    overlaps = []
    level = [i for i, t in enumerate(texts) if t.get_rotation() % 90 == 0]  # a slanted label's box is not its ink
    for n, i in enumerate(level):
        for j in level[n + 1:]:
            a, b = boxes[i], boxes[j]
            dx = min(a.x1, b.x1) - max(a.x0, b.x0)
            dy = min(a.y1, b.y1) - max(a.y0, b.y0)
            if dx > 1 and dy > 1 and dx * dy > 0.1 * min(a.width * a.height, b.width * b.height):
                overlaps.append([texts[i].get_text(), texts[j].get_text()])
    return {"min_pt": min((t.get_fontsize() for t in texts), default=None),
            "smallest": min(texts, key=Text.get_fontsize).get_text()[:40] if texts else None,
            "overlaps": overlaps, "clipped": [t.get_text()[:40] for t, c in zip(texts, clipped) if c]}


def draw(self, renderer):
    _draw(self, renderer)
    try:
        self._walkthrough_probe = _measure(self, renderer)
    except Exception as err:  # the probe must never break a figure; the check reports what it could not read
        self._walkthrough_probe = {"error": repr(err)}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def print_figure(self, filename, *args, **kwargs):
    figure = self.figure
    result = _print_figure(self, filename, *args, **kwargs)
    probe = getattr(figure, "_walkthrough_probe", None)
    if isinstance(filename, io.BytesIO) and probe is not None:
        png = filename.getvalue()
        if png.startswith(b"\x89PNG\r\n\x1a\n"):
            end_of_header = 8 + 25  # the signature and the IHDR chunk
            text = _chunk(b"tEXt", KEY + b"\0" + json.dumps(probe).encode())
            filename.seek(0)
            filename.truncate()
            filename.write(png[:end_of_header] + text + png[end_of_header:])
    return result


def install() -> None:
    Figure.draw = draw
    FigureCanvasBase.print_figure = print_figure


def uninstall() -> None:
    Figure.draw = _draw
    FigureCanvasBase.print_figure = _print_figure

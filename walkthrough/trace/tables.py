"""Shapes for a reader: one line per tensor (``print_shape``), a d2l-style shape claim (``assert_shape``), traced
rows looked up by step (``by_step``), and the tables a trace is read in.

``summarise`` replaces layers 1..N-1 by one note row when their rows repeat layer 0's; ``shape_table(rows,
depth=..., within=..., steps=...)`` keeps a table readable; ``ShapeTable`` renders it, as HTML in a notebook and as
text elsewhere (and can fold the whole table under this notebook's highlighted steps).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import torch

from ..checks import check_positive_int
from ..i18n import N_, _, ljust, width
from ..model.config import GPTConfig, ModelConfig
from ..recording import Row
from ..steps import STEPS, StepRows
from .tracer import ROOT, OpRow, trace_shapes


def print_shape(label: str, tensor: torch.Tensor, dims: str) -> None:
    """Print one line: a label, the tensor's shape, and what each dim means (checked to match in number)."""
    if len(dims.split()) != tensor.dim():
        raise ValueError(_("{label}: dims {dims!r} name {count} dims but the shape {shape} has {ndim}").format(
            label=label, dims=dims, count=len(dims.split()), shape=list(tensor.shape), ndim=tensor.dim()))
    print(f"{ljust(label, 30)} {list(tensor.shape)!s:<18} {dims}")


def by_step(rows) -> dict[tuple[str, str], Row]:
    """Traced rows keyed by (where, step), to look a step up: ``by_step(rows)["decoder", "decoder_output"].shape``
    (a step by its id in ``wt.STEPS`` or by its label).

    A step recorded twice in one module (a mask made for two uses) keeps its last row.
    """
    return StepRows(((row.where, row.step), row) for row in rows)


def assert_shape(tensor: torch.Tensor, expected: tuple[int, ...]) -> None:
    """Assert a shape, d2l-style: a claim about a shape is a line that fails (AssertionError) if it is wrong."""
    if tuple(tensor.shape) != tuple(expected):
        raise AssertionError(_("shape {shape}, expected {expected}").format(shape=list(tensor.shape),
                                                                             expected=list(expected)))


_INDEXED = re.compile(r"^(?:(.*?)\.)?(\d+)(?:\.(.*))?$")  # the first numeric path part: stack, index, rest
_NOTE = N_("(same steps as layer 0)")


def _block(row: Row) -> tuple[str, int, str] | None:
    match = _INDEXED.match(row.where)
    return (match.group(1) or "", int(match.group(2)), match.group(3) or "") if match else None


def summarise(rows: tuple[Row, ...]) -> list[Row]:
    """Keep layer 0 of each stack in full; replace layers 1, 2, ... by one note row while their rows repeat
    layer 0's (same relative paths, steps and shapes). From the first layer that differs on, all stay in full.
    (``shape_table(rows, summarise_layers=False)`` keeps every layer.)"""
    blocks: list[tuple[tuple[str, int] | None, list[Row]]] = []
    for row in rows:
        place = _block(row)
        key = place[:2] if place else None
        if blocks and blocks[-1][0] == key and key is not None:
            blocks[-1][1].append(row)
        else:
            blocks.append((key, [row]))

    def signature(block_rows):
        return [(_block(r)[2], r.step, r.shape, getattr(r, "inputs", ())) for r in block_rows]

    first: dict[str, list] = {}  # stack -> layer 0's rows, while layers 1, 2, ... keep repeating them
    out: list[Row] = []
    repeating: tuple[str, list[int]] | None = None  # the stack and the layers that repeat layer 0 so far
    for key, block_rows in blocks:
        if key is not None and key[1] == 0:
            first[key[0]] = signature(block_rows)
        repeats_first = key is not None and key[1] > 0 and first.get(key[0]) == signature(block_rows)
        if key is not None and key[1] > 0 and not repeats_first:
            first.pop(key[0], None)  # a layer that differs ends the folding: the order stays readable
        if repeats_first and repeating is not None and repeating[0] == key[0]:
            repeating[1].append(key[1])
            continue
        if repeating is not None:
            out.append(_repeat_row(*repeating))
            repeating = None
        if repeats_first:
            repeating = (key[0], [key[1]])
        else:
            out.extend(block_rows)
    if repeating is not None:
        out.append(_repeat_row(*repeating))
    return out


def _repeat_row(stack: str, layers: list[int]) -> Row:
    span = f"{min(layers)}" if len(layers) == 1 else f"{min(layers)}–{max(layers)}"
    return Row(f"{stack}.{span}" if stack else span, _NOTE, (), "",
               _("{count} more layer(s), same shapes").format(count=len(layers)))


def _roots(rows: list[Row]) -> set[str]:
    """The path the trace gave the traced module itself: with module rows, the one-part path of ops that ran in
    no called submodule (``model``, or the class name ``trace_module`` chose to avoid a clash); else ``model``."""
    called = {r.where for r in rows if isinstance(r, OpRow) and r.kind == "module"}
    return {r.where for r in rows if "." not in r.where and r.where not in called} if called else {ROOT}


def _depth(where: str, roots: set[str]) -> int:
    return 0 if where in roots else where.count(".") + 1


def shape_table(rows, *, depth: int | None = None, within: str | tuple[str, ...] | None = None,
                steps: tuple[str, ...] | None = None, summarise_layers: bool = True,
                highlight: tuple[str, ...] | str = ()) -> ShapeTable:
    """A readable view of traced rows.

    ``within`` keeps the rows of one module and its submodules (``"encoder.layers.0.self_attn"``, or a tuple
    of such paths); ``steps`` keeps our model's named steps with these ids (``wt.STEPS``: ``("q_transpose",
    "scores")``), in traced order; ``depth`` shows modules down to that many path parts as one row each
    (ops down to one part fewer); ``summarise_layers`` replaces layers 1..N-1 by a note while they repeat
    layer 0 (``summarise``); ``highlight`` marks rows (see ``ShapeTable``). A ``within`` path or a step id
    that selects no row is a ValueError (an unknown id a KeyError): a renamed step never empties a table.
    """
    rows = list(rows)
    if within is not None:
        paths = (within,) if isinstance(within, str) else tuple(within)
        for path in paths:
            if not any(r.where == path or r.where.startswith(path + ".") for r in rows):
                modules = sorted({r.where for r in rows if isinstance(r, OpRow) and r.kind == "module"})[:8]
                raise ValueError(_("within={path!r} matches no row's module path; paths look like {paths}").format(
                    path=path, paths=modules or sorted({r.where for r in rows})[:8]))
        rows = [r for r in rows if any(r.where == path or r.where.startswith(path + ".") for path in paths)]
    if steps is not None:
        labels = {STEPS[i].label: i for i in ((steps,) if isinstance(steps, str) else steps)}  # unknown id: KeyError
        missing = [f"{i!r} ({label!r})" for label, i in labels.items() if all(r.step != label for r in rows)]
        if missing:
            traced = list(dict.fromkeys(r.step for r in rows if not isinstance(r, OpRow)))
            where = _(" within {within!r}").format(within=within) if within else ""
            raise ValueError(_("steps: {missing} not traced{where}; the named steps there are {traced}").format(
                missing=", ".join(missing), where=where, traced=traced))
        rows = [r for r in rows if r.step in labels]
    if depth is not None:
        check_positive_int("depth", depth)
        roots = _roots(rows)
        rows = [r for r in rows if _depth(r.where, roots) < depth
                or (isinstance(r, OpRow) and r.kind == "module" and _depth(r.where, roots) == depth)]
    return ShapeTable(summarise(rows) if summarise_layers else rows, highlight)


def _shape_text(row: Row) -> str:
    return str(list(row.shape)) if row.dims or isinstance(row, OpRow) else ""


_HEADERS = (N_("where"), N_("step"), N_("shape"), N_("dims"), N_("meaning"))


def _cells(row: Row) -> tuple[str, str, str, str, str]:
    """A row as a table shows it: step label and meaning in the chosen language (the row keeps the English)."""
    return (row.where, _(row.step), _shape_text(row), row.dims, _(row.meaning))


def format_table(rows: list[Row] | tuple[Row, ...]) -> str:
    """A fixed-width text table, for terminals and for nbval-checked cells."""
    cells = [tuple(_(h) for h in _HEADERS)]
    cells += [_cells(r) for r in rows]
    widths = [max(width(c[i]) for c in cells) for i in range(4)]
    lines = ["  ".join(ljust(c[i], widths[i]) for i in range(4)) + "  " + c[4] for c in cells]
    lines.insert(1, "-" * (sum(widths) + 8 + width(cells[0][4])))
    return "\n".join(line.rstrip() for line in lines)


_NOWRAP = ("", "", ";white-space:nowrap", ";white-space:nowrap", "")  # a shape never breaks across lines


class ShapeTable:
    """Shows rows as an HTML table in a notebook (highlighted rows marked) and as text elsewhere.

    ``highlight``: a step id (``"scores"``, see ``wt.STEPS``) marks that step's rows; any other text marks
    the rows whose step or module path contains it (``"decoder.layers.0.cross_attn"``, ``"aten.linear"``).
    One that marks no row is a ValueError naming it. ``fold``: show the highlighted rows first and fold
    the full table below them (a collapsible "whole map", for the long map).
    """

    def __init__(self, rows, highlight: tuple[str, ...] | str = (), fold: bool = False):
        self.rows = list(rows)
        self.highlight = (highlight,) if isinstance(highlight, str) else tuple(highlight)
        self.fold = fold
        self._labels = {STEPS[h].label for h in self.highlight if h in STEPS}
        self._texts = tuple(h for h in self.highlight if h not in STEPS)
        unmarked = [h for h in self.highlight if not any(self._marks(h, r) for r in self.rows)]
        if unmarked:
            raise ValueError(_("highlight {unmarked} marks no row: give a step id (wt.STEPS) or a text found in a "
                               "step or module path of these {count} rows").format(unmarked=unmarked,
                                                                                    count=len(self.rows)))

    @staticmethod
    def _marks(text: str, row: Row) -> bool:
        return row.step == STEPS[text].label if text in STEPS else (text in row.step or text in row.where)

    def _is_highlighted(self, row: Row) -> bool:
        return row.step in self._labels or any(t in row.step or t in row.where for t in self._texts)

    def __repr__(self) -> str:
        return format_table(self.rows)

    def _table_html(self, rows) -> str:
        head = "".join(f"<th style='text-align:left'>{_(h)}</th>" for h in _HEADERS)
        body = []
        for r in rows:
            style = " style='background:#fff3b0;font-weight:bold'" if self._is_highlighted(r) else ""
            cells = _cells(r)
            body.append(f"<tr{style}>" + "".join(f"<td style='text-align:left{nowrap}'>{html.escape(c)}</td>"
                                                 for c, nowrap in zip(cells, _NOWRAP)) + "</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    def _repr_html_(self) -> str:
        """Folded: this notebook's steps first, the whole table folded below them."""
        focus = [r for r in self.rows if self._is_highlighted(r)]
        if not (self.fold and focus):
            return self._table_html(self.rows)
        title = _("This notebook's steps")
        summary = _("the whole map ({count} rows), these steps highlighted").format(count=len(self.rows))
        return (f"<p><b>{title}</b></p>{self._table_html(focus)}"
                f"<details><summary>{summary}</summary>{self._table_html(self.rows)}</details>")


class Table:
    """Rows of text as an HTML table in a notebook, and as tab-separated lines elsewhere (what nbval compares).
    A table that mixes Chinese and English lines up only as HTML: padded text does not, as the browser's CJK font is
    not exactly two columns wide. ``header`` and each row: the cells, already formatted as text."""

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[object]]):
        self.header, self.rows = tuple(header), [tuple(str(cell) for cell in row) for row in rows]

    def __repr__(self) -> str:
        return "\n".join("\t".join(row).rstrip() for row in (self.header, *self.rows))

    def _repr_html_(self) -> str:
        def cells(row, tag):
            return "".join(f"<{tag} style='text-align:left'>{html.escape(cell)}</{tag}>" for cell in row)
        body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in self.rows)
        return f"<table><thead><tr>{cells(self.header, 'th')}</tr></thead><tbody>{body}</tbody></table>"


def shape_map(cfg: ModelConfig | GPTConfig | None = None, batch: int | None = None, src_len: int | None = None,
              tgt_len: int | None = None, highlight: tuple[str, ...] | str = (), **sizes) -> ShapeTable:
    """The series' map: the summarised trace (``trace_shapes``: same sizes, same defaults, ``length=`` and
    ``step=`` too) with the steps of this notebook highlighted first and the whole map folded below."""
    cfg = ModelConfig() if cfg is None else cfg  # the defaults are the paper's base sizes
    return ShapeTable(summarise(trace_shapes(cfg, batch, src_len, tgt_len, **sizes)), highlight, fold=True)

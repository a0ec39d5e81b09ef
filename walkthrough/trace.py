"""Record each named step's shape while the real model runs.

The model calls ``record(step, tensor, dims, meaning)`` at every step worth showing. Outside
``trace_shapes`` no recorder is active and ``record`` returns at once. ``trace_shapes`` builds the
model on PyTorch's meta device, where tensors have shapes but no data: nothing is allocated or
computed. Repeated identical ops (every layer after the first) are answered from memory, so the
seed sizes trace in tens of milliseconds and a GPT-3-sized stack in under a second.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .config import ModelConfig, check_positive_int
from .loss import sequence_loss
from .model import Transformer
from .recording import Recorder, Row, listening


def _push(recorder: Recorder, name: str):
    def hook(module, args):
        recorder.scopes.append(name)
    return hook


def _popper(recorder: Recorder):
    def hook(module, args, output):
        recorder.scopes.pop()
    return hook


def _check_length(name: str, value, max_len: int) -> None:
    check_positive_int(name, value)
    if value > max_len:
        raise ValueError(f"{name}={value} is longer than max_len={max_len}; raise max_len or shorten {name}")


class _RepeatedOps(TorchDispatchMode):
    """Answers an op on the meta device from memory when it has seen the same call before.

    On the meta device an op's result is fixed by its inputs' shapes, strides and dtypes and its
    other arguments, and layers 1..N-1 make exactly layer 0's calls; PyTorch's meta kernels for
    linear and LayerNorm are slow Python, so remembering them makes a trace several times faster.
    Views and in-place ops always run, so aliasing stays real.
    """

    def __init__(self):
        super().__init__()
        self.seen = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if schema.is_mutable or any(ret.alias_info is not None for ret in schema.returns):
            return func(*args, **kwargs)
        key = (func, _signature(args), _signature(kwargs))
        try:
            known = self.seen.get(key)
        except TypeError:  # an argument that cannot be hashed: just run the op
            return func(*args, **kwargs)
        if known is None:
            out = func(*args, **kwargs)
            self.seen[key] = _signature(out)
            return out
        return _rebuild(known)


@dataclass(frozen=True)
class _TensorMeta:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: str


def _signature(value):
    """A hashable description of an op's argument or result, tensors by their metadata alone."""
    if isinstance(value, torch.Tensor):
        return _TensorMeta(tuple(value.shape), value.stride(), value.dtype, value.device.type)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _signature(v)) for k, v in sorted(value.items()))
    return value


def _rebuild(signature):
    """Fresh meta tensors matching a remembered result."""
    if isinstance(signature, _TensorMeta):
        return torch.empty_strided(signature.shape, signature.stride, dtype=signature.dtype, device=signature.device)
    if isinstance(signature, tuple):
        return tuple(_rebuild(s) for s in signature)
    return signature


@functools.lru_cache(maxsize=8)
def _meta_model(cfg):
    """The model on the meta device, kept per config: a slider that moves only batch or lengths reuses it."""
    with torch.device("meta"):
        return Transformer(cfg).eval()  # eval: dropout's random masks are work with no shape to show


@functools.lru_cache(maxsize=256)
def trace_shapes(cfg, batch: int = 32, src_len: int = 10, tgt_len: int = 4) -> tuple[Row, ...]:
    """Run ``Transformer(cfg)`` on the meta device for a [batch, src_len] -> [batch, tgt_len] pair and
    return every recorded step, in order, with the loss's label and flattening steps at the end."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a walkthrough.ModelConfig, got {type(cfg).__name__}")
    check_positive_int("batch", batch)
    _check_length("src_len", src_len, cfg.max_len)
    _check_length("tgt_len", tgt_len, cfg.max_len)
    model = _meta_model(cfg)
    src = torch.zeros(batch, src_len, dtype=torch.long, device="meta")
    tgt = torch.zeros(batch, tgt_len, dtype=torch.long, device="meta")
    recorder = Recorder()
    handles = []
    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(_push(recorder, name)))
            handles.append(module.register_forward_hook(_popper(recorder)))
    try:
        with listening(recorder), torch.inference_mode(), _RepeatedOps():
            logits = model(src, tgt)
            sequence_loss(logits, tgt, cfg.pad_id)
        return tuple(recorder.rows)
    finally:
        for handle in handles:
            handle.remove()


def show(label: str, tensor: torch.Tensor, dims: str) -> None:
    """Print one line: a label, the tensor's shape, and what each dim means (checked to match in number)."""
    if len(dims.split()) != tensor.dim():
        raise ValueError(f"{label}: dims {dims!r} name {len(dims.split())} dims but the shape "
                         f"{list(tensor.shape)} has {tensor.dim()}")
    print(f"{label:<30} {list(tensor.shape)!s:<18} {dims}")


def check_shape(tensor: torch.Tensor, expected: tuple[int, ...]) -> None:
    """Assert a shape, d2l-style: a claim about a shape is a line that fails if the claim is wrong."""
    if tuple(tensor.shape) != tuple(expected):
        raise AssertionError(f"shape {list(tensor.shape)}, expected {list(expected)}")


_LAYER = re.compile(r"^(.*\.layers)\.(\d+)(\..*)?$")


def summarise(rows: tuple[Row, ...]) -> list[Row]:
    """Keep layer 0 of each stack in full; replace layers 1..N-1 by one note row (same shapes)."""
    out: list[Row] = []
    repeats: dict[str, set[int]] = {}
    for row in rows:
        match = _LAYER.match(row.where)
        if match and match.group(2) != "0":
            repeats.setdefault(match.group(1), set()).add(int(match.group(2)))
            continue
        stack = next((s for s in repeats if not row.where.startswith(s)), None)
        if stack is not None:
            out.append(_repeat_row(stack, repeats.pop(stack)))
        out.append(row)
    out.extend(_repeat_row(stack, layers) for stack, layers in repeats.items())
    return out


def _repeat_row(stack: str, layers: set[int]) -> Row:
    span = f"{min(layers)}" if len(layers) == 1 else f"{min(layers)}–{max(layers)}"
    return Row(f"{stack}.{span}", "(same steps as layer 0)", (), "", f"{len(layers)} more layer(s), same shapes")


def format_table(rows: list[Row] | tuple[Row, ...]) -> str:
    """A fixed-width text table, for terminals and for nbval-checked cells."""
    cells = [("where", "step", "shape", "dims", "meaning")]
    cells += [(r.where, r.step, str(list(r.shape)) if r.dims else "", r.dims, r.meaning) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(4)) + "  " + c[4] for c in cells]
    lines.insert(1, "-" * (sum(widths) + 8 + len("meaning")))
    return "\n".join(line.rstrip() for line in lines)


class ShapeTable:
    """Shows rows as an HTML table in a notebook (matching steps highlighted) and as text elsewhere.

    ``fold``: show the highlighted rows first and fold the full table below them (for the long map).
    """

    def __init__(self, rows, highlight: tuple[str, ...] = (), fold: bool = False):
        self.rows = list(rows)
        self.highlight = highlight
        self.fold = fold

    def _is_highlighted(self, row: Row) -> bool:
        return any(h in row.step or h in row.where for h in self.highlight)

    def __repr__(self) -> str:
        return format_table(self.rows)

    def _table_html(self, rows) -> str:
        head = "".join(f"<th style='text-align:left'>{h}</th>" for h in ("where", "step", "shape", "dims", "meaning"))
        body = []
        for r in rows:
            style = " style='background:#fff3b0;font-weight:bold'" if self._is_highlighted(r) else ""
            shape = str(list(r.shape)) if r.dims else ""
            cells = (r.where, r.step, shape, r.dims, r.meaning)
            body.append(f"<tr{style}>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>"
                                                 for c in cells) + "</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    def _repr_html_(self) -> str:
        """Folded: this notebook's steps first, the whole table folded below them."""
        focus = [r for r in self.rows if self._is_highlighted(r)]
        if not (self.fold and focus):
            return self._table_html(self.rows)
        return (f"<p><b>This notebook's steps</b></p>{self._table_html(focus)}"
                f"<details><summary>the whole map ({len(self.rows)} rows), these steps highlighted</summary>"
                f"{self._table_html(self.rows)}</details>")


def shape_map(cfg=None, batch: int = 32, src_len: int = 10, tgt_len: int = 4,
              highlight: tuple[str, ...] | str = ()) -> ShapeTable:
    """The series' map: the summarised trace at the given sizes, with the steps of this notebook highlighted."""
    cfg = ModelConfig.seed_example() if cfg is None else cfg
    highlight = (highlight,) if isinstance(highlight, str) else tuple(highlight)
    return ShapeTable(summarise(trace_shapes(cfg, batch, src_len, tgt_len)), highlight, fold=True)

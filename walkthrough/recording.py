"""The recording hook at the bottom of the package: model code calls ``record(step_id, tensor)``; a tracer listens.

Imports only the table of steps (``steps.py``), so every model module can call it and the tracer
(``trace/tracer.py``, above the model) can switch it on without an import cycle. With no recorder listening,
``record`` checks the step id and hands the tensor back: it never looks at it, so model code reads
``q = record("q", self.w_q(query))``.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .i18n import _
from .steps import STEPS


@dataclass(frozen=True)
class Row:
    """One step: which module (its attribute path in the model), what, the shape and its named dims."""

    where: str
    step: str
    shape: tuple[int, ...]
    dims: str
    meaning: str

    @property
    def shown_step(self) -> str:
        """The step as a table shows it, in the reader's language (``step`` stays English: code finds rows by it)."""
        return _(self.step)


class Recorder:
    """Collects rows; ``scopes`` is the stack of module paths currently running (the tracer pushes them).

    ``dim_names`` renames the table's general dims for the model being traced (a model class's own
    ``dim_names``, e.g. ``{"L_tgt": "L"}`` for a GPT): ``Recorder(dim_names=getattr(model, "dim_names", None))``.
    """

    def __init__(self, dim_names: dict[str, str] | None = None) -> None:
        self.rows: list[Row] = []
        self.scopes: list[str] = ["model"]
        self.dim_names = dict(dim_names or {})

    def dims(self, general: str) -> str:
        """The table's dims with this model's names: ``"B H_kv L_k d_k"`` -> ``"B H L_k d_k"``; a product by its own
        name if it has one (``"H_kv·d_k"`` -> ``"D"``), else factor by factor (a GPT's ``"B·L_tgt"`` -> ``"B·L"``)."""
        def rename(dim: str) -> str:
            if dim in self.dim_names:
                return self.dim_names[dim]
            return re.sub(r"[A-Za-z_]\w*", lambda name: self.dim_names.get(name[0], name[0]), dim)
        return " ".join(rename(dim) for dim in general.split())


_active: Recorder | None = None


def record(step_id: str, tensor: torch.Tensor) -> torch.Tensor:
    """Note ``tensor``'s shape under the step ``step_id`` of ``steps.STEPS`` if a recorder is listening; return it.

    An id missing from the table is a KeyError whether or not anybody listens, so a typo cannot hide.
    """
    known = STEPS[step_id]  # an unknown id raises here, listing the ids
    if _active is None:
        return tensor
    dims = _active.dims(known.dims)
    if len(dims.split()) != tensor.dim():
        raise RuntimeError(f"trace step {step_id!r}: dims {dims!r} do not match shape {list(tensor.shape)}")
    _active.rows.append(Row(_active.scopes[-1], known.label, tuple(tensor.shape), dims, known.meaning))
    return tensor


def active() -> Recorder | None:
    """The recorder listening now, if any."""
    return _active


@contextmanager
def listening(recorder: Recorder):
    """Send every ``record`` call to ``recorder`` while the block runs (not re-entrant)."""
    global _active
    if _active is not None:
        raise RuntimeError("a trace is already running (tracing is not re-entrant)")
    _active = recorder
    try:
        yield recorder
    finally:
        _active = None

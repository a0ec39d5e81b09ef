"""The recording hook at the bottom of the package: model code calls ``record``; a tracer listens.

Imports nothing of ours, so every model module can call it and the tracer (``trace.py``, above the
model) can switch it on without an import cycle. With no recorder listening, ``record`` returns at
once and never looks at the tensor.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Row:
    """One step: which module (its attribute path in the model), what, the shape and its named dims."""

    where: str
    step: str
    shape: tuple[int, ...]
    dims: str
    meaning: str


class Recorder:
    """Collects rows; ``scopes`` is the stack of module paths currently running (the tracer pushes them)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.scopes: list[str] = ["model"]


_active: Recorder | None = None


def record(step: str, tensor: torch.Tensor, dims: str, meaning: str) -> None:
    """Note ``tensor``'s shape under ``step`` if a recorder is listening; otherwise do nothing."""
    if _active is None:
        return
    if len(dims.split()) != tensor.dim():
        raise RuntimeError(f"trace step {step!r}: dims {dims!r} do not match shape {list(tensor.shape)}")
    _active.rows.append(Row(_active.scopes[-1], step, tuple(tensor.shape), dims, meaning))


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

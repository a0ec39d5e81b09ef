"""Trace shapes on PyTorch's meta device: our model's named steps, or every op of any ``nn.Module``.

On the meta device a tensor has a shape, a dtype and strides but no data, so a forward pass
allocates nothing and computes nothing: only shapes flow. Three layers, bottom to top:

- One adapter around PyTorch's op interception (``_OpTap``). At the dispatcher level (the private
  ``torch.utils._python_dispatch.TorchDispatchMode`` and ``OpOverload._schema``) it sees every aten
  op (``aten.linear``, ``aten.view``, ...). Without those private names it falls back to the public
  ``torch.overrides.TorchFunctionMode``: the same shapes, named by torch function
  (``torch.nn.functional.linear``), coarser inside functions that are themselves overridable, and
  slower because nothing is answered from memory.
- The core, ``trace_callable(fn, root)``: runs ``fn()`` (which must build its tensors on the meta
  device) and returns, in order, one ``OpRow`` per module call and per tensor-producing op, each
  tagged with the module path it ran in (``encoder.layers.0.self_attn``), plus a ``Row`` for each
  ``record(...)`` call our own model makes. Repeated ops (every layer after the first makes layer 0's
  calls) are answered from memory, so a 96-layer GPT-3-sized stack traces in about a second.
- Entry points: ``trace_shapes(cfg, ...)`` (our Transformer, named steps only) and
  ``trace_module(module, *inputs, **kwargs)`` (any module: a meta copy is traced, the caller's module
  is never touched). A new entry point is a few lines: build the model on the meta device (or
  ``meta_copy`` it), build meta inputs (``meta_inputs``), and call
  ``trace_callable(lambda: model.some_step(...), model)``.

Views: ``summarise`` folds layers 1..N-1 into one note row when their rows repeat layer 0's;
``shape_table(rows, depth=..., within=...)`` keeps a table readable; ``ShapeTable`` renders it.
"""

from __future__ import annotations

import copy
import functools
import html
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .config import GPTConfig, ModelConfig, check_positive_int
from .gpt import GPT
from .loss import sequence_loss
from .model import Transformer
from .recording import Recorder, Row, listening

# ---------------------------------------------------------------------------------------------------
# The adapter: the only place that touches PyTorch's private op-interception API.

try:
    from torch.utils._python_dispatch import TorchDispatchMode as _DispatchMode
except ImportError:  # renamed or removed in some future torch: trace at the torch-function level instead
    _DispatchMode = None


def _returns_fresh(op) -> bool:
    """True when ``op`` neither mutates nor returns an alias, so its result on the meta device is fixed by
    its arguments' metadata and may be answered from memory. Unknown (no readable schema): False."""
    try:
        schema = op._schema
        return not schema.is_mutable and all(ret.alias_info is None for ret in schema.returns)
    except (AttributeError, TypeError):
        return False


def _flags(op, args, kwargs) -> list[str]:
    """The names of an op's bool arguments that are set (``is_causal``, ``batch_first``): they change what
    the op does without a tensor to show it. Read from the op's schema; keyword arguments alone without one."""
    try:
        names = [argument.name for argument in op._schema.arguments]
    except (AttributeError, TypeError):
        names = []
    given = list(zip(names, args)) + list(kwargs.items())
    return [name for name, value in given if value is True]


def _op_name(op) -> str:
    """``aten.view`` for a dispatcher op (overload dropped), ``torch.nn.functional.linear`` or
    ``Tensor.view`` for a torch function."""
    packet = getattr(op, "overloadpacket", None)
    if packet is not None:
        return str(packet)
    qualname = getattr(op, "__qualname__", getattr(op, "__name__", repr(op)))
    if qualname.startswith("TensorBase.") or qualname.startswith("Tensor."):
        return "Tensor." + qualname.split(".", 1)[1]
    module = getattr(op, "__module__", None) or "torch"
    module = "torch.nn.functional" if module in ("torch._C._nn", "torch.nn.functional") else module
    return f"{module.replace('torch._C._VariableFunctions', 'torch')}.{qualname}"


if _DispatchMode is not None:
    class _DispatchTap(_DispatchMode):
        """Every aten op, after PyTorch's own decompositions, goes through ``tracer.run_op``."""

        def __init__(self, tracer: _Tracer):
            super().__init__()
            self.tracer = tracer

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return self.tracer.run_op(func, args, kwargs or {}, _returns_fresh(func))


class _FunctionTap(torch.overrides.TorchFunctionMode):
    """The public fallback: every torch function call goes through ``tracer.run_op`` (never memoised)."""

    def __init__(self, tracer: _Tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.tracer.run_op(func, args, kwargs or {}, False)


def _op_tap(tracer: _Tracer):
    """The interception context for one trace: dispatcher level when available, torch functions otherwise."""
    return (_DispatchTap if _DispatchMode is not None else _FunctionTap)(tracer)


# ---------------------------------------------------------------------------------------------------
# Rows and the core.

@dataclass(frozen=True)
class OpRow(Row):
    """A row for one op (``kind="op"``) or one module call (``kind="module"``): ``step`` names the op
    (``aten.linear``) or the module's class, ``shape`` is the (first) output's, ``inputs`` the tensor
    inputs' shapes, ``outputs`` every tensor output's shape. ``dims`` stays empty: an op does not know
    what its dims mean."""

    inputs: tuple[tuple[int, ...], ...] = ()
    outputs: tuple[tuple[int, ...], ...] = ()
    kind: str = "op"


class TraceError(ValueError):
    """A module could not run on the meta device: ``op`` and ``where`` (the module path) say where."""

    def __init__(self, message: str, op: str | None, where: str):
        super().__init__(message)
        self.op = op
        self.where = where


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in an op's argument or result (one level into lists and tuples, as aten ops take them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _shapes(values) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(t.shape) for v in values for t in _tensors(v))


def _from(shapes: tuple[tuple[int, ...], ...]) -> str:
    return "from " + ", ".join(str(list(s)) for s in shapes) if shapes else "new tensor"


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


class _Tracer:
    """State of one trace: the recorder (rows and the module-path stack), remembered ops, the last op."""

    def __init__(self, root: nn.Module | None, root_name: str, ops: bool):
        self.recorder = Recorder()
        self.recorder.scopes = [root_name]
        self.paths = {id(m): name for name, m in root.named_modules() if name} if root is not None else {}
        self.ops = ops
        self.open_calls: list[int] = []  # row index of each running module's placeholder
        self.memory: dict = {}
        self.last_op: tuple[str, tuple[int, ...]] | None = None
        self.failed_op: str | None = None

    def enter(self, module, args):
        name = self.paths.get(id(module))
        if name is None:
            return
        self.recorder.scopes.append(name)
        if self.ops:
            self.open_calls.append(len(self.recorder.rows))
            self.recorder.rows.append(None)  # becomes the module's row when it returns (outputs known then)

    def leave(self, module, args, output):
        name = self.paths.get(id(module))
        if name is None:
            return
        self.recorder.scopes.pop()
        if self.ops:
            inputs, outputs = _shapes(args), _shapes([output])
            self.recorder.rows[self.open_calls.pop()] = OpRow(
                name, type(module).__name__, outputs[0] if outputs else (), "", _from(inputs), inputs, outputs,
                "module")

    def run_op(self, op, args, kwargs, may_remember: bool):
        key = None
        if may_remember:
            try:
                key = (op, _signature(args), _signature(kwargs))
                known = self.memory.get(key)
            except TypeError:  # an argument that cannot be hashed: just run the op
                key = known = None
            if known is not None:
                out = _rebuild(known)
                self._note(op, args, kwargs, out)
                return out
        try:
            out = op(*args, **kwargs)
        except Exception:
            self.failed_op = self.failed_op or _op_name(op)  # the innermost op that failed
            raise
        if key is not None:
            self.memory[key] = _signature(out)
        self._note(op, args, kwargs, out)
        return out

    def _note(self, op, args, kwargs, out) -> None:
        outputs = _shapes([out])
        if not outputs:
            return
        name = _op_name(op)
        self.last_op = (name, outputs[0])
        if self.ops:
            inputs = _shapes(args)
            notes = [f"{flag}=True" for flag in _flags(op, args, kwargs)]
            notes += [f"+{len(outputs) - 1} more outputs"] if len(outputs) > 1 else []
            meaning = _from(inputs) + (f" ({', '.join(notes)})" if notes else "")
            self.recorder.rows.append(OpRow(self.recorder.scopes[-1], name, outputs[0], "", meaning, inputs, outputs))

    def explain(self, error: Exception) -> TraceError:
        """Turn a dispatcher or meta-device error into a message naming the op and the module path."""
        where = self.recorder.scopes[-1]
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        reads_values = any(s in str(error) for s in ("item()", "no data", "cannot be converted to Scalar",
                                                      "data-dependent", "nonzero"))
        if reads_values:
            after = f" right after {self.last_op[0]} -> {list(self.last_op[1])}" if self.last_op else ""
            op = self.failed_op or "a value read (.item(), bool(tensor), .tolist())"
            return TraceError(
                f"in {where!r}: {op}{after} needs a tensor's values, and the meta device has shapes only "
                f"({text}). Data-dependent code (if x.sum() > 0, .item(), .tolist(), nonzero) cannot be traced: "
                f"make the branch depend on shapes or arguments, or trace the submodules around it.",
                self.failed_op, where)
        if isinstance(error, NotImplementedError) and self.failed_op:
            return TraceError(
                f"in {where!r}: {self.failed_op} has no meta-device kernel, so it cannot be traced ({text}). "
                f"Pass an argument that avoids it (e.g. is_causal=True instead of a mask PyTorch inspects), "
                f"or trace the submodules around it.", self.failed_op, where)
        op = self.failed_op or (self.last_op[0] if self.last_op else "an op")
        return TraceError(f"in {where!r}: {op} failed on the meta device: {text}", self.failed_op, where)


def trace_callable(fn: Callable[[], object], root: nn.Module | None = None, *, ops: bool = True,
                   root_name: str = "model") -> tuple[Row, ...]:
    """Run ``fn()`` on the meta device and return its rows in order.

    ``fn`` takes no arguments and must use meta tensors only (build the model under
    ``torch.device("meta")`` or with ``meta_copy``; inputs with ``meta_inputs``). Calls of ``root``'s
    submodules are tagged by their path in ``root`` (the root itself is ``root_name``). ``ops=True``:
    an ``OpRow`` per module call and per tensor-producing op, with our ``record`` rows among them;
    ``ops=False``: the ``record`` rows alone. ``fn`` runs under ``torch.inference_mode()`` and with the
    meta device as the default for new tensors. A failure inside becomes a ``TraceError`` naming the
    op and the module path.
    """
    tracer = _Tracer(root, root_name, ops)
    handles = [nn.modules.module.register_module_forward_pre_hook(tracer.enter),
               nn.modules.module.register_module_forward_hook(tracer.leave)]
    try:
        with listening(tracer.recorder):
            try:
                # torch.device("meta"): a tensor made inside without a device lands on meta too, never in memory
                with torch.device("meta"), torch.inference_mode(), _op_tap(tracer):
                    fn()
            except (RuntimeError, NotImplementedError) as error:
                raise tracer.explain(error) from error
    finally:
        for handle in handles:
            handle.remove()
    return tuple(tracer.recorder.rows)


# ---------------------------------------------------------------------------------------------------
# Entry points.

def _check_length(name: str, value, max_len: int) -> None:
    check_positive_int(name, value)
    if value > max_len:
        raise ValueError(f"{name}={value} is longer than max_len={max_len}; raise max_len or shorten {name}")


@functools.lru_cache(maxsize=8)
def _meta_model(cfg):
    """The model on the meta device, kept per config: a slider that moves only batch or lengths reuses it."""
    with torch.device("meta"):
        return Transformer(cfg).eval()  # eval: dropout's random masks are work with no shape to show


def _remembered(trace):
    """Remember a trace's rows per arguments, but only arguments it has checked: keyed by type too (so 2.0
    or True is refused, not mistaken for a traced 2), and unhashable ones go to the trace to be refused."""
    remembered = functools.lru_cache(maxsize=256, typed=True)(trace)

    @functools.wraps(trace)
    def wrapper(*args, **kwargs):
        try:
            hash((args, tuple(kwargs.items())))
        except TypeError:
            return trace(*args, **kwargs)  # refused there, with a message that names the argument
        return remembered(*args, **kwargs)
    wrapper.cache_clear = remembered.cache_clear
    return wrapper


@_remembered
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
    return trace_callable(lambda: sequence_loss(model(src, tgt), tgt, cfg.pad_id), model, ops=False)


def meta_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` on the meta device, built without allocating: every parameter, buffer and
    tensor attribute is swapped for an empty meta twin while copying. ``module`` itself is untouched;
    a module already wholly on the meta device is returned as it is."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    twins: dict[int, torch.Tensor] = {}
    for part in module.modules():
        for value in vars(part).values():
            held = value.values() if isinstance(value, dict) else (value,)
            for tensor in held:
                if isinstance(tensor, torch.Tensor) and id(tensor) not in twins and tensor.device.type != "meta":
                    twin = torch.empty_like(tensor, device="meta")
                    if isinstance(tensor, nn.Parameter):
                        twin = nn.Parameter(twin, requires_grad=tensor.requires_grad)
                    twins[id(tensor)] = twin
    if not twins:
        return module
    try:
        return copy.deepcopy(module, memo=dict(twins))
    except Exception as error:
        raise ValueError(f"could not copy {type(module).__name__} to the meta device ({error}); build it there "
                         f"yourself (with torch.device('meta'): module = ...) and trace that") from error


def _meta_value(value, top_level: bool):
    if isinstance(value, torch.Tensor):
        return value if value.device.type == "meta" else torch.empty_like(value, device="meta")
    if top_level and isinstance(value, (tuple, list, torch.Size)) and value \
            and all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        if any(n < 0 for n in value):
            raise ValueError(f"a shape given as an input must have sizes >= 0, got {list(value)}")
        return torch.empty(tuple(value), device="meta")
    if isinstance(value, (tuple, list)):
        return type(value)(_meta_value(v, False) for v in value)
    if isinstance(value, dict):
        return {k: _meta_value(v, False) for k, v in value.items()}
    return value


def meta_inputs(*inputs, **kwargs) -> tuple[tuple, dict]:
    """Inputs for a meta trace: tensors become meta tensors of the same shape and dtype (inside lists,
    tuples and dicts too); a positional shape such as ``(32, 10, 512)`` becomes a float meta tensor.
    For integer ids pass a tensor (``torch.zeros(32, 10, dtype=torch.long)``) rather than a shape."""
    return (tuple(_meta_value(v, True) for v in inputs), {k: _meta_value(v, False) for k, v in kwargs.items()})


def trace_module(module: nn.Module, *inputs, **kwargs) -> tuple[Row, ...]:
    """Every module call and tensor-producing op of ``module(*inputs, **kwargs)``, run on a meta copy.

    ``inputs``: real tensors, meta tensors or shapes (see ``meta_inputs``); ``kwargs`` go to the
    module's forward. Returns ``OpRow``s (module path, op or module class, output shape, input shapes)
    and, for our own model, its named-step ``Row``s among them. The module keeps its train/eval mode:
    call ``.eval()`` first to leave dropout out. Nothing is allocated.
    """
    model = meta_copy(module)
    args, kw = meta_inputs(*inputs, **kwargs)
    return trace_callable(lambda: model(*args, **kw), model)


# ---------------------------------------------------------------------------------------------------
# Printing and folding.

def show(label: str, tensor: torch.Tensor, dims: str) -> None:
    """Print one line: a label, the tensor's shape, and what each dim means (checked to match in number)."""
    if len(dims.split()) != tensor.dim():
        raise ValueError(f"{label}: dims {dims!r} name {len(dims.split())} dims but the shape "
                         f"{list(tensor.shape)} has {tensor.dim()}")
    print(f"{label:<30} {list(tensor.shape)!s:<18} {dims}")


def by_step(rows) -> dict[tuple[str, str], Row]:
    """Traced rows keyed by (where, step), to look a step up: ``by_step(rows)["generator", "logits"].shape``.

    A step recorded twice in one module (a mask made for two uses) keeps its last row.
    """
    return {(row.where, row.step): row for row in rows}


def check_shape(tensor: torch.Tensor, expected: tuple[int, ...]) -> None:
    """Assert a shape, d2l-style: a claim about a shape is a line that fails if the claim is wrong."""
    if tuple(tensor.shape) != tuple(expected):
        raise AssertionError(f"shape {list(tensor.shape)}, expected {list(expected)}")


_INDEXED = re.compile(r"^(?:(.*?)\.)?(\d+)(?:\.(.*))?$")  # the first numeric path part: stack, index, rest
_NOTE = "(same steps as layer 0)"


def _block(row: Row) -> tuple[str, int, str] | None:
    match = _INDEXED.match(row.where)
    return (match.group(1) or "", int(match.group(2)), match.group(3) or "") if match else None


def summarise(rows: tuple[Row, ...]) -> list[Row]:
    """Keep layer 0 of each stack in full; replace layers 1, 2, ... by one note row while their rows repeat
    layer 0's (same relative paths, steps and shapes). From the first layer that differs on, all stay in full."""
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
    folded: tuple[str, list[int]] | None = None
    for key, block_rows in blocks:
        if key is not None and key[1] == 0:
            first[key[0]] = signature(block_rows)
        repeats_first = key is not None and key[1] > 0 and first.get(key[0]) == signature(block_rows)
        if key is not None and key[1] > 0 and not repeats_first:
            first.pop(key[0], None)  # a layer that differs ends the folding: the order stays readable
        if repeats_first and folded is not None and folded[0] == key[0]:
            folded[1].append(key[1])
            continue
        if folded is not None:
            out.append(_repeat_row(*folded))
            folded = None
        if repeats_first:
            folded = (key[0], [key[1]])
        else:
            out.extend(block_rows)
    if folded is not None:
        out.append(_repeat_row(*folded))
    return out


def _repeat_row(stack: str, layers: list[int]) -> Row:
    span = f"{min(layers)}" if len(layers) == 1 else f"{min(layers)}–{max(layers)}"
    return Row(f"{stack}.{span}" if stack else span, _NOTE, (), "", f"{len(layers)} more layer(s), same shapes")


def _depth(where: str) -> int:
    return 0 if where == "model" else where.count(".") + 1


def shape_table(rows, *, depth: int | None = None, within: str | None = None, fold: bool = True,
                highlight: tuple[str, ...] | str = ()) -> ShapeTable:
    """A readable view of traced rows: ``within`` keeps one module's rows (``"encoder.layers.0.self_attn"``);
    ``depth`` shows modules down to that many path parts as one row each (ops down to one part fewer);
    ``fold`` summarises layers 1..N-1; ``highlight`` marks rows whose step or path contains a text."""
    rows = list(rows)
    if within is not None:
        inside = [r for r in rows if r.where == within or r.where.startswith(within + ".")]
        if not inside:
            paths = sorted({r.where for r in rows if isinstance(r, OpRow) and r.kind == "module"})[:8]
            raise ValueError(f"within={within!r} matches no row's module path; paths look like {paths}")
        rows = inside
    if depth is not None:
        check_positive_int("depth", depth)
        rows = [r for r in rows if _depth(r.where) < depth
                or (isinstance(r, OpRow) and r.kind == "module" and _depth(r.where) == depth)]
    highlight = (highlight,) if isinstance(highlight, str) else tuple(highlight)
    return ShapeTable(summarise(rows) if fold else rows, highlight)


def _shape_text(row: Row) -> str:
    return str(list(row.shape)) if row.dims or isinstance(row, OpRow) else ""


def format_table(rows: list[Row] | tuple[Row, ...]) -> str:
    """A fixed-width text table, for terminals and for nbval-checked cells."""
    cells = [("where", "step", "shape", "dims", "meaning")]
    cells += [(r.where, r.step, _shape_text(r), r.dims, r.meaning) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(4)) + "  " + c[4] for c in cells]
    lines.insert(1, "-" * (sum(widths) + 8 + len("meaning")))
    return "\n".join(line.rstrip() for line in lines)


_NOWRAP = ("", "", ";white-space:nowrap", ";white-space:nowrap", "")  # a shape never breaks across lines


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
            cells = (r.where, r.step, _shape_text(r), r.dims, r.meaning)
            body.append(f"<tr{style}>" + "".join(f"<td style='text-align:left{nowrap}'>{html.escape(c)}</td>"
                                                 for c, nowrap in zip(cells, _NOWRAP)) + "</tr>")
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
    cfg = ModelConfig() if cfg is None else cfg  # the defaults are the paper's base sizes
    highlight = (highlight,) if isinstance(highlight, str) else tuple(highlight)
    return ShapeTable(summarise(trace_shapes(cfg, batch, src_len, tgt_len)), highlight, fold=True)


# ---------------------------------------------------------------------------------------------------
# One decoding step with the key/value cache (notebook 08).

@_remembered
def trace_decoding_step(cfg, batch: int = 32, src_len: int = 10, step: int = 5) -> tuple[Row, ...]:
    """Trace decoding step ``step`` (1, 2, ...) of ``Transformer(cfg)`` with its cache, on the meta device.

    Steps 1..step-1 fill the cache first (not traced); the traced call feeds one new token per sentence
    ([batch, 1], at position step-1) and returns its recorded steps: the query [B, H, 1, d_k] meets the
    ``step`` cached keys [B, H, step, d_k] (scores [B, H, 1, step]) and the memory's keys
    [B, H, src_len, d_k] (scores [B, H, 1, src_len]); the step ends with logits [B, 1, V]. The encoder
    is not in it: it ran once, before step 1.
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be a walkthrough.ModelConfig, got {type(cfg).__name__}")
    check_positive_int("batch", batch)
    _check_length("src_len", src_len, cfg.max_len)
    check_positive_int("step", step)
    if step > cfg.max_len:
        raise ValueError(f"step={step} feeds position {step - 1}, past max_len={cfg.max_len}: "
                         f"choose step <= {cfg.max_len} or raise max_len")
    model = _meta_model(cfg)
    src = torch.zeros(batch, src_len, dtype=torch.long, device="meta")
    memory = torch.empty(batch, src_len, cfg.d_model, device="meta")  # what model.encode(src) gives
    cache = model.new_cache(src)
    cache.source = None  # meta ids hold no values to compare, and this source never changes
    with torch.inference_mode():
        if step > 1:  # the earlier steps at once: the cache ends up as after step-1 single steps
            model.decode(torch.zeros(batch, step - 1, dtype=torch.long, device="meta"), memory, src, cache)
    new_token = torch.zeros(batch, 1, dtype=torch.long, device="meta")  # [B, 1]
    return trace_callable(lambda: model.generator(model.decode(new_token, memory, src, cache)), model, ops=False)


# ---------------------------------------------------------------------------------------------------
# The decoder-only model (notebook 09).

@functools.lru_cache(maxsize=8)
def _meta_gpt(cfg):
    """The GPT on the meta device, kept per config (as ``_meta_model``)."""
    with torch.device("meta"):
        return GPT(cfg).eval()


@_remembered
def trace_gpt(cfg, batch: int = 32, length: int = 10, cached: bool = False) -> tuple[Row, ...]:
    """Run ``GPT(cfg)`` on the meta device on [batch, length] ids and return every recorded step, in order.

    ``cached=False``: the whole sequence at once, then the loss's label steps (the ids shifted by one
    serve as labels; only shapes matter here). ``cached=True``: positions 0..length-2 fill the cache
    first (not traced) and the traced call feeds one new token per sequence at position length-1:
    its query [B, H, 1, d_k] meets ``length`` cached keys [B, H_kv, length, d_k].
    """
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a walkthrough.GPTConfig, got {type(cfg).__name__}")
    check_positive_int("batch", batch)
    _check_length("length", length, cfg.max_len)
    if not isinstance(cached, bool):
        raise TypeError(f"cached must be True or False, got {cached!r}")
    model = _meta_gpt(cfg)
    if not cached:
        ids = torch.zeros(batch, length, dtype=torch.long, device="meta")
        return trace_callable(lambda: sequence_loss(model(ids), ids, cfg.pad_id), model, ops=False)
    cache = model.new_cache(batch)
    with torch.inference_mode():
        if length > 1:
            model(torch.zeros(batch, length - 1, dtype=torch.long, device="meta"), cache)
    new_token = torch.zeros(batch, 1, dtype=torch.long, device="meta")  # [B, 1]
    return trace_callable(lambda: model(new_token, cache), model, ops=False)

"""Trace shapes on PyTorch's meta device: our model's named steps, or every op of any ``nn.Module``.

On the meta device a tensor has a shape, a dtype and strides but no data, so a forward pass
allocates nothing and computes nothing: only shapes flow. Three layers, bottom to top:

- One adapter around PyTorch's op interception (``_OpTap``). At the dispatcher level (the private
  ``torch.utils._python_dispatch.TorchDispatchMode`` and ``OpOverload._schema``) it sees every aten
  op (``aten.linear``, ``aten.view``, ...). Without those private names it falls back to the public
  ``torch.overrides.TorchFunctionMode``: the same shapes, named by torch function
  (``torch.nn.functional.linear``), coarser inside functions that are themselves overridable, and
  slower because nothing is answered from memory. ``trace_module`` runs under PyTorch's FakeTensor mode
  as well (private too; without it, plain meta): a FakeTensor is a meta tensor that says it is one, so
  library code that asks whether it is being traced (transformers' mask code) takes its shape-only path
  instead of reading values no meta tensor has.
- The core, ``trace_callable(fn, root)``: runs ``fn()`` (which must build its tensors on the meta
  device) and returns, in order, one ``OpRow`` per module call and per tensor-producing op, each
  tagged with the module path it ran in (``encoder.layers.0.self_attn``), plus a ``Row`` for each
  ``record(...)`` call our own model makes. Repeated ops (every layer after the first makes layer 0's
  calls) are answered from memory, so a 96-layer GPT-3-sized stack traces in about a second.
- Two entry points. ``trace_shapes(cfg, batch, src_len, tgt_len)`` (our models' named steps only): a
  ``ModelConfig`` traces the encoder–decoder, a ``GPTConfig`` the decoder-only model (``length=``), and
  ``step=t`` traces decoding step t with the cache, for either. ``trace_module(module, *inputs,
  **kwargs)``: any module, op by op (a meta copy is traced, the caller's module is never touched,
  its hooks do not run). A new entry point is a few lines: build the model on the meta device (or
  ``meta_copy`` it), build meta inputs (``meta_inputs``), and call
  ``trace_callable(lambda: model.some_step(...), model)``.

Views: ``summarise`` replaces layers 1..N-1 by one note row when their rows repeat layer 0's;
``shape_table(rows, depth=..., within=..., steps=...)`` keeps a table readable; ``ShapeTable`` renders
it (and can fold the whole table under this notebook's highlighted steps).
"""

from __future__ import annotations

import copy
import functools
import html
import inspect
import re
from collections.abc import Callable, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from types import MappingProxyType

import torch
from torch import nn

from .attention import keep_attention_weights
from .checks import check_positive_int
from .config import GPTConfig, ModelConfig
from .hooks import running_modules
from .i18n import N_, _, ljust, width
from .loss import sequence_loss
from .meta import meta_model
from .recording import Recorder, Row, listening
from .steps import STEPS, StepRows

# ---------------------------------------------------------------------------------------------------
# The adapter: the only place that touches PyTorch's private op-interception API.

try:
    from torch.utils._python_dispatch import TorchDispatchMode as _DispatchMode
    from torch.utils._python_dispatch import _disable_current_modes
except ImportError:  # renamed or removed in some future torch: trace at the torch-function level instead
    _DispatchMode = None

try:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        FakeTensor,
        FakeTensorMode,
        UnsupportedOperatorException,
    )
    _VALUE_READS: tuple[type[Exception], ...] = (DataDependentOutputException, DynamicOutputShapeException)
    _NO_KERNEL: tuple[type[Exception], ...] = (NotImplementedError, UnsupportedOperatorException)
except ImportError:  # without FakeTensor a module traces on plain meta tensors (code asking "am I traced?" hears no)
    FakeTensor = FakeTensorMode = None
    _VALUE_READS, _NO_KERNEL = (), (NotImplementedError,)


def _fake_mode():
    """A FakeTensor mode over the meta device, or None without that private API.

    A FakeTensor is a meta tensor that says it is one: code that asks whether it is being traced
    (transformers' mask code: ``is_tracing(mask)``) then takes its shape-only path instead of reading the
    mask's values, which no meta tensor has. Tensors it meets that are not fake (the module's meta weights)
    are taken in as they come."""
    return FakeTensorMode(allow_non_fake_inputs=True) if FakeTensorMode is not None else None


def _faked(value, mode):
    """``value`` with every meta tensor in it (inside lists, tuples and dicts too) made a FakeTensor of ``mode``."""
    if isinstance(value, torch.Tensor):
        return mode.from_tensor(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_faked(v, mode) for v in value)
    if isinstance(value, dict):
        return {k: _faked(v, mode) for k, v in value.items()}
    return value


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

        def __init__(self, tracer: _Tracer, faking: bool):
            super().__init__()
            self.tracer = tracer
            self.faking = faking

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with _disable_current_modes() if self.faking and _plain_meta_only(args, kwargs) else nullcontext():
                return self.tracer.run_op(func, args, kwargs, _returns_fresh(func))


def _plain_meta_only(args, kwargs) -> bool:
    """True when an op under a FakeTensor mode meets tensors and none is fake (``torch.tensor(...)`` inside
    forward makes a plain meta tensor, then ``detach_``-es it in inference mode): it runs on the meta device
    itself, since FakeTensor refuses in-place metadata ops on tensors that are not its own."""
    tensors = [t for value in (*args, *kwargs.values()) for t in _tensors(value)]
    return bool(tensors) and not any(isinstance(t, FakeTensor) for t in tensors)


class _FunctionTap(torch.overrides.TorchFunctionMode):
    """The public fallback: every torch function call goes through ``tracer.run_op`` (never memoised)."""

    def __init__(self, tracer: _Tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.tracer.run_op(func, args, kwargs or {}, False)


def _op_tap(tracer: _Tracer, faking: bool):
    """The interception context for one trace: dispatcher level when available, torch functions otherwise
    (``faking``: the trace runs under a FakeTensor mode too)."""
    return _DispatchTap(tracer, faking) if _DispatchMode is not None else _FunctionTap(tracer)


_MODULE_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


@contextmanager
def _hooks_suspended(module: nn.Module):
    """Take the hooks registered on ``module`` and its submodules away while the block runs; put them back after.

    A user's hook is written for real tensors (one saving activations would keep a meta tensor): it must
    not run on a trace. Uses ``nn.Module``'s private hook dicts; the handles the user holds stay valid.
    """
    saved = [(part, name, part.__dict__[name]) for part in module.modules() for name in _MODULE_HOOKS
             if part.__dict__.get(name)]
    for part, name, hooks in saved:
        part.__dict__[name] = type(hooks)()
    try:
        yield
    finally:
        for part, name, hooks in saved:
            part.__dict__[name] = hooks


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
    """A module could not run on the meta device: ``op`` and ``where`` (the module path) say where;
    ``reads_values``: because it needed a tensor's values."""

    def __init__(self, message: str, op: str | None, where: str, reads_values: bool = False):
        super().__init__(message)
        self.op = op
        self.where = where
        self.reads_values = reads_values


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in an op's argument or result (one level into lists and tuples, as aten ops take them), or
    in a module's: a dict-like output too (transformers' ``ModelOutput``), in its order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _shapes(values) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(t.shape) for v in values for t in _tensors(v))


def _from(shapes: tuple[tuple[int, ...], ...], named: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] = ()) -> str:
    """``from [2, 5], input_ids=[2, 5]``: positional inputs' shapes, then each keyword tensor input's by its name
    (several tensors under one keyword in parentheses)."""
    parts = [str(list(s)) for s in shapes]
    parts += [f"{name}={list(group[0])}" if len(group) == 1 else f"{name}=({', '.join(str(list(s)) for s in group)})"
              for name, group in named]
    return _("from {shapes}").format(shapes=", ".join(parts)) if parts else _("new tensor")


def _is_bookkeeping(name: str, inputs: tuple[tuple[int, ...], ...], outputs: tuple[tuple[int, ...], ...]) -> bool:
    """An op that shows nothing about the model's shapes: it makes only empty tensors (an empty key/value cache's
    placeholder, ``detach_ [0]``), or a ``cat`` that joins one tensor to empty ones (filling an empty cache), which
    gives that tensor back as it was."""
    if all(0 in shape for shape in outputs):
        return True
    return name.rsplit(".", 1)[-1] == "cat" and sum(0 not in shape for shape in inputs) == 1


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


ROOT = "model"  # the path a trace gives the traced module itself


def _root_name(module: nn.Module) -> str:
    """The path a trace of ``module`` gives the module itself: ``model``, or its class name when one of its
    submodules is called ``model`` (transformers' ``LlamaForCausalLM.model``), so that no path names two modules."""
    taken = {name.split(".")[0] for name, _part in module.named_modules() if name}
    root = ROOT if ROOT not in taken else type(module).__name__
    while root in taken:  # a submodule named like the class too: mark the root until it is unique
        root += "'"
    return root


class _Tracer:
    """State of one trace: the recorder (rows and the module-path stack), remembered ops, the last op."""

    def __init__(self, root: nn.Module | None, root_name: str, ops: bool):
        self.recorder = Recorder(getattr(root, "dim_names", None))
        self.recorder.scopes = [root_name]
        self.root = root
        self.ops = ops
        self.open_calls: list[int] = []  # row index of each running module's placeholder
        self.memory: dict = {}
        self.last_op: tuple[str, tuple[int, ...]] | None = None
        self.failed_op: str | None = None

    def enter(self, path, module, args, kwargs):
        if self.ops and module is not self.root:
            self.open_calls.append(len(self.recorder.rows))
            self.recorder.rows.append(None)  # becomes the module's row when it returns (outputs known then)

    def leave(self, path, module, args, kwargs, output):
        if self.ops and module is not self.root:
            positional, outputs = _shapes(args), _shapes([output])
            named = tuple((key, shapes) for key, value in kwargs.items() if (shapes := _shapes([value])))
            inputs = positional + tuple(shape for _key, shapes in named for shape in shapes)
            self.recorder.rows[self.open_calls.pop()] = OpRow(
                path, type(module).__name__, outputs[0] if outputs else (), "", _from(positional, named), inputs,
                outputs, "module")

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
        inputs = _shapes(args)
        if self.ops and not _is_bookkeeping(name, inputs, outputs):
            notes = [f"{flag}=True" for flag in _flags(op, args, kwargs)]
            notes += [_("+{count} more outputs").format(count=len(outputs) - 1)] if len(outputs) > 1 else []
            meaning = _from(inputs) + (f" ({', '.join(notes)})" if notes else "")
            self.recorder.rows.append(OpRow(self.recorder.scopes[-1], name, outputs[0], "", meaning, inputs, outputs))

    def explain(self, error: Exception) -> TraceError:
        """Turn a dispatcher or meta-device error into a message naming the op and the module path."""
        where = self.recorder.scopes[-1]
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        reads_values = isinstance(error, _VALUE_READS) or any(
            s in str(error) for s in ("item()", "no data", "cannot be converted to Scalar", "data-dependent",
                                      "nonzero"))
        if reads_values:
            after = _(" right after {op} -> {shape}").format(op=self.last_op[0], shape=list(self.last_op[1])) \
                if self.last_op else ""
            op = self.failed_op or _("a value read (.item(), bool(tensor), .tolist())")
            return TraceError(
                _("in {where!r}: {op}{after} needs a tensor's values, and the meta device has shapes only "
                "({text}). Data-dependent code (if x.sum() > 0, .item(), .tolist(), nonzero) cannot be traced: "
                "make the branch depend on shapes or arguments, or trace the submodules around it.").format(
                    where=where, op=op, after=after, text=text),
                self.failed_op, where, reads_values=True)
        if isinstance(error, _NO_KERNEL) and self.failed_op:
            return TraceError(
                _("in {where!r}: {failed_op} has no meta-device kernel, so it cannot be traced ({text}). "
                "Pass an argument that avoids it (e.g. is_causal=True instead of a mask PyTorch inspects), "
                "or trace the submodules around it.").format(
                    where=where, failed_op=self.failed_op, text=text), self.failed_op, where)
        op = self.failed_op or (self.last_op[0] if self.last_op else _("an op"))
        return TraceError(_("in {where!r}: {op} failed on the meta device: {text}").format(
            where=where, op=op, text=text), self.failed_op, where)


def trace_callable(fn: Callable[[], object], root: nn.Module | None = None, *, ops: bool = True,
                   root_name: str = ROOT, fake_mode=None) -> tuple[Row, ...]:
    """Run ``fn()`` on the meta device and return its rows in order.

    ``fn`` takes no arguments and must use meta tensors only (build the model under
    ``torch.device("meta")`` or with ``meta_copy``; inputs with ``meta_inputs``). Calls of ``root``'s
    submodules are tagged by their path in ``root`` (the root itself is ``root_name``). ``ops=True``:
    an ``OpRow`` per module call and per tensor-producing op, with our ``record`` rows among them;
    ``ops=False``: the ``record`` rows alone. ``fn`` runs under ``torch.inference_mode()`` and with the
    meta device as the default for new tensors; ``root``'s attention layers write attention out
    (``keep_attention_weights``), so their scores and weights are steps of the trace. A failure inside
    becomes a ``TraceError`` naming the op and the module path. ``fake_mode`` (from ``_fake_mode()``, with
    ``fn``'s inputs made its FakeTensors) runs ``fn`` under that FakeTensor mode too.
    """
    tracer = _Tracer(root, root_name, ops)
    with listening(tracer.recorder):
        try:
            # torch.device("meta"): a tensor made inside without a device lands on meta too, never in memory
            with (torch.device("meta"), torch.inference_mode(), fake_mode or nullcontext(),
                  running_modules(root, root_name, tracer.recorder.scopes, tracer.enter, tracer.leave)
                  if root is not None else nullcontext(),
                  keep_attention_weights(root) if root is not None else nullcontext(),
                  _op_tap(tracer, fake_mode is not None)):
                fn()
        except (RuntimeError, NotImplementedError) as error:
            raise tracer.explain(error) from error
    return tuple(tracer.recorder.rows)


# ---------------------------------------------------------------------------------------------------
# Our models' named steps: one entry point for both models, whole sequences or one cached decoding step.

SOURCE_SIZES = MappingProxyType({"batch": 32, "src_len": 10, "tgt_len": 4})  # the source articles' B, L_src, L_tgt


def trace_shapes(cfg: ModelConfig | GPTConfig, batch: int | None = None, src_len: int | None = None,
                 tgt_len: int | None = None, *, length: int | None = None, step: int | None = None) -> tuple[Row, ...]:
    """Every named step of the real model, run on the meta device (shapes only, nothing computed), in order.

    ``cfg`` picks the model. A ``ModelConfig``: the encoder–decoder ``Transformer`` on a [batch, src_len]
    source and a [batch, tgt_len] target. A ``GPTConfig``: the decoder-only ``GPT`` on one [batch, length]
    sequence. A whole-sequence trace ends with the loss's label and flattening steps.

    ``step=t`` traces decoding step t (1, 2, ...) with the key/value cache instead: the t - 1 tokens before
    it are in the cache already (filled first, not traced) and one new token per sequence is fed, at
    position t - 1; its query [B, H, 1, d_k] meets t cached keys. The step says how far the decoder has
    read, so ``tgt_len`` (``length``) is left out; the encoder–decoder's encoder ran once before step 1 and
    is not in the trace (its memory's keys are: [B, H, src_len, d_k]). The step ends with logits [B, 1, V].

    Sizes left out are the source articles' (``SOURCE_SIZES``: B = 32, L_src = 10, L_tgt = 4); a GPT reads
    their source and target as one sequence of L_src + L_tgt = 14 tokens.
    """
    if not isinstance(cfg, (ModelConfig, GPTConfig)):
        raise TypeError(_("cfg must be a walkthrough.ModelConfig (encoder–decoder) or GPTConfig (decoder-only), "
                          "got {type}").format(type=type(cfg).__name__))
    is_gpt = isinstance(cfg, GPTConfig)
    if is_gpt and (src_len is not None or tgt_len is not None):
        raise ValueError(_("a GPTConfig traces one sequence: give its length as length=... (src_len and tgt_len "
                           "are the encoder–decoder's, for a ModelConfig)"))
    if not is_gpt and length is not None:
        raise ValueError(_("length= is the decoder-only model's one sequence (a GPTConfig); a ModelConfig takes "
                           "src_len and tgt_len"))
    batch = SOURCE_SIZES["batch"] if batch is None else batch
    check_positive_int("batch", batch)
    if not is_gpt:
        src_len = SOURCE_SIZES["src_len"] if src_len is None else src_len
        _check_length("src_len", src_len, cfg.max_len)
    if step is not None:
        _check_step(step, tgt_len if not is_gpt else length, "length" if is_gpt else "tgt_len", cfg.max_len)
        return _trace_gpt_step(cfg, batch, step) if is_gpt else _trace_pair_step(cfg, batch, src_len, step)
    if is_gpt:
        length = SOURCE_SIZES["src_len"] + SOURCE_SIZES["tgt_len"] if length is None else length
        _check_length("length", length, cfg.max_len)
        return _trace_gpt(cfg, batch, length)
    tgt_len = SOURCE_SIZES["tgt_len"] if tgt_len is None else tgt_len
    _check_length("tgt_len", tgt_len, cfg.max_len)
    return _trace_pair(cfg, batch, src_len, tgt_len)


def _check_length(name: str, value, max_len: int) -> None:
    check_positive_int(name, value)
    if value > max_len:
        raise ValueError(_("{name}={value} is longer than max_len={max_len}; raise max_len or shorten {name}").format(
            name=name, value=value, max_len=max_len))


def _check_step(step, decoded_len, decoded_name: str, max_len: int) -> None:
    check_positive_int("step", step)
    if decoded_len is not None:
        raise ValueError(_("step={step} already says how far the decoder has read ({cached} tokens in the cache "
                           "and the new one): leave {name} out").format(step=step, cached=step - 1, name=decoded_name))
    if step > max_len:
        raise ValueError(_("step={step} feeds position {position}, past max_len={max_len}: "
                           "choose step <= {max_len} or raise max_len").format(step=step, position=step - 1,
                                                                               max_len=max_len))


# The traces themselves take checked sizes only, so remembering them per arguments is safe: a slider that
# comes back to a size it showed before costs nothing. Models are kept per config: moving batch or a length
# reuses the model (meta_model).

def _ids(batch: int, length: int) -> torch.Tensor:
    return torch.zeros(batch, length, dtype=torch.long, device="meta")  # [B, L]: only the shape matters


def _untraced(fill: Callable[[], object]) -> None:
    """Run ``fill`` (what comes before a traced step, such as filling a cache) as a trace whose rows are dropped:
    its ops are answered from memory too, so every layer after the first costs almost nothing."""
    trace_callable(fill, ops=False)


@functools.lru_cache(maxsize=256)
def _trace_pair(cfg: ModelConfig, batch: int, src_len: int, tgt_len: int) -> tuple[Row, ...]:
    model = meta_model(cfg)
    src, tgt = _ids(batch, src_len), _ids(batch, tgt_len)
    return trace_callable(lambda: sequence_loss(model(src, tgt), tgt, cfg.pad_id), model, ops=False)


@functools.lru_cache(maxsize=256)
def _trace_pair_step(cfg: ModelConfig, batch: int, src_len: int, step: int) -> tuple[Row, ...]:
    model = meta_model(cfg)
    src = _ids(batch, src_len)
    memory = torch.empty(batch, src_len, cfg.d_model, device="meta")  # what model.encode(src) gives
    cache = model.new_cache(src)
    if step > 1:  # the earlier steps at once: the cache ends up as after step - 1 single steps
        _untraced(lambda: model.decode(_ids(batch, step - 1), memory, src, cache))
    new_token = _ids(batch, 1)  # [B, 1]
    return trace_callable(lambda: model.output_head(model.decode(new_token, memory, src, cache)), model, ops=False)


@functools.lru_cache(maxsize=256)
def _trace_gpt(cfg: GPTConfig, batch: int, length: int) -> tuple[Row, ...]:
    model = meta_model(cfg)
    ids = _ids(batch, length)  # the ids shifted by one serve as labels: only shapes matter here
    return trace_callable(lambda: sequence_loss(model(ids), ids, cfg.pad_id), model, ops=False)


@functools.lru_cache(maxsize=256)
def _trace_gpt_step(cfg: GPTConfig, batch: int, step: int) -> tuple[Row, ...]:
    model = meta_model(cfg)
    cache = model.new_cache(batch)
    if step > 1:
        _untraced(lambda: model(_ids(batch, step - 1), cache))
    new_token = _ids(batch, 1)  # [B, 1]
    return trace_callable(lambda: model(new_token, cache), model, ops=False)


def meta_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` on the meta device, built without allocating: every parameter, buffer and
    tensor attribute is swapped for an empty meta twin while copying. ``module`` itself is untouched;
    a module already wholly on the meta device is returned as it is."""
    if not isinstance(module, nn.Module):
        raise TypeError(_("module must be a torch.nn.Module, got {type}").format(type=type(module).__name__))
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
        raise ValueError(_("could not copy {type} to the meta device ({error}); build it there "
                         "yourself (with torch.device('meta'): module = ...) and trace that").format(
                             type=type(module).__name__, error=error)) from error


def _meta_shape(shape: tuple, name: str) -> torch.Tensor:
    """A float meta tensor of ``shape`` (a tuple given where a tensor goes), or a message saying why it is not one."""
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        raise TypeError(_("{name} = {shape} is not a shape: a shape is a tuple of whole sizes such as (32, 10, 512); "
                        "for data pass a tensor (torch.tensor({list_shape}))").format(
                            name=name, shape=shape, list_shape=list(shape)))
    if any(n < 0 for n in shape):
        raise ValueError(_("{name} = {shape}: a shape given as an input must have sizes >= 0").format(
            name=name, shape=shape))
    return torch.empty(shape, device="meta")


def _meta_value(value, name: str, top_level: bool, keyword: bool = False):
    """One input for a meta trace (``name`` says which, for messages): see ``meta_inputs``."""
    if isinstance(value, torch.Tensor):
        return value if value.device.type == "meta" else torch.empty_like(value, device="meta")
    if type(value).__module__ == "numpy" and hasattr(value, "shape"):
        raise TypeError(_("{name} is a numpy array: pass a tensor (torch.from_numpy(array)) or its shape as a "
                        "tuple, {tuple_value_shape}").format(name=name, tuple_value_shape=tuple(value.shape)))
    if top_level and isinstance(value, (tuple, list)) and value and all(isinstance(n, (int, float)) for n in value):
        if isinstance(value, tuple):
            return _meta_shape(tuple(value), name)
        if not keyword:  # a keyword's list of numbers (ConvTranspose's output_size) goes to forward as it is
            raise TypeError(_("{name} is the list {value}: give a shape as a tuple ({tuple_value}) and data as a "
                            "tensor (torch.tensor({value}))").format(name=name, value=value, tuple_value=tuple(value)))
    if isinstance(value, (tuple, list)):
        return type(value)(_meta_value(v, f"{name}[{i}]", False) for i, v in enumerate(value))
    if isinstance(value, dict):
        return {k: _meta_value(v, f"{name}[{k!r}]", False) for k, v in value.items()}
    return value


def meta_inputs(*inputs, **kwargs) -> tuple[tuple, dict]:
    """Inputs for a meta trace: tensors become meta tensors of the same shape and dtype (inside lists,
    tuples and dicts too); a shape, a tuple of whole sizes such as ``(32, 10, 512)`` or a ``torch.Size``,
    given as an input or a keyword argument, becomes a float meta tensor. For integer ids pass a tensor
    (``torch.zeros(32, 10, dtype=torch.long)``). A list of numbers as an input and a numpy array are
    refused with a message (give a tuple for a shape, a tensor for data); other keyword values (flags,
    a list of sizes) go to ``forward`` as they are."""
    return (tuple(_meta_value(v, f"inputs[{i}]", True) for i, v in enumerate(inputs)),
            {k: _meta_value(v, k, True, keyword=True) for k, v in kwargs.items()})


def trace_module(module: nn.Module, *inputs, **kwargs) -> tuple[Row, ...]:
    """Every module call and tensor-producing op of ``module(*inputs, **kwargs)``, run on a meta copy.

    ``inputs``: real tensors, meta tensors or shapes (see ``meta_inputs``); ``kwargs`` go to the
    module's forward. Returns ``OpRow``s (module path, op or module class, output shape, input shapes)
    and, for our own model, its named-step ``Row``s among them. The module keeps its train/eval mode:
    call ``.eval()`` first to leave dropout out. Nothing is allocated, and the module's own forward and
    backward hooks do not run (they were written for real tensors: a hook saving activations keeps them).
    """
    if not isinstance(module, nn.Module):
        raise TypeError(_("module must be a torch.nn.Module, got {type}").format(type=type(module).__name__))
    scripted = next((path for path, part in module.named_modules() if isinstance(part, torch.jit.ScriptModule)), None)
    if scripted is not None:
        which = f"module.{scripted}" if scripted else "module"
        raise TypeError(_("{which} is a TorchScript module (torch.jit.script or torch.jit.trace): its compiled code "
                        "runs outside Python, where the meta-device trace cannot follow it. Trace the Python "
                        "nn.Module it was made from instead (the one you passed to torch.jit.script)").format(
                            which=which))
    args, kw = meta_inputs(*inputs, **kwargs)
    fake_mode = _fake_mode()
    if fake_mode is not None:
        args, kw = _faked(args, fake_mode), _faked(kw, fake_mode)
    with _hooks_suspended(module):
        model = meta_copy(module)  # copied while the hooks are away: the copy has none
        try:
            return trace_callable(lambda: model(*args, **kw), model, root_name=_root_name(model), fake_mode=fake_mode)
        except TraceError as error:
            hint = _causal_flag_hint(module, kwargs) or (_mask_hint(kwargs) if error.reads_values else None)
            if hint is None:
                raise
            message = _("{error}. {hint}").format(error=str(error).rstrip(".。"), hint=hint)  # one sentence's end
            raise TraceError(message, error.op, error.where, error.reads_values) from error


def _causal_flag_hint(module: nn.Module, kwargs: dict) -> str | None:
    """For a mask given without its ``*is_causal`` flag (``nn.Transformer``'s ``tgt_mask``): PyTorch reads the
    mask's values to see whether it is causal, which the meta device cannot; the flag tells it instead."""
    try:
        accepted = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return None
    for name, value in kwargs.items():
        if not (name.endswith("mask") and "padding" not in name and isinstance(value, torch.Tensor)):
            continue
        flag = next((f for f in (name[:-len("mask")] + "is_causal", "is_causal") if f in accepted), None)
        if flag is not None and kwargs.get(flag) is not True:
            return _("If {name} is a causal (subsequent) mask, pass {flag}=True with it: PyTorch then trusts the "
                     "flag instead of reading the mask's values, which the meta device does not have").format(
                         name=name, flag=flag)
    return None


def _mask_hint(kwargs: dict) -> str | None:
    """For a mask given as a keyword (transformers' ``attention_mask``) when a value was read: a mask decides which
    values mix, never a shape, so the trace without it shows the same shapes."""
    name = next((k for k, v in kwargs.items() if k.endswith("mask") and isinstance(v, torch.Tensor)), None)
    if name is None:
        return None
    return _("{name} decides which values mix, never a shape: trace without {name} to see the same shapes").format(
        name=name)


# ---------------------------------------------------------------------------------------------------
# Printing, asserting, summarising.

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


def shape_map(cfg: ModelConfig | GPTConfig | None = None, batch: int | None = None, src_len: int | None = None,
              tgt_len: int | None = None, highlight: tuple[str, ...] | str = (), **sizes) -> ShapeTable:
    """The series' map: the summarised trace (``trace_shapes``: same sizes, same defaults, ``length=`` and
    ``step=`` too) with the steps of this notebook highlighted first and the whole map folded below."""
    cfg = ModelConfig() if cfg is None else cfg  # the defaults are the paper's base sizes
    return ShapeTable(summarise(trace_shapes(cfg, batch, src_len, tgt_len, **sizes)), highlight, fold=True)

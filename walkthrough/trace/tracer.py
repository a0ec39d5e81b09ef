"""Trace shapes on PyTorch's meta device: our model's named steps, or every op of any ``nn.Module``.

On the meta device a tensor has a shape, a dtype and strides but no data, so a forward pass
allocates nothing and computes nothing: only shapes flow. Ops are seen through ``op_tap.py`` (the one place
that touches PyTorch's private op interception); the rows are read in ``tables.py``. Here:

- The core, ``trace_callable(fn, root)``: runs ``fn()`` (which must build its tensors on the meta
  device) and returns, in order, one ``OpRow`` per module call and per tensor-producing op, each
  tagged with the module path it ran in (``encoder.layers.0.self_attn``, from ``hooks.running_modules``),
  plus a ``Row`` for each ``record(...)`` call our own model makes. Repeated ops (every layer after the first
  makes layer 0's calls) are answered from memory, so a 96-layer GPT-3-sized stack traces in about a second.
- Two entry points. ``trace_shapes(cfg, batch, src_len, tgt_len)`` (our models' named steps only): a
  ``ModelConfig`` traces the encoder–decoder, a ``GPTConfig`` the decoder-only model (``length=``), and
  ``step=t`` traces decoding step t with the cache, for either. ``trace_module(module, *inputs,
  **kwargs)``: any module, op by op, under PyTorch's FakeTensor mode (a meta copy is traced, the caller's
  module is never touched, its hooks do not run). A new entry point is a few lines: build the model on the
  meta device (or ``meta_copy`` it), build meta inputs (``meta_inputs``), and call
  ``trace_callable(lambda: model.some_step(...), model)``.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from ..checks import check_positive_int
from ..i18n import _
from ..model.attention import keep_attention_weights
from ..model.config import GPTConfig, ModelConfig
from ..model.loss import sequence_loss
from ..recording import Recorder, Row, listening
from .hooks import running_modules
from .meta import checked_sizes, meta_model
from .op_tap import (
    NO_KERNEL,
    VALUE_READS,
    faked,
    hooks_suspended,
    new_fake_mode,
    op_flags,
    op_name,
    op_tap,
    tensors_in,
)

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


def _shapes(values) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(t.shape) for v in values for t in tensors_in(v))


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
            self.failed_op = self.failed_op or op_name(op)  # the innermost op that failed
            raise
        if key is not None:
            self.memory[key] = _signature(out)
        self._note(op, args, kwargs, out)
        return out

    def _note(self, op, args, kwargs, out) -> None:
        outputs = _shapes([out])
        if not outputs:
            return
        name = op_name(op)
        self.last_op = (name, outputs[0])
        inputs = _shapes(args)
        if self.ops and not _is_bookkeeping(name, inputs, outputs):
            notes = [f"{flag}=True" for flag in op_flags(op, args, kwargs)]
            notes += [_("+{count} more outputs").format(count=len(outputs) - 1)] if len(outputs) > 1 else []
            meaning = _from(inputs) + (f" ({', '.join(notes)})" if notes else "")
            self.recorder.rows.append(OpRow(self.recorder.scopes[-1], name, outputs[0], "", meaning, inputs, outputs))

    def explain(self, error: Exception) -> TraceError:
        """Turn a dispatcher or meta-device error into a message naming the op and the module path."""
        where = self.recorder.scopes[-1]
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        reads_values = isinstance(error, VALUE_READS) or any(
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
        if isinstance(error, NO_KERNEL) and self.failed_op:
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
    becomes a ``TraceError`` naming the op and the module path. ``fake_mode`` (from ``new_fake_mode()``, with
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
                  op_tap(tracer.run_op, fake_mode is not None)):
                fn()
        except (RuntimeError, NotImplementedError) as error:
            raise tracer.explain(error) from error
    return tuple(tracer.recorder.rows)


# ---------------------------------------------------------------------------------------------------
# Our models' named steps: one entry point for both models, whole sequences or one cached decoding step.



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
    batch, src_len, decoded = checked_sizes(cfg, batch, src_len, tgt_len, length, decoded_by_step=step is not None)
    is_gpt = isinstance(cfg, GPTConfig)
    if step is not None:
        _check_step(step, decoded, "length" if is_gpt else "tgt_len", cfg.max_len)
        return _trace_gpt_step(cfg, batch, step) if is_gpt else _trace_pair_step(cfg, batch, src_len, step)
    return _trace_gpt(cfg, batch, decoded) if is_gpt else _trace_pair(cfg, batch, src_len, decoded)


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
            attributes = value.values() if isinstance(value, dict) else (value,)  # _parameters, _buffers: dicts
            for tensor in attributes:
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
    fake_mode = new_fake_mode()
    if fake_mode is not None:
        args, kw = faked(args, fake_mode), faked(kw, fake_mode)
    with hooks_suspended(module):
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

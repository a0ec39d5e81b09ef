"""The one place that touches PyTorch's private op-interception API, for a trace (``trace.py``).

At the dispatcher level (the private ``torch.utils._python_dispatch.TorchDispatchMode`` and ``OpOverload._schema``)
every aten op (``aten.linear``, ``aten.view``, ...) goes through the trace's ``run_op``. Without those private names
the public ``torch.overrides.TorchFunctionMode`` is the fallback: the same shapes, named by torch function
(``torch.nn.functional.linear``), coarser inside functions that are themselves overridable, and slower because
nothing is answered from memory. PyTorch's FakeTensor mode (private too; without it, plain meta) lets library code
that asks whether it is being traced (transformers' mask code) take its shape-only path. A module's own hooks are
taken away while it is traced (``hooks_suspended``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import contextmanager, nullcontext

import torch
from torch import nn

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
    VALUE_READS: tuple[type[Exception], ...] = (DataDependentOutputException, DynamicOutputShapeException)
    NO_KERNEL: tuple[type[Exception], ...] = (NotImplementedError, UnsupportedOperatorException)
except ImportError:  # without FakeTensor a module traces on plain meta tensors (code asking "am I traced?" hears no)
    FakeTensor = FakeTensorMode = None
    VALUE_READS, NO_KERNEL = (), (NotImplementedError,)


def new_fake_mode():
    """A FakeTensor mode over the meta device, or None without that private API.

    A FakeTensor is a meta tensor that says it is one: code that asks whether it is being traced
    (transformers' mask code: ``is_tracing(mask)``) then takes its shape-only path instead of reading the
    mask's values, which no meta tensor has. Tensors it meets that are not fake (the module's meta weights)
    are taken in as they come."""
    return FakeTensorMode(allow_non_fake_inputs=True) if FakeTensorMode is not None else None


def faked(value, mode):
    """``value`` with every meta tensor in it (inside lists, tuples and dicts too) made a FakeTensor of ``mode``."""
    if isinstance(value, torch.Tensor):
        return mode.from_tensor(value)
    if isinstance(value, (tuple, list)):
        return type(value)(faked(v, mode) for v in value)
    if isinstance(value, dict):
        return {k: faked(v, mode) for k, v in value.items()}
    return value


def _returns_fresh(op) -> bool:
    """True when ``op`` neither mutates nor returns an alias, so its result on the meta device is fixed by
    its arguments' metadata and may be answered from memory. Unknown (no readable schema): False."""
    try:
        schema = op._schema
        return not schema.is_mutable and all(ret.alias_info is None for ret in schema.returns)
    except (AttributeError, TypeError):
        return False


def op_flags(op, args, kwargs) -> list[str]:
    """The names of an op's bool arguments that are set (``is_causal``, ``batch_first``): they change what
    the op does without a tensor to show it. Read from the op's schema; keyword arguments alone without one."""
    try:
        names = [argument.name for argument in op._schema.arguments]
    except (AttributeError, TypeError):
        names = []
    given = list(zip(names, args)) + list(kwargs.items())
    return [name for name, value in given if value is True]


def op_name(op) -> str:
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
        """Every aten op, after PyTorch's own decompositions, goes through ``run_op`` (the trace's)."""

        def __init__(self, run_op: Callable, faking: bool):
            super().__init__()
            self.run_op = run_op
            self.faking = faking

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with _disable_current_modes() if self.faking and _plain_meta_only(args, kwargs) else nullcontext():
                return self.run_op(func, args, kwargs, _returns_fresh(func))


def _plain_meta_only(args, kwargs) -> bool:
    """True when an op under a FakeTensor mode meets tensors and none is fake (``torch.tensor(...)`` inside
    forward makes a plain meta tensor, then ``detach_``-es it in inference mode): it runs on the meta device
    itself, since FakeTensor refuses in-place metadata ops on tensors that are not its own."""
    tensors = [t for value in (*args, *kwargs.values()) for t in tensors_in(value)]
    return bool(tensors) and not any(isinstance(t, FakeTensor) for t in tensors)


class _FunctionTap(torch.overrides.TorchFunctionMode):
    """The public fallback: every torch function call goes through ``run_op`` (the trace's) (never memoised)."""

    def __init__(self, run_op: Callable):
        super().__init__()
        self.run_op = run_op

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.run_op(func, args, kwargs or {}, False)


def op_tap(run_op: Callable, faking: bool):
    """The interception context for one trace: dispatcher level when available, torch functions otherwise
    (``faking``: the trace runs under a FakeTensor mode too)."""
    return _DispatchTap(run_op, faking) if _DispatchMode is not None else _FunctionTap(run_op)


_MODULE_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


@contextmanager
def hooks_suspended(module: nn.Module):
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


def tensors_in(value) -> list[torch.Tensor]:
    """The tensors in an op's argument or result (one level into lists and tuples, as aten ops take them), or
    in a module's: a dict-like output too (transformers' ``ModelOutput``), in its order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in tensors_in(v)]
    return []

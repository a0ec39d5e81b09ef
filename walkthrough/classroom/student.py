"""Running a student's code for a check: one harness for ``check_exercise`` and ``check_model``.

``run(fn, *args)`` calls the student's function; a stub (``raise NotImplementedError``) comes back as ``Stub``, a
crash as ``Crash``, each naming the student's function and line (not PyTorch's, not this package's), so a check
can say it in words instead of a traceback. What the function changes of torch's global settings (default dtype,
grad mode, random state) is put back. Ctrl-C (``KeyboardInterrupt``) passes through: it stops the check.
``plain`` strips a tensor subclass, so that a result is judged by its values, never by its own methods.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import torch

TORCH_DIR = str(Path(torch.__file__).parent)
PACKAGE_DIR = str(Path(__file__).parents[1])  # walkthrough/, every folder of the package


class Stub(Exception):
    """The student's function is still a stub. ``name``: the stub's qualified name ('' when unknown)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class Crash(Exception):
    """The student's function raised ``error``, in the function ``name`` at ``line`` ('' when unknown)."""

    def __init__(self, error: Exception, name: str, line: str):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error, self.name, self.line = error, name, line


def where(err: BaseException) -> tuple[str, str]:
    """(the function's qualified name, the line) where the student's code raised: the innermost frame that is
    neither PyTorch's nor this package's; ('', '') when there is none."""
    entries = list(zip((frame for frame, _ in traceback.walk_tb(err.__traceback__)),
                       traceback.extract_tb(err.__traceback__)))
    theirs = [(frame, entry) for frame, entry in entries
              if not frame.f_code.co_filename.startswith((TORCH_DIR, PACKAGE_DIR))]
    if not theirs:
        return "", ""
    frame, entry = theirs[-1]
    return frame.f_code.co_qualname, (entry.line or "").strip()


def run(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the student's behalf; raises ``Stub`` or ``Crash`` instead of their error."""
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    try:
        with torch.random.fork_rng(devices=[]):
            return fn(*args, **kwargs)
    except NotImplementedError as err:
        raise Stub(where(err)[0]) from err
    except Exception as err:  # the student's bug, to be told in words rather than as a traceback
        raise Crash(err, *where(err)) from err
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)


def plain(value):
    """A tensor as a plain ``torch.Tensor`` (a subclass's ``__torch_function__`` must not judge itself); anything
    else as it is."""
    if not isinstance(value, torch.Tensor) or type(value) in (torch.Tensor, torch.nn.Parameter):
        return value
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(value, torch.Tensor)

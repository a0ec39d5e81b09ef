"""Which module is running: the path of the innermost module of a model whose forward has started and not
yet returned, kept on a stack by forward hooks, for every tool that tags what it sees by module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def running_modules(root: nn.Module, root_name: str = "model", scopes: list[str] | None = None,
                    on_enter: Callable | None = None, on_leave: Callable | None = None) -> Iterator[list[str]]:
    """While the block runs, ``scopes[-1]`` is the path in ``root`` of the innermost running module of ``root``
    (``root`` itself is ``root_name``, which also stays at the bottom of the stack between calls).

    ``scopes``: a list to keep the stack in (a recorder's own), else a new one; it is what the block receives.
    ``on_enter(path, module, args, kwargs)`` runs as a module starts, ``on_leave(path, module, args, kwargs,
    output)`` as it returns. The hooks are registered on the modules of ``root`` themselves (so the arguments
    passed by keyword are seen too) and removed when the block ends, also after an error.
    """
    paths = {id(module): path or root_name for path, module in root.named_modules()}
    stack = [root_name] if scopes is None else scopes

    def enter(module, args, kwargs):
        stack.append(paths[id(module)])
        if on_enter is not None:
            on_enter(stack[-1], module, args, kwargs)

    def leave(module, args, kwargs, output):
        path = paths[id(module)]
        # down to this module's own entry: a module inside that raised, its error caught here, never returned
        while len(stack) > 1 and stack.pop() != path:
            pass
        if on_leave is not None:
            on_leave(path, module, args, kwargs, output)

    handles = [handle for module in root.modules() for handle in (
        module.register_forward_pre_hook(enter, with_kwargs=True),
        module.register_forward_hook(leave, with_kwargs=True))]
    try:
        yield stack
    finally:
        for handle in handles:
            handle.remove()

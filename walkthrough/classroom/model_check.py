"""Notebook 15's check: does the student's whole Transformer compute what the package's does, and if not, where not?

``check_model(make_model)`` builds the student's model with the shipped checkpoint's sizes, loads the package's
trained weights into it by name, and runs both on the same held-out numerals. It passes when the logits agree and
greedy decoding translates as the package's model does. Otherwise it names the first block that differs:

1. the package's model runs once with a forward hook on every module, which records each call's tensor
   arguments and output (copies, so nothing the student's code does later can change them);
2. each of the student's blocks (every module path the package's model calls, wherever the student's module at
   that path is the student's own class) is then called alone with the package's recorded inputs, children
   before parents: the first one whose output differs is the block at fault, since everything inside it agrees;
3. when every block agrees on its own but the whole model does not, the fault is in the model's own code
   (the masks, which embedding goes where): the student's model runs once more with hooks, and the first block
   that receives a different input is named, with the argument.

Known slips (pre-norm, a missing √d_model, an inverted mask, ...) are recognised by running the package's block
the slipped way on the same inputs. The block list comes from the package's model (its module paths), never from
a list written here.

A pass must mean the student's own code computed the logits: their code runs under a profiler that notes any call
into the package's code (its model, its layers, its functions), and on a pass every block the package's model ran
must have run in theirs, the logits being what their output head returned. Results are judged as plain tensors
(``student.plain``), never through a subclass's own methods.
"""

from __future__ import annotations

import html
import inspect
import linecache
import math
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from difflib import get_close_matches
from functools import partial
from pathlib import Path

import torch
from torch import nn

from ..i18n import N_, _
from ..model import config
from ..model.attention import MultiHeadAttention
from ..model.embedding import Embedding, sinusoidal_table
from ..model.layers import AddNorm, EncoderLayer, FeedForward
from ..model.masks import causal_mask, padding_mask
from ..tasks.checkpoints import load_checkpoint, shipped_file
from ..tasks.data import Vocab
from ..tasks.numerals import held_out_pairs
from ..tasks.training import make_batch
from ..trace.hooks import running_modules
from ..trace.tables import print_shape
from . import student
from .student import plain

NOT_YET = N_("write it, then run this cell again.")
ROOT = "model"  # the path this check gives the whole model (as the trace does)
PAIRS, SHOWN = 16, 3  # held-out pairs compared (teacher-forced and translated), translations quoted
# The package's code a student's code may enter: the check's own hooks, the config's properties, a debugging print.
_OPEN_FILES = {__file__, *(str(Path(student.PACKAGE_DIR, name)) for name in ("classroom/student.py", "i18n.py",
                                                                             "trace/hooks.py"))}
_OPEN_CODE = {print_shape.__code__, *(member.fget.__code__ for kind in vars(config).values() if isinstance(kind, type)
                                      for member in vars(kind).values() if isinstance(member, property))}


@dataclass(frozen=True)
class ModelVerdict:
    """What ``check_model`` found; true when the model is right. ``block``: where the first difference is
    (a module path such as ``"encoder.layers.0"``, ``"model"`` for the model's own code), None when none is."""

    passed: bool
    message: str
    block: str | None = None

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        """Show nothing as a cell's last value: the message was printed already."""


class _Verdict(Exception):
    def __init__(self, symbol: str, text: str, block: str | None = None):
        super().__init__(text)
        self.symbol, self.text, self.block = symbol, text, block


# ---------------------------------------------------------------------------------------------------
# Recording the calls of one run.

@dataclass
class _Call:
    """One module call: its tensor arguments (copies, in order, with their parameter names) and its output."""

    args: tuple[torch.Tensor, ...]
    names: tuple[str, ...]
    output: object = None


def _copy(value):
    return plain(value).detach().clone() if isinstance(value, torch.Tensor) else value


def _tensor_args(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple[torch.Tensor, ...], tuple[str, ...]]:
    """The call's tensor arguments in the order of the forward's signature, with their names."""
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs).arguments.items()
    except TypeError:
        bound = [*((f"argument {i + 1}", a) for i, a in enumerate(args)), *kwargs.items()]
    pairs = [(name, value) for name, value in bound if isinstance(value, torch.Tensor)]
    return tuple(_copy(v) for _, v in pairs), tuple(name for name, _ in pairs)


class _Calls:
    """The first call of each module path of a model, and the order calls start and finish."""

    def __init__(self):
        self.calls: dict[str, _Call] = {}
        self.started: list[str] = []
        self.finished: list[str] = []
        self._pending: dict[str, _Call] = {}

    def enter(self, path, module, args, kwargs):
        if path not in self.calls and path not in self._pending:
            self._pending[path] = _Call(*_tensor_args(module, args, kwargs))
            self.started.append(path)

    def leave(self, path, module, args, kwargs, output):
        if path in self._pending:
            call = self._pending.pop(path)
            call.output = _copy(output)
            self.calls[path] = call
            self.finished.append(path)


@contextmanager
def _recording(model: nn.Module):
    calls = _Calls()
    with running_modules(model, ROOT, on_enter=calls.enter, on_leave=calls.leave):
        yield calls


# ---------------------------------------------------------------------------------------------------
# Running the student's code: a stub is "not yet", a crash is explained, an odd result is named.

class _NotYours(_Verdict):
    """The student's code ran the package's own model, layers or functions: whatever it gives is not theirs."""


def _is_package_code(filename: str) -> bool:
    return filename.startswith(student.PACKAGE_DIR) and filename not in _OPEN_FILES


class _OwnCodeOnly:
    """A profiler over the student's code: a pass must mean their own code computed it, so the first call it makes
    into the package's code (``trained.model(src, tgt)``, ``wt.Transformer``, a wt layer inside theirs, ...) is
    noted, as is the profiler being switched off."""

    def __init__(self, what: str):
        self.what = what
        self.entry: tuple[str, str] | None = None  # (the package's function, the student's line that called it)
        self._hook = self._see  # one bound method, so that it can be recognised by identity at the end

    def _see(self, frame, event, _arg) -> None:
        if event != "call" or self.entry is not None:
            return
        code = frame.f_code
        if not _is_package_code(code.co_filename) or code in _OPEN_CODE:
            return
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename.startswith(student.TORCH_DIR):  # nn.Module.__call__
            caller = caller.f_back
        if caller is not None and _is_package_code(caller.f_code.co_filename):
            return  # the package's code calling its own: where it was entered is noted already
        from_student = caller is not None and caller.f_code.co_filename != __file__  # else the check called it directly
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno).strip() if from_student else ""
        self.entry = (f"{code.co_qualname} ({Path(code.co_filename).name})", line)

    def __enter__(self):
        self._previous = sys.getprofile(), threading.getprofile()
        sys.setprofile(self._hook)
        threading.setprofile(self._hook)  # a thread the student's code starts is watched too
        return self

    def __exit__(self, kind, err, _traceback) -> bool:
        switched_off = sys.getprofile() is not self._hook
        sys.setprofile(self._previous[0])
        threading.setprofile(self._previous[1])
        if kind is not None and not issubclass(kind, Exception):  # Ctrl-C (KeyboardInterrupt) stops the check
            return False
        if switched_off:
            raise _NotYours("✗", _("not your model: {what} switched off the check's profiler "
                                   "(sys.setprofile): the check cannot vouch for what it did not see.").format(
                                       what=self.what), ROOT) from err
        if self.entry is not None:
            function, line = self.entry
            called = _(" from `{line}`").format(line=line) if line else ""
            raise _NotYours("✗", _("not your model: {what} ran the package's own {function}{called}. A pass must "
                                   "mean your code computed it: write each forward yourself, with torch and nn "
                                   "(walkthrough's model, layers and functions are what the check compares "
                                   "with).").format(what=self.what, function=function, called=called), ROOT) from err
        return False


def _run(fn: Callable, *args, what: str):
    """``fn(*args)`` under no_grad, watched (``_OwnCodeOnly``); a stub or a crash becomes a _Verdict naming the
    function and the line."""
    try:
        with torch.no_grad(), _OwnCodeOnly(what):
            return plain(student.run(fn, *args))
    except student.Stub as stub:
        raise _Verdict("…", _("not yet: {name} is still a stub: {NOT_YET}").format(
            name=stub.name or what, NOT_YET=_(NOT_YET))) from stub
    except student.Crash as crash:
        place = _(" in {name}").format(name=crash.name) + (f" (`{crash.line}`)" if crash.line else "") \
            if crash.name else ""
        raise _Verdict("✗", _("{what} raised {type}{place}: {err}").format(
            what=what, type=type(crash.error).__name__, place=place, err=crash.error)) from crash


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            return _("a tensor {shape} on the meta device (a shape, no values)").format(shape=list(value.shape))
        return _("a tensor {shape}").format(shape=list(value.shape))
    if isinstance(value, (tuple, list)):
        return _("a {type} of {length}: return the tensor alone").format(type=type(value).__name__, length=len(value))
    return _("a {type}, not a tensor").format(type=type(value).__name__)


def _largest_difference(mine, theirs) -> float | None:
    """The largest difference between two tensors of the same shape (masks compared as numbers); None if those
    are not two such tensors."""
    if not (isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor)) or mine.shape != theirs.shape:
        return None
    if mine.is_complex() or mine.device.type == "meta":
        return None
    return (mine.double() - theirs.double()).abs().nan_to_num(nan=math.inf).max().item() if mine.numel() else 0.0


def _agrees(mine, theirs) -> bool:
    """Two tensors of one shape equal up to float rounding (relative to the larger one's size)."""
    gap = _largest_difference(mine, theirs)
    return gap is not None and (not theirs.numel() or gap <= 1e-4 * (1 + theirs.double().abs().max().item()))


def _difference(mine, theirs) -> str:
    """In words: how ``mine`` differs from the package's tensor ``theirs``."""
    if not isinstance(mine, torch.Tensor):
        return _("it returns {what}").format(what=_describe(mine)) if mine is not None else _("it returns None")
    if mine.is_meta:
        return _("it returns a tensor on the meta device: it has a shape but no values. Compute it from the inputs "
                 "(without device='meta')")
    if mine.is_complex():
        return _("it returns a complex tensor ({dtype}): the answer is real; keep to real operations").format(
            dtype=mine.dtype)
    if mine.shape != theirs.shape:
        return _("its result has shape {mine_shape}, the package's {theirs_shape}").format(
            mine_shape=list(mine.shape), theirs_shape=list(theirs.shape))
    gap = (mine.double() - theirs.double()).abs().nan_to_num(nan=math.inf)
    where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
    if mine.is_floating_point() and theirs.is_floating_point() and mine.dtype != theirs.dtype:
        return _("its result is {yours}, the package's {package}: compute in {package} (no .half() or .to(...)); "
                 "the rounding alone makes it differ by up to {gap:.3g}").format(
                     yours=mine.dtype, package=theirs.dtype, gap=gap.max().item())
    if theirs.dtype == torch.bool:
        return _("its result differs at {count} of {total} entries (at {index}: " \
               "{yours} instead of {package})").format(
                   count=gap.count_nonzero().item(), total=gap.numel(), index=list(where), yours=bool(mine[where]),
                   package=bool(theirs[where]))
    return _("its result differs by up to {gap:.3g} (at {index}: {yours:.4g} " \
           "instead of {package:.4g})").format(
               gap=gap.max().item(), index=list(where), yours=mine[where].item(), package=theirs[where].item())


# ---------------------------------------------------------------------------------------------------
# Known slips: the package's block run the slipped way on the same inputs.

def _embedding_slips(ref: Embedding, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    table = next(m for m in ref.modules() if isinstance(m, nn.Embedding))
    vectors, d_model = table(ids), table.embedding_dim  # [B, L, D]
    pe = sinusoidal_table(ids.size(1), d_model)  # [L, D]
    return {
        N_("It matches the token vectors without the scale: multiply them by √d_model before adding the PE "
        "(notebook 01)."): vectors + pe,
        N_("It matches a scale of √L (the ids' last dim, as one source article writes); the scale is √d_model."):
            vectors * math.sqrt(ids.size(1)) + pe,
        N_("It matches the scaled token vectors without the positional encoding: add the PE rows of positions "
        "0 .. L-1."): vectors * math.sqrt(d_model),
        N_("It matches (token vector + PE) · √d_model: scale the token vectors only, then add the PE."):
            (vectors + pe) * math.sqrt(d_model),
    }


def _attention_slips(ref: MultiHeadAttention, query, key, value, mask=None) -> dict[str, torch.Tensor]:
    def attend(mask, scale=True, straight_view=False):
        batch, length, d_model = query.shape
        heads, d_k = ref.num_heads, d_model // ref.num_heads

        def split(x):  # [B, L, D] -> [B, H, L, d_k]
            if straight_view:
                return x.view(batch, heads, x.size(1), d_k)
            return x.view(batch, x.size(1), heads, d_k).transpose(1, 2)
        q, k, v = split(ref.w_q(query)), split(ref.w_k(key)), split(ref.w_v(value))
        scores = (q if scale else q * math.sqrt(d_k)) @ k.transpose(-2, -1) / math.sqrt(d_k)  # [B, H, L_q, L_k]
        if mask is not None:  # as a student writes it: a row with every key blocked gets equal weights, not 0
            scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
        context = scores.softmax(dim=-1) @ v  # [B, H, L_q, d_k]
        return ref.w_o(context.transpose(1, 2).reshape(batch, length, d_model))

    slips = {
        N_("It matches attention without the ÷√d_k scale of the scores."): attend(mask, scale=False),
        N_("It matches a straight view to [B, H, L, d_k], which cuts heads across tokens: view to [B, L, H, d_k], "
        "then transpose(1, 2)."): attend(mask, straight_view=True),
    }
    if mask is not None:
        slips[_("It matches the mask inverted: here True = may attend, so keep the scores where the mask is True "
              "(torch.where(mask, scores, very negative)).")] = attend(~mask.bool())
        ignored = _("It matches attention with the mask ignored: apply it to the scores before the softmax.")
        slips[ignored] = attend(None)
    return slips


def _sublayers(ref: nn.Module, masks: tuple) -> list[tuple[Callable, AddNorm]]:
    """A layer's (sublayer as a function of its input, its AddNorm) pairs in order."""
    if isinstance(ref, EncoderLayer):
        (src_mask,) = masks
        return [(lambda h: ref.self_attn(h, h, h, src_mask), ref.self_attn_norm), (ref.feed_forward, ref.ffn_norm)]
    memory, tgt_mask, src_mask = masks
    return [(lambda h: ref.self_attn(h, h, h, tgt_mask), ref.self_attn_norm),
            (lambda h: ref.cross_attn(h, memory, memory, src_mask), ref.cross_attn_norm),
            (ref.feed_forward, ref.ffn_norm)]


def _layer_slips(ref: nn.Module, x: torch.Tensor, *rest) -> dict[str, torch.Tensor]:
    pre_norm, no_residual = x, x
    for sublayer, add_norm in _sublayers(ref, rest):
        pre_norm = pre_norm + sublayer(add_norm.norm(pre_norm))
        no_residual = add_norm.norm(sublayer(no_residual))
    return {
        N_("It matches pre-norm, x + sublayer(LayerNorm(x)); this model is post-norm, as the paper and the source "
        "articles: LayerNorm(x + sublayer(x)), through each AddNorm."): pre_norm,
        N_("It matches the layer without its residual connections: each AddNorm takes x and the sublayer's output, "
        "LayerNorm(x + sublayer(x))."): no_residual,
    }


def _feed_forward_slips(ref: FeedForward, x: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        N_("It matches the FFN without the ReLU between the two linear layers."): ref.linear2(ref.linear1(x)),
        N_("It matches a ReLU after the second linear layer too: only the hidden layer has one."):
            torch.relu(ref.linear2(torch.relu(ref.linear1(x)))),
    }


def _add_norm_slips(ref: AddNorm, x: torch.Tensor, sublayer_out: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        N_("It matches LayerNorm(sublayer output) without the residual x: LayerNorm(x + sublayer output)."):
            ref.norm(sublayer_out),
        N_("It matches x + LayerNorm(sublayer output): the sum is what gets normalised."): x + ref.norm(sublayer_out),
    }


def _final_norm_slips(ref: nn.Module, calls: dict[str, _Call], path: str) -> dict[str, torch.Tensor]:
    """A stack (or any block) whose final LayerNorm was left out returns that norm's input."""
    slips = {}
    for name, child in ref.named_children():
        child_path = f"{path}.{name}" if path != ROOT else name
        if isinstance(child, nn.LayerNorm) and child_path in calls:
            slips[_("It matches the output without the final LayerNorm ({child_path}): the stack ends with one, "
                  "as nn.Transformer's.").format(child_path=child_path)] = calls[child_path].args[0]
    return slips


def _head_slips(ref: nn.Module, h: torch.Tensor) -> dict[str, torch.Tensor]:
    logits = ref(h)
    return {N_("It matches softmax(logits): return the raw logits (the loss and the argmax need no softmax)."):
            logits.softmax(-1),
            N_("It matches log_softmax(logits): return the raw logits."): logits.log_softmax(-1)}


def _slips(ref: nn.Module, call: _Call, calls: dict[str, _Call], path: str) -> dict[str, torch.Tensor]:
    makers = ((Embedding, _embedding_slips), (MultiHeadAttention, _attention_slips), (FeedForward, _feed_forward_slips),
              (AddNorm, _add_norm_slips))
    with torch.no_grad():
        for kind, make in makers:
            if isinstance(ref, kind):
                return make(ref, *call.args)
        if hasattr(ref, "self_attn") and hasattr(ref, "feed_forward"):  # an encoder or decoder layer
            return _layer_slips(ref, *call.args)
        if path.split(".")[-1] in ("generator", "output_head"):
            return _head_slips(ref, *call.args)
        return _final_norm_slips(ref, calls, path)


def _hint(mine, ref: nn.Module, call: _Call, calls: dict[str, _Call], path: str) -> str:
    try:
        slips = _slips(ref, call, calls, path)
    except (RuntimeError, ValueError, TypeError, IndexError):  # a slip that cannot happen at these shapes
        return ""
    for hint, wrong in slips.items():
        if _agrees(mine, wrong) and not _agrees(wrong, call.output):  # a "slip" that happens to be right is none
            return " " + _(hint)
    return ""


def _mask_hint(mine, theirs: torch.Tensor, tgt: torch.Tensor, pad_id: int) -> str:
    """What a mask argument the student's model made is, when it is not the package's."""
    if not isinstance(mine, torch.Tensor) or theirs.dtype != torch.bool:
        return ""
    try:
        mine = torch.broadcast_to(mine, theirs.shape)
    except RuntimeError:
        return ""
    if _agrees(mine, ~theirs):
        return _(" It is the package's mask inverted: here True = may attend (a real token, or a key not in the " \
               "future), as F.scaled_dot_product_attention; nn.MultiheadAttention's masks are the other way round.")
    if theirs.size(-2) == tgt.size(1) and theirs.size(-1) == tgt.size(1):
        padding = torch.broadcast_to(padding_mask(tgt, pad_id), theirs.shape)
        if _agrees(mine, padding):
            return _(" It lacks the causal part: a target position may not attend to later ones (padding AND causal).")
        if _agrees(mine, torch.broadcast_to(causal_mask(tgt.size(1)), theirs.shape)):
            return _(" It lacks the padding part: PAD keys must be blocked too (padding AND causal).")
    return ""


# ---------------------------------------------------------------------------------------------------
# The check.

def _build(make_model: Callable, cfg) -> nn.Module:
    model = _run(make_model, cfg, what=_("building your model, {name}(cfg),").format(
        name=getattr(make_model, '__name__', 'make_model')))
    if not isinstance(model, nn.Module):
        raise _Verdict("✗", _("{name}(cfg) returned {describe_model}; "
                            "it must build an nn.Module").format(
                                name=getattr(make_model, '__name__', 'make_model'), describe_model=_describe(model)))
    return model


def _load_weights(model: nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Load the package's trained weights by name; explain names and shapes that do not fit."""
    own, state = dict(model.named_parameters()), model.state_dict()
    missing = [name for name in weights if name not in state]
    extra = [name for name in own if name not in weights]
    if missing:
        name = missing[0]
        same_shape = [n for n in extra if own[n].shape == weights[name].shape]
        close = get_close_matches(name, same_shape, n=1, cutoff=0.5)
        guess = _("; yours has `{close}` of that shape: rename it").format(close=close[0]) if close else ""
        raise _Verdict("✗", _("the trained weights do not fit your model: it has no `{name}` "
                            "{shape}{guess}. The weights find their place by name, so use the "
                            "package's attribute names ({missing} missing in all).").format(
                                name=name, shape=list(weights[name].shape), guess=guess, missing=len(missing)), ROOT)
    if extra:
        raise _Verdict("✗", _("your model has a parameter the trained model does not: `{name}` "
                            "{shape} ({count} in all); it would keep random values. "
                            "Build only the package's parts.").format(
                                name=extra[0], shape=list(own[extra[0]].shape), count=len(extra)), ROOT)
    for name, tensor in weights.items():
        mine = state[name]
        if mine.shape != tensor.shape:
            raise _Verdict("✗", _("`{name}` is {mine_shape} in your model, {tensor_shape} in the trained "
                                "one: check which size goes where (nn.Linear(in, out) stores [out, in]).").format(
                                    name=name, mine_shape=list(mine.shape), tensor_shape=list(tensor.shape)), ROOT)
        if mine.is_floating_point() and mine.dtype != tensor.dtype:
            raise _Verdict("✗", _("`{name}` is {mine_dtype} in your model, {tensor_dtype} in the trained one: build "
                                  "the model in {tensor_dtype} (no .half() or .to(dtype)); with fewer bits every "
                                  "number is rounded, and no block could agree.").format(
                                      name=name, mine_dtype=mine.dtype, tensor_dtype=tensor.dtype), ROOT)
    model.load_state_dict(weights, strict=False)


def _student_blocks(ref_calls: _Calls, mine: nn.Module) -> list[tuple[str, nn.Module]]:
    """The paths the package's model called, children first, where the student's model holds a module of the
    student's own class (PyTorch's own layers, such as nn.Linear, are not theirs to check)."""
    modules = {path or ROOT: module for path, module in mine.named_modules()}
    return [(path, modules[path]) for path in ref_calls.finished
            if path in modules and not type(modules[path]).__module__.startswith("torch.")]


def _by_name(module: nn.Module, call: _Call) -> Callable:
    """The block called on copies of the recorded inputs: by name when its forward takes every recorded name (so
    ``forward(y, memory, src_mask, tgt_mask)`` gets each mask where it wants it), else in the package's order."""
    copies = [a.clone() for a in call.args]
    try:
        parameters = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        parameters = {}
    if all(name in parameters and parameters[name].kind is not inspect.Parameter.POSITIONAL_ONLY
           for name in call.names):
        return partial(module, **dict(zip(call.names, copies)))
    return partial(module, *copies)


def _returns_none(module: nn.Module, path: str) -> _Verdict:
    return _Verdict("…", _("not yet: {type}.forward ({path}) returns None: {NOT_YET} "
                         "(If it is written: is a `return` missing?)").format(
                             type=type(module).__name__, path=path, NOT_YET=_(NOT_YET)), path)


def _block_verdict(path: str, module: nn.Module, ref: nn.Module, ref_calls: _Calls) -> _Verdict | None:
    """The student's block alone, on the package's recorded inputs for it: None when it agrees."""
    call = ref_calls.calls[path]
    what = _("your {type} ({path})").format(type=type(module).__name__, path=path)
    try:
        out = _run(_by_name(module, call), what=what)
    except _NotYours:
        raise
    except _Verdict as verdict:
        verdict.block = path
        return verdict
    if out is None:
        return _returns_none(module, path)
    if _agrees(out, call.output):
        return None
    hint = _hint(out, ref, call, ref_calls.calls, path)
    return _Verdict("✗", _("the first block that differs is {path} (your {type}): given the "
                         "package's inputs, {difference}.{hint}").format(
                             path=path, type=type(module).__name__, difference=_difference(out, call.output),
                             hint=hint), path)


def _progress(blocks: list[tuple[str, nn.Module]], verdicts: dict[str, _Verdict | None]) -> str:
    """One mark per class of the student's, in the order first checked: ✓ right, ✗ wrong, … not yet (or waiting
    for a block inside it: a block whose parts fail cannot be judged yet)."""
    failed = [path for path, verdict in verdicts.items() if verdict is not None]
    marks: dict[str, str] = {}
    for path, module in blocks:
        inner_failed = any(p != path and (path == ROOT or p.startswith(path + ".")) for p in failed)
        verdict = verdicts[path]
        mark = "…" if inner_failed else "✓" if verdict is None else verdict.symbol
        name = type(module).__name__
        marks[name] = min(marks.get(name, mark), mark, key="✗…✓".index)
    return "  ".join(f"{name} {mark}" for name, mark in marks.items())


def _paired_arguments(theirs: _Call, mine: _Call):
    """(name, the package's argument, the student's) for one block: by name when the student's forward uses the
    package's names, else in order."""
    by_name = dict(zip(mine.names, mine.args))
    if set(theirs.names) <= set(by_name):
        return [(name, ours, by_name[name]) for name, ours in zip(theirs.names, theirs.args)]
    return list(zip(theirs.names, theirs.args, mine.args))


def _logits_verdict(logits, expected: torch.Tensor, model: nn.Module) -> _Verdict:
    """Every block agrees and gets the same inputs: what the model returns is wrong, said in words."""
    model_type = type(model).__name__
    if logits is None:
        return _returns_none(model, ROOT)
    if isinstance(logits, torch.Tensor) and not logits.is_meta and logits.shape != expected.shape:
        what = _("a tensor {shape}; the package's logits are {expected} = [B, L_tgt, V_tgt]").format(
            shape=list(logits.shape), expected=list(expected.shape))
    elif not isinstance(logits, torch.Tensor) or logits.is_meta:
        what = _describe(logits)
    else:
        return _Verdict("✗", _("every block agrees with the package's on its own, and gets the same inputs, yet the "
                               "logits differ ({difference}): look at what your {type} does after its last "
                               "block.").format(difference=_difference(logits, expected), type=model_type), ROOT)
    return _Verdict("✗", _("every block agrees with the package's on its own, and gets the same inputs, but your "
                           "{type} returns {what}.").format(type=model_type, what=what), ROOT)


def _model_code_verdict(mine_calls: _Calls, ref_calls: _Calls, tgt: torch.Tensor, pad_id: int,
                        model: nn.Module) -> _Verdict:
    """Every block agrees alone but the model does not: find the first block given a different input."""
    for path in ref_calls.started:
        if path == ROOT or path not in mine_calls.calls:
            continue
        theirs, mine = ref_calls.calls[path], mine_calls.calls[path]
        for name, ours, yours in _paired_arguments(theirs, mine):
            if _agrees(yours, ours):
                continue
            source = next((p for p in ref_calls.finished
                           if p != path and _agrees(yours, ref_calls.calls[p].output)), None)
            hint = _mask_hint(yours, ours, tgt, pad_id) or (
                _(" It equals what the package's {source} returns.").format(source=source) if source else "")
            return _Verdict("✗", _("every block agrees with the package's on its own, so the difference is in your "
                                 "Transformer's own code: the `{name}` it passes to {path} "
                                 "{difference}.{hint}").format(
                                     name=name, path=path,
                                     difference=_difference(yours, ours).removeprefix(_("its result ")),
                                     hint=hint), ROOT)
    return _logits_verdict(mine_calls.calls.get(ROOT, _Call((), ())).output, ref_calls.calls[ROOT].output, model)


@torch.no_grad()
def _greedy(model: nn.Module, src: torch.Tensor, steps: int) -> torch.Tensor:
    """Greedy decoding through ``model(src, prefix)`` alone (so any model with that forward can be compared)."""
    ys = torch.full((src.size(0), 1), Vocab.sos_id, dtype=torch.long)  # [B, 1]
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for _step in range(steps):
        logits = plain(model(src.clone(), ys.clone()))  # [B, t, V]: the model gets copies it may scribble on
        next_id = logits[:, -1].argmax(-1).masked_fill(finished, Vocab.pad_id)  # [B]
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        finished |= next_id == Vocab.eos_id
        if finished.all():
            break
    return ys


def _translations_verdict(trainer, mine: nn.Module, pairs, src: torch.Tensor, steps: int, gap: float,
                          checkpoint) -> ModelVerdict:
    """The logits agree: greedy decoding through both models must give the same words."""
    ref_words, my_words = [[" ".join(trainer.tgt_vocab.decode(row)) for row in ids.tolist()] for ids in (
        _greedy(trainer.model, src, steps),
        _run(_greedy, mine, src, steps, what=_("greedy decoding through your model")))]
    wrong = [i for i, (mine_, theirs) in enumerate(zip(my_words, ref_words)) if mine_ != theirs]
    if wrong:
        raise _Verdict("✗", _("the logits agree, but greedy decoding through your model translates "
                            "{numeral} as '{yours}', the package's as "
                            "'{package}' ({wrong} of {count} differ).").format(
                                numeral=pairs[wrong[0]][0], yours=my_words[wrong[0]], package=ref_words[wrong[0]],
                                wrong=len(wrong), count=len(pairs)), ROOT)
    quoted = ", ".join(f"{zh} → {my_words[i]}" for i, (zh, _) in enumerate(pairs[:SHOWN]))
    return ModelVerdict(True, _("✓ model: right. With the trained weights of {name}, your "
                              "{type} gives the package's logits on {count} held-out numerals "
                              "(largest gap {gap:.1e}) and the same greedy translations: {quoted}, …").format(
                                  name=Path(checkpoint).name, type=type(mine).__name__, count=len(pairs), gap=gap,
                                  quoted=quoted))


def _check_provenance(mine: nn.Module, ref_calls: _Calls, mine_calls: _Calls, logits: torch.Tensor) -> None:
    """The logits agree: they must have been computed by the student's blocks. Every block the package's model
    ran must have run in theirs, and the logits must be what their block at the path of the package's last block
    (the output head) returned, not a tensor from elsewhere."""
    modules = {path or ROOT: module for path, module in mine.named_modules()}
    idle = [path for path in ref_calls.finished if path in modules and path not in mine_calls.calls]
    for path in sorted(idle, key=lambda path: type(modules[path]).__module__.startswith("torch."))[:1]:  # theirs first
        raise _NotYours("✗", _("not your model: it gives the package's logits, but your {type} ({path}) never "
                                   "ran, so your blocks did not compute them. Call each block through its module "
                                   "(self.{name}(...)): the check vouches only for code it saw run.").format(
                                       type=type(modules[path]).__name__, path=path,
                                       name=path.rsplit(".", 1)[-1]), ROOT)
    expected = ref_calls.calls[ROOT].output
    heads = [path for path in ref_calls.finished if path != ROOT and _agrees(ref_calls.calls[path].output, expected)]
    if not any(_agrees(logits, mine_calls.calls[path].output) for path in heads if path in mine_calls.calls):
        raise _NotYours("✗", _("not your model: the logits it returns are not what its {path} returned: return your "
                               "output head's result.").format(path=heads[0] if heads else ROOT), ROOT)


def _first_difference(ref: nn.Module, mine: nn.Module, ref_calls: _Calls, mine_calls: _Calls,
                      whole: _Verdict | None, tgt: torch.Tensor) -> _Verdict:
    """The first of the student's blocks (children first) that is wrong given the package's inputs; if none is,
    the model's own code (``whole``: what running the whole model gave, when it was a stub or a crash)."""
    blocks = _student_blocks(ref_calls, mine)
    modules = dict(ref.named_modules())
    verdicts = {path: None if path == ROOT else _block_verdict(path, module, modules[path], ref_calls)
                for path, module in blocks}
    first = next((verdicts[path] for path, _ in blocks if verdicts[path] is not None), None)
    if first is None:
        first = whole or _model_code_verdict(mine_calls, ref_calls, tgt, ref.cfg.pad_id, mine)
        first.block = first.block or ROOT
        verdicts[ROOT] = first
    return _Verdict(first.symbol, _("{text}\n  blocks: {blocks}").format(
        text=first.text, blocks=_progress(blocks, verdicts)), first.block)


def _verdict(make_model: Callable, checkpoint) -> ModelVerdict:
    trainer = load_checkpoint(checkpoint)
    ref = trainer.model.eval()
    pairs = held_out_pairs(PAIRS)
    batch = make_batch(pairs, trainer.src_vocab, trainer.tgt_vocab)
    with torch.no_grad(), _recording(ref) as ref_calls:
        ref(batch.src.clone(), batch.tgt_in.clone())
    expected = ref_calls.calls[ROOT].output  # [B, L_tgt, V_tgt]
    mine = _build(make_model, ref.cfg)
    _load_weights(mine, {name: weight.clone() for name, weight in ref.state_dict().items()})
    mine.eval()
    whole = None  # a stub or a crash of the whole model
    with _recording(mine) as mine_calls:
        try:
            logits = _run(mine, batch.src.clone(), batch.tgt_in.clone(), what=_("your {type}").format(
                type=type(mine).__name__))
        except _NotYours:
            raise
        except _Verdict as verdict:
            whole = verdict
    if whole is None and _agrees(logits, expected):
        _check_provenance(mine, ref_calls, mine_calls, logits)
        return _translations_verdict(trainer, mine, pairs, batch.src, 2 + batch.labels.size(1),
                                     _largest_difference(logits, expected), checkpoint)
    raise _first_difference(ref, mine, ref_calls, mine_calls, whole, batch.tgt_in)


def check_model(make_model: Callable, checkpoint: str | Path | None = None) -> ModelVerdict:
    """Load the package's trained weights into the model ``make_model(cfg)`` builds and compare it with the package's.

    ``make_model``: the student's Transformer class (or any function of a ``ModelConfig`` that builds the model),
    with the package's attribute names so the weights find their place. ``checkpoint``: a file
    ``save_checkpoint`` wrote (default: the shipped ``checkpoints/numerals.pt``). Prints the verdict: right, not
    yet (a stub, named), or the first block that differs, with what it matches when that is a known slip.
    Returns a ``ModelVerdict`` (true when right; ``.block`` names where the first difference is).

    A pass means the student's own code computed the logits: a model that runs the package's code (its model,
    layers or functions) is "not your model". A model that never returns keeps the cell running: interrupt it
    (Ctrl-C, or the stop button), which stops the check and leaves torch's random state and grad mode as they were.
    """
    if isinstance(make_model, nn.Module):
        raise TypeError(_("make_model must be your model's class, not a model: check_model({type})"
                        ", without (cfg); the check builds it with the checkpoint's sizes").format(
                            type=type(make_model).__name__))
    if not callable(make_model):
        raise TypeError(_("make_model must be your Transformer class (a function of the config), "
                        "got {type}").format(type=type(make_model).__name__))
    checkpoint = shipped_file("checkpoints", "numerals.pt") if checkpoint is None else checkpoint
    try:
        with torch.random.fork_rng(devices=[]):  # loading reseeds, building draws: the student's stream stays
            verdict = _verdict(make_model, checkpoint)
    except _Verdict as found:
        verdict = ModelVerdict(False, _("{symbol} model: {text}").format(
            symbol=found.symbol, text=found.text), found.block)
    print(verdict.message)
    return verdict


def block_gaps(reference: nn.Module, other: nn.Module, *inputs: torch.Tensor) -> dict[str, float]:
    """Run both models on copies of ``inputs`` and compare them block by block: for each module path of
    ``reference`` that both call (in the order their calls finish; PyTorch's own layers such as nn.Linear
    left out), the largest gap between the two outputs (inf where the shapes differ)."""
    for name, model in (("reference", reference), ("other", other)):
        if not isinstance(model, nn.Module):
            raise TypeError(_("{name} must be an nn.Module (a model), got {type}").format(
                name=name, type=type(model).__name__))
    runs = []
    for model in (reference, other):
        with torch.no_grad(), _recording(model) as calls:
            model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        runs.append(calls)
    theirs, mine = runs
    modules = {path or ROOT: module for path, module in reference.named_modules()}
    gaps = {}
    for path in theirs.finished:
        if path in mine.calls and not type(modules[path]).__module__.startswith("torch."):
            gap = _largest_difference(mine.calls[path].output, theirs.calls[path].output)
            gaps[path] = math.inf if gap is None else gap
    return gaps


# ---------------------------------------------------------------------------------------------------
# Reading the package's code beside the student's.

class SideBySide:
    """Two functions' source to read together: in a notebook one above the other, full width, in type a projector
    shows (14 px) and whole (no scroll box: a slide at 1366x768 cannot scroll); one after the other as text."""

    def __init__(self, left: Callable, right: Callable, titles: tuple[str, str]):
        self.columns = [(title, inspect.getsource(fn).rstrip()) for title, fn in zip(titles, (left, right))]

    def __repr__(self) -> str:
        return "\n\n".join(f"# {title}\n{source}" for title, source in self.columns)

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<div><b>{html.escape(title)}</b> "
            + _("({count} lines)").format(count=source.count(chr(10)) + 1) +
            f"<pre style='font-size:14px;line-height:1.3;margin:2px 0;white-space:pre-wrap'>"
            f"{html.escape(source)}</pre></div>" for title, source in self.columns)
        return f"<div style='display:flex;flex-direction:column;gap:6px'>{cells}</div>"


def side_by_side(package: Callable, yours: Callable) -> SideBySide:
    """The package's function (e.g. ``wt.MultiHeadAttention.forward``) beside yours, to read line by line."""
    for name, fn in (("package", package), ("yours", yours)):
        if not callable(fn):
            raise TypeError(_("{name} must be a function or method (e.g. MultiHeadAttention.forward), "
                            "got {type}").format(name=name, type=type(fn).__name__))
        try:
            inspect.getsource(fn)
        except (OSError, TypeError) as err:
            raise ValueError(_("{name}: no source to show for {function!r} ({err}); "
                             "pass a function defined in a file or a notebook cell").format(
                                 name=name, function=getattr(fn, '__qualname__', fn),
                                 err=err)) from None
    return SideBySide(package, yours, (_("package: {name}").format(name=package.__qualname__),
                                       _("yours: {name}").format(name=yours.__qualname__)))

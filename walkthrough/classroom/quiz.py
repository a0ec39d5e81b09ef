"""Predict, then reveal: a question asks for a tensor's shape before the cell that shows it.

``check_shape_answer`` is the plain checker (the student's text in, a verdict and feedback out).
``ask_shape`` puts it behind a text box in the notebook; where no widget can run (slides, the
static site) the same question shows as a "show answer" fold.

``expected`` always comes from running code: a tensor's ``.shape`` or a traced ``Row``.
``dims`` names what each dim means, so the feedback can say "dim 1 is H = 8 heads: you wrote 64,
which is d_k". It is either one name per dim (``"B H L_q d_k"``; a ``Row`` brings its own) or a
dict of the sizes in play (``{"B": 32, "H": 8, "L": 10, "d_k": 64, "D": 512}``), from which each
dim takes the name of its size, and which also recognises sizes that are not in the answer.
"""

from __future__ import annotations

import html
import math
import operator
import re
import unicodedata
from collections.abc import Mapping, Sequence

import torch

from ..i18n import N_, _
from ..recording import Row

# What a dim of each name counts, for "H = 8 heads".
MEANINGS = {
    "B": N_("sentences"), "H": N_("heads"), "H_kv": N_("key/value heads"), "L": N_("tokens"),
    "L_q": N_("query positions"), "L_k": N_("key positions"), "L_src": N_("source tokens"),
    "L_tgt": N_("target tokens"), "D": N_("features"), "d_model": N_("features"), "d_k": N_("features per head"),
    "d_ff": N_("hidden features"), "V": N_("vocabulary entries"), "t": N_("cached positions"),
}
EXAMPLE = "[2, 3, 4]"  # an example of the format that gives nothing away
MAX_DIGITS = 19  # a tensor dim is below 2**63: 19 digits at most
MAX_DIMS = 64  # more dims than any tensor here has, and few enough that every comparison stays instant
QUOTED = 40  # characters of a student's text quoted back in a message


def counted(size: int, noun: str) -> str:
    """The noun as it reads after ``size``: 'sentences' after 32, 'sentence' after 1 (in the chosen language:
    a translated noun is shown as the catalog gives it, Chinese nouns having no plural)."""
    if _(noun) != noun:
        return _(noun)
    if size != 1:
        return noun
    words = noun.split()
    for i, word in enumerate(words):
        if word.endswith("s"):
            words[i] = word[:-3] + "y" if word.endswith("ies") else word[:-1]
            break
    return " ".join(words)


class Question:
    """A resolved question: the shape, a name per dim (or None) and every named size in play."""

    def __init__(self, expected, dims=None):
        if isinstance(expected, Row):
            shape, own_names = tuple(expected.shape), expected.dims.split()
        elif isinstance(expected, torch.Tensor):
            raise TypeError(_("expected must be a shape, not a tensor: pass x.shape"))
        elif isinstance(expected, (torch.Size, tuple, list)):
            shape, own_names = tuple(expected), None
        else:
            raise TypeError(_("expected must be a torch.Size, a tuple or a traced Row, got {type}").format(
                type=type(expected).__name__))
        sizes_found = [whole_size(size) for size in shape]
        if None in sizes_found:
            raise ValueError(_("expected must hold whole sizes >= 0, got {shape}").format(shape=list(shape)))
        shape = tuple(sizes_found)
        sizes = dict(dims) if isinstance(dims, Mapping) else {}
        if isinstance(dims, str):
            names = dims.split()
        elif isinstance(dims, Sequence):
            names = list(dims)
        else:  # None or a dict of sizes
            names = own_names or names_from_sizes(shape, sizes)
        if len(names) != len(shape):
            raise ValueError(_("dims names {count} dims ({names}) but the answer {shape} has {ndim}: give one name "
                               "per dim").format(count=len(names), names=" ".join(map(str, names)),
                                                 shape=list(shape), ndim=len(shape)))
        for name, size in zip(names, shape):
            if name in sizes and sizes[name] != size:
                raise ValueError(_("dims says {name} = {given} but that dim of the answer is {size}").format(
                    name=name, given=sizes[name], size=size))
        self.shape, self.names = shape, names
        self.sizes = sizes | {name: size for name, size in zip(names, shape) if name and not name.isdigit()}

    def describe(self, dim: int) -> str:
        """'H = 8 heads' for a named dim, '1 (it broadcasts)' for a literal 1, else just the size."""
        name, size = self.names[dim], self.shape[dim]
        if name is None:
            return str(size)
        if name.isdigit():
            return _("{size} (it broadcasts)").format(size=size)
        return f"{name} = {size} {counted(size, MEANINGS.get(name, ''))}".rstrip()

    def reveal(self) -> str:
        """'[32, 8, 10, 64] = [B, H, L, d_k]: B = 32 sentences, H = 8 heads, ...'."""
        text = str(list(self.shape))
        if any(self.names):
            text += f" = [{', '.join(name or '?' for name in self.names)}]" + _(": ")
            text += _(", ").join(self.describe(dim) for dim in range(len(self.shape)))
        return text

    def what_is_wrong(self, answer: tuple[int, ...], wrote: str = N_("you wrote")) -> str:
        """Name what differs between ``answer`` and the expected shape ("dim 1 is H = 8 heads: you wrote 64").
        ``wrote`` (marked ``N_`` where it is written) is shown through ``_``."""
        shape, wrote = self.shape, _(wrote)
        if len(answer) != len(shape):
            message = _("{wrote} {count} dims; the answer has {ndim}").format(wrote=wrote, count=len(answer),
                                                                             ndim=len(shape))
            message = message[0].upper() + message[1:]
            if any(self.names):
                message += f" ([{', '.join(name or '?' for name in self.names)}])"
            if math.prod(answer) == math.prod(shape):
                message += _(". Yours holds the same {count:,} numbers, so a dim is split or merged where it should "
                             "not be (or not where it should)").format(count=math.prod(shape))
            return message + _(".")
        wrong = [dim for dim in range(len(shape)) if answer[dim] != shape[dim]]
        if sorted(answer) == sorted(shape):
            if len(wrong) == 2:
                first, second = wrong
                which = _("dims {first} and {second}").format(first=first, second=second)
                if self.names[first] and self.names[second]:
                    which = _("{first} and {second} ({which})").format(first=self.names[first],
                                                                      second=self.names[second], which=which)
                return _("You swapped {which}: did you forget a transpose?").format(which=which)
            return _("Right sizes, wrong order: {dims}.").format(dims=_("; ").join(
                _("dim {dim} is {meaning}").format(dim=d, meaning=self.describe(d)) for d in wrong))
        message = _("; ").join(self.one_wrong_dim(dim, answer[dim], wrote) for dim in wrong)
        return message[0].upper() + message[1:] + _(".")

    def one_wrong_dim(self, dim: int, written: int, wrote: str) -> str:
        message = _("dim {dim} is {meaning}: {wrote} {written}").format(dim=dim, meaning=self.describe(dim),
                                                                        wrote=wrote, written=written)
        others = [name for name, size in self.sizes.items() if size == written and name != self.names[dim]]
        if not others:
            others = [_("dim {dim}'s size").format(dim=d) for d, size in enumerate(self.shape)
                      if size == written and d != dim]
        return message + (_(", which is {names}").format(names=_(" or ").join(others)) if others else "")


def whole_size(size) -> int | None:
    """A size as a plain int (numpy and 0-d tensor integers included), or None when it is not a whole size >= 0."""
    if isinstance(size, bool) or (isinstance(size, torch.Tensor) and (size.dim() or size.dtype == torch.bool)):
        return None
    try:
        value = operator.index(size)  # int, np.int64, an integer 0-d tensor; not a float, not np.bool_
    except TypeError:
        return None
    return value if value >= 0 else None


def names_from_sizes(shape: tuple[int, ...], sizes: Mapping[str, int]) -> list[str | None]:
    """Name each dim after the size it has (the first name not used yet wins: [L_q, L_k] for [10, 10])."""
    names: list[str | None] = []
    for size in shape:
        candidates = [name for name, value in sizes.items() if value == size]
        unused = [name for name in candidates if name not in names]
        names.append((unused or candidates or [None])[0])
    return names


def parse_shape(text) -> tuple[int, ...]:
    """'[32, 8, 10, 64]', '(32,8,10,64)', '32x8x10x64', '32 × 8', '32 8', 'torch.Size([32, 8])' -> a tuple.

    What a Chinese keyboard types reads the same: full-width digits and brackets, '，' and '、'.

    Raises ValueError with a message for the student when the text is not a shape.
    """
    if isinstance(text, (torch.Size, tuple, list)):
        text = str(list(text))
    if not isinstance(text, str):
        raise TypeError(_("text must be a string such as '{example}', got {type}").format(
            example=EXAMPLE, type=type(text).__name__))
    body = unicodedata.normalize("NFKC", text).strip()  # a Chinese keyboard's ３２，（） become 32,()
    if not body:
        raise ValueError(_("Type a shape first, for example {example}.").format(example=EXAMPLE))
    hexadecimal = re.search(r"\b0x[0-9a-f]+\b", body, re.I)
    if hexadecimal:
        raise ValueError(_("'{number}' is a hexadecimal number, not a shape: type the sizes in decimal, separated "
                           "by commas, for example {example}.").format(number=hexadecimal[0], example=EXAMPLE))
    power = re.search(r"(?<!\d)\d+\s*\*\*\s*\d+", body)  # starting only where a number starts: linear time
    if power:
        raise ValueError(_("'{power}' is a power (arithmetic), not a shape: type the size itself, a whole "
                           "number.").format(power=power[0]))
    wrapped = re.fullmatch(r"torch\.Size\((.*)\)", body, re.S)
    body = wrapped[1].strip() if wrapped else body
    if body[:1] + body[-1:] in ("[]", "()"):
        body = body[1:-1]
    sizes = []
    for count, match in enumerate(re.finditer(r"[^\s,、×*xX]+", body), 1):
        if count > MAX_DIMS:
            raise ValueError(_("That is more than {most} sizes: a shape has one size per dim, and a tensor here has "
                               "a handful of dims. Type the shape only, for example {example}.").format(
                                   most=MAX_DIMS, example=EXAMPLE))
        token = match[0]
        if re.fullmatch(r"\+?\d+", token):
            digits = len(token.lstrip("+0"))
            if digits > MAX_DIGITS:
                raise ValueError(_("{start}… is not a size: {digits} digits; a tensor dim has at most {most} (it is "
                                   "below 2**63).").format(start=token[:10], digits=digits, most=MAX_DIGITS))
            sizes.append(int(token))
        elif re.fullmatch(r"-\d+", token):
            raise ValueError(_("{token} is not a size: a dim counts entries, so it is 0 or more.").format(token=token))
        elif re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?e[+-]?\d+)", token, re.I):
            raise ValueError(_("{token} is not a whole number: a dim counts entries.").format(token=token))
        elif token in MEANINGS:
            raise ValueError(_("{token} is a name: type its size, a whole number (for example {example}).").format(
                token=token, example=EXAMPLE))
        else:
            shown = text.strip()
            raise ValueError(_("{text!r} is not a shape: type whole numbers, for example {example}.").format(
                text=shown if len(shown) <= QUOTED else shown[:QUOTED] + "…", example=EXAMPLE))
    return tuple(sizes)


def check_shape_answer(text, expected, dims=None) -> tuple[bool, str]:
    """Check a typed shape against ``expected`` (torch.Size, tuple or traced Row) -> (correct, feedback).

    ``dims``: one name per dim ("B H L_q d_k") or a dict of the sizes in play ({"H": 8, "d_k": 64, ...}).
    """
    question = Question(expected, dims)
    try:
        answer = parse_shape(text)
    except ValueError as err:
        return False, str(err)
    if answer == question.shape:
        return True, _("Right: {answer}.").format(answer=question.reveal())
    return False, question.what_is_wrong(answer)


class ShapeQuestion:
    """The question as a widget; its mime bundle also carries an HTML fold for places with no widgets."""

    def __init__(self, prompt: str, expected, dims=None):
        import ipywidgets as widgets

        self.prompt, self.expected, self.dims = prompt, expected, dims
        self.question = Question(expected, dims)
        self.answer_box = widgets.Text(placeholder=_("e.g. {example}").format(example=EXAMPLE),
                                       description=_("shape"), continuous_update=False)
        self.check_button = widgets.Button(description=_("check"), button_style="primary")
        self.show_button = widgets.Button(description=_("show answer"))
        self.feedback = widgets.HTML()
        predict = _("Predict the shape:")
        self.widget = widgets.VBox([widgets.HTML(f"<b>{predict}</b> {html.escape(prompt)}"),
                                    widgets.HBox([self.answer_box, self.check_button, self.show_button]),
                                    self.feedback])
        self.check_button.on_click(lambda _: self.check())
        self.show_button.on_click(lambda _: self.reveal())
        self.answer_box.observe(lambda _: self.check(), "value")  # Enter (continuous_update=False)

    def check(self) -> bool:
        correct, feedback = check_shape_answer(self.answer_box.value, self.expected, self.dims)
        if correct:
            self.reveal(f"✓ {feedback}")
        else:
            self.feedback.value = f'<span style="color:#b5532a">✗ {html.escape(feedback)}</span>'
        return correct

    def reveal(self, heading: str = "") -> None:
        text = heading or _("Answer: {answer}").format(answer=self.question.reveal())
        self.feedback.value = f'<span style="color:#2a7a3a">{html.escape(text)}</span>'

    def static_html(self) -> str:
        """The prompt and a fold with the answer: what slides and the static site show."""
        predict, show = _("Predict the shape:"), _("show answer")
        return (f'<div class="wt-question"><p><b>{predict}</b> {html.escape(self.prompt)}</p>'
                f"<details><summary>{show}</summary><p>{html.escape(self.question.reveal())}</p></details></div>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = self.widget._repr_mimebundle_()
        bundle["text/html"] = self.static_html()
        bundle["text/plain"] = _("Predict the shape: {prompt}\n(answer: {answer})").format(
            prompt=self.prompt, answer=self.question.reveal())
        return bundle


def ask_shape(prompt: str, expected, dims=None) -> ShapeQuestion:
    """Show ``prompt``, a box for the predicted shape, "check" and "show answer" buttons.

    ``expected``: from running code (``x.shape`` or a traced ``Row``); ``dims`` as in ``check_shape_answer``.
    Make the call the cell's last line: the returned question displays itself.
    """
    return ShapeQuestion(prompt, expected, dims)

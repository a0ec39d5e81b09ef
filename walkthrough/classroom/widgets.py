"""Sliders that re-run the real model (on the meta device) and redraw: one explorer per notebook.

Every explorer asks the student to predict before moving anything (its question sits above the
controls), keeps the controls beside what they change, and shows a bad combination as a one-line
message in place of its output, never a traceback. Default sizes come from the package itself:
``ModelConfig.paper_base()`` (the paper's base model) and ``trace_shapes``' batch and lengths
(``SOURCE_SIZES``: the source articles' B = 32, L_src = 10, L_tgt = 4). Tables pick their rows by module
path and step id (``wt.STEPS``), and a step that is not there is a message, never an empty table.

A new explorer is ``explorer([slider(...), ...], render, question)``: ``render`` takes the controls'
values by their names and returns what to show (a figure, a table, text, or a tuple of them).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import gc
import html
import inspect
import io
import math
import re
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..i18n import N_, _, get_language, ljust, pgettext
from ..model.attention import keep_attention_weights
from ..model.config import GPTConfig, ModelConfig
from ..model.decoding import next_token_probs
from ..model.flash import flash_tiles
from ..model.masks import causal_mask, padding_mask
from ..model.transformer import Transformer
from ..recording import Row
from ..steps import STEPS
from ..tasks.data import MAX_NUMBER, chinese_numeral, english_words
from ..tasks.distributed import check_global_batch, rank_memory, ring_all_reduce_bytes, shard_slice
from ..tasks.language_model import prompt_ids
from ..tasks.numerals import cross_attention_map
from ..tasks.translator import unsure_note
from ..text.bpe import VOCAB_SIZES, BPETokenizer, corpus_vocabulary
from ..trace.cost import encoder_layer_costs, format_costs, gqa_costs, kv_sharing, modern_block_costs
from ..trace.gradients import GradientTable, parameter_gradients, trace_gradients
from ..trace.memory import crossover_length, training_memory
from ..trace.meta import SOURCE_SIZES
from ..trace.tables import Table, shape_table
from ..trace.tracer import meta_inputs, trace_callable, trace_shapes
from . import viz

BASE = ModelConfig.paper_base()  # the paper's base model, vocabularies of 30000 as in the source articles
SIZES = SOURCE_SIZES  # batch, src_len, tgt_len: the source articles' sizes, the traces' defaults
FIGURE_DPI = viz.SCREEN_DPI  # explorer figures as every other figure: text of viz.MIN_FONT_PT reads at 14.6 px
CONTROLS_WIDTH = "250px"
# A box a class types a sentence into: 30 characters and more show whole at 1366x768 (16's phrase box once cut its
# own default, "早上好 good morning", and 17's showed a typed sentence's last nine characters)
TEXT_BOX_WIDTH = "44em"


def slider(name: str, value: int, low: int, high: int, step: int = 1) -> widgets.IntSlider:
    """An integer slider called ``name`` (the keyword ``render`` receives its value by), starting at ``value``.

    It reports only when released (``continuous_update=False``), so a drag costs one render, not dozens.
    """
    return widgets.IntSlider(value=value, min=low, max=high, step=step, description=name,
                             continuous_update=False, style={"description_width": "initial"},
                             layout=widgets.Layout(width=CONTROLS_WIDTH))


def control_labels() -> dict[str, str]:
    """What each control is called on screen in the reader's language, by its name: the keyword ``render``
    receives its value by, and its label in English. A name that is a formula's symbol (d_model, L_q) has no entry:
    it reads the same in both."""
    return {
        "batch": pgettext("control", "batch"), "src_len": pgettext("control", "src_len"),
        "tgt_len": pgettext("control", "tgt_len"), "len_1": pgettext("control", "len_1"),
        "len_2": pgettext("control", "len_2"), "len_3": pgettext("control", "len_3"),
        "length": pgettext("control", "length"), "heads": pgettext("control", "heads"),
        "kv_heads": pgettext("control", "kv_heads"), "layers": pgettext("control", "layers"),
        "vocab": pgettext("control", "vocab"), "vocabulary": pgettext("control", "vocabulary"),
        "number": pgettext("control", "number"), "phrase": pgettext("control", "phrase"),
        "sentence": pgettext("control", "sentence"),
        "beam": pgettext("control", "beam"), "step": pgettext("control", "step"),
        "causal": pgettext("control", "causal"), "block_q": pgettext("control", "block_q"),
        "block_k": pgettext("control", "block_k"), "world_size": pgettext("control", "world_size"),
        "temperature": pgettext("control", "temperature"), "top_k": pgettext("control", "top_k"),
        "top_p": pgettext("control", "top_p"), "norm": pgettext("control", "norm"),
        "activation": pgettext("control", "activation"), "positions": pgettext("control", "positions"),
        "rope_base": pgettext("control", "rope_base"), "tied": pgettext("control", "tied"),
    }


class Explorer(widgets.VBox):
    """One slide of a 1366x768 screen: the question on top; under it the controls in a column and, beside them,
    the answer first (the text ``render`` returns: numbers, a verdict, a summary), then what it draws (figures
    and tables, side by side where they fit). A table shows whole, never in a box that scrolls (a clicker cannot
    scroll it): an explorer shows the rows its question is about (``shape_table``'s ``within=`` and ``steps=``), few
    enough that the slide still fits the screen after a move (tests/test_slides_fit.py measures both).

    ``controls``: the value widgets, each named by its ``keyword`` (the ``description`` it was made with; the
    label it shows is ``control_labels()``'s, in the reader's language); ``outputs``: one output
    area per part ``render`` returned, in its order. ``control(name)`` finds a control, ``text()`` is what the
    outputs show (for tests).
    """

    def __init__(self, controls: Sequence[widgets.Widget], question: str, controls_on_top: bool = False):
        self.controls = list(controls)
        labels = control_labels()
        for w in self.controls:  # made with its name as description: keep the name, show the label
            w.keyword = w.description
            w.description = labels.get(w.keyword, w.keyword)
        self.outputs: list[widgets.Output] = []
        self._answer = widgets.VBox(layout=widgets.Layout(flex="0 0 auto"))
        self._drawn = widgets.Box(layout=widgets.Layout(display="flex", flex_flow="row wrap",
                                                        align_items="flex-start"))
        parts = widgets.VBox([self._answer, self._drawn], layout=widgets.Layout(flex="1 1 auto", min_width="0"))
        predict = _("Predict first.")
        prompt = widgets.HTML(f"<p style='margin:0 0 4px 0'><b>{predict}</b> {html.escape(question)}</p>")
        if controls_on_top:  # a wide text box in a row above the answer
            body = widgets.VBox([widgets.HBox(self.controls, layout=widgets.Layout(flex_flow="row wrap")), parts])
        else:
            column = widgets.VBox(self.controls, layout=widgets.Layout(flex="0 0 auto", width="auto"))
            body = widgets.HBox([column, parts], layout=widgets.Layout(align_items="flex-start"))
        super().__init__([prompt, body] if question else [body])

    def control(self, name: str) -> widgets.Widget:
        for w in self.controls:
            if name in (w.keyword, w.description):
                return w
        raise KeyError(_("no control named {name!r}; the controls are {names}").format(
            name=name, names=[w.keyword for w in self.controls]))

    def set_outputs(self, parts: Sequence[dict]) -> None:
        """Put one display output in each output area (adding areas as needed, emptying the rest): text in the
        answer above, figures and tables below it."""
        while len(self.outputs) < len(parts):
            self.outputs.append(widgets.Output(layout=widgets.Layout(margin="0 12px 0 0")))
        answer, drawn = [], []
        for i, out in enumerate(self.outputs):
            part = parts[i] if i < len(parts) else {}
            out.outputs = (part,) if part else ()
            data = part.get("data", {})
            table = "<table" in data.get("text/html", "")
            if part:
                (drawn if table or "image/png" in data else answer).append(out)
        if (tuple(answer), tuple(drawn)) != (self._answer.children, self._drawn.children):
            self._answer.children, self._drawn.children = tuple(answer), tuple(drawn)

    def text(self) -> str:
        """Everything the output areas show as text: HTML, plain text, and a note for each image."""
        pieces = []
        for out in self.outputs:
            for item in out.outputs:
                data = item.get("data", {})
                pieces.append(data.get("text/html", "") + data.get("text/plain", "") + item.get("text", "")
                              + (" [image/png]" if "image/png" in data else ""))
        return "\n".join(pieces)


def explorer(controls: list[widgets.Widget], render: Callable[..., object], question: str = "",
             controls_on_top: bool = False) -> Explorer:
    """Controls beside an output area, under a "predict first" ``question``; ``render(**values)`` runs on every
    change (values keyed by each control's name) and what it returns (one object or a tuple,
    shown in that order, left to right) replaces the output.

    Any exception, from ``render`` or from drawing what it returned, becomes a one-line message in
    place of the output. The output is set directly rather than captured with ``with out:``, so it
    works the same in a kernel, in Voilà and in a plain test.
    """
    box = Explorer(controls, question, controls_on_top)

    def update(_change=None):
        collecting, threads = gc.isenabled(), torch.get_num_threads()
        gc.disable()  # no full collection in the middle of a move (they cost 100-300 ms in a notebook's kernel)
        torch.set_num_threads(1)  # tensors this small gain nothing from threads, and on a busy server
        try:                      # waiting for a second one cost up to a second per move
            box.set_outputs(_display(render, {w.keyword: w.value for w in box.controls}))
        finally:
            torch.set_num_threads(threads)
            if collecting:
                gc.enable()
                gc.collect(1)  # the figure just drawn is garbage now: freed while young, full collections stay rare

    for w in box.controls:
        w.observe(update, names="value")
    update()
    return box


def _display(render: Callable[..., object], values: dict) -> tuple[dict, ...]:
    """What ``render(**values)`` returned, as display outputs; any error as a one-line message instead."""
    try:
        result = render(**values)
        return tuple(_output(part) for part in (result if isinstance(result, tuple) else (result,)))
    except Exception as err:  # a widget must never show a traceback
        return (_output(_Message(" ".join(str(err).split()) or type(err).__name__)),)


def _config(d_model: int | None = None, heads: int | None = None, d_ff: int | None = None,
            layers: int | None = None, vocab: int | None = None) -> ModelConfig:
    """``BASE`` with the sizes a slider chose (None keeps the base value)."""
    changes = {"d_model": d_model, "num_heads": heads, "d_ff": d_ff, "num_layers": layers,
               "src_vocab_size": vocab, "tgt_vocab_size": vocab}
    return dataclasses.replace(BASE, **{k: v for k, v in changes.items() if v is not None})


SHAPE_EXPLORER_STEPS = ("embedding", "scores", "ffn_hidden", "logits")  # a row for what each slider moves
SHAPE_EXPLORER_MODULES = ("src_embed", "encoder", "tgt_embed", "decoder.layers.0.self_attn",
                          "decoder.layers.0.cross_attn", "output_head")


def shape_explorer() -> Explorer:
    """Notebook 00: for any sizes, the rows each slider moves (``SHAPE_EXPLORER_STEPS`` in
    ``SHAPE_EXPLORER_MODULES``): both embeddings, the three attentions' scores, the encoder's feed-forward hidden
    layer and its repeated layers, the logits. Eight rows, so the slide shows them all at any sizes, in both
    languages (the whole map is notebook 00's seven tables)."""
    def render(batch, src_len, tgt_len, d_model, heads, d_ff, layers, vocab):
        rows = trace_shapes(_config(d_model, heads, d_ff, layers, vocab), batch, src_len, tgt_len)
        return shape_table(rows, within=SHAPE_EXPLORER_MODULES, steps=SHAPE_EXPLORER_STEPS)
    return explorer([slider("batch", SIZES["batch"], 1, 128), slider("src_len", SIZES["src_len"], 1, 64),
                     slider("tgt_len", SIZES["tgt_len"], 1, 64), slider("d_model", BASE.d_model, 16, 1024, 16),
                     slider("heads", BASE.num_heads, 1, 16), slider("d_ff", BASE.d_ff, 16, 4096, 16),
                     slider("layers", BASE.num_layers, 1, 12), slider("vocab", BASE.tgt_vocab_size, 10, 50000, 10)],
                    render, _("Before you move d_model from {d_model} to {half}: which rows of the table change "
                              "shape, and which stay the same?").format(d_model=BASE.d_model, half=BASE.d_model // 2))


def pe_explorer() -> Explorer:
    """Notebook 01: the positional-encoding table for a chosen length and d_model."""
    def render(length, d_model):
        drawn["figure"] = viz.pe_figure(length, d_model, layout=None, into=drawn.get("figure"))
        return drawn["figure"]
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    return explorer([slider("length", 50, 2, 200), slider("d_model", BASE.d_model, 4, 1024, 4)], render,
                    _("Before you move length from 50 to 100: do the first 50 rows of the table change?"))


def split_explorer() -> Explorer:
    """Notebook 02: the encoder self-attention chain, projection -> split -> scores -> merge, with the
    split drawn as blocks (x [B, L, D] -> view [B, L, H, d_k] -> transpose [B, H, L, d_k])."""
    drawn = {}  # the figure of the last move, drawn into again

    def render(batch, src_len, d_model, heads):
        rows = trace_shapes(_config(d_model, heads, layers=1), batch, src_len, 1)
        table = shape_table(rows, within="encoder.layers.0.self_attn", summarise_layers=False,
                            steps=("k", "k_view", "k_transpose", "scores"), highlight=("k_view", "k_transpose"))
        drawn["figure"] = viz.split_chain_figure(batch, src_len, d_model, heads, layout=None, size=(9, 2.7),
                                                 into=drawn.get("figure"))
        return table, drawn["figure"]
    return explorer([slider("batch", SIZES["batch"], 1, 64), slider("src_len", SIZES["src_len"], 1, 32),
                     slider("d_model", BASE.d_model, 16, 1024, 16), slider("heads", BASE.num_heads, 1, 16)],
                    render, _("Before you move heads from {heads} to {half}: what will K's shape be after the "
                              "transpose?").format(heads=BASE.num_heads, half=BASE.num_heads // 2))


def scale_explorer() -> Explorer:
    """Notebook 02: what ÷√d_k does. Random unit-variance q, k (fixed seed): score std, the largest softmax
    weight, rows near one-hot, with and without the scale, and a picture of the weights."""
    def render(d_k):
        drawn["figure"] = viz.softmax_scale_figure(d_k, layout=None, into=drawn.get("figure"))
        return drawn["figure"], _Text(repr(viz.softmax_saturation(d_k)))
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    choices = [2 ** p for p in range(2, 10)]  # 4 ... 512
    d_k = widgets.SelectionSlider(options=choices, value=BASE.d_k, description="d_k", continuous_update=False,
                                  style={"description_width": "initial"}, layout=widgets.Layout(width=CONTROLS_WIDTH))
    return explorer([d_k], render, _("Before you move d_k from {d_k} to {four_times}: will the unscaled score std "
                                     "double or grow four times?").format(d_k=BASE.d_k, four_times=BASE.d_k * 4))


def mask_explorer() -> Explorer:
    """Notebook 03: a batch of three target sentences; their real lengths and the padded length."""
    def render(tgt_len, len_1, len_2, len_3):
        lengths = (len_1, len_2, len_3)
        if max(lengths) > tgt_len:
            raise ValueError(_("a sentence of {length} tokens does not fit in tgt_len={tgt_len}: raise tgt_len or "
                               "shorten the sentence").format(length=max(lengths), tgt_len=tgt_len))
        ids = torch.tensor([[1] * n + [0] * (tgt_len - n) for n in lengths])  # [3, L]; 0 = <pad>
        combined = padding_mask(ids, 0) & causal_mask(tgt_len)  # [3, 1, L, L]
        tokens = [f"t{i}" for i in range(tgt_len)]
        titles = [_("sentence {number} (length {length})").format(number=b + 1, length=n)
                  for b, n in enumerate(lengths)]
        drawn["figure"] = viz.mask_figure({title: combined[b, 0] for b, title in enumerate(titles)},
                                          tokens, annotate=False, layout=None, into=drawn.get("figure"))
        return drawn["figure"]
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    length = SIZES["tgt_len"]
    return explorer([slider("tgt_len", length, 1, 10), slider("len_1", length, 1, 10),
                     slider("len_2", max(length - 1, 1), 1, 10), slider("len_3", 1, 1, 10)], render,
                    _("Before you move len_2 from {before} to {after}: which cells of sentence 2's mask turn "
                      "dark?").format(before=max(length - 1, 1), after=length))


@functools.cache
def _small_model() -> Transformer:
    """A small untrained model (seed 0) for pictures of real attention weights; built once, reused per move."""
    with torch.random.fork_rng():  # the student's own random state stays as it was
        torch.manual_seed(0)
        return Transformer(ModelConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=32, num_heads=4, d_ff=64,
                                       num_layers=1, dropout=0.0)).eval()


CROSS_SIZE = (5.2, 3.2)  # inches: the cross-attention heatmap beside its table


def cross_explorer() -> Explorer:
    """Notebook 04: cross-attention's rectangle [L_tgt, L_src] from a small untrained model, and its shapes."""
    def render(src_len, tgt_len):
        model = _small_model()
        generator = torch.Generator().manual_seed(0)
        src = torch.randint(4, 50, (1, src_len), generator=generator)  # [1, L_src]
        tgt = torch.randint(4, 50, (1, tgt_len), generator=generator)  # [1, L_tgt]
        with torch.no_grad(), keep_attention_weights(model):
            model(src, tgt)
        weights = model.decoder.layers[0].cross_attn.attn_weights[0, 0]  # [L_tgt, L_src]
        rows = trace_shapes(_config(layers=1), SIZES["batch"], src_len, tgt_len)
        table = shape_table(rows, within="decoder.layers.0.cross_attn", summarise_layers=False,
                            steps=("q_transpose", "k_transpose", "scores"), highlight="scores")
        if "figure" not in drawn:  # made once, drawn again in place on every move
            drawn["figure"] = Figure(figsize=CROSS_SIZE)  # margins in inches, for the labels and the colour bar's:
            drawn["figure"].add_subplot()                 # constrained layout would cost half of every move
            drawn["figure"].subplots_adjust(left=0.8 / CROSS_SIZE[0], right=1 - 0.9 / CROSS_SIZE[0],
                                            bottom=0.75 / CROSS_SIZE[1], top=1 - 0.4 / CROSS_SIZE[1])
        figure = drawn["figure"]
        viz.heatmap(weights, [f"y{i}" for i in range(tgt_len)], [f"x{j}" for j in range(src_len)],
                    title=_("head 0: [L_tgt, L_src] = [{tgt_len}, {src_len}]").format(tgt_len=tgt_len, src_len=src_len),
                    ax=figure.axes[0], cmap="Blues", vmin=0, xlabel=_("source position (key)"),
                    ylabel=_("target position (query)"), colorbar_label=_("probability"))
        return table, figure
    drawn = {}
    return explorer([slider("src_len", SIZES["src_len"], 1, 20), slider("tgt_len", SIZES["tgt_len"], 1, 20)],
                    render, _("Before you move src_len from {src_len} to 15: what shape will the cross-attention "
                              "scores have, and which side of the heatmap grows?").format(src_len=SIZES["src_len"]))


def ffn_explorer() -> Explorer:
    """Notebook 05: the FFN's shapes and one encoder layer's parameter/FLOP table."""
    def render(d_model, d_ff, src_len):
        cfg = _config(d_model, d_ff=d_ff, layers=1)  # d_model moves in steps of 16, so 8 heads always fit
        rows = trace_shapes(cfg, SIZES["batch"], src_len, 1)
        table = shape_table(rows, within="encoder.layers.0.feed_forward", summarise_layers=False)
        return table, _Text(format_costs(encoder_layer_costs(cfg, SIZES["batch"], src_len)))
    return explorer([slider("d_model", BASE.d_model, 16, 1024, 16), slider("d_ff", BASE.d_ff, 16, 8192, 16),
                     slider("src_len", SIZES["src_len"], 1, 512)], render,
                    _("Before you move d_ff from {d_ff} to {double}: by how much does the feed-forward parameter "
                      "count grow?").format(d_ff=BASE.d_ff, double=BASE.d_ff * 2))


def output_head_explorer() -> Explorer:
    """Notebook 06: the output head and the loss's shapes for any batch, target length and vocabulary."""
    def render(batch, tgt_len, vocab):
        rows = trace_shapes(_config(layers=1, vocab=vocab), batch, SIZES["src_len"], tgt_len)
        return shape_table(rows, steps=("decoder_output", "logits", "labels", "logits_flat", "labels_flat"))
    return explorer([slider("batch", SIZES["batch"], 1, 128), slider("tgt_len", SIZES["tgt_len"], 1, 32),
                     slider("vocab", BASE.tgt_vocab_size, 10, 50000, 10)], render,
                    _("Before you move vocab from {vocab} to 10000: what will the logits' shape be, and the "
                      "labels'?").format(vocab=BASE.tgt_vocab_size))


def translation_explorer(trainer) -> Explorer:
    """Notebook 07: type a number; see its Chinese numeral, the trained model's English, and where it looked."""
    def render(number):
        zh = chinese_numeral(number)
        guess, truth = trainer.translate([zh])[0], english_words(number)
        verdict = _("✓ correct") if guess == truth else _("✗ expected: {truth}").format(truth=truth)
        summary = _Text(f"{number:,}   {zh}\n" + _("model:  {guess}").format(guess=guess) + f"\n{verdict}")
        weights, predicted, source = cross_attention_map(trainer, zh, guess)
        drawn["figure"] = viz.translation_figure(weights, predicted, source, N_("source (key)"),
                                                 into=drawn.get("figure"))
        return summary, drawn["figure"]  # the verdict next to the number typed, the picture beside it
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    number = widgets.BoundedIntText(value=3_056_070, min=0, max=MAX_NUMBER, description="number",
                                    style={"description_width": "initial"},
                                    layout=widgets.Layout(width=CONTROLS_WIDTH))
    return explorer([number], render, _("Before you type a number: which Chinese characters should the model "
                                        "look at when it writes 'thousand'?"))


def real_translation_explorer(translator) -> Explorer:
    """Notebook 17: type a Chinese sentence; see the shipped model's English (greedy, each token shaded by how
    sure the model was of it, "unsure" below ``UNSURE_BELOW``; and beam) and where it looked."""
    def render(sentence, beam):
        if drawn.get("of") != (sentence, get_language()):  # a move of the beam keeps the greedy answer and its map
            [guess] = translator.translate([sentence])
            [probs] = translator.token_probs([(sentence, guess)])
            drawn["sure"] = _shaded(guess, probs, unsure_note(probs))
            weights, predicted, source = translator.cross_attention(sentence, guess)
            drawn["figure"] = viz.translation_figure(weights, predicted, source, N_("source token (key)"),
                                                     key_width=0.5, into=drawn.get("figure"))
            drawn["shown"], drawn["of"] = _Shown(_output(drawn["figure"])), (sentence, get_language())
        [beamed] = translator.translate([sentence], beam_size=beam)
        return drawn["sure"], _Text(_("beam of {beam}:    {beamed}").format(beam=beam, beamed=beamed)), drawn["shown"]
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    sentence = widgets.Text(value="早上好！", description="sentence", continuous_update=False,
                            style={"description_width": "initial"}, layout=widgets.Layout(width=TEXT_BOX_WIDTH))
    return explorer([sentence, slider("beam", 4, 1, 8)], render,
                    _("Before you type 我爱你。: which source token should 'love' look at, and will the beam "
                      "change the greedy answer?"), controls_on_top=True)


def _shaded(guess: str, probs: list[tuple[str, float]], note: str | None) -> _Text:
    """The greedy answer with each token on a background as dark as the model was unsure of it (its probability
    on hover), and the unsure note after it."""
    spans = "".join(f"<span title='{p:.0%}' style='background:rgba(230,120,0,{1 - p:.2f})'>{html.escape(token)}</span>"
                    for token, p in probs[:-1])  # <eos> last: not a word of the answer
    text = _("greedy:       {guess}").format(guess=guess) + (f"  ⚠ {note}" if note else "")
    mark = f"  <b style='color:#b00020'>⚠ {html.escape(note)}</b>" if note else ""
    label, legend = html.escape(_("greedy:       {guess}").format(guess="")), html.escape(_(
        "the darker a token, the less sure the model was of it (its probability on hover)"))
    return _Html(text, f"<div style='white-space:pre-wrap;font-family:var(--jp-code-font-family)'>{label}{spans}"
                       f"{mark}\n<small>{legend}</small></div>")


@dataclasses.dataclass(frozen=True)
class _Shown:
    """A display output made on an earlier move, shown again as it was (nothing drawn or encoded again)."""
    output: dict


def _output(part) -> dict:
    """One object as a notebook display output: PNG for a figure, HTML and text for the rest."""
    if isinstance(part, _Shown):
        return part.output
    data = {"text/plain": repr(part)}
    if isinstance(part, Figure):
        if not isinstance(part.canvas, FigureCanvasAgg):  # kept with the figure: a figure drawn again in place
            FigureCanvasAgg(part)                          # reuses its renderer and the sizes of its texts
        buffer = io.BytesIO()
        # the fastest zlib level: half the encoding time of the default for a PNG about a tenth larger
        part.savefig(buffer, format="png", dpi=FIGURE_DPI, pil_kwargs={"compress_level": 1})
        data["image/png"] = base64.b64encode(buffer.getvalue()).decode()
    elif hasattr(part, "_repr_html_"):
        data["text/html"] = part._repr_html_()
    return {"output_type": "display_data", "data": data, "metadata": {}}


class _Text:
    """Plain text that keeps its line breaks in a notebook."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<pre style='white-space:pre-wrap'>{html.escape(self.text)}</pre>"  # a long answer wraps, never cut


class _Html(_Text):
    """Text with a face of its own in a notebook (tests read the text)."""

    def __init__(self, text: str, markup: str):
        super().__init__(text)
        self.markup = markup

    def _repr_html_(self) -> str:
        return self.markup


class _Message(_Text):
    """Why the sizes chosen cannot work, shown in place of the output."""

    def __repr__(self) -> str:
        return f"⚠ {self.text}"

    def _repr_html_(self) -> str:
        return f"<p class='wt-message' style='color:#b00020;font-weight:bold'>⚠ {html.escape(self.text)}</p>"


# ---------------------------------------------------------------------------------------------------
# Notebook 09: grouped-query attention.

GPT_LENGTH = SIZES["src_len"] + SIZES["tgt_len"]  # a decoder-only model reads source and target as one sequence


def gqa_explorer() -> Explorer:
    """Notebook 09: from H K/V heads (multi-head) down to 1 (multi-query): shapes, parameters, cache, sharing."""
    def render(heads, kv_heads, d_model, layers):
        cfg = GPTConfig(vocab_size=BASE.tgt_vocab_size, d_model=d_model, num_heads=heads, num_kv_heads=kv_heads,
                        d_ff=BASE.d_ff, num_layers=layers, max_len=BASE.max_len, dropout=0.0)
        costs = gqa_costs(cfg, SIZES["batch"], GPT_LENGTH)
        full = gqa_costs(dataclasses.replace(cfg, num_kv_heads=None), SIZES["batch"], GPT_LENGTH)
        # every layer traces alike, and the table is layer 0's: one layer is traced
        rows = trace_shapes(dataclasses.replace(cfg, num_layers=1), SIZES["batch"], length=GPT_LENGTH)
        grouped = ("k_grouped",) if kv_heads < heads else ()  # H_kv = H: nothing is shared; V is shaped as K
        table = shape_table(rows, within="decoder.layers.0.self_attn", summarise_layers=False,
                            steps=("k_transpose", *grouped), highlight="k_transpose")
        summary = _Text(_("K and V per layer   {k_shape}  [B, H_kv, L, d_k]\n"
                          "query heads per K/V head   {group}\n"
                          "attention weights per layer   {weights:,}  (with {heads} K/V heads: {full_weights:,})\n"
                          "KV cache per token, {layers} layers   {cache:,} bytes  (with {heads} K/V heads: "
                          "{full_cache:,}; ÷{group})").format(
            k_shape=list(costs.k_shape), group=heads // kv_heads, weights=costs.attention_parameters, heads=heads,
            full_weights=full.attention_parameters, layers=layers, cache=costs.kv_bytes_per_token,
            full_cache=full.kv_bytes_per_token))
        drawn["figure"] = viz.sharing_figure(kv_sharing(heads, kv_heads), layout=None, into=drawn.get("figure"))
        return table, summary, drawn["figure"]
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    return explorer([slider("heads", BASE.num_heads, 1, 16), slider("kv_heads", BASE.num_heads, 1, 16),
                     slider("d_model", BASE.d_model, 16, 1024, 16), slider("layers", BASE.num_layers, 1, 12)],
                    render, _("Before you move kv_heads from {heads} to 2: what will K's shape be, and by how much "
                              "does the KV cache per token shrink? Then try kv_heads 3.").format(heads=BASE.num_heads))


def cache_explorer() -> Explorer:
    """Notebook 08: decoding step t with the key/value cache: its shapes (traced on the meta device), the two
    caches drawn per layer (self-attention: one more position each step; cross-attention: fixed), their bytes."""
    def render(step, batch, src_len, d_model, heads, layers):
        rows = trace_shapes(_config(d_model, heads, layers=1), batch, src_len, step=step)  # every layer caches alike
        table = shape_table(rows, within=("decoder.layers.0.self_attn", "decoder.layers.0.cross_attn"),
                            steps=("k_cached",), summarise_layers=False, highlight="k_cached")
        cache_bytes = {"self": 0, "cross": 0}  # float32; V has K's shape: K and V of all layers are 2 × layers × K
        for r in table.rows:
            if r.step == STEPS["k_cached"].label:
                kind = "cross" if r.where.endswith("cross_attn") else "self"
                cache_bytes[kind] += 2 * layers * 4 * math.prod(r.shape)
        drawn["figure"] = viz.cache_figure(layers, step, src_len, into=drawn.get("figure"))
        d_k = d_model // heads
        summary = _Text(_("self cache  2 × {layers} layers × {batch} × {heads} heads × {step} × {d_k} × 4 bytes "
                          "= {self_bytes:,} bytes\n"
                          "cross cache 2 × {layers} layers × {batch} × {heads} heads × {src_len} × {d_k} × 4 bytes "
                          "= {cross_bytes:,} bytes\n"
                          "each new token adds {per_token:,} bytes to the self cache").format(
            layers=layers, batch=batch, heads=heads, step=step, d_k=d_k, src_len=src_len,
            self_bytes=cache_bytes["self"], cross_bytes=cache_bytes["cross"], per_token=cache_bytes["self"] // step))
        return table, drawn["figure"], summary
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    return explorer([slider("step", 5, 1, 64), slider("batch", SIZES["batch"], 1, 128),
                     slider("src_len", SIZES["src_len"], 1, 32), slider("d_model", BASE.d_model, 16, 1024, 16),
                     slider("heads", BASE.num_heads, 1, 16), slider("layers", BASE.num_layers, 1, 12)], render,
                    _("Before you move step from 5 to 6: which shapes in the table change, which stay, and how many "
                      "bytes does the self-attention cache grow by?"))


def torch_transformer_rows(d_model: int, heads: int, layers: int, src_len: int) -> tuple[Row, ...]:
    """``trace_module``'s rows for PyTorch's own ``nn.Transformer`` at these sizes, traced on plain meta tensors:
    its layers never ask whether they are traced, so the FakeTensor mode ``trace_module`` adds (for library code
    that does) would only make a move three times slower; the rows are the same (tests/test_widgets.py)."""
    with torch.device("meta"):
        model = torch.nn.Transformer(d_model, heads, layers, layers, 4 * d_model, batch_first=True).eval()
    inputs, _no_keywords = meta_inputs((SIZES["batch"], src_len, d_model), (SIZES["batch"], SIZES["tgt_len"], d_model))
    return trace_callable(lambda: model(*inputs), model)


def torch_transformer_explorer() -> Explorer:
    """Notebook 10: PyTorch's own nn.Transformer re-traced on the meta device at any size: its encoder's modules
    to depth 3, and the first encoder layer's self-attention at its input projection (Q, K and V in one matrix)
    and its fused attention: the rows the question is about (notebook 10 shows all of its operators)."""
    def render(d_model, heads, layers, src_len):
        traced = torch_transformer_rows(d_model, heads, layers, src_len)
        attention = [r for r in traced if r.where == "encoder.layers.0.self_attn" and r.kind == "op"]
        in_proj = next(r for r in attention if r.step == "aten.linear")  # the first of its two matrix multiplies
        fused = next(r for r in attention if r.step == "aten.scaled_dot_product_attention")
        return shape_table(traced, within="encoder", depth=3), shape_table([in_proj, fused])
    return explorer([slider("d_model", BASE.d_model, 64, 1024, 64), slider("heads", BASE.num_heads, 1, 16),
                     slider("layers", BASE.num_layers, 1, 12), slider("src_len", SIZES["src_len"], 1, 64)], render,
                    _("Before you move heads from 8 to 4: what shape will PyTorch's fused attention get? "
                      "Which rows change only when you move d_model?"))


def flash_explorer() -> Explorer:
    """Notebook 13: FlashAttention's tiles for any lengths and block sizes, causal or not, beside one query row's
    running max and sum as its blocks of keys arrive; the bytes of one tile against the [L_q, L_k] scores."""
    def render(L_q, L_k, block_q, block_k, causal):
        tiles = flash_tiles(L_q, L_k, block_q, block_k, causal)
        total = math.ceil(L_q / block_q) * math.ceil(L_k / block_k)
        diagonal = sum(tile.diagonal for tile in tiles)
        row = torch.randn(L_k, generator=torch.Generator().manual_seed(0)) * 2  # one query row's scores, fixed
        heads = BASE.num_heads
        summary = _Text(_("computed  {computed} of {total}\n"
                          "skipped   {skipped}\n"
                          "diagonal  {diagonal}\n"
                          "scores    {scores_kib:,.0f} KiB\n"
                          "one tile  {tile_bytes:,} B").format(
            computed=len(tiles), total=total, skipped=total - len(tiles), diagonal=diagonal,
            scores_kib=4 * heads * L_q * L_k / 1024, tile_bytes=4 * heads * min(block_q, L_q) * min(block_k, L_k)))
        # 360 + 520 px: side by side under the summary within a 1366 px slide's output area
        # margins in inches (layout=None): constrained layout would cost a third of every move
        drawn["tiles"] = viz.tile_grid_figure(L_q, L_k, block_q, block_k, causal, layout=None, size=(3.6, 3.3),
                                              into=drawn.get("tiles"))
        if drawn.get("row_of") != (L_k, block_k, get_language()):  # a move of L_q, block_q or causal keeps the row
            drawn["row"] = viz.online_softmax_figure(row, block_k, layout=None, size=(5.2, 3.3), into=drawn.get("row"))
            drawn["row_shown"], drawn["row_of"] = _Shown(_output(drawn["row"])), (L_k, block_k, get_language())
        return drawn["tiles"], summary, drawn["row_shown"]
    drawn = {}  # the figures of the last move, drawn again in place: their axes and ticks are not made again
    causal = widgets.Checkbox(value=True, description="causal", indent=False,
                              layout=widgets.Layout(width=CONTROLS_WIDTH))
    return explorer([slider("L_q", 64, 1, 256), slider("L_k", 64, 1, 256), slider("block_q", 16, 1, 64),
                     slider("block_k", 16, 1, 64), causal], render,
                    _("Before you halve both blocks from 16 to 8 (causal, L = 64): how many tiles will be computed, "
                      "and does the share skipped grow or shrink?"))


# ---------------------------------------------------------------------------------------------------
# Notebook 11: the backward pass and what training keeps.

GRADIENT_STEPS = ("q_transpose", "scores", "weights", "context", "output", "ffn_hidden", "logits")


def gradient_explorer() -> Explorer:
    """Notebook 11: the forward shape of the key steps beside the shape of their gradient, from a real backward
    pass on the meta device; the weights' gradients keep the weights' shape whatever the batch."""
    labels = {STEPS[step].label for step in GRADIENT_STEPS}

    def render(batch, L, d_model, heads):
        cfg = _config(d_model, heads, layers=1)  # one layer per stack: every other layer repeats its shapes
        rows = [r for r in trace_gradients(cfg, batch, L, L) if r.forward.step in labels
                and (r.forward.where.startswith("encoder.layers.0.") or r.forward.step == STEPS["logits"].label)]
        weights = dict((name, grad) for name, _, grad in parameter_gradients(cfg, batch, L, L))
        w_q = weights["encoder.layers.0.self_attn.w_q.weight"]
        summary = _Text(_("W_q's gradient   {shape}  (the weight's shape)\n"
                          "rows summed into it   B·L = {batch}·{L} = {rows}\n"
                          "scores' gradient   B·H·L·L = {numbers:,} numbers").format(
            shape=list(w_q), batch=batch, L=L, rows=batch * L, numbers=batch * heads * L * L))
        return GradientTable(rows, highlight=("scores",)), summary
    return explorer([slider("batch", SIZES["batch"], 1, 128), slider("L", SIZES["src_len"], 1, 64),
                     slider("d_model", BASE.d_model, 16, 1024, 16), slider("heads", BASE.num_heads, 1, 16)], render,
                    _("Before you move batch from 32 to 64: which gradient shapes change, and what happens to "
                      "W_q's gradient? Then move heads from 8 to 4: what is d_scores now?"))


def memory_explorer() -> Explorer:
    """Notebook 11: one training step's memory over B and L (source and target both L): the saved activations
    against the parameters and Adam's state, and the L at which the activations pass them."""
    def render(batch, L, d_model, layers):
        cfg = _config(d_model, layers=layers)
        lengths = sorted({*range(8, 513, 8), L})
        tables = [training_memory(cfg, batch, n, n) for n in lengths]
        table = tables[lengths.index(L)]
        weights_and_adam = table.parameters + table.optimizer
        crossing = crossover_length(cfg, batch)
        weights = dict(table.terms)["attention weights [B, H, L_q, L_k]"]
        crossing_text = (str(crossing) if crossing is not None
                         else _("never (up to {max_len})").format(max_len=cfg.max_len))
        summary = _Text(_("saved activations   {activations:,.1f} MB\n"
                          "  of which attention weights   {weights:,.1f} MB\n"
                          "parameters + Adam   {weights_and_adam:,.1f} MB\n"
                          "gradients           {gradients:,.1f} MB\n"
                          "activations pass parameters + Adam at L = {crossing}").format(
            activations=table.activations / 1e6, weights=weights / 1e6, weights_and_adam=weights_and_adam / 1e6,
            gradients=table.gradients / 1e6, crossing=crossing_text))
        drawn["figure"] = viz.memory_figure(lengths, [t.activations for t in tables], weights_and_adam, L, batch,
                                            layout=None, into=drawn.get("figure"))
        return drawn["figure"], summary
    drawn = {}  # the figure of the last move, drawn again in place: its axes and ticks are not made again
    return explorer([slider("batch", SIZES["batch"], 1, 256), slider("L", SIZES["src_len"], 2, 512, 2),
                     slider("d_model", BASE.d_model, 64, 1024, 64), slider("layers", BASE.num_layers, 1, 12)], render,
                    _("Before you move batch from 32 to 64: does the L at which the activations pass the weights "
                      "and Adam's state go up or down? And what does doubling L do to the attention weights' bytes?"))


# ---------------------------------------------------------------------------------------------------
# Notebook 14: data parallelism.

@functools.lru_cache(maxsize=1)
def _source_parameters() -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in Transformer(BASE).parameters())


def data_parallel_explorer() -> Explorer:
    """Notebook 14: a global batch over W ranks: each rank's shard, the bytes a step all-reduces, and what each
    rank holds for training the source articles' model under DDP and the ZeRO stages (FSDP = stage 3)."""
    def render(world_size, batch):
        rows = [shard_slice(batch, world_size, rank) for rank in range(world_size)]
        shown = [_("rank {rank}: rows {first}-{last}, src [{count}, {src_len}]").format(
                     rank=r, first=s.start, last=s.stop - 1, count=s.stop - s.start, src_len=SIZES["src_len"])
                 for r, s in enumerate(rows[:4])]
        shown += [_("... {count} ranks more").format(count=world_size - 4)] if world_size > 4 else []
        try:
            check_global_batch(batch, world_size)
            verdict = _("torchrun -m walkthrough train takes this batch")
        except ValueError as err:
            reason = re.split("[:：]", str(err))[0]  # the message's first clause, in either language
            verdict = _("torchrun -m walkthrough train refuses it: {reason}").format(reason=reason)
        parameters = _source_parameters()
        sent = ring_all_reduce_bytes(4 * parameters, world_size)
        memory = [rank_memory(parameters, world_size, stage) for stage in range(4)]
        names = ["DDP", _("ZeRO-1 (optimizer)"), _("ZeRO-2 (+ gradients)"), _("ZeRO-3 / FSDP (+ weights)")]
        table = "\n".join(f"{ljust(name, 27)}{m.total / 1e9:6.2f} GB" for name, m in zip(names, memory))
        return _Text("\n".join(shown) + f"\n{verdict}\n\n" + _(
            "source model, {millions:.0f} M weights:\n"
            "each step, each rank sends {megabytes:,.0f} MB (ring all-reduce)\n"
            "held per rank (weights, gradients, Adam):").format(millions=parameters / 1e6, megabytes=sent / 1e6)
            + f"\n{table}")
    return explorer([slider("world_size", 2, 1, 16), slider("batch", 64, 1, 256)], render,
                    _("Before you move world_size from 2 to 8: does the bytes each rank sends per step go up, down, "
                      "or stay? And what does a rank hold under FSDP?"))


# ---------------------------------------------------------------------------------------------------
# Notebook 12: choosing the next token.

def sampling_explorer(model, vocab, text: str = "三百零五") -> Explorer:
    """Notebook 12: the trained GPT's next-token distribution after ``<text> <sep>``, as bars, beside what
    temperature, top-k and top-p leave to sample from (renormalised); the entropy of both."""
    with torch.no_grad():
        logits = model.eval()(torch.tensor([prompt_ids(text, vocab)]))[0, -1]  # [V]: the first English word
    model_probs = logits.softmax(-1)  # [V]
    vocab_size = logits.size(-1)

    def entropy(p: torch.Tensor) -> float:
        return float(-(p[p > 0] * p[p > 0].log()).sum()) + 0.0  # + 0.0: a one-token -0.0 prints as 0.000

    def render(temperature, top_k, top_p):
        kept = next_token_probs(logits, temperature, top_k, top_p)  # [V], what sample_next draws from
        survivors = [(vocab.itos[i], float(kept[i])) for i in kept.argsort(descending=True, stable=True).tolist()
                     if kept[i] > 0]
        summary = _Text(_("prompt: {text} <sep>\n"
                          "entropy, model:        {model_entropy:.3f} nats\n"
                          "entropy, sampled from: {kept_entropy:.3f} nats\n"
                          "tokens left: {left} of {vocab_size}").format(
            text=text, model_entropy=entropy(model_probs), kept_entropy=entropy(kept), left=len(survivors),
            vocab_size=vocab_size))
        # the five likeliest as a table of two rows, not padded text: a Chinese token is not exactly two columns
        # wide in the browser's font, and two rows keep the slide on the screen
        more = [_("... {count} more").format(count=len(survivors) - 5)] if len(survivors) > 5 else []
        top = Table((_("token"), *(word for word, _p in survivors[:5]), *more),
                    [(_("probability"), *(f"{p:.3f}" for _word, p in survivors[:5]))])
        return viz.next_token_figure(model_probs, kept, vocab.itos, layout=None), summary, top

    temperature = widgets.FloatSlider(value=1.0, min=0.0, max=8.0, step=0.25, description="temperature",
                                      continuous_update=False, style={"description_width": "initial"},
                                      layout=widgets.Layout(width=CONTROLS_WIDTH))
    top_p = widgets.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top_p",
                                continuous_update=False, style={"description_width": "initial"},
                                layout=widgets.Layout(width=CONTROLS_WIDTH))
    return explorer([temperature, slider("top_k", vocab_size, 1, vocab_size), top_p], render,
                    _("Before you raise the temperature from 1 to 4: does the entropy go up or down, and does "
                      "top_p = 0.9 then keep more tokens or fewer?"))


# ---------------------------------------------------------------------------------------------------
# Notebook 18: the modern block.

MODERN_BLOCK_STEPS = {  # the feed-forward's named steps for each activation, after layer 0's K
    "relu": ("k_transpose", "ffn_hidden", "ffn_out"),
    "gelu_tanh": ("k_transpose", "ffn_activated", "ffn_out"),
    "swiglu": ("k_transpose", "ffn_gate", "ffn_up", "ffn_activated", "ffn_out"),
}
ACTIVATION_LABELS = ("ReLU", "GELU", "SwiGLU")  # the buttons' names for MODERN_BLOCK_STEPS' activations, in order


def modern_block_config(norm: str = "layer", activation: str = "relu", positions: str = "learned",
                        rope_base: float = 10000.0, kv_heads: int | None = None, tied: bool = False) -> GPTConfig:
    """A GPT at the source articles' sizes (D = 512, H = 8, d_ff = 2048, N = 6, V = 30000) with the modern block's
    choices: the norm, the feed-forward's activation, the positions (and RoPE's base), K/V heads, tying."""
    return GPTConfig(vocab_size=BASE.tgt_vocab_size, d_model=BASE.d_model, num_heads=BASE.num_heads,
                     num_kv_heads=kv_heads, d_ff=BASE.d_ff, num_layers=BASE.num_layers, max_len=BASE.max_len,
                     dropout=0.0, norm=norm, activation=activation, positions=positions, rope_base=rope_base,
                     share_embeddings=tied)


def modern_block_explorer() -> Explorer:
    """Notebook 18: the source articles' GPT with today's block, one choice at a time (RMSNorm, SwiGLU, RoPE and
    its base, grouped K/V heads, tied embeddings): layer 0's traced shapes, the parameters, the forward's FLOPs
    and the KV cache, beside the same numbers for the block as the source articles built it."""
    batch, length = SIZES["batch"], GPT_LENGTH

    def render(norm, activation, positions, rope_base, kv_heads, tied):
        cfg = modern_block_config(norm, activation, positions, float(rope_base), kv_heads, tied)
        costs, base = modern_block_costs(cfg, batch, length), modern_block_costs(modern_block_config(), batch, length)
        steps = MODERN_BLOCK_STEPS[activation]
        layer_0 = trace_shapes(dataclasses.replace(cfg, num_layers=1), batch, length=length)  # every layer alike
        table = shape_table(layer_0, within="decoder.layers.0", steps=steps, summarise_layers=False,
                            highlight=steps[1:-1])
        wavelength = (_("{tokens:,.0f} tokens").format(tokens=costs["rope_wavelength"]) if positions == "rope"
                      else _("no rotation (positions = learned)"))
        summary = _Text(_("parameters   {parameters:,}  (source block: {base_parameters:,})\n"
                          "forward matmul FLOPs, [{batch}, {length}] ids   {gflops:,.1f} G  (source block: "
                          "{base_gflops:,.1f} G)\n"
                          "KV cache, {batch}·{length} tokens   {kv:,} bytes  (source block: {base_kv:,})\n"
                          "RoPE's slowest pair turns once every   {wavelength}").format(
            parameters=costs["parameters"], base_parameters=base["parameters"], batch=batch, length=length,
            gflops=costs["flops"] / 1e9, base_gflops=base["flops"] / 1e9, kv=costs["kv_cache_bytes"],
            base_kv=base["kv_cache_bytes"], wavelength=wavelength))
        return table, summary

    def toggles(name: str, options: Sequence, value) -> widgets.ToggleButtons:
        """Buttons that show each option by its label and give ``render`` its value (the GPTConfig option)."""
        return widgets.ToggleButtons(options=options, value=value, description=name,  # labels whole, never "Lay…"
                                     style={"description_width": "initial", "button_width": "auto"})

    tied = widgets.Checkbox(value=False, description="tied", indent=False, layout=widgets.Layout(width=CONTROLS_WIDTH))
    return explorer([toggles("norm", (("LayerNorm", "layer"), ("RMSNorm", "rms")), "layer"),
                     toggles("activation", tuple(zip(ACTIVATION_LABELS, MODERN_BLOCK_STEPS)), "relu"),
                     toggles("positions", ((pgettext("option", "learned"), "learned"), ("RoPE", "rope")), "learned"),
                     toggles("rope_base", (10000, 500000), 10000),
                     slider("kv_heads", BASE.num_heads, 1, BASE.num_heads), tied], render,
                    _("Before you switch activation to SwiGLU: which rows appear in layer 0's feed-forward, and by "
                      "how much do the parameters grow? Then move kv_heads from 8 to 2: what shrinks, what stays?"))


# ---------------------------------------------------------------------------------------------------
# Notebook 16: text to ids.

EXPLORER_CHARACTERS = 200  # a longer paste is cut here: a slide shows that many tokens at most


def bpe_explorer(tokenizer: BPETokenizer | None = None, phrase: str = "早上好 good morning") -> Explorer:
    """Notebook 16: type a phrase, choose a vocabulary size; see its tokens, their ids and how many there are.

    ``tokenizer``: the largest vocabulary (the corpus's 30000 by default, trained once per process); each
    smaller size is its first merges, made once and kept, so a move costs one encode.
    """
    tokenizer = tokenizer or corpus_vocabulary()
    smaller = functools.cache(tokenizer.smaller)
    sizes = [size for size in VOCAB_SIZES if size <= len(tokenizer)]

    def render(phrase, vocabulary):
        if not phrase.strip():
            return _Message(_("type a phrase: Chinese, English, anything (an emoji too)"))
        cut = phrase[:EXPLORER_CHARACTERS]
        ids = smaller(vocabulary).encode(cut)
        tokens = [smaller(vocabulary).vocab[i] for i in ids]
        note = "\n" + _("(the first {count} characters of {total})").format(
            count=EXPLORER_CHARACTERS, total=len(phrase)) if len(cut) < len(phrase) else ""
        summary = _Text(_("V = {size}: {characters} characters, {bytes} UTF-8 bytes -> L = {length} tokens").format(
            size=vocabulary, characters=len(cut), bytes=len(cut.encode("utf-8", errors="replace")),
            length=len(ids)) + note)
        return summary, _TokenBoxes(tokens, ids)

    typed = widgets.Text(value=phrase, description="phrase", continuous_update=True,
                         style={"description_width": "initial"}, layout=widgets.Layout(width=TEXT_BOX_WIDTH))
    vocabulary = widgets.SelectionSlider(options=sizes, value=sizes[-1], description="vocabulary",
                                         continuous_update=False, style={"description_width": "initial"},
                                         layout=widgets.Layout(width=CONTROLS_WIDTH))
    return explorer([typed, vocabulary], render,
                    _("Type any phrase; each box is a token, its id under it (␣ is a space). Before you slide the "
                      "vocabulary down to 259: how many tokens will 早上好 be, and good morning?"),
                    controls_on_top=True)


class _TokenBoxes:
    """A phrase's tokens as boxes, each with its id under it; a space shows as ␣, half a character as \\xe6."""

    def __init__(self, tokens: list[bytes], ids: list[int]):
        self.tokens, self.ids = tokens, ids

    def shown(self, token: bytes) -> str:
        return token.decode("utf-8", errors="backslashreplace").replace(" ", "␣")

    def __repr__(self) -> str:
        return " | ".join(f"{self.shown(t)} {i}" for t, i in zip(self.tokens, self.ids))

    def _repr_html_(self) -> str:
        boxes = "".join(
            "<span style='display:inline-block;margin:2px;padding:2px 6px;border:1px solid #888;border-radius:4px;"
            f"text-align:center'><code>{html.escape(self.shown(t))}</code><br><small>{i}</small></span>"
            for t, i in zip(self.tokens, self.ids))
        return f"<div style='max-width:800px'>{boxes}</div>"


def every_explorer(trainer=None) -> dict[str, Callable[[], Explorer]]:
    """Each explorer of the series by name, ready to make as its notebook makes it: 07's with ``trainer`` (a small
    untrained numeral trainer when None), 12's and 17's with the shipped models. An explorer added later that needs
    other arguments is an error here, so whatever walks them all (the i18n test, the benchmark) cannot miss it."""
    from ..tasks.checkpoints import load_checkpoint, shipped_file
    from ..tasks.numerals import Trainer
    from ..tasks.training import TrainSettings

    def gpt() -> tuple:
        loaded = load_checkpoint(shipped_file("checkpoints", "gpt_numerals.pt"))
        return loaded.model, loaded.vocab

    models = {
        "trainer": lambda: (trainer or Trainer(TrainSettings(d_model=16, d_ff=32, num_layers=1, steps=2)),),
        "model, vocab": gpt,
        "translator": lambda: (load_checkpoint(shipped_file("checkpoints", "tatoeba.pt")),),
    }
    made = {}
    for name, make in sorted(globals().items()):
        if not name.endswith("_explorer") or name.startswith("_") or name == "every_explorer" or not callable(make):
            continue
        needs = ", ".join(p.name for p in inspect.signature(make).parameters.values() if p.default is p.empty)
        if needs and needs not in models:
            raise ValueError(f"{name} needs {needs}: give it arguments in widgets.every_explorer()")
        made[name] = functools.partial(lambda make, needs: make(*models[needs]()) if needs else make(), make, needs)
    return made

"""Sliders that re-run the real model (on the meta device) and redraw: one explorer per notebook.

Every explorer shows a bad combination as a message in place of its output, never a traceback.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from . import viz
from .config import ModelConfig
from .cost import encoder_layer_costs, format_costs
from .data import MAX_NUMBER, chinese_numeral, english_words
from .masks import causal_mask, padding_mask
from .model import Transformer
from .trace import ShapeTable, shape_map, trace_shapes
from .train import cross_attention_map


def _slider(name: str, value: int, low: int, high: int, step: int = 1) -> widgets.IntSlider:
    return widgets.IntSlider(value=value, min=low, max=high, step=step, description=name,
                             continuous_update=False, style={"description_width": "initial"})


def explorer(controls: list[widgets.Widget], render: Callable[..., object]) -> widgets.VBox:
    """Controls above an output area; ``render(**values)`` runs on every change and what it returns
    (one object or a tuple) replaces the output. Errors from bad combinations become a one-line message.

    The output is set directly rather than captured with ``with out:``, so it works the same in a
    kernel, in Voilà and in a plain test.
    """
    out = widgets.Output()

    def update(_change=None):
        values = {w.description: w.value for w in controls}
        try:
            result = render(**values)
            parts = result if isinstance(result, tuple) else (result,)
        except Exception as err:  # a widget must never show a traceback
            parts = (_Message(str(err)),)
        out.outputs = tuple(_output(part) for part in parts)

    for w in controls:
        w.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox(controls[:4]), widgets.HBox(controls[4:]), out])


def _config(d_model=512, heads=8, d_ff=2048, layers=6, vocab=30000, max_len=5000) -> ModelConfig:
    return ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, num_heads=heads,
                       d_ff=d_ff, num_layers=layers, max_len=max_len)


def shape_explorer() -> widgets.VBox:
    """Notebook 00: every step's shape for any sizes (layer 0 in full, repeats summarised)."""
    def render(batch, src_len, tgt_len, d_model, heads, d_ff, layers, vocab):
        return shape_map(_config(d_model, heads, d_ff, layers, vocab), batch, src_len, tgt_len)
    return explorer([_slider("batch", 32, 1, 128), _slider("src_len", 10, 1, 64), _slider("tgt_len", 4, 1, 64),
                     _slider("d_model", 512, 16, 1024, 16), _slider("heads", 8, 1, 16),
                     _slider("d_ff", 2048, 16, 4096, 16), _slider("layers", 6, 1, 12),
                     _slider("vocab", 30000, 10, 50000, 10)], render)


def pe_explorer() -> widgets.VBox:
    """Notebook 01: the positional-encoding table for a chosen length and d_model."""
    def render(length, d_model):
        return viz.pe_figure(length, d_model)
    return explorer([_slider("length", 50, 2, 200), _slider("d_model", 128, 4, 512, 4)], render)


def split_explorer() -> widgets.VBox:
    """Notebook 02: the encoder self-attention chain, projection -> split -> scores -> merge."""
    def render(batch, src_len, d_model, heads):
        rows = trace_shapes(_config(d_model, heads, layers=1), batch, src_len, 1)
        return ShapeTable([r for r in rows if r.where == "encoder.layers.0.self_attn"], highlight=("view", "transpose"))
    return explorer([_slider("batch", 32, 1, 64), _slider("src_len", 10, 1, 32),
                     _slider("d_model", 512, 16, 1024, 16), _slider("heads", 8, 1, 16)], render)


def mask_explorer() -> widgets.VBox:
    """Notebook 03: a batch of three target sentences; their real lengths and the padded length."""
    def render(tgt_len, len_1, len_2, len_3):
        lengths = (len_1, len_2, len_3)
        if max(lengths) > tgt_len:
            raise ValueError(f"a sentence of {max(lengths)} tokens does not fit in tgt_len={tgt_len}: "
                             f"raise tgt_len or shorten the sentence")
        ids = torch.tensor([[1] * n + [0] * (tgt_len - n) for n in lengths])  # [3, L]; 0 = <pad>
        combined = padding_mask(ids, 0) & causal_mask(tgt_len)  # [3, 1, L, L]
        tokens = [f"t{i}" for i in range(tgt_len)]
        return viz.mask_figure({f"sentence {b + 1} (length {n})": combined[b, 0] for b, n in enumerate(lengths)},
                               tokens)
    return explorer([_slider("tgt_len", 5, 1, 10), _slider("len_1", 5, 1, 10), _slider("len_2", 3, 1, 10),
                     _slider("len_3", 1, 1, 10)], render)


def cross_explorer() -> widgets.VBox:
    """Notebook 04: cross-attention's rectangle [L_tgt, L_src] from a small untrained model, and its shapes."""
    def render(src_len, tgt_len):
        torch.manual_seed(0)
        cfg = ModelConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=32, num_heads=4, d_ff=64, num_layers=1,
                          dropout=0.0)
        model = Transformer(cfg).eval()
        src, tgt = torch.randint(4, 50, (1, src_len)), torch.randint(4, 50, (1, tgt_len))
        with torch.no_grad():
            model(src, tgt)
        weights = model.decoder.layers[0].cross_attn.attn_weights[0, 0]  # [L_tgt, L_src]
        rows = trace_shapes(_config(layers=1), 32, src_len, tgt_len)
        table = ShapeTable([r for r in rows if r.where == "decoder.layers.0.cross_attn"], highlight=("scores",))
        figure = viz.heatmap(weights, [f"y{i}" for i in range(tgt_len)], [f"x{j}" for j in range(src_len)],
                             title=f"head 0: [L_tgt, L_src] = [{tgt_len}, {src_len}]", cmap="Blues",
                             xlabel="source position (key)", ylabel="target position (query)")
        return table, figure
    return explorer([_slider("src_len", 10, 1, 20), _slider("tgt_len", 4, 1, 20)], render)


def ffn_explorer() -> widgets.VBox:
    """Notebook 05: the FFN's shapes and one encoder layer's parameter/FLOP table."""
    def render(d_model, d_ff, src_len):
        cfg = _config(d_model, d_ff=d_ff, layers=1)  # d_model moves in steps of 16, so 8 heads always fit
        rows = trace_shapes(cfg, 32, src_len, 1)
        table = ShapeTable([r for r in rows if r.where.startswith("encoder.layers.0.feed_forward")])
        return table, _Text(format_costs(encoder_layer_costs(cfg, 32, src_len)))
    return explorer([_slider("d_model", 512, 16, 1024, 16), _slider("d_ff", 2048, 16, 8192, 16),
                     _slider("src_len", 10, 1, 512)], render)


def head_explorer() -> widgets.VBox:
    """Notebook 06: the output head and the loss's shapes for any batch, target length and vocabulary."""
    def render(batch, tgt_len, vocab):
        rows = trace_shapes(_config(layers=1, vocab=vocab), batch, 10, tgt_len)
        return ShapeTable([r for r in rows
                           if r.where in ("generator", "decoder") or r.step.startswith(("labels", "logits"))])
    return explorer([_slider("batch", 32, 1, 128), _slider("tgt_len", 4, 1, 32),
                     _slider("vocab", 30000, 10, 50000, 10)], render)


def _output(part) -> dict:
    """One object as a notebook display output: PNG for a figure, HTML and text for the rest."""
    data = {"text/plain": repr(part)}
    if isinstance(part, Figure):
        buffer = io.BytesIO()
        part.savefig(buffer, format="png", dpi=90)
        data["image/png"] = base64.b64encode(buffer.getvalue()).decode()
    elif hasattr(part, "_repr_html_"):
        data["text/html"] = part._repr_html_()
    return {"output_type": "display_data", "data": data, "metadata": {}}


def translation_explorer(trainer) -> widgets.VBox:
    """Notebook 07: type a number; see its Chinese numeral, the trained model's English, and where it looked."""
    def render(number):
        zh = chinese_numeral(number)
        guess, truth = trainer.translate([zh])[0], english_words(number)
        verdict = "✓ correct" if guess == truth else f"✗ expected: {truth}"
        summary = _Text(f"{number:,}   {zh}\nmodel:  {guess}\n{verdict}")
        weights, predicted, source = cross_attention_map(trainer, zh, guess)
        figure = viz.heatmap(weights, predicted, source, cmap="Blues", xlabel="source", ylabel="predicting",
                             title="last decoder layer's cross-attention, averaged over heads")
        return summary, figure
    number = widgets.BoundedIntText(value=3_056_070, min=0, max=MAX_NUMBER, description="number",
                                    style={"description_width": "initial"})
    return explorer([number], render)


class _Text:
    """Plain text that keeps its line breaks in a notebook."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.text)}</pre>"


class _Message(_Text):
    """Why the sizes chosen cannot work, shown in place of the output."""

    def __repr__(self) -> str:
        return f"⚠ {self.text}"

    def _repr_html_(self) -> str:
        return f"<p class='wt-message' style='color:#b00020;font-weight:bold'>⚠ {html.escape(self.text)}</p>"

"""Every named step the model reports to a trace: one table, one home for each step's label, dims and meaning.

Model code refers to a step by its id (``record("scores", scores)``); traced rows carry the step's
readable label (``Row.step == "scores Q·Kᵀ/√d_k"``), its named dims and its meaning. To look a step up:

    wt.STEPS["scores"].label            # 'scores Q·Kᵀ/√d_k'
    wt.STEPS["scores"].dims             # 'B H L_q L_k'  (an unknown id is a KeyError that lists the ids)
    wt.by_step(rows)["decoder.layers.0.cross_attn", "scores"]   # a traced row, by module path and step id

Dims use the general names (``H_kv`` for K/V heads, ``L_tgt`` for the decoder's length); a model class may
rename them for its own trace with a ``dim_names`` mapping (the encoder-decoder has one K/V head per
query head, so its ``H_kv`` reads ``H``; a GPT's ``L_tgt`` reads ``L``). Labels and meanings are written in
English here, marked ``N_`` so the catalog carries their translations; rows keep the English (code and tests
find steps by it) and a table shows them through ``_`` in the language ``wt.set_language`` chose.
"""

from __future__ import annotations

from dataclasses import dataclass

from .i18n import N_, _


@dataclass(frozen=True)
class Step:
    """One named step: ``id`` (what code writes), ``label`` (what a table shows), named ``dims``, ``meaning``."""

    id: str
    label: str
    dims: str
    meaning: str


_TABLE = (
    # embedding (notebook 01)
    Step("ids", N_("ids"), "B L", N_("token ids, one row per sentence")),
    Step("embedding", N_("embedding"), "B L D", N_("each id looked up in the [V, D] table, times sqrt(D)")),
    Step("embedding_unscaled", N_("embedding, not scaled"), "B L D",
         N_("each id looked up in the [V, D] table, as it is (GPT-2, Llama)")),
    Step("positions", N_("+ positional encoding"), "B L D", N_("plus the fixed PE row of each position: same shape")),
    Step("learned_positions", N_("+ learned positions"), "B L D",
         N_("plus the learned row of each position (GPT-2's): same shape")),
    # masks (notebook 03)
    Step("padding_mask", N_("padding mask"), "B 1 1 L_k", N_("True = a real token (may be attended to)")),
    Step("causal_mask", N_("causal mask"), "L_q L_k", N_("True on and below the diagonal: no peeking ahead")),
    Step("self_mask", N_("target self-attention mask"), "B 1 L_q L_k",
         N_("a real key AND not in the future (a cached step asks with its newest rows only)")),
    # attention (notebooks 02-04, 08, 09), in the order it runs
    Step("q", N_("Q = X·W_q"), "B L_q D", N_("queries, one D×D projection for all heads")),
    Step("k", N_("K = X·W_k"), "B L_k H_kv·d_k", N_("keys")),
    Step("v", N_("V = X·W_v"), "B L_k H_kv·d_k", N_("values")),
    Step("q_view", N_("Q view"), "B L H d_k", N_("the features cut into H heads of d_k")),
    Step("k_view", N_("K view"), "B L H_kv d_k", N_("the features cut into heads of d_k, one per K/V head")),
    Step("v_view", N_("V view"), "B L H_kv d_k", N_("the features cut into heads of d_k, one per K/V head")),
    Step("q_transpose", N_("Q transpose"), "B H L d_k", N_("heads moved next to batch: one matmul for all")),
    Step("k_transpose", N_("K transpose"), "B H_kv L d_k", N_("heads moved next to batch: one matmul for all")),
    Step("v_transpose", N_("V transpose"), "B H_kv L d_k", N_("heads moved next to batch: one matmul for all")),
    Step("q_rotated", N_("Q rotated (RoPE)"), "B H L_q d_k", N_("each pair of features turned by its position")),
    Step("k_rotated", N_("K rotated (RoPE)"), "B H_kv L_k d_k", N_("keys turned the same way: scores see distance")),
    Step("k_cached", N_("K in the cache"), "B H_kv L_k d_k",
         N_("every key so far (self) or the memory's keys (cross)")),
    Step("k_grouped", N_("K shared by a group"), "B H L_k d_k",
         N_("each K/V head repeated for its group of query heads")),
    Step("v_grouped", N_("V shared by a group"), "B H L_k d_k",
         N_("each K/V head repeated for its group of query heads")),
    Step("scores", N_("scores Q·Kᵀ/√d_k"), "B H L_q L_k", N_("how well each query matches each key")),
    Step("weights", N_("attention weights"), "B H L_q L_k", N_("softmax over keys: each row sums to 1")),
    Step("context", N_("context = weights·V"), "B H L_q d_k", N_("per head, a weighted mix of value vectors")),
    Step("context_transpose", N_("context transpose"), "B L H d_k", N_("heads back beside each other, per token")),
    Step("merged", N_("heads merged"), "B L D", N_("H heads of d_k concatenated back to D")),
    Step("output", N_("output W_o"), "B L_q D", N_("mixes the heads' results back into D features")),
    # the other sublayers (notebook 05)
    Step("ffn_hidden", N_("FFN hidden, ReLU"), "B L d_ff", N_("each token widened to d_ff features")),
    Step("ffn_gate", N_("FFN gate, SiLU(X·W_1)"), "B L d_ff", N_("SwiGLU: how much of each hidden feature passes")),
    Step("ffn_up", N_("FFN up, X·W_up"), "B L d_ff", N_("SwiGLU: the hidden features the gate scales")),
    Step("ffn_activated", N_("FFN hidden, activated"), "B L d_ff",
         N_("each token widened to d_ff features, through GELU, SiLU or SwiGLU's gate")),
    Step("ffn_out", N_("FFN out"), "B L D", N_("back to D features")),
    Step("add_norm", N_("Add & Norm"), "B L D", N_("residual sum, then LayerNorm over each token's D")),
    Step("add_rms_norm", N_("Add & RMSNorm"), "B L D", N_("residual sum, then RMSNorm over each token's D")),
    Step("pre_norm", N_("LayerNorm, sublayer, Add"), "B L D", N_("pre-norm: the residual path is left untouched")),
    Step("pre_rms_norm", N_("RMSNorm, sublayer, Add"), "B L D", N_("pre-norm: the residual path is left untouched")),
    # stacks, head and loss (notebooks 06, 07)
    Step("memory", N_("memory (final LayerNorm)"), "B L_src D", N_("the encoder output, read by each decoder layer")),
    Step("memory_rms_norm", N_("memory (final RMSNorm)"), "B L_src D",
         N_("the encoder output, read by each decoder layer")),
    Step("memory_no_norm", N_("memory (no final norm)"), "B L_src D",
         N_("the encoder output as its last layer left it (Marian's)")),
    Step("decoder_output", N_("decoder output (final LayerNorm)"), "B L_tgt D", N_("one D-vector per position")),
    Step("decoder_output_rms_norm", N_("decoder output (final RMSNorm)"), "B L_tgt D", N_("one D-vector per position")),
    Step("decoder_output_no_norm", N_("decoder output (no final norm)"), "B L_tgt D",
         N_("one D-vector per position, as the last layer left it (Marian's)")),
    Step("logits", N_("logits"), "B L_tgt V", N_("a score for every vocabulary word at every position")),
    Step("labels", N_("labels"), "B L_tgt", N_("the next token's id at each position (not one-hot)")),
    Step("logits_flat", N_("logits flattened"), "B·L_tgt V", N_("one row per predicted token, for the loss")),
    Step("labels_flat", N_("labels flattened"), "B·L_tgt", N_("one class id per row; PAD rows ignored")),
)
# The names of a model with one K/V head per query head (no grouped-query attention): H_kv is H.
DIMS_WITHOUT_GQA = {"H_kv": "H", "H_kv·d_k": "D"}

class _StepTable(dict):
    """Steps by id; an unknown id is a KeyError that lists the ids."""

    def __missing__(self, step_id):
        raise KeyError(_("no step {step_id!r}; the steps are {steps} (each one's label, dims and meaning: "
                       "wt.STEPS[id])").format(step_id=step_id, steps=', '.join(self)))


STEPS: dict[str, Step] = _StepTable((s.id, s) for s in _TABLE)
_BY_LABEL: dict[str, Step] = {s.label: s for s in _TABLE}
assert len(STEPS) == len(_BY_LABEL) == len(_TABLE), "step ids and labels are each unique"


class StepRows(dict):
    """Traced rows keyed by (module path, step label); a key may name the step by its id instead."""

    def __missing__(self, key):
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str)):
            raise KeyError(key)
        where, name = key
        known = STEPS.get(name) or _BY_LABEL.get(name)
        if known is not None and dict.__contains__(self, (where, known.label)):
            return dict.__getitem__(self, (where, known.label))
        if known is None and not any(k[1] == name for k in self):
            STEPS[name]  # neither a step of the table nor an op in these rows: say which steps exist
        label = name if known is None else known.label
        paths = sorted({k[0] for k in self if k[1] == label})
        raise KeyError(_("{label!r} was not traced in {where!r}; it was traced in: {paths}").format(
            label=label, where=where, paths=paths or 'no module'))

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self.get(key) is not None

"""Notebook 15's whole-model check: it accepts the solution printed in docs/solutions.md (taken from that file, not
copied here), says "not yet" to the notebook's own stubs, and names the first block that differs for the typical
slips, each made here by changing one piece of that solution."""

import copy
import linecache
import re
from pathlib import Path

import nbformat
import pytest
import torch

import walkthrough as wt
from walkthrough.classroom import model_check
from walkthrough.classroom.model_check import ROOT as MODEL

REPO = Path(__file__).resolve().parents[1]
SOLUTION = re.search(r"^## 15\n\n```python\n(.*?)^```", (REPO / "docs" / "solutions.md").read_text(), re.S | re.M)[1]
NOTEBOOK = REPO / "notebooks" / "15_write_it_yourself.ipynb"


def solution() -> dict:
    """The namespace of the docs' solution, without its final check (each test runs its own)."""
    code, check = SOLUTION.rsplit("assert wt.check_model(Transformer)", 1)
    assert not check.strip()
    namespace = {"__name__": "solution_15"}
    linecache.cache["solutions.md#15"] = (len(code), None, code.splitlines(True), "solutions.md#15")  # as IPython
    exec(compile(code, "solutions.md#15", "exec"), namespace)  # does for a cell: inspect can read its source
    return namespace


def verdict(namespace: dict, capsys) -> model_check.ModelVerdict:
    result = wt.check_model(namespace["Transformer"])
    assert capsys.readouterr().out.strip() == result.message
    return result


def test_the_solution_in_the_docs_passes(capsys):
    result = verdict(solution(), capsys)
    assert result and result.block is None
    assert result.message.startswith("✓ model: right.") and "greedy translations" in result.message


def test_the_notebooks_stubs_are_not_yet_and_the_first_to_write_is_named(capsys):
    """The committed notebook's own cells (the stubs), run as a student who has written nothing yet."""
    cells = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    stubs = [source for source in cells if "raise NotImplementedError" in source]
    assert len(stubs) >= 10
    namespace = {}
    exec("import math\nimport torch\nfrom torch import nn\n" + "\n\n".join(stubs), namespace)
    result = verdict(namespace, capsys)
    assert not result and result.block == "src_embed"
    first_line, progress = result.message.splitlines()
    assert first_line == "… model: not yet: Embedding.forward is still a stub: write it, then run this cell again."
    words = progress.split()
    assert words[0] == "blocks:" and set(words[2::2]) == {"…"}
    assert set(words[1::2]) == {"Embedding", "MultiHeadAttention", "AddNorm", "FeedForward", "EncoderLayer",
                                "Encoder", "DecoderLayer", "Decoder", "OutputHead", "Transformer"}
    committed = [o.text for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"
                 and "wt.check_model(Transformer)" in c.source for o in c.outputs]
    assert committed == [result.message + "\n"], "the notebook shows the 'not yet' message of its own stubs"


def test_a_stub_inside_a_written_block_is_named(capsys):
    namespace = solution()

    def sinusoidal_table(max_len, d_model):
        raise NotImplementedError

    namespace["sinusoidal_table"] = sinusoidal_table
    result = verdict(namespace, capsys)
    assert not result and result.block == "src_embed"
    assert result.message.startswith("… model: not yet: test_a_stub_inside_a_written_block_is_named.<locals>."
                                     "sinusoidal_table is still a stub")


def test_pre_norm_is_named_at_the_first_layer(capsys):
    namespace = solution()

    class PreNormEncoderLayer(namespace["EncoderLayer"]):
        def forward(self, x, src_mask):
            h = self.self_attn_norm.norm(x)
            x = x + self.self_attn(h, h, h, src_mask)
            return x + self.feed_forward(self.ffn_norm.norm(x))

    namespace["EncoderLayer"] = PreNormEncoderLayer
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0"
    assert "the first block that differs is encoder.layers.0 (your PreNormEncoderLayer)" in result.message
    assert "It matches pre-norm" in result.message
    assert "PreNormEncoderLayer ✗" in result.message and "Encoder …" in result.message


def test_a_missing_sqrt_d_model_is_named_at_the_embedding(capsys):
    namespace = solution()

    class UnscaledEmbedding(namespace["Embedding"]):
        def forward(self, ids):
            return self.token(ids) + namespace["sinusoidal_table"](ids.size(1), self.d_model)

    namespace["Embedding"] = UnscaledEmbedding
    result = verdict(namespace, capsys)
    assert not result and result.block == "src_embed"
    assert "It matches the token vectors without the scale: multiply them by √d_model" in result.message


def test_an_inverted_mask_in_attention_is_named_at_the_first_attention(capsys):
    namespace = solution()
    attention = namespace["attention"]
    namespace["attention"] = lambda q, k, v, mask: attention(q, k, v, ~mask)  # keeps where True = blocked
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0.self_attn"
    assert "It matches the mask inverted: here True = may attend" in result.message


def test_an_inverted_padding_mask_is_named_in_the_models_own_code(capsys):
    namespace = solution()
    padding_mask = namespace["padding_mask"]
    namespace["padding_mask"] = lambda ids, pad_id: ~padding_mask(ids, pad_id)  # True = blocked, as nn.MHA's
    result = verdict(namespace, capsys)
    assert not result and result.block == MODEL
    assert "the `src_mask` it passes to encoder differs" in result.message
    assert "It is the package's mask inverted" in result.message


def test_a_decoder_mask_without_its_causal_part_is_named(capsys):
    namespace = solution()
    namespace["causal_mask"] = lambda length: torch.ones(length, length, dtype=torch.bool)
    result = verdict(namespace, capsys)
    assert not result and result.block == MODEL
    assert "the `tgt_mask` it passes to decoder differs" in result.message and "lacks the causal part" in result.message


def test_a_missing_final_norm_is_named_at_its_stack(capsys):
    namespace = solution()

    class NoFinalNorm(namespace["Decoder"]):
        def forward(self, y, memory, tgt_mask, src_mask):
            for layer in self.layers:
                y = layer(y, memory, tgt_mask, src_mask)
            return y

    namespace["Decoder"] = NoFinalNorm
    result = verdict(namespace, capsys)
    assert not result and result.block == "decoder"
    assert "without the final LayerNorm (decoder.norm)" in result.message


def test_a_crash_is_explained_with_the_line_and_no_traceback(capsys):
    namespace = solution()

    class Crashing(namespace["FeedForward"]):
        def forward(self, x):
            return self.linear2(torch.relu(self.linear1))

    namespace["FeedForward"] = Crashing
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0.feed_forward"
    assert "raised TypeError in test_a_crash_is_explained_with_the_line_and_no_traceback.<locals>.Crashing.forward " \
           "(`return self.linear2(torch.relu(self.linear1))`)" in result.message
    assert "Traceback" not in result.message


def test_an_odd_return_type_is_named(capsys):
    namespace = solution()

    class ReturnsWeightsToo(namespace["MultiHeadAttention"]):
        def forward(self, query, key, value, mask):
            return super().forward(query, key, value, mask), None

    namespace["MultiHeadAttention"] = ReturnsWeightsToo
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0.self_attn"
    assert "it returns a tuple of 2: return the tensor alone" in result.message


def test_a_forgotten_return_is_not_yet(capsys):
    namespace = solution()

    class NoReturn(namespace["AddNorm"]):
        def forward(self, x, sublayer_out):
            self.norm(x + sublayer_out)

    namespace["AddNorm"] = NoReturn
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0.self_attn_norm"
    assert "NoReturn.forward (encoder.layers.0.self_attn_norm) returns None" in result.message


def test_a_model_that_scribbles_on_its_inputs_after_using_them_still_passes(capsys):
    """The check gives the student's model its own copies and records copies of every tensor it sees."""
    namespace = solution()

    class Scribbler(namespace["Transformer"]):
        def forward(self, src, tgt):
            logits = super().forward(src, tgt)
            src.zero_()
            tgt.fill_(3)
            return logits

    class InPlaceAddNorm(namespace["AddNorm"]):
        def forward(self, x, sublayer_out):
            return self.norm(x.add_(sublayer_out))  # changes the previous block's output in place

    namespace["AddNorm"] = InPlaceAddNorm
    result = wt.check_model(Scribbler)
    assert result, result.message
    capsys.readouterr()


def test_attribute_names_that_differ_from_the_packages_are_named(capsys):
    namespace = solution()

    class RenamedFFN(namespace["EncoderLayer"]):
        def __init__(self, d_model, num_heads, d_ff):
            super().__init__(d_model, num_heads, d_ff)
            self.ffn = self.feed_forward
            del self.feed_forward

        def forward(self, x, src_mask):
            x = self.self_attn_norm(x, self.self_attn(x, x, x, src_mask))
            return self.ffn_norm(x, self.ffn(x))

    namespace["EncoderLayer"] = RenamedFFN
    result = verdict(namespace, capsys)
    assert not result and result.block == MODEL
    assert "it has no `encoder.layers.0.feed_forward.linear1.weight` [256, 64]; yours has " \
           "`encoder.layers.0.ffn.linear1.weight` of that shape: rename it" in result.message


def test_the_message_repeats_from_run_to_run(capsys):
    namespace = solution()
    namespace["attention"] = lambda q, k, v, mask: (q @ k.transpose(-2, -1)).softmax(-1) @ v  # no scale, no mask
    first, second = verdict(namespace, capsys), verdict(namespace, capsys)
    assert first.message == second.message and first.block == "encoder.layers.0.self_attn"


def test_every_block_of_the_package_with_weights_is_checked_by_path():
    """The blocks come from the package's model itself: a new block there is checked without a list to update."""
    trained = wt.load_checkpoint(wt.shipped_file("checkpoints", "numerals.pt"))
    namespace = solution()
    mine = namespace["Transformer"](trained.model.cfg)
    with torch.no_grad(), model_check._recording(trained.model) as calls:
        trained.model(torch.tensor([[4, 5, 0]]), torch.tensor([[1, 6]]))
    checked = [path for path, _ in model_check._student_blocks(calls, mine)]
    weighted = {path.rsplit(".", 2)[0] for path, _ in mine.named_parameters()}  # the blocks holding weights
    assert {p for p in weighted if not p.endswith(("norm", "token", "proj", "linear1", "linear2", "w_q", "w_k",
                                                   "w_v", "w_o"))} <= set(checked)
    assert checked[-1] == MODEL and checked.index("encoder.layers.0.self_attn") < checked.index("encoder.layers.0")


def test_block_gaps_find_where_a_change_starts_and_every_block_it_reaches():
    """One bias of decoder layer 1's FFN moved: every block finishing before it agrees, it and all after differ."""
    trained = wt.load_checkpoint(wt.shipped_file("checkpoints", "numerals.pt"))
    changed = copy.deepcopy(trained.model)
    with torch.no_grad():
        changed.decoder.layers[1].feed_forward.linear2.bias[5] += 0.5
    src, tgt = torch.tensor([[4, 5, 6, 0]]), torch.tensor([[1, 6, 7]])
    gaps = wt.block_gaps(trained.model, changed, src, tgt)
    paths, values = list(gaps), list(gaps.values())
    start = paths.index("decoder.layers.1.feed_forward")
    assert paths.index("encoder.layers.0.self_attn") < paths.index("encoder") < start
    assert set(values[:start]) == {0.0} and min(values[start:]) > 0, gaps
    assert paths[-3:] == ["decoder", "output_head", MODEL] and not any(p.endswith(("linear1", "w_q")) for p in paths)


def test_side_by_side():
    namespace = solution()
    pair = wt.side_by_side(wt.MultiHeadAttention.forward, namespace["MultiHeadAttention"].forward)
    assert "def forward(self, query, key, value, mask):" in repr(pair)
    assert "package: MultiHeadAttention.forward" in pair._repr_html_()


@pytest.mark.parametrize("bad,error,words", [
    ("instance", TypeError, "must be your model's class, not a model"),
    (42, TypeError, "make_model must be your Transformer class"),
])
def test_bad_requests_are_refused_clearly(bad, error, words):
    if bad == "instance":
        bad = solution()["Transformer"](wt.load_checkpoint(wt.shipped_file("checkpoints", "numerals.pt")).model.cfg)
    with pytest.raises(error, match=words):
        wt.check_model(bad)


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(ValueError, match="no checkpoint at"):
        wt.check_model(solution()["Transformer"], checkpoint=tmp_path / "none.pt")
    with pytest.raises(TypeError, match="package must be a function or method"):
        wt.side_by_side(3, len)


def test_the_check_leaves_the_global_random_stream_as_it_was(capsys):
    """Loading the checkpoint reseeds and building the model draws: the student's stream must not notice."""
    namespace = solution()
    torch.manual_seed(7)
    wt.check_model(namespace["Transformer"])
    after_check = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(after_check, torch.rand(3))
    capsys.readouterr()


TRAINED = wt.load_checkpoint(wt.shipped_file("checkpoints", "numerals.pt"))  # the notebook's `trained`, for the cheats


def returns_the_trained_model(namespace):
    class Cheat(namespace["Transformer"]):
        def forward(self, src, tgt):
            return TRAINED.model(src, tgt)
    return Cheat


def subclasses_the_package(namespace):
    class Cheat(wt.Transformer):
        pass
    return Cheat


def wraps_the_packages_attention(namespace):
    namespace["MultiHeadAttention"] = lambda d_model, num_heads: wt.MultiHeadAttention(d_model, num_heads)
    return namespace["Transformer"]


def copies_the_trained_model_inside(namespace):
    class Cheat(namespace["Transformer"]):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.hidden = [wt.Transformer(cfg)]  # a list: not a submodule, so not in the weights

        def forward(self, src, tgt):
            self.hidden[0].load_state_dict(self.state_dict())
            return self.hidden[0].eval()(src, tgt)
    return Cheat


def returns_logits_computed_before(namespace):
    import walkthrough.classroom.model_check as check
    trainer = TRAINED
    batch = wt.make_batch(wt.held_out_pairs(check.PAIRS), trainer.src_vocab, trainer.tgt_vocab)
    with torch.no_grad():
        answers = {batch.tgt_in.size(1): trainer.model(batch.src, batch.tgt_in)}

    class Cheat(namespace["Transformer"]):
        def forward(self, src, tgt):
            if tgt.size(1) in answers:
                return answers[tgt.size(1)].clone()
            return super().forward(src, tgt)
    return Cheat


def runs_the_trained_model_in_a_thread(namespace):
    import threading

    class Cheat(namespace["Transformer"]):
        def forward(self, src, tgt):
            found = []
            worker = threading.Thread(target=lambda: found.append(TRAINED.model(src, tgt).detach()))
            worker.start()
            worker.join()
            return found[0]
    return Cheat


def switches_the_watch_off(namespace):
    import sys

    class Cheat(namespace["Transformer"]):
        def forward(self, src, tgt):
            sys.setprofile(None)
            return TRAINED.model(src, tgt)
    return Cheat


@pytest.mark.parametrize("cheat", [returns_the_trained_model, subclasses_the_package, wraps_the_packages_attention,
                                   copies_the_trained_model_inside, returns_logits_computed_before,
                                   runs_the_trained_model_in_a_thread, switches_the_watch_off])
def test_a_model_that_is_not_the_students_own_does_not_pass(cheat, capsys):
    namespace = solution()
    result = wt.check_model(cheat(namespace))
    capsys.readouterr()
    assert not result and result.block == MODEL, result.message
    assert result.message.startswith("✗ model: not your model"), result.message
    if cheat is runs_the_trained_model_in_a_thread:  # seen running, not only found out by its idle blocks
        assert "ran the package's own Transformer.forward (transformer.py)" in result.message, result.message


def test_the_packages_own_transformer_does_not_pass(capsys):
    result = wt.check_model(wt.Transformer)
    capsys.readouterr()
    assert not result and result.message.startswith("✗ model: not your model"), result.message
    assert "Transformer.__init__" in result.message


def test_masks_taken_in_another_order_are_given_by_name_so_the_real_slip_is_named(capsys):
    """DecoderLayer.forward(y, memory, src_mask, tgt_mask), used consistently, is right: the head is wrong."""
    namespace = solution()

    class OtherOrder(namespace["DecoderLayer"]):
        def forward(self, y, memory, src_mask, tgt_mask):
            return super().forward(y, memory, tgt_mask, src_mask)

    class CallsItSo(namespace["Decoder"]):
        def forward(self, y, memory, tgt_mask, src_mask):
            for layer in self.layers:
                y = layer(y, memory, src_mask, tgt_mask)
            return self.norm(y)

    class SoftmaxHead(namespace["OutputHead"]):
        def forward(self, h):
            return self.proj(h).softmax(-1)

    namespace |= {"DecoderLayer": OtherOrder, "Decoder": CallsItSo, "OutputHead": SoftmaxHead}
    result = verdict(namespace, capsys)
    assert not result and result.block == "output_head", result.message
    assert "It matches softmax(logits)" in result.message


def test_ctrl_c_stops_a_model_that_never_returns_and_leaves_everything_as_it_was(capsys):
    import signal
    import sys
    import threading

    namespace = solution()

    class Sleeper(namespace["Transformer"]):
        def forward(self, src, tgt):
            import time
            time.sleep(120)

    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    main = threading.main_thread().ident
    timer = threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT))  # what Ctrl-C (or ■) sends
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel (a background job ignores it)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            wt.check_model(Sleeper)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, handler)
    assert torch.is_grad_enabled() and sys.getprofile() is None
    assert torch.equal(torch.rand(2), expected)
    assert capsys.readouterr().out == ""


def test_a_block_returning_a_meta_tensor_is_told_so(capsys):
    namespace = solution()

    class MetaFeedForward(namespace["FeedForward"]):
        def forward(self, x):
            return torch.empty_like(x, device="meta")

    namespace["FeedForward"] = MetaFeedForward
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0.feed_forward"
    assert "on the meta device" in result.message and "no values" in result.message


@pytest.mark.parametrize("change,words", [
    (lambda logits: (logits, None), "your Odd returns a tuple of 2: return the tensor alone"),
    (lambda logits: None, "not yet: Odd.forward (model) returns None"),
    (lambda logits: logits.transpose(1, 2), "your Odd returns a tensor [16, 35, 12]; the package's logits "
                                            "are [16, 12, 35]"),
])
def test_logits_of_the_wrong_kind_are_described(change, words, capsys):
    namespace = solution()

    class Odd(namespace["Transformer"]):
        def forward(self, src, tgt):
            return change(super().forward(src, tgt))

    result = wt.check_model(Odd)
    capsys.readouterr()
    assert not result and result.block == MODEL
    assert words in result.message, result.message


def test_a_half_precision_model_is_told_about_its_dtype(capsys):
    namespace = solution()
    result = wt.check_model(lambda cfg: namespace["Transformer"](cfg).half())
    capsys.readouterr()
    assert not result and result.block == MODEL
    assert "torch.float16" in result.message and "torch.float32" in result.message, result.message


def test_a_block_computing_in_half_precision_is_told_about_its_dtype(capsys):
    namespace = solution()

    class HalfFeedForward(namespace["FeedForward"]):
        def forward(self, x):
            return super().forward(x).half()

    namespace["FeedForward"] = HalfFeedForward
    result = verdict(namespace, capsys)
    assert not result and result.block == "encoder.layers.0.feed_forward"
    assert "torch.float16" in result.message, result.message


@pytest.mark.parametrize("change", [lambda logits: logits * 2, lambda logits: (logits, None)])
def test_the_last_resort_verdict_is_in_the_students_language(change, capsys):
    """'every block agrees … yet the logits differ' stayed English under set_language('zh')."""
    namespace = solution()

    class AfterTheHead(namespace["Transformer"]):
        def forward(self, src, tgt):
            return change(super().forward(src, tgt))

    wt.set_language("zh")
    try:
        result = wt.check_model(AfterTheHead)
    finally:
        wt.set_language("en")
    capsys.readouterr()
    assert not result and result.block == MODEL
    first_line = result.message.splitlines()[0]
    assert not re.search(r"[a-z]{3,} [a-z]{3,} [a-z]{3,}", first_line), first_line  # no English sentence left
    assert re.search(r"[\u4e00-\u9fff]{4}", first_line), first_line


def test_a_model_that_is_not_the_students_own_is_told_so_in_chinese(capsys):
    wt.set_language("zh")
    try:
        result = wt.check_model(returns_the_trained_model(solution()))
    finally:
        wt.set_language("en")
    capsys.readouterr()
    assert not result and "not your model" not in result.message and "Transformer.forward" in result.message


def test_a_tensor_subclass_cannot_vouch_for_itself(capsys):
    """A result whose own max() says 0 was compared through its methods: judged as a plain tensor, it differs."""
    namespace = solution()

    class Agreeable(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.max:
                return torch.tensor(0.0)
            return super().__torch_function__(func, types, args, kwargs or {})

    class ScaledHead(namespace["OutputHead"]):
        def forward(self, h):
            return (self.proj(h) * 1.5).as_subclass(Agreeable)  # the same argmax, so the same translations

    namespace["OutputHead"] = ScaledHead
    result = verdict(namespace, capsys)
    assert not result and result.block == "output_head", result.message
    assert "its result differs by up to" in result.message

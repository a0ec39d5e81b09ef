import contextlib
import subprocess
import sys

import pytest

import walkthrough as wt
from walkthrough import recording, trace

SEED_TABLE = [  # (where, step, shape) for every row of DESIGN.md's seed shape table
    ("src_embed", "src ids", (32, 10)),
    ("tgt_embed", "tgt ids", (32, 4)),
    ("src_embed", "embedding", (32, 10, 512)),
    ("src_embed", "+ positional encoding", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "Q = X·W_q", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "K = X·W_k", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "V = X·W_v", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "Q view", (32, 10, 8, 64)),
    ("encoder.layers.0.self_attn", "Q transpose", (32, 8, 10, 64)),
    ("encoder.layers.0.self_attn", "scores Q·Kᵀ/√d_k", (32, 8, 10, 10)),
    ("encoder.layers.0.self_attn", "attention weights", (32, 8, 10, 10)),
    ("encoder.layers.0.self_attn", "context = weights·V", (32, 8, 10, 64)),
    ("encoder.layers.0.self_attn", "context transpose", (32, 10, 8, 64)),
    ("encoder.layers.0.self_attn", "heads merged", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "output W_o", (32, 10, 512)),
    ("encoder.layers.0.add_norm1", "Add & Norm", (32, 10, 512)),
    ("encoder.layers.0.feed_forward", "FFN hidden, ReLU", (32, 10, 2048)),
    ("encoder.layers.0.feed_forward", "FFN out", (32, 10, 512)),
    ("decoder.layers.0.self_attn", "scores Q·Kᵀ/√d_k", (32, 8, 4, 4)),
    ("model", "causal mask", (4, 4)),
    ("decoder.layers.0.cross_attn", "Q transpose", (32, 8, 4, 64)),
    ("decoder.layers.0.cross_attn", "K transpose", (32, 8, 10, 64)),
    ("decoder.layers.0.cross_attn", "V transpose", (32, 8, 10, 64)),
    ("decoder.layers.0.cross_attn", "scores Q·Kᵀ/√d_k", (32, 8, 4, 10)),
    ("decoder.layers.0.cross_attn", "output W_o", (32, 4, 512)),
    ("generator", "logits", (32, 4, 30000)),
    ("model", "labels", (32, 4)),
]


def test_trace_contains_every_row_of_the_seed_table():
    rows = wt.trace_shapes(wt.ModelConfig.seed_example(), batch=32, src_len=10, tgt_len=4)
    found = {(r.where, r.step): r.shape for r in rows}
    for where, step, shape in SEED_TABLE:
        assert found.get((where, step)) == shape, (where, step)
    assert all(len(r.dims.split()) == len(r.shape) for r in rows)
    assert sum(r.step == "Add & Norm" for r in rows) == 6 * 2 + 6 * 3  # every layer ran


def test_trace_follows_the_sizes():
    cfg = wt.ModelConfig(src_vocab_size=100, tgt_vocab_size=77, d_model=96, num_heads=3, d_ff=40, num_layers=1)
    rows = {(r.where, r.step): r.shape for r in wt.trace_shapes(cfg, 2, 7, 5)}
    assert rows[("decoder.layers.0.cross_attn", "scores Q·Kᵀ/√d_k")] == (2, 3, 5, 7)
    assert rows[("encoder.layers.0.feed_forward", "FFN hidden, ReLU")] == (2, 7, 40)
    assert rows[("generator", "logits")] == (2, 5, 77)


def test_summary_keeps_layer_zero_and_counts_repeats():
    rows = wt.summarise(wt.trace_shapes(wt.ModelConfig.seed_example(), 32, 10, 4))
    notes = [r for r in rows if r.step == "(same steps as layer 0)"]
    assert [n.where for n in notes] == ["encoder.layers.1–5", "decoder.layers.1–5"]
    assert not any(".layers.3" in r.where for r in rows)


@pytest.mark.parametrize("kwargs,message", [
    (dict(batch=0), "batch must be at least 1, got 0"),
    (dict(src_len=0), "src_len must be at least 1, got 0"),
    (dict(tgt_len=6000), "tgt_len=6000 is longer than max_len=5000"),
])
def test_trace_rejects_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        wt.trace_shapes(wt.ModelConfig.seed_example(), **{"batch": 32, "src_len": 10, "tgt_len": 4, **kwargs})


def test_record_without_an_active_trace_does_not_touch_the_tensor():
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError("record looked at the tensor while no trace was running")
    assert recording.active() is None
    recording.record("step", Untouchable(), "B L", "meaning")


def test_gpt3_sized_stack_traces_on_meta():
    cfg = wt.ModelConfig(src_vocab_size=50257, tgt_vocab_size=50257, d_model=12288, num_heads=96, d_ff=49152,
                         num_layers=96, max_len=2048)
    rows = wt.trace_shapes(cfg, 1, 2048, 2048)
    assert {(r.where, r.step): r.shape for r in rows}[("decoder.layers.95.cross_attn", "scores Q·Kᵀ/√d_k")] == \
        (1, 96, 2048, 2048)


def test_command_line_prints_the_summarised_table():
    out = subprocess.run([sys.executable, "-m", "walkthrough", "trace", "--batch", "32", "--src-len", "10",
                          "--tgt-len", "4", "--d-model", "512", "--heads", "8", "--d-ff", "2048", "--vocab", "30000",
                          "--layers", "6"], capture_output=True, text=True, check=True).stdout
    assert "[32, 8, 4, 10]" in out and "[32, 4, 30000]" in out
    assert "encoder.layers.1–5" in out and "encoder.layers.3" not in out


def test_command_line_reports_bad_sizes_without_a_traceback():
    run = subprocess.run([sys.executable, "-m", "walkthrough", "trace", "--heads", "7"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "d_model=512 is not divisible by num_heads=7" in run.stderr and "Traceback" not in run.stderr


def test_remembered_ops_give_the_same_trace_as_running_every_op(monkeypatch):
    cfg = wt.ModelConfig(src_vocab_size=97, tgt_vocab_size=61, d_model=48, num_heads=6, d_ff=40, num_layers=3)
    fast = trace.trace_shapes.__wrapped__(cfg, 3, 7, 5)
    monkeypatch.setattr(trace, "_RepeatedOps", contextlib.nullcontext)
    trace._meta_model.cache_clear()
    assert trace.trace_shapes.__wrapped__(cfg, 3, 7, 5) == fast

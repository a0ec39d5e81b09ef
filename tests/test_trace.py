import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import torch
from torch import nn

import walkthrough as wt
from walkthrough import recording
from walkthrough.steps import STEPS
from walkthrough.trace import meta, op_tap, tables
from walkthrough.trace import tracer as trace

with torch.device("meta"):
    HEAD = next(name for name, part in wt.Transformer(wt.ModelConfig()).named_children()
                if isinstance(part, wt.OutputHead))  # the output head's module path in a trace

# (where, step id, shape) for every row of docs/architecture.md's table of the source articles' shapes
SOURCE_TABLE = [
    ("src_embed", "ids", (32, 10)),
    ("tgt_embed", "ids", (32, 4)),
    ("src_embed", "embedding", (32, 10, 512)),
    ("src_embed", "positions", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "q", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "k", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "v", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "q_view", (32, 10, 8, 64)),
    ("encoder.layers.0.self_attn", "q_transpose", (32, 8, 10, 64)),
    ("encoder.layers.0.self_attn", "scores", (32, 8, 10, 10)),
    ("encoder.layers.0.self_attn", "weights", (32, 8, 10, 10)),
    ("encoder.layers.0.self_attn", "context", (32, 8, 10, 64)),
    ("encoder.layers.0.self_attn", "context_transpose", (32, 10, 8, 64)),
    ("encoder.layers.0.self_attn", "merged", (32, 10, 512)),
    ("encoder.layers.0.self_attn", "output", (32, 10, 512)),
    ("encoder.layers.0.self_attn_norm", "add_norm", (32, 10, 512)),
    ("encoder.layers.0.feed_forward", "ffn_hidden", (32, 10, 2048)),
    ("encoder.layers.0.feed_forward", "ffn_out", (32, 10, 512)),
    ("decoder.layers.0.self_attn", "scores", (32, 8, 4, 4)),
    ("model", "causal_mask", (4, 4)),
    ("decoder.layers.0.cross_attn", "q_transpose", (32, 8, 4, 64)),
    ("decoder.layers.0.cross_attn", "k_transpose", (32, 8, 10, 64)),
    ("decoder.layers.0.cross_attn", "v_transpose", (32, 8, 10, 64)),
    ("decoder.layers.0.cross_attn", "scores", (32, 8, 4, 10)),
    ("decoder.layers.0.cross_attn", "output", (32, 4, 512)),
    (HEAD, "logits", (32, 4, 30000)),
    ("model", "labels", (32, 4)),
]


def test_trace_contains_every_row_of_the_source_table():
    rows = wt.trace_shapes(wt.ModelConfig(), batch=32, src_len=10, tgt_len=4)
    step = wt.by_step(rows)
    for where, step_id, shape in SOURCE_TABLE:
        assert step[where, step_id].shape == shape, (where, step_id)
    assert all(len(r.dims.split()) == len(r.shape) for r in rows)
    assert sum(r.step == STEPS["add_norm"].label for r in rows) == 6 * 2 + 6 * 3  # every layer ran
    assert wt.trace_shapes(wt.ModelConfig()) == rows, "the defaults are the source articles' sizes"


def test_trace_follows_the_sizes():
    cfg = wt.ModelConfig(src_vocab_size=100, tgt_vocab_size=77, d_model=96, num_heads=3, d_ff=40, num_layers=1)
    step = wt.by_step(wt.trace_shapes(cfg, 2, 7, 5))
    assert step["decoder.layers.0.cross_attn", "scores"].shape == (2, 3, 5, 7)
    assert step["encoder.layers.0.feed_forward", "ffn_hidden"].shape == (2, 7, 40)
    assert step[HEAD, "logits"].shape == (2, 5, 77)


def test_summary_keeps_layer_zero_and_counts_repeats():
    rows = wt.summarise(wt.trace_shapes(wt.ModelConfig(), 32, 10, 4))
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
        wt.trace_shapes(wt.ModelConfig(), **{"batch": 32, "src_len": 10, "tgt_len": 4, **kwargs})


# ---------------------------------------------------------------------------------------------------
# One entry point: either model, the whole sequence or one cached decoding step.

def small_gpt_cfg(**changes):
    return wt.GPTConfig(**{**dict(vocab_size=50, d_model=32, num_heads=4, num_kv_heads=2, d_ff=64, num_layers=2,
                                  max_len=24, dropout=0.0), **changes})


def test_a_gpt_config_traces_the_decoder_only_model_on_one_sequence():
    cfg = small_gpt_cfg()
    step = wt.by_step(wt.trace_shapes(cfg, 3, length=7))
    assert step["decoder.layers.0.self_attn", "k_transpose"].shape == (3, 2, 7, 8)  # [B, H_kv, L, d_k]
    assert step["decoder.layers.0.self_attn", "scores"].shape == (3, 4, 7, 7)
    assert step[HEAD, "logits"].shape == (3, 7, 50) and step["model", "labels"].shape == (3, 7)
    sizes = wt.SOURCE_SIZES
    assert wt.trace_shapes(cfg) == wt.trace_shapes(cfg, sizes["batch"], length=sizes["src_len"] + sizes["tgt_len"])


@pytest.mark.parametrize("cfg", [wt.ModelConfig(d_model=64, num_heads=4, d_ff=96, num_layers=2, max_len=24),
                                 small_gpt_cfg(num_kv_heads=None)], ids=["encoder-decoder", "gpt"])
def test_step_t_feeds_one_token_that_meets_t_cached_keys_in_either_model(cfg):
    d_k = cfg.d_model // cfg.num_heads
    whole = wt.by_step(wt.trace_shapes(cfg, 3, **({"length": 6} if isinstance(cfg, wt.GPTConfig) else
                                                  {"src_len": 5, "tgt_len": 6})))
    for t in (1, 6):
        step = wt.by_step(wt.trace_shapes(cfg, 3, **({} if isinstance(cfg, wt.GPTConfig) else {"src_len": 5}),
                                          step=t))
        assert step["decoder.layers.1.self_attn", "q_transpose"].shape == (3, cfg.num_heads, 1, d_k)
        assert step["decoder.layers.1.self_attn", "k_cached"].shape == (3, cfg.num_heads, t, d_k)
        assert step["decoder.layers.1.self_attn", "scores"].shape == (3, cfg.num_heads, 1, t)
        assert step[HEAD, "logits"].shape[:2] == (3, 1)
        assert not any(r.where.startswith("encoder") for r in step.values()), "the encoder ran before step 1"
    # step t and a length of t name the same position: the last query of the whole sequence sees t keys too
    assert whole["decoder.layers.1.self_attn", "scores"].shape[-1] == step["decoder.layers.1.self_attn",
                                                                           "scores"].shape[-1] == 6


@pytest.mark.parametrize("call,error,message", [
    (lambda: wt.trace_shapes(small_gpt_cfg(), 2, 10, 4), ValueError, "a GPTConfig traces one sequence: give its "
                                                                      "length as length="),
    (lambda: wt.trace_shapes(wt.ModelConfig(), 2, length=14), ValueError, "length= is the decoder-only model's"),
    (lambda: wt.trace_shapes(wt.ModelConfig(), 2, 10, 4, step=5), ValueError, "step=5 already says how far the "
                                                                              "decoder has read.*leave tgt_len out"),
    (lambda: wt.trace_shapes(small_gpt_cfg(), 2, length=6, step=6), ValueError, "leave length out"),
    (lambda: wt.trace_shapes(small_gpt_cfg(), 2, step=25), ValueError, "step=25 feeds position 24, past max_len=24"),
    (lambda: wt.trace_shapes(small_gpt_cfg(), 2, step=0), ValueError, "step must be at least 1"),
    (lambda: wt.trace_shapes(small_gpt_cfg(), 2, step=True), TypeError, "step must be a whole number"),
    (lambda: wt.trace_shapes(small_gpt_cfg(), 2, length=25), ValueError, "length=25 is longer than max_len=24"),
])
def test_trace_refuses_sizes_that_belong_to_the_other_model_or_clash(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_record_without_an_active_trace_does_not_touch_the_tensor():
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError("record looked at the tensor while no trace was running")
    assert recording.active() is None
    recording.record("scores", Untouchable())


def test_gpt3_sized_stack_traces_on_meta():
    cfg = wt.ModelConfig(src_vocab_size=50257, tgt_vocab_size=50257, d_model=12288, num_heads=96, d_ff=49152,
                         num_layers=96, max_len=2048)
    rows = wt.trace_shapes(cfg, 1, 2048, 2048)
    assert wt.by_step(rows)["decoder.layers.95.cross_attn", "scores"].shape == (1, 96, 2048, 2048)


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


@pytest.mark.parametrize("sizes", [dict(src_len=7, tgt_len=5), dict(src_len=7, step=6), dict(length=9),
                                   dict(step=9)], ids=["pair", "pair step", "gpt", "gpt step"])
def test_remembered_ops_give_the_same_trace_as_running_every_op(monkeypatch, sizes):
    """Ops are answered from memory in a trace and while a cached step's cache is filled: the same rows."""
    if "length" in sizes or "src_len" not in sizes:
        cfg = small_gpt_cfg(num_layers=3)
    else:
        cfg = wt.ModelConfig(src_vocab_size=97, tgt_vocab_size=61, d_model=48, num_heads=6, d_ff=40, num_layers=3)
    fast = wt.trace_shapes(cfg, 3, **sizes)
    monkeypatch.setattr(op_tap, "_returns_fresh", lambda op: False)
    for remembered in (meta.meta_model, trace._trace_pair, trace._trace_pair_step, trace._trace_gpt,
                       trace._trace_gpt_step):
        remembered.cache_clear()
    assert wt.trace_shapes(cfg, 3, **sizes) == fast
    for remembered in (trace._trace_pair, trace._trace_pair_step, trace._trace_gpt, trace._trace_gpt_step):
        remembered.cache_clear()  # the next test gets traces made with memory again


# ---------------------------------------------------------------------------------------------------
# trace_module: any nn.Module, op by op, on a meta copy.

def small_torch_transformer(layers=2):
    torch.manual_seed(0)
    return nn.Transformer(d_model=32, nhead=4, num_encoder_layers=layers, num_decoder_layers=layers,
                          dim_feedforward=48, batch_first=True).eval()


def by_step(rows, where):
    return [(r.step, r.shape) for r in rows if r.where == where]


def test_trace_module_opens_nn_multiheadattention():
    rows = wt.trace_module(small_torch_transformer(), (3, 5, 32), (3, 2, 32))
    ops = by_step(rows, "encoder.layers.0.self_attn")
    assert ops[0] == ("MultiheadAttention", (3, 5, 32))
    packed = next(r for r in rows if r.where == "encoder.layers.0.self_attn" and r.step == "aten.linear")
    assert packed.shape == (5, 3, 96) and packed.inputs == ((5, 3, 32), (96, 32), (96,))  # one in_proj [3D, D]
    assert ("aten.transpose", (12, 5, 8)) in ops  # heads moved into the batch: [B·H, L, d_k]
    assert ("aten.scaled_dot_product_attention", (3, 4, 5, 8)) in ops
    cross = by_step(rows, "decoder.layers.1.multihead_attn")
    assert ("aten.scaled_dot_product_attention", (3, 4, 2, 8)) in cross
    assert rows[-1].where == "decoder.norm" and rows[-1].shape == (3, 2, 32)
    assert all(isinstance(r, trace.OpRow) and not r.dims for r in rows)


def test_trace_module_leaves_the_callers_module_alone_and_takes_any_input_kind():
    module = small_torch_transformer(1)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    src, tgt = torch.randn(3, 5, 32), torch.randn(3, 2, 32)
    from_real = wt.trace_module(module, src, tgt)
    assert wt.trace_module(module, src.to("meta"), tgt.to("meta")) == from_real
    assert wt.trace_module(module, (3, 5, 32), torch.Size([3, 2, 32])) == from_real
    assert all(p.device.type == "cpu" for p in module.parameters())
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in module.modules())
    for key, value in module.state_dict().items():
        torch.testing.assert_close(value, before[key])
    assert module.training is False


def test_trace_module_allocates_nothing_for_a_huge_module():
    with torch.device("meta"):
        huge = nn.TransformerEncoder(nn.TransformerEncoderLayer(12288, 96, 49152, batch_first=True), 2,
                                     enable_nested_tensor=False).eval()
    tracemalloc.start()
    rows = wt.trace_module(huge, (1, 2048, 12288))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 50 * 2**20  # the weights alone would be 13 GiB, one [1, 96, 2048, 2048] score tensor 1.5 GiB
    assert by_step(rows, "layers.1.linear1")[-1] == ("aten.linear", (1, 2048, 49152))


def test_trace_module_shows_our_named_steps_among_the_ops(small_cfg):
    src = torch.zeros(2, 6, dtype=torch.long)
    tgt = torch.zeros(2, 3, dtype=torch.long)
    rows = wt.trace_module(wt.Transformer(small_cfg).eval(), src, tgt)
    named = tuple(r for r in rows if not isinstance(r, trace.OpRow))
    expected = wt.trace_shapes(small_cfg, 2, 6, 3)
    loss_steps = {STEPS[i].label for i in ("labels", "logits_flat", "labels_flat")}
    assert named == tuple(r for r in expected if r.step not in loss_steps)
    steps = [r.step for r in rows if r.where == "encoder.layers.0.self_attn"]
    assert steps.index("aten.view") < steps.index(STEPS["q_view"].label)  # the op first, its named step after


def test_summarise_replaces_only_layers_that_repeat_layer_zero():
    rows = wt.trace_module(small_torch_transformer(3), (3, 5, 32), (3, 2, 32))
    notes = [r.where for r in wt.summarise(rows) if r.step == "(same steps as layer 0)"]
    assert notes == ["encoder.layers.1–2", "decoder.layers.1–2"]
    mlp = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU(), nn.Flatten())
    rows = wt.trace_module(mlp, (2, 4))
    assert by_step(rows, "2") == by_step(rows, "0")
    assert wt.summarise(rows) == list(rows)  # layer 1 differs from layer 0: nothing summarised, the order stays
    assert by_step(rows, "4")[-1] == ("aten.flatten", (2, 4))


def test_shape_table_depth_and_within():
    rows = wt.trace_module(small_torch_transformer(1), (3, 5, 32), (3, 2, 32))
    top = tables.shape_table(rows, depth=1).rows
    assert [(r.where, r.step) for r in top] == [("encoder", "TransformerEncoder"), ("decoder", "TransformerDecoder")]
    assert top[1].shape == (3, 2, 32) and top[1].inputs == ((3, 2, 32), (3, 5, 32))
    stack, first_layer = (tables.shape_table(rows, within=w).rows for w in ("encoder.layers", "encoder.layers.0"))
    assert stack == first_layer  # a module that only holds others (never called itself) still selects
    one = tables.shape_table(rows, within="encoder.layers.0.self_attn").rows
    assert one[0].step == "MultiheadAttention" and all(r.where == "encoder.layers.0.self_attn" for r in one)
    text = repr(tables.shape_table(rows, within="encoder.layers.0.linear1"))
    assert "aten.linear" in text and "[3, 5, 48]" in text and "from [3, 5, 32], [48, 32], [48]" in text
    with pytest.raises(ValueError, match=re.escape("within='encoder.layer.0' matches no row")):
        tables.shape_table(rows, within="encoder.layer.0")
    with pytest.raises(ValueError, match="depth must be at least 1"):
        tables.shape_table(rows, depth=0)


class ReadsAValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 4)

    def forward(self, x):
        return self.gate(x) if self.gate(x).sum() > 0 else x


class Outer(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.block = nn.Sequential(inner)

    def forward(self, x):
        return self.block(x)


CPU_ONLY = torch.library.Library("wt_test", "DEF")  # an op with a CPU kernel and no meta (or fake) one
CPU_ONLY.define("cpu_only(Tensor x) -> Tensor")
CPU_ONLY.impl("cpu_only", lambda x: x * 3, "CPU")


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("inner,op,message", [
    (ReadsAValue(), "aten.is_nonzero", "right after aten.gt -> [] needs a tensor's values"),
    (Lambda(lambda x: x * x.sum().item()), None, "needs a tensor's values"),
    (Lambda(lambda x: x[torch.nonzero(x)]), "aten.nonzero", "needs a tensor's values"),
    (Lambda(lambda x: torch.equal(x, x) and x), "aten.equal", "aten.equal needs a tensor's values"),
    (Lambda(lambda x: torch.ops.wt_test.cpu_only(x)), "wt_test.cpu_only", "wt_test.cpu_only has no meta-device kernel"),
    (Lambda(lambda x: x @ torch.ones(3, 2)), "aten.matmul", "aten.matmul failed on the meta device"),
])
def test_a_module_that_cannot_run_on_meta_gets_the_op_and_the_module_path(inner, op, message):
    with pytest.raises(wt.TraceError, match=re.escape(message)) as caught:
        wt.trace_module(Outer(inner), (2, 4))
    assert caught.value.where == "block.0" and str(caught.value).startswith("in 'block.0': ")
    if op is not None:
        assert caught.value.op == op and op in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_nn_transformer_with_a_mask_it_inspects_names_the_decoder_and_the_flag_to_pass():
    mask = nn.Transformer.generate_square_subsequent_mask(2)
    with pytest.raises(wt.TraceError, match="in 'decoder'") as caught:
        wt.trace_module(small_torch_transformer(1), (3, 5, 32), (3, 2, 32), tgt_mask=mask)
    assert "If tgt_mask is a causal (subsequent) mask, pass tgt_is_causal=True with it" in str(caught.value)
    assert caught.value.where == "decoder"
    stack = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 48, batch_first=True), 1,
                                  enable_nested_tensor=False).eval()
    with pytest.raises(wt.TraceError, match=r"If mask is a causal \(subsequent\) mask, pass is_causal=True"):
        wt.trace_module(stack, (3, 5, 32), mask=nn.Transformer.generate_square_subsequent_mask(5))
    rows = wt.trace_module(small_torch_transformer(1), (3, 5, 32), (3, 2, 32), tgt_mask=mask, tgt_is_causal=True)
    assert rows[-1].shape == (3, 2, 32)
    fused = [r for r in rows if r.step == "aten.scaled_dot_product_attention"]
    assert [r.where for r in fused if "is_causal=True" in r.meaning] == ["decoder.layers.0.self_attn"]


def test_trace_module_rejects_what_is_not_a_module():
    with pytest.raises(TypeError, match=re.escape("module must be a torch.nn.Module, got function")):
        wt.trace_module(lambda x: x, (2, 3))
    with pytest.raises(ValueError, match="sizes >= 0"):
        wt.trace_module(nn.ReLU(), (2, -3))


@pytest.mark.parametrize("device", ["cpu", "meta"])  # a meta copy is traced, or (already on meta) the module itself
def test_trace_module_does_not_run_the_modules_own_hooks_and_leaves_them_working(device):
    with torch.device(device):
        model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    saved, seen = [], []
    handles = [model[0].register_forward_hook(lambda module, args, out: saved.append(out)),
               model.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape))]
    rows = wt.trace_module(model, (2, 4))
    assert rows[-1].shape == (2, 3)
    assert saved == [] and seen == [], "a user's hook ran on meta tensors"
    assert len(model[0]._forward_hooks) == 1 and len(model._forward_pre_hooks) == 1, "the hooks were lost"
    if device == "cpu":  # the real module's hooks still see real activations
        x = torch.randn(2, 4)
        with torch.no_grad():
            model(x)
            expected = model[0](x)
        assert len(saved) == 2 and saved[0].device.type == "cpu" and seen == [(2, 4)]
        torch.testing.assert_close(saved[0], expected)
    for handle in handles:
        handle.remove()
    assert not model[0]._forward_hooks and not model._forward_pre_hooks, "the user's handles still work"


def test_trace_module_reads_a_shape_given_as_a_keyword():
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    by_keyword = wt.trace_module(attention, (2, 3, 8), key=(2, 5, 8), value=torch.Size([2, 5, 8]), need_weights=False)
    assert by_keyword == wt.trace_module(attention, (2, 3, 8), (2, 5, 8), (2, 5, 8), need_weights=False)
    assert [r.shape for r in by_keyword if r.step == "aten.scaled_dot_product_attention"] == [(2, 2, 3, 4)]


@pytest.mark.parametrize("inputs,kwargs,error,message", [
    (([1.0, 2.0, 3.0, 4.0],), {}, TypeError, "inputs[0] is the list [1.0, 2.0, 3.0, 4.0]: give a shape as a tuple "
                                             "((1.0, 2.0, 3.0, 4.0)) and data as a tensor"),
    (([2, 4],), {}, TypeError, "inputs[0] is the list [2, 4]: give a shape as a tuple ((2, 4)) and data as a tensor "
                               "(torch.tensor([2, 4]))"),
    (((2.0, 4.0),), {}, TypeError, "inputs[0] = (2.0, 4.0) is not a shape: a shape is a tuple of whole sizes"),
    ((np.zeros((2, 4), dtype=np.float32),), {}, TypeError, "inputs[0] is a numpy array: pass a tensor "
                                                           "(torch.from_numpy(array)) or its shape as a tuple, (2, 4)"),
    (((2, 4),), {"extra": np.zeros(3)}, TypeError, "extra is a numpy array"),
    ((torch.zeros(2, 4), (2, -4)), {}, ValueError, "inputs[1] = (2, -4): a shape given as an input must have "
                                                   "sizes >= 0"),
])
def test_trace_module_refuses_inputs_that_are_neither_tensors_nor_shapes(inputs, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        wt.trace_module(nn.Linear(4, 3), *inputs, **kwargs)


def test_trace_module_says_a_torchscript_module_cannot_be_traced_and_what_to_trace_instead():
    python_module = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    with pytest.raises(TypeError, match=r"module is a TorchScript module .* Trace the Python nn.Module it was made "
                                        r"from instead"):
        wt.trace_module(torch.jit.script(python_module), (2, 4))
    with pytest.raises(TypeError, match=r"module\.1 is a TorchScript module"):
        wt.trace_module(nn.Sequential(nn.Identity(), torch.jit.trace(python_module, torch.zeros(2, 4))), (2, 4))
    assert wt.trace_module(python_module, (2, 4))[-1].shape == (2, 3)


def test_without_the_private_dispatch_api_the_public_fallback_traces_the_same_shapes(monkeypatch, small_cfg):
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ours = wt.Transformer(small_cfg).eval()
    ids = torch.zeros(2, 6, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)
    exact_mlp, exact_ours = wt.trace_module(mlp, (5, 8)), wt.trace_module(ours, *ids)
    monkeypatch.setattr(op_tap, "_DispatchMode", None)
    fallback_mlp, fallback_ours = wt.trace_module(mlp, (5, 8)), wt.trace_module(ours, *ids)
    assert [(r.where, r.shape, r.inputs) for r in fallback_mlp] == [(r.where, r.shape, r.inputs) for r in exact_mlp]
    assert [r.step for r in fallback_mlp if r.kind == "op"] == ["torch.nn.functional.linear",
                                                               "torch.nn.functional.relu", "torch.nn.functional.linear"]

    def modules_and_named_steps(rows):
        return [r for r in rows if not isinstance(r, trace.OpRow) or r.kind == "module"]
    assert modules_and_named_steps(fallback_ours) == modules_and_named_steps(exact_ours)


def test_without_readable_op_schemas_nothing_is_remembered_and_the_rows_are_the_same(monkeypatch):
    module = small_torch_transformer(2)
    exact = wt.trace_module(module, (3, 5, 32), (3, 2, 32))
    monkeypatch.setattr(op_tap, "_returns_fresh", lambda op: False)
    assert wt.trace_module(module, (3, 5, 32), (3, 2, 32)) == exact


def test_trace_callable_is_the_core_of_every_entry_point(small_cfg):
    with torch.device("meta"):
        model = wt.Transformer(small_cfg).eval()
    src = torch.zeros(2, 6, dtype=torch.long, device="meta")
    rows = trace.trace_callable(lambda: model.encode(src), model, ops=False)
    assert rows[-1] == wt.Row("encoder", "memory (final LayerNorm)", (2, 6, 32), "B L_src D",
                              "the encoder output, read by each decoder layer")
    assert trace.trace_callable(lambda: model.encode(src), model)[-1].where == "encoder"


def test_a_tensor_made_inside_forward_without_a_device_is_not_allocated():
    class MakesAHugeTensor(nn.Module):
        def forward(self, x):
            return x + torch.ones(10**6, 10**6).sum()  # 4 TB if it were real

    rows = wt.trace_module(MakesAHugeTensor(), (2, 3))
    assert [(r.step, r.shape) for r in rows if r.step in ("aten.ones", "aten.add")] == [
        ("aten.ones", (10**6, 10**6)), ("aten.add", (2, 3))]


def test_print_shape_prints_label_shape_and_dims_and_refuses_a_dims_count_that_differs(capsys):
    wt.print_shape("Q after transpose", torch.zeros(2, 8, 10, 64), "B H L d_k")
    assert capsys.readouterr().out.split() == ["Q", "after", "transpose", "[2,", "8,", "10,", "64]", "B", "H", "L",
                                               "d_k"]
    with pytest.raises(ValueError, match=r"x: dims 'B L' name 2 dims but the shape \[2, 3, 4\] has 3"):
        wt.print_shape("x", torch.zeros(2, 3, 4), "B L")


def test_assert_shape_passes_silently_or_raises_an_assertion_error():
    wt.assert_shape(torch.zeros(2, 3), (2, 3))
    with pytest.raises(AssertionError, match=re.escape("shape [2, 3], expected [3, 2]")):
        wt.assert_shape(torch.zeros(2, 3), (3, 2))


def test_shape_table_selects_steps_by_id_and_refuses_a_selection_that_finds_nothing():
    rows = wt.trace_shapes(wt.ModelConfig(d_model=64, num_heads=4, d_ff=96, num_layers=2), 3, 5, 2)
    picked = tables.shape_table(rows, within=("decoder.layers.0.self_attn", "decoder.layers.0.cross_attn"),
                               steps=("q_transpose", "scores"), summarise_layers=False, highlight="scores").rows
    assert [(r.where, r.shape) for r in picked] == [
        ("decoder.layers.0.self_attn", (3, 4, 2, 16)), ("decoder.layers.0.self_attn", (3, 4, 2, 2)),
        ("decoder.layers.0.cross_attn", (3, 4, 2, 16)), ("decoder.layers.0.cross_attn", (3, 4, 2, 5))]
    with pytest.raises(ValueError, match=r"steps: 'k_grouped' \('K shared by a group'\) not traced within "
                                         r"'encoder.layers.0.self_attn'; the named steps there are \['Q = X·W_q'"):
        tables.shape_table(rows, within="encoder.layers.0.self_attn", steps=("q", "k_grouped"))
    with pytest.raises(KeyError, match="no step 'Q transpose '"):
        tables.shape_table(rows, steps=("Q transpose ",))
    with pytest.raises(ValueError, match=r"highlight \['k_cached'\] marks no row"):
        tables.shape_table(rows, highlight=("scores", "k_cached"))
    everything = tables.shape_table(rows, summarise_layers=False).rows
    assert everything == list(rows) and len(tables.shape_table(rows).rows) < len(rows)


def test_by_step_finds_a_traced_step_by_module_and_name():
    rows = wt.trace_shapes(wt.ModelConfig.paper_base(), 32, 10, 4)
    step = wt.by_step(rows)
    assert step["decoder.layers.0.cross_attn", "scores Q·Kᵀ/√d_k"].shape == (32, 8, 4, 10)  # by label
    assert step["decoder.layers.0.cross_attn", "scores"].shape == (32, 8, 4, 10)  # or by id
    assert step[HEAD, "logits"].dims == "B L_tgt V"


@pytest.mark.parametrize("batch", [True, 2.0, np.int64(2)])
def test_trace_checks_its_arguments_before_answering_from_memory(batch):
    cfg = wt.ModelConfig.paper_base()
    wt.trace_shapes(cfg, 2, 3, 4)  # an equal int traced first must not let these through
    with pytest.raises(TypeError, match="batch must be a whole number"):
        wt.trace_shapes(cfg, batch, 3, 4)


def test_trace_names_a_config_of_the_wrong_kind():
    with pytest.raises(TypeError, match=r"cfg must be a walkthrough\.ModelConfig \(encoder–decoder\) or GPTConfig "
                                        r"\(decoder-only\), got dict"):
        wt.trace_shapes({"d_model": 512}, 2, 3, 4)


def test_a_model_without_padding_traces_to_its_loss_over_every_position():
    cfg = wt.GPTConfig(vocab_size=50, d_model=32, num_heads=4, d_ff=64, num_layers=1, max_len=16, pad_id=None)
    rows = wt.by_step(wt.trace_shapes(cfg, 2, length=5))
    assert rows["model", "labels_flat"].shape == (10,)
    logits, labels = torch.randn(2, 5, 50), torch.randint(0, 50, (2, 5))
    torch.testing.assert_close(wt.sequence_loss(logits, labels, None),
                               nn.functional.cross_entropy(logits.reshape(10, 50), labels.reshape(10)))


def test_a_trace_says_what_the_block_options_compute():
    """A row's label and meaning are true of the model traced: GPT-2's positions are learned and its embedding is
    not scaled, Llama's norms are RMSNorms, Marian's stacks end with no norm (each was once shown as the paper's)."""
    gpt = wt.GPTConfig(vocab_size=50, d_model=32, num_heads=4, d_ff=64, num_layers=1, max_len=16, pad_id=None,
                       positions="learned", scale_embeddings=False, norm="rms")
    steps = {r.step for r in wt.trace_shapes(gpt, 2, length=5)}
    assert {STEPS[i].label for i in ("embedding_unscaled", "learned_positions", "pre_rms_norm",
                                     "decoder_output_rms_norm")} <= steps
    assert not steps & {STEPS[i].label for i in ("embedding", "positions", "pre_norm", "decoder_output")}
    marian = wt.ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=32, num_heads=4, d_ff=64, num_layers=1,
                            max_len=16, final_norm=False)
    steps = {r.step for r in wt.trace_shapes(marian, 2, src_len=5, tgt_len=4)}
    assert {STEPS[i].label for i in ("embedding", "positions", "add_norm", "memory_no_norm",
                                     "decoder_output_no_norm")} <= steps
    assert not steps & {STEPS[i].label for i in ("memory", "decoder_output")}
    rms = wt.ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=32, num_heads=4, d_ff=64, num_layers=1,
                         max_len=16, norm="rms")
    steps = {r.step for r in wt.trace_shapes(rms, 2, src_len=5, tgt_len=4)}
    assert {STEPS[i].label for i in ("add_rms_norm", "memory_rms_norm", "decoder_output_rms_norm")} <= steps
    assert not steps & {STEPS[i].label for i in ("add_norm", "memory", "decoder_output")}

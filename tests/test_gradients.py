"""The traced gradient shapes: the forward trace's rows, each beside the shape of its real gradient."""

import dataclasses

import pytest
import torch

import walkthrough as wt
from walkthrough.model import backward
from walkthrough.trace.gradients import GradientTable, layer_gradient_norms, parameter_gradients, trace_gradients

SMALL = wt.ModelConfig(src_vocab_size=40, tgt_vocab_size=30, d_model=12, num_heads=3, d_ff=20, num_layers=2,
                       max_len=16, dropout=0.0)


def test_forward_rows_are_the_forward_trace():
    rows = trace_gradients(wt.ModelConfig.paper_base())
    traced = wt.trace_shapes(wt.ModelConfig.paper_base(), 32, 10, 4)
    assert [r.forward for r in rows] == [wt.Row(t.where, t.step, t.shape, t.dims, t.meaning) for t in traced]


def test_every_gradient_has_its_tensors_shape_and_ids_and_masks_have_none():
    rows = trace_gradients(wt.ModelConfig.paper_base())
    for row in rows:
        if row.grad_shape is None:
            assert any(word in row.forward.step for word in ("ids", "mask", "labels")), row
        else:
            assert row.grad_shape == row.forward.shape, row
    scores = next(r for r in rows if r.forward.where == "decoder.layers.0.cross_attn" and "scores" in r.forward.step)
    assert scores.grad_shape == (32, 8, 4, 10)  # d_scores of cross-attention: [B, H, L_tgt, L_src]


def test_a_weights_gradient_has_the_weights_shape_whatever_the_batch():
    cfg = wt.ModelConfig.paper_base()
    small, large = parameter_gradients(cfg, 1, 3, 2), parameter_gradients(cfg, 64, 20, 9)
    assert small == large
    assert all(shape == grad for _, shape, grad in small)
    assert dict((name, grad) for name, _, grad in small)["encoder.layers.0.self_attn.w_q.weight"] == (512, 512)
    with torch.device("meta"):
        names = [name for name, _ in wt.Transformer(cfg).named_parameters()]
    assert [name for name, _, _ in small] == names


def test_a_gpt_traces_its_gradients_as_trace_shapes_traces_it():
    """trace_gradients takes what trace_shapes takes: a GPTConfig with length=, the source sizes by default."""
    cfg = wt.GPTConfig(vocab_size=30, d_model=12, num_heads=3, num_kv_heads=1, d_ff=20, num_layers=2, max_len=16,
                       dropout=0.0)
    for sizes in ({}, {"batch": 3, "length": 9}):
        rows = trace_gradients(cfg, **sizes)
        traced = wt.trace_shapes(cfg, **sizes)
        assert [r.forward for r in rows] == [wt.Row(t.where, t.step, t.shape, t.dims, t.meaning) for t in traced]
    assert [r.forward for r in trace_gradients(SMALL)] == [r.forward for r in trace_gradients(SMALL, 32, 10, 4)]
    torch.manual_seed(0)
    model = wt.GPT(cfg)
    ids = torch.randint(1, 30, (3, 9))
    wt.sequence_loss(model(ids), ids, cfg.pad_id).backward()
    real = {name: tuple(p.grad.shape) for name, p in model.named_parameters()}
    assert real == {name: grad for name, _, grad in parameter_gradients(cfg, 3, length=9)}
    k = next(r for r in trace_gradients(cfg, 3, length=9) if r.forward.step == wt.STEPS["k_transpose"].label)
    assert k.grad_shape == (3, 1, 9, 4)  # one K/V head: [B, H_kv, L, d_k]
    with pytest.raises(ValueError, match="give its length as length="):
        trace_gradients(cfg, 3, 9)


def test_meta_gradient_shapes_equal_a_real_backward_pass():
    torch.manual_seed(0)
    model = wt.Transformer(SMALL).eval()
    traced = trace_gradients(SMALL, 5, 7, 6)
    head = next(r.forward.where for r in traced if r.forward.step == "logits")  # the output head's path
    grads = {}
    for name in ("encoder.layers.0.feed_forward.linear1", "decoder.layers.1.cross_attn.w_o", head):
        module = model.get_submodule(name)
        module.register_full_backward_hook(lambda m, d_in, d_out, name=name: grads.__setitem__(name, d_out[0].shape))
    src, tgt = torch.randint(1, 40, (5, 7)), torch.randint(1, 30, (5, 6))
    wt.sequence_loss(model(src, tgt), tgt, SMALL.pad_id).backward()
    rows = {(r.forward.where, r.forward.step): r.grad_shape for r in traced}
    assert grads["encoder.layers.0.feed_forward.linear1"] == rows["encoder.layers.0.feed_forward", "FFN hidden, ReLU"]
    assert grads["decoder.layers.1.cross_attn.w_o"] == rows["decoder.layers.1.cross_attn", "output W_o"]
    assert grads[head] == rows[head, "logits"] == (5, 6, 30)
    real = {name: tuple(p.grad.shape) for name, p in model.named_parameters()}
    assert real == {name: grad for name, _, grad in parameter_gradients(SMALL, 5, 7, 6)}


def test_the_models_weight_gradient_is_x_transposed_times_d_y_summed_over_batch_and_length():
    torch.manual_seed(0)
    model = wt.Transformer(SMALL).eval()
    w_q = model.encoder.layers[0].self_attn.w_q
    seen = {}
    w_q.register_forward_hook(lambda m, args, out: seen.__setitem__("x", args[0]))
    w_q.register_full_backward_hook(lambda m, d_in, d_out: seen.__setitem__("d_y", d_out[0]))
    src, tgt = torch.randint(1, 40, (4, 9)), torch.randint(1, 30, (4, 5))
    wt.sequence_loss(model(src, tgt), tgt, SMALL.pad_id).backward()
    _, d_weight, d_bias = backward.linear_backward(seen["x"], w_q.weight, seen["d_y"])
    torch.testing.assert_close(d_weight, w_q.weight.grad)
    torch.testing.assert_close(d_bias, w_q.bias.grad)


def test_gradient_table_text_and_html():
    rows = [r for r in trace_gradients(SMALL, 2, 3, 4) if r.forward.where == "encoder.layers.0.self_attn"]
    table = GradientTable(rows, highlight="scores")
    text = repr(table)
    assert text.splitlines()[0].split() == ["where", "step", "forward", "shape", "gradient", "shape", "dims"]
    assert "[2, 3, 3, 3]" in text
    assert table._repr_html_().count("background:#fff3b0") == 1
    assert "no gradient" in repr(GradientTable(trace_gradients(SMALL, 2, 3, 4)[:1]))


def test_other_configs_share_nothing_by_mistake():
    wider = dataclasses.replace(SMALL, d_model=24)
    a, b = trace_gradients(SMALL, 2, 3, 4), trace_gradients(wider, 2, 3, 4)
    assert a != b and b[1].grad_shape == (2, 3, 24)


@pytest.mark.parametrize("call, error, words", [
    (lambda: trace_gradients({"d_model": 512}), TypeError, "cfg must be a walkthrough.ModelConfig"),
    (lambda: trace_gradients(SMALL, 0), ValueError, "batch must be at least 1"),
    (lambda: trace_gradients(SMALL, 2, 17), ValueError, "src_len=17 is longer than max_len=16"),
    (lambda: parameter_gradients(SMALL, 2, 3, 2.5), TypeError, "tgt_len must be a whole number"),
])
def test_bad_input_is_refused_with_a_message_that_names_it(call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value)


def test_post_norm_gradients_grow_toward_the_output_and_pre_norm_ones_do_not():
    def mean_norms(norm_first):
        cfg = wt.GPTConfig(vocab_size=64, d_model=128, num_heads=4, d_ff=512, num_layers=12, max_len=64, dropout=0.0,
                           positions="sinusoidal", norm_first=norm_first)
        runs = [layer_gradient_norms(cfg, batch=16, length=32, seed=seed) for seed in range(2)]
        return [sum(layer) / len(runs) for layer in zip(*runs)]
    post, pre = mean_norms(False), mean_norms(True)
    assert len(post) == len(pre) == 12 and min(post + pre) > 0
    assert post[-1] / post[0] > 1.2 and pre[-1] / pre[0] < 0.9
    cfg = wt.GPTConfig(vocab_size=64, d_model=32, num_heads=2, d_ff=64, num_layers=2, max_len=16, dropout=0.0)
    assert layer_gradient_norms(cfg, 4, 8, seed=3) == layer_gradient_norms(cfg, 4, 8, seed=3)  # fixed by the seed
    with pytest.raises(TypeError, match=r"cfg must be a walkthrough\.GPTConfig"):
        layer_gradient_norms(SMALL)
    with pytest.raises(ValueError, match="length=17 is longer than max_len=16"):
        layer_gradient_norms(cfg, 4, 17)


def test_gradient_explorer_shows_gradient_shapes_and_a_message_for_bad_sizes():
    explorer = wt.widgets.gradient_explorer()
    assert "[32, 8, 10, 10]" in explorer.text() and "[512, 512]" in explorer.text()
    explorer.control("batch").value = 64
    assert "[64, 8, 10, 10]" in explorer.text() and "B·L = 64·10 = 640" in explorer.text()
    explorer.control("heads").value = 7  # 512 is not divisible by 7
    assert "not divisible" in explorer.text() and "Traceback" not in explorer.text()

"""training_memory's formula equals what autograd really saves, to the byte; checkpointing keeps gradients."""

import dataclasses

import pytest
import torch

import walkthrough as wt
from walkthrough.trace import memory

SMALL = wt.ModelConfig(src_vocab_size=50, tgt_vocab_size=60, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                       max_len=20, dropout=0.0)


@pytest.mark.parametrize("changes, sizes, smoothing", [
    ({}, (3, 5, 4), 0.1),
    ({"dropout": 0.1}, (3, 5, 4), 0.1),
    ({"dropout": 0.1, "num_layers": 2}, (2, 7, 3), 0.0),
    ({"num_layers": 3, "num_heads": 4, "d_ff": 48}, (4, 6, 6), 0.0),
    ({"dropout": 0.3, "share_embeddings": True, "tgt_vocab_size": 50}, (1, 9, 2), 0.1),
])
@pytest.mark.parametrize("keep_weights", [False, True], ids=["fused attention", "written out"])
def test_formula_equals_the_bytes_autograd_saves(changes, sizes, smoothing, keep_weights):
    cfg = dataclasses.replace(SMALL, **changes)
    torch.manual_seed(0)
    saved, loss = memory.measure_saved(wt.Transformer(cfg), *memory.training_batch(cfg, *sizes), smoothing,
                                       keep_weights)
    assert saved.total == wt.training_memory(cfg, *sizes, smoothing=smoothing, keep_weights=keep_weights).activations
    loss.backward()  # what was saved is enough for the backward pass (and the hooks left nothing behind)


@pytest.mark.parametrize("changes", [
    {"activation": "swiglu", "norm": "rms"},
    {"activation": "gelu_tanh", "positions": "learned", "bias": False},
    {"positions": "rope", "norm_first": True, "final_norm": False},
    {"share_embeddings": True, "tgt_vocab_size": 50},
    {"activation": "gelu", "positions": "sinusoidal_halves", "scale_embeddings": False},
    {"activation": "silu", "pad_id": None, "final_norm": False},
    {"positions": "rope", "activation": "swiglu", "norm": "rms", "norm_first": True, "bias": False,
     "num_layers": 2, "num_heads": 4},
], ids=["swiglu+rms", "gelu_tanh+learned+no bias", "rope+pre-norm+no final norm", "shared embeddings",
        "gelu+halves+unscaled", "silu+no pad+no final norm", "llama-like"])
@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["no dropout", "dropout"])
@pytest.mark.parametrize("keep_weights", [False, True], ids=["fused attention", "written out"])
def test_formula_follows_every_option_to_the_byte(changes, dropout, keep_weights):
    cfg = dataclasses.replace(SMALL, dropout=dropout, **changes)
    torch.manual_seed(0)
    saved, loss = memory.measure_saved(wt.Transformer(cfg), *memory.training_batch(cfg, 3, 5, 4), 0.1, keep_weights)
    assert saved.total == wt.training_memory(cfg, 3, 5, 4, keep_weights=keep_weights).activations
    loss.backward()


def test_the_options_name_their_own_terms():
    def terms(**changes):
        return dict(wt.training_memory(dataclasses.replace(SMALL, **changes), 3, 5, 4).terms)
    default, rope, rms = terms(), terms(positions="rope"), terms(norm="rms")
    assert "RoPE cos, sin [L, d_k/2] (for Q and for K)" in rope and not any("RoPE" in name for name in default)
    assert "RMSNorm inputs, 1/rms, normalised inputs" in rms and "LayerNorm inputs, means, 1/std" not in rms
    hidden = "FFN hidden [B, L, d_ff]"
    assert terms(activation="swiglu")[hidden] == 4 * default[hidden] == 2 * terms(activation="gelu")[hidden]
    assert terms(final_norm=False)["LayerNorm inputs, means, 1/std"] < default["LayerNorm inputs, means, 1/std"]


def test_the_meta_device_measures_the_same_bytes_as_real_tensors():
    cfg = dataclasses.replace(SMALL, dropout=0.1, num_layers=2)
    torch.manual_seed(0)
    real, _ = memory.measure_saved(wt.Transformer(cfg), *memory.training_batch(cfg, 2, 6, 5))
    with torch.device("meta"):
        meta_model = wt.Transformer(cfg)
    meta, _ = memory.measure_saved(meta_model, *memory.training_batch(cfg, 2, 6, 5, device="meta"))
    assert [(t.where, t.shape, t.bytes) for t in meta.tensors] == [(t.where, t.shape, t.bytes) for t in real.tensors]


def test_each_storage_is_counted_once_and_parameters_never():
    cfg = SMALL
    torch.manual_seed(0)
    model = wt.Transformer(cfg)
    shapes = {tuple(p.shape) for p in model.parameters()}
    savers = {}
    for keep_weights in (False, True):
        saved, _ = memory.measure_saved(model, *memory.training_batch(cfg, 2, 4, 3), keep_weights=keep_weights)
        assert not any(t.shape in shapes and t.where.endswith(("w_q", "w_k", "w_v", "w_o")) for t in saved.tensors)
        savers[keep_weights] = [t.where.rsplit(".", 1)[1] for t in saved.tensors
                                if t.where.startswith("encoder.layers.0.self_attn.w_")]
    # self-attention's three projections read one input: saved three times by autograd, counted once (at W_q);
    # the fused kernel's output is the very storage W_o reads, counted once (at the kernel); written out,
    # the merged heads are a copy of their own
    assert savers == {False: ["w_q"], True: ["w_q", "w_o"]}


def test_parameters_gradients_and_adam_state_equal_the_real_ones():
    cfg = dataclasses.replace(SMALL, num_layers=2)
    torch.manual_seed(0)
    model = wt.Transformer(cfg)
    src, tgt_in, labels = memory.training_batch(cfg, 2, 4, 3)
    optimizer = torch.optim.Adam(model.parameters())
    wt.sequence_loss(model(src, tgt_in), labels, cfg.pad_id).backward()
    optimizer.step()
    table = wt.training_memory(cfg, 2, 4, 3)
    assert table.parameters == sum(p.numel() * p.element_size() for p in model.parameters())
    assert table.gradients == sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    assert table.optimizer == sum(s.numel() * s.element_size() for state in optimizer.state.values()
                                  for s in state.values())


@pytest.mark.parametrize("share", [False, True])
def test_parameter_count_at_the_paper_sizes(share):
    cfg = wt.ModelConfig.paper_base(share_embeddings=share)
    with torch.device("meta"):
        model = wt.Transformer(cfg)
    assert memory.parameter_count(cfg) == sum(p.numel() for p in model.parameters())
    assert memory.parameter_tensors(cfg) == len(list(model.parameters()))


def test_terms_add_up_and_the_attention_weights_grow_as_the_square_of_the_length():
    short = wt.training_memory(wt.ModelConfig.paper_base(), 32, 10, 10)
    long = wt.training_memory(wt.ModelConfig.paper_base(), 32, 20, 20)
    assert short.activations == sum(size for _, size in short.terms)
    weights = "attention weights [B, H, L_q, L_k]"
    assert dict(long.terms)[weights] == 4 * dict(short.terms)[weights]
    assert "activations saved for backward" in repr(short) and f"{short.total:,}" in repr(short)


def test_checkpointing_the_encoder_saves_less_and_keeps_the_gradients():
    cfg = dataclasses.replace(SMALL, num_layers=2, dropout=0.1)  # dropout too: the recomputed masks must match
    torch.manual_seed(0)
    model = wt.Transformer(cfg)
    batch = memory.training_batch(cfg, 3, 7, 4)
    torch.manual_seed(1)
    plain, loss = memory.measure_saved(model, *batch)
    loss.backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    calls = []
    hook = model.encoder.layers[0].self_attn.register_forward_pre_hook(lambda module, args: calls.append(1))
    torch.manual_seed(1)
    with memory.checkpointed(model.encoder.layers):
        kept, loss = memory.measure_saved(model, *batch)
        assert len(calls) == 1
        loss.backward()
    hook.remove()
    assert len(calls) == 2, "the backward runs each checkpointed layer's forward once more"
    for ours, theirs in zip((p.grad for p in model.parameters()), expected):
        torch.testing.assert_close(ours, theirs)
    encoder = lambda saved: sum(t.bytes for t in saved.tensors if t.where.startswith("encoder.layers"))  # noqa: E731
    assert encoder(kept) < encoder(plain) / 5
    assert [t.shape for t in kept.tensors if t.where.startswith("encoder.layers")] == \
        [(3, 7, 16), (3, 1, 1, 7), (3, 7, 16)]  # each layer's input (and the mask, shared)
    assert kept.total - encoder(kept) == plain.total - encoder(plain)  # the decoder saves what it did
    assert "forward" not in vars(model.encoder.layers[0])  # the layers are restored


@pytest.mark.parametrize("call, error, words", [
    (lambda: wt.training_memory("base", 32, 10, 4), TypeError, "cfg must be a walkthrough.ModelConfig"),
    (lambda: wt.training_memory(SMALL, 0, 10, 4), ValueError, "batch must be at least 1"),
    (lambda: wt.training_memory(SMALL, 32, 10.0, 4), TypeError, "src_len must be a whole number"),
    (lambda: wt.training_memory(SMALL, 32, 10, 4, smoothing=1.5), ValueError, "smoothing must be"),
    (lambda: wt.training_memory(SMALL, 2, SMALL.max_len + 1, 4), ValueError,
     f"src_len={SMALL.max_len + 1} is longer than the model's max_len={SMALL.max_len}"),
    (lambda: wt.training_memory(SMALL, 2, 4, 10_000), ValueError, "tgt_len=10000 is longer than"),
])
def test_bad_input_is_refused_with_a_message_that_names_it(call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value)


def test_crossover_length_is_where_the_activations_first_pass_the_weights_and_adam():
    cfg = wt.ModelConfig.paper_base()
    def gap(length):
        table = wt.training_memory(cfg, 32, length, length)
        return table.activations - table.parameters - table.optimizer
    crossing = memory.crossover_length(cfg, 32)
    assert gap(crossing - 1) <= 0 < gap(crossing)
    assert memory.crossover_length(cfg, 64) < crossing  # twice the sentences: shorter ones suffice
    assert memory.crossover_length(dataclasses.replace(cfg, max_len=8), 1) is None


def test_memory_explorer_shows_the_crossing_and_the_square_of_the_length():
    explorer = wt.widgets.memory_explorer()
    assert "at L = 41" in explorer.text() and "[image/png]" in explorer.text()
    assert "of which attention weights   5.5 MB" in explorer.text()
    explorer.control("L").value = 20  # twice the length: the [B, H, L, L] weights take four times the bytes
    assert "of which attention weights   22.1 MB" in explorer.text()
    explorer.control("batch").value = 64
    assert "at L = 22" in explorer.text()

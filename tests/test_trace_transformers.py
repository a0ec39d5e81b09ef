"""wt.trace_module on Hugging Face transformers models built from small configs (nothing downloaded).

The reference for every traced module shape is a real forward of the same model with forward hooks: the
trace runs on shapes only, the real run computes, and both must agree module by module.
"""

import pytest
import torch
from torch import nn

import walkthrough as wt
from walkthrough.trace import op_tap
from walkthrough.trace import tracer as trace

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()  # small configs with GPT-2's default token ids make it warn

B, L_SRC, L_TGT, V = 2, 5, 3, 100


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=V, n_positions=32, n_embd=24, n_layer=2, n_head=4)
    return transformers.GPT2LMHeadModel(cfg).eval()


def llama():
    cfg = transformers.LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return transformers.LlamaForCausalLM(cfg).eval()


def marian():
    cfg = transformers.MarianConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
                                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
                                    decoder_ffn_dim=48, max_position_embeddings=32, pad_token_id=V - 1,
                                    decoder_start_token_id=V - 1)
    return transformers.MarianMTModel(cfg).eval()


def ids(length):
    return torch.randint(0, V - 1, (B, length), generator=torch.Generator().manual_seed(length))


def padded_mask(length):
    mask = torch.ones(B, length, dtype=torch.long)
    mask[1, :2] = 0  # the second sequence is left-padded: the real run must build the mask too
    return mask


def inputs_of(name, with_mask):
    if name == "marian":
        kwargs = dict(input_ids=ids(L_SRC), decoder_input_ids=ids(L_TGT))
        if with_mask:
            kwargs["attention_mask"] = padded_mask(L_SRC)
        return kwargs
    kwargs = dict(input_ids=ids(L_SRC))
    if with_mask:
        kwargs["attention_mask"] = padded_mask(L_SRC)
    return kwargs


MODELS = {"gpt2": gpt2, "llama": llama, "marian": marian}


class Scaled(nn.Module):
    def forward(self, x, scale=None):
        return x * scale


class ChecksItsMask(nn.Module):
    def forward(self, x, attention_mask=None):
        if attention_mask is not None and not bool(attention_mask.all()):  # reads the mask's values
            x = x * attention_mask[..., None]
        return x


class Outer(nn.Module):
    """Calls its block with keyword tensors, as transformers' models call theirs."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x, attention_mask=None):
        if isinstance(self.block, Scaled):
            return self.block(x, scale=torch.ones(x.shape[-1]))
        return self.block(x, attention_mask=attention_mask)


def module_shapes_of_a_real_run(model, kwargs):
    """(path, first output tensor's shape) for each submodule call of a real forward, in order of return."""
    paths = {part: path for path, part in model.named_modules() if path}
    calls = []

    def note(part, _args, output):
        tensors = op_tap.tensors_in(output)
        calls.append((paths[part], tuple(tensors[0].shape) if tensors else ()))

    handles = [part.register_forward_hook(note) for part in paths]
    try:
        with torch.no_grad():
            model(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def module_rows_in_order_of_return(rows):
    """The trace's module rows ordered as their calls returned (a row is placed when its call starts)."""
    module_rows = [(i, r) for i, r in enumerate(rows) if isinstance(r, trace.OpRow) and r.kind == "module"]
    ends = []
    for position, (i, row) in enumerate(module_rows):
        inside = [j for j, r in module_rows[position + 1:] if r.where.startswith(row.where + ".")]
        ends.append((max(inside, default=i), -i, row))
    return [(row.where, row.shape) for _end, _start, row in sorted(ends, key=lambda e: (e[0], e[1]))]


@pytest.mark.parametrize("with_mask", [False, True], ids=["no mask", "attention_mask"])
@pytest.mark.parametrize("name", MODELS)
def test_every_module_of_a_transformers_model_has_the_shape_a_real_run_gives(name, with_mask):
    model, kwargs = MODELS[name](), inputs_of(name, with_mask)
    assert model.config._attn_implementation == "sdpa"  # Marian with SDPA attention too
    rows = wt.trace_module(model, **kwargs)
    real = module_shapes_of_a_real_run(model, kwargs)
    assert len(real) > 20
    assert module_rows_in_order_of_return(rows) == real
    assert all(p.device.type == "cpu" for p in model.parameters()), "the caller's model is untouched"


@pytest.mark.parametrize("name", MODELS)
def test_an_attention_mask_reaches_attention_as_a_mask_of_every_query_and_key(name):
    """With a FakeTensor, transformers takes the path it takes for any mask values: it builds [B, 1, L_q, L_k]."""
    rows = wt.trace_module(MODELS[name](), **inputs_of(name, with_mask=True))
    attention = [r for r in rows if r.step == "aten.scaled_dot_product_attention"]
    assert len(attention) == (2 + 2 * 2 if name == "marian" else 2)  # encoder self; decoder self and cross
    first = attention[0]
    assert first.inputs[3] == (B, 1, L_SRC, L_SRC) and first.shape[0] == B


def test_a_dict_like_output_shows_its_tensors_shapes():
    rows = wt.trace_module(llama(), input_ids=ids(L_SRC))
    inner = next(r for r in rows if r.kind == "module" and r.step == "LlamaModel")
    assert inner.shape == (B, L_SRC, 32)  # BaseModelOutputWithPast.last_hidden_state, not []
    assert inner.outputs[0] == (B, L_SRC, 32)

    class ReturnsADict(nn.Module):
        def forward(self, x):
            return {"doubled": x * 2, "summed": x.sum(-1)}

    outer = nn.Sequential(ReturnsADict())
    row = next(r for r in wt.trace_module(outer, (3, 4)) if r.kind == "module")
    assert (row.shape, row.outputs) == ((3, 4), ((3, 4), (3,)))


def test_keyword_tensor_inputs_are_named_as_inputs():
    rows = wt.trace_module(llama(), input_ids=ids(L_SRC), attention_mask=padded_mask(L_SRC))
    inner = next(r for r in rows if r.kind == "module" and r.step == "LlamaModel")
    assert inner.meaning == f"from input_ids=[{B}, {L_SRC}], attention_mask=[{B}, {L_SRC}]"
    assert inner.inputs == ((B, L_SRC), (B, L_SRC))
    attention = next(r for r in rows if r.kind == "module" and r.step == "LlamaAttention")
    assert attention.meaning == (f"from hidden_states=[{B}, {L_SRC}, 32], attention_mask=[{B}, 1, {L_SRC}, {L_SRC}], "
                                 f"position_ids=[1, {L_SRC}], position_embeddings=([1, {L_SRC}, 8], [1, {L_SRC}, 8])")

    row = next(r for r in wt.trace_module(Outer(Scaled()), (3, 4)) if r.kind == "module")
    assert row.meaning == "from [3, 4], scale=[4]" and row.inputs == ((3, 4), (4,))


def test_the_roots_path_never_names_a_submodule_too():
    rows = wt.trace_module(llama(), input_ids=ids(L_SRC))
    inner_start = next(i for i, r in enumerate(rows) if r.kind == "module" and r.step == "LlamaModel")
    head_start = next(i for i, r in enumerate(rows) if r.where == "lm_head")
    assert all(inner_start <= i < head_start for i, r in enumerate(rows) if r.where == "model"), \
        "every row at 'model' is inside the submodule model"
    root_rows = [r for r in rows if r.where == "LlamaForCausalLM"]
    assert root_rows and all(r.kind == "op" for r in root_rows)
    shallow = wt.shape_table(rows, depth=1).rows
    assert {r.where for r in shallow} == {"LlamaForCausalLM", "model", "lm_head"}
    assert [r.step for r in shallow if r.kind == "module"] == ["LlamaModel", "Linear"]

    class Wrapper(nn.Module):  # a submodule named model, and one named like the class too
        def __init__(self):
            super().__init__()
            self.model, self.Wrapper = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.Wrapper(self.model(x)) + 1

    wrapped = wt.trace_module(Wrapper(), (2, 4))
    assert [r.where for r in wrapped if r.step == "aten.add"] == ["Wrapper'"]
    assert wt.trace_module(nn.Sequential(nn.Linear(4, 4)), (2, 4))[0].where == "0"  # no clash: the root is model


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_an_empty_caches_bookkeeping_is_folded_away(name):
    model = MODELS[name]()
    rows = wt.trace_module(model, input_ids=ids(L_SRC), use_cache=True)
    assert not [r for r in rows if 0 in r.shape], "no placeholder of an empty cache (detach_ [0])"
    assert not [r for r in rows if r.step == "aten.cat" and any(0 in s for s in r.inputs)], \
        "no cat of keys onto an empty cache"
    attention = [r for r in rows if r.step == "aten.scaled_dot_product_attention"]
    assert len(attention) == 2  # the cache was filled all the same: its rows alone are gone


def test_a_value_read_names_the_op_the_module_and_the_mask_to_leave_out():
    with pytest.raises(wt.TraceError) as caught:
        wt.trace_module(Outer(ChecksItsMask()), (2, 5, 8), attention_mask=torch.ones(2, 5))
    message = str(caught.value)
    assert message.startswith("in 'block': aten.is_nonzero right after aten.all -> [] needs a tensor's values")
    assert caught.value.where == "block" and caught.value.op == "aten.is_nonzero"
    assert "trace without attention_mask" in message


def test_without_fake_tensors_a_transformers_mask_stops_with_the_op_the_module_and_what_to_leave_out(monkeypatch):
    monkeypatch.setattr(trace, "new_fake_mode", lambda: None)  # a torch without the FakeTensor API: meta only
    model = gpt2()
    with pytest.raises(wt.TraceError) as caught:
        wt.trace_module(model, input_ids=ids(L_SRC), attention_mask=padded_mask(L_SRC))
    message = str(caught.value)
    assert message.startswith("in 'transformer': aten.is_nonzero")
    assert "trace without attention_mask" in message
    assert len(wt.trace_module(model, input_ids=ids(L_SRC))) > 50, "without the mask it traces"

"""Prompts of different lengths in one batch (left-padded, GPT) and sampling for the encoder-decoder.

References are independent of the package's batching: each prompt generated alone (no padding at all), the
position ids and the key mask written out from Python lists, K/V of a prompt cached alone, and the first
step's distribution recomputed by a full forward of ``model(src, [sos])``.
"""

import pytest
import torch

import walkthrough as wt
from walkthrough.tasks.language_model import prompt_ids

SOS, EOS, PAD = wt.Vocab.sos_id, wt.Vocab.eos_id, wt.Vocab.pad_id


def tiny_gpt(seed: int = 0, vocab: int = 13, positions: str = "rope") -> wt.GPT:
    """A random GPT with grouped-query attention: 4 query heads share 2 K/V heads."""
    torch.manual_seed(seed)
    return wt.GPT(wt.GPTConfig(vocab_size=vocab, d_model=32, num_heads=4, num_kv_heads=2, d_ff=64, num_layers=2,
                               max_len=40, dropout=0.0, pad_id=PAD, positions=positions)).eval()


def tiny_model(seed: int = 0, vocab: int = 13) -> wt.Transformer:
    torch.manual_seed(seed)
    cfg = wt.ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=32, num_heads=4, d_ff=64,
                         num_layers=2, max_len=40, dropout=0.0, pad_id=PAD)
    return wt.Transformer(cfg).eval()


def shipped_gpt() -> tuple[wt.GPT, list[list[int]]]:
    """Notebook 09's GPT and eight real prompts of 1..8 ids (``<sep>`` alone, then numerals of 1..7 characters)."""
    trainer = wt.load_checkpoint(wt.shipped_file("checkpoints", "gpt_numerals.pt"))
    texts = [wt.chinese_numeral(n) for n in (35, 9999, 5, 1050, 305, 8901, 30)]  # 1..7 characters, shuffled
    prompts = [prompt_ids(text, trainer.vocab) for text in texts] + [prompt_ids("", trainer.vocab)]  # + <sep>
    return trainer.model.eval(), prompts


def random_prompts(vocab: int = 13) -> list[list[int]]:
    """Eight prompts of lengths 1..8, in shuffled order, no PAD inside."""
    gen = torch.Generator().manual_seed(3)
    return [torch.randint(4, vocab, (length,), generator=gen).tolist() for length in (3, 8, 1, 5, 2, 7, 4, 6)]


def assert_each_row_is_its_prompt_alone(model, prompts, batched, max_new_tokens, use_cache):
    """Row b without its left padding = the prompt generated alone, then PAD where the batch ran on."""
    width = max(len(p) for p in prompts)
    assert batched.shape[0] == len(prompts) and batched.shape[1] <= width + max_new_tokens
    for prompt, row in zip(prompts, batched):
        alone = wt.greedy_decode(model, torch.tensor([prompt]), max_new_tokens, eos_id=EOS, use_cache=use_cache)[0]
        assert row[:width - len(prompt)].eq(PAD).all()
        ours = row[width - len(prompt):]
        assert torch.equal(ours[:len(alone)], alone), (prompt, ours.tolist(), alone.tolist())
        assert ours[len(alone):].eq(PAD).all()


# ---- left_pad -------------------------------------------------------------------------------------------

def test_left_pad_puts_pad_before_each_prompt():
    assert wt.left_pad([[5, 6, 7], [8], [9, 10]], PAD).tolist() == [[5, 6, 7], [PAD, PAD, 8], [PAD, 9, 10]]
    assert wt.left_pad([[5]], pad_id=3).dtype == torch.long
    with pytest.raises(ValueError, match="at least one id each"):
        wt.left_pad([[5], []])
    with pytest.raises(ValueError, match="at least one id each"):
        wt.left_pad([])


# ---- a batch of prompts of lengths 1..8 = each prompt alone --------------------------------------------

@pytest.mark.parametrize("use_cache", [True, False])
def test_the_shipped_gpt_gives_each_prompt_of_a_left_padded_batch_its_own_tokens(use_cache):
    model, prompts = shipped_gpt()
    assert sorted(len(p) for p in prompts) == list(range(1, 9))
    batched = wt.greedy_decode(model, wt.left_pad(prompts, PAD), 10, eos_id=EOS, use_cache=use_cache)
    assert_each_row_is_its_prompt_alone(model, prompts, batched, 10, use_cache)
    assert batched[:, -1].eq(PAD).any()  # some rows ended (eos) before others: the batch filled them with PAD


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_random_gqa_gpt_gives_each_prompt_of_a_left_padded_batch_its_own_tokens(use_cache):
    model, prompts = tiny_gpt(), random_prompts()
    batched = wt.greedy_decode(model, wt.left_pad(prompts, PAD), 12, eos_id=EOS, use_cache=use_cache)
    assert_each_row_is_its_prompt_alone(model, prompts, batched, 12, use_cache)


def test_cached_and_uncached_batched_generation_agree_and_logits_match_alone():
    model, prompts = tiny_gpt(seed=1), random_prompts()
    ids = wt.left_pad(prompts, PAD)
    cached = wt.greedy_decode(model, ids, 12, eos_id=EOS)
    assert torch.equal(cached, wt.greedy_decode(model, ids, 12, eos_id=EOS, use_cache=False))
    with torch.no_grad():
        logits = model(ids)  # [B, L, V], no cache
        for b, prompt in enumerate(prompts):
            alone = model(torch.tensor([prompt]))[0]  # [L_p, V]
            torch.testing.assert_close(logits[b, ids.size(1) - len(prompt):], alone, rtol=1e-5, atol=1e-5)


def test_the_cache_of_a_padded_row_holds_the_keys_and_values_of_its_prompt_alone():
    model, prompts = tiny_gpt(seed=2), random_prompts()
    ids = wt.left_pad(prompts, PAD)
    cache = model.new_cache(len(prompts))
    with torch.no_grad():
        model(ids, cache)
        for b, prompt in enumerate(prompts):
            alone = model.new_cache(1)
            model(torch.tensor([prompt]), alone)
            for ours, theirs in zip(cache.layers, alone.layers):  # RoPE turned K by the row's own positions
                real = slice(ids.size(1) - len(prompt), None)
                torch.testing.assert_close(ours.self_attn.k[b:b + 1, :, real], theirs.self_attn.k, rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(ours.self_attn.v[b:b + 1, :, real], theirs.self_attn.v, rtol=1e-5, atol=1e-5)


# ---- the position ids and the key mask of one step -----------------------------------------------------

def leading_pads(row: list[int]) -> int:
    return next(i for i, token in enumerate(row) if token != PAD)


def expected_positions(rows: list[list[int]]) -> list[list[int]]:
    """Each row counts from its first real token; the PAD before it get 0."""
    return [[max(0, i - leading_pads(row)) for i in range(len(row))] for row in rows]


def expected_mask(rows: list[list[int]], queries: int) -> list:
    """[B, 1, n, t]: the last n positions ask; a key is allowed if it is real and not in the future."""
    t = len(rows[0])
    return [[[[row[k] != PAD and k <= q for k in range(t)] for q in range(t - queries, t)]] for row in rows]


def spy_on_self_attention(model: wt.GPT) -> list[dict]:
    """Every self-attention call's mask and positions, as the model passed them."""
    calls = []

    def keep(module, args, kwargs):
        mask, positions = args[3], args[5]
        calls.append({"mask": mask.clone(), "positions": positions.clone()})

    for layer in model.decoder.layers:
        layer.self_attn.register_forward_pre_hook(keep, with_kwargs=True)
    return calls


def test_one_prefill_and_one_cached_step_use_the_position_ids_and_key_mask_written_out():
    model, prompts = tiny_gpt(), random_prompts()
    ids = wt.left_pad(prompts, PAD)
    calls = spy_on_self_attention(model)
    cache = model.new_cache(len(prompts))
    with torch.no_grad():
        first = model(ids, cache)[:, -1].argmax(-1)  # [B]
        prefill = calls[:]
        calls.clear()
        model(first[:, None], cache)
    rows = ids.tolist()
    assert len(prefill) == len(calls) == len(model.decoder.layers)  # every layer, the same inputs
    for call in prefill:
        assert call["positions"].tolist() == expected_positions(rows)
        assert call["mask"].tolist() == expected_mask(rows, len(rows[0]))
    rows = [row + [token] for row, token in zip(rows, first.tolist())]
    for call in calls:
        assert call["positions"].tolist() == [[p[-1]] for p in expected_positions(rows)]
        assert call["mask"].tolist() == expected_mask(rows, 1)
        assert call["mask"].shape == (len(rows), 1, 1, ids.size(1) + 1)  # the cache grows for all rows at once
    assert wt.position_ids(torch.tensor(rows), PAD).tolist() == expected_positions(rows)
    assert wt.position_ids(torch.tensor(rows), PAD, 1).tolist() == [[p[-1]] for p in expected_positions(rows)]


def test_apply_rope_with_positions_turns_each_row_by_its_own_offset():
    x = torch.randn(3, 2, 4, 8, generator=torch.Generator().manual_seed(0))  # [B, H, L, d_k]
    offsets = [0, 5, 2]
    positions = torch.tensor([[o + i for i in range(4)] for o in offsets])  # [B, L]
    rotated = wt.apply_rope(x, positions=positions)
    for b, offset in enumerate(offsets):
        torch.testing.assert_close(rotated[b:b + 1], wt.apply_rope(x[b:b + 1], offset))
    with pytest.raises(TypeError, match="positions must be a tensor of whole numbers"):
        wt.apply_rope(x, positions=positions.float())
    with pytest.raises(ValueError, match=r"positions must be \[B, L\] = \[3, 4\]"):
        wt.apply_rope(x, positions=positions[:, :3])
    with pytest.raises(ValueError, match="positions must be >= 0"):
        wt.apply_rope(x, positions=positions - 3)


def test_positions_are_refused_by_an_attention_without_rope():
    attention = wt.MultiHeadAttention(16, 2)
    x = torch.randn(1, 3, 16)
    with pytest.raises(ValueError, match="positions are for rotary attention"):
        attention(x, x, x, positions=torch.zeros(1, 3, dtype=torch.long))


# ---- bad prompts: refused before any work --------------------------------------------------------------

def count_forwards(model) -> list[int]:
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    return calls


@pytest.mark.parametrize("rows,match", [
    ([[5, 6, PAD], [7, 8, 9]], r"rows \[0\] have PAD \(id 0\) after their first token: pad prompts .* on the left, "
                               r"e\.g\. wt\.left_pad\(prompts, pad_id\)"),
    ([[5, PAD, 6], [7, 8, 9]], r"rows \[0\] have PAD"),
    ([[PAD, 5, PAD, 6]], r"rows \[0\] have PAD"),
    ([[5, 6], [PAD, PAD], [PAD, 7]], r"prompt rows \[1\] hold only PAD \(id 0\): give every row at least one token"),
])
def test_right_padding_pad_inside_and_empty_rows_are_refused_before_any_work(rows, match):
    model = tiny_gpt()
    forwards = count_forwards(model)
    with pytest.raises(ValueError, match=match):
        wt.sample_decode(model, torch.tensor(rows), 4, eos_id=EOS, temperature=0)
    assert not forwards


def test_left_padding_is_refused_for_a_gpt_with_a_position_table():
    model = tiny_gpt(positions="sinusoidal")
    forwards = count_forwards(model)
    with pytest.raises(ValueError, match=r"left-padded.*positions='sinusoidal'.*one length together"):
        wt.greedy_decode(model, wt.left_pad([[5, 6], [7]], PAD), 4)
    assert not forwards
    assert wt.greedy_decode(model, torch.tensor([[5, 6], [7, 8]]), 4).shape == (2, 6)  # no padding: fine


# ---- sampling for the encoder-decoder: sample_decode ---------------------------------------------------

def source(batch: int = 4, length: int = 6, vocab: int = 13) -> torch.Tensor:
    src = torch.randint(4, vocab, (batch, length), generator=torch.Generator().manual_seed(1))
    for row in range(1, batch):
        src[row, length - row:] = PAD  # rows of lengths 6, 5, 4, ...
    return src


@pytest.mark.parametrize("use_cache", [True, False])
def test_sample_decode_at_temperature_zero_is_greedy_decode(use_cache):
    model, src = tiny_model(), source()
    greedy = wt.greedy_decode(model, src, 10, SOS, EOS, use_cache=use_cache)
    assert torch.equal(wt.sample_decode(model, src, 10, SOS, EOS, temperature=0, use_cache=use_cache), greedy)
    shipped = wt.load_checkpoint(wt.shipped_file("checkpoints", "numerals.pt"))
    src = wt.pad_batch([shipped.src_vocab.encode(wt.chinese_tokens(zh)) for zh, _ in wt.held_out_pairs(16)])
    assert torch.equal(wt.sample_decode(shipped.model, src, 14, SOS, EOS, temperature=0, use_cache=use_cache),
                       wt.greedy_decode(shipped.model, src, 14, SOS, EOS, use_cache=use_cache))


def test_sample_decode_reproduces_with_a_seed_with_and_without_the_cache():
    model, src = tiny_model(), source()

    def draw(seed, use_cache=True):
        return wt.sample_decode(model, src, 10, SOS, EOS, temperature=1.3, top_k=6, top_p=0.95,
                                generator=torch.Generator().manual_seed(seed), use_cache=use_cache)

    first = draw(7)
    assert first[:, 0].eq(SOS).all() and first.size(1) <= 11
    assert torch.equal(first, draw(7)) and torch.equal(first, draw(7, use_cache=False))
    assert not torch.equal(first, wt.greedy_decode(model, src, 10, SOS, EOS))  # it did sample
    for row in first.tolist():  # after eos, only PAD
        if EOS in row:
            assert all(token == PAD for token in row[row.index(EOS) + 1:])


def test_sample_decode_draws_the_first_token_from_the_filtered_distribution():
    model = tiny_model(seed=3)
    src = source(batch=1).expand(20_000, -1)  # one sentence, 20 000 draws
    draws = wt.sample_decode(model, src, 1, SOS, EOS, temperature=1.5, top_k=5,
                             generator=torch.Generator().manual_seed(0))[:, 1]  # [20000]
    with torch.no_grad():
        logits = model(src[:1], torch.tensor([[SOS]]))[0, -1]  # [V], a full forward
    expected = torch.softmax(wt.filter_logits(logits / 1.5, top_k=5), -1)
    observed = torch.bincount(draws, minlength=13) / 20_000
    assert set(draws.unique().tolist()) <= set(torch.nonzero(expected).flatten().tolist())
    torch.testing.assert_close(observed, expected, atol=0.015, rtol=0)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"temperature": -1.0}, ValueError, "temperature must be a finite number >= 0"),
    ({"temperature": float("nan")}, ValueError, "temperature must be a finite number >= 0"),
    ({"top_k": 0}, ValueError, "top_k"),
    ({"top_k": 14}, ValueError, "top_k=14 is more than"),
    ({"top_p": 1.5}, ValueError, r"top_p must be in \(0, 1\]"),
    ({"generator": 5}, TypeError, r"generator must be a torch\.Generator"),
])
def test_bad_sampling_input_to_sample_decode_is_refused_before_any_work(kwargs, error, match):
    model = tiny_model()
    forwards = count_forwards(model.encoder)
    with pytest.raises(error, match=match):
        wt.sample_decode(model, source(), 5, SOS, EOS, **kwargs)
    assert not forwards


def test_sample_decode_says_which_ids_each_model_takes():
    with pytest.raises(TypeError, match=r"a GPT continues its prompt and takes no sos_id"):
        wt.sample_decode(tiny_gpt(), torch.ones(1, 2, dtype=torch.long), 3, SOS, EOS)
    with pytest.raises(TypeError, match=r"an encoder-decoder starts its target with a start token: pass sos_id"):
        wt.sample_decode(tiny_model(), torch.ones(1, 2, dtype=torch.long), 3)

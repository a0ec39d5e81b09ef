"""Decoding with a key/value cache (notebook 08): the cached path gives what recomputing gives.

The reference is a plain loop over ``model(src, prefix)`` that shares no code with ``greedy_steps``:
every step re-runs the whole model on the whole prefix and takes the last position's argmax.
"""


import pytest
import torch

import walkthrough as wt
from walkthrough.model.cache import DecoderLayerCache

SOS, EOS, PAD = wt.Vocab.sos_id, wt.Vocab.eos_id, wt.Vocab.pad_id
CHECKPOINT = wt.shipped_file("checkpoints", "numerals.pt")


def tiny_model(max_len: int = 40, layers: int = 2, vocab: int = 31, seed: int = 0) -> wt.Transformer:
    torch.manual_seed(seed)
    cfg = wt.ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=32, num_heads=4, d_ff=64,
                         num_layers=layers, max_len=max_len, dropout=0.0, pad_id=PAD)
    return wt.Transformer(cfg).eval()


def never_ending(model: wt.Transformer) -> wt.Transformer:
    """Make <eos> lose every argmax, so decoding runs all max_len steps."""
    with torch.no_grad():
        model.output_head.proj.bias[EOS] = -1e4
    return model


def padded_source(batch: int = 5, length: int = 9, vocab: int = 31, seed: int = 1) -> torch.Tensor:
    """[B, L_src] with rows of lengths length, length-1, ..., padded at the end."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (batch, length), generator=generator)
    for row in range(batch):
        src[row, length - row % length:] = PAD
    return src


@torch.no_grad()
def plain_loop(model, src, max_len, sos_id=SOS, eos_id=EOS):
    """The reference: re-run ``model(src, prefix)`` on the whole prefix every step -> (ids [B, T], [probs [B, V]])."""
    ys = torch.full((src.size(0), 1), sos_id, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    all_probs = []
    for _ in range(max_len):
        probs = model(src, ys)[:, -1].softmax(-1)  # [B, V]
        next_id = torch.where(finished, model.cfg.pad_id, probs.argmax(-1))
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        all_probs.append(probs)
        finished = finished | (next_id == eos_id)
        if finished.all():
            break
    return ys, all_probs


def decoded(model, src, max_len, use_cache, sos_id=SOS, eos_id=EOS):
    steps = list(wt.greedy_steps(model, src, max_len, sos_id, eos_id, use_cache=use_cache))
    return steps[-1][0], [probs for _, probs in steps]


def assert_same_decoding(model, src, max_len, sos_id=SOS, eos_id=EOS):
    """Cached, recomputed and the plain loop: tokens exactly equal, probabilities within float tolerance."""
    reference, reference_probs = plain_loop(model, src, max_len, sos_id, eos_id)
    for use_cache in (True, False):
        ids, probs = decoded(model, src, max_len, use_cache, sos_id, eos_id)
        assert torch.equal(ids, reference), f"use_cache={use_cache}"
        assert len(probs) == len(reference_probs)
        for step, (ours, theirs) in enumerate(zip(probs, reference_probs)):
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6, msg=f"step {step}, use_cache={use_cache}")
    return reference


# ---------------------------------------------------------------------------------------------------
# Cached = recomputed = plain loop.

def test_padded_batch_runs_every_step_the_same_way():
    model = never_ending(tiny_model())
    src = padded_source()
    assert (src == PAD).any(dim=1).sum() >= 3  # several rows really are padded
    ids = assert_same_decoding(model, src, max_len=12)
    assert ids.shape == (5, 13)


def test_rows_that_finish_early_are_padded_the_same_way():
    model = tiny_model()
    src = padded_source(batch=6)
    free_run, _ = plain_loop(model, src, 10, eos_id=-1)  # no token ends a row
    # <eos> := row 0's first token (ids are ids: the model does not know which one is <eos>)
    eos = int(free_run[0, 1])
    assert eos not in (PAD, SOS)
    ids = assert_same_decoding(model, src, max_len=10, eos_id=eos)
    ended_at = [(row == eos).nonzero()[0, 0].item() if (row == eos).any() else None for row in ids]
    assert ended_at[0] == 1
    assert any(end is None or end > ended_at[0] for end in ended_at)  # others go on after row 0 stopped
    assert (ids[0, ended_at[0] + 1:] == PAD).all()


def test_decoding_up_to_the_model_max_len():
    model = never_ending(tiny_model(max_len=24))
    src = padded_source(batch=3)
    ids = assert_same_decoding(model, src, max_len=24)
    assert ids.shape == (3, 25)  # <sos> + 24 new tokens: positions 0..23 were all used
    with pytest.raises(ValueError, match=r"max_new_tokens=25 need.*max_len=24"):
        list(wt.greedy_steps(model, src, 25, SOS, EOS))


def test_greedy_decode_agrees_with_greedy_steps_in_both_modes():
    model = never_ending(tiny_model())
    src = padded_source()
    cached = wt.greedy_decode(model, src, 7, SOS, EOS)
    assert torch.equal(cached, wt.greedy_decode(model, src, 7, SOS, EOS, use_cache=False))
    assert torch.equal(cached, plain_loop(model, src, 7)[0])


@pytest.fixture(scope="module")
def phrase_trainer():
    """A tiny model that has memorised the two phrase pairs (as in notebook 06)."""
    trainer = wt.Trainer(wt.TrainSettings(d_model=32, num_heads=4, d_ff=64, num_layers=1, steps=60, warmup=10,
                                          peak_lr=1e-2, smoothing=0.0), pairs=wt.PHRASES)
    trainer.run(progress=False)
    return trainer


def test_trained_phrase_model_translates_the_same_with_and_without_cache(phrase_trainer):
    src = wt.pad_batch([phrase_trainer.src_vocab.encode(list(zh)) for zh, _ in wt.PHRASES])  # [2, L_src], padded
    ids = assert_same_decoding(phrase_trainer.model, src, max_len=10)
    words = [" ".join(phrase_trainer.tgt_vocab.decode(row)) for row in ids]
    assert words == [en for _, en in wt.PHRASES]  # trained: it really translates, and rows end at different steps


@pytest.fixture(scope="module")
def numeral_trainer():
    """The notebook-07 model: the shipped checkpoint (the series ships it; a missing one fails here)."""
    return wt.load_checkpoint(CHECKPOINT)


def test_trained_numeral_model_decodes_the_same_with_and_without_cache(numeral_trainer):
    pairs = wt.held_out_pairs(16)
    src = wt.pad_batch([numeral_trainer.src_vocab.encode(list(zh)) for zh, _ in pairs])
    assert (src == PAD).any()
    assert_same_decoding(numeral_trainer.model, src, max_len=20)


# ---------------------------------------------------------------------------------------------------
# The new token's position.

def test_new_token_gets_the_positional_encoding_of_its_position_not_zero():
    model = tiny_model()
    src = padded_source(batch=3)
    prefix = torch.randint(4, 31, (3, 6))  # [B, t + 1]
    t = prefix.size(1) - 1
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(prefix, memory, src)[:, -1]  # [B, D]: the last position, recomputed

        def warm_cache():
            cache = model.new_cache(src)
            model.decode(prefix[:, :t], memory, src, cache)  # positions 0..t-1 in the cache
            return cache

        cache = warm_cache()
        cached = model.decode(prefix[:, t:], memory, src, cache)[:, -1]  # the new token alone
        torch.testing.assert_close(cached, full, rtol=1e-4, atol=1e-5)

        # The slip: embedding the new token as if it were position 0.
        slipped_cache = warm_cache()
        y = model.tgt_embed(prefix[:, t:], 0)
        mask = wt.decoder_self_mask(slipped_cache.append(prefix[:, t:]), PAD, new_positions=1)
        slipped = model.decoder(y, memory, mask, wt.padding_mask(src, PAD), slipped_cache)[:, -1]
    assert not torch.allclose(slipped, full, rtol=1e-3, atol=1e-3)
    pe = model.tgt_embed.position.pe
    torch.testing.assert_close(model.tgt_embed(prefix[:, t:], t) - model.tgt_embed(prefix[:, t:], 0),
                               (pe[t] - pe[0]).expand(3, 1, -1))


# ---------------------------------------------------------------------------------------------------
# What the caches hold.

def test_self_cache_grows_by_one_position_and_cross_cache_is_made_once():
    model = never_ending(tiny_model(layers=2))
    src = padded_source(batch=4, length=7)
    heads, d_k = model.cfg.num_heads, model.cfg.d_model // model.cfg.num_heads
    memory = model.encode(src)
    cache = model.new_cache(src)
    ys = torch.full((4, 1), SOS)
    first_cross = None
    with torch.no_grad():
        for t in range(1, 9):
            logits = model.output_head(model.decode(ys[:, -1:], memory, src, cache))  # [B, 1, V]
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            assert len(cache) == t and cache.ids.shape == (4, t)
            for layer_cache in cache.layers:
                assert layer_cache.self_attn.k.shape == layer_cache.self_attn.v.shape == (4, heads, t, d_k)
                assert layer_cache.cross_attn.k.shape == layer_cache.cross_attn.v.shape == (4, heads, 7, d_k)
            crosses = [(c.cross_attn.k, c.cross_attn.v) for c in cache.layers]
            if first_cross is None:
                first_cross = crosses
            assert all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(crosses, first_cross))  # the same objects
    # The cross cache holds exactly the memory's keys, split into heads.
    attn = model.decoder.layers[0].cross_attn
    expected_k = attn.w_k(memory).view(4, 7, heads, d_k).transpose(1, 2)
    torch.testing.assert_close(cache.layers[0].cross_attn.k, expected_k)


def test_a_cached_step_needs_no_causal_mask():
    ids = torch.tensor([[SOS, 5, 6, 7], [SOS, 8, PAD, PAD]])  # [B, t]
    step_mask = wt.decoder_self_mask(ids, PAD, new_positions=1)  # [B, 1, 1, t]
    assert step_mask.shape == (2, 1, 1, 4)
    assert torch.equal(step_mask[:, 0, 0], ids != PAD)  # padding alone decides
    assert torch.equal(step_mask[:, 0], wt.decoder_self_mask(ids, PAD)[:, 0, -1:])  # the full mask's last row


# ---------------------------------------------------------------------------------------------------
# Misuse.

def test_cache_from_another_batch_size_is_refused():
    model = tiny_model()
    src = padded_source(batch=3)
    cache = model.new_cache(src)
    memory = model.encode(src)
    model.decode(torch.full((3, 1), SOS), memory, src, cache)
    smaller = src[:2]
    with pytest.raises(ValueError, match=r"batch of 3.*2 rows.*new cache"):
        model.decode(torch.full((2, 1), SOS), model.encode(smaller), smaller, cache)


def test_cache_from_another_model_is_refused():
    model, other = tiny_model(seed=0), tiny_model(seed=1)
    src = padded_source(batch=2)
    cache = other.new_cache(src)
    with pytest.raises(ValueError, match="another model"):
        model.decode(torch.full((2, 1), SOS), model.encode(src), src, cache)


def test_attention_refuses_a_layer_cache_of_another_shape():
    wide, narrow = wt.MultiHeadAttention(32, 4), wt.MultiHeadAttention(32, 8)
    cache = DecoderLayerCache().self_attn
    x = torch.randn(2, 1, 32)
    wide(x, x, x, cache=cache)
    with pytest.raises(ValueError, match=r"4 K/V heads of 8 features.*8 of 4.*another model"):
        narrow(x, x, x, cache=cache)
    with pytest.raises(ValueError, match="batch of 2 but this call has 3"):
        wide(torch.randn(3, 1, 32), torch.randn(3, 1, 32), torch.randn(3, 1, 32), cache=cache)


def test_a_step_beyond_max_len_is_refused():
    model = tiny_model(max_len=5)
    src = padded_source(batch=2, length=4)
    memory = model.encode(src)
    cache = model.new_cache(src)
    for _ in range(5):
        model.decode(torch.full((2, 1), SOS), memory, src, cache)
    with pytest.raises(ValueError, match=r"positions 5\.\.5 go past max_len=5"):
        model.decode(torch.full((2, 1), SOS), memory, src, cache)
    assert len(cache) == 5  # the refused step left the cache as it was


def test_a_changed_source_is_refused():
    model = tiny_model()
    src = padded_source(batch=2)
    cache = model.new_cache(src)
    model.decode(torch.full((2, 1), SOS), model.encode(src), src, cache)
    changed = src.clone()
    changed[0, 0] = changed[0, 0] % 30 + 1
    with pytest.raises(ValueError, match=r"source changed.*new_cache"):
        model.decode(torch.full((2, 1), SOS), model.encode(changed), changed, cache)
    longer = torch.cat([src, src[:, :1]], dim=1)
    with pytest.raises(ValueError, match="source changed"):
        model.decode(torch.full((2, 1), SOS), model.encode(longer), longer, cache)


def test_a_cache_that_is_not_one_is_refused():
    model = tiny_model()
    src = padded_source(batch=2)
    with pytest.raises(TypeError, match="new_cache"):
        model.decode(torch.full((2, 1), SOS), model.encode(src), src, cache={})


# ---------------------------------------------------------------------------------------------------
# The trace of a cached step.

def _shapes(rows, where):
    return {r.step: r.shape for r in rows if r.where == where}


def test_trace_of_a_cached_step_at_the_source_sizes():
    cfg = wt.ModelConfig.paper_base()
    for t in (1, 5, 64):
        rows = wt.trace_shapes(cfg, batch=32, src_len=10, step=t)
        self_attn = _shapes(rows, "decoder.layers.0.self_attn")
        cross = _shapes(rows, "decoder.layers.0.cross_attn")
        assert self_attn["Q transpose"] == (32, 8, 1, 64)
        assert self_attn["K in the cache"] == (32, 8, t, 64)
        assert self_attn["scores Q·Kᵀ/√d_k"] == (32, 8, 1, t)
        assert cross["K in the cache"] == (32, 8, 10, 64)
        assert cross["scores Q·Kᵀ/√d_k"] == (32, 8, 1, 10)
        assert _shapes(rows, "tgt_embed")["ids"] == (32, 1)  # one new token per sentence
        assert _shapes(rows, "output_head")["logits"] == (32, 1, 30000)
        assert sum(r.step == "K in the cache" for r in rows) == 2 * 6  # every layer, both attentions
        # the memory's K/V are projected at step 1 only; later steps read them from the cache
        assert ("K = X·W_k" in cross) == (t == 1)
        assert not any(r.where.startswith("encoder") for r in rows)  # the encoder ran once, before decoding


def test_trace_of_a_cached_step_at_a_huge_size():
    cfg = wt.ModelConfig(src_vocab_size=50000, tgt_vocab_size=50000, d_model=12288, num_heads=96, d_ff=49152,
                         num_layers=96, max_len=4096)
    rows = wt.trace_shapes(cfg, batch=64, src_len=512, step=2048)
    assert _shapes(rows, "decoder.layers.95.self_attn")["scores Q·Kᵀ/√d_k"] == (64, 96, 1, 2048)
    assert _shapes(rows, "decoder.layers.95.self_attn")["K in the cache"] == (64, 96, 2048, 128)
    assert _shapes(rows, "decoder.layers.95.cross_attn")["scores Q·Kᵀ/√d_k"] == (64, 96, 1, 512)


def test_trace_of_a_cached_step_refuses_bad_sizes():
    cfg = wt.ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                         max_len=8)
    with pytest.raises(ValueError, match=r"step=9.*max_len=8"):
        wt.trace_shapes(cfg, batch=2, src_len=3, step=9)
    with pytest.raises(ValueError, match="step"):
        wt.trace_shapes(cfg, batch=2, src_len=3, step=0)
    with pytest.raises(ValueError, match="batch"):
        wt.trace_shapes(cfg, batch=0, src_len=3, step=2)
    with pytest.raises(ValueError, match="src_len=9"):
        wt.trace_shapes(cfg, batch=2, src_len=9, step=2)
    with pytest.raises(TypeError, match="ModelConfig"):
        wt.trace_shapes("paper", batch=2, src_len=3, step=2)


# ---------------------------------------------------------------------------------------------------
# The notebook-08 explorer.

def test_cache_explorer_shows_a_cached_step_and_its_bytes():
    explorer = wt.widgets.cache_explorer()
    text = explorer.text()
    assert "⚠" not in text and "[image/png]" in text
    # the cached keys only (the rows its question asks about): self-attention's grow with t, cross-attention's do not
    assert "[32, 8, 5, 64]" in text and "[32, 8, 10, 64]" in text
    self_bytes = 2 * 6 * 32 * 8 * 5 * 64 * 4  # 2 × layers × B × H × t × d_k × float32
    assert f"= {self_bytes:,} bytes" in text and f"= {2 * 6 * 32 * 8 * 10 * 64 * 4:,} bytes" in text
    explorer.control("step").value = 9
    text = explorer.text()
    assert "[32, 8, 9, 64]" in text and "[32, 8, 10, 64]" in text and "[32, 8, 5, 64]" not in text
    assert f"= {self_bytes // 5 * 9:,} bytes" in text
    explorer.control("layers").value = 2
    assert f"= {self_bytes // 5 * 9 // 3:,} bytes" in explorer.text()


def test_cache_explorer_shows_a_bad_combination_as_a_message():
    explorer = wt.widgets.cache_explorer()
    explorer.control("heads").value = 7
    text = explorer.text()
    assert "⚠" in text and "not divisible" in text and "Traceback" not in text
    explorer.control("heads").value = 8
    assert "⚠" not in explorer.text()


def test_rope_with_a_filled_fixed_cache_rotates_the_queries_as_the_first_call_did():
    """A fixed (cross-attention style) cache reuses the first call's K and V: the queries must be rotated the
    same way at every call, or two calls on the same input differ (they did, by up to 0.107)."""
    torch.manual_seed(0)
    attention = wt.MultiHeadAttention(16, 2, rope=True).eval()
    x = torch.randn(2, 5, 16)  # [B, L, D]
    cache = wt.KVCache(grows=False)
    with torch.no_grad():
        first, second = attention(x, x, x, cache=cache), attention(x, x, x, cache=cache)
        torch.testing.assert_close(second, first)
        torch.testing.assert_close(first, attention(x, x, x))  # and both equal the uncached call


def test_a_failed_decoding_step_leaves_the_cache_as_it_was():
    """A float64 memory at the first step failed inside the decoder and left half a step in the cache (the count
    grown, only layer 0's keys made), so the next correct call failed with a mask-shape error."""
    model, src = tiny_model(), padded_source()
    memory = model.encode(src)
    cache = model.new_cache(src)
    sos = torch.full((src.size(0), 1), SOS)
    with torch.no_grad():
        with pytest.raises((ValueError, TypeError, RuntimeError)):
            model.decode(sos, memory.double(), src, cache)
        assert len(cache) == 0 and all(k is None for layer in cache.layers
                                       for k in (layer.self_attn.k, layer.cross_attn.k))
        torch.testing.assert_close(model.decode(sos, memory, src, cache), model.decode(sos, memory, src))


def test_a_step_that_fails_in_a_later_layer_is_undone_in_every_layer(monkeypatch):
    model, src = tiny_model(), padded_source()
    memory = model.encode(src)
    cache = model.new_cache(src)
    sos = torch.full((src.size(0), 1), SOS)
    with torch.no_grad():
        model.decode(sos, memory, src, cache)  # step 1 completes
        before = [(layer.self_attn.k, layer.self_attn.v, layer.cross_attn.k) for layer in cache.layers]

        def broken(*args, **kwargs):
            raise RuntimeError("out of memory (pretend)")

        monkeypatch.setattr(model.decoder.layers[1].feed_forward, "forward", broken)
        with pytest.raises(RuntimeError, match="pretend"):
            model.decode(sos, memory, src, cache)  # layer 0 has appended its keys by now
        monkeypatch.undo()
        assert len(cache) == 1
        assert all(layer.self_attn.k is k and layer.self_attn.v is v and layer.cross_attn.k is ck
                   for layer, (k, v, ck) in zip(cache.layers, before))
        step_2 = model.decode(sos, memory, src, cache)
    torch.testing.assert_close(step_2[:, -1], model.decode(torch.full((src.size(0), 2), SOS), memory, src)[:, -1])


def test_a_source_changed_in_place_after_new_cache_is_refused():
    model, src = tiny_model(), padded_source()
    memory = model.encode(src)
    cache = model.new_cache(src)
    with torch.no_grad():
        model.decode(torch.full((src.size(0), 1), SOS), memory, src, cache)
        src[0, 0] = (src[0, 0] + 1) % 31 or 5  # the same tensor object, other ids
        with pytest.raises(ValueError, match="the source changed"):
            model.decode(torch.full((src.size(0), 1), SOS), memory, src, cache)


def test_wrong_model_or_argument_for_a_cache_names_the_right_function():
    model = tiny_model()
    with pytest.raises(TypeError, match=r"new_cache\(src\).*source ids"):
        model.new_cache(3)
    with pytest.raises(TypeError, match=r"Transformer or a GPT.*Linear"):
        wt.DecodingCache(torch.nn.Linear(4, 4), 2)
    torch.manual_seed(0)
    gpt = wt.GPT(wt.GPTConfig(vocab_size=31, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=16)).eval()
    with pytest.raises(TypeError, match=r"a GPT continues its prompt and takes no sos_id"):
        wt.greedy_decode(gpt, torch.ones(1, 2, dtype=torch.long), 3, SOS, EOS)
    with pytest.raises(TypeError, match=r"an encoder-decoder starts its target with a start token: pass sos_id"):
        wt.greedy_decode(model, torch.ones(1, 2, dtype=torch.long), 3)
    with pytest.raises(TypeError, match=r"Transformer \(with src and sos_id\) or a walkthrough.GPT.*Linear"):
        wt.greedy_decode(torch.nn.Linear(4, 4), torch.ones(1, 2, dtype=torch.long), 3)
    with pytest.raises(TypeError, match=r"whole number.*new_cache\(batch\)"):
        gpt.new_cache(torch.ones(1, 2, dtype=torch.long))


def test_greedy_decode_holds_one_step_of_logits_at_a_time(monkeypatch):
    """Each step's [B, V] logits must be free once the next step runs (all were kept: ~938 MiB at 256 tokens,
    B = 32, V = 30000)."""
    import weakref

    from walkthrough.model import decoding

    alive_counts = []
    kept = []
    loop = decoding._decode

    def watched(*args, **kwargs):
        for ys, logits in loop(*args, **kwargs):
            kept.append(weakref.ref(logits))
            alive_counts.append(sum(ref() is not None for ref in kept))
            del logits
            yield ys, None if not kept else kept[-1]()

    monkeypatch.setattr(decoding, "_decode", watched)
    model, src = never_ending(tiny_model()), padded_source()
    out = wt.greedy_decode(model, src, max_new_tokens=12, sos_id=SOS, eos_id=EOS)
    assert out.shape == (src.size(0), 13) and len(alive_counts) == 12
    assert max(alive_counts) <= 2, alive_counts  # the step being handed over and, at most, the one before


def test_max_len_is_not_a_decoding_argument():
    """max_len is the position table's size (cfg.max_len); how many tokens to decode is max_new_tokens only."""
    model, src = tiny_model(), padded_source()
    with pytest.raises(TypeError, match="max_len"):
        wt.greedy_decode(model, src, max_len=5, sos_id=SOS, eos_id=EOS)


# ---------------------------------------------------------------------------------------------------
# Reordering rows (beam search's step), and the positions of a left-padded batch.

@torch.no_grad()
def test_reorder_with_rows_of_different_sources_gives_the_uncached_logits():
    """Rows swapped between two sources: the cross-attention K/V, the ids and the source all follow, so the
    next step equals the uncached run on the swapped batch; the old source order is refused, not mis-masked."""
    model = tiny_model()
    src = padded_source(batch=3, length=7)  # rows of 7, 6 and 5 real tokens: different sources, different masks
    memory = model.encode(src)
    cache = model.new_cache(src)
    prefix = torch.tensor([[SOS, 9, 11], [SOS, 5, 6], [SOS, 17, 4]])
    for t in range(prefix.size(1)):
        model.decode(prefix[:, t:t + 1], memory, src, cache)
    rows = [2, 0, 0]
    cache.reorder(torch.tensor(rows))
    moved, moved_prefix = src[rows], prefix[rows]
    step = torch.tensor([[7], [8], [9]])
    with pytest.raises(ValueError, match="the source changed"):
        model.decode(step, memory[rows], src, cache)
    cached = model.output_head(model.decode(step, memory[rows], moved, cache))[:, -1]  # [B, V]
    uncached = model(moved, torch.cat([moved_prefix, step], dim=1))[:, -1]  # [B, V]
    torch.testing.assert_close(cached, uncached, rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_reorder_takes_a_list_of_ints_as_the_same_index_as_a_tensor():
    model = tiny_model()
    src = padded_source(batch=2)
    by_list, by_tensor = model.new_cache(src), model.new_cache(src)
    for cache in (by_list, by_tensor):
        model.decode(torch.tensor([[SOS], [SOS]]), model.encode(src), src, cache)
    by_list.reorder([1, 0])
    by_tensor.reorder(torch.tensor([1, 0]))
    assert torch.equal(by_list.source, src[[1, 0]]) and torch.equal(by_list.source, by_tensor.source)
    assert torch.equal(by_list.layers[0].self_attn.k, by_tensor.layers[0].self_attn.k)
    assert torch.equal(by_list.layers[1].cross_attn.v, by_tensor.layers[1].cross_attn.v)
    with pytest.raises(TypeError, match=r"rows must be whole-number row indices, got \[1\.0, 0\.0\]"):
        by_list.reorder([1.0, 0.0])
    with pytest.raises(TypeError, match="rows must be a tensor of long ids or a list of ints"):
        by_list.reorder("10")
    with pytest.raises(ValueError, match=r"rows must be in \[0, 2\), got 0\.\.2"):
        by_list.reorder([2, 0])


@pytest.mark.parametrize("args, error, message", [
    ((torch.tensor([0, 0, 5, 6]), PAD), ValueError, r"ids must be \[B, t\].*got shape \[4\].*unsqueeze\(0\)"),
    ((torch.tensor([[0.0, 5.0]]), PAD), TypeError, "ids must be a tensor of integer token ids"),
    (([[0, 5]], PAD), TypeError, "got list"),
    ((torch.tensor([[0, 5], [5, 6]]), PAD, 3), ValueError, r"new_positions=3 is more than the 2 ids given"),
    ((torch.tensor([[0, 5], [5, 6]]), PAD, 0), ValueError, "new_positions must be at least 1"),
])
def test_position_ids_refuses_a_wrong_shape(args, error, message):
    with pytest.raises(error, match=message):
        wt.position_ids(*args)


def test_position_ids_of_a_left_padded_batch():
    ids = torch.tensor([[PAD, PAD, 5, 6], [5, 6, 7, 8]])
    assert wt.position_ids(ids, PAD).tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]
    assert wt.position_ids(ids, PAD, 1).tolist() == [[1], [3]]

"""FlashAttention by hand (notebook 13): exact against the plain attention and PyTorch's, without an [L_q, L_k]
tensor; the backward tile by tile against autograd; which tiles are computed; bad input; the pictures."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import walkthrough as wt
from walkthrough.model.flash import online_softmax_step


class Shapes(TorchDispatchMode):
    """Records the shape of every tensor any aten op returns."""

    def __init__(self):
        super().__init__()
        self.shapes, self.ops = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        self.ops.append(str(func))
        results = result if isinstance(result, (tuple, list)) else (result,)
        self.shapes += [tuple(r.shape) for r in results if isinstance(r, torch.Tensor)]
        return result


def inputs(batch, heads, L_q, L_k, d_k, d_v=None, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, L_q, d_k, generator=generator, dtype=dtype)  # [B, H, L_q, d_k]
    k = torch.randn(batch, heads, L_k, d_k, generator=generator, dtype=dtype)  # [B, H, L_k, d_k]
    v = torch.randn(batch, heads, L_k, d_v or d_k, generator=generator, dtype=dtype)  # [B, H, L_k, d_v]
    return q, k, v


def padding(batch, L_k, lengths):
    """[B, 1, 1, L_k], True on each sentence's first ``lengths[b]`` keys (0 = every key blocked)."""
    return (torch.arange(L_k)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


def full_mask(mask, causal, L_q, L_k):
    """The one mask the plain path needs for what flash_attention does with (mask, causal)."""
    allowed = torch.ones(L_q, L_k, dtype=torch.bool) if mask is None else mask
    return allowed & wt.causal_mask(L_k, queries=L_q) if causal else allowed


CASES = {  # name: (B, H, L_q, L_k, d_k, d_v, block_q, block_k, causal, key lengths or None)
    "square": (2, 3, 32, 32, 8, 8, 16, 16, False, None),
    "not multiples of the blocks": (2, 2, 37, 29, 8, 5, 16, 7, False, None),
    "cross-attention L_q < L_k": (2, 2, 5, 23, 6, 6, 4, 8, False, None),
    "cross-attention L_q > L_k": (1, 2, 30, 11, 6, 6, 8, 4, False, None),
    "padding": (3, 2, 21, 21, 8, 8, 8, 8, False, [21, 13, 5]),
    "causal": (2, 2, 40, 40, 8, 8, 16, 16, True, None),
    "causal, odd blocks": (1, 3, 41, 41, 8, 8, 6, 9, True, None),
    "causal, L_q < L_k (a cached chunk)": (2, 2, 7, 30, 8, 8, 4, 8, True, None),
    "causal and padding": (3, 2, 33, 33, 8, 8, 8, 16, True, [33, 20, 9]),
    "one block covers all": (2, 2, 9, 9, 4, 4, 64, 64, True, [9, 4]),
    "blocks of one": (1, 1, 6, 7, 3, 3, 1, 1, True, None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_equals_the_package_and_pytorch(case):
    batch, heads, L_q, L_k, d_k, d_v, block_q, block_k, causal, lengths = case
    q, k, v = inputs(batch, heads, L_q, L_k, d_k, d_v)
    mask = None if lengths is None else padding(batch, L_k, lengths)
    out, lse = wt.flash_attention(q, k, v, mask, causal, block_q, block_k)
    allowed = full_mask(mask, causal, L_q, L_k)
    ours, _ = wt.scaled_dot_product_attention(q, k, v, allowed)
    torch.testing.assert_close(out, ours, rtol=1e-5, atol=1e-5)
    pytorch = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # its bool mask: True = may attend too
    torch.testing.assert_close(out, pytorch, rtol=1e-5, atol=1e-5)
    scores = torch.where(allowed, q @ k.transpose(-2, -1) / math.sqrt(d_k), torch.finfo(q.dtype).min)
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), rtol=1e-5, atol=1e-5)
    assert out.shape == (batch, heads, L_q, d_v) and lse.shape == (batch, heads, L_q)


def test_causal_equals_pytorchs_is_causal():
    q, k, v = inputs(2, 4, 50, 50, 16)
    out, _ = wt.flash_attention(q, k, v, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-5, atol=1e-5)


def test_random_shapes():
    sizes = torch.Generator().manual_seed(1)
    for _ in range(6):
        batch, heads, L_q, L_k, d_k, block_q, block_k = (int(torch.randint(1, high, (), generator=sizes))
                                                         for high in (3, 4, 50, 50, 17, 20, 20))
        causal = bool(torch.randint(0, 2, (), generator=sizes))
        q, k, v = inputs(batch, heads, L_q, L_k, d_k)
        out, _ = wt.flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
        expected, _ = wt.scaled_dot_product_attention(q, k, v, full_mask(None, causal, L_q, L_k))
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_fully_blocked_rows_are_finite_and_as_the_package_gives(causal):
    """A sentence with no real key, and (causal) query rows whose only visible keys are padding, every tile of
    them computed or skipped: they attend to nothing (0), as the plain path gives."""
    q, k, v = inputs(3, 2, 24, 24, 8)
    mask = padding(3, 24, [0, 24, 24])
    mask = mask & (torch.arange(24) >= 10)  # keys 0-9 blocked: causal rows 0-9 see nothing
    out, lse = wt.flash_attention(q, k, v, mask, causal, block_q=8, block_k=8)
    allowed = full_mask(mask, causal, 24, 24)
    blocked_rows = ~allowed.expand(3, 2, 24, 24).any(-1)  # [B, H, L_q]
    assert blocked_rows.sum() == 2 * 24 + (2 * 2 * 10 if causal else 0)  # sentence 0, and causal rows 0-9
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    expected, _ = wt.scaled_dot_product_attention(q, k, v, allowed)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(out[blocked_rows], torch.zeros_like(out[blocked_rows]))


def test_causal_with_more_queries_than_keys_blocks_the_first_rows():
    q, k, v = inputs(1, 2, 20, 6, 4)
    out, _ = wt.flash_attention(q, k, v, causal=True, block_q=4, block_k=4)  # rows 0-13 see no key
    expected, _ = wt.scaled_dot_product_attention(q, k, v, wt.causal_mask(6, queries=20))
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_float64_to_the_last_digits():
    q, k, v = inputs(2, 2, 33, 47, 8, dtype=torch.float64)
    mask = padding(2, 47, [47, 30])
    out, _ = wt.flash_attention(q, k, v, mask, block_q=5, block_k=6)
    torch.testing.assert_close(out, wt.scaled_dot_product_attention(q, k, v, mask)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_no_tensor_as_large_as_the_scores(causal):
    L = 256
    q, k, v = inputs(1, 2, L, L, 16)
    with Shapes() as forward:
        out, lse = wt.flash_attention(q, k, v, padding(1, L, [200]), causal, block_q=32, block_k=32)
    with Shapes() as backward:
        wt.flash_attention_backward(q, k, v, out, lse, torch.ones_like(out), padding(1, L, [200]), causal, 32, 32)
    for recorded in (forward, backward):
        largest = max(recorded.shapes, key=math.prod)
        assert math.prod(largest) < L * L, largest  # one head's [L, L] would already be L²
        assert math.prod(largest) == 2 * L * 16  # out or a gradient [1, 2, L, d_k]; a tile is [1, 2, 32, 32]
    with Shapes() as plain:
        wt.scaled_dot_product_attention(q, k, v)
    assert (1, 2, L, L) in plain.shapes  # the recorder does see a score matrix where there is one


BACKWARD = ["square", "not multiples of the blocks", "cross-attention L_q > L_k", "padding", "causal, odd blocks",
            "causal, L_q < L_k (a cached chunk)", "causal and padding", "blocks of one"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", BACKWARD)
def test_backward_equals_autograd_of_the_plain_attention(name, dtype):
    batch, heads, L_q, L_k, d_k, d_v, block_q, block_k, causal, lengths = CASES[name]
    q, k, v = (x.requires_grad_() for x in inputs(batch, heads, L_q, L_k, d_k, d_v, dtype))
    mask = None if lengths is None else padding(batch, L_k, lengths)
    expected_out, _ = wt.scaled_dot_product_attention(q, k, v, full_mask(mask, causal, L_q, L_k))
    d_out = torch.randn(expected_out.shape, generator=torch.Generator().manual_seed(5), dtype=dtype)
    expected = torch.autograd.grad(expected_out, (q, k, v), d_out)
    with torch.no_grad():
        out, lse = wt.flash_attention(q, k, v, mask, causal, block_q, block_k)
        grads = wt.flash_attention_backward(q, k, v, out, lse, d_out, mask, causal, block_q, block_k)
    tolerance = {"rtol": 1e-10, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-5}
    for ours, theirs in zip(grads, expected):
        torch.testing.assert_close(ours, theirs, **tolerance)


def test_backward_with_fully_blocked_rows():
    q, k, v = (x.requires_grad_() for x in inputs(2, 2, 16, 16, 4, dtype=torch.float64))
    mask = padding(2, 16, [0, 16]) & (torch.arange(16) >= 5)
    expected_out, _ = wt.scaled_dot_product_attention(q, k, v, full_mask(mask, True, 16, 16))
    d_out = torch.randn(expected_out.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    expected = torch.autograd.grad(expected_out, (q, k, v), d_out)
    with torch.no_grad():
        out, lse = wt.flash_attention(q, k, v, mask, True, 4, 4)
        grads = wt.flash_attention_backward(q, k, v, out, lse, d_out, mask, True, 4, 4)
    assert grads[2].abs().sum() > 0 and (expected[0][0] == 0).all()  # the blocked sentence moves only V
    for ours, theirs in zip(grads, expected):
        torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)


def test_online_softmax_over_one_row_in_blocks():
    generator = torch.Generator().manual_seed(3)
    scores, v = torch.randn(50, generator=generator) * 3, torch.randn(50, 4, generator=generator)  # [L_k], [L_k, d_v]
    m, sum_exp, acc = torch.tensor(torch.finfo(torch.float32).min), torch.tensor(0.0), torch.zeros(4)
    for start in range(0, 50, 7):
        m, sum_exp, acc = online_softmax_step(m, sum_exp, acc, scores[start:start + 7], v[start:start + 7])
    assert m == scores.max()
    torch.testing.assert_close(sum_exp, torch.exp(scores - scores.max()).sum())
    torch.testing.assert_close(acc / sum_exp, torch.softmax(scores, -1) @ v)


def brute_force_tiles(L_q, L_k, block_q, block_k, causal):
    """(query block, key block, partly masked) for every tile with an allowed cell, read off the mask itself."""
    allowed = wt.causal_mask(L_k, queries=L_q) if causal else torch.ones(L_q, L_k, dtype=torch.bool)
    found = []
    for i in range(0, L_q, block_q):
        for j in range(0, L_k, block_k):
            tile = allowed[i:i + block_q, j:j + block_k]
            if tile.any():
                found.append((i, j, not tile.all()))
    return found


@pytest.mark.parametrize("sizes", [(64, 64, 16, 16), (37, 37, 8, 5), (10, 40, 4, 8), (40, 10, 4, 8), (5, 5, 1, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiles_are_those_with_an_allowed_cell(sizes, causal):
    tiles = wt.flash_tiles(*sizes, causal)
    assert [(t.queries.start, t.keys.start, t.diagonal) for t in tiles] == brute_force_tiles(*sizes, causal)
    L_q, L_k, block_q, block_k = sizes
    assert all(len(t.queries) == min(block_q, L_q - t.queries.start) for t in tiles)
    assert all(len(t.keys) == min(block_k, L_k - t.keys.start) for t in tiles)


def test_tile_counts():
    assert len(wt.flash_tiles(64, 64, 16, 16, causal=False)) == 16
    assert len(wt.flash_tiles(64, 64, 16, 16, causal=True)) == 10  # 4 + 3 + 2 + 1
    long = wt.flash_tiles(4096, 4096, 64, 64, causal=True)
    assert len(long) == 64 * 65 // 2  # about half of the 4096 tiles are skipped
    assert 1 - len(long) / 64**2 > 0.49


BAD = [
    ({"block_q": 0}, ValueError, "block_q must be at least 1"),
    ({"block_k": -4}, ValueError, "block_k must be at least 1"),
    ({"block_q": 2.5}, TypeError, "block_q must be a whole number"),
    ({"causal": 1}, TypeError, "causal must be True or False"),
    ({"k": torch.randn(2, 3, 7, 8)}, ValueError, "same number of heads H"),
    ({"v": torch.randn(1, 2, 7, 8)}, ValueError, "same batch size B"),
    ({"k": torch.randn(2, 2, 7, 6)}, ValueError, "q and k must have the same d_k"),
    ({"v": torch.randn(2, 2, 6, 8)}, ValueError, "k and v must have the same length L_k"),
    ({"q": torch.randn(2, 5, 8)}, ValueError, "q must be [B, H, L, d_k]"),
    ({"q": torch.ones(2, 2, 5, 8, dtype=torch.long)}, TypeError, "q must hold floating-point numbers"),
    ({"v": torch.randn(2, 2, 7, 8, dtype=torch.float64)}, TypeError, "share one dtype"),
    ({"mask": torch.ones(2, 1, 1, 6, dtype=torch.bool)}, ValueError, "mask shape [2, 1, 1, 6] does not broadcast"),
    ({"mask": torch.ones(2, 1, 1, 7)}, TypeError, "mask must be a bool tensor"),
    ({"q": [[1.0]]}, TypeError, "q must be a torch tensor"),
    ({"q": torch.randn(2, 2, 5, 0), "k": torch.randn(2, 2, 7, 0)}, ValueError, "q and k have d_k = 0 features"),
]


@pytest.mark.parametrize("change,error,message", BAD, ids=[m for _, _, m in BAD])
def test_bad_input_is_refused_before_any_work(change, error, message):
    arguments = dict(zip("qkv", inputs(2, 2, 5, 7, 8))) | change
    with Shapes() as recorded, pytest.raises(error, match=re.escape(message)):
        wt.flash_attention(**arguments)
    assert not any("mm" in op or "exp" in op for op in recorded.ops), recorded.ops  # nothing computed first


def test_flash_tiles_bad_input():
    with pytest.raises(ValueError, match="L_k must be at least 1"):
        wt.flash_tiles(4, 0, 2, 2, False)
    with pytest.raises(ValueError, match=r"block_k must be at least 1.*block_k=16"):
        wt.flash_tiles(4, 4, 2, 0, False)


def test_backward_refuses_a_mismatched_lse():
    q, k, v = inputs(1, 2, 5, 7, 8)
    out, lse = wt.flash_attention(q, k, v)
    with pytest.raises(ValueError, match=r"lse must have shape \[1, 2, 5\]"):
        wt.flash_attention_backward(q, k, v, out, lse[..., :4], torch.ones_like(out))


def test_the_tile_grid_picture_counts_what_flash_tiles_computes():
    kinds = wt.viz.tile_kinds(64, 64, 16, 16, True)
    assert kinds.tolist() == [[2, 0, 0, 0], [1, 2, 0, 0], [1, 1, 2, 0], [1, 1, 1, 2]]
    figure = wt.viz.tile_grid_figure(64, 64, 16, 16, True)
    assert figure.axes[0].get_title() == "10 of 16 tiles computed, 6 skipped"
    texts = [t for ax in figure.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    assert min(t.get_fontsize() for t in texts) >= 12  # readable on a projector


def test_the_running_softmax_picture_follows_online_softmax_step():
    scores = torch.tensor([1.0, 0.0, 3.0, 2.0, 5.0])
    history = wt.viz.running_softmax(scores, 2)
    assert [(seen, m) for seen, m, _ in history] == [(2, 1.0), (4, 3.0), (5, 5.0)]
    assert history[-1][2] == pytest.approx(torch.exp(scores - 5).sum().item())
    assert len(wt.viz.online_softmax_figure(scores, 2).axes) == 2
    with pytest.raises(ValueError, match="scores must be one row"):
        wt.viz.running_softmax(torch.ones(2, 3), 2)


def test_the_explorer_redraws_and_counts():
    explorer = wt.widgets.flash_explorer()
    assert "computed  10 of 16" in explorer.text() and explorer.text().count("[image/png]") == 2
    assert "scores    128 KiB" in explorer.text() and "one tile  8,192 B" in explorer.text()  # 8 heads, float32
    explorer.control("block_q").value = 8
    explorer.control("block_k").value = 8
    assert "computed  36 of 64" in explorer.text() and "diagonal  8" in explorer.text()
    explorer.control("causal").value = False
    assert "computed  64 of 64" in explorer.text() and "skipped   0" in explorer.text()


def test_the_explorer_draws_the_running_softmax_again_only_when_it_changes():
    """The row's picture depends on L_k and block_k (and the language): a move of L_q, block_q or causal shows the
    picture it had, not one drawn again; a move of L_k, block_k or the language draws the one a new explorer would."""
    explorer = wt.widgets.flash_explorer()

    def row():  # the third output area: the running max and sum
        return explorer.outputs[2].outputs[0]["data"]["image/png"]
    shown = row()
    for name, value in (("L_q", 100), ("block_q", 4), ("causal", False)):
        explorer.control(name).value = value
        assert row() == shown, f"moving {name} changed the running softmax"
    for name, value in (("L_k", 100), ("block_k", 4)):
        explorer.control(name).value = value
        assert row() != shown, f"moving {name} left the running softmax as it was"
        shown = row()
    fresh = wt.widgets.flash_explorer()
    for name in ("L_q", "L_k", "block_q", "block_k", "causal"):
        fresh.control(name).value = explorer.control(name).value
    assert fresh.outputs[2].outputs[0]["data"]["image/png"] == row()
    wt.set_language("zh")
    try:
        explorer.control("L_q").value = 64
        assert row() != shown, "the language changed but the running softmax kept its English"
    finally:
        wt.set_language("en")


def test_the_exercise_names_a_forgotten_rescale(capsys):
    def forgot_the_rescale(m, sum_exp, acc, scores, v):
        m_new = torch.maximum(m, scores.amax(-1))
        p = torch.exp(scores - m_new[:, None])
        return m_new, sum_exp + p.sum(-1), acc + p @ v

    result = wt.check_exercise("online_softmax_step", forgot_the_rescale)
    assert not result and "forgot to rescale" in result.message and "exp(m - m_new)" in result.message


def test_float16_accumulates_in_float32_past_float16s_largest_number():
    """70,000 equal scores: the running sum l reaches 70,000 > 65,504 (float16's largest), which is inf in
    float16. Accumulated in float32, out is the mean of V, as PyTorch gives, and comes back in float16."""
    L_k = 70_000
    q = torch.zeros(1, 1, 2, 2, dtype=torch.float16)  # [B, H, L_q, d_k]: every score 0, so all equal
    k = torch.randn(1, 1, L_k, 2, generator=torch.Generator().manual_seed(0)).half()
    v = torch.ones(1, 1, L_k, 3, dtype=torch.float16) + torch.linspace(0, 1, L_k)[None, None, :, None].half()
    out, lse = wt.flash_attention(q, k, v, block_k=4096)
    assert out.dtype == torch.float16 and lse.dtype == torch.float32
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(out.double(), v.double().mean(-2, keepdim=True).expand(1, 1, 2, 3), rtol=1e-3, atol=0)
    torch.testing.assert_close(lse, torch.full((1, 1, 2), math.log(L_k)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_equals_pytorch_with_masks_and_causal(dtype):
    q, k, v = inputs(2, 2, 21, 21, 8, dtype=dtype)
    mask = padding(2, 21, [21, 9])
    out, _lse = wt.flash_attention(q, k, v, mask, causal=True, block_q=8, block_k=8)
    expected = F.scaled_dot_product_attention(*(x.double() for x in (q, k, v)), full_mask(mask, True, 21, 21))
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), expected, rtol=1e-2, atol=1e-2)


def test_runs_on_the_device_of_its_inputs():
    """Every tensor it makes (the running max, sum and output, the causal index of a diagonal tile) is made on
    q's device: the meta device shows it without any data (CUDA takes the same path)."""
    q, k, v = (x.to("meta") for x in inputs(1, 2, 20, 20, 4))
    out, lse = wt.flash_attention(q, k, v, padding(1, 20, [12]).to("meta"), causal=True, block_q=8, block_k=8)
    assert (out.device.type, tuple(out.shape)) == ("meta", (1, 2, 20, 4))
    assert (lse.device.type, tuple(lse.shape)) == ("meta", (1, 2, 20))
    grads = wt.flash_attention_backward(q, k, v, out, lse, torch.ones_like(out), causal=True, block_q=8, block_k=8)
    assert [g.device.type for g in grads] == ["meta"] * 3

"""Every hand-written backward in walkthrough.model.backward equals autograd (torch.autograd.grad), in float64."""

import math

import pytest
import torch
import torch.nn.functional as F

import walkthrough as wt
from walkthrough.model import backward


@pytest.fixture(autouse=True)
def float64_default():
    """Tight comparisons: a wrong term shows, rounding does not."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def autograd(fn, inputs, d_out):
    """The gradients of <fn(*inputs), d_out> with respect to each input, by autograd."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    return torch.autograd.grad(fn(*inputs), inputs, d_out)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 6)])
def test_softmax_backward_equals_autograd(shape):
    scores, d_probs = torch.randn(shape) * 3, torch.randn(shape)
    (expected,) = autograd(lambda s: s.softmax(-1), [scores], d_probs)
    torch.testing.assert_close(backward.softmax_backward(scores.softmax(-1), d_probs), expected)


def test_softmax_backward_is_the_jacobian_times_the_gradient():
    p, d_probs = torch.randn(5).softmax(-1), torch.randn(5)
    jacobian = torch.diag(p) - torch.outer(p, p)  # [L_k, L_k]
    torch.testing.assert_close(backward.softmax_backward(p, d_probs), jacobian @ d_probs)
    torch.testing.assert_close(jacobian, torch.autograd.functional.jacobian(lambda s: s.softmax(-1), p.log()))


@pytest.mark.parametrize("batch_shape", [(6,), (3, 4), (2, 3, 5)])
def test_linear_backward_equals_autograd_and_sums_the_batch_dims(batch_shape):
    x, weight, bias = torch.randn(*batch_shape, 7), torch.randn(4, 7), torch.randn(4)
    d_out = torch.randn(*batch_shape, 4)
    expected = autograd(F.linear, [x, weight, bias], d_out)
    d_x, d_weight, d_bias = backward.linear_backward(x, weight, d_out)
    assert d_weight.shape == weight.shape and d_bias.shape == bias.shape  # the batch dims are summed away
    for ours, theirs in zip((d_x, d_weight, d_bias), expected):
        torch.testing.assert_close(ours, theirs)


def attention(q, k, v, mask=None):
    return wt.scaled_dot_product_attention(q, k, v, mask)[0]


@pytest.mark.parametrize("case", ["no mask", "padding", "causal", "fully blocked rows", "cross"])
def test_attention_backward_equals_autograd(case):
    torch.manual_seed(1)
    batch, heads, l_q, l_k, d_k, d_v = 3, 2, 5, 5, 4, 6
    if case == "cross":
        l_q = 3
    q = torch.randn(batch, heads, l_q, d_k)
    k, v = torch.randn(batch, heads, l_k, d_k), torch.randn(batch, heads, l_k, d_v)
    d_out = torch.randn(batch, heads, l_q, d_v)
    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9], [5, 0, 0, 0, 0]])
    query_may_see = torch.tensor([True, True, False, True, True])[:, None]  # query row 2 sees nothing
    mask = {"no mask": None, "cross": wt.padding_mask(ids, 0), "padding": wt.padding_mask(ids, 0),
            "causal": wt.causal_mask(l_k), "fully blocked rows": wt.padding_mask(ids, 0) & query_may_see}[case]
    expected = autograd(lambda q, k, v: attention(q, k, v, mask), [q, k, v], d_out)
    ours = backward.attention_backward(q, k, v, d_out, mask)
    for name, a, b in zip(("d_q", "d_k", "d_v"), ours, expected):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, msg=f"{case}: {name}")
    if case == "fully blocked rows":  # query row 2 may see nothing: its weights are uniform, its d_q zero
        assert mask[..., 2, :].logical_not().all()
        torch.testing.assert_close(ours[0][:, :, 2], torch.zeros(batch, heads, d_k))


def test_attention_backward_blocked_keys_get_no_key_gradient_from_blocked_scores():
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    mask = torch.tensor([True, True, False])  # key 2 is padding
    _, d_k, d_v = backward.attention_backward(q, k, v, torch.randn(1, 1, 3, 4), mask)
    assert d_k[0, 0, 2].abs().max() == 0 and d_v[0, 0, 2].abs().max() == 0


@pytest.mark.parametrize("eps", [1e-5, 0.5])
def test_layer_norm_backward_equals_autograd(eps):
    x, weight, bias = torch.randn(3, 4, 8) * 2 + 1, torch.randn(8), torch.randn(8)
    d_out = torch.randn(3, 4, 8)
    expected = autograd(lambda x, w, b: F.layer_norm(x, (8,), w, b, eps), [x, weight, bias], d_out)
    for ours, theirs in zip(backward.layer_norm_backward(x, weight, d_out, eps), expected):
        torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.4])
@pytest.mark.parametrize("ignore_index", [0, 3])
def test_cross_entropy_backward_equals_autograd(smoothing, ignore_index):
    torch.manual_seed(2)
    logits = torch.randn(4, 5, 9)  # [B, L, V]
    labels = torch.randint(0, 9, (4, 5))
    labels[1, 2:] = ignore_index  # PAD rows
    labels[0, 0] = 0 if ignore_index else 1  # at least one label next to the ignored id
    (expected,) = autograd(lambda x: wt.sequence_loss(x, labels, ignore_index, smoothing), [logits], torch.tensor(1.0))
    ours = backward.cross_entropy_backward(logits, labels, ignore_index, smoothing)
    torch.testing.assert_close(ours, expected)
    assert ours[labels == ignore_index].abs().max() == 0  # PAD rows: no gradient
    torch.testing.assert_close(ours.sum(-1), torch.zeros(4, 5))  # softmax minus a distribution sums to 0
    if smoothing == 0:  # the mean over the counted positions: each one's gradient is (p - one-hot) / counted
        counted = labels != ignore_index
        at_label = ours.gather(-1, labels[..., None])[..., 0][counted]
        p_label = logits.softmax(-1).gather(-1, labels[..., None])[..., 0][counted]
        torch.testing.assert_close(at_label, (p_label - 1) / counted.sum())


def test_cross_entropy_backward_ignores_an_ignore_index_outside_the_vocabulary():
    """-100 (PyTorch's default ignore_index) is no class id, yet the rows holding it are simply not counted."""
    logits, labels = torch.randn(4, 5), torch.tensor([1, -100, 4, -100])
    expected, = autograd(lambda x: F.cross_entropy(x, labels, ignore_index=-100), [logits], torch.tensor(1.0))
    torch.testing.assert_close(backward.cross_entropy_backward(logits, labels, -100), expected)


def test_embedding_backward_is_an_index_add_of_the_looked_up_rows():
    table = torch.nn.Embedding(12, 5)
    ids = torch.tensor([[1, 4, 4], [7, 1, 0]])
    d_out = torch.randn(2, 3, 5)
    (expected,) = torch.autograd.grad(table(ids), table.weight, d_out)
    ours = backward.embedding_backward(ids, d_out, 12)
    torch.testing.assert_close(ours, expected)
    unused = [i for i in range(12) if i not in ids]
    assert ours[unused].abs().max() == 0
    torch.testing.assert_close(ours[4], d_out[0, 1] + d_out[0, 2])  # a word used twice collects twice


def test_split_heads_backward_is_the_merge():
    attn = wt.MultiHeadAttention(12, 3)
    x, d_heads = torch.randn(2, 5, 12), torch.randn(2, 3, 5, 4)
    (expected,) = autograd(lambda x: attn.split_heads(x), [x], d_heads)
    torch.testing.assert_close(backward.split_heads_backward(d_heads), expected)


def test_float32_agrees_with_autograd_too():
    q, k, v, d_out = (torch.randn(2, 2, 4, 8, dtype=torch.float32) for _ in range(4))
    expected = autograd(attention, [q, k, v], d_out)
    for ours, theirs in zip(backward.attention_backward(q, k, v, d_out), expected):
        torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("call, error, words", [
    (lambda: backward.softmax_backward(torch.zeros(3, 4), torch.zeros(3, 5)), ValueError, "d_probs must have probs"),
    (lambda: backward.softmax_backward([0.5, 0.5], torch.zeros(2)), TypeError, "probs must be a torch tensor"),
    (lambda: backward.linear_backward(torch.zeros(2, 3), torch.zeros(3, 4), torch.zeros(2, 4)), ValueError,
     "not transposed"),
    (lambda: backward.linear_backward(torch.zeros(2, 3), torch.zeros(4, 3), torch.zeros(2, 5)), ValueError,
     "d_out must have"),
    (lambda: backward.attention_backward(torch.zeros(2, 4, 8), torch.zeros(2, 4, 8), torch.zeros(2, 4, 8),
                                         torch.zeros(2, 4, 8)), ValueError, "q must be [B, H, L, d]"),
    (lambda: backward.attention_backward(*(torch.zeros(1, 1, 3, 2) for _ in range(4)), torch.ones(3, 3)),
     TypeError, "mask must be a bool tensor"),
    (lambda: backward.attention_backward(*(torch.zeros(1, 1, 3, 2) for _ in range(4)), torch.ones(4, 4).bool()),
     ValueError, "does not broadcast"),
    (lambda: backward.layer_norm_backward(torch.zeros(2, 4), torch.zeros(3), torch.zeros(2, 4)), ValueError,
     "weight must be [D] = [4]"),
    (lambda: backward.layer_norm_backward(torch.zeros(2, 4), torch.zeros(4), torch.zeros(2, 4), 0), ValueError,
     "eps must be a positive number"),
    (lambda: backward.cross_entropy_backward(torch.zeros(2, 3, 5), torch.zeros(2, 3, 5).long(), 0), ValueError,
     "not one-hot"),
    (lambda: backward.cross_entropy_backward(torch.zeros(2, 5), torch.zeros(2), 0), TypeError, "labels.long()"),
    (lambda: backward.cross_entropy_backward(torch.zeros(2, 5), torch.zeros(2).long(), 0), ValueError,
     "every label is ignore_index=0"),
    (lambda: backward.cross_entropy_backward(torch.zeros(2, 5), torch.ones(2).long(), 0, 1.0), ValueError,
     "smoothing must be"),
    (lambda: backward.embedding_backward(torch.zeros(2, 3).long(), torch.zeros(2, 4, 5), 7), ValueError,
     "d_out must be [*ids.shape, D]"),
    (lambda: backward.embedding_backward(torch.zeros(2, 3).long(), torch.zeros(2, 3, 5), 0), ValueError,
     "num_embeddings"),
    (lambda: backward.embedding_backward(torch.tensor([[1, 7]]), torch.zeros(1, 2, 5), 7), ValueError,
     "ids hold token id 7, outside the table's rows [0, 7)"),
    (lambda: backward.embedding_backward(torch.tensor([[1, -1]]), torch.zeros(1, 2, 5), 7), ValueError,
     "ids hold token id -1"),
    (lambda: backward.embedding_backward(torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2, 5), 7), TypeError,
     "ids must be integer token ids, got torch.float64; use ids.long()"),
    (lambda: backward.cross_entropy_backward(torch.zeros(2, 5), torch.tensor([1, 7]), 0), ValueError,
     "labels hold class id 7, outside [0, 5)"),
    (lambda: backward.cross_entropy_backward(torch.zeros(2, 5), torch.tensor([-3, 1]), 0), ValueError,
     "labels hold class id -3, outside [0, 5)"),
    (lambda: backward.layer_norm_backward(torch.zeros(2, 4), torch.ones(4), torch.zeros(2, 4), math.nan),
     ValueError, "eps must be a positive number"),
    (lambda: backward.layer_norm_backward(torch.zeros(2, 4), torch.ones(4), torch.zeros(2, 4), math.inf),
     ValueError, "eps must be a positive number"),
    (lambda: backward.layer_norm_backward(torch.zeros(2, 0), torch.ones(0), torch.zeros(2, 0)), ValueError,
     "x has no features (D = 0"),
    (lambda: backward.linear_backward(torch.zeros(2, 3), torch.zeros(4, 3, dtype=torch.float32), torch.zeros(2, 4)),
     TypeError, "x, weight, d_out must share one dtype, got x torch.float64, weight torch.float32"),
    (lambda: backward.attention_backward(*(torch.zeros(1, 1, 3, 2) for _ in range(3)),
                                         torch.zeros(1, 1, 3, 2, dtype=torch.float32)), TypeError,
     "q, k, v, d_out must share one dtype"),
])
def test_bad_input_is_refused_with_a_message_that_names_it(call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value)


def test_scale_is_square_root_of_d_k():
    """d_q of one query against two keys: the chain rule through ÷√d_k shows as a factor 1/√d_k. The
    gradient of the scores comes from autograd, not from the package's softmax_backward."""
    q, k, v = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 2, 16), torch.randn(1, 1, 2, 3)
    d_out = torch.randn(1, 1, 1, 3)
    d_q, _, _ = backward.attention_backward(q, k, v, d_out)
    scores = q @ k.transpose(-2, -1)  # [1, 1, 1, 2], not yet scaled
    (d_scaled,) = autograd(lambda scaled: scaled.softmax(-1) @ v, [scores / math.sqrt(16)], d_out)
    torch.testing.assert_close(d_q, d_scaled @ k / math.sqrt(16))
    torch.testing.assert_close(d_q, autograd(lambda q: (q @ k.transpose(-2, -1) / 4).softmax(-1) @ v, [q], d_out)[0])
    assert not torch.allclose(d_q, d_scaled @ k), "the factor 1/√d_k = 1/4 shows"


def check(name, fn, capsys):
    result = wt.check_exercise(name, fn)
    capsys.readouterr()
    return result.message


def softmax_slip(slip):
    def fn(probs, d_probs):
        if slip == "no row sum":
            return probs * d_probs
        if slip == "plain mean":
            return probs * (d_probs - d_probs.mean(-1, keepdim=True))
        return probs * (d_probs - (probs * d_probs).sum(-1, keepdim=True))
    return fn


@pytest.mark.parametrize("slip, words", [("no row sum", "you forgot the row sum"),
                                         ("plain mean", "the probability-weighted sum")])
def test_softmax_backward_exercise_names_the_slip(slip, words, capsys):
    assert words in check("softmax_backward", softmax_slip(slip), capsys)
    assert check("softmax_backward", softmax_slip("right"), capsys).startswith("✓")


def scores_slip(slip):
    def fn(q, k, d_scores):
        scale = 1.0 if slip == "no scale" else q.size(-1) ** 0.5
        d_k = (d_scores @ q if slip == "transposed K" else d_scores.transpose(-2, -1) @ q) / scale
        return d_scores @ k / scale, d_k
    return fn


@pytest.mark.parametrize("slip, words", [("no scale", "you forgot the ÷√d_k"),
                                         ("transposed K", "K's gradient needs d_scores transposed")])
def test_scores_backward_exercise_names_the_slip(slip, words, capsys):
    assert words in check("scores_backward", scores_slip(slip), capsys)
    assert check("scores_backward", scores_slip("right"), capsys).startswith("✓")
    assert "return two tensors" in check("scores_backward", lambda q, k, d: d @ k, capsys)

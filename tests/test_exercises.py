"""Self-checking exercises: each check says "not yet" to a stub, names the typical mistakes, and accepts the
solution printed in docs/solutions.md (taken from that file, not copied here)."""

import ast
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import walkthrough as wt
from walkthrough.classroom.exercises import EXERCISES, NOT_YET

SOLUTIONS = (Path(__file__).resolve().parents[1] / "docs" / "solutions.md").read_text()
BLOCKS = re.findall(r"^##?#? (\d\d)\n\n```python\n(.*?)^```", SOLUTIONS, re.S | re.M)


def solutions() -> dict[str, tuple[str, ast.Module]]:
    """Exercise name -> (function name, the block's imports and that function) for every check_exercise call."""
    found = {}
    for _, code in BLOCKS:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "check_exercise":
                name, fn_name = node.args[0].value, node.args[1].id
                keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                        or (isinstance(n, ast.FunctionDef) and n.name == fn_name)]
                found[name] = fn_name, ast.Module(keep, type_ignores=[])
    return found


def solution(name: str):
    fn_name, module = solutions()[name]
    namespace = {}
    exec(compile(module, f"solutions.md:{name}", "exec"), namespace)
    return namespace[fn_name]


def verdict(name, fn, capsys):
    result = wt.check_exercise(name, fn)
    printed = capsys.readouterr().out
    assert printed.strip() == result.message
    return result


def test_every_exercise_has_a_solution_in_the_docs():
    assert sorted(solutions()) == sorted(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_solution_in_the_docs_passes(name, capsys):
    result = verdict(name, solution(name), capsys)
    assert result and result.message == f"✓ {name}: right, on 3 random sizes."


def raises_not_implemented(*args):
    raise NotImplementedError


def only_a_body(*args):
    ...


def returns_ellipsis(*args):
    return ...


@pytest.mark.parametrize("stub", [raises_not_implemented, only_a_body, returns_ellipsis])
@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_stub_is_not_yet(name, stub, capsys):
    result = verdict(name, stub, capsys)
    assert not result and result.message == f"… {name}: {NOT_YET}"


def interleaved_table(max_len, d_model):  # sines in the first half, cosines in the second
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.cat([angle.sin(), angle.cos()], 1)


def table_with(first, second, exponent_scale):
    def table(max_len, d_model):
        angle = torch.arange(max_len)[:, None] / 10000 ** (exponent_scale * torch.arange(d_model // 2) / d_model)
        return torch.stack([first(angle), second(angle)], -1).flatten(1)
    return table


def scaled_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def layer_norm_over(dim, correction=0, affine=True, eps_inside=True):
    def layer_norm(x, gamma, beta, eps):
        var = x.var(dim, keepdim=True, correction=correction)
        out = (x - x.mean(dim, keepdim=True)) / ((var + eps).sqrt() if eps_inside else var.sqrt() + eps)
        return out * gamma + beta if affine else out
    return layer_norm


def per_token_loss(logits, labels):
    return F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")  # [B, L]


def online_without_rescale(m, total, acc, scores, v):
    m_new = torch.maximum(m, scores.amax(-1))
    p = torch.exp(scores - m_new[:, None])  # [R, b]
    return m_new, total + p.sum(-1), acc + p @ v


def padded(rows, pad_id):
    return wt.pad_batch(rows, pad_id)


def top_p_strict(x, p):  # keeps only the tokens whose running mass stays below p: the one that crosses p goes
    probs, order = x.softmax(-1).sort(dim=-1, descending=True, stable=True)
    kept = torch.zeros_like(x, dtype=torch.bool).scatter(-1, order, probs.cumsum(-1) < p)
    return x.masked_fill(~kept, -math.inf)


def merge_first_only(ids, pair, new_id):
    at = next(i for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) == pair)
    return ids[:at] + [new_id] + ids[at + 2:]


def merge_without_last(ids, pair, new_id):  # the scan stops one before the end and drops what is left
    merged, i = [], 0
    while i < len(ids) - 1:
        merged.append(new_id if (ids[i], ids[i + 1]) == pair else ids[i])
        i += 2 if (ids[i], ids[i + 1]) == pair else 1
    return merged


WRONG = [
    ("sinusoidal_table", table_with(torch.cos, torch.sin, 2), "sin and cos are swapped"),
    ("sinusoidal_table", interleaved_table, "the sines fill the first half and the cosines the second"),
    ("sinusoidal_table", table_with(torch.sin, torch.cos, 1), "the exponent is 2i/d_model"),
    ("sinusoidal_table", lambda max_len, d_model: torch.zeros(d_model, max_len), "You swapped max_len and D"),
    ("split_heads", lambda x, h: x.view(x.size(0), h, x.size(1), -1),
     "a straight view to [B, H, L, d_k] cuts across tokens"),
    ("split_heads", lambda x, h: x.view(x.size(0), x.size(1), h, -1),
     "You swapped H and L (dims 1 and 2): did you forget a transpose?"),
    ("split_heads", lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2),
     "each head takes every H-th feature"),
    ("padding_mask", lambda ids, pad: (ids == pad)[:, None, None, :], "it is inverted: here True = may attend"),
    ("padding_mask", lambda ids, pad: ids != pad, "right values, but shape [B, L]"),
    ("padding_mask", lambda ids, pad: (ids != pad)[:, None, :], "right values, but shape [B, 1, L]: add the broadcast"),
    ("padding_mask", lambda ids, pad: (ids != pad).long()[:, None, None, :], "dtype torch.int64: a mask is bool"),
    ("padding_mask", lambda ids, pad: (ids != 0)[:, None, None, :], "wrong values"),
    ("causal_mask_blocked", lambda n: torch.ones(n, n, dtype=torch.bool).tril(), "wants True = blocked"),
    ("causal_mask_blocked", lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "you blocked the diagonal too"),
    ("causal_mask_blocked", lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "blocked the past"),
    ("causal_mask_blocked", torch.nn.Transformer.generate_square_subsequent_mask, "the additive float mask"),
    ("causal_mask_blocked", lambda n: torch.ones(n, n).triu(1), "dtype torch.float32: a mask is bool"),
    ("cross_attention_scores", lambda q, k: q @ k.transpose(-2, -1), "you forgot to divide by √d_k"),
    ("cross_attention_scores", lambda q, k: q @ k.transpose(-2, -1) / q.size(-1), "the scale is √d_k"),
    ("cross_attention_scores", lambda q, k: scaled_scores(k, q), "you computed K·Qᵀ"),
    ("layer_norm", layer_norm_over(0), "you normalised over the batch dim"),
    ("layer_norm", layer_norm_over(1), "you normalised over the length dim"),
    ("layer_norm", layer_norm_over(-1, correction=1), "unbiased variance"),
    ("layer_norm", layer_norm_over(-1, affine=False), "you forgot the learned scale and shift"),
    ("layer_norm", layer_norm_over(-1, eps_inside=False), "eps goes inside the square root"),
    ("rms_norm", lambda x, gamma, eps: layer_norm_over(-1)(x, gamma, 0.0, eps), "you subtracted the mean"),
    ("rms_norm", lambda x, gamma, eps: x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt(), "forgot the learned scale"),
    ("rms_norm", lambda x, gamma, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gamma,
     "eps goes inside the square root"),
    ("sequence_loss", lambda logits, labels, pad: per_token_loss(logits, labels).mean(), "PAD positions count"),
    ("sequence_loss", lambda logits, labels, pad: wt.sequence_loss(logits.softmax(-1), labels, pad),
     "you applied softmax before the loss"),
    ("sequence_loss", lambda logits, labels, pad: (per_token_loss(logits, labels) * (labels != pad)).sum(),
     "you summed"),
    ("sequence_loss", lambda logits, labels, pad: per_token_loss(logits, labels), "should be one number"),
    ("sequence_loss", lambda logits, labels, pad: wt.sequence_loss(logits, labels, pad).item(),
     "is a float, not a torch tensor"),
    ("teacher_forcing", lambda ts, sos, eos, pad: (padded([[sos] + t for t in ts], pad),) * 2,
     "your decoder input and labels are the same"),
    ("teacher_forcing", lambda ts, sos, eos, pad: wt.teacher_forcing(ts, sos, eos, pad)[::-1],
     "it ends with <eos> instead of starting with <sos>: did you shift the wrong way?"),
    ("teacher_forcing", lambda ts, sos, eos, pad: (padded([[sos] + t for t in ts], pad), padded(ts, pad)),
     "your labels: they miss <eos>"),
    ("teacher_forcing", lambda ts, sos, eos, pad: padded([[sos] + t for t in ts], pad),
     "return two tensors, (decoder_input, labels)"),
    ("cached_attention_step", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     "you applied a causal mask as if the query were position 0"),
    ("cached_attention_step", lambda q, k, v: (q @ k.transpose(-2, -1)).softmax(-1) @ v, "forgot to divide"),
    ("cached_attention_step", wt.scaled_dot_product_attention, "is a tuple, not a torch tensor: return the tensor"),
    ("cached_attention_step", lambda q, k, v: scaled_scores(q, k).softmax(-2) @ v,
     "softmax over the wrong dim (2): each query's weights sum to 1 over the keys"),
    ("cached_attention_step", lambda q, k, v: scaled_scores(q, k).softmax(1) @ v, "softmax over the wrong dim"),
    ("expand_kv_heads", lambda k, h: k.repeat(1, h // k.size(1), 1, 1), "use repeat_interleave"),
    ("expand_kv_heads", lambda k, h: k.repeat_interleave(h // k.size(1), dim=2), "your result has shape"),
    ("heads_into_batch", lambda x, h: x.transpose(0, 1).reshape(x.size(1) * h, x.size(0), -1), "View x as [L, B·H"),
    ("heads_into_batch", lambda x, h: x.reshape(x.size(0), x.size(1) * h, -1), "your result has shape"),
    ("online_softmax_step", lambda m, total, acc, s, v: (s.amax(-1), total, acc), "m is the max of this block alone"),
    ("online_softmax_step", lambda m, total, acc, s, v: online_without_rescale(m, total, acc, s, v),
     "you forgot to rescale"),
    ("softmax_backward", lambda p, d: p * d, "you forgot the row sum"),
    ("softmax_backward", lambda p, d: p * ((p * d).sum(-1, keepdim=True) - d), "the sign is flipped"),
    ("scores_backward", lambda q, k, d: (d @ k, d.transpose(-2, -1) @ q), "your d_q: you forgot the ÷√d_k"),
    ("scores_backward", lambda q, k, d: (d @ k / q.size(-1), d.transpose(-2, -1) @ q / q.size(-1)),
     "you divided by d_k; the scale is √d_k"),
    ("rank_shard", lambda b, w, r: (r * -(-b // w), min(b, (r + 1) * -(-b // w))), "rank 3 gets no sentence"),
    ("rank_shard", lambda b, w, r: (r * (b // w), (r + 1) * (b // w)), "leaves the last batch % world rows untrained"),
    ("top_p_filter", lambda x, p: x.masked_fill(~(x.softmax(-1).cumsum(-1) - x.softmax(-1) < p), -math.inf),
     "rank the tokens by probability first"),
    ("top_p_filter", top_p_strict, "the token that crosses top_p stays"),
    ("bpe_merge", merge_first_only, "only the first occurrence was merged"),
    ("bpe_merge", lambda ids, pair, new_id: merge_without_last(ids, pair, new_id), "the last id is missing"),
    ("bpe_merge", lambda ids, pair, new_id: tuple(ids), "returned a tuple: return a list of ints"),
    ("bpe_merge", lambda ids, pair, new_id: ids, "your result is ["),
    ("greedy_next_tokens", lambda logits, finished, pad: logits.argmax(-1), "a finished row"),
    ("greedy_next_tokens", lambda logits, finished, pad: torch.where(finished, logits.argmax(-1), pad),
     "the unfinished rows must get their best token"),
    ("greedy_next_tokens", lambda logits, finished, pad: logits.argmax(0), "your next ids"),
]


@pytest.mark.parametrize("name,wrong,hint", WRONG, ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(WRONG)])
def test_a_typical_mistake_gets_its_hint(name, wrong, hint, capsys):
    result = verdict(name, wrong, capsys)
    assert not result and result.message.startswith(f"✗ {name}: ") and hint in result.message


def test_every_exercise_is_tried_with_two_typical_mistakes_at_least():
    tried = [name for name, _, _ in WRONG]
    assert all(tried.count(name) >= 2 for name in EXERCISES)


def test_a_wrong_shape_names_the_dim():
    result = wt.check_exercise("split_heads", lambda x, h: x.view(x.size(0), x.size(1), h, -1)[:, :1])
    assert "your result has shape [8, 1, 7, 2], not [8, 7, 5, 2] = [B, H, L, d_k]" in result.message
    assert "Dim 1 is H = 7 heads: yours has 1; dim 2 is L = 5 tokens: yours has 7, which is H." in result.message


def test_a_crash_is_explained_without_a_traceback(capsys):
    result = verdict("split_heads", lambda x, h: x.view(3, 5, 7, 11), capsys)
    assert not result and "your function raised RuntimeError: shape '[3, 5, 7, 11]' is invalid" in result.message


def test_the_message_repeats_from_run_to_run():
    wrong = WRONG[0][1]
    assert wt.check_exercise("sinusoidal_table", wrong).message == wt.check_exercise("sinusoidal_table", wrong).message


def test_bad_requests_are_refused_clearly():
    with pytest.raises(ValueError, match="no exercise named 'split_head'; the exercises are: sinusoidal_table"):
        wt.check_exercise("split_head", lambda x, h: x)
    with pytest.raises(TypeError, match="pass it without calling it"):
        wt.check_exercise("split_heads", torch.zeros(2))


# Verdicts that cannot be fooled: the student's function gets its own copies, odd results are named.

def split_then(after):
    """The right split_heads, with something done to its input x before or after (``after(x, result)``)."""
    def split_heads(x, h):
        result = x.view(x.size(0), x.size(1), h, -1).transpose(1, 2).clone()
        after(x, result)
        return result
    return split_heads


def doubles_its_input_first(x, h):
    x.mul_(2)
    return x.view(x.size(0), x.size(1), h, -1).transpose(1, 2)


def adds_one_first(x, h):
    x.add_(1)
    return x.transpose(0, 1).reshape(x.size(1), x.size(0), h, -1).transpose(1, 2).reshape(-1, x.size(0), x.size(2) // h)


@pytest.mark.parametrize("name,fn", [
    ("split_heads", doubles_its_input_first),
    ("heads_into_batch", adds_one_first),
    ("split_heads", split_then(lambda x, result: x.zero_())),
])
def test_a_function_that_changes_its_input_in_place_is_told_so(name, fn, capsys):
    result = verdict(name, fn, capsys)
    assert not result and "your function changed its input x in place" in result.message


def test_a_teacher_forcing_that_empties_its_input_list_is_told_so(capsys):
    def empties(targets, sos, eos, pad):
        answer = wt.teacher_forcing(targets, sos, eos, pad)
        targets.clear()
        return answer
    result = verdict("teacher_forcing", empties, capsys)
    assert not result and "your function changed its input targets in place" in result.message


@pytest.mark.parametrize("make,message", [
    (lambda r: r.to("meta"), "is on the meta device: it has a shape but no values"),
    (lambda r: r.to_sparse(), "is a sparse tensor (torch.sparse_coo): return a dense one"),
    (lambda r: r.to(torch.complex64), "is complex (torch.complex64)"),
    (lambda r: r.to(torch.complex64) + 1j, "is complex (torch.complex64)"),
])
def test_odd_results_get_a_verdict_not_a_traceback(make, message, capsys):
    right = solution("split_heads")
    result = verdict("split_heads", lambda x, h: make(right(x, h)), capsys)
    assert not result and message in result.message


def test_a_tensor_subclass_cannot_fake_equality(capsys):
    class AlwaysClose(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func in (torch.allclose, torch.Tensor.allclose, torch.equal):
                return True
            return super().__torch_function__(func, types, args, kwargs or {})
    wrong = lambda x, h: torch.zeros(x.size(0), h, x.size(1), x.size(2) // h).as_subclass(AlwaysClose)  # noqa: E731
    result = verdict("split_heads", wrong, capsys)
    assert not result and "wrong values" in result.message


def test_the_default_dtype_set_inside_a_function_does_not_leak_out(capsys):
    right = solution("split_heads")

    def sets_float64(x, h):
        torch.set_default_dtype(torch.float64)
        return right(x, h)
    assert verdict("split_heads", sets_float64, capsys)
    assert torch.get_default_dtype() == torch.float32


@pytest.mark.parametrize("name,seed,error,message", [
    (["split_heads"], 0, TypeError, r"name must be the exercise's name as a string, e.g. 'split_heads', got a list"),
    ("split_heads", "abc", TypeError, r"seed must be a whole number such as 0, got 'abc'"),
    ("split_heads", -1, ValueError, r"seed must be 0 or more, got -1"),
])
def test_a_bad_name_or_seed_is_refused_clearly(name, seed, error, message):
    with pytest.raises(error, match=message):
        wt.check_exercise(name, lambda x, h: x, seed=seed)


@pytest.mark.parametrize("wrong,message", [
    (lambda ts, sos, eos, pad: (wt.teacher_forcing(ts, sos, eos, pad)[0], "labels"), "your labels is a str"),
    (lambda ts, sos, eos, pad: tuple(t.to("meta") for t in wt.teacher_forcing(ts, sos, eos, pad)),
     "your decoder input is on the meta device"),
])
def test_teacher_forcing_with_odd_parts_gets_a_verdict(wrong, message, capsys):
    result = verdict("teacher_forcing", wrong, capsys)
    assert not result and message in result.message


def test_a_function_that_reseeds_or_turns_off_grad_changes_nothing_outside(capsys):
    right = solution("split_heads")

    def meddles(x, h):
        torch.manual_seed(123)
        torch.set_grad_enabled(False)
        return right(x, h)
    state = torch.random.get_rng_state()
    assert verdict("split_heads", meddles, capsys)
    assert torch.equal(torch.random.get_rng_state(), state) and torch.is_grad_enabled()


def test_a_tensor_subclass_cannot_fake_its_shape_or_device(capsys):
    class Pretends(torch.Tensor):
        shape = property(lambda self: torch.Size([8, 7, 5, 2]))
        is_meta = False
    right = solution("split_heads")
    result = verdict("split_heads", lambda x, h: right(x, h).to("meta").as_subclass(Pretends), capsys)
    assert not result and "is on the meta device" in result.message

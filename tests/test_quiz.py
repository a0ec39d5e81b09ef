"""Predict-the-shape questions: the parser reads every usual way of writing a shape, refuses what is
not one, and the feedback names the wrong dim; the widget checks, reveals, and folds for slides."""

import numpy as np
import pytest
import torch

import walkthrough as wt
from walkthrough.classroom import quiz
from walkthrough.classroom.quiz import ask_shape, check_shape_answer

SPLIT = torch.Size([32, 8, 10, 64])
SIZES = {"B": 32, "H": 8, "L": 10, "d_k": 64, "D": 512}


@pytest.mark.parametrize("text", ["[32, 8, 10, 64]", "(32,8,10,64)", "32x8x10x64", "32 × 8 × 10 × 64",
                                  "32 8 10 64", "torch.Size([32, 8, 10, 64])", "  [32,8,10,64]\n", "32*8*10*64",
                                  "32, 8, 10, 64"])
def test_every_usual_spelling_of_a_shape_is_accepted(text):
    correct, feedback = check_shape_answer(text, SPLIT, "B H L d_k")
    assert correct
    assert feedback == "Right: [32, 8, 10, 64] = [B, H, L, d_k]: B = 32 sentences, H = 8 heads, " \
                       "L = 10 tokens, d_k = 64 features per head."


@pytest.mark.parametrize("text,message", [
    ("", "Type a shape first"),
    ("   ", "Type a shape first"),
    ("hello", "'hello' is not a shape"),
    ("four dims", "is not a shape"),
    ("[32, 8, -10, 64]", "-10 is not a size"),
    ("[32, 8.0, 10, 64]", "8.0 is not a whole number"),
    ("1e3", "1e3 is not a whole number"),
    ("B H L d_k", "B is a name: type its size"),
    ("[[32, 8, 10, 64]]", "is not a shape"),
    ("torch.Size([32, 8, 10, 64]", "is not a shape"),
])
def test_text_that_is_not_a_shape_is_refused_with_a_reason(text, message):
    correct, feedback = check_shape_answer(text, SPLIT, "B H L d_k")
    assert not correct and message in feedback


def test_a_wrong_size_names_the_dim_and_what_the_number_written_is():
    assert check_shape_answer("[32, 64, 10, 64]", SPLIT, SIZES) == (
        False, "Dim 1 is H = 8 heads: you wrote 64, which is d_k.")
    assert check_shape_answer("[32, 8, 10, 512]", SPLIT, SIZES) == (
        False, "Dim 3 is d_k = 64 features per head: you wrote 512, which is D.")
    _, feedback = check_shape_answer("[32, 8, 7, 64]", SPLIT, SIZES)
    assert feedback == "Dim 2 is L = 10 tokens: you wrote 7."


def test_two_wrong_sizes_are_both_named():
    _, feedback = check_shape_answer("[8, 8, 10, 512]", SPLIT, SIZES)
    assert feedback == "Dim 0 is B = 32 sentences: you wrote 8, which is H; " \
                       "dim 3 is d_k = 64 features per head: you wrote 512, which is D."


def test_swapped_dims_suggest_the_transpose():
    assert check_shape_answer("[32, 10, 8, 64]", SPLIT, "B H L d_k") == (
        False, "You swapped H and L (dims 1 and 2): did you forget a transpose?")
    assert check_shape_answer("[32, 10, 8, 64]", SPLIT) == (
        False, "You swapped dims 1 and 2: did you forget a transpose?")
    _, feedback = check_shape_answer("[64, 32, 8, 10]", SPLIT, "B H L d_k")
    assert feedback.startswith("Right sizes, wrong order: dim 0 is B = 32 sentences")


def test_a_wrong_number_of_dims_says_so_and_spots_a_view():
    _, feedback = check_shape_answer("[32, 8, 10]", SPLIT, "B H L d_k")
    assert feedback == "You wrote 3 dims; the answer has 4 ([B, H, L, d_k])."
    _, feedback = check_shape_answer("[32, 10, 512]", SPLIT, "B H L d_k")
    assert "same 163,840 numbers, so a dim is split or merged" in feedback


def test_without_names_a_size_is_matched_to_another_dim():
    _, feedback = check_shape_answer("[32, 64, 10, 64]", SPLIT)
    assert feedback == "Dim 1 is 8: you wrote 64, which is dim 3's size."


def test_a_dict_of_sizes_names_equal_sized_dims_in_order():
    correct, feedback = check_shape_answer("[2, 8, 10, 10]", (2, 8, 10, 10), {"B": 2, "H": 8, "L_q": 10, "L_k": 10})
    assert correct and "L_q = 10 query positions, L_k = 10 key positions" in feedback


def test_cross_attention_scores_swapped_lengths():
    sizes = {"B": 32, "H": 8, "L_tgt": 4, "L_src": 10}
    assert check_shape_answer("[32, 8, 10, 4]", (32, 8, 4, 10), sizes)[1] == \
        "You swapped L_tgt and L_src (dims 2 and 3): did you forget a transpose?"


def test_a_traced_row_brings_its_own_names():
    cfg = wt.ModelConfig(src_vocab_size=100, tgt_vocab_size=100, d_model=64, num_heads=4, d_ff=128, num_layers=1)
    row = next(r for r in wt.trace_shapes(cfg, batch=3, src_len=5, tgt_len=2) if r.step == "K transpose")
    assert check_shape_answer("3 4 5 16", row)[0]
    assert check_shape_answer("3 5 4 16", row)[1] == "You swapped H and L (dims 1 and 2): did you forget a transpose?"


def test_a_scalar_and_broadcast_dims():
    assert check_shape_answer("torch.Size([])", torch.Size([]))[0]
    assert check_shape_answer("()", ())[0]
    correct, feedback = check_shape_answer("[3, 1, 1, 7]", (3, 1, 1, 7), "B 1 1 L_k")
    assert correct and "1 (it broadcasts)" in feedback


def test_bad_questions_are_refused_clearly():
    with pytest.raises(ValueError, match="give one name per dim"):
        check_shape_answer("[1]", SPLIT, "B H L")
    with pytest.raises(ValueError, match="dims says H = 4 but that dim of the answer is 8"):
        check_shape_answer("[1]", wt.Row("m", "s", (32, 8, 10, 64), "B H L d_k", ""), {"H": 4})
    with pytest.raises(TypeError, match=r"pass x\.shape"):
        check_shape_answer("[1]", torch.zeros(2))
    with pytest.raises(ValueError, match="whole sizes"):
        check_shape_answer("[1]", (2.5, 3))
    with pytest.raises(TypeError, match="text must be a string"):
        check_shape_answer(None, SPLIT)


def test_the_question_checks_and_reveals():
    question = ask_shape("Q after the split?", SPLIT, "B H L d_k")
    question.answer_box.value = "[32, 10, 8, 64]"  # what Enter does
    assert "You swapped H and L" in question.feedback.value
    question.answer_box.value = "32 8 10 64"
    assert "✓ Right: [32, 8, 10, 64]" in question.feedback.value
    question.answer_box.value = "nonsense"
    question.show_button.click()
    assert "Answer: [32, 8, 10, 64] = [B, H, L, d_k]" in question.feedback.value


def test_without_widgets_the_question_is_a_fold():
    bundle = ask_shape("Q after the split? <b>", SPLIT, "B H L d_k")._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert "Q after the split? &lt;b&gt;" in html
    assert "<details><summary>show answer</summary>" in html and "[32, 8, 10, 64] = [B, H, L, d_k]" in html
    assert bundle["text/plain"].startswith("Predict the shape: Q after the split?")


def test_a_batch_of_one_reads_as_one_sentence():
    correct, feedback = wt.check_shape_answer("[1, 3, 512]", (1, 3, 512), "B L D")
    assert correct and "B = 1 sentence," in feedback and "L = 3 tokens" in feedback


@pytest.mark.parametrize("text", ["32，8，10，64", "３２，８，１０，６４", "32、8、10、64", "[３２, ８, １０, ６４]",
                                  "（32，8，10，64）", "［32，8，10，64］", "32　8　10　64", "３２×８×１０×６４"])
def test_what_a_chinese_keyboard_types_is_accepted(text):
    assert check_shape_answer(text, SPLIT, "B H L d_k")[0]


@pytest.mark.parametrize("text,message", [
    ("0x20", "'0x20' is a hexadecimal number, not a shape"),
    ("10**2", "'10**2' is a power (arithmetic), not a shape: type the size itself"),
    ("[32, 2**3, 10, 64]", "'2**3' is a power (arithmetic), not a shape"),
    ("9" * 5000, "is not a size: 5000 digits"),
])
def test_numbers_that_are_not_sizes_are_refused_with_our_message(text, message):
    correct, feedback = check_shape_answer(text, SPLIT, "B H L d_k")
    assert not correct and message in feedback and "limit" not in feedback


@pytest.mark.parametrize("expected", [
    (np.int64(32), np.int64(8), np.int64(10), np.int64(64)),
    [torch.tensor(32), torch.tensor(8), torch.tensor(10), torch.tensor(64)],
    tuple(torch.tensor([32, 8, 10, 64])),
])
def test_expected_sizes_from_numpy_or_tensors_are_whole_sizes(expected):
    assert check_shape_answer("[32, 8, 10, 64]", expected, "B H L d_k") == check_shape_answer(
        "[32, 8, 10, 64]", SPLIT, "B H L d_k")
    assert check_shape_answer("[32, 10, 8, 64]", expected, "B H L d_k")[1].startswith("You swapped H and L")


@pytest.mark.parametrize("expected", [(np.float64(32.0), 8), (torch.tensor(2.5), 3), (torch.tensor(True), 3),
                                      (np.bool_(True), 3), (True, 3)])
def test_expected_sizes_that_are_not_whole_are_still_refused(expected):
    with pytest.raises(ValueError, match="whole sizes"):
        check_shape_answer("[1, 3]", expected)


@pytest.mark.parametrize("text", [", ".join(["1000"] * 60_000), "0x" * 30_000, "[" + "7, " * 65 + "]"])
def test_a_pasted_answer_of_many_sizes_is_refused_at_the_cap(text):
    """Reading stops at the cap: 60,000 sizes took seconds (a product of 60,000 numbers), now one message."""
    correct, feedback = check_shape_answer(text, SPLIT, "B H L d_k")
    assert not correct and feedback.startswith(f"That is more than {quiz.MAX_DIMS} sizes"), feedback[:200]


def test_a_shape_of_as_many_dims_as_the_cap_is_still_read():
    assert quiz.parse_shape("1 " * quiz.MAX_DIMS) == (1,) * quiz.MAX_DIMS


def test_text_that_is_not_a_shape_is_quoted_back_short():
    correct, feedback = check_shape_answer("[" + "1 " * 30 + "oops", SPLIT, "B H L d_k")
    assert not correct and "is not a shape" in feedback and len(feedback) < 40 + 80, feedback

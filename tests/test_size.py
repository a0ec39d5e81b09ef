"""How heavy the package is (issue 38), measured the same way every time, so it can only shrink.

A code line is a line with code on it: not blank, not only a comment, not part of a docstring. The budgets are
today's sizes, not the issue's goals (the package at most 6,500 lines, a forward through 20 functions in 6 modules,
a GPT's through 16): a change that makes the package heavier fails here and has to say why by raising a number.
"""

import ast
import io
import os
import sys
import tokenize
from pathlib import Path

import pytest
import torch

import walkthrough as wt

ROOT = Path(__file__).resolve().parent.parent
# Raised from 8,230 and 10,180 by issues 44 and 46: the class set's checks and made pairs (tasks/class_sentences.py),
# the translator's token probabilities, unsure mark and one check per input, the one memory guard of training and
# decoding, the repeat rule, the text table, and issue 46's checks at the edges; the notebook benchmark and the
# translator's measurements in scripts/. Lowered by issue 45's first steps (code only the tests called moved into
# them); its goals (7,000 and 9,000 or less) are still open.
PACKAGE_BUDGET = 8_505  # walkthrough/ (the goal: 7,000)
REPOSITORY_BUDGET = 10_545  # walkthrough/, tools/, scripts/ and benchmarks/ together (the goal: 9,000)
FORWARD_LINES = 30  # the longest forward a student reads (met)


def code_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold code (tokens other than comments), docstrings left out."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skipped:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines - docstrings


def folder_lines(*folders: str) -> int:
    return sum(len(code_lines(path.read_text())) for folder in folders for path in (ROOT / folder).rglob("*.py"))


def test_the_counter_skips_comments_blank_lines_and_docstrings():
    source = ('"""Module.\n\nmore."""\n\n# a comment\nx = 1  # code\n\n\n'
              'def f():\n    """Doc."""\n    return (1,\n            2)\n')
    assert sorted(code_lines(source)) == [6, 9, 11, 12]


def test_the_package_is_no_heavier_than_its_budget():
    assert folder_lines("walkthrough") <= PACKAGE_BUDGET
    assert folder_lines("walkthrough", "tools", "scripts", "benchmarks") <= REPOSITORY_BUDGET


def test_every_forward_fits_beside_its_paragraph():
    long = {}
    for path in (ROOT / "walkthrough").rglob("*.py"):
        source = path.read_text()
        lines = code_lines(source)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.name == "forward":
                count = len([n for n in lines if node.lineno <= n <= node.end_lineno])
                if count > FORWARD_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno}"] = count
    assert not long, long


def package_functions_called(run) -> set[tuple[str, str]]:
    """(module file, function) of every function of the package that ``run()`` calls."""
    called = set()

    def watch(frame, event, _arg):
        path = frame.f_code.co_filename
        if event == "call" and f"{os.sep}walkthrough{os.sep}" in path and "<" not in frame.f_code.co_name:
            called.add((Path(path.split(f"walkthrough{os.sep}")[-1]).as_posix(), frame.f_code.co_qualname))

    sys.setprofile(watch)
    try:
        run()
    finally:
        sys.setprofile(None)
    return called


@pytest.mark.parametrize("kind,functions,modules", [("encoder-decoder", 26, 7), ("gpt", 23, 9)])
def test_a_forward_runs_no_more_package_functions_than_today(kind, functions, modules):
    """The issue's goals: 20 functions in 6 modules, and 16 for a GPT (29 in 8 and 25 in 9 before issue 45: a forward
    without a cache no longer enters the cache's module to make its mask or to guard its step)."""
    torch.manual_seed(0)
    ids = torch.randint(1, 20, (2, 5))
    if kind == "gpt":
        model = wt.GPT(wt.GPTConfig(vocab_size=20, d_model=16, num_heads=4, num_kv_heads=2, d_ff=32, num_layers=2,
                                    max_len=16)).eval()
        called = package_functions_called(lambda: model(ids))
    else:
        model = wt.Transformer(wt.ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32,
                                              num_layers=2)).eval()
        called = package_functions_called(lambda: model(ids, ids[:, :4]))
    assert ("model/attention.py", "MultiHeadAttention.forward") in called  # the watch sees the model
    assert len(called) <= functions and len({module for module, _ in called}) <= modules, sorted(called)

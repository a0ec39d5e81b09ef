"""The command line: defaults from the config, bad input refused before any work, the accuracy line last."""

import dataclasses
import re
import subprocess
import sys

import pytest

import walkthrough as wt
from walkthrough import __main__ as cli
from walkthrough import train


def test_trace_defaults_are_the_configs_own():
    args = cli._parser().parse_args(["trace"])
    paper = wt.ModelConfig.paper_base()
    assert (args.d_model, args.heads, args.d_ff, args.layers, args.max_len, args.vocab) == (
        paper.d_model, paper.num_heads, paper.d_ff, paper.num_layers, paper.max_len, paper.tgt_vocab_size)
    assert (args.batch, args.src_len, args.tgt_len) == (32, 10, 4), "the source articles' sizes"


def test_trace_defaults_follow_the_config(monkeypatch):
    """Not copied literals: change the config's preset and the command line's defaults change with it."""
    smaller = dataclasses.replace(wt.ModelConfig.paper_base(), d_model=256, num_heads=4)
    monkeypatch.setattr(cli.ModelConfig, "paper_base", classmethod(lambda cls, **changes: smaller))
    args = cli._parser().parse_args(["trace"])
    assert (args.d_model, args.heads) == (256, 4)


@pytest.fixture
def no_training(monkeypatch):
    """Any attempt to build or run a trainer fails the test: bad input must be refused before any work."""
    def refuse(*args, **kwargs):
        raise AssertionError("training started before the input was checked")
    monkeypatch.setattr(train, "Trainer", refuse)


@pytest.mark.parametrize("argv,message", [
    (["--save", "/nonexistent/dir/x.pt"], r"--save /nonexistent/dir/x.pt: the folder /nonexistent/dir does not exist"),
    (["--save", ""], "--save is empty: give a file name"),
    (["--save", "."], r"--save \. is a folder, not a file: add a file name"),
    (["--steps", "100", "--warmup", "150"], r"warmup must be between 0 and steps=100, got 150.*warmup=15"),
    (["--seed", "-1"], "seed must be a whole number >= 0"),
])
def test_bad_train_input_is_an_error_before_training(no_training, capsys, argv, message):
    assert cli.main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert re.search("^error: " + message, err), err


@pytest.mark.parametrize("argv,message", [
    (["--steps", "0"], "argument --steps: must be at least 1, got 0"),
    (["--steps", "-5"], "argument --steps: must be at least 1, got -5"),
    (["--steps", "2.5"], "argument --steps: must be a whole number, got '2.5'"),
    (["--held-out", "0"], "argument --held-out: must be at least 1, got 0"),
    (["--seconds", "0"], "argument --seconds: must be a positive number of seconds"),
    (["--seconds", "soon"], "argument --seconds: must be a number of seconds such as 30, got 'soon'"),
    (["--held-out", "100000000"], "argument --held-out: must be at most 10,000, got 100,000,000"),
])
def test_bad_train_flags_are_refused_by_the_parser(no_training, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        cli.main(["train", *argv])
    assert stop.value.code == 2
    assert "error: " + message in capsys.readouterr().err


def test_a_trace_deeper_than_any_known_model_is_refused_before_building(capsys, monkeypatch):
    monkeypatch.setattr(cli, "trace_shapes", lambda *args: pytest.fail("traced before the flags were checked"))
    with pytest.raises(SystemExit):
        cli.main(["trace", "--layers", "100000"])
    err = capsys.readouterr().err
    assert "argument --layers: must be at most 96, got 100,000: the deepest well-known models" in err


def test_bad_trace_sizes_are_an_error(capsys):
    assert cli.main(["trace", "--heads", "7"]) == 2
    assert "error: d_model=512 is not divisible by num_heads=7" in capsys.readouterr().err


def test_command_line_trains_shows_progress_and_ends_with_the_accuracy(tmp_path):
    run = subprocess.run([sys.executable, "-m", "walkthrough", "train", "--steps", "20", "--held-out", "20",
                          "--save", str(tmp_path / "ckpt.pt")], capture_output=True, text=True, check=True)
    assert re.fullmatch(r"held-out exact-match accuracy: [01]\.\d\d \(20 examples\)", run.stdout.splitlines()[-1])
    assert "training" in run.stderr and "20/20" in run.stderr  # the progress bar
    assert "trained steps 0 → 20 of 20" in run.stderr
    trainer = wt.load_checkpoint(tmp_path / "ckpt.pt")
    assert trainer.step == 20 and trainer.settings.warmup == 3, "--steps keeps the default's 15% warm-up"


def test_command_line_time_budget_stops_cleanly_and_still_scores(tmp_path):
    run = subprocess.run([sys.executable, "-m", "walkthrough", "train", "--seconds", "1e-9", "--held-out", "10"],
                         capture_output=True, text=True, check=True)
    assert "trained steps 0 → 1 of 1000" in run.stderr and "time budget ran out" in run.stderr
    assert re.fullmatch(r"held-out exact-match accuracy: 0\.\d\d \(10 examples\)", run.stdout.splitlines()[-1])


def test_the_gpt_command_line_ends_with_the_accuracy_too(tmp_path):
    run = subprocess.run([sys.executable, "-m", "walkthrough", "train", "--model", "gpt", "--steps", "5",
                          "--held-out", "5", "--save", str(tmp_path / "gpt.pt")], capture_output=True, text=True,
                         check=True)
    assert re.fullmatch(r"held-out exact-match accuracy: [01]\.\d\d \(5 examples\)", run.stdout.splitlines()[-1])
    trainer = wt.load_gpt_checkpoint(tmp_path / "gpt.pt")
    assert trainer.step == 5 and trainer.settings.warmup == 1, "the settings' own 15% warm-up, at least one step"

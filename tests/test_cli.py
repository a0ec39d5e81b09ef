"""The command line: defaults from the config, bad input refused before any work, the accuracy line last."""

import argparse
import dataclasses
import gettext
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import walkthrough as wt
from walkthrough import __main__ as cli
from walkthrough.tasks import checkpoints
from walkthrough.tasks import numerals as numeral_task

from .test_checkpoints import half_written_then_full

ROOT = Path(__file__).resolve().parents[1]
CHINESE = re.compile(r"[\u4e00-\u9fff]")


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
    monkeypatch.setattr(numeral_task, "Trainer", refuse)


@pytest.mark.parametrize("argv,message", [
    (["--save", "/nonexistent/dir/x.pt"], r"--save /nonexistent/dir/x.pt: the folder /nonexistent/dir does not exist"),
    (["--save", ""], "--save is empty: give a file name"),
    (["--save", "."], r"--save is '\.', the current folder .*: give a file name"),
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
    trainer = wt.load_checkpoint(tmp_path / "gpt.pt")
    assert trainer.step == 5 and trainer.settings.warmup == 1, "the settings' own 15% warm-up, at least one step"


def test_a_seed_torch_cannot_take_is_refused_with_its_bound(no_training, capsys):
    assert cli.main(["train", "--seed", str(2**64)]) == 2
    assert re.search(r"^error: seed must be at most 2\*\*63 - 1 = 9,223,372,036,854,775,807, got "
                     r"18,446,744,073,709,551,616", capsys.readouterr().err, re.MULTILINE)


def test_resume_takes_its_settings_from_the_checkpoint(no_training, capsys):
    shipped = str(wt.shipped_file("checkpoints", "numerals.pt"))
    assert cli.main(["train", "--resume", shipped, "--steps", "50", "--seed", "3"]) == 2
    assert re.search(r"^error: --resume continues the run saved in .*numerals\.pt with the settings stored there "
                     r".*leave out --steps, --seed$", capsys.readouterr().err, re.MULTILINE)
    assert cli.main(["train", "--resume", "/nonexistent/x.pt"]) == 2
    assert "error: no checkpoint at /nonexistent/x.pt" in capsys.readouterr().err


@pytest.mark.parametrize("name,model,fix", [("gpt_numerals.pt", "transformer", "pass --model gpt"),
                                            ("numerals.pt", "gpt", "pass --model transformer"),
                                            ("tatoeba.pt", "transformer", "only the numeral tasks' trainers resume")])
def test_resume_names_the_model_its_file_holds(capsys, name, model, fix):
    """One loader reads every task's file: the trainer it gives back must be the one --model asks for."""
    shipped = str(wt.shipped_file("checkpoints", name))
    assert cli.main(["train", "--resume", shipped, "--model", model]) == 2
    assert re.search(rf"^error: --resume .*{re.escape(name)} holds \w+, not a --model {model} trainer: {fix}",
                     capsys.readouterr().err, re.MULTILINE)


def test_resume_on_the_command_line_is_bit_exact_with_the_python_apis(tmp_path, capsys):
    half = tmp_path / "half.pt"
    trainer = wt.Trainer(wt.TrainSettings(d_model=32, d_ff=64, batch_size=16, steps=8))
    trainer.run(3, progress=False)
    wt.save_checkpoint(trainer, half)
    assert cli.main(["train", "--resume", str(half), "--held-out", "2", "--save", str(tmp_path / "full.pt")]) == 0
    assert "trained steps 3 → 8 of 8" in capsys.readouterr().err
    by_python = wt.load_checkpoint(half)
    by_python.run(progress=False)
    by_cli = wt.load_checkpoint(tmp_path / "full.pt")
    assert by_cli.step == 8 and by_cli.losses == by_python.losses
    for (name, a), b in zip(by_cli.model.state_dict().items(), by_python.model.state_dict().values()):
        assert torch.equal(a, b), name
    state_cli, state_python = by_cli.optimizer.state_dict()["state"], by_python.optimizer.state_dict()["state"]
    assert all(torch.equal(state_cli[i]["exp_avg_sq"], state_python[i]["exp_avg_sq"]) for i in state_python)


def test_ctrl_c_saves_what_was_trained_says_so_and_exits_cleanly(tmp_path):
    """A real SIGINT to a real training process, a few steps in (the child starts with SIGINT's default action,
    whatever this process does with it, so Python turns it into KeyboardInterrupt there)."""
    path = tmp_path / "x.pt"
    child = subprocess.Popen([sys.executable, "-m", "walkthrough", "train", "--steps", "400", "--held-out", "5",
                              "--save", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    reader = threading.Thread(target=lambda: seen.extend(iter(lambda: os.read(child.stderr.fileno(), 4096), b"")))
    reader.start()
    try:
        while not any(int(done) >= 3 for done in re.findall(rb"(\d+)/400", b"".join(seen))):
            assert child.poll() is None, b"".join(seen).decode(errors="replace")
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        out = child.stdout.read().decode()  # not communicate(): the reader thread alone reads stderr
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
        reader.join()
    err = b"".join(seen).decode()
    assert child.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    found = re.search(rf"interrupted at step (\d+) of 400: saved to {re.escape(str(path))}; go on with: "
                      rf"python -m walkthrough train --resume {re.escape(str(path))}", err)
    assert found, err
    resumed = wt.load_checkpoint(path)
    assert 3 <= resumed.step == int(found.group(1)) < 400 and len(resumed.losses) == resumed.step
    assert "accuracy" not in out, "an interrupted run does not go on to score"


@pytest.mark.parametrize("flags,flag", [(["--resume", "{shipped}"], "--resume"), (["--report", "r.json"], "--report"),
                                        (["--model", "gpt"], "--model gpt")])
def test_the_translator_refuses_what_only_the_numeral_run_takes(flags, flag, monkeypatch, capsys):
    """--task sentences once ignored these: --resume x.pt --save x.pt trained from nothing over x.pt."""
    from walkthrough.tasks import translator

    def refuse(*args, **kwargs):
        raise AssertionError("the tokenizer was trained before the input was checked")
    monkeypatch.setattr(translator, "train_tokenizer", refuse)
    shipped = str(wt.shipped_file("checkpoints", "tatoeba.pt"))
    argv = ["train", "--task", "sentences", *(f.format(shipped=shipped) for f in flags), "--save", "x.pt"]
    assert cli.main(argv) == 2
    assert f"error: {flag} is for --task numerals: the translator (--task sentences) trains from its first step" in \
        capsys.readouterr().err


@pytest.mark.classroom  # builds the translator's tokenizer and data: 7 s
def test_ctrl_c_in_the_translators_run_saves_what_was_trained(tmp_path, monkeypatch, capsys):
    from walkthrough.tasks import translator

    run = translator.TranslatorTrainer.run

    def two_steps_then_ctrl_c(self, seconds=None, evaluate=True):
        run(self, 2, progress=False)
        raise KeyboardInterrupt
    monkeypatch.setattr(translator.TranslatorTrainer, "run", two_steps_then_ctrl_c)
    path = tmp_path / "c.pt"
    assert cli.main(["train", "--task", "sentences", "--steps", "5", "--batch-size", "8", "--save", str(path)]) == 130
    assert f"interrupted at step 2 of 5: saved to {path}; load it with walkthrough.load_checkpoint" in \
        capsys.readouterr().err
    assert wt.load_checkpoint(path).step == 2


def test_a_resumed_run_drops_out_as_the_run_it_continues(tmp_path, capsys):
    trainer = wt.Trainer(wt.TrainSettings(d_model=32, d_ff=64, batch_size=16, steps=4), dropout=0.1)
    trainer.run(2, progress=False)
    wt.save_checkpoint(trainer, tmp_path / "half.pt")
    assert wt.load_checkpoint(tmp_path / "half.pt").model.cfg.dropout == 0.1
    assert cli.main(["train", "--resume", str(tmp_path / "half.pt"), "--held-out", "2",
                     "--save", str(tmp_path / "full.pt")]) == 0
    assert wt.load_checkpoint(tmp_path / "full.pt").model.cfg.dropout == 0.1


def test_a_full_disk_during_the_save_is_one_error_line_and_no_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(checkpoints.torch, "save", half_written_then_full(torch.save))
    assert cli.main(["train", "--steps", "2", "--held-out", "1", "--save", str(tmp_path / "x.pt")]) == 1
    err = capsys.readouterr().err
    assert re.search(r"^error: could not write .*x\.pt \(the disk is full\): nothing was written", err, re.MULTILINE)
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_translate_names_the_file_it_found_and_what_that_file_holds(tmp_path, monkeypatch, capsys):
    """Issue 46: with a numerals checkpoint at checkpoints/tatoeba.pt under the working folder, translate said
    "--checkpoint None holds a Trainer" (no --checkpoint was given) and never said which file it had picked."""
    (tmp_path / "checkpoints").mkdir()
    found = tmp_path / "checkpoints" / "tatoeba.pt"
    found.write_bytes(wt.shipped_file("checkpoints", "numerals.pt").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["translate", "我饿了。"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"no --checkpoint given: translating with {found}, found from the working folder",
        f"error: {found} holds a Trainer, not a translator: pass --checkpoint with a file that train --task "
        "sentences --save wrote"], err


@pytest.fixture
def chinese():
    wt.set_language("zh")
    yield
    wt.set_language("en")


@pytest.mark.parametrize("argv,torchrun,english", [
    (["--model", "gpt", "--dropout", "0.1"], False, "--dropout is for the encoder-decoder"),
    (["--report", "r.pt"], False, "--report records every rank"),
    (["--seconds", "5"], True, "under torchrun give --steps"),
])
def test_the_command_lines_own_errors_speak_chinese(chinese, no_training, monkeypatch, capsys, argv, torchrun,
                                                    english):
    if torchrun:
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and CHINESE.search(err) and english not in err, err


@pytest.mark.parametrize("argv,chinese_words", [
    (["train", "--steps", "0"], ["用法", "参数 --steps", "至少为 1"]),
    (["train", "--seconds", "soon"], ["参数 --seconds", "秒数"]),
    (["train", "--model", "bert"], ["无效的选项", "'bert'"]),
    (["train", "--seed", "1e3"], ["无效的 int 值"]),
    ([], ["缺少必需的参数"]),
    (["train", "--frobnicate"], ["无法识别的参数"]),
    (["train", "--s", "5"], ["有歧义的选项", "--seconds", "--seed"]),
    (["train", "--steps"], ["这里需要一个参数值"]),
])
def test_argparses_own_messages_speak_chinese(chinese, no_training, capsys, argv, chinese_words):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert all(words in err for words in chinese_words), err
    assert argparse._ is gettext.gettext, "argparse is left as it was"


def test_help_speaks_chinese(chinese, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["train", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert all(words in out for words in ("用法", "选项", "显示这条帮助信息并退出")), out

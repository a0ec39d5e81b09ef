import dataclasses
import math
import os
import signal
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import walkthrough as wt
from walkthrough.tasks import checkpoints, training
from walkthrough.tasks import numerals as numeral_task

ROOT = Path(__file__).resolve().parents[1]
TINY = wt.TrainSettings(d_model=32, d_ff=64, batch_size=16, steps=30, warmup=5)
PHRASE_SETTINGS = wt.TrainSettings(d_model=32, num_heads=4, d_ff=64, num_layers=1, steps=60, warmup=10, peak_lr=1e-2,
                                  smoothing=0.0)  # notebook 06's


def test_loss_ignores_pad_and_equals_the_one_hot_form():
    logits = torch.randn(2, 3, 7)
    labels = torch.tensor([[4, 5, 0], [6, 0, 0]])
    loss = wt.sequence_loss(logits, labels, pad_id=0)
    real = labels != 0
    one_hot = F.one_hot(labels, 7).float()  # [B, L, V]
    by_hand = -(one_hot * logits.log_softmax(-1)).sum(-1)[real].mean()
    torch.testing.assert_close(loss, by_hand)
    with pytest.raises(ValueError, match="labels are ids, not one-hot"):
        wt.sequence_loss(logits, one_hot, pad_id=0)


def test_smoothing_floor_is_the_loss_of_predicting_the_smoothed_target():
    vocab, smoothing = 35, 0.1
    labels = torch.tensor([[4, 9, 2], [7, 2, 0]])  # [B, L], one PAD
    target = torch.full((2, 3, vocab), smoothing / vocab)  # [B, L, V]: the smoothed distribution
    target.scatter_(-1, labels.unsqueeze(-1), 1 - smoothing + smoothing / vocab)
    loss = wt.sequence_loss(target.log(), labels, pad_id=0, smoothing=smoothing)  # logits = log of that target
    assert training.smoothing_floor(smoothing, vocab) == pytest.approx(loss.item(), abs=1e-6)
    assert training.smoothing_floor(smoothing, vocab) == pytest.approx(0.661, abs=1e-3)
    worse = wt.sequence_loss(target.log() + torch.randn(2, 3, vocab), labels, pad_id=0, smoothing=smoothing)
    assert worse > loss
    assert training.smoothing_floor(0.0, vocab) == 0.0


def test_schedule_rises_then_falls_to_zero():
    lrs = [wt.warmup_lr(s, 10, 100, 1e-3) for s in range(100)]
    assert lrs[9] == pytest.approx(1e-3) and lrs[0] == pytest.approx(1e-4)
    assert max(lrs) == lrs[9] and lrs[-1] < 2e-5


def test_training_lowers_the_loss_and_is_deterministic():
    first, second = wt.Trainer(TINY), wt.Trainer(TINY)
    report = first.run(progress=False)
    assert second.run(progress=False).losses == report.losses == first.losses
    assert sum(report.losses[-5:]) < sum(report.losses[:5])
    assert (report.start_step, report.end_step, report.stopped_by) == (0, 30, "schedule end")
    assert first.lrs == numeral_task.lr_curve(TINY)


def test_checkpoint_resume_equals_uninterrupted_training(tmp_path):
    straight = wt.Trainer(TINY)
    straight.run(progress=False)
    interrupted = wt.Trainer(TINY)
    interrupted.run(12, progress=False)
    wt.save_checkpoint(interrupted, tmp_path / "ckpt.pt")
    resumed = wt.load_checkpoint(tmp_path / "ckpt.pt")
    resumed.run(18, progress=False)
    assert resumed.step == 30
    assert resumed.losses == straight.losses
    for a, b in zip(resumed.model.parameters(), straight.model.parameters()):
        torch.testing.assert_close(a, b)


def _history_agrees(trainer) -> bool:
    return trainer.step == len(trainer.losses) == len(trainer.lrs)


def test_an_interrupted_run_loses_nothing_and_resumes_exactly(tmp_path):
    straight = wt.Trainer(TINY)
    straight.run(20, progress=False)

    def stop_at_step_7(trainer):
        if trainer.step == 7:
            raise KeyboardInterrupt  # what the notebook's stop button raises
    interrupted = wt.Trainer(TINY)
    with pytest.raises(KeyboardInterrupt):
        interrupted.run(20, progress=False, on_step=stop_at_step_7)
    assert interrupted.step == 7 and _history_agrees(interrupted)
    assert interrupted.losses == straight.losses[:7] and interrupted.lrs == straight.lrs[:7]
    wt.save_checkpoint(interrupted, tmp_path / "ckpt.pt")
    resumed = wt.load_checkpoint(tmp_path / "ckpt.pt")
    resumed.run(13, progress=False)
    assert resumed.losses == straight.losses
    for a, b in zip(resumed.model.parameters(), straight.model.parameters()):
        assert torch.equal(a, b)


def test_an_interrupt_that_arrives_mid_update_is_held_until_the_step_is_recorded():
    """A real SIGINT (the stop button) between the weight update and its record must not split them. The test
    installs Python's own SIGINT handler, as a kernel has, so it holds when pytest starts with SIGINT ignored (a
    background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_mid_update()
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_mid_update():
    reference = wt.Trainer(TINY)
    reference.run(4, progress=False)
    trainer = wt.Trainer(TINY)
    trainer.run(3, progress=False)
    real_step = trainer.scheduler.step

    def step_then_get_interrupted():
        os.kill(os.getpid(), signal.SIGINT)  # arrives after optimizer.step(), before the step is counted
        real_step()
    trainer.scheduler.step = step_then_get_interrupted
    with pytest.raises(KeyboardInterrupt):
        trainer.run(5, progress=False)
    assert trainer.step == 4 and _history_agrees(trainer)
    assert trainer.losses == reference.losses
    for a, b in zip(trainer.model.parameters(), reference.model.parameters()):
        assert torch.equal(a, b)


def test_a_time_budget_stops_cleanly_between_steps_and_reports_the_score():
    trainer = wt.Trainer(PHRASE_SETTINGS, pairs=wt.PHRASES)
    report = trainer.run(seconds=1e-9, progress=False)  # any step outlasts the budget: exactly one step
    assert (report.start_step, report.end_step, report.stopped_by) == (0, 1, "time budget")
    assert _history_agrees(trainer) and report.losses == trainer.losses
    assert report.score == trainer.accuracy(wt.PHRASES) and "exact match on its phrases" in str(report)
    assert "trained steps 0 → 1 of 60" in str(report) and "time budget ran out" in str(report)
    report = trainer.run(seconds=1e6, progress=False)
    assert (report.end_step, report.stopped_by) == (60, "schedule end")
    assert report.score == 1.0, "the phrases are memorised"
    assert trainer.translate(["早上好"]) == ["good morning"]


def test_a_finished_schedule_refuses_more_steps_instead_of_training_at_rate_zero():
    trainer = wt.Trainer(TINY)
    trainer.run(25, progress=False)
    with pytest.raises(ValueError, match=r"steps=10 goes past the schedule's end: step 25 of 30, so at most 5"):
        trainer.run(10, progress=False)
    assert trainer.step == 25, "refused before any work"
    trainer.run(progress=False)
    with pytest.raises(ValueError, match=r"all 30 steps of the schedule are done.*make a new trainer"):
        trainer.run(progress=False)
    assert trainer.step == 30 and _history_agrees(trainer)


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(steps=0), ValueError, "steps must be at least 1"),
    (dict(seconds=0), ValueError, "seconds must be a positive time budget"),
    (dict(seconds="30"), TypeError, "seconds must be a number"),
    (dict(on_step=3), TypeError, "on_step must be a function"),
])
def test_run_rejects_bad_arguments_before_any_work(kwargs, error, message):
    trainer = wt.Trainer(TINY)
    with pytest.raises(error, match=message):
        trainer.run(progress=False, **kwargs)
    assert trainer.step == 0 and not trainer.losses


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(peak_lr=-1), ValueError, r"peak_lr must be a positive learning rate such as 3e-3, got -1.*climbs the loss"),
    (dict(peak_lr=float("nan")), ValueError, "peak_lr must be a positive learning rate"),
    (dict(batch_size=0), ValueError, "batch_size must be at least 1, got 0"),
    (dict(steps=2.5), TypeError, r"steps must be a whole number, got 2.5"),
    (dict(steps=-5), ValueError, "steps must be at least 1, got -5"),
    (dict(smoothing=1.5), ValueError, r"smoothing must be in \[0, 1\).*got 1.5"),
    (dict(steps=100, warmup=150), ValueError, r"warmup must be between 0 and steps=100, got 150.*warmup=15"),
    (dict(warmup=-1), ValueError, "warmup must be between 0 and steps"),
    (dict(seed=-3), ValueError, "seed must be a whole number >= 0"),
])
def test_train_settings_reject_bad_values(kwargs, error, message):
    with pytest.raises(error, match=message):
        wt.TrainSettings(**kwargs)


def test_bad_checkpoints_are_named(tmp_path):
    path = tmp_path / "ckpt.pt"
    with pytest.raises(ValueError, match="no checkpoint at"):
        wt.load_checkpoint(path)
    wt.save_checkpoint(wt.Trainer(TINY), path)
    with pytest.raises(ValueError, match=r"untrained model \(step 0\)"):
        wt.load_checkpoint(path)
    assert wt.load_checkpoint(path, allow_untrained=True).step == 0
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="is not a readable checkpoint"):
        wt.load_checkpoint(path)
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="not a walkthrough checkpoint"):
        wt.load_checkpoint(path)
    text = tmp_path / "notes.txt"
    text.write_text("hello world, not a checkpoint\n")
    with pytest.raises(ValueError, match=r"notes.txt is not a checkpoint .*pass the .pt file that save_checkpoint"):
        wt.load_checkpoint(text)
    with pytest.raises(TypeError, match=r"path must be a file path .* got None"):
        wt.load_checkpoint(None)
    with pytest.raises(ValueError, match="is a folder, not a file"):
        wt.load_checkpoint(tmp_path)


@pytest.mark.parametrize("path,message", [
    ("/nonexistent/dir/x.pt", r"the folder /nonexistent/dir does not exist; create it first"),
    ("", "path is empty: give a file name"),
    (".", "is '.', the current folder"),
])
def test_saving_to_a_bad_path_is_refused_before_writing(path, message):
    with pytest.raises(ValueError, match=message):
        wt.save_checkpoint(wt.Trainer(TINY), path)


def test_a_weights_only_checkpoint_translates_but_cannot_resume(tmp_path):
    trainer = wt.Trainer(TINY)
    trainer.run(10, progress=False)
    full, light = tmp_path / "full.pt", tmp_path / "light.pt"
    wt.save_checkpoint(trainer, full)
    wt.save_checkpoint(trainer, light, optimizer=False)
    assert light.stat().st_size < full.stat().st_size / 2
    loaded = wt.load_checkpoint(light)
    assert loaded.losses == trainer.losses and loaded.translate(["三百"]) == trainer.translate(["三百"])
    with pytest.raises(ValueError, match=r"weights-only checkpoint.*cannot resume training"):
        loaded.run(1, progress=False)


def test_checkpoint_with_other_vocabularies_is_refused(tmp_path):
    trainer = wt.Trainer(TINY)
    trainer.run(1, progress=False)
    path = tmp_path / "ckpt.pt"
    wt.save_checkpoint(trainer, path)
    state = torch.load(path, weights_only=True)
    state["tgt_itos"] = state["tgt_itos"][:-1] + ["zillion"]
    torch.save(state | {"sha256": checkpoints.digest(state)}, path)  # a consistent file, with another vocabulary
    with pytest.raises(ValueError, match="other vocabularies"):
        wt.load_checkpoint(path)


def test_translate_checks_vocabularies_and_warns_on_unknown_characters():
    trainer = wt.Trainer(TINY)
    with pytest.warns(UserWarning, match="read as <unk>: 两"):
        assert isinstance(trainer.translate(["两百"])[0], str)
    src_phrases, tgt_phrases = wt.phrase_vocabs()
    with pytest.raises(ValueError, match="do not match the model"):
        wt.translate(trainer.model, ["三"], src_phrases, tgt_phrases)


@pytest.mark.parametrize("texts,error,message", [
    ("三百", TypeError, r"texts must be a list of strings, got the single string '三百': wrap it in a list"),
    ([""], ValueError, r"texts\[0\] is blank"),
    (["三百", "  "], ValueError, r"texts\[1\] is blank \('  '\): there is nothing to translate"),
    ([], ValueError, "texts is empty"),
    ([305], TypeError, r"texts\[0\] must be a string"),
])
def test_translate_rejects_a_string_and_blank_texts(texts, error, message):
    with pytest.raises(error, match=message):
        wt.Trainer(TINY).translate(texts)


def test_the_loop_trains_any_model_with_its_own_batch_and_loss():
    """What a new task (notebook 09's language model) plugs in: a model, batch(step) and loss(model, batch)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    true_weights = torch.tensor([[2.0, -1.0, 0.5]])

    def batch(step):
        x = torch.randn(16, 3, generator=torch.Generator().manual_seed(step))  # [B, 3], fixed by the step
        return x, x @ true_weights.T  # [B, 1]

    def loss(model, batch):
        x, y = batch
        return F.mse_loss(model(x), y)

    loop = training.TrainingLoop(model, batch, loss, steps=200, warmup=10, peak_lr=0.05,
                              score=lambda: -F.mse_loss(model.weight, true_weights).item(), score_name="-error")
    report = loop.run(progress=False, evaluate=True)
    assert report.end_step == 200 and _history_agrees(loop)
    assert report.losses[-1] < 1e-3 < report.losses[0]
    assert report.score > -1e-3
    torch.testing.assert_close(model.weight.detach(), true_weights, atol=0.02, rtol=0)


def test_greedy_decode_stops_finished_rows(small_cfg):
    model = wt.Transformer(small_cfg).eval()
    src = torch.randint(1, 23, (3, 5))
    steps = list(wt.greedy_steps(model, src, max_new_tokens=6, sos_id=1, eos_id=2))
    prefixes = [ys.shape for ys, _ in steps]
    assert prefixes[0] == (3, 2) and all(b[1] == a[1] + 1 for a, b in zip(prefixes, prefixes[1:]))
    assert steps[0][1].shape == (3, 19)
    out = wt.greedy_decode(model, src, max_new_tokens=6, sos_id=1, eos_id=2)
    assert torch.equal(out, steps[-1][0]) and (out[:, 0] == 1).all()
    for row in out.tolist():
        if 2 in row:
            assert all(t == 0 for t in row[row.index(2) + 1:])


def test_train_settings_warm_up_follows_the_steps():
    assert wt.TrainSettings().warmup == 150 and wt.TrainSettings(steps=5).warmup == 1
    assert wt.TrainSettings(steps=20).warmup == 3 == wt.GPTSettings(steps=20).warmup
    assert wt.TrainSettings(steps=5, warmup=0).warmup == 0, "an explicit warm-up is kept"
    trainer = wt.Trainer(wt.TrainSettings(d_model=32, d_ff=64, batch_size=8, steps=5))
    assert trainer.run(progress=False).end_step == 5


def test_a_diverging_run_stops_at_the_first_non_finite_loss_and_names_peak_lr():
    trainer = wt.Trainer(dataclasses.replace(TINY, peak_lr=1e6))
    with pytest.raises(ValueError, match=r"the loss at step \d+ is (nan|inf) \(not finite\): training diverged.*"
                                         r"lower peak_lr \(e\.g\. 100000\)"):
        trainer.run(progress=False)
    assert 0 < trainer.step < TINY.steps and _history_agrees(trainer)
    assert all(math.isfinite(loss) for loss in trainer.losses), "no NaN is recorded"


def test_a_loss_with_every_label_pad_says_there_is_nothing_to_score():
    with pytest.raises(ValueError, match=r"every label is PAD \(pad_id=0\): there is nothing to score"):
        wt.sequence_loss(torch.randn(2, 3, 7), torch.zeros(2, 3, dtype=torch.long), pad_id=0)


@pytest.mark.parametrize("make", [
    lambda: wt.GPTTrainer(threads=10**6),
    lambda: training.TrainingLoop(torch.nn.Linear(2, 1), None, None, steps=5, warmup=1, peak_lr=0.1, threads=10**6),
    lambda: training.torch_threads(10**6).__enter__(),
])
def test_more_threads_than_cores_are_refused_before_any_work(make):
    threads = torch.get_num_threads()
    with pytest.raises(ValueError, match=r"threads=1000000 is more than the \d+ CPU cores this process may use"):
        make()
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("make,message", [
    (lambda: wt.GPTSettings(batch_size=10**8), "batch_size must be at most 4,096, got 100,000,000"),
    (lambda: wt.GPTTrainer(wt.GPTSettings(batch_size=10**8)), "batch_size must be at most 4,096"),
    (lambda: wt.held_out_pairs(10**8), "count must be at most 10,000 held-out examples, got 100,000,000"),
])
def test_sizes_that_would_hang_are_refused_with_a_bound(make, message):
    with pytest.raises(ValueError, match=message):
        make()

import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import walkthrough as wt

TINY = wt.TrainSettings(d_model=32, d_ff=64, batch_size=16, steps=30, warmup=5)


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


def test_schedule_rises_then_falls_to_zero():
    lrs = [wt.warmup_lr(s, 10, 100, 1e-3) for s in range(100)]
    assert lrs[9] == pytest.approx(1e-3) and lrs[0] == pytest.approx(1e-4)
    assert max(lrs) == lrs[9] and lrs[-1] < 2e-5


def test_training_lowers_the_loss_and_is_deterministic():
    first, second = wt.Trainer(TINY), wt.Trainer(TINY)
    losses = first.run(progress=False)
    assert second.run(progress=False) == losses
    assert sum(losses[-5:]) < sum(losses[:5])


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


def test_checkpoint_with_other_vocabularies_is_refused(tmp_path):
    trainer = wt.Trainer(TINY)
    trainer.run(1, progress=False)
    path = tmp_path / "ckpt.pt"
    wt.save_checkpoint(trainer, path)
    state = torch.load(path, weights_only=True)
    state["tgt_itos"] = state["tgt_itos"][:-1] + ["zillion"]
    torch.save(state, path)
    with pytest.raises(ValueError, match="other vocabularies"):
        wt.load_checkpoint(path)


def test_translate_checks_vocabularies_and_warns_on_unknown_characters():
    trainer = wt.Trainer(TINY)
    with pytest.warns(UserWarning, match="read as <unk>: 两"):
        assert isinstance(trainer.translate(["两百"])[0], str)
    src_phrases, tgt_phrases = wt.phrase_vocabs()
    with pytest.raises(ValueError, match="do not match the model"):
        wt.translate(trainer.model, ["三"], src_phrases, tgt_phrases)


def test_greedy_decode_stops_finished_rows(small_cfg):
    model = wt.Transformer(small_cfg).eval()
    src = torch.randint(1, 23, (3, 5))
    steps = list(wt.greedy_steps(model, src, max_len=6, sos_id=1, eos_id=2))
    prefixes = [ys.shape for ys, _ in steps]
    assert prefixes[0] == (3, 2) and all(b[1] == a[1] + 1 for a, b in zip(prefixes, prefixes[1:]))
    assert steps[0][1].shape == (3, 19)
    out = wt.greedy_decode(model, src, max_len=6, sos_id=1, eos_id=2)
    assert torch.equal(out, steps[-1][0]) and (out[:, 0] == 1).all()
    for row in out.tolist():
        if 2 in row:
            assert all(t == 0 for t in row[row.index(2) + 1:])


def test_command_line_trains_shows_progress_and_ends_with_the_accuracy(tmp_path):
    run = subprocess.run([sys.executable, "-m", "walkthrough", "train", "--steps", "20", "--held-out", "20",
                          "--save", str(tmp_path / "ckpt.pt")], capture_output=True, text=True, check=True)
    assert re.fullmatch(r"held-out exact-match accuracy: [01]\.\d\d \(20 examples\)", run.stdout.splitlines()[-1])
    assert "training" in run.stderr and "20/20" in run.stderr  # the progress bar
    assert wt.load_checkpoint(tmp_path / "ckpt.pt").step == 20

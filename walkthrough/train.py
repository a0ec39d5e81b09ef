"""Teacher forcing, the warm-up schedule, a training loop any task can use, the numeral task, checkpoints.

``TrainingLoop`` knows nothing about translation: it takes a model, a ``batch(step)`` function and a
``loss(model, batch)`` function, and owns Adam, the schedule, the step count and the per-step history.
``Trainer`` is the numeral (and phrase) task of notebooks 06 and 07 built on it; another task (a
decoder-only language model, say) plugs in the same way without copying the loop.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import threading
import time
import zipfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from .config import ModelConfig, check_positive_int
from .data import Vocab, chinese_tokens, english_tokens, numeral_pairs, numeral_vocabs, pad_batch
from .loss import sequence_loss
from .model import Transformer, greedy_decode

CHECKPOINT_FORMAT = "walkthrough-checkpoint-1"


@dataclass
class Batch:
    src: torch.Tensor     # [B, L_src]
    tgt_in: torch.Tensor  # [B, L_tgt]: <sos> y1 .. yn
    labels: torch.Tensor  # [B, L_tgt]: y1 .. yn <eos>


def teacher_forcing(targets: list[list[int]], sos_id: int = Vocab.sos_id, eos_id: int = Vocab.eos_id,
                    pad_id: int = Vocab.pad_id) -> tuple[torch.Tensor, torch.Tensor]:
    """Target ids -> (decoder input <sos>+y, labels y+<eos>), both [B, L_tgt], shifted by one.

    Position t sees <sos> y1..yt (the causal mask hides the rest) and must predict y(t+1): every
    position trains at once, in one forward pass.
    """
    return pad_batch([[sos_id] + t for t in targets], pad_id), pad_batch([t + [eos_id] for t in targets], pad_id)


def make_batch(pairs: list[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab) -> Batch:
    """(Chinese, English) text pairs -> padded id tensors."""
    src = pad_batch([src_vocab.encode(chinese_tokens(zh)) for zh, _ in pairs])
    tgt_in, labels = teacher_forcing([tgt_vocab.encode(english_tokens(en)) for _, en in pairs])
    return Batch(src, tgt_in, labels)


def warmup_lr(step: int, warmup: int, total: int, peak: float) -> float:
    """Learning rate at ``step``: a linear rise to ``peak`` over ``warmup`` steps, then a linear fall to 0 at ``total``.

    The paper's schedule (rise, then decay as 1/sqrt(step)) never cools down; with a fixed budget of
    steps, decaying to zero lets the model settle, so the final accuracy does not wobble.
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(total - step, 0) / max(total - warmup, 1)


def smoothing_floor(smoothing: float, vocab_size: int) -> float:
    """The lowest loss label smoothing allows: the entropy of its target distribution.

    The smoothed target puts 1 - smoothing + smoothing/V on the right word and smoothing/V on each of
    the V - 1 others (``F.cross_entropy``'s rule). Cross-entropy against it is smallest, and equals
    its entropy, when the model predicts exactly that distribution; a perfect model cannot go lower.
    """
    _check_smoothing(smoothing)
    check_positive_int("vocab_size", vocab_size)
    right, other = 1 - smoothing + smoothing / vocab_size, smoothing / vocab_size
    return -right * math.log(right) - (vocab_size - 1) * (other * math.log(other) if other else 0.0)


def _check_smoothing(smoothing) -> None:
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)):
        raise TypeError(f"smoothing must be a number in [0, 1) (0.1 is usual), got {smoothing!r}")
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be in [0, 1) (0.1 is usual; 0 turns smoothing off), got {smoothing}")


def _check_learning_rate(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number such as 3e-3, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive learning rate such as 3e-3, got {value} "
                         f"(zero never moves the weights; a negative rate climbs the loss instead of descending it)")


def _check_warmup(warmup, steps: int) -> None:
    if isinstance(warmup, bool) or not isinstance(warmup, int):
        raise TypeError(f"warmup must be a whole number of steps, got {warmup!r} ({type(warmup).__name__})")
    if not 0 <= warmup <= steps:
        raise ValueError(f"warmup must be between 0 and steps={steps}, got {warmup}: the rate must have "
                         f"risen before the schedule ends; about 15% of the steps works, e.g. "
                         f"warmup={max(1, round(0.15 * steps))}")


@dataclass(frozen=True)
class TrainSettings:
    """The numeral task's defaults: a small model that learns in well under a minute on 2 CPU cores.

    Checked when made, so a bad value fails here, before any training.
    """

    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 256
    num_layers: int = 2
    batch_size: int = 64
    steps: int = 1000
    warmup: int = 150
    peak_lr: float = 3e-3
    smoothing: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "d_ff", "num_layers", "batch_size", "steps"):
            check_positive_int(name, getattr(self, name))
        _check_warmup(self.warmup, self.steps)
        _check_learning_rate("peak_lr", self.peak_lr)
        _check_smoothing(self.smoothing)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a whole number >= 0 (it fixes the data and the initial weights), "
                             f"got {self.seed!r}")


@dataclass
class RunReport:
    """What one ``run`` did: the steps it took, why it stopped, and (when scored) the score it reached."""

    start_step: int
    end_step: int
    total_steps: int
    seconds: float
    stopped_by: str  # "steps", "time budget" or "schedule end"
    losses: list[float] = field(repr=False)
    score: float | None = None
    score_name: str = "score"

    def __str__(self) -> str:
        why = {"steps": "the steps asked for are done", "time budget": "the time budget ran out",
               "schedule end": "the schedule is complete"}[self.stopped_by]
        text = (f"trained steps {self.start_step} → {self.end_step} of {self.total_steps} "
                f"in {self.seconds:.1f} s ({why})")
        if self.losses:
            text += f"; last loss {self.losses[-1]:.3f}"
        if self.score is not None:
            text += f"; {self.score_name} {self.score:.3f}"
        return text


@contextmanager
def _interrupts_held():
    """Hold a Ctrl-C (or the notebook's stop button) until the block ends: a step is recorded whole or not at all."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield  # only the main thread can hold signals; elsewhere no interrupt arrives as KeyboardInterrupt anyway
        return
    caught = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        if callable(previous):
            previous(*caught[0])
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt


@contextmanager
def torch_threads(count: int):
    """Run the block on ``count`` CPU threads, then restore the caller's setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TrainingLoop:
    """The loop, without the task: Adam with warm-up, the step count, a per-step history, budgets.

    ``batch(step)`` returns any object that ``loss(model, batch)`` turns into a scalar loss tensor;
    ``score()`` (optional) rates the model, e.g. a held-out accuracy, for the end of a run.
    The batch of a step must depend only on the step (and a seed), so a resumed run sees the same data.
    Each finished step appends its loss and learning rate, so ``step == len(losses) == len(lrs)``
    always, even after an interrupt.

    A run uses ``threads`` CPU threads (default 1). On a quiet machine two threads train this small
    model about 1.5x faster (20 steps: 0.40 s vs 0.63 s on 2 cores), but on a shared server they wait
    on each other: 4.9 s vs 1.3 s with three busy processes beside it, 33 s vs 3.4 s at load 10. A
    class shares one server, so one thread is the default. A fixed thread count also makes a run repeat
    bit for bit: the count decides how sums are split, hence their rounding.
    """

    def __init__(self, model: nn.Module, batch: Callable[[int], object],
                 loss: Callable[[nn.Module, object], torch.Tensor], *, steps: int, warmup: int, peak_lr: float,
                 score: Callable[[], float] | None = None, score_name: str = "score", threads: int = 1):
        check_positive_int("steps", steps)
        check_positive_int("threads", threads)
        _check_warmup(warmup, steps)
        _check_learning_rate("peak_lr", peak_lr)
        self.model, self.batch_fn, self.loss_fn = model, batch, loss
        self.score_fn, self.score_name = score, score_name
        self.total_steps = steps
        self.threads = threads
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: warmup_lr(s, warmup, steps, peak_lr))
        self.step = 0
        self.losses: list[float] = []
        self.lrs: list[float] = []
        self.resumable = True  # False after loading weights without the optimiser's state

    @property
    def remaining(self) -> int:
        """Steps left before the schedule's rate reaches zero."""
        return self.total_steps - self.step

    def run(self, steps: int | None = None, *, seconds: float | None = None, progress: bool = True,
            on_step: Callable[[TrainingLoop], None] | None = None, evaluate: bool | None = None) -> RunReport:
        """Train ``steps`` more steps (default: to the schedule's end), or until ``seconds`` have passed.

        The time budget is checked after each step, so the run stops cleanly between steps. ``on_step(self)``
        is called after each recorded step. ``evaluate`` scores the model at the end (default: only when a
        time budget is given, since then you do not know in advance how far it got).
        Every step is recorded as it finishes: interrupting (KeyboardInterrupt) loses nothing.
        """
        self._check_run(steps, seconds, on_step)
        goal = self.step + (self.remaining if steps is None else steps)
        start_step, start = self.step, time.perf_counter()
        stopped_by = "schedule end" if goal == self.total_steps else "steps"
        self.model.train()
        with torch_threads(self.threads), \
                tqdm(total=goal - self.step, desc="training", disable=not progress, leave=True) as bar:
            while self.step < goal:
                self._one_step()
                bar.update()
                if self.step % 10 == 0:
                    bar.set_postfix(loss=f"{self.losses[-1]:.3f}")
                if on_step is not None:
                    on_step(self)
                if seconds is not None and time.perf_counter() - start >= seconds and self.step < goal:
                    stopped_by = "time budget"
                    break
        report = RunReport(start_step, self.step, self.total_steps, time.perf_counter() - start, stopped_by,
                           self.losses[start_step:], score_name=self.score_name)
        if (seconds is not None if evaluate is None else evaluate) and self.score_fn is not None:
            with torch_threads(self.threads):
                report.score = self.score_fn()
        return report

    def _check_run(self, steps, seconds, on_step) -> None:
        if not self.resumable:
            raise ValueError("this model was loaded from a weights-only checkpoint: it translates and can be "
                             "scored, but cannot resume training (the optimiser's state was not saved); "
                             "make a new trainer to train")
        if self.remaining == 0:
            raise ValueError(f"all {self.total_steps} steps of the schedule are done (the learning rate is now 0): "
                             f"nothing left to train; make a new trainer to start afresh, or load an earlier "
                             f"checkpoint to continue from there")
        if steps is not None:
            check_positive_int("steps", steps)
            if steps > self.remaining:
                raise ValueError(f"steps={steps} goes past the schedule's end: step {self.step} of "
                                 f"{self.total_steps}, so at most {self.remaining} remain; pass steps <= "
                                 f"{self.remaining} (or none, to finish), or make a trainer with more steps")
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f"seconds must be a number (a time budget such as 30), got {seconds!r}")
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"seconds must be a positive time budget such as 30, got {seconds}")
        if on_step is not None and not callable(on_step):
            raise TypeError(f"on_step must be a function of the trainer, got {type(on_step).__name__}")

    def _one_step(self) -> None:
        batch = self.batch_fn(self.step)
        loss = self.loss_fn(self.model, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        loss_value, lr = loss.item(), self.optimizer.param_groups[0]["lr"]
        with _interrupts_held():  # the update and its record happen together, or not at all
            self.optimizer.step()
            self.scheduler.step()
            self.losses.append(loss_value)
            self.lrs.append(lr)
            self.step += 1

    def state_dict(self, optimizer: bool = True) -> dict:
        """The loop's state: weights, history, and (for resuming) the optimiser's and the schedule's state."""
        state = {"step": self.step, "losses": list(self.losses), "lrs": list(self.lrs),
                 "model": self.model.state_dict()}
        if optimizer:
            state |= {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict``'s output; without the optimiser's state the loop can no longer train."""
        if not len(state["losses"]) == len(state["lrs"]) == state["step"] <= self.total_steps:
            raise ValueError(f"inconsistent training state: step {state['step']} with {len(state['losses'])} "
                             f"losses and {len(state['lrs'])} learning rates; save it again")
        self.model.load_state_dict(state["model"])
        self.resumable = "optimizer" in state
        if self.resumable:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.losses, self.lrs = state["step"], list(state["losses"]), list(state["lrs"])


def task_config(settings: TrainSettings, src_vocab: Vocab, tgt_vocab: Vocab) -> ModelConfig:
    return ModelConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), d_model=settings.d_model,
                       num_heads=settings.num_heads, d_ff=settings.d_ff, num_layers=settings.num_layers,
                       max_len=32, dropout=0.0, pad_id=Vocab.pad_id)


class Trainer(TrainingLoop):
    """The translation task on ``TrainingLoop``: Chinese numerals -> English words. Deterministic for a seed.

    By default it trains the numeral task on fresh random numbers every step and scores on 500 held-out
    numbers; given ``pairs``, every batch is those pairs (a model that memorises a few phrases, as
    notebook 06 needs) and the score is exact match on them.
    """

    def __init__(self, settings: TrainSettings = TrainSettings(), pairs: list[tuple[str, str]] | None = None):
        if not isinstance(settings, TrainSettings):
            raise TypeError(f"settings must be a walkthrough.TrainSettings, got {type(settings).__name__}")
        self.settings = settings
        self.pairs = pairs
        if pairs is None:
            self.src_vocab, self.tgt_vocab = numeral_vocabs()
            score_name = "held-out exact match"
        else:
            if not pairs or not all(isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(s, str) for s in p)
                                    for p in pairs):
                raise ValueError("pairs must be a non-empty list of (Chinese, English) string pairs, "
                                 "e.g. [('早上好', 'good morning')]")
            self.src_vocab = Vocab(t for zh, _ in pairs for t in chinese_tokens(zh))
            self.tgt_vocab = Vocab(t for _, en in pairs for t in english_tokens(en))
            score_name = "exact match on its phrases"
        torch.manual_seed(settings.seed)
        model = Transformer(task_config(settings, self.src_vocab, self.tgt_vocab))
        super().__init__(model, self.batch, self.loss, steps=settings.steps, warmup=settings.warmup,
                         peak_lr=settings.peak_lr, score=self.score, score_name=score_name)

    def batch(self, step: int) -> Batch:
        """The training batch of a given step: fixed by (seed, step), so a resumed run sees the same data."""
        if self.pairs is not None:
            return make_batch(self.pairs, self.src_vocab, self.tgt_vocab)
        pairs = numeral_pairs(self.settings.batch_size, seed=self.settings.seed * 1_000_003 + step, held_out=False)
        return make_batch(pairs, self.src_vocab, self.tgt_vocab)

    def loss(self, model: Transformer, batch: Batch) -> torch.Tensor:
        """Label-smoothed cross-entropy of the teacher-forced prediction, PAD ignored."""
        logits = model(batch.src, batch.tgt_in)  # [B, L_tgt, V]
        return sequence_loss(logits, batch.labels, Vocab.pad_id, self.settings.smoothing)

    def score(self) -> float:
        return self.accuracy(held_out_pairs(500) if self.pairs is None else self.pairs)

    def translate(self, texts: list[str]) -> list[str]:
        """Greedy translations, on the trainer's threads (one: small steps, no waiting on a busy machine)."""
        with torch_threads(self.threads):
            return translate(self.model, texts, self.src_vocab, self.tgt_vocab)

    def accuracy(self, pairs: list[tuple[str, str]]) -> float:
        with torch_threads(self.threads):
            return exact_match(self.model, pairs, self.src_vocab, self.tgt_vocab)


def check_texts(texts) -> None:
    if isinstance(texts, str):
        raise TypeError(f"texts must be a list of strings, got the single string {texts!r}: "
                        f"wrap it in a list, [{texts!r}]")
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts must be a list of Chinese strings such as ['三百'], got {type(texts).__name__}")
    if not texts:
        raise ValueError("texts is empty: give at least one Chinese string, e.g. ['三百']")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] must be a string such as '三百', got {text!r} ({type(text).__name__})")
        if not text.strip():
            raise ValueError(f"texts[{i}] is blank ({text!r}): there is nothing to translate; "
                             f"give a Chinese string such as '三百'")


def translate(model: Transformer, texts: list[str], src_vocab: Vocab, tgt_vocab: Vocab,
              max_len: int = 20) -> list[str]:
    """Greedy translation of Chinese strings with a trained model: ``len(texts)`` strings in and out."""
    check_texts(texts)
    if (len(src_vocab), len(tgt_vocab)) != (model.cfg.src_vocab_size, model.cfg.tgt_vocab_size):
        raise ValueError(f"the vocabularies ({len(src_vocab)}, {len(tgt_vocab)} tokens) do not match the model "
                         f"({model.cfg.src_vocab_size}, {model.cfg.tgt_vocab_size}); use the ones it was trained with")
    src = pad_batch([src_vocab.encode(chinese_tokens(t)) for t in texts])  # [B, L_src]
    out = greedy_decode(model, src, max_len, Vocab.sos_id, Vocab.eos_id)  # [B, <= max_len]
    return [" ".join(tgt_vocab.decode(row)) for row in out]


def exact_match(model: Transformer, pairs: list[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab) -> float:
    """Share of pairs whose greedy translation equals the reference word for word."""
    if not pairs:
        raise ValueError("pairs is empty: give at least one (Chinese, English) pair to score")
    guesses = translate(model, [zh for zh, _ in pairs], src_vocab, tgt_vocab)
    return sum(g == en for g, (_, en) in zip(guesses, pairs)) / len(pairs)


@torch.no_grad()
def cross_attention_map(trainer: Trainer, zh: str, en: str, layer: int = -1):
    """Teacher-forced cross-attention of one pair, averaged over heads.

    Returns (weights [L_tgt, L_src], the word each row predicts, the source tokens).
    """
    batch = make_batch([(zh, en)], trainer.src_vocab, trainer.tgt_vocab)
    was_training = trainer.model.training
    trainer.model.eval()
    trainer.model(batch.src, batch.tgt_in)
    trainer.model.train(was_training)
    weights = trainer.model.decoder.layers[layer].cross_attn.attn_weights[0].mean(0)  # [L_tgt, L_src]
    predicted = [trainer.tgt_vocab.itos[i] for i in batch.labels[0]]
    return weights, predicted, chinese_tokens(zh)


def check_checkpoint_path(path, for_writing: bool, name: str = "path") -> Path:
    """A checkpoint path, checked before any work: a file name in a folder that exists (``name`` is for messages)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path (a str or pathlib.Path) such as 'numerals.pt', "
                        f"got {path!r} ({type(path).__name__})")
    if not str(path).strip():
        raise ValueError(f"{name} is empty: give a file name such as 'numerals.pt'")
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{name} {path} is a folder, not a file: add a file name, e.g. {path / 'numerals.pt'}")
    if for_writing:
        folder = path.parent
        if not folder.is_dir():
            raise ValueError(f"{name} {path}: the folder {folder} does not exist; create it first "
                             f"(mkdir -p {folder}) or save somewhere else")
        if not os.access(folder, os.W_OK):
            raise ValueError(f"{name} {path}: the folder {folder} is not writable; save somewhere else")
    elif not path.exists():
        raise ValueError(f"no checkpoint at {path}; train and save_checkpoint first")
    return path


def save_checkpoint(trainer: Trainer, path: str | Path, optimizer: bool = True) -> None:
    """Weights, history, step, sizes and vocabularies, and (``optimizer=True``) all a resume needs.

    Without the optimiser's state the file is a third of the size: enough to translate and score, not
    to resume training (the shipped, fully trained checkpoint is saved that way).
    """
    path = check_checkpoint_path(path, for_writing=True)
    torch.save({"format": CHECKPOINT_FORMAT, "settings": asdict(trainer.settings), "pairs": trainer.pairs,
                "src_itos": trainer.src_vocab.itos, "tgt_itos": trainer.tgt_vocab.itos,
                **trainer.state_dict(optimizer)}, path)


def read_checkpoint(path: str | Path, expected_format: str = CHECKPOINT_FORMAT) -> dict:
    """Read a checkpoint file as plain data (``torch.load(weights_only=True)``: no code from the file runs)."""
    path = check_checkpoint_path(path, for_writing=False)
    with open(path, "rb") as file:
        magic = file.read(4)
    if magic != b"PK\x03\x04":  # torch.save writes a zip archive
        raise ValueError(f"{path} is not a checkpoint (not a file torch.save wrote: it may be text or another "
                         f"format); pass the .pt file that save_checkpoint wrote")
    try:
        state = torch.load(path, weights_only=True)
    except (RuntimeError, KeyError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{path} is not a readable checkpoint (corrupted or not made by save_checkpoint): "
                         f"{type(err).__name__}; save it again") from None
    if not isinstance(state, dict) or state.get("format") != expected_format:
        raise ValueError(f"{path} is a torch file but not a walkthrough checkpoint; save one with save_checkpoint")
    return state


def load_checkpoint(path: str | Path, allow_untrained: bool = False) -> Trainer:
    """Rebuild a Trainer from ``save_checkpoint``'s file. Without optimiser state it translates but cannot train."""
    state = read_checkpoint(path)
    pairs = state["pairs"] and [tuple(pair) for pair in state["pairs"]]
    trainer = Trainer(TrainSettings(**state["settings"]), pairs)
    if state["src_itos"] != trainer.src_vocab.itos or state["tgt_itos"] != trainer.tgt_vocab.itos:
        raise ValueError(f"{path} was trained with other vocabularies than its task's; "
                         f"its translations would be meaningless: retrain it")
    if state["step"] == 0 and not allow_untrained:
        raise ValueError(f"{path} holds an untrained model (step 0): train it first, "
                         f"or pass allow_untrained=True to load it anyway")
    trainer.load_state_dict(state)
    return trainer


def held_out_pairs(count: int = 500) -> list[tuple[str, str]]:
    """Numbers training never samples (``is_held_out``), fixed by seed."""
    check_positive_int("count", count)
    return numeral_pairs(count, seed=12345, held_out=True)


def lr_curve(settings: TrainSettings) -> list[float]:
    """The schedule over the settings' steps, for plotting before training."""
    return [warmup_lr(s, settings.warmup, settings.steps, settings.peak_lr) for s in range(settings.steps)]

"""The loop any task can use: teacher forcing, the warm-up schedule, ``TrainingLoop`` and its ``RunReport``.

``TrainingLoop`` knows nothing about translation: it takes a model, a ``batch(step)`` function and a
``loss(model, batch)`` function, and owns Adam, the schedule, the step count and the per-step history.
The numeral task (numeral_task.py) and the language model (language_model.py) plug into it the same way.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from ..checks import check_positive_int, check_smoothing
from ..i18n import N_, _
from ..model.memory_guard import check_room
from .data import Vocab, chinese_tokens, english_tokens, pad_batch

WARMUP_SHARE = 0.15  # the warm-up's default share of the steps


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


def default_warmup(steps: int) -> int:
    """The warm-up used when none is given: 15% of the steps (150 of 1000), at least one step."""
    return max(1, round(WARMUP_SHARE * steps))


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
    check_smoothing(smoothing)
    check_positive_int("vocab_size", vocab_size)
    right, other = 1 - smoothing + smoothing / vocab_size, smoothing / vocab_size
    return -right * math.log(right) - (vocab_size - 1) * (other * math.log(other) if other else 0.0)


def validate_learning_rate(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(_("{name} must be a number such as 3e-3, got {value!r}").format(name=name, value=value))
    if not (math.isfinite(value) and value > 0):
        raise ValueError(_("{name} must be a positive learning rate such as 3e-3, got {value} "
                         "(zero never moves the weights; a negative rate climbs the loss instead of descending it)")
                             .format(name=name, value=value))


def validate_warmup(warmup, steps: int) -> None:
    if isinstance(warmup, bool) or not isinstance(warmup, int):
        raise TypeError(_("warmup must be a whole number of steps, got {warmup!r} ({type})").format(
            warmup=warmup, type=type(warmup).__name__))
    if not 0 <= warmup <= steps:
        raise ValueError(_("warmup must be between 0 and steps={steps}, got {warmup}: the rate must have "
                         "risen before the schedule ends; about 0.15 × steps works, e.g. "
                         "warmup={default_warmup_steps} (leave it out to get that)").format(
                             steps=steps, warmup=warmup, default_warmup_steps=default_warmup(steps)))


MAX_BATCH_SIZE = 4096  # each step trains on this many examples at once: beyond it a step takes minutes
MAX_SEED = 2**63 - 1  # torch.manual_seed takes up to 2**64 - 1; half leaves room for each rank's seed + rank


@dataclass(frozen=True)
class TrainSettings:
    """Every task's settings, with the numeral task's defaults: a small model that learns in well under a minute on
    2 CPU cores. GPTSettings and TranslatorSettings add fields and change defaults; the fields all share are checked
    here, each subclass's own in its ``__post_init__``.

    ``warmup`` left out (None) is 15% of ``steps``: 150 of the default 1000, 1 of ``steps=5``.
    Checked when made, so a bad value fails here, before any training.
    """

    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 256
    num_layers: int = 2
    batch_size: int = 64
    steps: int = 1000
    warmup: int | None = None
    peak_lr: float = 3e-3
    smoothing: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "d_ff", "num_layers", "batch_size", "steps"):
            check_positive_int(name, getattr(self, name))
        if self.batch_size > MAX_BATCH_SIZE:
            raise ValueError(_("batch_size must be at most {MAX_BATCH_SIZE:,}, got {batch_size:,}: each step "
                             "trains on that many examples at once (the default is 64)").format(
                                 MAX_BATCH_SIZE=MAX_BATCH_SIZE, batch_size=self.batch_size))
        if self.warmup is None:
            object.__setattr__(self, "warmup", default_warmup(self.steps))  # frozen: set once, here
        validate_warmup(self.warmup, self.steps)
        validate_learning_rate("peak_lr", self.peak_lr)
        check_smoothing(self.smoothing)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(_("seed must be a whole number >= 0 (it fixes the data and the initial weights), "
                             "got {seed!r}").format(seed=self.seed))
        if self.seed > MAX_SEED:
            raise ValueError(_("seed must be at most 2**63 - 1 = {MAX_SEED:,}, got {seed:,}: torch.manual_seed "
                             "takes 64 bits, and torchrun's processes seed with seed + rank; any small "
                             "number such as 0 or 42 will do").format(MAX_SEED=MAX_SEED, seed=self.seed))


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity, which a container or taskset may narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def validate_threads(threads) -> None:
    """A thread count this machine can run: more threads than cores only wait on each other, and a huge
    count makes the OpenMP runtime abort the whole process (in a notebook, the kernel dies)."""
    check_positive_int("threads", threads)
    cores = usable_cores()
    if threads > cores:
        raise ValueError(_("threads={threads} is more than the {cores} CPU cores this process may use: "
                         "pick 1..{cores} (1 is best on a shared server)").format(threads=threads, cores=cores))


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
    score_name: str = N_("score")  # shown through _: mark a new name N_ where it is given

    def __str__(self) -> str:
        why = {"steps": _("the steps asked for are done"), "time budget": _("the time budget ran out"),
               "schedule end": _("the schedule is complete")}[self.stopped_by]
        text = _("trained steps {start} → {end} of {total} in {seconds:.1f} s ({why})").format(
            start=self.start_step, end=self.end_step, total=self.total_steps, seconds=self.seconds, why=why)
        if self.losses:
            text += _("; last loss {loss:.3f}").format(loss=self.losses[-1])
        if self.score is not None:
            text += f"; {_(self.score_name)} {self.score:.3f}"
        return text


@contextmanager
def interrupts_held():
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
    """Run the block on ``count`` CPU threads (checked first), then restore the caller's setting."""
    validate_threads(count)
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
    always, even after an interrupt. A loss that is not finite stops the run before it updates anything.

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
        validate_threads(threads)
        validate_warmup(warmup, steps)
        validate_learning_rate("peak_lr", peak_lr)
        self.model, self.batch_fn, self.loss_fn = model, batch, loss
        self.score_fn, self.score_name = score, score_name
        self.total_steps, self.warmup, self.peak_lr = steps, warmup, peak_lr
        self.threads = threads
        weights = sum(p.numel() for p in model.parameters())
        check_room(3 * 4 * weights, _("training this model (its gradients and Adam's two moments: three more copies "
                                      "of its {weights:,} weights)").format(weights=weights),
                   _("lower its sizes (wt.training_memory shows what a step keeps, on the meta device)"))
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: warmup_lr(s, warmup, steps, peak_lr))
        self.step = 0
        self.losses: list[float] = []
        self.lrs: list[float] = []
        self.resumable = True  # False after loading weights without the optimiser's state

    checkpoint_format: str | None = None  # a task's trainer names its checkpoint's format (checkpoints.KINDS)

    def files_beside(self, path) -> dict:
        """Files a task writes beside its checkpoint at ``path`` ({path: text}): none unless the task has some."""
        return {}

    @property
    def schedule(self) -> dict:
        """What fixes the learning rate of every step: a state trained on another schedule does not fit."""
        return {"steps": self.total_steps, "warmup": self.warmup, "peak_lr": self.peak_lr}

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
                tqdm(total=goal - self.step, desc=_("training"), disable=not progress, leave=True) as bar:
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
            raise ValueError(_("this model was loaded from a weights-only checkpoint: it translates and can be "
                             "scored, but cannot resume training (the optimiser's state was not saved); "
                             "make a new trainer to train"))
        if self.remaining == 0:
            raise ValueError(_("all {total_steps} steps of the schedule are done (the learning rate is now 0): "
                             "nothing left to train; make a new trainer to start afresh, or load an earlier "
                             "checkpoint to continue from there").format(total_steps=self.total_steps))
        if steps is not None:
            check_positive_int("steps", steps)
            if steps > self.remaining:
                raise ValueError(_("steps={steps} goes past the schedule's end: step {step} of "
                                 "{total_steps}, so at most {remaining} remain; pass steps <= "
                                 "{remaining} (or none, to finish), or make a trainer with more steps").format(
                                     steps=steps, step=self.step, total_steps=self.total_steps,
                                     remaining=self.remaining))
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(_("seconds must be a number (a time budget such as 30), got {seconds!r}").format(
                    seconds=seconds))
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(_("seconds must be a positive time budget such as 30, got {seconds}").format(
                    seconds=seconds))
        if on_step is not None and not callable(on_step):
            raise TypeError(_("on_step must be a function of the trainer, got {type}").format(
                type=type(on_step).__name__))

    def _one_step(self) -> None:
        batch = self.batch_fn(self.step)
        loss = self.loss_fn(self.model, batch)
        loss_value, lr = loss.item(), self.optimizer.param_groups[0]["lr"]
        if not math.isfinite(loss_value):  # one update with it would turn every weight into NaN
            raise ValueError(_("the loss at step {step} is {loss_value} (not finite): training diverged, so "
                             "it stopped before this step's update. The learning rate ({lr:.3g} at this step, "
                             "peak_lr={peak_lr:g}) is too high: lower peak_lr (e.g. {self_peak_lr_10:g}) "
                             "and train a new trainer").format(
                                 step=self.step, loss_value=loss_value, lr=lr, peak_lr=self.peak_lr,
                                 self_peak_lr_10=self.peak_lr / 10))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with interrupts_held():  # the update and its record happen together, or not at all
            self.optimizer.step()
            self.scheduler.step()
            self.losses.append(loss_value)
            self.lrs.append(lr)
            self.step += 1

    def state_dict(self, optimizer: bool = True) -> dict:
        """The loop's state: weights, history, schedule and (for resuming) the optimiser's and the schedule's state."""
        state = {"step": self.step, "losses": list(self.losses), "lrs": list(self.lrs),
                 "schedule": self.schedule, "model": self.model.state_dict()}
        if optimizer:
            state |= {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict``'s output; without the optimiser's state the loop can no longer train.

        Refused, before anything changes, when the state was trained on another schedule (its learning
        rates would jump) or is further along than this loop's ``steps``.
        """
        if state["step"] > self.total_steps:
            raise ValueError(_("this state is at step {state_step}, past the end of this trainer's schedule "
                             "(steps={total_steps}): make the trainer with the settings the state was "
                             "trained with (steps >= {state_step})").format(
                                 state_step=state['step'], total_steps=self.total_steps))
        if not len(state["losses"]) == len(state["lrs"]) == state["step"]:
            raise ValueError(_("inconsistent training state: step {state_step} with {len_state_losses} "
                             "losses and {len_state_lrs} learning rates; save it again").format(
                                 state_step=state['step'], len_state_losses=len(state['losses']),
                                 len_state_lrs=len(state['lrs'])))
        differ = [f"{name}={theirs!r} (this trainer: {self.schedule[name]!r})"
                  for name, theirs in state["schedule"].items() if self.schedule.get(name) != theirs]
        if differ:
            raise ValueError(_("this state was trained on another schedule: {join_differ}; its learning rate "
                             "would jump. Make the trainer with the settings the state was trained with").format(
                                 join_differ=', '.join(differ)))
        self.model.load_state_dict(state["model"])
        self.resumable = "optimizer" in state
        if self.resumable:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.losses, self.lrs = state["step"], list(state["losses"]), list(state["lrs"])

"""Teacher forcing, the loss, the warm-up schedule, the training loop and checkpoints."""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .config import ModelConfig
from .data import Vocab, chinese_tokens, english_tokens, numeral_pairs, numeral_vocabs, pad_batch
from .loss import sequence_loss
from .model import Transformer, greedy_decode


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


@dataclass(frozen=True)
class TrainSettings:
    """The numeral task's defaults: a small model that learns in well under a minute on 2 CPU cores."""

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


def task_config(settings: TrainSettings, src_vocab: Vocab, tgt_vocab: Vocab) -> ModelConfig:
    return ModelConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), d_model=settings.d_model,
                       num_heads=settings.num_heads, d_ff=settings.d_ff, num_layers=settings.num_layers,
                       max_len=32, dropout=0.0, pad_id=Vocab.pad_id)


class Trainer:
    """Model, Adam with warm-up, and the step count. Deterministic for a seed.

    By default it trains the numeral task on fresh random numbers every step; given ``pairs``, every
    batch is those pairs (a model that memorises a few phrases, as notebook 06 needs).
    """

    def __init__(self, settings: TrainSettings = TrainSettings(), pairs: list[tuple[str, str]] | None = None):
        self.settings = settings
        self.pairs = pairs
        if pairs is None:
            self.src_vocab, self.tgt_vocab = numeral_vocabs()
        else:
            self.src_vocab = Vocab(t for zh, _ in pairs for t in chinese_tokens(zh))
            self.tgt_vocab = Vocab(t for _, en in pairs for t in english_tokens(en))
        torch.manual_seed(settings.seed)
        self.model = Transformer(task_config(settings, self.src_vocab, self.tgt_vocab))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: warmup_lr(s, settings.warmup, settings.steps, settings.peak_lr))
        self.step = 0
        self.losses: list[float] = []
        self.lrs: list[float] = []

    def batch(self, step: int) -> Batch:
        """The training batch of a given step: fixed by (seed, step), so a resumed run sees the same data."""
        if self.pairs is not None:
            return make_batch(self.pairs, self.src_vocab, self.tgt_vocab)
        pairs = numeral_pairs(self.settings.batch_size, seed=self.settings.seed * 1_000_003 + step, held_out=False)
        return make_batch(pairs, self.src_vocab, self.tgt_vocab)

    def run(self, steps: int | None = None, progress: bool = True) -> list[float]:
        """Train ``steps`` more steps (default: the settings' count); returns their losses."""
        steps = self.settings.steps if steps is None else steps
        self.model.train()
        new_losses = []
        bar = tqdm(range(steps), desc="training", disable=not progress, leave=True)
        for _ in bar:
            batch = self.batch(self.step)
            logits = self.model(batch.src, batch.tgt_in)  # [B, L_tgt, V]
            loss = sequence_loss(logits, batch.labels, Vocab.pad_id, self.settings.smoothing)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.lrs.append(self.optimizer.param_groups[0]["lr"])
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
            new_losses.append(loss.item())
            if self.step % 10 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
        self.losses += new_losses
        return new_losses

    def translate(self, texts: list[str]) -> list[str]:
        return translate(self.model, texts, self.src_vocab, self.tgt_vocab)

    def accuracy(self, pairs: list[tuple[str, str]]) -> float:
        return exact_match(self.model, pairs, self.src_vocab, self.tgt_vocab)


def translate(model: Transformer, texts: list[str], src_vocab: Vocab, tgt_vocab: Vocab,
              max_len: int = 20) -> list[str]:
    """Greedy translation of Chinese strings with a trained model."""
    if (len(src_vocab), len(tgt_vocab)) != (model.cfg.src_vocab_size, model.cfg.tgt_vocab_size):
        raise ValueError(f"the vocabularies ({len(src_vocab)}, {len(tgt_vocab)} tokens) do not match the model "
                         f"({model.cfg.src_vocab_size}, {model.cfg.tgt_vocab_size}); use the ones it was trained with")
    src = pad_batch([src_vocab.encode(chinese_tokens(t)) for t in texts])
    out = greedy_decode(model, src, max_len, Vocab.sos_id, Vocab.eos_id)
    return [" ".join(tgt_vocab.decode(row)) for row in out]


def exact_match(model: Transformer, pairs: list[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab) -> float:
    """Share of pairs whose greedy translation equals the reference word for word."""
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


def save_checkpoint(trainer: Trainer, path: str | Path) -> None:
    """Weights, optimiser and schedule state, step, sizes and vocabularies: all a resume needs."""
    torch.save({
        "format": "walkthrough-checkpoint-1",
        "settings": asdict(trainer.settings),
        "pairs": trainer.pairs,
        "src_itos": trainer.src_vocab.itos, "tgt_itos": trainer.tgt_vocab.itos,
        "step": trainer.step, "losses": trainer.losses, "lrs": trainer.lrs,
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.scheduler.state_dict(),
    }, path)


def load_checkpoint(path: str | Path, allow_untrained: bool = False) -> Trainer:
    """Rebuild a Trainer from ``save_checkpoint``'s file (``torch.load(weights_only=True)``: no code runs)."""
    try:
        state = torch.load(path, weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"no checkpoint at {path}; train and save_checkpoint first") from None
    except (RuntimeError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{path} is not a readable checkpoint (corrupted or not made by save_checkpoint): "
                         f"{type(err).__name__}; save it again") from None
    if not isinstance(state, dict) or state.get("format") != "walkthrough-checkpoint-1":
        raise ValueError(f"{path} is a torch file but not a walkthrough checkpoint; save one with save_checkpoint")
    pairs = state["pairs"] and [tuple(pair) for pair in state["pairs"]]
    trainer = Trainer(TrainSettings(**state["settings"]), pairs)
    if state["src_itos"] != trainer.src_vocab.itos or state["tgt_itos"] != trainer.tgt_vocab.itos:
        raise ValueError(f"{path} was trained with other vocabularies than its task's; "
                         f"its translations would be meaningless: retrain it")
    if state["step"] == 0 and not allow_untrained:
        raise ValueError(f"{path} holds an untrained model (step 0): train it first, "
                         f"or pass allow_untrained=True to load it anyway")
    trainer.model.load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.step, trainer.losses, trainer.lrs = state["step"], state["losses"], state["lrs"]
    return trainer


def held_out_pairs(count: int = 500) -> list[tuple[str, str]]:
    """Numbers training never samples (``is_held_out``), fixed by seed."""
    return numeral_pairs(count, seed=12345, held_out=True)


def lr_curve(settings: TrainSettings) -> list[float]:
    """The schedule over the settings' steps, for plotting before training."""
    return [warmup_lr(s, settings.warmup, settings.steps, settings.peak_lr) for s in range(settings.steps)]


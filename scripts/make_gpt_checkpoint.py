"""Make the shipped checkpoint of notebook 09: the numeral task as a language model, trained from seed 0 on one thread.

    .venv/bin/python scripts/make_gpt_checkpoint.py          # train, write checkpoints/gpt_numerals.{pt,json}
    .venv/bin/python scripts/make_gpt_checkpoint.py --check  # re-train the first CHECK_STEP steps and compare

The run is bounded by steps, never by time, so it ends the same on any machine. Torch's CPU training is
deterministic for a fixed number of threads (the thread count changes how sums are split, hence the
rounding), so it runs on one thread. ``gpt_numerals.pt`` holds the weights and the per-step history (no
optimiser state); ``gpt_numerals.json`` holds what a re-run is checked against: a hash of the weights at
step ``CHECK_STEP`` and at the end, and the held-out accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

import walkthrough as wt
from walkthrough.language_model import GPTSettings, GPTTrainer, load_gpt_checkpoint, save_gpt_checkpoint

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "checkpoints" / "gpt_numerals.pt"
MANIFEST = CHECKPOINT.with_suffix(".json")
THREADS = 1
CHECK_STEP = 40  # the test re-trains this many steps (a few seconds), not the whole run
HELD_OUT = 500


def weights_hash(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def train(steps: int | None = None) -> tuple[GPTTrainer, dict[int, str]]:
    """Train the shipped model from its seed on THREADS threads; stop after ``steps`` (default: all of them).

    Returns the trainer and the weights' hash at CHECK_STEP and at the end ({step: sha256}).
    """
    trainer = GPTTrainer(GPTSettings(), threads=THREADS)
    hashes = {}
    goal = trainer.total_steps if steps is None else steps
    for stop in sorted({min(CHECK_STEP, goal), goal}):
        trainer.run(stop - trainer.step, progress=False)
        hashes[stop] = weights_hash(trainer.model)
    return trainer, hashes


def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def make() -> None:
    start = time.perf_counter()
    trainer, hashes = train()
    seconds = time.perf_counter() - start
    accuracy = trainer.accuracy(wt.held_out_pairs(HELD_OUT))
    CHECKPOINT.parent.mkdir(exist_ok=True)
    save_gpt_checkpoint(trainer, CHECKPOINT, optimizer=False)
    MANIFEST.write_text(json.dumps({
        "settings": asdict(trainer.settings), "threads": THREADS, "torch": torch.__version__,
        "check_step": CHECK_STEP, "sha256": {str(step): digest for step, digest in hashes.items()},
        "held_out": HELD_OUT, "held_out_accuracy": accuracy}, indent=1) + "\n")
    print(f"trained {trainer.step} steps in {seconds:.1f} s on {THREADS} thread(s); "
          f"held-out exact match {accuracy:.3f} on {HELD_OUT}")
    print(f"wrote {CHECKPOINT.relative_to(ROOT)} ({CHECKPOINT.stat().st_size / 1e6:.2f} MB) and "
          f"{MANIFEST.relative_to(ROOT)}")


def check() -> bool:
    """Re-train the first CHECK_STEP steps and compare losses and weights with the shipped files."""
    shipped = load_gpt_checkpoint(CHECKPOINT)
    expected = manifest()
    trainer, hashes = train(expected["check_step"])
    same_losses = trainer.losses == shipped.losses[:trainer.step]
    same_weights = hashes[trainer.step] == expected["sha256"][str(trainer.step)]
    same_end = weights_hash(shipped.model) == expected["sha256"][str(shipped.step)]
    print(f"first {trainer.step} steps: losses bit for bit: {same_losses}; weights bit for bit: {same_weights}; "
          f"shipped weights are the run's last: {same_end}")
    return same_losses and same_weights and same_end


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="re-train the first steps and compare, write nothing")
    if parser.parse_args().check:
        sys.exit(0 if check() else 1)
    make()

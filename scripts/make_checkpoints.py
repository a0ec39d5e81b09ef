"""Make the shipped checkpoint of notebook 07: the numeral model trained from seed 0, on one CPU thread.

    .venv/bin/python scripts/make_checkpoints.py            # train 1000 steps, write checkpoints/numerals.{pt,json}
    .venv/bin/python scripts/make_checkpoints.py --check    # re-train the first 100 steps and compare

Torch's CPU training is deterministic for a fixed number of threads (the thread count changes how
sums are split, hence the rounding), so everything here runs on one thread. ``numerals.pt`` holds the
weights and the per-step history (no optimiser state: ~1 MB); ``numerals.json`` holds what the test
checks a re-run against: a fingerprint of the weights at step ``CHECK_STEP`` and at the end, and the
held-out accuracy.
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

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "checkpoints" / "numerals.pt"
MANIFEST = CHECKPOINT.with_suffix(".json")
THREADS = 1
CHECK_STEP = 100  # the test re-trains this many steps (a few seconds), not the whole run
HELD_OUT = 500


def fingerprint(model: torch.nn.Module) -> dict:
    """Each weight tensor's sum and sum of squares (to compare within a tolerance), and a hash of all bytes."""
    digest = hashlib.sha256()
    sums = {}
    for name, tensor in model.state_dict().items():
        values = tensor.detach().double()
        sums[name] = [values.sum().item(), values.square().sum().item()]
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return {"sha256": digest.hexdigest(), "sums": sums}


def train(steps: int | None = None) -> tuple[wt.Trainer, dict]:
    """Train the shipped model from its seed, on THREADS threads; stop after ``steps`` (default: all).

    Returns the trainer and the fingerprints taken on the way ({step: fingerprint}).
    """
    trainer = wt.Trainer(wt.TrainSettings())
    trainer.threads = THREADS  # the default already; set here so the shipped run never depends on it changing
    fingerprints = {}
    goal = trainer.total_steps if steps is None else steps
    for stop in sorted({min(CHECK_STEP, goal), goal}):
        trainer.run(stop - trainer.step, progress=False)
        fingerprints[stop] = fingerprint(trainer.model)
    return trainer, fingerprints


def make() -> None:
    start = time.perf_counter()
    trainer, fingerprints = train()
    seconds = time.perf_counter() - start
    accuracy = trainer.accuracy(wt.held_out_pairs(HELD_OUT))
    CHECKPOINT.parent.mkdir(exist_ok=True)
    wt.save_checkpoint(trainer, CHECKPOINT, optimizer=False)
    manifest = {"settings": asdict(trainer.settings), "threads": THREADS, "torch": torch.__version__,
                "check_step": CHECK_STEP, "fingerprints": {str(k): v for k, v in fingerprints.items()},
                "held_out": HELD_OUT, "held_out_accuracy": accuracy}
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"trained {trainer.step} steps in {seconds:.1f} s on {THREADS} thread(s); "
          f"held-out exact match {accuracy:.3f} on {HELD_OUT}")
    print(f"wrote {CHECKPOINT.relative_to(ROOT)} ({CHECKPOINT.stat().st_size / 1e6:.2f} MB) and "
          f"{MANIFEST.relative_to(ROOT)}")


def check() -> bool:
    """Re-train the first CHECK_STEP steps and compare losses and weights with the shipped files."""
    shipped = wt.load_checkpoint(CHECKPOINT)
    manifest = json.loads(MANIFEST.read_text())
    trainer, fingerprints = train(manifest["check_step"])
    same_losses = trainer.losses == shipped.losses[:trainer.step]
    same_weights = fingerprints[trainer.step]["sha256"] == manifest["fingerprints"][str(trainer.step)]["sha256"]
    print(f"first {trainer.step} steps: losses bit for bit: {same_losses}; weights bit for bit: {same_weights}")
    return same_losses and same_weights


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="re-train the first steps and compare, write nothing")
    if parser.parse_args().check:
        sys.exit(0 if check() else 1)
    make()

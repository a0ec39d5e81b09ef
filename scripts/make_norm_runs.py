"""Make notebook 11's shipped result: the numeral language model (notebook 09's task) trained four ways,
post-norm and pre-norm, each without and with the learning-rate warm-up, from the same seed.

    .venv/bin/python scripts/make_norm_runs.py   # a few minutes on one quiet core; writes results/norm_runs.json

The model is notebook 09's with the paper's 6 layers and a peak learning rate of 0.01: at notebook 09's
2 layers and 0.003 both kinds train without a warm-up, and the difference this notebook is about does
not show.

Each run is bounded by steps (never by time) on one CPU thread, so it ends the same anywhere. The file
holds, per run, the loss at every step (4 decimals), the held-out exact match at the end, and the seconds
it took here (for the notebook's time budget; not compared by any test).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import walkthrough as wt

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "norm_runs.json"
RUNS = {"post-norm, no warm-up": (False, 0), "pre-norm, no warm-up": (True, 0),
        "post-norm, warm-up": (False, None), "pre-norm, warm-up": (True, None)}  # None: the default warm-up


BASE = dataclasses.replace(wt.GPTSettings(), num_layers=6, peak_lr=0.01, steps=300, warmup=45)  # warm-up: 15%


def settings(norm_first: bool, warmup: int | None) -> wt.GPTSettings:
    return dataclasses.replace(BASE, norm_first=norm_first, warmup=BASE.warmup if warmup is None else warmup)


def main() -> None:
    runs = []
    for name, (norm_first, warmup) in RUNS.items():
        trainer = wt.GPTTrainer(settings(norm_first, warmup))
        start = time.perf_counter()
        trainer.run(progress=False)
        seconds = time.perf_counter() - start
        accuracy = trainer.score()
        runs.append({"name": name, "norm_first": norm_first, "warmup": trainer.settings.warmup,
                     "losses": [round(loss, 4) for loss in trainer.losses], "accuracy": accuracy,
                     "seconds": round(seconds, 1)})
        print(f"{name:<24} {len(trainer.losses)} steps in {seconds:5.1f} s, final loss {trainer.losses[-1]:.3f}, "
              f"held-out exact match {accuracy:.3f}")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"settings": dataclasses.asdict(BASE), "runs": runs}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

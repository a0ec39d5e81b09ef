"""Training speed on the notebook-07 task (Chinese numerals -> English words), on this machine's CPU.

    .venv/bin/python benchmarks/bench_training.py              # time to 95% / 99% held-out exact match
    .venv/bin/python benchmarks/bench_training.py --budget 30  # what a 30 s time budget reaches
    .venv/bin/python benchmarks/bench_training.py --threads    # 20 steps on 1 thread vs 2 (a loaded server)

Scoring time is not counted as training time. The machine's load average is printed first: on a
shared server the numbers move with it.
"""

import argparse
import os
import time

import walkthrough as wt

BUDGET_S = 60.0


def time_to_accuracy() -> None:
    """Train with the notebook's settings, scoring the held-out set every 100 steps."""
    trainer = wt.Trainer()
    held_out = wt.held_out_pairs(500)
    reached: dict[float, float] = {}
    trained_s = 0.0
    while trainer.remaining:
        start = time.perf_counter()
        trainer.run(100, progress=False)
        trained_s += time.perf_counter() - start
        accuracy = trainer.accuracy(held_out)
        print(f"step {trainer.step:5d}  {trained_s:5.1f} s  loss {trainer.losses[-1]:.3f}  held-out {accuracy:.3f}")
        for target in (0.95, 0.99):
            if accuracy >= target and target not in reached:
                reached[target] = trained_s
    for target in (0.95, 0.99):
        when = f"{reached[target]:.1f} s ({reached[target] / BUDGET_S:.2f} of the {BUDGET_S:.0f} s budget)" \
            if target in reached else "not reached"
        print(f"time to {target:.0%} held-out exact match: {when}")
    print(f"final held-out exact-match accuracy: {trainer.accuracy(held_out):.3f} after {trained_s:.1f} s of training")


def budget(seconds: float) -> None:
    """The notebook's live cell: a fresh trainer, ``run(seconds=...)``, the report it prints."""
    print(wt.Trainer().run(seconds=seconds, progress=False))


def threads() -> None:
    """The same 20 steps on one thread and on two: on a loaded machine two threads wait on each other."""
    for count in (1, 2):
        trainer = wt.Trainer()
        trainer.threads = count
        start = time.perf_counter()
        trainer.run(20, progress=False)
        print(f"{count} thread(s): 20 steps in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=None, help="seconds: train a fresh model on this budget")
    parser.add_argument("--threads", action="store_true", help="compare 1 and 2 CPU threads")
    args = parser.parse_args()
    print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.budget is not None:
        budget(args.budget)
    elif args.threads:
        threads()
    else:
        time_to_accuracy()

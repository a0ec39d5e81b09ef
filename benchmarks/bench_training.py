"""Time to accuracy on the notebook-07 task (Chinese numerals -> English words), on this machine's CPU.

Trains with the notebook's settings, scoring the held-out set every 100 steps (scoring time is not
counted), and prints when 95% and 99% exact match were first reached against the 60 s budget.

    .venv/bin/python benchmarks/bench_training.py
"""

import time

import walkthrough as wt

BUDGET_S = 60.0


def main() -> None:
    trainer = wt.Trainer()
    held_out = wt.held_out_pairs(500)
    reached: dict[float, float] = {}
    trained_s = 0.0
    while trainer.step < trainer.settings.steps:
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


if __name__ == "__main__":
    main()

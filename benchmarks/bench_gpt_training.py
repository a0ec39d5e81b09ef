"""Time to accuracy of notebook 09's GPT (the numeral task as a language model, GQA and RoPE on), on this CPU.

Trains with the shipped settings, scoring the 500 held-out numbers every ``--every`` steps (scoring time
is not counted), and prints when 95% exact match was first reached and the accuracy when the 60 s
training budget ran out (or at the schedule's end, if that came first). The machine's load is printed
before and after: on a shared machine the times stretch, the step counts do not.

    .venv/bin/python benchmarks/bench_gpt_training.py              # threads = the cores this process may use
    .venv/bin/python benchmarks/bench_gpt_training.py --threads 1
"""

import argparse
import os
import time

import walkthrough as wt

BUDGET_S = 60.0


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--every", type=int, default=50, help="score the held-out set every this many steps")
    args = parser.parse_args()
    print(f"{args.threads} torch thread(s); {load()}")
    trainer = wt.GPTTrainer(wt.GPTSettings(), threads=args.threads)
    held_out = wt.held_out_pairs(500)
    trained_s, reached_95, at_budget = 0.0, None, None
    while trainer.remaining and trained_s < BUDGET_S:
        start = time.perf_counter()
        trainer.run(min(args.every, trainer.remaining), seconds=BUDGET_S - trained_s, progress=False, evaluate=False)
        trained_s += time.perf_counter() - start
        accuracy = trainer.accuracy(held_out)
        print(f"step {trainer.step:4d}  {trained_s:5.1f} s  loss {trainer.losses[-1]:.3f}  held-out {accuracy:.3f}",
              flush=True)
        if accuracy >= 0.95 and reached_95 is None:
            reached_95 = (trainer.step, trained_s)
        at_budget = accuracy
    print("time to 95% held-out exact match: "
          + (f"{reached_95[1]:.1f} s (step {reached_95[0]}; {reached_95[1] / BUDGET_S:.2f} of the {BUDGET_S:.0f} s "
             f"budget)" if reached_95 else "not reached"))
    why = "the budget ran out" if trained_s >= BUDGET_S else f"the schedule ended at step {trainer.step}"
    print(f"held-out exact match within {BUDGET_S:.0f} s: {at_budget:.3f} ({why} after {trained_s:.1f} s of training)")
    print(load())


if __name__ == "__main__":
    main()

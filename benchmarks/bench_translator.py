"""One training step on the real task (notebook 17's CC-CEDICT translator): ours vs nn.Transformer.

Both run the same training code, ``TranslatorTrainer``'s step (its batch of 128 real dictionary pairs, the
label-smoothed loss, backward, Adam and the schedule), at the shipped sizes (V = 4000 shared, D = 256, H = 4,
d_ff = 512, 2 + 2 layers), on the trainer's one thread; only the stacks differ (the reference is
bench_model.py's ``TorchStackModel``: our embeddings and head around ``nn.Transformer``). Rounds are
interleaved, each model stepping through the same batches, so machine noise hits both alike.
Goal: ours within 1.10x the reference.

    .venv/bin/python benchmarks/bench_translator.py [--rounds 30]
"""

import argparse
import os
import time

import torch
from bench_model import TorchStackModel
from timing import report_ratio

import walkthrough as wt
from walkthrough import translator

GOAL = 1.10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    shipped = wt.load_translator()
    settings = wt.TranslatorSettings(steps=args.rounds + 1)
    ours = translator.TranslatorTrainer(settings, shipped.tokenizer)
    torch.manual_seed(settings.seed)
    reference_model = TorchStackModel(translator.Transformer(settings.model_config(shipped.tokenizer.get_vocab_size())))
    # The same batches and loss, on the same loop: only the model differs.
    reference = wt.training.TrainingLoop(reference_model, ours.batch, ours.loss, steps=settings.steps,
                                         warmup=settings.warmup, peak_lr=settings.peak_lr, threads=ours.threads)
    loops = {"ours": ours, "nn.Transformer": reference}
    times = {name: [] for name in loops}
    for round_ in range(args.rounds + 1):
        for name, loop in loops.items():
            loop.model.train()
            with wt.training.torch_threads(loop.threads):
                start = time.perf_counter()
                loop._one_step()
                seconds = time.perf_counter() - start
            if round_:  # round 0 warms up both
                times[name].append(seconds)
    print(f"torch {torch.__version__}, {ours.threads} thread(s), batch {settings.batch_size}, "
          f"{args.rounds} interleaved rounds")
    report_ratio(times, GOAL)


if __name__ == "__main__":
    main()

"""Notebook 17's sentence translator: one training step, ours vs nn.Transformer; then decoding the test split.

Training: both run the same training code, ``TranslatorTrainer``'s step (its batch of 128 Tatoeba sentence pairs,
sorted by length, the label-smoothed loss, backward, Adam and the schedule), at the shipped sizes (V = 8000 shared,
D = 256, H = 4, d_ff = 1024, 2 + 2 layers), on the trainer's one thread; only the stacks differ (the reference is
bench_model.py's ``TorchStackModel``: our embeddings and head around ``nn.Transformer``). Rounds are
interleaved, each model stepping through the same batches, so machine noise hits both alike.
Goal: ours within 1.10x the reference.

Decoding: all 2,000 test sentences, greedy, 32 at a time, with the KV cache (``translate``) against the same
decoding recomputing the whole prefix at every step (``use_cache=False``), in the same run. Goal: the cached run
under a minute (issue 37), and faster than recomputing.

    .venv/bin/python benchmarks/bench_translator.py [--rounds 30]
"""

import argparse
import os
import time

import torch
from bench_model import TorchStackModel
from timing import report_ratio

import walkthrough as wt
from walkthrough.tasks import training, translator

GOAL = 1.10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    shipped = wt.load_checkpoint(wt.shipped_file("checkpoints", "tatoeba.pt"))
    settings = wt.TranslatorSettings(steps=args.rounds + 1)
    ours = translator.TranslatorTrainer(settings, shipped.tokenizer)
    torch.manual_seed(settings.seed)
    reference_model = TorchStackModel(translator.Transformer(settings.model_config(shipped.tokenizer.get_vocab_size())))
    # The same batches and loss, on the same loop: only the model differs.
    reference = training.TrainingLoop(reference_model, ours.batch, ours.loss, steps=settings.steps,
                                         warmup=settings.warmup, peak_lr=settings.peak_lr, threads=ours.threads)
    loops = {"ours": ours, "nn.Transformer": reference}
    times = {name: [] for name in loops}
    for round_ in range(args.rounds + 1):
        for name, loop in loops.items():
            loop.model.train()
            with training.torch_threads(loop.threads):
                start = time.perf_counter()
                loop._one_step()
                seconds = time.perf_counter() - start
            if round_:  # round 0 warms up both
                times[name].append(seconds)
    print(f"torch {torch.__version__}, {ours.threads} thread(s), batch {settings.batch_size}, "
          f"{args.rounds} interleaved rounds")
    report_ratio(times, GOAL)
    decode_test_split(shipped)


def decode_test_split(shipped: translator.Translator) -> None:
    sources = [zh for zh, _ in wt.sentence_pairs("test")]
    seconds = {}
    for use_cache in (True, False):
        start = time.perf_counter()
        with torch.no_grad(), training.torch_threads(1):
            for first in range(0, len(sources), 32):
                src = shipped.source_batch(sources[first:first + 32])  # [B, L_src]
                wt.greedy_decode(shipped.model, src, translator.MAX_NEW_TOKENS, 1, 2, use_cache=use_cache)
        seconds["cached" if use_cache else "recomputed"] = time.perf_counter() - start
    print(f"greedy decoding of {len(sources):,} test sentences on one thread: {seconds['cached']:.1f} s with the "
          f"KV cache (goal: under 60 s), {seconds['recomputed']:.1f} s recomputing the prefix "
          f"({seconds['recomputed'] / seconds['cached']:.2f}x)")


if __name__ == "__main__":
    main()

"""BPE by hand (walkthrough/text/bpe.py) against Hugging Face ``tokenizers`` with the same rules, on one core.

1. Notebook 16's slice of CC-CEDICT (<= 50,000 characters) to 2000 tokens: the fast path by hand
   (``train_fast``, target <= 10 s) and the library, the ratio between them, and a check that both made the same
   merges; the plain loop (``train``, as taught) to 400 tokens against the fast path to 400.
2. The library on the whole training split to 30000 tokens (notebook 16's real vocabulary; target <= 30 s).

    .venv/bin/python benchmarks/bench_bpe.py [--rounds 3] [--vocab-size 2000]
"""

import argparse
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the library's threads: one core, as the by-hand trainer

from timing import best_of, seconds

import walkthrough as wt
from walkthrough.text import bpe

BY_HAND_TARGET, FULL_TARGET = 10.0, 30.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab-size", type=int, default=2000)
    args = parser.parse_args()

    pairs = wt.cedict_pairs("train")
    texts = bpe.corpus_slice(pairs)
    print(f"slice: {len(texts) // 2:,} pairs, {sum(map(len, texts)):,} characters, vocab_size {args.vocab_size}")
    by_hand = best_of(args.rounds, lambda: wt.BPETokenizer().train_fast(texts, args.vocab_size))
    library = best_of(args.rounds, lambda: bpe.library_bpe(texts, args.vocab_size))
    same = (wt.BPETokenizer().train_fast(texts, args.vocab_size).merges
            == bpe.from_library(bpe.library_bpe(texts, args.vocab_size)).merges)
    verdict = "met" if by_hand <= BY_HAND_TARGET else "MISSED"
    print(f"by hand  {by_hand:6.2f} s  (target <= {BY_HAND_TARGET:.0f} s: {verdict})")
    print(f"library  {library:6.2f} s  by hand / library = {by_hand / library:.1f}x; same merges: {same}")
    plain = best_of(1, lambda: wt.BPETokenizer().train(texts, 400))
    fast = best_of(args.rounds, lambda: wt.BPETokenizer().train_fast(texts, 400))
    print(f"to 400 tokens: the plain loop {plain:.2f} s, the fast path {fast:.2f} s ({plain / fast:.0f}x)")

    everything = [text for pair in pairs for text in pair]
    full = seconds(lambda: bpe.library_bpe(everything, 30_000))
    print(f"library, whole training split ({sum(map(len, everything)):,} characters) to 30000 tokens: {full:.1f} s "
          f"(target <= {FULL_TARGET:.0f} s: {'met' if full <= FULL_TARGET else 'MISSED'})")


if __name__ == "__main__":
    main()

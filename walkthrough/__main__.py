"""Command line: ``python -m walkthrough trace ...`` prints the shape table; ``... train`` trains the numeral task."""

from __future__ import annotations

import argparse
import sys

from .config import ModelConfig
from .trace import format_table, summarise, trace_shapes


def _trace(args) -> None:
    cfg = ModelConfig(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, d_model=args.d_model,
                      num_heads=args.heads, d_ff=args.d_ff, num_layers=args.layers, max_len=args.max_len)
    rows = trace_shapes(cfg, args.batch, args.src_len, args.tgt_len)
    print(format_table(rows if args.all_layers else summarise(rows)))


def _train(args) -> None:
    from .train import Trainer, TrainSettings, held_out_pairs, save_checkpoint

    steps = {} if args.steps is None else {"steps": args.steps}
    trainer = Trainer(TrainSettings(**steps, seed=args.seed))
    trainer.run()
    if args.save:
        save_checkpoint(trainer, args.save)
    pairs = held_out_pairs(args.held_out)
    print(f"held-out exact-match accuracy: {trainer.accuracy(pairs):.2f} ({len(pairs)} examples)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m walkthrough", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    trace = commands.add_parser("trace", help="print every step's shape, from the real model on the meta device")
    for flag, default in (("--batch", 32), ("--src-len", 10), ("--tgt-len", 4), ("--d-model", 512), ("--heads", 8),
                          ("--d-ff", 2048), ("--vocab", 30000), ("--layers", 6), ("--max-len", 5000)):
        trace.add_argument(flag, type=int, default=default)
    trace.add_argument("--all-layers", action="store_true", help="list every layer instead of summarising repeats")
    train = commands.add_parser("train", help="train the Chinese numeral -> English words model (notebook 07)")
    train.add_argument("--steps", type=int, default=None, help="training steps (default: the notebook's)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--held-out", type=int, default=500, help="held-out examples to score")
    train.add_argument("--save", default=None, help="write a checkpoint to this path")
    args = parser.parse_args(argv)
    try:
        if args.command == "trace":
            _trace(args)
        else:
            _train(args)
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

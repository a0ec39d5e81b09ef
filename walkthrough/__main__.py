"""Command line: ``python -m walkthrough trace ...`` prints the shape table; ``... train`` trains the numeral task."""

from __future__ import annotations

import argparse
import math
import sys

from .config import ModelConfig
from .trace import SOURCE_SIZES, format_table, summarise, trace_shapes
from .train import MAX_HELD_OUT

MAX_TRACE_LAYERS = 96  # a trace builds every layer (on the meta device, but each is Python objects): 96 take seconds


def _trace(args) -> None:
    cfg = ModelConfig(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, d_model=args.d_model,
                      num_heads=args.heads, d_ff=args.d_ff, num_layers=args.layers, max_len=args.max_len)
    rows = trace_shapes(cfg, args.batch, args.src_len, args.tgt_len)
    print(format_table(rows if args.all_layers else summarise(rows)))


def _train(args) -> None:
    from .checkpoints import check_checkpoint_path
    from .train import Trainer, TrainSettings, held_out_pairs, save_checkpoint

    if args.save is not None:  # checked first: a bad path must not cost a whole training run
        check_checkpoint_path(args.save, for_writing=True, name="--save")
    task, settings, save = Trainer, TrainSettings, save_checkpoint
    if args.model == "gpt":  # notebook 09: the same numerals as a decoder-only language model
        from .language_model import GPTSettings, GPTTrainer, save_gpt_checkpoint
        task, settings, save = GPTTrainer, GPTSettings, save_gpt_checkpoint
    steps = settings().steps if args.steps is None else args.steps
    trainer = task(settings(steps=steps, warmup=args.warmup, seed=args.seed))  # no --warmup: the settings' 15%
    pairs = held_out_pairs(args.held_out)
    print(trainer.run(seconds=args.seconds, evaluate=False), file=sys.stderr)
    if args.save is not None:
        save(trainer, args.save)
    print(f"held-out exact-match accuracy: {trainer.accuracy(pairs):.2f} ({len(pairs)} examples)")


def _positive_int(text: str, most: int | None = None, why: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"must be at most {most:,}, got {value:,}: {why}")
    return value


def _at_most(most: int, why: str):
    """An argparse type: a whole number from 1 to ``most`` (``why`` says where the bound comes from)."""
    return lambda text: _positive_int(text, most, why)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds such as 30, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds such as 30, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m walkthrough", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    trace = commands.add_parser("trace", help="print every step's shape, from the real model on the meta device")
    paper = ModelConfig.paper_base()  # the defaults are the source articles' sizes, from the config itself
    for flag, default in (("--batch", SOURCE_SIZES["batch"]), ("--src-len", SOURCE_SIZES["src_len"]),
                          ("--tgt-len", SOURCE_SIZES["tgt_len"]), ("--d-model", paper.d_model),
                          ("--heads", paper.num_heads), ("--d-ff", paper.d_ff), ("--vocab", paper.tgt_vocab_size),
                          ("--max-len", paper.max_len)):
        trace.add_argument(flag, type=int, default=default, help=f"default {default}")
    trace.add_argument("--layers", type=_at_most(MAX_TRACE_LAYERS, "the deepest well-known models (GPT-3) have 96, "
                                                 "and the trace builds every layer"),
                       default=paper.num_layers, help=f"default {paper.num_layers}, at most {MAX_TRACE_LAYERS}")
    trace.add_argument("--all-layers", action="store_true", help="list every layer instead of summarising repeats")
    train = commands.add_parser("train", help="train the Chinese numeral -> English words model (notebook 07)")
    train.add_argument("--steps", type=_positive_int, default=None, help="training steps (default: the notebook's)")
    train.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: 15%% of the steps)")
    train.add_argument("--seconds", type=_positive_seconds, default=None,
                       help="time budget: stop cleanly after this many seconds, even if steps remain")
    train.add_argument("--model", choices=("transformer", "gpt"), default="transformer",
                       help="transformer: the encoder-decoder (notebook 07); gpt: the decoder-only model (notebook 09)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--held-out", type=_at_most(MAX_HELD_OUT, "500 already scores to within a few percent"),
                       default=500, help=f"held-out examples to score (at most {MAX_HELD_OUT:,})")
    train.add_argument("--save", default=None, help="write a checkpoint to this path (checked before training)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # a bad flag: argparse prints "error: ..." and exits 2
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

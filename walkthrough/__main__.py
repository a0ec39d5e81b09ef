"""Command line: ``python -m walkthrough trace ...`` prints the shape table; ``... train`` trains the numeral task
(``--task cedict``: the dictionary translator of notebook 17); ``... translate 早上好 晚安`` translates with the
shipped translator, one line per phrase."""

from __future__ import annotations

import argparse
import math
import sys

import torch

from .config import ModelConfig
from .i18n import _
from .trace import SOURCE_SIZES, format_table, summarise, trace_shapes
from .train import MAX_BATCH_SIZE, MAX_HELD_OUT, TrainSettings

MAX_TRACE_LAYERS = 96  # a trace builds every layer (on the meta device, but each is Python objects): 96 take seconds


def _trace(args) -> None:
    cfg = ModelConfig(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, d_model=args.d_model,
                      num_heads=args.heads, d_ff=args.d_ff, num_layers=args.layers, max_len=args.max_len)
    rows = trace_shapes(cfg, args.batch, args.src_len, args.tgt_len)
    print(format_table(rows if args.all_layers else summarise(rows)))


def _check_train(args, world_size: int) -> None:
    """Everything a run (one process or torchrun's ranks, each checking alike) can refuse before any work."""
    from .checkpoints import check_checkpoint_path
    from .distributed import check_global_batch, launched_by_torchrun
    from .train import check_dropout

    if args.save is not None:  # checked first: a bad path must not cost a whole training run
        check_checkpoint_path(args.save, for_writing=True, name="--save")
    check_dropout(args.dropout)
    if args.dropout and args.model == "gpt":
        raise ValueError("--dropout is for the encoder-decoder (--model transformer); the language model of "
                         "notebook 09 trains without it: leave --dropout out")
    if launched_by_torchrun():
        check_global_batch(args.batch_size, world_size)
        if args.seconds is not None:
            raise ValueError("--seconds is a budget each process measures by itself, so the ranks would stop at "
                             "different steps and wait for each other forever: under torchrun give --steps")
    elif args.report is not None:
        raise ValueError("--report records every rank of a torchrun; started plainly there is one process: "
                         "start it with torchrun --nproc-per-node=2 -m walkthrough train ... (notebook 14)")


def _train(args) -> None:
    from .data import Vocab
    from .distributed import launched_by_torchrun, process_group, rank_and_world, train_data_parallel
    from .train import Trainer, TrainSettings, held_out_pairs, save_checkpoint

    rank, world_size = rank_and_world()
    _check_train(args, world_size)
    task, settings, save = Trainer, TrainSettings, save_checkpoint
    if args.model == "gpt":  # notebook 09: the same numerals as a decoder-only language model
        from .language_model import GPTSettings, GPTTrainer, save_gpt_checkpoint
        task, settings, save = GPTTrainer, GPTSettings, save_gpt_checkpoint
    steps = settings().steps if args.steps is None else args.steps
    chosen = settings(steps=steps, warmup=args.warmup, seed=args.seed, batch_size=args.batch_size)  # no --warmup: 15%
    trainer = task(chosen, dropout=args.dropout) if task is Trainer else task(chosen)
    pairs = held_out_pairs(args.held_out)
    if not launched_by_torchrun():
        print(trainer.run(seconds=args.seconds, evaluate=False), file=sys.stderr)
    else:
        with process_group():
            if args.dropout and rank > 0:  # each rank its own dropout masks; rank 0 draws what one process would
                torch.manual_seed(args.seed + rank)
            report = train_data_parallel(trainer, pad_id=Vocab.pad_id, report=args.report)
        if rank != 0:  # rank 0 alone prints, saves and scores: every rank holds the same weights
            return
        print(_("{report} on {world_size} processes (DDP, gloo), {sentences} sentences each").format(
            report=report, world_size=world_size, sentences=args.batch_size // world_size), file=sys.stderr)
    if args.save is not None:
        save(trainer, args.save)
    print(_("held-out exact-match accuracy: {accuracy:.2f} ({count} examples)").format(
        accuracy=trainer.accuracy(pairs), count=len(pairs)))


def _train_cedict(args) -> None:
    from .checkpoints import check_checkpoint_path
    from .corpus import cedict_pairs
    from .translator import TranslatorSettings, TranslatorTrainer, save_translator, train_tokenizer

    if args.save is not None:
        check_checkpoint_path(args.save, for_writing=True, name="--save")
    defaults = TranslatorSettings()
    settings = TranslatorSettings(steps=defaults.steps if args.steps is None else args.steps, warmup=args.warmup,
                                  seed=args.seed, batch_size=args.batch_size)
    tokenizer = train_tokenizer([text for pair in cedict_pairs("train") for text in pair], settings.vocab_size)
    trainer = TranslatorTrainer(settings, tokenizer)
    print(trainer.run(seconds=args.seconds, evaluate=False), file=sys.stderr)
    if args.save is not None:
        save_translator(trainer, args.save)
    validation = cedict_pairs("validation")
    print(_("validation loss: {loss:.3f} ({count} pairs)").format(loss=trainer.translator.loss(validation),
                                                                   count=len(validation)))


def _translate(args) -> None:
    from .translator import load_translator

    translator = load_translator(args.checkpoint)
    for line in translator.translate(args.phrases, beam_size=args.beam):
        print(line)


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
    default_batch = TrainSettings().batch_size
    train.add_argument("--batch-size", type=_at_most(MAX_BATCH_SIZE, "each step trains on that many sentences at once"),
                       default=default_batch, help=f"sentences per step, the global batch: under torchrun each of "
                       f"the processes takes an equal share (default {default_batch})")
    train.add_argument("--dropout", type=float, default=0.0, help="dropout probability (default 0: off)")
    train.add_argument("--task", choices=("numerals", "cedict"), default="numerals",
                       help="numerals: notebook 07's task; cedict: the dictionary translator of notebook 17")
    train.add_argument("--report", default=None, help="under torchrun: rank 0 writes every rank's first-step "
                       "shapes and gradients to this file (notebook 14)")
    translate = commands.add_parser("translate", help="translate Chinese phrases with the shipped translator "
                                    "(notebook 17), one line each")
    translate.add_argument("phrases", nargs="+", help="Chinese phrases, e.g. 早上好 晚安")
    translate.add_argument("--beam", type=_at_most(64, "a wider beam only costs time on phrases this short"),
                           default=None, help="beam size (default: greedy)")
    translate.add_argument("--checkpoint", default=None, help="a translator saved by save_translator "
                           "(default: checkpoints/cedict.pt)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # a bad flag: argparse prints "error: ..." and exits 2
    try:
        if args.command == "trace":
            _trace(args)
        elif args.command == "translate":
            _translate(args)
        elif args.task == "cedict":
            _train_cedict(args)
        else:
            _train(args)
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: ``python -m walkthrough trace ...`` prints the shape table; ``... train`` trains the numeral task
(``--task sentences``: notebook 17's translator of Tatoeba sentences); ``... translate 我是学生。 我饿了。``
translates with the shipped translator, one line per sentence."""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from .i18n import N_, _
from .model.config import ModelConfig
from .tasks.checkpoints import SERIES, load_checkpoint, save_checkpoint, shipped_file
from .tasks.numerals import MAX_HELD_OUT
from .tasks.training import MAX_BATCH_SIZE, TrainSettings
from .tasks.translator import MAX_BEAM
from .trace.meta import SOURCE_SIZES
from .trace.tables import format_table, summarise
from .trace.tracer import trace_shapes

MAX_TRACE_LAYERS = 96  # a trace builds every layer (on the meta device, but each is Python objects): 96 take seconds


def _trace(args) -> int:
    cfg = ModelConfig(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, d_model=args.d_model,
                      num_heads=args.heads, d_ff=args.d_ff, num_layers=args.layers, max_len=args.max_len)
    rows = trace_shapes(cfg, args.batch, args.src_len, args.tgt_len)
    print(format_table(rows if args.all_layers else summarise(rows)))
    return 0


SETTING_FLAGS = ("steps", "warmup", "seed", "batch_size", "dropout")  # what --resume takes from its checkpoint instead


def _check_train(args) -> None:
    """Everything a run (one process or torchrun's ranks, each checking alike) can refuse before any work:
    every path it reads or writes first, so a bad one never costs a whole training run."""
    from .checks import check_dropout
    from .tasks.checkpoints import validate_checkpoint_path
    from .tasks.distributed import launched_by_torchrun

    if args.resume is not None:
        validate_checkpoint_path(args.resume, for_writing=False, name="--resume")
        given = ["--" + name.replace("_", "-") for name in SETTING_FLAGS if getattr(args, name) is not None]
        if given:
            raise ValueError(_("--resume continues the run saved in {path} with the settings stored there (its "
                             "steps, warm-up, seed and batch size): leave out {flags}").format(
                                 path=args.resume, flags=", ".join(given)))
    if args.save is not None:
        validate_checkpoint_path(args.save, for_writing=True, name="--save")
    if args.dropout is not None:
        check_dropout(args.dropout)
        if args.dropout and args.model == "gpt":
            raise ValueError(_("--dropout is for the encoder-decoder (--model transformer); the language model of "
                             "notebook 09 trains without it: leave --dropout out"))
    if launched_by_torchrun():
        if args.seconds is not None:
            raise ValueError(_("--seconds is a budget each process measures by itself, so the ranks would stop at "
                             "different steps and wait for each other forever: under torchrun give --steps"))
        if args.report is not None:
            validate_checkpoint_path(args.report, for_writing=True, name="--report")
            if args.save is not None and Path(args.report).resolve() == Path(args.save).resolve():
                raise ValueError(_("--report and --save name the same file ({path}): the report would overwrite "
                                 "the checkpoint; give them different names").format(path=args.report))
    elif args.report is not None:
        raise ValueError(_("--report records every rank of a torchrun; started plainly there is one process: "
                         "start it with torchrun --nproc-per-node=2 -m walkthrough train ... (notebook 14)"))


def _trainer(args):
    """The run's trainer: resumed from ``--resume``'s checkpoint, or new from the flags (a flag left out keeps the
    settings' default; no --warmup is 15% of the steps)."""
    from .tasks.language_model import GPTSettings, GPTTrainer
    from .tasks.numerals import Trainer

    if args.resume is not None:
        trainer = load_checkpoint(args.resume)
        holds = {Trainer: "transformer", GPTTrainer: "gpt"}.get(type(trainer))
        if holds != args.model:
            raise ValueError(_("--resume {path} holds {what}, not a --model {model} trainer: {fix}").format(
                path=args.resume, what=type(trainer).__name__, model=args.model,
                fix=_("pass --model {holds}").format(holds=holds) if holds else
                _("only the numeral tasks' trainers resume here")))
        return trainer
    if args.model == "gpt":  # notebook 09: the same numerals as a decoder-only language model
        return GPTTrainer(GPTSettings(**_given_settings(args)))
    return Trainer(TrainSettings(**_given_settings(args)), dropout=args.dropout or 0.0)


def _given_settings(args) -> dict:
    """The settings the flags give (dropout belongs to the run, not to the settings)."""
    return {name: getattr(args, name) for name in SETTING_FLAGS
            if name != "dropout" and getattr(args, name) is not None}


def _stopped_by_ctrl_c(args, trainer, next_step: str) -> int:
    """Ctrl-C during training: every finished step is recorded whole (``TrainingLoop``), so what was trained is
    saved where --save says, and ``next_step`` says what to do with it. 130 is the exit code of a program stopped
    by Ctrl-C."""
    where = _("interrupted at step {step} of {total}").format(step=trainer.step, total=trainer.total_steps)
    if trainer.step == 0:
        print(_("{where}: no step finished, nothing to save").format(where=where), file=sys.stderr)
    elif args.save is None:
        print(_("{where}: not saved (pass --save FILE to keep what an interrupted run trained)").format(where=where),
              file=sys.stderr)
    else:
        save_checkpoint(trainer, args.save)
        print(_("{where}: saved to {path}; {next_step}").format(where=where, path=args.save, next_step=next_step),
              file=sys.stderr)
    return 130


def _train(args) -> int:
    from .tasks.data import Vocab
    from .tasks.distributed import (
        check_global_batch,
        launched_by_torchrun,
        process_group,
        rank_and_world,
        train_data_parallel,
    )
    from .tasks.numerals import held_out_pairs

    rank, world_size = rank_and_world()
    _check_train(args)
    trainer = _trainer(args)
    pairs = held_out_pairs(args.held_out)
    if not launched_by_torchrun():
        try:
            print(trainer.run(seconds=args.seconds, evaluate=False), file=sys.stderr)
        except KeyboardInterrupt:
            model = " --model gpt" if args.model == "gpt" else ""
            return _stopped_by_ctrl_c(args, trainer, _("go on with: python -m walkthrough train{model} "
                                                              "--resume {path}").format(model=model, path=args.save))
    else:
        check_global_batch(trainer.settings.batch_size, world_size)
        with process_group():
            if args.dropout and rank > 0:  # each rank its own dropout masks; rank 0 draws what one process would
                torch.manual_seed(trainer.settings.seed + rank)
            report = train_data_parallel(trainer, pad_id=Vocab.pad_id, report=args.report)
        if rank != 0:  # rank 0 alone prints, saves and scores: every rank holds the same weights
            return 0
        print(_("{report} on {world_size} processes (DDP, gloo), {sentences} sentences each").format(
            report=report, world_size=world_size, sentences=trainer.settings.batch_size // world_size),
            file=sys.stderr)
    if args.save is not None:
        save_checkpoint(trainer, args.save)
    print(_("held-out exact-match accuracy: {accuracy:.2f} ({count} examples)").format(
        accuracy=trainer.accuracy(pairs), count=len(pairs)))
    return 0


def _check_sentences(args) -> None:
    """What the translator's run cannot take, refused before its tokenizer and its half hour of training."""
    from .tasks.checkpoints import validate_checkpoint_path

    for flag, given in (("--resume", args.resume is not None), ("--report", args.report is not None),
                        ("--model gpt", args.model == "gpt")):
        if given:
            raise ValueError(_("{flag} is for --task numerals: the translator (--task sentences) trains from its "
                             "first step, in one process, as the encoder-decoder; leave {flag} out").format(flag=flag))
    if args.save is not None:
        validate_checkpoint_path(args.save, for_writing=True, name="--save")


def _train_sentences(args) -> int:
    from .tasks.translator import TranslatorSettings, TranslatorTrainer, train_tokenizer
    from .text.sentences import sentence_pairs

    _check_sentences(args)
    given = {name: getattr(args, name) for name in SETTING_FLAGS if getattr(args, name) is not None}
    settings = TranslatorSettings(**given)
    tokenizer = train_tokenizer([text for pair in sentence_pairs("train") for text in pair], settings.vocab_size)
    trainer = TranslatorTrainer(settings, tokenizer)
    try:
        print(trainer.run(seconds=args.seconds, evaluate=False), file=sys.stderr)
    except KeyboardInterrupt:
        return _stopped_by_ctrl_c(args, trainer, _("load it with walkthrough.load_checkpoint"))
    if args.save is not None:
        save_checkpoint(trainer, args.save)
    validation = sentence_pairs("validation")
    print(_("validation loss: {loss:.3f} ({count} pairs)").format(loss=trainer.translator.loss(validation),
                                                                   count=len(validation)))
    return 0


def _translate(args) -> int:
    from .tasks.translator import Translator, unsure_note

    path = shipped_file("checkpoints", "tatoeba.pt") if args.checkpoint is None else args.checkpoint
    if args.checkpoint is None and path != SERIES / "checkpoints" / "tatoeba.pt":  # not the series' own file
        print(_("no --checkpoint given: translating with {path}, found from the working folder").format(path=path),
              file=sys.stderr)
    translator = load_checkpoint(path)
    if not isinstance(translator, Translator):
        raise ValueError(_("{path} holds a {what}, not a translator: pass --checkpoint with a file that "
                           "train --task sentences --save wrote").format(path=path, what=type(translator).__name__))
    sentences = args.sentences or [line.strip() for line in sys.stdin if line.strip()]
    translations = translator.translate(sentences, beam_size=args.beam)
    for line, probs in zip(translations, translator.token_probs(list(zip(sentences, translations)))):
        note = unsure_note(probs)
        print(line if note is None else f"{line}  ⚠ {note}")
    return 0


def _train_either(args) -> int:
    """``train --task numerals`` (notebook 07, the default) or ``--task sentences`` (notebook 17's translator)."""
    return _train_sentences(args) if args.task == "sentences" else _train(args)


def _positive_int(text: str, most: int | None = None, why: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("must be a whole number, got {text!r}").format(text=text)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(_("must be at least 1, got {value}").format(value=value))
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(_("must be at most {most:,}, got {value:,}: {why}").format(
            most=most, value=value, why=_(why)))
    return value


def _at_most(most: int, why: str):
    """An argparse type: a whole number from 1 to ``most`` (``why`` says where the bound comes from)."""
    return lambda text: _positive_int(text, most, why)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("must be a number of seconds such as 30, got {text!r}").format(
            text=text)) from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(_("must be a positive number of seconds such as 30, got {text}").format(
            text=text))
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
    trace.add_argument("--layers", type=_at_most(MAX_TRACE_LAYERS, N_("the deepest well-known models (GPT-3) have "
                                                    "96, and the trace builds every layer")),
                       default=paper.num_layers, help=f"default {paper.num_layers}, at most {MAX_TRACE_LAYERS}")
    trace.add_argument("--all-layers", action="store_true", help="list every layer instead of summarising repeats")
    train = commands.add_parser("train", help="train the Chinese numeral -> English words model (notebook 07)")
    train.add_argument("--steps", type=_positive_int, default=None, help="training steps (default: the notebook's)")
    train.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: 15%% of the steps)")
    train.add_argument("--seconds", type=_positive_seconds, default=None,
                       help="time budget: stop cleanly after this many seconds, even if steps remain")
    train.add_argument("--model", choices=("transformer", "gpt"), default="transformer",
                       help="transformer: the encoder-decoder (notebook 07); gpt: the decoder-only model (notebook 09)")
    train.add_argument("--seed", type=int, default=None, help="fixes the data and the initial weights (default 0)")
    train.add_argument("--held-out", type=_at_most(MAX_HELD_OUT, N_("500 already scores to within a few percent")),
                       default=500, help=f"held-out examples to score (at most {MAX_HELD_OUT:,})")
    train.add_argument("--save", default=None, help="write a checkpoint to this path (checked before training); "
                       "Ctrl-C saves what was trained so far there")
    train.add_argument("--resume", default=None, help="go on training from this checkpoint (--save's file), with "
                       "its settings, exactly as load_checkpoint(path).run() does; --model must be the one it holds")
    default_batch = TrainSettings().batch_size
    train.add_argument("--batch-size", type=_at_most(MAX_BATCH_SIZE, N_("each step trains on that many sentences at "
                                                                        "once")),
                       default=None, help=f"sentences per step, the global batch: under torchrun each of "
                       f"the processes takes an equal share (default {default_batch})")
    train.add_argument("--dropout", type=float, default=None, help="dropout probability (default 0: off)")
    train.add_argument("--task", choices=("numerals", "sentences"), default="numerals",
                       help="numerals: notebook 07's task; sentences: notebook 17's translator of Chinese sentences "
                       "(Tatoeba), about an hour on one CPU core with its default settings")
    train.add_argument("--report", default=None, help="under torchrun: rank 0 writes every rank's first-step "
                       "shapes and gradients to this file (notebook 14)")
    translate = commands.add_parser(
        "translate", help="translate Chinese sentences with the shipped translator (notebook 17), one line each",
        description="Translate Chinese sentences into English with notebook 17's shipped model: a small "
                    "Transformer (2+2 layers) trained for under an hour on two CPU cores on 53,000 everyday "
                    "sentence pairs from Tatoeba (CC BY 2.0 FR) and 12,000 made ones that teach numbers and "
                    "names. It knows short everyday sentences, not dictionary words or long text; any input gets "
                    "an answer, and one it was unsure of is marked.")
    translate.add_argument("sentences", nargs="*", help="Chinese sentences, e.g. 我是学生。 我饿了。 (none: one per "
                           "line from standard input)")
    translate.add_argument("--beam", type=_at_most(MAX_BEAM, "a wider beam only costs time on sentences this short"),
                           default=None, help="beam size (default: greedy)")
    translate.add_argument("--checkpoint", default=None, help="a translator saved by save_checkpoint "
                           "(default: checkpoints/tatoeba.pt)")
    return parser


@contextmanager
def argparse_in_our_language():
    """argparse words its own messages ("usage:", "the following arguments are required") through gettext's
    default catalog, which has no Chinese for them: while the command line runs they come from the package's."""
    gettext_of_argparse = argparse._
    argparse._ = _
    try:
        yield
    finally:
        argparse._ = gettext_of_argparse


# argparse's messages a student can meet (Python's own wording, marked so Babel puts them in the package's catalog)
ARGPARSE_MESSAGES = (
    N_("usage: "), N_("positional arguments"), N_("options"), N_("show this help message and exit"),
    N_("%(prog)s: error: %(message)s\n"), N_("argument %(argument_name)s: %(message)s"),
    N_("the following arguments are required: %s"), N_("unrecognized arguments: %s"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"), N_("invalid %(type)s value: %(value)r"),
    N_("expected one argument"), N_("ambiguous option: %(option)s could match %(matches)s"),
    N_("ignored explicit argument %r"), N_("not allowed with argument %s"),
)


def main(argv: list[str] | None = None) -> int:
    with argparse_in_our_language():
        args = _parser().parse_args(argv)  # a bad flag: argparse prints "error: ..." and exits 2
        try:
            return {"trace": _trace, "train": _train_either, "translate": _translate}[args.command](args)
        except (ValueError, TypeError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except OSError as err:  # the disk, not the input: a full disk while saving (nothing half-written)
            print(f"error: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # outside training (which saves what it trained): nothing to keep
            print(_("interrupted"), file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())

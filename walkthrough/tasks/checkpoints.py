"""The checkpoint file of every task: one save, one load, its path check, the digest of its weights.

A checkpoint is a dict written by ``torch.save``: a ``format`` naming its task, the settings, the training
history, the weights (``model``), what its task needs to rebuild it, the optimiser's state when saved for
resuming, and ``sha256``, a digest of all of it as stored. ``save_checkpoint`` writes any task's trainer;
``load_checkpoint`` reads the format and lets that task rebuild itself (``from_checkpoint``).
Reading checks all of it before anything is built: a damaged, altered or mixed-up file gets a message
that says so, never a model that silently scores 0. Writing is whole or nothing (``save_whole``): a full
disk or a second process saving to the same path never leaves a damaged file.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import pickle
import re
import secrets
import zipfile
from pathlib import Path
from typing import NoReturn

import torch

from ..checks import check_bool
from ..i18n import _

CHECKPOINT_FORMAT = "walkthrough-checkpoint-2"
GPT_CHECKPOINT_FORMAT = "walkthrough-gpt-checkpoint-2"
TRANSLATOR_CHECKPOINT_FORMAT = "walkthrough-translator-checkpoint-1"
# Each task's format: what its file holds and the keys its task adds.
KINDS = {
    CHECKPOINT_FORMAT: ("an encoder-decoder Trainer (notebook 07)", ("pairs", "src_itos", "tgt_itos")),
    GPT_CHECKPOINT_FORMAT: ("a GPTTrainer (notebook 09)", ("itos",)),
    TRANSLATOR_CHECKPOINT_FORMAT: ("the sentence translator (notebook 17)", ("tokenizer",)),
}
# Each format's class with ``from_checkpoint``: every task module adds its own (``import walkthrough`` imports them
# all, and so does importing this module, whose package imports them first).
REBUILT_BY: dict[str, type] = {}
SERIES = Path(__file__).resolve().parents[2]  # the series' folder this package was loaded from (walkthrough/tasks/)
MAX_NAME_BYTES = 230  # most file systems' longest file name, 255 bytes, less what save_whole's temporary name adds
COMMON_KEYS = ("settings", "step", "losses", "lrs", "schedule", "model", "sha256")
# Weights renamed since a checkpoint of the same format was written: old name (a pattern) -> today's. The one
# place an old name is still understood; a file is read with today's names, the digest checked on the names it
# holds. The output head was called the generator (the Annotated Transformer's name); each Add & Norm was numbered
# (add_norm1..3) before it was named by the sublayer it norms (an encoder's second norms the feed-forward).
RENAMED_WEIGHTS = {
    r"^generator\.": "output_head.",
    r"^(encoder\.layers\.\d+)\.add_norm1\.": r"\1.self_attn_norm.",
    r"^(encoder\.layers\.\d+)\.add_norm2\.": r"\1.ffn_norm.",
    r"^(decoder\.layers\.\d+)\.add_norm1\.": r"\1.self_attn_norm.",
    r"^(decoder\.layers\.\d+)\.add_norm2\.": r"\1.cross_attn_norm.",
    r"^(decoder\.layers\.\d+)\.add_norm3\.": r"\1.ffn_norm.",
}


def current_names(weights: dict) -> dict:
    """A state dict with every renamed weight (``RENAMED_WEIGHTS``) under today's name, in the same order."""
    def today(name: str) -> str:
        for old, new in RENAMED_WEIGHTS.items():
            name = re.sub(old, new, name)
        return name

    return {today(name): tensor for name, tensor in weights.items()}


def shipped_file(*parts: str) -> Path:
    """A file shipped with the series, such as ``shipped_file("checkpoints", "numerals.pt")``: the one home of
    every shipped file's path (the notebooks, the model check and the tests all ask here).

    Found from the working folder upwards, so the same line works in ``notebooks/`` and in the Chinese
    edition's ``notebooks/zh/`` (the series' root is the first folder that holds ``parts``), then in the
    series' folder this package was loaded from (a script run from elsewhere).
    """
    start = Path.cwd().resolve()
    for folder in (start, *start.parents, SERIES):
        if (folder / Path(*parts)).exists():
            return folder / Path(*parts)
    raise FileNotFoundError(_("{path} is not in {start} or any folder above it: open the notebook from "
                            "the series' folder (the one with notebooks/ and checkpoints/), or pass the path yourself")
                                .format(path=Path(*parts), start=start))


def side_file(checkpoint: Path, ending: str) -> Path:
    """A file a task keeps beside its checkpoint, named from the checkpoint's whole name: ``tatoeba.pt`` ->
    ``tatoeba_{ending}``, ``a.pth`` -> ``a.pth_{ending}`` (so ``a.pt``'s files and ``a.pth``'s never collide)."""
    return checkpoint.with_name(f"{checkpoint.stem if checkpoint.suffix == '.pt' else checkpoint.name}_{ending}")


def validate_checkpoint_path(path, for_writing: bool, name: str = "path") -> Path:
    """A checkpoint path, checked before any work: a file name in a folder that exists (``name`` is for messages).

    Returned with ``~`` expanded (the shell expands it, Python does not: ``~/d/x.pt`` was a folder named ``~``
    and the message said ``mkdir -p ~/d``, which makes another folder). A path ending in a separator names a
    folder (``Path("newdir/")`` drops the slash, and the checkpoint became a file named ``newdir``); ``"."`` (what
    ``Path("")`` becomes) is the current folder: each is refused asking for a file name."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(_("{name} must be a file path (a str or pathlib.Path) such as 'numerals.pt', "
                        "got {path!r} ({type})").format(name=name, path=path, type=type(path).__name__))
    text = os.fspath(path)
    if not str(text).strip():
        raise ValueError(_("{name} is empty: give a file name such as 'numerals.pt'").format(name=name))
    if "\0" in str(text):
        raise ValueError(_("{name} {path!r} holds a NUL character, which no file name may hold: remove it").format(
            name=name, path=text))
    if str(text).endswith(tuple(sep for sep in ("/", os.sep, os.altsep) if sep)):
        raise ValueError(_("{name} {path} ends with a separator, so it names a folder, not a file: add a file name, "
                           "e.g. {example}").format(name=name, path=text, example=Path(text) / "numerals.pt"))
    path = Path(path).expanduser()
    if (size := len(os.fsencode(path.name))) > MAX_NAME_BYTES:
        raise ValueError(_("{name}: the file name {start}... is {size} bytes, longer than a file name may be ({most}): "
                           "give a shorter name").format(name=name, start=path.name[:20], size=size,
                                                         most=MAX_NAME_BYTES))
    if path == Path("."):
        raise ValueError(_("{name} is '.', the current folder (an empty path '' becomes '.' once it is a Path): "
                           "give a file name such as 'numerals.pt'").format(name=name))
    if path.is_dir():
        raise ValueError(_("{name} {path} is a folder, not a file: add a file name, e.g. {example}").format(
            name=name, path=path, example=path / 'numerals.pt'))
    if for_writing:
        folder = path.parent
        if not folder.is_dir():
            raise ValueError(_("{name} {path}: the folder {folder} does not exist; create it first "
                             "(mkdir -p {folder}) or save somewhere else").format(name=name, path=path, folder=folder))
        if not os.access(folder, os.W_OK):
            raise ValueError(_("{name} {path}: the folder {folder} is not writable; save somewhere else").format(
                name=name, path=path, folder=folder))
    elif not path.exists():
        raise ValueError(_("no checkpoint at {path}; train and save_checkpoint first").format(path=path))
    elif not path.is_file():  # reading a pipe or a device would wait forever
        raise ValueError(_("{name} {path} is not a file (a pipe or a device, say): give the .pt file that "
                           "save_checkpoint wrote").format(name=name, path=path))
    return path


def digest(state: dict) -> str:
    """SHA-256 over everything in a checkpoint but the digest itself, as stored: keys in sorted order, each
    tensor with its dtype, shape and bytes (weights and optimiser moments), every other value by its repr."""
    sha = hashlib.sha256()

    def add(value) -> None:
        if isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous()
            sha.update(f"tensor|{tensor.dtype}|{list(tensor.shape)}|".encode())
            sha.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            sha.update(f"dict|{len(value)}|".encode())
            for key in sorted(value, key=repr):
                sha.update(f"{key!r}:".encode())
                add(value[key])
        elif isinstance(value, (list, tuple)):
            sha.update(f"{type(value).__name__}|{len(value)}|".encode())
            for item in value:
                add(item)
        else:
            sha.update(f"{value!r}|".encode())

    add({key: value for key, value in state.items() if key != "sha256"})
    return sha.hexdigest()


def save_whole(data, path: Path) -> None:
    """``torch.save(data, path)`` (or, for a ``str``, its UTF-8 text) that never leaves a partial file at ``path``.

    Written to a temporary file in the same folder, flushed to the disk (fsync), then renamed over ``path`` in
    one step (``os.replace``): until the new file is whole, the old one stays as it was. A failed save (a full
    disk, Ctrl-C) leaves no trace, and two processes saving to one path leave one whole file or the other.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.part")
    try:
        # O_EXCL: never another process's temporary file; 0o666 less the umask, as any file the user saves
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as file:
            file.write(data.encode()) if isinstance(data, str) else torch.save(data, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException as err:
        temporary.unlink(missing_ok=True)
        # torch.save reports a failed write as a RuntimeError raised while handling the OSError
        cause = err if isinstance(err, OSError) else err.__context__
        if isinstance(err, KeyboardInterrupt) or isinstance(cause, KeyboardInterrupt):  # torch's zip writer, stopped
            raise KeyboardInterrupt(_("saving {path} was interrupted: nothing was written and the file that was "
                                      "there, if any, is unchanged").format(path=path)) from None
        if not isinstance(err, (OSError, RuntimeError)) or not isinstance(cause, OSError):
            raise
        hint = (_("the disk is full") if cause.errno in (errno.ENOSPC, errno.EDQUOT)
                else cause.strerror or type(cause).__name__)
        raise OSError(_("could not write {path} ({hint}): nothing was written and the file that was there, if "
                        "any, is unchanged; free some space or save somewhere else").format(
                            path=path, hint=hint)) from cause
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself reaches the disk: a power cut now keeps the new file
    finally:
        os.close(folder)


def save_checkpoint(trainer, path: str | Path, optimizer: bool | None = None) -> None:
    """Any task's trainer (``Trainer``, ``GPTTrainer``, ``TranslatorTrainer``) to ``path``: its weights with their
    digest, history, step, settings and what its task needs to rebuild it (``trainer.checkpoint_data()``), and with
    ``optimizer`` all a resume needs (without, a third of the size: enough to use the model, not to train on).
    ``optimizer=None``: only where ``load_checkpoint`` gives back a trainer that could resume; the translator's
    gives back the model, ready to translate, so its optimiser's state would be 46 MB never read.
    Files a task keeps beside it (the translator's tokenizer and licence note) are written after it, each whole."""
    if getattr(trainer, "checkpoint_format", None) not in KINDS:
        raise TypeError(_("save_checkpoint saves a task's trainer (a walkthrough.Trainer, GPTTrainer or "
                          "TranslatorTrainer), got {type}").format(type=type(trainer).__name__))
    if optimizer is not None:  # "no" or 0 once counted as True or False without a word
        check_bool("optimizer", optimizer)
    resumes = REBUILT_BY[trainer.checkpoint_format] is type(trainer)  # its loader gives back this trainer
    path = validate_checkpoint_path(path, for_writing=True)
    state = {"format": trainer.checkpoint_format, "settings": dataclasses.asdict(trainer.settings),
             **trainer.checkpoint_data(), **trainer.state_dict(resumes if optimizer is None else optimizer)}
    save_whole(state | {"sha256": digest(state)}, path)
    beside = trainer.files_beside(path)
    for written, (file, text) in enumerate(beside.items()):
        try:
            save_whole(text, file)
        except OSError as err:
            missing = ", ".join(str(name) for name in list(beside)[written:])
            raise OSError(_("{path} was saved (load_checkpoint reads it alone), but not {missing}: {err}").format(
                path=path, missing=missing, err=err)) from err


def load_checkpoint(path: str | Path, allow_untrained: bool = False):
    """What ``save_checkpoint`` wrote at ``path``, checked whole first (``read_checkpoint``), rebuilt by its task: a
    ``Trainer`` (notebook 07), a ``GPTTrainer`` (09) or the sentence translator, ready to translate (17). Loaded
    without the optimiser's state, a trainer translates but cannot train on. The global random state is left as
    it was (building a model draws from it). ``allow_untrained``: load a model saved before its first step too
    (refused by default, as a likely mistake)."""
    state = read_checkpoint(path, allow_untrained)
    with torch.random.fork_rng(devices=[]):  # the CPU generator only: training here is on the CPU
        return REBUILT_BY[state["format"]].from_checkpoint(state, Path(path))


def read_checkpoint(path: str | Path, allow_untrained: bool = False) -> dict:
    """Read a checkpoint as plain data (``torch.load(weights_only=True)``: no code from the file runs), and check it
    whole: its format, its keys, the digest of its weights, and that every weight is finite."""
    path = validate_checkpoint_path(path, for_writing=False)
    with open(path, "rb") as file:
        magic = file.read(4)
    if magic != b"PK\x03\x04":  # torch.save writes a zip archive
        raise ValueError(_("{path} is not a checkpoint (not a file torch.save wrote: it may be text or another "
                         "format); pass the .pt file that save_checkpoint wrote").format(path=path))
    try:
        state = torch.load(path, weights_only=True)
    except (RuntimeError, KeyError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, OSError) as err:
        raise ValueError(_("{path} is not a readable checkpoint (corrupted or not made by save_checkpoint): "
                         "{type}; save it again").format(path=path, type=type(err).__name__)) from None
    found = state.get("format") if isinstance(state, dict) else None
    if found not in KINDS:
        if isinstance(state, dict) and isinstance(state.get("sha256"), str) and digest(state) != state["sha256"]:
            damaged(path)  # a byte flipped in the format's name: not an earlier version
        age = format_age(found) if isinstance(found, str) else 0
        if age < 0:
            raise ValueError(_("{path} was saved by an earlier version of walkthrough ({found}), without a digest "
                             "of its weights: train and save_checkpoint again").format(path=path, found=found))
        if age > 0:
            raise ValueError(_("{path} was saved by a newer version of walkthrough ({found}) than this one: update "
                               "this copy of the series (git pull, then make setup) to load it").format(
                                   path=path, found=found))
        raise ValueError(_("{path} is a torch file but not a walkthrough checkpoint; save one with "
                           "save_checkpoint").format(path=path))
    missing = [key for key in COMMON_KEYS + KINDS[found][1] if key not in state]
    if missing or not isinstance(state["model"], dict):
        raise ValueError(_("{path} lacks {missing_keys}: it was altered or not written by "
                         "save_checkpoint; save it again").format(path=path,
                                                                  missing_keys=', '.join(missing) or 'its weights'))
    if digest(state) != state["sha256"]:
        damaged(path)
    not_finite = [name for name, tensor in state["model"].items()
                  if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if not_finite:
        raise ValueError(_("{path} holds NaN or infinite weights ({not_finite_0}, {len_not_finite} tensors in "
                         "all): the training that saved it diverged. Train again with a lower peak_lr").format(
                             path=path, not_finite_0=not_finite[0], len_not_finite=len(not_finite)))
    if state["step"] == 0 and not allow_untrained:
        raise ValueError(_("{path} holds an untrained model (step 0): train it first, "
                         "or pass allow_untrained=True to load it anyway").format(path=path))
    return state | {"model": current_names(state["model"])}


def format_age(found: str) -> int:
    """-1 when ``found`` is a format an earlier version wrote (one of ``KINDS`` with a lower number), 1 a later
    version, 0 neither."""
    stem, _dash, number = found.rpartition("-")
    ours = [int(kind.rpartition("-")[2]) for kind in KINDS if kind.rpartition("-")[0] == stem]
    return (int(number) > ours[0]) - (int(number) < ours[0]) if ours and number.isdigit() else 0


def damaged(path: Path) -> NoReturn:
    raise ValueError(_("{path} is damaged: its contents do not match the digest stored with them (bytes changed "
                       "on disk or in a copy); load_checkpoint refuses it. Copy it again or re-make it").format(
                           path=path))


def settings_from(state: dict, settings_type: type, path: Path):
    """The stored settings as ``settings_type``, with a message naming what does not fit (not a KeyError)."""
    stored, known = state["settings"], {field.name for field in dataclasses.fields(settings_type)}
    if not isinstance(stored, dict):
        raise ValueError(_("{path}: its settings are not a dict of {type}'s fields; save it again").format(
            path=path, type=settings_type.__name__))
    unknown, missing = sorted(set(stored) - known), sorted(known - set(stored))
    if unknown or missing:
        detail = "; ".join(part for part in (unknown and f"unknown {', '.join(unknown)}",
                                              missing and f"missing {', '.join(missing)}") if part)
        raise ValueError(_("{path}: its settings do not fit {type} ({detail}); "
                         "the file was altered or made by another version: save it again").format(
                             path=path, type=settings_type.__name__, detail=detail))
    try:
        return settings_type(**stored)
    except (TypeError, ValueError) as err:
        raise ValueError(_("{path}: its settings are not valid ({err}); save it again").format(
            path=path, err=err)) from None


def restore(loop, state: dict, path: Path) -> None:
    """Load ``state`` into a freshly built training loop; weights that do not fit its settings get our message."""
    try:
        loop.load_state_dict(state)
    except RuntimeError as err:  # torch's load_state_dict: missing or unexpected keys, other shapes
        reasons = [line.strip() for line in str(err).splitlines()[1:] if line.strip()]
        raise ValueError(_("{path}: its weights do not fit the settings stored with them "
                         "({reasons_0_if_reasons_else_err}); the file was altered: save it again").format(
                             path=path, reasons_0_if_reasons_else_err=reasons[0] if reasons else err)) from None

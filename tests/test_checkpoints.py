"""The shipped checkpoints (notebooks 07 and 09) are what scripts/make_checkpoints.py makes, and score what
their manifests say. Bounded by steps: each test re-trains only the first ``check_step`` steps."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import walkthrough as wt

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_checkpoints", ROOT / "scripts" / "make_checkpoints.py")
script = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = script  # its dataclass looks its module up there
spec.loader.exec_module(script)


@pytest.mark.parametrize("name", sorted(script.SHIPPED))
def test_the_shipped_checkpoint_is_what_its_script_makes(name):
    """Bit for bit on the machine that made them (``make_checkpoints.py --check`` says so); the assertion
    allows a relative 1e-5, since another CPU's vector units may round sums differently."""
    shipped = script.SHIPPED[name]
    manifest = shipped.manifest()
    loaded = shipped.load(shipped.checkpoint)
    assert loaded.settings == type(loaded.settings)() and loaded.step == loaded.settings.steps
    assert script.fingerprint(loaded.model)["sha256"] == manifest["fingerprints"][str(loaded.step)]["sha256"]
    trainer, fingerprints = script.train(shipped, manifest["check_step"])
    assert trainer.step == manifest["check_step"] == shipped.check_step
    torch.testing.assert_close(torch.tensor(trainer.losses), torch.tensor(loaded.losses[:trainer.step]),
                               rtol=1e-5, atol=1e-6)
    made, stored = fingerprints[trainer.step]["sums"], manifest["fingerprints"][str(trainer.step)]["sums"]
    assert made.keys() == stored.keys()
    torch.testing.assert_close(torch.tensor(list(made.values())), torch.tensor(list(stored.values())),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,least", [("numerals", 0.99), ("gpt_numerals", 0.95)])
def test_the_shipped_checkpoint_scores_what_its_manifest_says(name, least):
    shipped = script.SHIPPED[name]
    manifest = shipped.manifest()
    accuracy = shipped.load(shipped.checkpoint).accuracy(wt.held_out_pairs(manifest["held_out"]))
    assert accuracy == pytest.approx(manifest["held_out_accuracy"], abs=0.004)  # one number in 500, at most
    assert accuracy >= least
    assert shipped.checkpoint.stat().st_size < 1.5e6, "small enough to ship"


def test_the_gpt_checkpoint_uses_gqa_rope_and_pre_norm():
    cfg = script.SHIPPED["gpt_numerals"].load(script.SHIPPED["gpt_numerals"].checkpoint).model.cfg
    assert (cfg.positions, cfg.num_heads, cfg.kv_heads, cfg.norm_first) == ("rope", 4, 2, True)

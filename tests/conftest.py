import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import settings

import walkthrough as wt

from . import offline

TESTS = Path(__file__).resolve().parent


def _offline_kernels() -> None:
    """Every kernel started from here (nbval, nbclient, JupyterLab) runs the network guard at startup."""
    ipython_dir = Path(tempfile.mkdtemp(prefix="walkthrough-ipython-"))
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00_offline.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nimport offline\noffline.install()\n")
    os.environ["IPYTHONDIR"] = str(ipython_dir)


_offline_kernels()
offline.install()

# CI tries the same examples every run (a red CI lands nothing, and a string found once is pinned with @example);
# on a developer's machine the property tests go on exploring new strings.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def small_cfg():
    return wt.ModelConfig(src_vocab_size=23, tgt_vocab_size=19, d_model=32, num_heads=4, d_ff=64, num_layers=2,
                          max_len=64, dropout=0.0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _language_restored():
    """A test that leaves the package in Chinese turns the next test on its worker into a false failure."""
    yield
    left = wt.get_language()
    wt.set_language("en")
    assert left == "en", f"this test left the language at {left!r}: set it back in a finally or a fixture"


# The classroom tier: tests that start kernels, JupyterLab, Chromium, torchrun or a hub, or build the site. `make
# check` (between edits) runs everything else, the package's own tests; `make test` (CI, the README's command) runs
# both tiers and nbval. A new test file belongs to the package tier unless it is named here; a single test that
# re-trains or scores a shipped model, or starts processes, carries the mark itself (it takes seconds, and keeps
# `make check` under 2 minutes on 2 cores).
CLASSROOM_TIER = {
    "test_browser.py", "test_slides_fit.py", "test_notebooks.py", "test_rerun_out_of_order.py", "test_rerun_06.py",
    "test_kernel_memory.py", "test_notebook07.py", "test_commands.py", "test_packaging.py", "test_hub.py",
    "test_distributed.py", "test_offline.py", "test_api_reference.py", "test_shape_sheet.py", "test_docs.py",
    "test_glyphs.py", "test_slides_readable.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb" or item.path.name in CLASSROOM_TIER:
            item.add_marker(pytest.mark.classroom)

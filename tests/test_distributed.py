"""DDP across processes (notebook 14): 2 processes x 32 sentences train exactly as 1 process x 64; bad input refused.

The real launcher runs: ``torchrun`` (through ``wt.distributed.torchrun``), 2 processes, a few steps, one
CPU thread each, a free port. The reference is the plain one-process Trainer, run here.
"""

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import walkthrough as wt
from walkthrough import __main__ as cli
from walkthrough.tasks import distributed

STEPS, BATCH = 4, 64


def processes_mentioning(marker: str) -> list[str]:
    """Command lines of live processes that contain ``marker`` (a unique temporary path): what a run left behind."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        if marker in text:
            found.append(text)
    return found


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """One real 2-process torchrun: its first-step report, its checkpoint, its output."""
    folder = tmp_path_factory.mktemp("ddp")
    done = distributed.torchrun(["--steps", str(STEPS), "--batch-size", str(BATCH), "--dropout", "0",
                                 "--held-out", "20", "--save", str(folder / "ddp.pt"),
                                 "--report", str(folder / "report.pt")], nproc=2)
    return done, torch.load(folder / "report.pt", weights_only=True), folder


@pytest.fixture(scope="module")
def one_process():
    """The same training in one process with the whole batch, and its step-0 gradient."""
    settings = wt.TrainSettings(steps=STEPS, batch_size=BATCH, seed=0)
    first = wt.Trainer(settings)
    first.loss(first.model, first.batch(0)).backward()
    gradient = {name: p.grad for name, p in first.model.named_parameters()}
    trainer = wt.Trainer(settings)
    trainer.run(progress=False)
    return trainer, gradient


def test_two_processes_lose_what_one_does_at_every_step(ddp_run, one_process):
    _, report, _ = ddp_run
    trainer, _ = one_process
    assert len(report["losses"]) == len(trainer.losses) == STEPS
    torch.testing.assert_close(torch.tensor(report["losses"]), torch.tensor(trainer.losses), rtol=1e-5, atol=0)


def test_all_reduced_gradient_is_the_whole_batchs(ddp_run, one_process):
    _, report, _ = ddp_run
    _, gradient = one_process
    before = [rank["grads_before"] for rank in report["ranks"]]
    after = report["grads_after"]
    assert set(after) == set(gradient) == set(before[0]) == set(before[1])
    for name, reference in gradient.items():
        assert list(after[name].shape) == report["parameters"][name] == list(reference.shape), name
        torch.testing.assert_close(after[name], reference, rtol=1e-4, atol=1e-6)
    assert any(not torch.allclose(before[0][n], before[1][n]) for n in gradient), "the ranks saw different data"


def test_each_rank_holds_half_the_batch(ddp_run):
    done, report, _ = ddp_run
    whole = wt.Trainer(wt.TrainSettings(steps=STEPS, batch_size=BATCH, seed=0)).batch(0)
    assert report["world_size"] == 2
    assert [rank["rows"] for rank in report["ranks"]] == [[0, 32], [32, 64]]
    for rank in report["ranks"]:
        assert rank["inputs"]["src"] == [BATCH // 2, whole.src.size(1)]  # [B/2, L_src]
        assert rank["inputs"]["tgt_in"] == rank["inputs"]["labels"] == [BATCH // 2, whole.tgt_in.size(1)]
        assert rank["logits"][:2] == [BATCH // 2, whole.tgt_in.size(1)]
        assert sum(bucket["numel"] for bucket in rank["buckets"]) == sum(
            p.numel() for p in wt.Trainer(wt.TrainSettings(steps=1)).model.parameters())  # one gradient per parameter
    assert done.stdout.strip().splitlines()[-1].startswith("held-out exact-match accuracy:"), "printed once, by rank 0"
    assert len(re.findall("held-out exact-match", done.stdout)) == 1
    assert "on 2 processes (DDP, gloo), 32 sentences each" in done.stderr


def test_final_weights_equal_one_process(ddp_run, one_process):
    """Equal to float precision, except the key projections' biases: their true gradient is exactly zero
    (adding one vector to every key shifts all of a query's scores alike, and softmax ignores that), so
    both runs see rounding noise there, which Adam divides by its own size into steps of the learning rate."""
    _, _, folder = ddp_run
    trainer, gradient = one_process
    ddp = wt.load_checkpoint(folder / "ddp.pt", allow_untrained=True)
    noise_only = {name for name, g in gradient.items() if g.abs().max() < 1e-6}
    assert noise_only and all(re.search(r"\.w_k\.bias$", name) for name in noise_only), noise_only
    ours = dict(ddp.model.named_parameters())
    for name, weight in trainer.model.named_parameters():
        if name not in noise_only:
            torch.testing.assert_close(ours[name], weight, rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("batch,world,message", [
    (1, 2, r"^error: --batch-size 1 is the global batch, split across the 2 processes: fewer sentences than "
           r"processes leaves a rank empty; pass --batch-size of at least 2"),
    (63, 2, r"^error: --batch-size 63 does not split evenly across 2 processes .*pass a multiple of 2, such as "
            r"62 or 64"),
    (6, 4, r"^error: --batch-size 6 does not split evenly across 4 processes .*such as 4 or 8"),
])
def test_a_batch_the_ranks_cannot_share_is_refused_before_any_work(monkeypatch, capsys, batch, world, message):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")  # what torchrun sets in each process it starts
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setattr(distributed, "process_group", lambda: pytest.fail("a process group was started"))
    assert cli.main(["train", "--batch-size", str(batch), "--steps", "2"]) == 2
    assert re.search(message, capsys.readouterr().err, re.MULTILINE)


def test_seconds_and_report_are_refused_where_they_cannot_work(monkeypatch, capsys):
    assert cli.main(["train", "--report", "x.pt"]) == 2
    assert "--report records every rank of a torchrun" in capsys.readouterr().err
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main(["train", "--seconds", "5"]) == 2
    assert "under torchrun give --steps" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--report", "."], r"^error: --report is '\.', the current folder .*: give a file name"),
    (["--report", "/nonexistent/dir/r.pt"], r"^error: --report /nonexistent/dir/r.pt: the folder /nonexistent/dir "
                                            r"does not exist"),
    (["--report", "same.pt", "--save", "same.pt"], r"^error: --report and --save name the same file \(same.pt\)"),
])
def test_every_output_path_is_checked_before_the_first_step_under_torchrun(monkeypatch, capsys, argv, message):
    """Not after the last step: a bad --report used to fail there, and --save's file was then never written."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(distributed, "process_group", lambda: pytest.fail("a process group was started"))
    assert cli.main(["train", "--steps", "2", *argv]) == 2
    assert re.search(message, capsys.readouterr().err, re.MULTILINE)


def test_more_processes_than_sentences_fails_clearly_under_torchrun(tmp_path):
    save = tmp_path / "never.pt"
    done = distributed.torchrun(["--batch-size", "1", "--steps", "2", "--save", str(save)], nproc=2, check=False)
    assert done.returncode != 0
    assert "error: --batch-size 1 is the global batch, split across the 2 processes" in done.stderr
    assert not save.exists()
    assert processes_mentioning(str(save)) == []
    with pytest.raises(RuntimeError, match=r"torchrun failed \(exit 1\): error: --batch-size 1 is the global batch"):
        distributed.torchrun(["--batch-size", "1", "--steps", "2", "--save", str(save)], nproc=2)


def test_a_port_in_use_is_named(tmp_path):
    save = tmp_path / "never.pt"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ValueError, match=f"port {port} is in use .*pass port=None to pick a free one"):
            distributed.torchrun(["--steps", "2", "--save", str(save)], port=port)
        plain = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
                                "--master-addr=127.0.0.1", f"--master-port={port}", "-m", "walkthrough", "train",
                                "--steps", "2", "--save", str(save)], capture_output=True, text=True)
    assert plain.returncode != 0 and "address already in use" in plain.stderr  # torchrun's own message
    assert not save.exists()
    assert processes_mentioning(str(save)) == []


@pytest.mark.parametrize("batch,world,sizes", [(64, 2, [32, 32]), (10, 4, [3, 3, 2, 2]), (3, 3, [1, 1, 1])])
def test_shards_cover_the_batch_in_order_like_tensor_split(batch, world, sizes):
    rows = [distributed.shard_slice(batch, world, rank) for rank in range(world)]
    assert [r.stop - r.start for r in rows] == sizes
    expected = torch.arange(batch).tensor_split(world)
    assert all(torch.equal(torch.arange(batch)[r], e) for r, e in zip(rows, expected))


@pytest.mark.parametrize("args,error,message", [
    ((2, 3, 0), ValueError, r"world_size=3 is more than the batch's 2 sentences: a rank would be left empty"),
    ((4, 2, 2), ValueError, r"rank must be a whole number from 0 to world_size - 1 = 1, got 2"),
    ((0, 1, 0), ValueError, "batch_size"),
])
def test_bad_shards_are_refused(args, error, message):
    with pytest.raises(error, match=message):
        distributed.shard_slice(*args)


def test_fsdp_holds_each_parameters_dim0_chunk_on_each_rank():
    """PyTorch's own fully_shard, on the meta device: rank r holds chunk r of every parameter's rows
    (torch.chunk's sizes: 35 rows on 4 ranks are 9, 9, 9, 8), all ranks together hold every row once."""
    cfg = wt.ModelConfig(src_vocab_size=35, tgt_vocab_size=35, d_model=16, num_heads=2, d_ff=32, num_layers=2,
                         max_len=16, dropout=0.0)
    with torch.device("meta"):
        model = wt.Transformer(cfg)
    full = {name: tuple(p.shape) for name, p in model.named_parameters()}
    per_rank = [distributed.fsdp_shards(model, 4, rank) for rank in range(4)]
    for rank, shards in enumerate(per_rank):
        assert [s.name for s in shards] == list(full)
        for s in shards:
            assert s.full == full[s.name]
            expected = torch.empty(s.full, device="meta").chunk(4)[rank].shape
            assert s.local == tuple(expected), (rank, s)
    embedding = [next(s for s in shards if s.name == "src_embed.token.weight").local for shards in per_rank]
    assert embedding == [(9, 16), (9, 16), (9, 16), (8, 16)]
    assert all(p.device.type == "meta" and not hasattr(p, "to_local") for p in model.parameters()), "model unchanged"


def test_fsdp_shards_refuses_a_real_model():
    with pytest.raises(ValueError, match="build the model on the meta device"):
        distributed.fsdp_shards(wt.Transformer(wt.ModelConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=8,
                                                                num_heads=2, d_ff=16, num_layers=1)), 2)


@pytest.mark.parametrize("stage,parameters,gradients,optimizer", [
    (0, 400, 400, 800), (1, 400, 400, 200), (2, 400, 100, 200), (3, 100, 100, 200)])
def test_each_zero_stage_shards_one_more_kind(stage, parameters, gradients, optimizer):
    held = distributed.rank_memory(100, 4, stage)  # 100 float32 weights with Adam on 4 ranks
    assert (held.parameters, held.gradients, held.optimizer) == (parameters, gradients, optimizer)
    assert held.total == parameters + gradients + optimizer


def test_rank_memory_and_ring_bytes_refuse_bad_input():
    with pytest.raises(ValueError, match=r"stage must be 0 \(DDP\), 1, 2 or 3"):
        distributed.rank_memory(100, 4, 4)
    with pytest.raises(ValueError, match="world_size"):
        distributed.ring_all_reduce_bytes(100, 0)


def test_a_ring_all_reduce_sends_2_w_minus_1_over_w_of_the_tensor():
    assert [distributed.ring_all_reduce_bytes(1000, w) for w in (1, 2, 4, 8)] == [0, 1000, 1500, 1750]


def test_data_parallel_explorer_shows_the_shards_and_refuses_an_empty_rank():
    explorer = wt.widgets.data_parallel_explorer()
    assert "rank 1: rows 32-63, src [32, 10]" in explorer.text()
    explorer.control("batch").value = 60
    explorer.control("world_size").value = 8
    assert "refuses it: --batch-size 60 does not split evenly across 8 processes" in explorer.text()
    explorer.control("batch").value = 5
    assert "world_size=8 is more than the batch's 5 sentences: a rank would be left empty" in explorer.text()

"""Data parallelism (数据并行) on CPU: DistributedDataParallel with gloo when started by ``torchrun`` (notebook 14).

Dim 0 holds independent sentences, so a global batch of B sentences can be split into W shards of
B/W rows, one per process (rank). Every rank holds the whole model, runs its shard forward and
backward, and DDP all-reduces (averages) the gradients, so every rank takes the same update and the
weights stay equal everywhere. Started plainly, training is one process, exactly as before.

Each rank's loss is its shard's share of the global batch's loss (weighted by its real tokens), so the
averaged gradient is the gradient of the global batch's loss: two processes with 32 sentences each train
exactly as one process with 64. ``torchrun`` from a notebook, never ``mp.spawn``: spawning re-imports
the notebook's ``__main__`` and fails on functions defined in cells.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import socket
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from ..checks import check_positive_int
from ..i18n import ENVIRONMENT, _, get_language
from .checkpoints import save_whole
from .training import RunReport, TrainingLoop


def launched_by_torchrun() -> bool:
    """True in a process that ``torchrun`` started (it sets RANK, WORLD_SIZE, MASTER_ADDR/PORT)."""
    return dist.is_torchelastic_launched()


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes, from torchrun's environment; (0, 1) when started plainly."""
    if not launched_by_torchrun():
        return 0, 1
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def shard_slice(batch_size: int, world_size: int, rank: int) -> slice:
    """The rows of a global batch that ``rank`` holds: contiguous, never empty, sizes differing by at most one.

    The first ``batch_size % world_size`` ranks take one extra row (``torch.tensor_split``'s rule):
    10 rows on 4 ranks are 3, 3, 2, 2.
    """
    check_positive_int("batch_size", batch_size)
    check_positive_int("world_size", world_size)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(_("rank must be a whole number from 0 to world_size - 1 = {last}, got {rank!r}").format(
            last=world_size - 1, rank=rank))
    if world_size > batch_size:
        raise ValueError(_("world_size={world_size} is more than the batch's {batch_size} sentences: a rank would "
                         "be left empty; use at most {batch_size} processes or a batch of at least {world_size}")
                             .format(world_size=world_size, batch_size=batch_size))
    base, extra = divmod(batch_size, world_size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def check_global_batch(batch_size: int, world_size: int) -> None:
    """Refuse a global batch that ``world_size`` processes cannot share equally (before any process group exists)."""
    if world_size > batch_size:
        raise ValueError(_("--batch-size {batch_size} is the global batch, split across the {world_size} processes: "
                         "fewer sentences than processes leaves a rank empty; pass --batch-size of at least "
                         "{world_size} (e.g. {example}) or start at most {batch_size} processes").format(
                             batch_size=batch_size, world_size=world_size, example=32 * world_size))
    if batch_size % world_size:
        lower, upper = batch_size // world_size * world_size, (batch_size // world_size + 1) * world_size
        raise ValueError(_("--batch-size {batch_size} does not split evenly across {world_size} processes (each "
                         "rank takes batch_size / {world_size} sentences): pass a multiple of {world_size}, "
                         "such as {lower_or_upper} or {upper}").format(
                             batch_size=batch_size, world_size=world_size, lower_or_upper=lower or upper, upper=upper))


def shard(batch, rows: slice):
    """A batch dataclass (``Batch``, ``LMBatch``) with every tensor cut to ``rows`` on dim 0: [B, L] -> [B/W, L]."""
    return dataclasses.replace(batch, **{f.name: getattr(batch, f.name)[rows] for f in dataclasses.fields(batch)})


@contextmanager
def process_group():
    """The gloo process group of a torchrun-started process, destroyed on the way out (also after an error)."""
    dist.init_process_group("gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()


class FirstStepReport:
    """What one rank saw in the first step: its rows, its inputs' and logits' shapes, the gradient it sent.

    DDP packs gradients into buckets and all-reduces each bucket during the backward pass; the comm hook
    below sees each bucket before the all-reduce (this rank's own gradient), and the parameters' ``.grad``
    after the step's backward hold the averaged one.
    """

    def __init__(self, ddp: DistributedDataParallel, rows: slice):
        self.rows = [rows.start, rows.stop]
        self.inputs: dict[str, list[int]] = {}
        self.logits: list[int] | None = None
        self.buckets: list[dict] = []
        self.grads_before: dict[str, torch.Tensor] = {}
        self.grads_after: dict[str, torch.Tensor] = {}
        self.names = {param: name for name, param in ddp.module.named_parameters()}
        self.done = False
        self.hook = ddp.module.register_forward_hook(self._logits)
        ddp.register_comm_hook(None, self._bucket)

    def _logits(self, module, inputs, output) -> None:
        if not self.done:
            self.logits = list(output.shape)  # [B/W, L, V]

    def _bucket(self, group, bucket):
        if not self.done:
            names = [self.names[p] for p in bucket.parameters()]
            self.buckets.append({"numel": bucket.buffer().numel(), "bytes": bucket.buffer().numel()
                                 * bucket.buffer().element_size(), "parameters": len(names)})
            self.grads_before |= {name: g.detach().clone() for name, g in zip(names, bucket.gradients())}
        return allreduce_hook(group, bucket)  # PyTorch's default: divide by the world size, all-reduce (sum)

    def finish(self) -> None:
        """After the first step: keep the averaged gradient (the next step's zero_grad clears it), stop watching."""
        self.grads_after = {name: param.grad.detach().clone() for param, name in self.names.items()}
        self.done = True
        self.hook.remove()

    def as_dict(self) -> dict:
        return {"rows": self.rows, "inputs": self.inputs, "logits": self.logits, "buckets": self.buckets,
                "grads_before": self.grads_before}


def train_data_parallel(loop: TrainingLoop, *, pad_id: int, steps: int | None = None, progress: bool = True,
                        report: str | None = None) -> RunReport:
    """Train ``loop`` on this rank's shard of every global batch, with DDP (gloo); call it in every rank.

    ``loop.batch(step)`` must return the global batch (a dataclass of [B, ...] tensors with ``labels``);
    every rank builds it (it depends only on the seed and the step) and keeps its rows. The history
    records the global batch's loss, as one process would. ``report``: rank 0 writes the first step's
    shapes and gradients of every rank, the buckets and the losses there (``torch.load`` reads it; written whole
    or not at all).
    Runs inside an initialised process group (``process_group()``).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = loop.model
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's weights; registers the all-reduce hooks
    global_batch, shard_loss = loop.batch_fn, loop.loss_fn
    first: FirstStepReport | None = None

    def batch(step: int):
        whole = global_batch(step)  # [B, ...]
        rows = shard_slice(whole.labels.size(0), world_size, rank)
        if first is not None and not first.inputs:
            first.inputs = {f.name: list(getattr(whole, f.name)[rows].shape) for f in dataclasses.fields(whole)}
        return whole, shard(whole, rows)

    def loss(_model, batches) -> torch.Tensor:
        whole, mine = batches
        tokens, my_tokens = (whole.labels != pad_id).sum(), (mine.labels != pad_id).sum()
        # mean over my tokens x my share of the tokens x W: DDP's average over W ranks is then the global mean
        return shard_loss(ddp, mine) * (my_tokens * world_size / tokens)

    def global_loss(_loop) -> None:
        total = torch.tensor(loop.losses[-1], dtype=torch.float64)
        dist.all_reduce(total)  # the sum of the ranks' shares is W x the global batch's mean loss
        loop.losses[-1] = total.item() / world_size
        if first is not None and not first.done:
            first.finish()

    if report is not None:
        first = FirstStepReport(ddp, shard_slice(global_batch(loop.step).labels.size(0), world_size, rank))
    loop.batch_fn, loop.loss_fn = batch, loss
    try:
        result = loop.run(steps, progress=progress and rank == 0, on_step=global_loss, evaluate=False)
    finally:
        loop.batch_fn, loop.loss_fn = global_batch, shard_loss
    result.losses = loop.losses[result.start_step:]
    if report is not None:
        gathered = [None] * world_size if rank == 0 else None
        dist.gather_object(first.as_dict(), gathered, dst=0)
        if rank == 0:
            save_whole({"world_size": world_size, "ranks": gathered, "losses": result.losses,
                        "grads_after": first.grads_after,
                        "parameters": {n: list(p.shape) for n, p in model.named_parameters()}}, Path(report))
    return result


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the system picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_port_free(port: int) -> None:
    check_positive_int("port", port)
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise ValueError(_("port {port} is in use (another training run or another program listens there): "
                             "pass port=None to pick a free one").format(port=port)) from None


def torchrun(train_args: list[str], nproc: int = 2, port: int | None = None,
             check: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m walkthrough train *train_args`` on ``nproc`` processes with torchrun, and wait for it.

    What a notebook does instead of ``mp.spawn``: a real script in fresh processes, one CPU thread each
    (OMP_NUM_THREADS=1), rendezvous on 127.0.0.1 at ``port`` (default: a free one). Returns the finished
    process (its stdout, stderr); ``check``: a failed run raises RuntimeError with its error output.
    """
    check_positive_int("nproc", nproc)
    if not isinstance(train_args, (list, tuple)) or not all(isinstance(a, str) for a in train_args):
        raise TypeError(_("train_args must be a list of strings such as ['--steps', '5'], got {train_args!r}").format(
            train_args=train_args))
    port = free_port() if port is None else port
    check_port_free(port)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={nproc}",
               "--master-addr=127.0.0.1", f"--master-port={port}", "-m", "walkthrough", "train", *train_args]
    done = subprocess.run(command, capture_output=True, text=True,  # the processes speak the notebook's language
                          env=os.environ | {"OMP_NUM_THREADS": "1", ENVIRONMENT: get_language()})
    if check and done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        raise RuntimeError(_("torchrun failed (exit {returncode}): ").format(returncode=done.returncode)
                           + ("\n".join(dict.fromkeys(errors)) or done.stderr[-2000:]))
    return done


@dataclass(frozen=True)
class ParameterShard:
    """One parameter under FSDP: its full shape and the piece ``rank`` holds (rows of dim 0)."""

    name: str
    full: tuple[int, ...]
    local: tuple[int, ...]


def fsdp_shards(model: nn.Module, world_size: int, rank: int = 0) -> list[ParameterShard]:
    """What ``rank`` holds of every parameter when PyTorch's FSDP (``fully_shard``) spreads ``model`` over
    ``world_size`` ranks: each parameter is cut along dim 0 ([V, D] -> [V/W, D] on each rank).

    Run for real on a model built on the meta device (shapes, no memory) with PyTorch's "fake" process
    group, the one its own tests use to shard without other processes: each layer is one FSDP unit, as usual.
    """
    check_positive_int("world_size", world_size)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(_("rank must be a whole number from 0 to world_size - 1 = {last}, got {rank!r}").format(
            last=world_size - 1, rank=rank))
    if any(p.device.type != "meta" for p in model.parameters()):
        raise ValueError(_("build the model on the meta device (with torch.device('meta'): ...): sharding it here "
                         "needs its shapes only, and must not change a real model"))
    if dist.is_initialized():
        raise ValueError(_("a process group is already running in this process: shard in a fresh one"))
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    model = copy.deepcopy(model)  # fully_shard changes the model it wraps
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        for layer in [m for m in model.modules() if isinstance(m, nn.ModuleList)]:
            for block in layer:
                fully_shard(block)
        fully_shard(model)
        return [ParameterShard(name, tuple(p.shape), tuple(p.to_local().shape))
                for name, p in model.named_parameters()]
    finally:
        dist.destroy_process_group()


@dataclass(frozen=True)
class RankMemory:
    """Bytes one rank holds for training (float32, Adam): weights, gradients, Adam's two moments."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer


def rank_memory(parameters: int, world_size: int, stage: int) -> RankMemory:
    """Per-rank bytes of ``parameters`` float32 weights trained with Adam on ``world_size`` ranks.

    stage 0: DDP, every rank holds everything; the ZeRO stages shard more and more of it across the
    ranks: 1 the optimizer state, 2 also the gradients, 3 also the weights (what FSDP does).
    """
    check_positive_int("parameters", parameters)
    check_positive_int("world_size", world_size)
    if stage not in (0, 1, 2, 3):
        raise ValueError(_("stage must be 0 (DDP), 1, 2 or 3 (ZeRO stages; 3 is FSDP), got {stage!r}").format(
            stage=stage))
    full = 4 * parameters  # float32

    def share(sharded: bool) -> int:
        return -(-full // world_size) if sharded else full

    return RankMemory(share(stage >= 3), share(stage >= 2), 2 * share(stage >= 1))


def ring_all_reduce_bytes(tensor_bytes: int, world_size: int) -> int:
    """Bytes each rank sends to all-reduce ``tensor_bytes`` with a ring: 2·(W−1)/W of it (reduce-scatter, then
    all-gather), whatever the number of ranks; 0 alone."""
    check_positive_int("world_size", world_size)
    return 2 * (world_size - 1) * tensor_bytes // world_size

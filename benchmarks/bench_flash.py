"""Attention at long lengths: peak extra memory and time of the plain path, of our FlashAttention by hand, and of
PyTorch's fused kernel.

    plain   wt.scaled_dot_product_attention: scores and weights [B, H, L, L], then weights·V
    flash   wt.flash_attention(q, k, v, block_q=256, block_k=256): tiles and the online softmax, in Python loops
    sdpa    F.scaled_dot_product_attention: PyTorch's CPU kernel (tiled the same way, in C++)

B = 1, H = 8, d_k = 64, float32, L = 1024, 2048, 4096, 8192 (``--quick``: 1024 and 2048). Each measurement runs
in a fresh child process, so none inherits another's memory.

- Memory: the child warms up on a short sequence, resets the process's peak resident memory (Linux:
  ``/proc/self/clear_refs``), runs the path and reads the peak (``VmHWM``) minus the memory held just before:
  measured, not computed from shapes. This child maps every block of 64 KiB or more afresh (glibc's
  MALLOC_MMAP_THRESHOLD_), so no memory the warm-up freed is reused unseen. Both runs go through a
  TorchDispatchMode that records the shape of every tensor any op returns: the bench asserts that flash never
  makes one with L × L elements (the plain path's [8, L, L] shows the recorder sees them).
- Time: another child, with the usual allocator, warms up on a short sequence and times one call (the median
  of ``--repeats`` calls at L <= 2048).

Ours uses blocks of 256 here, not the default 16: each tile costs a few separate PyTorch calls from Python,
so small tiles are all overhead at these lengths (at 16 there would be 262,144 tiles at L = 8192). One tile's
scores are then [1, 8, 256, 256], 2 MiB. Target: ours holds no [L, L] tensor, and its peak at L = 8192 is
below 1/8 of the plain path's (printed last, and asserted).

Ours runs twice at each length (memory, time), the slowest part: at L = 8192 one run took 170 s on the project's
two cores with other jobs running (load 10), so the whole bench takes minutes; ``--quick`` one or two.

    .venv/bin/python benchmarks/bench_flash.py [--quick] [--repeats 3] [--threads N]
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import walkthrough as wt

BATCH, HEADS, D_K, BLOCK = 1, 8, 64, 256
LENGTHS, QUICK = (1024, 2048, 4096, 8192), (1024, 2048)
TARGET = 8  # ours below 1/8 of the plain path's peak at the longest length
PATHS = {
    "plain": lambda q, k, v: wt.scaled_dot_product_attention(q, k, v),
    "flash": lambda q, k, v: wt.flash_attention(q, k, v, block_q=BLOCK, block_k=BLOCK),
    "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
}


class LargestTensor(TorchDispatchMode):
    """Keeps the largest shape (by element count) of any tensor an op returns; holds no tensor itself."""

    def __init__(self):
        super().__init__()
        self.largest = ()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for tensor in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(tensor, torch.Tensor) and tensor.numel() > math.prod(self.largest):
                self.largest = tuple(tensor.shape)
        return result


def resident(field: str) -> int:
    """Bytes of this process's memory from /proc/self/status: VmRSS now, or VmHWM, the peak since the last reset."""
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024


def memory_child(path: str, length: int) -> dict:
    """In a fresh process: the largest tensor ``path`` makes at ``length`` and its peak extra bytes."""
    run, (q, k, v) = PATHS[path], inputs(length)
    with torch.no_grad(), LargestTensor() as recorder:
        run(q[:, :, :BLOCK], k[:, :, :BLOCK], v[:, :, :BLOCK])  # warm-up: kernels, thread pools, the recorder
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak resident memory to what is held now
        before = resident("VmRSS")
        run(q, k, v)
        return {"peak": resident("VmHWM") - before, "largest": recorder.largest}


def time_child(path: str, length: int, repeats: int) -> dict:
    """In a fresh process with the usual allocator: seconds of one call (median of ``repeats`` at L <= 2048)."""
    run, (q, k, v) = PATHS[path], inputs(length)
    with torch.no_grad():
        run(q[:, :, :BLOCK], k[:, :, :BLOCK], v[:, :, :BLOCK])  # warm-up: kernels and thread pools
        seconds = []
        for _ in range(repeats if length <= 2048 else 1):
            start = time.perf_counter()
            run(q, k, v)
            seconds.append(time.perf_counter() - start)
    return {"seconds": statistics.median(seconds)}


def inputs(length: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(BATCH, HEADS, length, D_K, generator=generator) for _ in range(3)]  # q, k, v [B, H, L, d_k]


def measure(path: str, length: int, repeats: int, threads: int | None) -> dict:
    """Both children's answers for one path at one length."""
    result = {}
    for kind in ("memory", "time"):
        command = [sys.executable, __file__, "--child", kind, path, str(length), "--repeats", str(repeats)]
        command += ["--threads", str(threads)] if threads else []
        environment = dict(os.environ)
        if kind == "memory":  # glibc keeps freed blocks under its adaptive mmap threshold for reuse, so a run could
            environment["MALLOC_MMAP_THRESHOLD_"] = str(64 * 1024)  # reuse the warm-up's memory unseen: map afresh
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=environment)
        result |= json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="L = 1024 and 2048 only (seconds, not minutes)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per path at L <= 2048 (median)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's choice)")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "PATH", "L"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        kind, path, length = args.child
        print(json.dumps(memory_child(path, int(length)) if kind == "memory"
                         else time_child(path, int(length), args.repeats)))
        return
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("this bench reads peak memory from Linux's /proc/self/status; run it on Linux")
    lengths = QUICK if args.quick else LENGTHS
    print(f"B = {BATCH}, H = {HEADS}, d_k = {D_K}, float32; ours with blocks of {BLOCK}; "
          f"torch threads: {args.threads or torch.get_num_threads()}")
    print(f"{'L':>6} {'path':>6} {'[L, L] scores':>14} {'peak extra':>11} {'largest tensor made':>22} "
          f"{'seconds':>8} {'× plain':>8}")
    results = {}
    for length in lengths:
        scores_bytes = BATCH * HEADS * length * length * 4  # what one [B, H, L, L] float32 tensor takes
        for path in PATHS:
            result = results[length, path] = measure(path, length, args.repeats, args.threads)
            ratio = result["seconds"] / results[length, "plain"]["seconds"]
            print(f"{length:>6} {path:>6} {scores_bytes / 2**20:>10.0f} MiB {result['peak'] / 2**20:>7.1f} MiB "
                  f"{result['largest']!s:>22} {result['seconds']:>8.2f} {ratio:>7.1f}×", flush=True)
        assert math.prod(results[length, "flash"]["largest"]) < length * length, results[length, "flash"]
        assert math.prod(results[length, "plain"]["largest"]) == BATCH * HEADS * length**2  # the recorder sees them
    longest = lengths[-1]
    ours, plain = results[longest, "flash"]["peak"], results[longest, "plain"]["peak"]
    print(f"no [L, L] tensor in ours at any length (largest: {results[longest, 'flash']['largest']} at L = {longest})")
    print(f"peak extra memory at L = {longest}: ours {ours / 2**20:.1f} MiB, plain {plain / 2**20:.1f} MiB: "
          f"1/{plain / ours:.0f} of the plain path's (target: below 1/{TARGET})")
    assert ours * TARGET < plain, "ours is not below 1/8 of the plain path's peak"


if __name__ == "__main__":
    main()

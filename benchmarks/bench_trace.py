"""trace_module on a GPT-3-sized stack: a 96-layer, d_model 12288 nn.TransformerEncoder at B=1, L=2048.

Goal: under 5 s on 2 cores, with flat memory (nothing allocated: the peak Python heap and the
process's peak RSS stay far below the 1 TiB the real weights and activations would need). Prints the
time per layer against a 1-layer stack (the cost of depth) and against our own model's named-step
trace at the same sizes (``trace_shapes``, 96 encoder + 96 decoder layers).

    .venv/bin/python benchmarks/bench_trace.py [--layers 96]
"""

import argparse
import resource
import tracemalloc

import torch
from timing import best_of
from torch import nn

import walkthrough as wt
from walkthrough.trace import tracer as trace

D_MODEL, HEADS, D_FF, LENGTH = 12288, 96, 49152, 2048


def encoder_stack(layers: int) -> nn.TransformerEncoder:
    with torch.device("meta"):
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, batch_first=True)
        return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=96)
    layers = parser.parse_args().layers
    trace.trace_module(encoder_stack(1), (1, 8, D_MODEL))  # warm-up: PyTorch loads its meta kernels once

    stack, single = encoder_stack(layers), encoder_stack(1)
    one = best_of(3, lambda: trace.trace_module(single, (1, LENGTH, D_MODEL)))
    full = best_of(3, lambda: trace.trace_module(stack, (1, LENGTH, D_MODEL)))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()  # after the timing: tracing every allocation slows Python down severalfold
    rows = trace.trace_module(stack, (1, LENGTH, D_MODEL))
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cfg = wt.ModelConfig(src_vocab_size=50257, tgt_vocab_size=50257, d_model=D_MODEL, num_heads=HEADS,
                         d_ff=D_FF, num_layers=layers, max_len=LENGTH)
    ours = best_of(3, lambda: trace._trace_pair.__wrapped__(cfg, 1, LENGTH, LENGTH))  # not answered from memory
    weights_gib = sum(p.numel() for p in stack.parameters()) * 4 / 2**30

    print(f"{layers}-layer nn.TransformerEncoder, d_model {D_MODEL}, [1, {LENGTH}, {D_MODEL}]: {len(rows)} rows")
    print(f"  trace_module        {full:6.2f} s  (best of 3; goal < 5 s)")
    print(f"  1-layer stack       {one:6.3f} s  -> {full / one / layers:.2f}x a 1-layer trace per layer")
    print(f"  our trace_shapes    {ours:6.2f} s  ({layers} + {layers} layers, named steps only) "
          f"-> trace_module / trace_shapes = {full / ours:.2f}")
    print(f"  memory              Python heap peak {heap_peak / 2**20:.1f} MiB during one trace; process peak RSS "
          f"{rss_before / 2**10:.0f} MiB before it, {rss_after / 2**10:.0f} MiB after; the real weights alone "
          f"would be {weights_gib:.0f} GiB")


if __name__ == "__main__":
    main()

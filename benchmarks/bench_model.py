"""One training step (forward + backward + Adam) at the source articles' sizes: ours vs nn.Transformer.

Both share the embedding, positional encoding and output head; only the stacks differ. Runs are
interleaved so machine noise hits both alike. Goal: ours no slower than the reference (<= 1.00x): both run
PyTorch's fused attention kernel in training. Also prints the
shape trace's latency at the source articles' sizes (the widgets call it on every slider move).

    .venv/bin/python benchmarks/bench_model.py [--rounds 10]
"""

import argparse
import statistics
import time

import torch
from timing import report_ratio
from torch import nn

import walkthrough as wt
from walkthrough.trace.tracer import trace_shapes


class TorchStackModel(nn.Module):
    """Our embeddings and head around ``nn.Transformer`` (post-norm, batch first)."""

    def __init__(self, ours: wt.Transformer):
        super().__init__()
        cfg = ours.cfg
        self.pad_id = cfg.pad_id
        self.src_embed, self.tgt_embed, self.output_head = ours.src_embed, ours.tgt_embed, ours.output_head
        self.stack = nn.Transformer(cfg.d_model, cfg.num_heads, cfg.num_layers, cfg.num_layers, cfg.d_ff,
                                    cfg.dropout, batch_first=True)

    def forward(self, src, tgt):
        blocked_future = wt.to_blocked(wt.causal_mask(tgt.size(1)))
        h = self.stack(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=blocked_future,
                       src_key_padding_mask=src == self.pad_id, tgt_key_padding_mask=tgt == self.pad_id,
                       memory_key_padding_mask=src == self.pad_id)
        return self.output_head(h)


def step_seconds(model, src, tgt, labels, optimizer) -> float:
    start = time.perf_counter()
    loss = wt.sequence_loss(model(src, tgt), labels, 0)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = wt.ModelConfig.paper_base()
    ours = wt.Transformer(cfg)
    reference = TorchStackModel(wt.Transformer(cfg))
    src, tgt = torch.randint(1, 30000, (32, 10)), torch.randint(1, 30000, (32, 4))
    src[:, 8:] = 0
    labels = torch.randint(1, 30000, (32, 4))
    models = {"ours": ours, "nn.Transformer": reference}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4) for name, m in models.items()}
    times = {name: [] for name in models}
    for round_ in range(args.rounds + 1):
        for name, model in models.items():
            seconds = step_seconds(model, src, tgt, labels, optimizers[name])
            if round_:  # round 0 warms up both
                times[name].append(seconds)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, paper_base sizes, "
          f"{args.rounds} interleaved rounds")
    report_ratio(times, 1.00)

    trace_shapes(wt.ModelConfig(d_model=64, num_heads=2, num_layers=1), 1, 2, 2)  # first meta call loads kernels
    moves = {  # a new size each time, as a slider move would be
        "batch slider (same model)": [(cfg, batch, 10, 4) for batch in range(1, 11)],
        "d_model slider (new model)": [(wt.ModelConfig(d_model=512 + 16 * i), 32, 10, 4) for i in range(1, 11)],
    }
    for name, calls in moves.items():
        samples = []
        for call in calls:
            start = time.perf_counter()
            trace_shapes(*call)
            samples.append(time.perf_counter() - start)
        print(f"trace_shapes at the source articles' sizes, {name}: median {statistics.median(samples) * 1e3:.0f} ms")
    start = time.perf_counter()
    trace_shapes(cfg, 1, 10, 4)
    print(f"trace_shapes, a size seen before (cached): {(time.perf_counter() - start) * 1e6:.0f} µs "
          f"(goal: well under 100 ms)")


if __name__ == "__main__":
    main()

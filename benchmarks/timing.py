"""Timing helpers the benchmark scripts share (run them as `python benchmarks/NAME.py`)."""

import statistics
import time


def seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def best_of(rounds: int, run) -> float:
    """The fastest of ``rounds`` runs: on a shared machine the others measure the neighbours."""
    return min(seconds(run) for _ in range(rounds))


def report_ratio(times: dict[str, list[float]], goal: float) -> float:
    """Print each side's median step and ours / the reference's (``times`` holds "ours" and "nn.Transformer")."""
    for name, samples in times.items():
        print(f"  {name:<15} median step {statistics.median(samples) * 1e3:8.1f} ms")
    ratio = statistics.median(times["ours"]) / statistics.median(times["nn.Transformer"])
    print(f"ratio ours / nn.Transformer: {ratio:.2f} (goal <= {goal:.2f})")
    return ratio

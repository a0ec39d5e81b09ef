"""Timing helpers the benchmark scripts share (run them as `python benchmarks/NAME.py`)."""

import time


def seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def best_of(rounds: int, run) -> float:
    """The fastest of ``rounds`` runs: on a shared machine the others measure the neighbours."""
    return min(seconds(run) for _ in range(rounds))

"""How long a class waits after moving a slider: kernel side, from the new value to the new output.

For every explorer in ``walkthrough.classroom.widgets`` (every ``*_explorer`` function, so explorers added
later are measured too) at its default sizes, each control is moved to a few values across its range
and back; one move is timed from setting the value to the output area holding the new output (the
figure already encoded as PNG), which is what the kernel does before sending it to the browser.
Prints, per explorer, the median and max wall time, the max CPU time of this process, and that max CPU time as
a ratio to the reference's, then the worst max last. Target: every max at most 100 ms on 2 quiet cores. The
explorers compute on one thread (see ``widgets.explorer``), so on an idle core a move's wall time is about its
CPU time: on a shared, loaded machine the CPU column is the better estimate of what a quiet machine would show.

The reference, measured in the same run before the explorers (the best of 5): one figure of the projector size
built from nothing, drawn and encoded as PNG at the explorers' dpi, which is what a move cost an explorer that
rebuilt its figure on every move. The ratio to it stays comparable between a quiet and a loaded machine where
the milliseconds do not.

    .venv/bin/python benchmarks/bench_widgets.py [--moves 4] [--only mask,cross] [--wait-for-load 1.0]

The machine's load average is printed before and after: a number measured under load says so.
``--wait-for-load`` first waits (up to 15 minutes) until the 1-minute load average is below the value.
The translation explorer gets an untrained model: it decodes the full 20 steps, the slowest case. The sampling and
real-translation explorers get the shipped models their notebooks (12, 17) load.
"""

import argparse
import io
import os
import statistics
import time

import ipywidgets
import numpy as np
from matplotlib.figure import Figure

import walkthrough as wt
from walkthrough.classroom import viz, widgets


def targets(control, moves: int) -> list:
    """``moves`` values spread over the control's range (the largest sizes included), then the default."""
    if isinstance(control, ipywidgets.Checkbox):
        return [not control.value, control.value]
    if isinstance(control, ipywidgets.Text):  # a typed phrase: one word more, then the phrase again
        return [control.value + " 你好 hello", control.value]
    if hasattr(control, "options"):  # a dropdown, selection slider or toggle buttons
        values = [v for _, v in control.options] if isinstance(control.options[0], tuple) else list(control.options)
        spread = [values[k * (len(values) - 1) // max(moves - 1, 1)] for k in range(moves)]
        return [v for v in spread if v != control.value] + [control.value]
    low, high, step = control.min, control.max, getattr(control, "step", 1) or 1
    spread = [low + (high - low) * k // max(moves - 1, 1) for k in range(moves)]
    snapped = [min(high, low + round((v - low) / step) * step) for v in spread]
    return [v for v in snapped if v != control.value] + [control.value]


def time_moves(explorer, moves: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU seconds of each move; also how many moves ended in a message instead of output."""
    walls, cpus, messages = [], [], 0
    for control in explorer.controls:
        for value in targets(control, moves):
            wall, cpu = time.perf_counter(), time.process_time()
            control.value = value
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            messages += "⚠" in explorer.text()
    return walls, cpus, messages


def reference_move() -> tuple[float, float]:
    """Wall and CPU seconds to build, draw and PNG-encode one projector-sized figure from nothing (a heatmap with a
    colour bar, titled and labelled) at the explorers' dpi, whatever the package's own drawing does: the best of 5
    each."""
    data = np.random.default_rng(0).random((64, 64))

    def once() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        figure = Figure(figsize=(8.0, 3.3))
        ax = figure.add_subplot()
        ax.figure.colorbar(ax.imshow(data, cmap="Blues", aspect="auto"), ax=ax, label="probability")
        ax.set_title("reference")
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        figure.savefig(io.BytesIO(), format="png", dpi=viz.SCREEN_DPI)  # not through the package: the same work
        return time.perf_counter() - wall, time.process_time() - cpu
    walls, cpus = zip(*(once() for _ in range(5)))
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--moves", type=int, default=4, help="values per control (plus the move back)")
    parser.add_argument("--only", default="", help="comma-separated name parts, e.g. mask,cross")
    parser.add_argument("--wait-for-load", type=float, default=None, help="wait until the 1-min load is below this")
    args = parser.parse_args()
    if args.wait_for_load is not None:
        deadline = time.monotonic() + 15 * 60
        while os.getloadavg()[0] >= args.wait_for_load and time.monotonic() < deadline:
            time.sleep(10)
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    trainer = wt.Trainer(wt.TrainSettings())
    factories = widgets.every_explorer(trainer)
    if args.only:
        factories = {n: f for n, f in factories.items() if any(part in n for part in args.only.split(","))}
    reference = reference_move()
    print(f"{'explorer':24} {'moves':>5} {'median ms':>10} {'max ms':>8} {'max cpu ms':>11} {'cpu/ref':>8}  messages")
    rows = []
    for name, make in factories.items():
        explorer = make()  # the first render (imports, fonts) happens here, before a student moves anything
        walls, cpus, messages = time_moves(explorer, args.moves)
        rows.append((name, len(walls), statistics.median(walls) * 1e3, max(walls) * 1e3, max(cpus) * 1e3, messages))
        _, count, median, peak, cpu, _ = rows[-1]
        print(f"{name:24} {count:5d} {median:10.0f} {peak:8.0f} {cpu:11.0f} {cpu / (reference[1] * 1e3):8.2f}  "
              f"{messages}", flush=True)
    worst = max(rows, key=lambda row: row[3])
    print(f"reference (a projector-sized figure drawn from nothing and encoded): {reference[0] * 1e3:.0f} ms, "
          f"cpu {reference[1] * 1e3:.0f} ms")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"worst max: {worst[3]:.0f} ms ({worst[0]}), cpu {worst[4]:.0f} ms = {worst[4] / (reference[1] * 1e3):.2f}x "
          "the reference's; target <= 100 ms")


if __name__ == "__main__":
    main()

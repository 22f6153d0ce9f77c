"""Timing shared by the benchmarks: warm calls interleaved with their baseline in one process."""

from __future__ import annotations

import statistics
import time


def interleaved(funcs, reps):
    """Median CPU seconds of each callable, run in turn ``reps`` times (after one warm call each).

    Interleaving puts every candidate and its baseline under the same machine load, so the ratios
    of the medians are what the benchmarks report, not the seconds themselves.
    """
    out = {name: f() for name, f in funcs.items()}
    times = {name: [] for name in funcs}
    for _ in range(reps):
        for name, f in funcs.items():
            start = time.process_time()
            out[name] = f()
            times[name].append(time.process_time() - start)
    return {name: float(statistics.median(t)) for name, t in times.items()}, out

"""Benchmarks of log-distance window masses and margin_for (ratios in one process).

- ``window_mass`` per call at n = 1e15 (target: under 1 ms) and against direct summation
  (numpy, pairwise) at growing n, with the crossover n where the O(1) route wins;
- ``margin_for`` per call (target: under 100 ms) on the reference and on harder settings;
- the rigorous route (Arb balls: ``window_mass_bounds``) against the float route
  (``window_mass``) on the same random grid, as a ratio of times in this process.

Run: ``python bench/bench_log_distance.py``.
"""

from __future__ import annotations

import time

import numpy as np

import otprior


def per_call(func, min_time=0.2):
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time:
        func()
        count += 1
    return (time.perf_counter() - start) / count


def direct(window, n, alpha):
    w = np.arange(1, n + 1, dtype=float) ** -alpha
    return w[:window].sum() / w.sum()


def rigorous_over_float(count=300, seed=0):
    """Time of window_mass_bounds / time of window_mass over one random grid (same process)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        W = int(10 ** rng.uniform(0, 18))
        cases.append((W, W + int(10 ** rng.uniform(0, 18)), float(10 ** rng.uniform(-3, 4)), float(10 ** rng.uniform(-300, 300))))
    typical = [(64, n, a, 1.0) for n in (1024, 10**6, 10**15) for a in (0.9, 1.0, 1.05, 2.0)]
    out = {}
    for name, grid in (("random grid", cases), ("typical (W = 64, o = 1)", typical)):
        t_float = per_call(lambda grid=grid: [otprior.window_mass(W, n, a, offset=o) for W, n, a, o in grid], 0.5)
        t_ball = per_call(lambda grid=grid: [otprior.window_mass_bounds(W, n, a, offset=o) for W, n, a, o in grid], 0.5)
        out[name] = (t_float / len(grid), t_ball / len(grid))
    return out


def main():
    print("== rigorous route (Arb ball) vs float route, same grid, same process")
    for name, (tf, tb) in rigorous_over_float().items():
        print(f"{name}: float {tf * 1e6:7.1f} us, ball {tb * 1e6:7.1f} us per call, ratio {tb / tf:5.2f}x")
    print("== window_mass(64, n, 1.05): O(1) Euler-Maclaurin route vs direct summation")
    t15 = per_call(lambda: otprior.window_mass(64, 10**15, 1.05))
    print(f"n = 1e15: {t15 * 1e6:.1f} us per call")
    crossover = None
    for k in range(2, 9):
        n = 10**k
        t_ours = per_call(lambda n=n: otprior.window_mass(64, n, 1.05), 0.05)
        t_direct = per_call(lambda n=n: direct(64, n, 1.05), 0.05)
        if crossover is None and t_direct > t_ours:
            crossover = n
        print(f"n = 1e{k}: ours {t_ours * 1e6:8.1f} us, direct {t_direct * 1e6:10.1f} us, ratio {t_direct / t_ours:8.1f}x")
    print(f"crossover: direct summation is slower from n = {crossover} on")

    print("== margin_for")
    cases = [
        ((64, (512, 8192), 0.05), {}),
        ((64, (512, 8192), 0.05), {"growth": "relative"}),
        ((64, (512, 8192), 0.05), {"score_bound": 0.25}),
        ((32, (1024, 32768), 0.2), {"growth": "relative", "score_bound": 0.02}),
        ((16, (4096, 10**15), 0.001), {}),
        ((1, (2, 10**18), 0.01), {}),
    ]
    for args, kw in cases:
        t = per_call(lambda args=args, kw=kw: otprior.margin_for(*args, **kw), 0.3)
        r = otprior.margin_for(*args, **kw)
        print(f"{args} {kw}: {t * 1e3:6.1f} ms, margin {r.margin:.10f}, {r.evaluations} evaluations")


if __name__ == "__main__":
    main()

"""Benchmarks of the causal OT operator and the constant-score prior.

Every figure is a ratio against a baseline run in the same process:
- ``ot_prior(2048, 0.5)`` against the Sinkhorn fixed point of the same prefix (target >= 100x);
- ``ot_prior(10**6, 0.9)`` wall time (target: seconds);
- ``causal_ot_attention`` at n = 512 against POT solving each prefix from scratch
  (targets >= 3x at rho = 0.5, >= 10x at rho = 0.9, same answer to 1e-9);
- growth of ``causal_ot_attention`` time with n and rho.

Run: ``python bench/bench_ot.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import otprior


def timed(func, repeat=1):
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
    return best, out


def pot_prefixes(S, rho, tol):
    import ot

    n = S.shape[0]
    rows = np.zeros((n, n))
    for t in range(1, n + 1):
        M = np.where(np.tril(np.ones((t, t), dtype=bool)), -S[:t, :t], 1e3)
        plan = ot.sinkhorn_unbalanced(
            np.ones(t), np.ones(t), M, reg=1.0, reg_m=(np.inf, rho / (1 - rho)), numItermax=100_000, stopThr=tol
        )
        rows[t - 1, :t] = plan[-1]
    return rows


def main(quick=False):
    print("== ot_prior vs the Sinkhorn fixed point of the same prefix (n = 2048, rho = 0.5)")
    n = 2048
    t_fast, prior = timed(lambda: otprior.ot_prior(n, 0.5), repeat=5)
    t_sink, fp = timed(lambda: otprior.causal_ot_fixed_point(np.zeros((n, n)), 0.5, tol=1e-13))
    sink_row = fp.plan(np.zeros((n, n)))[-1, ::-1]
    print(f"ot_prior {t_fast * 1e3:.2f} ms, Sinkhorn {t_sink * 1e3:.0f} ms, ratio {t_sink / t_fast:.0f}x, "
          f"max |diff| {np.max(np.abs(prior - sink_row)):.1e}")

    print("== ot_prior(10**6, 0.9)")
    t_big, (_, info) = timed(lambda: otprior.ot_prior(10**6, 0.9, return_info=True))
    print(f"{t_big:.2f} s, {info.iterations} sweeps, certified log error {info.log_error_bound:.1e}")

    print("== causal_ot_attention vs POT per prefix from scratch (n = 512)")
    rng = np.random.default_rng(0)
    n = 256 if quick else 512
    S = rng.normal(size=(n, n))
    for rho in (0.5, 0.9):
        t_ours, A = timed(lambda rho=rho: otprior.causal_ot_attention(S, rho, tol=1e-12), repeat=2)
        t_pot, B = timed(lambda rho=rho: pot_prefixes(S, rho, 1e-12))
        print(f"rho={rho}: ours {t_ours:.3f} s, POT {t_pot:.2f} s, ratio {t_pot / t_ours:.1f}x, "
              f"max |diff| {np.max(np.abs(A - B)):.1e}")

    print("== growth of causal_ot_attention with n and rho (seconds; ratio to n/2)")
    for rho in (0.3, 0.6, 0.9):
        prev = None
        cells = []
        for n in (128, 256, 512) if quick else (128, 256, 512, 1024):
            S = rng.normal(size=(n, n))
            t, _ = timed(lambda S=S, rho=rho: otprior.causal_ot_attention(S, rho))
            cells.append(f"n={n}: {t:.3f}" + ("" if prev is None else f" ({t / prev:.1f}x)"))
            prev = t
        print(f"rho={rho}: " + ", ".join(cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
